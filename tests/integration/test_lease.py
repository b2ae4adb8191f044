"""The sidecar holds the lease ([lease NAME], routes with lease = NAME):
tidemark takes a lock in its lock service's backend, renews it, raises
the scope mark lease/NAME to its fence when it wins, and sends that
fence as the token of every tokenless write on a bound route. Against
the real binary: one sidecar on lmdb (one host), and two sidecars on a
shared mark store and a shared lock backend (Postgres for both, etcd
for both, Postgres marks with ZooKeeper leases), with kill -9 and
SIGSTOP of the holder; the explicit-token rule; health_url; the config
errors; conf/examples/lease.ini."""

import http.server
import json
import signal
import threading
import time
import uuid

import pytest

from common import REPO, slow, wait_until
from daemon import StoreUnderTest, run_check
from wire import assert_problem, build_request
from test_config import BASE, BASE_LINES, check_text, problems
from test_locks import empty_lock_store

EXAMPLES = REPO / "conf" / "examples"

# Short leases keep the takeovers quick; etcd grants whole seconds, at
# least 2.
TTL_MS = 2000
RENEW_MS = 400


def unique(prefix="d"):
    return prefix + uuid.uuid4().hex[:10]


def lease_config(lease, store=None, locks=None, ttl_ms=TTL_MS,
                 renew_ms=RENEW_MS, **lease_keys):
    """A config with [lease LEASE] (its lock named after it too), the
    route docs bound to it, and an unbound route raw/{key*} for explicit
    tokens on any resource."""
    keys = {"name": "jobs/" + lease, "ttl_ms": str(ttl_ms),
            "renew_ms": str(renew_ms)}
    keys.update(lease_keys)
    cfg = {
        "locks": dict(locks or {}),
        "lease " + lease: keys,
        "route docs": {"path": "/v1/documents/{doc}",
                       "resource": "documents/{doc}", "lease": lease},
        "route raw": {"path": "/v1/raw/{key*}", "resource": "{key}"},
        # A client may wait out a paused sidecar on an idle connection.
        "proxy": {"order_grace_ms": "0", "idle_timeout_ms": "60000",
                  "header_timeout_ms": "60000"},
    }
    if store is not None:
        cfg["store"] = store
    return cfg


def lease_state(tm, lease):
    st, _, body = tm.admin("GET", "/v1/leases/" + lease)
    assert st == 200, (st, body)
    return json.loads(body)


def wait_state(tm, lease, state, timeout=10.0):
    return wait_until(
        lambda: (lambda d: d if d["state"] == state else None)(
            lease_state(tm, lease)),
        timeout * slow(), "lease %s %s" % (lease, state))


def assert_refused(tm, upstream, doc, status, kind, **kw):
    tag = unique("t")
    r = tm.put(doc, headers=[("X-Test-Id", tag)], **kw)
    problem = assert_problem(r, status)
    assert r.header("Tidemark-Error") == kind, r
    assert upstream.find("X-Test-Id", tag) == []
    return problem


def write_ok(tm, upstream, doc):
    tag = unique("t")
    r = tm.put(doc, headers=[("X-Test-Id", tag)])
    assert r.status == 200, r
    assert len(upstream.find("X-Test-Id", tag)) == 1
    # Tidemark strips the token it sent for it, as any token.
    assert upstream.find("X-Test-Id", tag)[0].header("Fencing-Token") is None
    return r


# ---------------------------------------------------------- one host


def test_one_sidecar_on_lmdb(tidemark, upstream):
    lease = unique("app")
    tm = tidemark(config=lease_config(lease, locks={"backend": "lmdb"}))
    held = wait_state(tm, lease, "holding")
    fence = held["fence"]
    assert held["kind"] == "lease" and held["scope"] == "lease/" + lease
    assert held["holder"].endswith(":%d" % tm.proc.pid)
    # Eager: the scope mark is raised before any write.
    assert tm.mark("lease/" + lease) == fence
    d = unique()
    r = write_ok(tm, upstream, d)
    assert r.header("Fencing-High-Water") == str(fence)
    assert tm.mark("documents/" + d) == fence
    # The access line names the token tidemark sent (a line may reach
    # the log after its answer reaches the client).
    tm.wait_log("token=%d" % fence, "resource=documents/" + d)
    # An explicit token on a bound route: 400, whatever its value.
    for token in (fence, fence + 1):
        assert_refused(tm, upstream, d, 400, "token-on-carried-route",
                       token=token)
    # Reads pass; a route without lease = still takes explicit tokens.
    assert tm.request("GET", "/v1/documents/" + d).status == 200
    assert tm.request("PUT", "/v1/raw/x/" + d, token=3).status == 200
    # Listed, counted, and a part of /readyz (not required: ready = no).
    st, _, body = tm.admin("GET", "/v1/leases")
    assert st == 200 and [c["name"] for c in json.loads(body)] == [lease]
    st, _, body = tm.admin("GET", "/readyz")
    assert st == 200
    assert ("lease %s: holding fence %d (not required)" % (lease, fence)
            ) in body.decode()
    st, _, body = tm.admin("GET", "/metrics")
    assert ('tidemark_carrier_state{carrier="%s",state="holding"} 1'
            % lease) in body.decode()
    assert tm.admin("GET", "/v1/leases/nope")[0] == 404
    # A restart gives the lease back (SIGTERM) and wins it again above.
    tm.restart()
    again = wait_state(tm, lease, "holding")["fence"]
    assert again > fence
    assert tm.mark("lease/" + lease) == again
    write_ok(tm, upstream, d)
    assert tm.mark("documents/" + d) == again


def test_lock_backend_down_at_start(tidemark, upstream, port):
    """Nothing listens where [locks] points: the lease stays starting,
    said once in the log, and every write on its routes is refused 503
    lease-starting, never forwarded unfenced."""
    lease = unique("app")
    locks = {"backend": "postgres", "timeout_ms": "200",
             "dsn": "postgresql://tidemark@127.0.0.1:%d/tidemark" % port}
    tm = tidemark(config=lease_config(lease, locks=locks, ready="yes"))
    tm.wait_log("lease %s: not decided yet" % lease,
                "lock backend cannot be used")
    assert lease_state(tm, lease)["state"] == "starting"
    assert_refused(tm, upstream, unique(), 503, "lease-starting")
    st, _, body = tm.admin("GET", "/readyz")
    assert st == 503 and ("lease %s: starting" % lease) in body.decode()
    assert len(tm.log_lines("lease %s: not decided yet" % lease)) == 1


def test_reload_keeps_the_leases_read_at_start(tidemark, upstream):
    """A reload that adds a [lease] runs without it (and says so); a
    route bound to it is refused until a restart, never forwarded."""
    lease = unique("app")
    tm = tidemark(config=lease_config(lease, locks={"backend": "lmdb"}))
    wait_state(tm, lease, "holding")
    tm.ini_path.write_text(tm.ini_path.read_text() + """
[lease later]
name = jobs/later

[route later]
path = /v1/later/{doc}
resource = later/{doc}
lease = later
""")
    tm.proc.send_signal(signal.SIGHUP)
    tm.wait_log("reload: [lease] sections changed: needs a restart; "
                "keeping the ones read at start")
    # The log line and the new routes come in one turn of the loop.
    tag = unique("t")
    r = tm.request("PUT", "/v1/later/x", headers=[("X-Test-Id", tag)])
    assert_problem(r, 503)
    assert r.header("Tidemark-Error") == "lease-starting"
    assert upstream.find("X-Test-Id", tag) == []
    tm.wait_log("lease later was added by a reload")
    assert tm.admin("GET", "/v1/leases/later")[0] == 404
    write_ok(tm, upstream, unique())


def test_ready_follows_the_lease(tidemark, upstream):
    lease = unique("app")
    tm = tidemark(config=lease_config(lease, locks={"backend": "lmdb"},
                                      ready="yes"))
    wait_state(tm, lease, "holding")
    st, _, body = tm.admin("GET", "/readyz")
    assert st == 200, body


# ------------------------------------------------- two sidecars, shared

PAIRS = [("postgres", "postgres"), ("etcd", "etcd"), ("redis", "redis"),
         ("postgres", "zookeeper")]


@pytest.fixture(params=PAIRS, ids=["%s+%s" % p for p in PAIRS])
def pair(request, tidemark, store_servers):
    """start(name, **lease_keys): a sidecar on the shared mark store and
    lock backend of this parameter, bound to this test's lease."""
    store_kind, lock_kind = request.param
    store = StoreUnderTest(store_kind, store_servers(store_kind))
    _, _, locks = empty_lock_store(lock_kind, store_servers)
    if lock_kind == "zookeeper":
        # A paused holder's node lives as long as its session.
        locks["session_timeout_ms"] = "2000"
    lease = unique("app")

    def start(name, **lease_keys):
        cfg = lease_config(lease, store=store.section(), locks=locks,
                           **lease_keys)
        return tidemark(config=cfg, name=name)

    start.lease = lease
    return start


def test_one_holds_the_other_waits(pair, upstream):
    lease = pair.lease
    a = pair("a")
    fence = wait_state(a, lease, "holding")["fence"]
    b = pair("b")
    standby = wait_state(b, lease, "standby")
    assert standby["holder"] is None
    d = unique()
    write_ok(a, upstream, d)
    assert b.mark("documents/" + d) == fence
    doc = assert_refused(b, upstream, d, 503, "not-leader")
    assert "standby" in doc["detail"]
    assert b.mark("documents/" + d) == fence
    assert_refused(a, upstream, d, 400, "token-on-carried-route",
                   token=fence + 100)
    assert a.mark("documents/" + d) == fence
    assert lease_state(a, lease)["state"] == "holding"


def test_kill9_holder_standby_takes_over(pair, upstream):
    lease = pair.lease
    a = pair("a")
    fa = wait_state(a, lease, "holding")["fence"]
    b = pair("b")
    wait_state(b, lease, "standby")
    a.kill9()
    fb = wait_state(b, lease, "holding", timeout=TTL_MS / 1000 + 10)["fence"]
    assert fb > fa
    assert b.mark("lease/" + lease) == fb
    d = unique()
    write_ok(b, upstream, d)
    assert b.mark("documents/" + d) == fb


def test_stopped_holder_hands_over_at_once(pair, upstream):
    """SIGTERM gives the lease back: the standby need not wait for the
    (here 60 s) TTL."""
    lease = pair.lease
    a = pair("a", ttl_ms=60000, renew_ms=300)
    fa = wait_state(a, lease, "holding")["fence"]
    b = pair("b", ttl_ms=60000, renew_ms=300)
    wait_state(b, lease, "standby")
    assert a.stop() == 0
    fb = wait_state(b, lease, "holding", timeout=10)["fence"]
    assert fb > fa


def test_paused_holder_is_refused_by_its_own_clock(pair, upstream):
    """SIGSTOP the holder past its TTL: the other wins and raises the
    scope mark; the resumed one refuses its own writes at once (its TTL
    ran out on its clock before any timer of it ran), and tries again."""
    lease = pair.lease
    a = pair("a")
    fa = wait_state(a, lease, "holding")["fence"]
    b = pair("b")
    wait_state(b, lease, "standby")
    d = unique()
    write_ok(a, upstream, d)
    tag = unique("t")
    with a.conn() as c:
        a.proc.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            fb = wait_state(b, lease, "holding",
                            timeout=TTL_MS / 1000 + 10)["fence"]
            # The clock under test: past the TTL on a's clock too.
            wait_until(
                lambda: time.monotonic() - stopped > TTL_MS / 1000 + 0.2,
                TTL_MS / 1000 + 1, "the TTL to pass")
            # The write waits in the socket: a reads it in its first turn
            # after the pause, before any answer of its lock backend.
            c.send(build_request("PUT", "/v1/documents/" + d,
                                 [("X-Test-Id", tag)], b"late"))
        finally:
            a.proc.send_signal(signal.SIGCONT)
        r = c.read_response()
    assert_problem(r, 503)
    assert r.header("Tidemark-Error") == "lease-lost", r
    assert upstream.find("X-Test-Id", tag) == []
    assert fb > fa and b.mark("lease/" + lease) == fb
    a.wait_log("lease %s: lost" % lease, "TTL (less margin_ms) ran out")
    wait_state(a, lease, "standby")
    assert_refused(a, upstream, d, 503, "not-leader")
    write_ok(b, upstream, d)
    assert b.mark("documents/" + d) == fb


def test_scope_mark_refuses_a_write_that_slips_past(pair, upstream):
    """A write the old holder sends before its own clock says its lease
    ended (its clock ran slow, or the write was checked just before)
    meets the scope mark, which a newer holder raised when it won: 409,
    never forwarded, even on a resource the new holder has not written.
    The newer holder's win is played by raising lease/NAME through the
    unbound route, as its sidecar does when it wins."""
    scope_mark_refuses(pair("a"), pair.lease, upstream)


def scope_mark_refuses(a, lease, upstream):
    fa = wait_state(a, lease, "holding")["fence"]
    # Written once, so that a cache of the scope mark, if any, has it.
    write_ok(a, upstream, unique())
    r = a.request("PUT", "/v1/raw/lease/" + lease, token=fa + 1)
    assert r.status == 200, r
    d = unique()
    doc = assert_refused(a, upstream, d, 409, "stale-token")
    assert doc["resource"] == "lease/" + lease
    assert (doc["token"], doc["high_water"]) == (fa, fa + 1)
    assert a.mark("documents/" + d) is None


def test_scope_mark_refuses_a_write_that_slips_past_on_lmdb(tidemark,
                                                            upstream):
    """The same on one host (lmdb): there the scope mark's equal answer
    comes from the cache, with no store call; a raise above the fence
    reaches the cache too, and the write is refused."""
    lease = unique("app")
    tm = tidemark(config=lease_config(lease, locks={"backend": "lmdb"}))
    scope_mark_refuses(tm, lease, upstream)


# ------------------------------------------------------------ health_url


class Health:
    """The application's health endpoint: answers status (200 or 500),
    or hangs (status None) until stopped, or sends a 200's head a byte
    every 50 ms after its first line (status "trickle"); with endless, its 200 says a
    body of 1 GiB and sends it until the client goes (sent counts the
    bytes, gets the requests)."""

    def __init__(self):
        self.status = 200
        self.endless = False
        self.gets = 0
        self.sent = 0
        self.stopping = threading.Event()
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.gets += 1
                if outer.status is None:
                    outer.stopping.wait(30)
                    return
                if outer.status == "trickle":
                    self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                    while not outer.stopping.wait(0.05):
                        self.wfile.write(b"a")
                        self.wfile.flush()
                    return
                self.send_response(outer.status)
                if outer.endless:
                    self.close_connection = True
                    self.send_header("Content-Length", str(1 << 30))
                    self.end_headers()
                    chunk = b"x" * (1 << 16)
                    try:
                        for _ in range((1 << 30) // len(chunk)):
                            self.wfile.write(chunk)
                            outer.sent += len(chunk)
                    except OSError:
                        pass
                    return
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d/healthz" % self.srv.server_port
        self.t = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.t.start()

    def stop(self):
        self.stopping.set()
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture
def health():
    h = Health()
    yield h
    h.stop()


@pytest.mark.parametrize("sick,why", [(500, "answered 500"),
                                      (None, "did not answer within 150 ms"),
                                      ("trickle",
                                       "did not answer within 150 ms")],
                         ids=["500", "hung", "trickle"])
def test_unhealthy_app_gives_the_lease_up(tidemark, upstream, health,
                                          store_servers, sick, why):
    """With health_url, the sidecar of an application that answers
    badly, or not at all within renew_ms / 2, gives the lease up at once
    (released, not left to its TTL) and the other wins."""
    store = StoreUnderTest("postgres", store_servers("postgres"))
    _, _, locks = empty_lock_store("postgres", store_servers)
    lease = unique("app")
    cfg = lease_config(lease, store=store.section(), locks=locks,
                       ttl_ms=60000, renew_ms=300, health_url=health.url)
    a = tidemark(config=cfg, name="a")
    fa = wait_state(a, lease, "holding")["fence"]
    cfg_b = lease_config(lease, store=store.section(), locks=locks,
                         ttl_ms=60000, renew_ms=300)
    b = tidemark(config=cfg_b, name="b")
    wait_state(b, lease, "standby")
    health.status = sick
    # Far sooner than the 60 s TTL.
    fb = wait_state(b, lease, "holding", timeout=10)["fence"]
    assert fb > fa
    assert lease_state(a, lease)["state"] == "lost"
    a.wait_log("health_url " + why)
    assert_refused(a, upstream, unique(), 503, "lease-lost")


def test_writes_stop_margin_ms_before_the_lease_ends(tidemark, upstream):
    """A holder paused for longer than its TTL less margin_ms, and less
    than its TTL: the write waiting in its socket is refused by its own
    clock (503 lease-lost), though the backend still has the lease, since
    a backend that takes up to margin_ms could apply it after another
    holder's. Its next renewal lands: holding again, the same fence."""
    lease = unique("app")
    ttl_ms, margin_ms = 6000, 3000   # writes stop 3 s after a renewal
    tm = tidemark(config=lease_config(lease, locks={"backend": "lmdb"},
                                      ttl_ms=ttl_ms, renew_ms=500,
                                      margin_ms=margin_ms))
    fence = wait_state(tm, lease, "holding")["fence"]
    tm.wait_log("writes stop %d ms before its end" % margin_ms)
    d = unique()
    tag = unique("t")
    with tm.conn() as c:
        tm.proc.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            wait_until(lambda: time.monotonic() - stopped > 3.5, 5,
                       "past the TTL less margin_ms")
            c.send(build_request("PUT", "/v1/documents/" + d,
                                 [("X-Test-Id", tag)], b"late"))
        finally:
            tm.proc.send_signal(signal.SIGCONT)
        r = c.read_response()
    assert time.monotonic() - stopped < ttl_ms / 1000, \
        "the test ran past the TTL: its point is lost"
    assert_problem(r, 503)
    assert r.header("Tidemark-Error") == "lease-lost", r
    assert upstream.find("X-Test-Id", tag) == []
    tm.wait_log("lease %s: lost" % lease, "TTL (less margin_ms) ran out")
    assert wait_state(tm, lease, "holding")["fence"] == fence
    write_ok(tm, upstream, d)


def test_a_margin_that_leaves_etcd_no_room_stops_the_start(
        tidemark, store_servers):
    """etcd may end a lease up to a second early, so a margin_ms below
    ttl_ms - renew_ms can still leave no time between two renewals with
    etcd: a config error (so --check finds it too), at the margin_ms
    line, rather than a lease lost before each renewal."""
    _, _, locks = empty_lock_store("etcd", store_servers)
    lease = unique("app")
    tm = tidemark(config=lease_config(lease, locks=locks, ttl_ms=2000,
                                      renew_ms=500, margin_ms=600),
                  start=False)
    assert tm.start_fails() == 1
    want = ("lease %s: ttl_ms (2000) less etcd's second and margin_ms (600) "
            "leaves no time for renew_ms (500)" % lease)
    assert tm.log_lines(want), tm.log()
    rc, lines = run_check(tm.ini_path)
    line = next(n for n, text in
                enumerate(tm.ini_path.read_text().splitlines(), 1)
                if text.startswith("margin_ms"))
    assert rc == 1 and len(lines) == 1, lines
    assert lines[0].startswith("%s:%d: %s" % (tm.ini_path, line, want)), lines


def test_a_write_admitted_under_the_lease_is_not_forwarded_after_it(
        tidemark, upstream, health, store_servers):
    """A write admitted while its sidecar held the lease (the scope mark
    checked, its mark raised) that has not gone out when the lease ends
    is refused (503 lease-lost) and never forwarded: the next holder may
    have written since, and the backend would apply the old fence's write
    after the new one's. In the chaos run, the pod paused between the
    check and the forward did that. Here the write waits in a's start
    hold (order_grace_ms), a gives the lease up (its application's
    health_url answers 500), b wins and writes; then a's hold ends."""
    store = StoreUnderTest("postgres", store_servers("postgres"))
    _, _, locks = empty_lock_store("postgres", store_servers)
    lease = unique("app")
    hold_ms = int(6000 * slow())
    cfg_a = lease_config(lease, store=store.section(), locks=locks,
                         ttl_ms=60000, renew_ms=300, health_url=health.url)
    cfg_a["proxy"]["order_grace_ms"] = str(hold_ms)
    a = tidemark(config=cfg_a, name="a")
    fa = wait_state(a, lease, "holding")["fence"]
    b = tidemark(config=lease_config(lease, store=store.section(),
                                     locks=locks, ttl_ms=60000,
                                     renew_ms=300), name="b")
    wait_state(b, lease, "standby")
    d = unique()
    tag = unique("t")
    with a.conn() as c:
        c.send(build_request("PUT", "/v1/documents/" + d,
                             [("X-Test-Id", tag)], b"admitted"))
        wait_until(lambda: a.mark("documents/" + d) == fa, 10 * slow(),
                   "a's write admitted")
        assert upstream.find("X-Test-Id", tag) == [], \
            "the start hold ended before the lease: hold_ms too short"
        health.status = 500
        fb = wait_state(b, lease, "holding", timeout=10)["fence"]
        write_ok(b, upstream, d)
        r = c.read_response()
    assert_problem(r, 503)
    assert r.header("Tidemark-Error") == "lease-lost", r
    assert upstream.find("X-Test-Id", tag) == []
    assert fb > fa and b.mark("documents/" + d) == fb
    a.wait_log("lease %s is lost since the write was admitted" % lease,
               "not forwarded")


def test_a_body_still_coming_when_the_lease_ends_is_cut_short(
        tidemark, upstream, health):
    """The same for a write whose body is still coming when the lease
    ends: what is left of it is not forwarded, the upstream's request
    stays unfinished (no backend applies a request cut short), and the
    client gets the 503."""
    lease = unique("app")
    tm = tidemark(config=lease_config(lease, ttl_ms=60000, renew_ms=300,
                                      health_url=health.url))
    fence = wait_state(tm, lease, "holding")["fence"]
    d = unique()
    tag = unique("t")
    head = build_request("PUT", "/v1/documents/" + d, [("X-Test-Id", tag)],
                         b"admitted")
    conns = len(upstream.conns)
    with tm.conn() as c:
        c.send(head[:-len("itted")])
        wait_until(lambda: tm.mark("documents/" + d) == fence, 10 * slow(),
                   "the write admitted")
        upstream.wait_for(lambda: len(upstream.conns) > conns,
                          what="the write's upstream connection")
        health.status = 500
        wait_state(tm, lease, "lost")
        c.send(b"itted")
        r = c.read_response()
    assert_problem(r, 503)
    assert r.header("Tidemark-Error") == "lease-lost", r
    assert upstream.find("X-Test-Id", tag) == []
    tm.wait_log("lease %s is lost since the write was admitted" % lease,
                "its body cut short")


def test_a_health_body_that_never_ends_is_not_read(tidemark, upstream,
                                                    health):
    """A health endpoint that says 200 and then sends a body without end:
    the status is all a probe reads, so the lease goes on being renewed
    (a probe at every turn) and the body is not taken in."""
    lease = unique("app")
    health.endless = True
    tm = tidemark(config=lease_config(lease, renew_ms=300,
                                      health_url=health.url))
    wait_state(tm, lease, "holding")
    wait_until(lambda: health.gets >= 5, 10 * slow(), "five probes")
    assert lease_state(tm, lease)["state"] == "holding"
    # Each probe's connection is closed once its status is in: what
    # reached the sockets' buffers meanwhile, not 5 GiB.
    assert health.sent < 64 << 20, health.sent
    assert tm.log_lines("health_url") == []


# -------------------------------------------------------------- config

# Each case: what follows test_config's BASE, the line (counted from the
# first line after BASE) and the one message.
CONFIG_CASES = [
    ("[locks]\n[route r]\npath = /a/{x}\nresource = a/{x}\nlease = nope\n",
     5, "lease: no [lease] or [follow] section nope"),
    ("[lease app]\nname = jobs/a\n",
     1, "[lease app] needs a [locks] section: the lease lives in the lock "
     "service's backend (lmdb for one host; redis, postgres, etcd or "
     "zookeeper to share it)"),
    ("[locks]\n[lease app]\nname = jobs/a\nttl_ms = 1000\nrenew_ms = 1000\n",
     5, "[lease app] renew_ms (1000) must be below ttl_ms (1000): a lease "
     "renewed after its end is lost"),
    ("[locks]\n[lease app]\nname = jobs/a\nttl_ms = 1000\nrenew_ms = 300\n"
     "margin_ms = 700\n",
     6, "[lease app] margin_ms (700) must be below ttl_ms - renew_ms (700): "
     "the lease would end on this sidecar's clock before each renewal"),
    ("[locks]\n[lease app]\nname = jobs/a\nmargin_ms = 7000\n",
     4, "[lease app] margin_ms (7000) must be below ttl_ms - renew_ms (6667): "
     "the lease would end on this sidecar's clock before each renewal"),
    ("[locks]\n[lease app]\nttl_ms = 1000\n",
     2, "[lease app]: missing required key 'name'"),
    ("[locks]\n[lease app]\nname = jobs/a\nhealth_url = https://x:1/h\n",
     4, "health_url: must be http://host:port/path"),
    ("[locks]\n[lease app]\nname = jobs//a\n",
     3, "name: must be written in its canonical form: jobs/a"),
]


@pytest.mark.parametrize("extra,line,want", CONFIG_CASES)
def test_config_errors(tmp_path, extra, line, want):
    p, rc, lines = check_text(tmp_path, BASE + extra)
    assert (rc, problems(p, lines)) == (1, {BASE_LINES + line: [want]})


def test_example_configuration_passes_check():
    path = EXAMPLES / "lease.ini"
    rc, lines = run_check(path)
    assert (rc, lines) == (0, ["%s: ok" % path])
