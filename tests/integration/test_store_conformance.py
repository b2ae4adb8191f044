"""One conformance suite for every store backend: the same black-box
behaviour through tidemark on lmdb, postgres, redis, a Redis Cluster (3
masters, 3 replicas) and etcd, each network store a real server (or
cluster) started by the tests on free loopback ports."""

import itertools
import threading
import uuid

import pytest

from daemon import STORE_ROUTES, StoreUnderTest, wait_ready
from wire import assert_problem

KINDS = ["lmdb", "postgres", "redis", "redis-cluster", "etcd"]
NETWORK = ["postgres", "redis", "redis-cluster", "etcd"]

ROUTES = STORE_ROUTES


@pytest.fixture(params=KINDS)
def store(request, store_servers):
    kind = request.param
    server = None if kind == "lmdb" else store_servers(kind)
    return StoreUnderTest(kind, server)


@pytest.fixture(params=NETWORK)
def netstore(request, store_servers):
    return StoreUnderTest(request.param, store_servers(request.param))


def unique():
    """A document name no other test (or earlier run) uses."""
    return uuid.uuid4().hex[:12]


def start(tidemark, st, name=None, routes=ROUTES, **store_keys):
    cfg = dict(routes)
    cfg["store"] = st.section(**store_keys)
    # Not about ordering: no wait after the start, which a shared store
    # always has (test_ordering tests it on Redis).
    cfg["proxy"] = {"order_grace_ms": "0"}
    tm = tidemark(config=cfg, name=name)
    wait_ready(tm)
    return tm


def test_raise_equal_stale(tidemark, upstream, store):
    tm = start(tidemark, store)
    d = unique()
    assert tm.put(d, token=5).status == 200
    assert tm.mark("documents/" + d) == 5
    r = tm.put(d, token=5, headers=[("X-Test-Id", d + "-eq")])
    assert r.status == 200, r
    assert r.header("Fencing-High-Water") == "5"
    r = tm.put(d, token=4, headers=[("X-Test-Id", d + "-stale")])
    doc = assert_problem(r, 409)
    assert doc["high_water"] == 5
    assert upstream.find("X-Test-Id", d + "-stale") == []
    big = 9223372036854775807
    assert tm.put(d, token=big - 1).status == 200
    assert tm.put(d, token=big).status == 200
    assert tm.mark("documents/" + d) == big
    assert assert_problem(tm.put(d, token=big - 1), 409)["high_water"] == big


def test_concurrent_raises_on_one_resource(tidemark, upstream, store):
    tm = start(tidemark, store)
    d = unique()
    tokens = list(range(1, 41))
    results = {}

    def one(t):
        results[t] = tm.put(d, token=t, headers=[("X-Test-Id", d),
                                                 ("X-Tok", str(t))])

    threads = [threading.Thread(target=one, args=(t,)) for t in tokens]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results[40].status == 200
    for t, r in results.items():
        assert r.status in (200, 409), (t, r)
        if r.status == 409:
            assert r.json()["high_water"] > t
    # the upstream saw the accepted writes in token order
    seen = [int(u.header("X-Tok")) for u in upstream.find("X-Test-Id", d)]
    assert sorted(seen) == sorted(t for t, r in results.items()
                                  if r.status == 200)
    assert seen == sorted(seen)
    assert tm.mark("documents/" + d) == 40


def test_many_resources(tidemark, upstream, store):
    tm = start(tidemark, store, cache_entries="16")
    d = unique()
    n = 120
    errors = []

    def worker(k):
        try:
            for i in range(k, n, 8):
                r = tm.put("%s-%d" % (d, i), token=1000 + i)
                if r.status != 200:
                    errors.append((i, r))
        except Exception as e:  # noqa: BLE001 - report every failure
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []
    # more than the cache holds: the store answers for evicted marks
    for i in range(0, n, 11):
        assert tm.mark("documents/%s-%d" % (d, i)) == 1000 + i
        r = tm.put("%s-%d" % (d, i), token=999)
        assert assert_problem(r, 409)["high_water"] == 1000 + i


def test_restart_of_tidemark(tidemark, upstream, store):
    tm = start(tidemark, store)
    d = unique()
    assert tm.put(d, token=77).status == 200
    tm.restart()
    wait_ready(tm)
    assert tm.mark("documents/" + d) == 77
    assert assert_problem(tm.put(d, token=76), 409)["high_water"] == 77
    assert tm.put(d, token=78).status == 200


def test_restart_of_the_store(tidemark, upstream, store):
    tm = start(tidemark, store)
    d = unique()
    assert tm.put(d, token=31).status == 200
    if store.server is None:
        # embedded: the store restarts with the process, after kill -9
        tm.kill9()
        tm.start()
    else:
        store.server.restart()
    wait_ready(tm)
    r = tm.put(d + "x", token=1)
    assert r.status == 200, r
    assert tm.mark("documents/" + d) == 31
    assert assert_problem(tm.put(d, token=30), 409)["high_water"] == 31
    assert tm.put(d, token=32).status == 200
    assert tm.mark("documents/" + d) == 32


DAV_ROUTES = dict(ROUTES, **{
    "route dav": {"methods": "PUT DELETE", "path": "/dav/{key*}",
                  "resource": "dav/{key*}", "profile": "webdav"}})


def test_subtree_marks(tidemark, upstream, store):
    """A collection's subtree mark is kept in the store (under a name no
    request can spell): a stale DELETE of the collection is refused after
    a restart, and by another sidecar of a shared store."""
    a = start(tidemark, store, name="a", routes=DAV_ROUTES)
    d = unique()
    assert a.request("PUT", "/dav/%s/sub/m" % d, token=10).status == 200
    if store.server is None:
        a.restart()
        wait_ready(a)
        b = a
    else:
        b = start(tidemark, store, name="b", routes=DAV_ROUTES)
    r = b.request("DELETE", "/dav/" + d, token=5,
                  headers=[("X-Test-Id", d + "-del5")])
    doc = assert_problem(r, 409)
    assert (doc["resource"], doc["high_water"]) == ("dav/" + d, 10), doc
    assert upstream.find("X-Test-Id", d + "-del5") == []
    assert b.request("DELETE", "/dav/" + d, token=10).status == 200


def test_two_sidecars_one_mark(tidemark, upstream, netstore):
    a = start(tidemark, netstore, name="a")
    b = start(tidemark, netstore, name="b")
    d = unique()
    assert a.put(d, token=10).status == 200
    r = b.put(d, token=9, headers=[("X-Test-Id", d + "-b9")])
    assert assert_problem(r, 409)["high_water"] == 10
    assert upstream.find("X-Test-Id", d + "-b9") == []
    assert b.put(d, token=11).status == 200
    # a cached 10; the store says 11
    r = a.put(d, token=10)
    assert assert_problem(r, 409)["high_water"] == 11
    assert a.mark("documents/" + d) == 11


def test_two_sidecars_race(tidemark, upstream, netstore):
    """Concurrent raises through two sidecars: one token wins, and every
    refusal names a higher mark."""
    a = start(tidemark, netstore, name="a")
    b = start(tidemark, netstore, name="b")
    d = unique()
    results = {}

    def one(tm, t):
        results[t] = tm.put(d, token=t)

    ts = [threading.Thread(target=one, args=(tm, t)) for tm, t in
          zip(itertools.cycle([a, b]), range(1, 31))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert results[30].status == 200
    for t, r in results.items():
        assert r.status in (200, 409), (t, r)
        if r.status == 409:
            assert r.json()["high_water"] > t
    assert a.mark("documents/" + d) == 30
    assert b.mark("documents/" + d) == 30


def test_outage_and_recovery(tidemark, upstream, netstore):
    tm = start(tidemark, netstore, timeout_ms="1500")
    d = unique()
    assert tm.put(d, token=50).status == 200
    netstore.server.stop()
    try:
        # a higher token needs the store: 503 + Retry-After, not forwarded
        r = tm.put(d, token=51, headers=[("X-Test-Id", d + "-down")])
        doc = assert_problem(r, 503)
        assert r.header("Retry-After") is not None
        assert upstream.find("X-Test-Id", d + "-down") == []
        # a stale one is still refused from the cache
        assert assert_problem(tm.put(d, token=49), 409)["high_water"] == 50
        # efficiency routes forward, and count it
        r = tm.request("PUT", "/v1/eff/" + d, token=7,
                       headers=[("X-Test-Id", d + "-eff")])
        assert r.status == 200, r
        assert len(upstream.find("X-Test-Id", d + "-eff")) == 1
        wait_ready(tm, 503)
        st, _, body = tm.admin("GET", "/metrics")
        assert st == 200
        assert b'outcome="bypassed"} 1\n' in body, body
        assert doc["status"] == 503
    finally:
        netstore.server.start()
    wait_ready(tm, 200, timeout=15)
    assert tm.mark("documents/" + d) == 50
    assert assert_problem(tm.put(d, token=49), 409)["high_water"] == 50
    assert tm.put(d, token=51).status == 200
    assert tm.mark("documents/" + d) == 51


def test_start_while_store_down(tidemark, upstream, netstore):
    """tidemark starts with the store down, not ready, and becomes ready
    without a restart when the store comes."""
    netstore.server.stop()
    try:
        cfg = dict(ROUTES)
        cfg["store"] = netstore.section(timeout_ms="1000")
        tm = tidemark(config=cfg)
        assert tm.admin("GET", "/readyz")[0] == 503
        r = tm.put(unique(), token=1, headers=[("X-Test-Id", "startdown")])
        assert_problem(r, 503)
        assert upstream.find("X-Test-Id", "startdown") == []
    finally:
        netstore.server.start()
    wait_ready(tm, 200, timeout=15)
    assert tm.put(unique(), token=1).status == 200


def test_hung_store(tidemark, upstream, netstore):
    """A store that stops answering (SIGSTOP): raises answer 503 after
    [store] timeout_ms, nothing is forwarded, and once it answers again
    tidemark works without a restart."""
    tm = start(tidemark, netstore, timeout_ms="300")
    d = unique()
    assert tm.put(d, token=5).status == 200
    netstore.server.pause()
    try:
        for t in (6, 7):
            r = tm.put(d, token=t, headers=[("X-Test-Id", "%s-%d" % (d, t))])
            assert_problem(r, 503)
            assert upstream.find("X-Test-Id", "%s-%d" % (d, t)) == []
    finally:
        netstore.server.resume()
    wait_ready(tm, 200, timeout=15)
    r = None
    for _ in range(50):
        r = tm.put(d, token=8)
        if r.status == 200:
            break
    assert r.status == 200, r
    assert tm.mark("documents/" + d) == 8
    assert assert_problem(tm.put(d, token=7), 409)["high_water"] == 8


def test_idle_sidecar_notices_an_outage(tidemark, upstream, netstore):
    """With no traffic at all, /readyz turns 503 when the store goes and
    200 when it comes back."""
    tm = start(tidemark, netstore)
    netstore.server.stop()
    try:
        wait_ready(tm, 503)
    finally:
        netstore.server.start()
    wait_ready(tm, 200, timeout=15)
    assert tm.put(unique(), token=1).status == 200
