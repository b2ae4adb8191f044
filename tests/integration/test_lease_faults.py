"""A sidecar-held lease under the faults that matter, on real servers:
two pods (an application that sends no Fencing-Token, in a loop, and its
tidemark) share a mark store (Postgres) and take the lease on etcd
([locks] backend = etcd). A whole pod paused past the TTL, a sidecar cut
off from the lock store (a relay that stops forwarding) and a sidecar
killed with kill -9: the other pod's sidecar wins the lease and raises
the lease's scope mark, and no write the stale pod's application sends
afterwards reaches the backend (the recording upstream keeps who wrote
what, by X-Test-Id). etcd grants whole seconds of at least 2 s: the TTL
here is 2 s, renewed every 500 ms."""

import time
import uuid

import pytest

from common import slow, wait_until
from daemon import DEFAULT_ROUTE
from servers import Relay

TTL_MS = 2000
RENEW_MS = 500


@pytest.fixture
def shared(store_servers):
    """(postgres, etcd), running; etcd empty (no lease held)."""
    pg = store_servers("postgres")
    etcd = store_servers("etcd")
    etcd.wipe()
    return pg, etcd


def pod_config(pg, endpoints, lease, timeout_ms=1000):
    return {
        "store": {"type": "postgres", "dsn": pg.dsn, "path": None},
        "locks": {"backend": "etcd", "endpoints": endpoints,
                  "timeout_ms": str(timeout_ms)},
        "lease app": {"name": lease, "ttl_ms": str(TTL_MS),
                      "renew_ms": str(RENEW_MS)},
        "route docs": dict(DEFAULT_ROUTE, lease="app"),
    }


def two_pods(pods, shared, a_endpoints=None, a_timeout_ms=1000):
    """Pod A holding the lease, pod B standby, both applications writing
    the same document; (a, b, lease name, doc path, A's fence)."""
    pg, etcd = shared
    tag = uuid.uuid4().hex[:12]
    lease = "jobs/leader-" + tag
    path = "/v1/documents/d-" + tag
    a = pods("A", pod_config(pg, a_endpoints or etcd.endpoints, lease,
                             a_timeout_ms), path=path, interval_ms=100)
    fa = a.wait_state("holding", 10.0)["fence"]
    b = pods("B", pod_config(pg, etcd.endpoints, lease), path=path,
             interval_ms=100)
    b.wait_state("standby", 10.0)
    a.start_app()
    b.start_app()
    a.wait_sent(lambda c: c["status"] == 200, 10.0, "a write accepted")
    b.wait_sent(lambda c: c["status"] == 503 and c["error"] == "not-leader",
                10.0, "a write refused (not-leader)")
    return a, b, lease, path, fa


def scope_mark(pod, lease):
    """The carrier's scope mark, in the shared store; the carrier names
    it (lease/SECTION: one per section name, not per lock name)."""
    scope = pod.lease()["scope"]
    assert scope == "lease/app", scope
    return pod.tm.mark(scope)


def applied(upstream, pod):
    """The upstream's requests from pod's application, in arrival order."""
    with upstream.cond:
        return [r for r in upstream.requests
                if (r.header("X-Test-Id") or "").startswith(pod.name + "-")]


def first_seq(upstream, pod):
    return applied(upstream, pod)[0].seq


def pause_between_calls(pod):
    """SIGSTOP the whole pod while its application sleeps between two
    calls (no write of it in flight in the sidecar): the moment, or None
    to try again."""
    calls = pod.sent()
    if not calls or time.time() - calls[-1]["t1"] > 0.05:
        return None
    pod.pause()
    return time.time()


def assert_refused_after(pod, upstream, since, count=5):
    """The application's next count calls begun after since are refused
    (409 from the scope mark or the mark, 503 from the carrier) and none
    of its calls begun after since reached the upstream."""
    wait_until(lambda: len([c for c in pod.sent() if c["t0"] > since])
               >= count, 10.0 * slow(), "%d calls of %s" % (count, pod.name))
    later = [c for c in pod.sent() if c["t0"] > since]
    assert all(c["status"] in (409, 503) for c in later), later
    tags = {c["tag"] for c in later}
    reached = [r for r in applied(upstream, pod)
               if r.header("X-Test-Id") in tags]
    assert reached == [], reached
    return later


def test_whole_pod_paused_past_the_ttl(pods, shared, upstream):
    """Pod A (application and sidecar) is paused past the TTL: B's
    sidecar wins with a higher fence and raises the lease's scope mark
    before any write, B's application writes; A resumed: every write its
    application sends is refused, none reaches the backend, and A's
    sidecar goes back to standby."""
    a, b, lease, _, fa = two_pods(pods, shared)
    wait_until(lambda: pause_between_calls(a), 5.0 * slow(),
               "A between two calls")
    paused = time.monotonic()
    try:
        doc = b.wait_state("holding", (TTL_MS / 1000.0 + 5.0))
        # Not before A's lease ended in etcd: its last renewal came at
        # most one renewal period before the pause.
        took = time.monotonic() - paused
        assert took >= (TTL_MS - RENEW_MS) / 1000.0 - 0.1, took
        assert doc["fence"] > fa, (doc, fa)
        assert scope_mark(b, lease) >= doc["fence"]
        b.wait_sent(lambda c: c["status"] == 200, 10.0, "a write accepted")
        b_first = first_seq(upstream, b)
    finally:
        a.resume()
    resumed = time.time()
    later = assert_refused_after(a, upstream, resumed)
    assert all(r.seq < b_first for r in applied(upstream, a))
    assert {c["error"] for c in later} <= {"lease-lost", "not-leader",
                                           "stale-token"}, later
    a.wait_state("standby", 10.0)
    assert b.lease()["state"] == "holding"


def test_sidecar_cut_from_the_lock_store(pods, shared, upstream):
    """A's sidecar reaches etcd through a relay that stops forwarding
    (its renewals wait, timeout_ms 10 s: only its own clock can end the
    lease). Its application's writes are refused (lease-lost) within the
    TTL of the cut, on its own monotonic clock, before etcd lets B win;
    B wins above A's fence and raises the scope mark above it, so A's
    fence is refused by the mark store anyway; after the relay forwards
    again A stays a refused standby."""
    pg, etcd = shared
    relay = Relay(etcd.port)
    try:
        a, b, lease, _, fa = two_pods(pods, shared, relay.url, 10000)
        relay.cut()
        cut = time.time()
        lost = a.wait_sent(lambda c: c["error"] == "lease-lost",
                           TTL_MS / 1000.0 + 3.0, "a write refused "
                           "(lease-lost)")
        assert lost["status"] == 503
        assert lost["t1"] - cut <= (TTL_MS / 1000.0 + 0.5) * slow(), lost
        assert a.lease()["state"] == "lost"
        doc = b.wait_state("holding", TTL_MS / 1000.0 + 5.0)
        assert doc["fence"] > fa
        assert scope_mark(b, lease) >= doc["fence"] > fa
        assert scope_mark(a, lease) > fa      # the same shared mark
        b.wait_sent(lambda c: c["status"] == 200, 10.0, "a write accepted")
        b_first = first_seq(upstream, b)
        assert all(r.seq < b_first for r in applied(upstream, a))
        assert all(c["status"] in (409, 503) for c in a.sent()
                   if c["t0"] > lost["t1"])
        relay.resume()
        a.wait_state("standby", 15.0)
        assert_refused_after(a, upstream, time.time())
    finally:
        relay.stop()


def test_active_sidecar_killed(pods, shared, upstream):
    """kill -9 of A's sidecar: B's sidecar takes over once A's lease has
    ended in etcd (not before the TTL less one renewal period), and its
    application's writes go through; A's sidecar started again is a
    standby whose writes are refused."""
    a, b, lease, _, fa = two_pods(pods, shared)
    a.tm.kill9()
    killed = time.monotonic()
    doc = wait_until(lambda: (lambda d: d if d["state"] == "holding"
                              else None)(b.lease()),
                     (TTL_MS / 1000.0 + 5.0) * slow(), "B holding")
    took = time.monotonic() - killed
    assert took >= (TTL_MS - RENEW_MS) / 1000.0 - 0.1, took
    assert doc["fence"] > fa
    assert scope_mark(b, lease) >= doc["fence"]
    b.wait_sent(lambda c: c["status"] == 200, 10.0, "a write accepted")
    a.tm.start()
    a.wait_state("standby", 10.0)
    assert_refused_after(a, upstream, time.time())
    assert b.lease()["state"] == "holding"
