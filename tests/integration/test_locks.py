"""The lock service on the control port, against the real binary: the API
of doc/design.md's table, bad input, the seed's failure cases (the paused client,
a slow release after expiry), waiting in arrival order, eager fencing,
signed tokens, many clients on one hot lock, and kill -9. Every test that
starts a tidemark runs once per lock backend (lmdb, redis, a Redis Cluster
of 3 masters and 3 replicas, postgres, etcd, zookeeper, on real servers
from servers.py), each test on an empty lease store.

Fences: lmdb, redis (one server or a cluster) and postgres count per
name (1, 2, 3, ...; COUNTING); etcd's fence is the lock key's create
revision and ZooKeeper's the lock node's czxid, counters of the whole
cluster that only grow, across every name. tm.fences() checks
whichever holds. etcd grants whole seconds of at least 2 s, and keeps the
TTL it granted on extend."""

import itertools
import json
import os
import re
import threading
import time

import pytest

from common import free_port, slow, wait_until
from daemon import run_check
from lockapi import (Admin, Resp, assert_lease, lock_api, wait_gone,
                     wait_locks_ready)
from upstream import assert_holders_in_turn
from wire import assert_problem

KEY = "0123456789abcdef0123456789abcdef"

BACKENDS = ["lmdb", "redis", "redis-cluster", "postgres", "etcd",
            "zookeeper"]
# Backends whose fence is a per-name counter (1, 2, 3 ...).
COUNTING = {"lmdb", "redis", "redis-cluster", "postgres"}


ZK_ROOTS = itertools.count(int(time.time()))


@pytest.fixture(params=BACKENDS)
def lock_backend(request, store_servers):
    """(kind, server or None, [locks] keys) with an empty lease store."""
    return empty_lock_store(request.param, store_servers)


def empty_lock_store(kind, store_servers):
    """(kind, server or None, [locks] keys) for a lock backend of that
    kind with an empty lease store."""
    if kind == "lmdb":
        return kind, None, {}
    srv = store_servers(kind)
    if kind == "zookeeper":
        # each test under a root of its own: an empty lease store
        root = "/tidemark-test/%d" % next(ZK_ROOTS)
        return kind, srv, {"backend": "zookeeper", "hosts": srv.hosts,
                           "root": root}
    if kind == "etcd":
        srv.wipe()
        return kind, srv, {"backend": "etcd", "endpoints": srv.endpoints}
    if kind == "redis":
        assert srv.command("FLUSHALL") == b"+OK\r\n"
        return kind, srv, {"backend": "redis", "url": srv.url}
    if kind == "redis-cluster":
        assert srv.command("FLUSHALL") == b"+OK\r\n"
        return kind, srv, {"backend": "redis", "url": srv.url,
                           "cluster": "yes"}
    srv.sql("DROP TABLE IF EXISTS tidemark_leases")
    return kind, srv, {"backend": "postgres", "dsn": srv.dsn}


@pytest.fixture
def tidemark(tidemark, lock_backend):  # noqa: F811 - wraps conftest's
    """conftest's factory, with [locks] on this test's backend."""
    keys = lock_backend[2]

    def make(config=None, **kw):
        config = dict(config or {})
        locks = dict(keys)
        locks.update(config.get("locks", {}))
        config["locks"] = locks
        tm = tidemark(config=config, **kw)
        tm.lock_kind = lock_backend[0]
        tm.fences = lambda: Fences(lock_backend[0] in COUNTING)
        if keys and kw.get("start", True):
            wait_locks_ready(tm)
        return tm
    return make


class Fences:
    """The fences one lock name gets, in order: on a counter 1, 2, 3
    ... (or one above a mark: floor), on a consensus store only growing
    (a zxid is cluster-wide, and the deletes between count too)."""

    def __init__(self, counting):
        self.counting = counting
        self.last = 0

    def next(self, r, name, floor=None, **kw):
        """r is a lease of name with the next fence; its doc."""
        doc = assert_lease(r, name, **kw)
        f = doc["fence"]
        if self.counting:
            want = self.last + 1 if floor is None else floor
            assert f == want, (f, want)
        else:
            assert f > self.last and f >= (floor or 0), (f, self.last, floor)
        self.last = f
        return doc


def test_acquire_extend_release(tidemark):
    tm = tidemark()
    api = lock_api(tm)
    fa = tm.fences()
    doc = fa.next(api.acquire("documents/a", ttl_ms=5000), "documents/a",
                  ttl_ms=5000)
    f = doc["fence"]
    t = doc["token"]
    assert t == str(f)
    busy = assert_problem(api.acquire("documents/a"), 423)
    assert busy["resource"] == "documents/a"
    assert busy["fence"] == f and 0 < busy["ttl_ms"] <= 5000
    r = api.get("documents/a")
    assert r.status == 200
    got = r.json()
    assert got["name"] == "documents/a" and got["fence"] == f
    assert 0 < got["ttl_ms"] <= 5000
    # etcd keeps the TTL it granted
    assert_lease(api.extend("documents/a", t, ttl_ms=20000),
                 "documents/a", fence=f,
                 ttl_ms=5000 if tm.lock_kind == "etcd" else 20000, code=200)
    # not the caller's: 409, nothing deleted
    assert_problem(api.release("documents/a", str(f + 1)), 409)
    assert_problem(api.extend("documents/a", str(f + 6)), 409)
    assert api.get("documents/a").json()["fence"] == f
    r = api.release("documents/a", t)
    assert r.status == 204 and r.body == b""
    assert_problem(api.get("documents/a"), 404)
    assert_problem(api.release("documents/a", t), 409)
    assert_problem(api.extend("documents/a", t), 409)
    # the counter outlives the release
    fa.next(api.acquire("documents/a"), "documents/a")
    # other names count on their own
    tm.fences().next(api.acquire("documents/b"), "documents/b")


def test_names_with_slashes_and_escapes(tidemark):
    tm = tidemark()
    api = lock_api(tm)
    name = "files/x y/z%.bin"
    doc = assert_lease(api.acquire(name), name)
    assert api.get(name).json()["name"] == name
    assert api.get("files/x y").status == 404
    # a name that is another's parent is a lock of its own
    parent = assert_lease(api.acquire("files/x y"), "files/x y")
    assert api.release(name, doc["token"]).status == 204
    assert api.release("files/x y", parent["token"]).status == 204


def test_bad_input_takes_and_releases_nothing(tidemark):
    tm = tidemark(config={"locks": {"max_ttl_ms": "60000",
                                    "max_wait_ms": "1000"}})
    api = lock_api(tm)
    for q in ({}, {"ttl_ms": ""}, {"ttl_ms": "abc"}, {"ttl_ms": "-1"},
              {"ttl_ms": "0"}, {"ttl_ms": "1.5"}, {"ttl_ms": "60001"},
              {"ttl_ms": "99999999999999999999"},
              {"ttl_ms": "100", "wait_ms": "x"},
              {"ttl_ms": "100", "wait_ms": "1001"}):
        doc = assert_problem(api.call("POST", "documents/a", **q), 400)
        assert doc["resource"] == "documents/a"
    assert api.get("documents/a").status == 404
    a = assert_lease(api.acquire("documents/a", ttl_ms=60000), "documents/a")
    for q in ({}, {"token": ""}, {"token": "x"}, {"token": "0"},
              {"token": "-1"}, {"token": "1.5"}, {"token": "1 "}):
        assert_problem(api.call("DELETE", "documents/a", **q), 400)
        assert_problem(api.call("PATCH", "documents/a", ttl_ms=100, **q),
                       400)
    t = a["token"]
    for q in ({"token": t}, {"token": t, "ttl_ms": "x"},
              {"token": t, "ttl_ms": "60001"}):
        assert_problem(api.call("PATCH", "documents/a", **q), 400)
    r = api.get("documents/a")
    assert r.status == 200 and r.json()["fence"] == a["fence"]
    assert r.json()["ttl_ms"] > 50000  # not shortened by a refused extend
    # empty, NUL, not UTF-8 (a stray byte, an overlong NUL, a surrogate)
    for path in ("/v1/locks/", "/v1/locks/a%00b", "/v1/locks/a%FFb",
                 "/v1/locks/%C0%80", "/v1/locks/%ED%A0%80"):
        st, headers, body = tm.admin("POST", path + "?ttl_ms=10")
        assert st == 400, path
        assert headers["content-type"] == "application/problem+json"
        assert "UTF-8" in json.loads(body)["detail"]
    # UTF-8 is a name like any other, on every backend
    name = "files/\u00e9t\u00e9"
    assert_lease(api.acquire(name), name)
    assert api.get(name).json()["name"] == name
    st, _, _ = tm.admin("PUT", "/v1/locks/documents/a?ttl_ms=10")
    assert st == 400
    assert api.get("documents/a").json()["fence"] == a["fence"]


def test_paused_client_is_refused_everywhere(tidemark, upstream):
    """The seed's paused client: A's lease expires while it sleeps, B
    takes the lock; A's extend, release and write all fail, B's write
    goes through."""
    tm = tidemark()
    api = lock_api(tm)
    a = assert_lease(api.acquire("documents/d", ttl_ms=150), "documents/d")
    assert tm.put("d", token=a["token"],
                  headers=[("X-Test-Id", "a1")]).status == 200
    wait_gone(api, "documents/d")        # A is "paused" past its TTL
    b = assert_lease(api.acquire("documents/d", ttl_ms=10000),
                     "documents/d")
    assert b["fence"] > a["fence"]
    # eager fencing: refused before B writes anything
    r = tm.put("d", token=a["token"], headers=[("X-Test-Id", "a2")])
    doc = assert_problem(r, 409)
    assert doc["high_water"] == b["fence"]
    assert_problem(api.extend("documents/d", a["token"]), 409)
    assert_problem(api.release("documents/d", a["token"]), 409)
    assert api.get("documents/d").json()["fence"] == b["fence"]
    assert tm.put("d", token=b["token"],
                  headers=[("X-Test-Id", "b1")]).status == 200
    assert upstream.find("X-Test-Id", "a2") == []
    assert len(upstream.find("X-Test-Id", "b1")) == 1


def test_slow_release_after_expiry_deletes_nothing(tidemark):
    tm = tidemark()
    api = lock_api(tm)
    a = assert_lease(api.acquire("jobs/r", ttl_ms=100), "jobs/r")
    wait_gone(api, "jobs/r")
    # expired and not taken: still not A's to release
    assert_problem(api.release("jobs/r", a["token"]), 409)
    b = assert_lease(api.acquire("jobs/r", ttl_ms=10000), "jobs/r")
    assert_problem(api.release("jobs/r", a["token"]), 409)
    r = api.get("jobs/r")
    assert r.status == 200 and r.json()["fence"] == b["fence"]
    assert api.release("jobs/r", b["token"]).status == 204


# The lines come from the lock service, the same over every backend.
@pytest.mark.parametrize("lock_backend", ["lmdb"], indirect=True)
def test_lease_life_is_logged(tidemark):
    """Acquire, extend, release, expiry and loss: one line each, with
    the lock's name (escaped), the holder's address and the fence."""
    tm = tidemark()
    api = lock_api(tm)
    name = 'files/x y"z'
    doc = assert_lease(api.acquire(name, ttl_ms=5000), name)
    f, t = doc["fence"], doc["token"]
    assert_lease(api.extend(name, t, ttl_ms=8000), name, fence=f, code=200)
    assert api.release(name, t).status == 204
    short = assert_lease(api.acquire("jobs/s", ttl_ms=300), "jobs/s")
    tm.wait_log("locks: expired: name=jobs/s ")
    assert_problem(api.extend("jobs/s", short["token"]), 409)
    tm.wait_log("locks: lost: name=jobs/s ")
    holder = r"holder=127\.0\.0\.1:\d+"
    want = [(r'acquired: name="files/x y\\"z" %s fence=%d ttl_ms=5000$'
             % (holder, f)),
            (r'extended: name="files/x y\\"z" %s fence=%d ttl_ms=8000$'
             % (holder, f)),
            r'released: name="files/x y\\"z" %s fence=%d ttl_ms=0$'
            % (holder, f),
            r"acquired: name=jobs/s %s fence=%d ttl_ms=300$"
            % (holder, short["fence"]),
            r"expired: name=jobs/s %s fence=%d ttl_ms=0$"
            % (holder, short["fence"]),
            r"lost: name=jobs/s %s fence=%d ttl_ms=0$"
            % (holder, short["fence"])]
    lines = tm.log_lines("locks: ")
    lines = [ln for ln in lines if re.search(
        r"locks: (acquired|extended|released|expired|lost): ", ln)]
    assert len(lines) == len(want), lines
    for ln, w in zip(lines, want):
        assert re.search("locks: " + w, ln), (ln, w)


def test_eager_off_leaves_the_mark(tidemark, upstream):
    tm = tidemark(config={"locks": {"eager": "no"}})
    api = lock_api(tm)
    a = assert_lease(api.acquire("documents/e", ttl_ms=100), "documents/e")
    assert tm.mark("documents/e") is None
    assert tm.put("e", token=a["token"]).status == 200
    wait_gone(api, "documents/e")
    b = assert_lease(api.acquire("documents/e"), "documents/e")
    assert tm.mark("documents/e") == a["fence"]
    # without eager fencing the old holder is refused only after the new
    # holder's first write
    assert tm.put("e", token=b["token"]).status == 200
    assert_problem(tm.put("e", token=a["token"]), 409)


def test_eager_raises_the_mark(tidemark):
    tm = tidemark()
    api = lock_api(tm)
    fm = tm.fences()
    for _ in range(3):
        doc = fm.next(api.acquire("documents/m"), "documents/m")
        assert tm.mark("documents/m") == doc["fence"]
        assert api.release("documents/m", doc["token"]).status == 204


def test_eager_acquire_gets_above_a_mark_issued_elsewhere(tidemark,
                                                          upstream):
    """Tokens were issued elsewhere (or the counter's store was reset):
    the mark is above the lock's counter. The acquire must still be
    granted, with a fence above the mark, and the counter follows. etcd's
    revision and ZooKeeper's zxid cannot be chosen: there an acquire below
    the mark is refused (503, the key or node deleted), never answered
    with a fence at or below the mark."""
    tm = tidemark()
    api = lock_api(tm)
    if tm.lock_kind not in COUNTING:
        big = 1 << 62                # above any revision or zxid here
        assert tm.put("x", token=big).status == 200
        r = api.acquire("documents/x")
        doc = assert_problem(r, 503)
        assert r.header("retry-after") is not None
        assert doc["resource"] == "documents/x"
        tm.wait_log("issued elsewhere")
        assert api.get("documents/x").status == 404
        assert tm.mark("documents/x") == big
        return
    assert tm.put("x", token=1000).status == 200
    assert tm.mark("documents/x") == 1000
    a = assert_lease(api.acquire("documents/x"), "documents/x", fence=1001)
    assert tm.mark("documents/x") == 1001
    assert tm.put("x", token=a["token"]).status == 200
    assert_problem(tm.put("x", token=1000), 409)
    assert api.get("documents/x").json()["fence"] == 1001
    assert api.release("documents/x", a["token"]).status == 204
    assert_lease(api.acquire("documents/x"), "documents/x", fence=1002)
    # below the mark only once: a counter ahead needs no floor
    assert tm.mark("documents/x") == 1002


@pytest.mark.parametrize("eager", ["yes", "no"])
@pytest.mark.parametrize("ahead", [1, 0])
def test_acquire_is_strictly_above_the_mark(tidemark, upstream,
                                            lock_backend, eager, ahead):
    """The lock's counter is one behind the mark (ahead = 1: a restored
    lease file, a lost Redis increment, a token issued elsewhere) or
    equal to it (ahead = 0). The next acquire, eager or not, gets a
    fence above the mark, also with the mark cache empty (a restart),
    so the holder of the mark's token and the new holder never both
    write with 200."""
    tm = tidemark(config={"locks": {"eager": eager}})
    api = lock_api(tm)
    fs = tm.fences()
    for _ in range(2):
        doc = fs.next(api.acquire("documents/s"), "documents/s")
        assert api.release("documents/s", doc["token"]).status == 204
    old = fs.last + ahead            # the counter is at fs.last
    assert tm.put("s", token=old, headers=[("X-Test-Id", "old1")]).status \
        == 200
    assert tm.mark("documents/s") == old
    api.close()
    tm.restart()                     # the mark cache starts empty
    if lock_backend[1] is not None:
        wait_locks_ready(tm)
    api = lock_api(tm)
    new = fs.next(api.acquire("documents/s"), "documents/s", floor=old + 1)
    if eager == "yes":
        assert tm.mark("documents/s") == new["fence"]
        assert_problem(tm.put("s", token=old,
                              headers=[("X-Test-Id", "old2")]), 409)
        assert tm.put("s", token=new["token"]).status == 200
    else:
        assert tm.mark("documents/s") == old
        assert tm.put("s", token=new["token"]).status == 200
        assert_problem(tm.put("s", token=old,
                              headers=[("X-Test-Id", "old2")]), 409)
    assert upstream.find("X-Test-Id", "old2") == []
    # the counter followed the floor: the next fence is one above it
    assert api.release("documents/s", new["token"]).status == 204
    fs.next(api.acquire("documents/s"), "documents/s")


@pytest.mark.parametrize("eager", ["yes", "no"])
def test_acquire_without_the_mark_store_is_503(tidemark, eager):
    """A fence must be above the mark: while the mark store cannot be
    read, no lease is handed out (and none is left behind)."""
    tm = tidemark(config={
        "locks": {"eager": eager},
        "store": {"type": "redis", "path": None,
                  "url": "redis://127.0.0.1:%d" % free_port()}})
    api = lock_api(tm)
    r = api.acquire("documents/n")
    doc = assert_problem(r, 503)
    assert "mark store" in doc["detail"], doc
    assert api.get("documents/n").status == 404


# lmdb has no server: kill -9 of tidemark covers it
@pytest.mark.parametrize("lock_backend",
                         [b for b in BACKENDS if b != "lmdb"], indirect=True)
def test_backend_restart_keeps_the_fence(tidemark, lock_backend):
    """The lease store's server restarts: fences handed out before are
    not handed out again, and a live lease is still live."""
    kind, srv, _ = lock_backend
    tm = tidemark()
    api = lock_api(tm)
    fr = tm.fences()
    for _ in range(3):
        doc = fr.next(api.acquire("r", ttl_ms=60000), "r")
        assert api.release("r", doc["token"]).status == 204
    held = tm.fences().next(api.acquire("h", ttl_ms=60000), "h")
    api.close()
    srv.restart()
    wait_locks_ready(tm, timeout=20.0)
    api = lock_api(tm)
    fr.next(api.acquire("r"), "r")
    assert_problem(api.acquire("h"), 423)
    assert api.get("h").json()["fence"] == held["fence"]
    assert api.release("h", held["token"]).status == 204


# ------------------------------------------------------------- waiting


def start_waiter(tm, name, results, key, **query):
    def run():
        api = lock_api(tm)
        try:
            r = api.acquire(name, **query)
            results[key] = (r, time.monotonic())
        except OSError as e:  # the connection closed: kept for the test
            results[key] = (e, time.monotonic())
        finally:
            api.close()
    t = threading.Thread(target=run)
    t.start()
    return t


def test_waiters_in_arrival_order_woken_by_release(tidemark):
    tm = tidemark(config={"proxy": {"log_level": "debug"}})
    api = lock_api(tm)
    fq = tm.fences()
    a = fq.next(api.acquire("q", ttl_ms=60000), "q")
    results = {}
    threads = []
    for i, key in enumerate(("b", "c", "d")):
        threads.append(start_waiter(tm, "q", results, key, ttl_ms=60000,
                                    wait_ms=20000))
        tm.wait_log("locks: waiting: name=q", count=i + 1)
    # a caller without wait_ms does not jump the queue
    assert_problem(api.acquire("q"), 423)
    assert results == {}
    t0 = time.monotonic()
    assert api.release("q", a["token"]).status == 204
    for key in ("b", "c", "d"):
        wait_until(lambda: key in results, 10 * slow(), "waiter " + key)
        r, when = results[key]
        doc = fq.next(r, "q")        # in arrival order
        if key != "d":
            assert api.release("q", doc["token"]).status == 204
    # woken by the release, not by polling a 60 s lease
    assert results["b"][1] - t0 < 5
    for t in threads:
        t.join()


def test_waiter_woken_by_expiry_and_deadline(tidemark):
    tm = tidemark()
    api = lock_api(tm)
    fw = tm.fences()
    fw.next(api.acquire("w", ttl_ms=300), "w")
    results = {}
    t0 = time.monotonic()
    start_waiter(tm, "w", results, "b", ttl_ms=5000,
                 wait_ms=10000).join(15 * slow())
    r, when = results["b"]
    fw.next(r, "w")
    assert when - t0 < 5 * slow()
    # a deadline before the lease ends: 423
    start_waiter(tm, "w", results, "c", ttl_ms=5000,
                 wait_ms=150).join(15 * slow())
    doc = assert_problem(results["c"][0], 423)
    assert doc["resource"] == "w"
    assert api.get("w").json()["fence"] == fw.last


def test_waiter_that_leaves_loses_nothing(tidemark):
    """A waiter whose client hangs up is dropped; the next one gets the
    lock when it comes free."""
    tm = tidemark(config={"proxy": {"log_level": "debug"}})
    api = lock_api(tm)
    a = tm.fences().next(api.acquire("l", ttl_ms=60000), "l")
    gone = Admin(tm)
    gone.c.request("POST", "/v1/locks/l?ttl_ms=60000&wait_ms=20000")
    tm.wait_log("locks: waiting: name=l")
    gone.close()
    results = {}
    t = start_waiter(tm, "l", results, "b", ttl_ms=60000, wait_ms=20000)
    tm.wait_log("locks: waiting: name=l", count=2)
    assert api.release("l", a["token"]).status == 204
    t.join(15 * slow())
    doc = assert_lease(results["b"][0], "l")
    # the leaver may have burnt a fence, never held the lock after
    if tm.lock_kind in COUNTING:
        assert doc["fence"] in (2, 3)
    else:
        assert doc["fence"] > a["fence"]
    r = api.get("l")
    assert r.json()["fence"] == doc["fence"]


def lock_waiting(tm):
    """tidemark_lock_waiting, read from /metrics."""
    _, _, metrics = tm.admin("GET", "/metrics")
    return int(re.search(rb"\ntidemark_lock_waiting (\d+)\n",
                         metrics).group(1))


def test_waiter_that_leaves_the_middle_keeps_the_order(tidemark):
    """b, c and d wait in turn; c hangs up while it is neither first nor
    last: b gets the lock at a's release, d at b's, and the service still
    finds the queue among many others (one waiter on each of 50 other
    names). tidemark_lock_waiting counts them as they come and go (etcd
    keeps its waiters itself: 0 there)."""
    tm = tidemark(config={"proxy": {"log_level": "debug"}})
    api = lock_api(tm)
    fm = tm.fences()
    others = []
    for i in range(50):
        name = "other-%d" % i
        assert_lease(api.acquire(name, ttl_ms=60000), name)
        other = Admin(tm)
        other.c.request("POST", "/v1/locks/%s?ttl_ms=60000&wait_ms=20000"
                        % name)
        others.append(other)
    tm.wait_log("locks: waiting: name=other-", count=50)
    a = fm.next(api.acquire("m", ttl_ms=60000), "m")
    results = {}
    b = start_waiter(tm, "m", results, "b", ttl_ms=60000, wait_ms=20000)
    tm.wait_log("locks: waiting: name=m", count=1)
    gone = Admin(tm)
    gone.c.request("POST", "/v1/locks/m?ttl_ms=60000&wait_ms=20000")
    tm.wait_log("locks: waiting: name=m", count=2)
    d = start_waiter(tm, "m", results, "d", ttl_ms=60000, wait_ms=20000)
    tm.wait_log("locks: waiting: name=m", count=3)

    def waiting(n):
        want = 0 if tm.lock_kind == "etcd" else n
        wait_until(lambda: lock_waiting(tm) == want, 5 * slow(),
                   "tidemark_lock_waiting %d" % want)
    waiting(53)
    gone.close()
    waiting(52)
    # the leaver is gone: a call that does not wait is still refused
    # for the two left, not given the lock
    assert_problem(api.acquire("m"), 423)
    assert api.release("m", a["token"]).status == 204
    b.join(15 * slow())
    doc_b = assert_lease(results["b"][0], "m")
    assert "d" not in results
    waiting(51)
    assert api.release("m", doc_b["token"]).status == 204
    d.join(15 * slow())
    doc_d = assert_lease(results["d"][0], "m")
    assert doc_d["fence"] > doc_b["fence"] > a["fence"]
    assert api.get("m").json()["fence"] == doc_d["fence"]
    waiting(50)
    for other in others:
        other.close()
    waiting(0)


# ------------------------------------------------------ signed tokens


def key_config(tmp_path, mode=0o600, text=KEY + "\n"):
    path = tmp_path / "token.key"
    path.write_text(text)
    os.chmod(path, mode)
    return str(path)


def test_signed_tokens_on_hmac_routes(tidemark, upstream, tmp_path):
    key = key_config(tmp_path)
    tm = tidemark(config={
        "tokens": {"key_file": key},
        "route docs": {"path": "/v1/documents/{doc}",
                       "resource": "documents/{doc}", "verify": "hmac"},
    })
    api = lock_api(tm)
    a = tm.fences().next(api.acquire("documents/s"), "documents/s")
    fence, sig = a["token"].split(".")
    assert fence == str(a["fence"]) and len(sig) == 43
    other = assert_lease(api.acquire("documents/o"), "documents/o")
    assert tm.put("s", token=a["token"]).status == 200
    assert tm.mark("documents/s") == a["fence"]
    forged = "%d.%s" % (a["fence"] + 4, sig)
    flipped = a["token"][:-1] + ("A" if a["token"][-1] != "A" else "B")
    for bad in (fence, "9000", forged, flipped, other["token"]):
        doc = assert_problem(tm.put("s", token=bad,
                                    headers=[("X-Test-Id", bad)]), 403)
        assert doc["resource"] == "documents/s"
        assert upstream.find("X-Test-Id", bad) == []
    assert tm.mark("documents/s") == a["fence"]
    _, _, metrics = tm.admin("GET", "/metrics")
    assert b'outcome="forbidden"} 5\n' in metrics
    assert_problem(tm.put("s", token="1.x"), 400)
    # the lock calls want the signed token too
    assert_problem(api.extend("documents/s", fence), 403)
    assert_problem(api.release("documents/s", other["token"]), 403)
    assert api.release("documents/s", a["token"]).status == 204


def test_signed_tokens_on_plain_routes(tidemark, upstream, tmp_path):
    """verify = none takes a bare fence, and a signed token only with its
    signature right: a signature is never ignored."""
    tm = tidemark(config={"tokens": {"key_file": key_config(tmp_path)}})
    api = lock_api(tm)
    a = assert_lease(api.acquire("documents/p"), "documents/p")
    assert "." in a["token"]
    assert tm.put("p", token=a["token"]).status == 200
    assert tm.put("p", token=str(a["fence"])).status == 200
    other = assert_lease(api.acquire("documents/q"), "documents/q")
    forged = "%d.%s" % (a["fence"] + 9, JUNK_SIG)
    for bad in (other["token"], forged):
        doc = assert_problem(tm.put("p", token=bad,
                                    headers=[("X-Test-Id", bad)]), 403)
        assert doc["resource"] == "documents/p"
        assert upstream.find("X-Test-Id", bad) == []
    assert tm.mark("documents/p") == a["fence"]


# A signature part of the right shape (43 base64url characters) that no
# key made.
JUNK_SIG = "A" * 43


def test_signed_token_without_a_key_is_refused(tidemark, upstream):
    """With no [tokens] key_file nothing can check a signature, so a token
    with one is refused (400), never read as its bare fence: a stranger's
    "<fence>.<junk>" neither extends nor releases the holder's lease, nor
    writes, nor raises a mark."""
    tm = tidemark()
    api = lock_api(tm)
    f = assert_lease(api.acquire("documents/j", ttl_ms=8000),
                     "documents/j")["fence"]
    junk = "%d.%s" % (f, JUNK_SIG)
    for r in (api.extend("documents/j", junk, ttl_ms=60000),
              api.release("documents/j", junk)):
        assert "key_file" in assert_problem(r, 400)["detail"]
    # The lease is untouched: still the holder's, who can extend it.
    assert api.get("documents/j").json()["fence"] == f
    assert api.extend("documents/j", str(f), ttl_ms=8000).status == 200
    # A fenced write with one, above the mark: refused before the
    # backend, the mark where the acquire put it.
    high = "%d.%s" % (f + 5, JUNK_SIG)
    r = tm.put("j", token=high, headers=[("X-Test-Id", "junk")])
    assert "key_file" in assert_problem(r, 400)["detail"]
    assert upstream.find("X-Test-Id", "junk") == []
    assert tm.mark("documents/j") == f
    assert api.release("documents/j", str(f)).status == 204


def test_a_token_cut_by_a_nul_or_given_twice_is_refused(tidemark):
    """A lock call reads each parameter once, as a C string: a NUL (%00)
    would cut "<fence>%00.<junk>" to the bare fence, and of two tokens
    the first would be read. Both are refused (400) and the lease stays."""
    tm = tidemark()
    api = lock_api(tm)
    f = assert_lease(api.acquire("documents/n", ttl_ms=8000),
                     "documents/n")["fence"]
    for q, why in (("token=%d%%00.%s" % (f, JUNK_SIG), "NUL"),
                   ("token=%d%%00" % f, "NUL"),
                   ("token=%d&token=%d" % (f, f + 1), "repeated"),
                   ("token=%d&token=%d" % (f + 1, f), "repeated")):
        for method, extra in (("PATCH", "ttl_ms=60000&"), ("DELETE", "")):
            api.c.request(method, "/v1/locks/documents/n?" + extra + q)
            r = api.c.getresponse()
            resp = Resp(r.status, dict((k.lower(), v) for k, v in
                                       r.getheaders()), r.read())
            assert why in assert_problem(resp, 400)["detail"], (q, resp)
    assert api.get("documents/n").json()["fence"] == f
    assert api.release("documents/n", str(f)).status == 204


def test_check_refuses_bad_key_setups(tmp_path, upstream):
    def check(extra):
        ini = tmp_path / "c.ini"
        ini.write_text(
            "[upstream default]\nurl = %s\n[route docs]\n"
            "path = /v1/documents/{doc}\nresource = documents/{doc}\n"
            "verify = hmac\n%s" % (upstream.url, extra))
        return run_check(ini)
    rc, lines = check("")
    assert rc == 1
    assert any("verify = hmac needs [tokens] key_file" in ln
               for ln in lines), lines
    for mode, text, msg in ((0o644, KEY, "readable or writable by others"),
                            (0o600, "", "is empty"),
                            (0o600, "short", "16 to 4096 bytes")):
        key = key_config(tmp_path, mode, text)
        rc, lines = check("[tokens]\nkey_file = %s\n" % key)
        assert rc == 1 and any(msg in ln for ln in lines), lines
    rc, lines = check("[tokens]\nkey_file = %s\n"
                      % (tmp_path / "missing.key"))
    assert rc == 1 and any("cannot open the key file" in ln
                           for ln in lines), lines
    key = key_config(tmp_path)
    rc, lines = check("[tokens]\nkey_file = %s\n" % key)
    assert rc == 0, lines


# ------------------------------------------------------- hot and crash


@pytest.mark.parametrize("wait_ms", [20000, 0])
def test_hot_lock_never_two_live_holders(tidemark, upstream, wait_ms):
    """32 clients take, write under and give back one lock, waiting in
    line or spinning on 423. Fences are unique, each holder's lease
    starts after the previous holder began its release, every write under
    the lock is accepted, and the upstream sees the writes in fence
    order."""
    tm = tidemark()
    rounds = 6 if wait_ms else 3
    grants = []          # (fence, granted_at, release_started_at)
    lock = threading.Lock()
    errors = []

    def client(n):
        api = lock_api(tm)
        try:
            done = 0
            while done < rounds:
                r = api.acquire("documents/hot", ttl_ms=30000,
                                wait_ms=wait_ms)
                got = time.monotonic()
                if r.status == 423:
                    continue
                doc = assert_lease(r, "documents/hot")
                w = tm.put("hot", token=doc["token"],
                           body=b"%d" % doc["fence"],
                           headers=[("X-Test-Id", "f%d" % doc["fence"])])
                if w.status != 200:
                    errors.append(("write", doc["fence"], w.status))
                start = time.monotonic()
                with lock:
                    grants.append((doc["fence"], got, start))
                rel = api.release("documents/hot", doc["token"])
                if rel.status != 204:
                    errors.append(("release", doc["fence"], rel.status))
                done += 1
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))
        finally:
            api.close()

    threads = [threading.Thread(target=client, args=(n,))
               for n in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120 * slow())
    assert errors == [], [ln for ln in tm.log().splitlines() if "locks" in ln][-20:]
    fences = assert_holders_in_turn(grants, upstream)
    if tm.lock_kind in COUNTING:
        assert fences == list(range(1, 32 * rounds + 1))
    else:                        # one per round
        assert len(fences) == 32 * rounds


def test_kill9_between_acquire_and_release_loses_no_fence(tidemark):
    tm = tidemark()
    api = lock_api(tm)
    fk = tm.fences()
    for _ in range(5):
        doc = fk.next(api.acquire("k", ttl_ms=60000), "k")
        assert api.release("k", doc["token"]).status == 204
    a = fk.next(api.acquire("k", ttl_ms=60000), "k")
    fk2 = tm.fences()
    fk2.next(api.acquire("k2", ttl_ms=1), "k2")
    api.close()
    tm.kill9()
    tm.start()
    wait_locks_ready(tm)
    api = lock_api(tm)
    # the lease survived, and so did the mark it raised
    r = api.get("k")
    assert r.status == 200 and r.json()["fence"] == a["fence"]
    assert tm.mark("k") == a["fence"]
    assert_problem(api.acquire("k"), 423)
    assert api.release("k", a["token"]).status == 204
    fk.next(api.acquire("k"), "k")
    if tm.lock_kind not in COUNTING:
        # ZooKeeper: the dead process's session may still hold k2's
        # node, until the session times out; etcd's shortest lease is
        # 2 s
        wait_until(lambda: api.get("k2").status == 404,
                   30 * slow(), "the dead session's nodes to go")
    fk2.next(api.acquire("k2"), "k2")


# a failed fsync of the lmdb lease file
@pytest.mark.parametrize("lock_backend", ["lmdb"], indirect=True)
def test_failed_sync_is_503_and_hands_out_no_fence(tidemark, failsync,
                                                   tmp_path, lock_backend):
    shim, var = failsync
    trigger = tmp_path / "fail-now"
    tm = tidemark(env={"LD_PRELOAD": str(shim), var: str(trigger)})
    api = lock_api(tm)
    a = assert_lease(api.acquire("f", ttl_ms=60000), "f", fence=1)
    trigger.write_text("")
    r = api.acquire("g")
    doc = assert_problem(r, 503)
    assert doc["resource"] == "g"
    assert r.header("retry-after") is not None
    assert_problem(api.release("f", a["token"]), 503)
    assert_problem(api.extend("f", a["token"]), 503)
    assert_problem(api.get("f"), 503)
    # failed for good, until a restart
    trigger.unlink()
    assert_problem(api.acquire("h"), 503)
    api.close()
    tm.env.pop("LD_PRELOAD")
    tm.env.pop(var)
    tm.restart()
    api = lock_api(tm)
    assert api.get("f").json()["fence"] == 1
    assert api.release("f", a["token"]).status == 204
    assert_lease(api.acquire("f"), "f", fence=2)
    # g's fence was never handed out; whichever it is now, it is fresh
    assert_lease(api.acquire("g"), "g")


def test_stop_with_waiters_and_calls_in_flight(tidemark):
    """SIGTERM while callers wait and others are in flight: tidemark exits
    0 (the teardown also looks for sanitizer reports)."""
    tm = tidemark(config={"proxy": {"log_level": "debug"}})
    api = lock_api(tm)
    tm.fences().next(api.acquire("s", ttl_ms=60000), "s")
    results = {}
    threads = [start_waiter(tm, "s", results, i, ttl_ms=1000,
                            wait_ms=30000) for i in range(3)]
    tm.wait_log("locks: waiting: name=s", count=3)
    hammer = [start_waiter(tm, "t%d" % i, results, "t%d" % i, ttl_ms=1000)
              for i in range(8)]
    assert tm.stop() == 0
    for t in threads + hammer:
        t.join(15 * slow())
    for i in range(3):
        r = results.get(i, (None,))[0]
        assert not isinstance(r, Resp) or r.status != 201, r


def test_check_wants_the_lock_backends_key(tmp_path, upstream):
    def check(locks):
        ini = tmp_path / "c.ini"
        ini.write_text("[upstream default]\nurl = %s\n[locks]\n%s"
                       % (upstream.url, locks))
        return run_check(ini)
    for backend, key in (("redis", "url"), ("postgres", "dsn"),
                         ("etcd", "endpoints"), ("zookeeper", "hosts")):
        rc, lines = check("backend = %s\n" % backend)
        assert rc == 1
        assert any("[locks] backend %s needs %s" % (backend, key) in ln
                   for ln in lines), lines
    rc, lines = check("backend = redis\nurl = redis://127.0.0.1:6379/2\n")
    assert rc == 0, lines
    rc, lines = check("backend = postgres\ndsn = host=db port\n")
    assert rc == 1 and any("not a libpq connection string" in ln
                           for ln in lines), lines
    rc, lines = check("backend = etcd\nendpoints = ftp://e:1\n")
    assert rc == 1 and any("http://host:port" in ln for ln in lines), lines
    rc, lines = check("backend = etcd\nendpoints = http://e:1, http://f:2\n")
    assert rc == 0, lines
