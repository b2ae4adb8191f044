"""Ordering after the check: per resource, a write with a higher token
reaches the upstream only after every in-flight write with a lower token
has finished; after a 504 the resource stays closed to higher tokens for
the grace period after the timed-out connection closed; after a start,
fenced writes wait the grace period (the previous process's writes may
still be in flight); sidecars sharing a store order only their own."""

import random
import re
import socket
import struct
import threading
import time
import uuid

import pytest

from common import slow, wait_until
from daemon import wait_ready
from wire import assert_problem


class Async:
    """A request on its own thread."""

    def __init__(self, fn, *a, **kw):
        self.result = None
        self.error = None
        self.done_at = None
        self.t = threading.Thread(target=self._run, args=(fn, a, kw))
        self.t.start()

    def _run(self, fn, a, kw):
        try:
            self.result = fn(*a, **kw)
        except Exception as e:  # reported by get()
            self.error = e
        self.done_at = time.monotonic()

    def get(self, timeout=20):
        self.t.join(timeout * slow())
        assert not self.t.is_alive(), "request still running"
        if self.error:
            raise self.error
        return self.result


def put(tm, doc, token, tid, extra=()):
    return tm.put(doc, token=token, timeout=30,
                  headers=[("X-Test-Id", tid), ("X-Test-Token", str(token))]
                  + list(extra))


def not_arrived(upstream, tid, window=0.6):
    """The request tid does not reach the upstream within window."""
    with pytest.raises(AssertionError):
        upstream.wait_for(lambda: upstream.find("X-Test-Id", tid),
                          timeout=window / slow())


def test_higher_token_waits_for_lower_in_flight(tidemark, upstream):
    tm = tidemark()
    a = Async(put, tm, "o", 7, "t7", [("X-Test-Hold", "h7")])
    upstream.wait_request("X-Test-Id", "t7")
    b = Async(put, tm, "o", 8, "t8")
    not_arrived(upstream, "t8")
    assert b.result is None and b.error is None
    upstream.release("h7")
    assert a.get().status == 200
    r8 = b.get()
    assert r8.status == 200, r8
    assert r8.header("Fencing-High-Water") == "8"
    s7 = upstream.find("X-Test-Id", "t7")[0]
    s8 = upstream.find("X-Test-Id", "t8")[0]
    assert s8.arrival > s7.answered
    assert tm.mark("documents/o") == 8


def test_other_resources_are_not_held_up(tidemark, upstream):
    tm = tidemark()
    a = Async(put, tm, "x", 7, "x7", [("X-Test-Hold", "hx")])
    upstream.wait_request("X-Test-Id", "x7")
    r = put(tm, "y", 8, "y8")
    assert r.status == 200, r
    assert a.result is None
    # reads of the same path are not writes: not held either
    r = tm.request("GET", "/v1/documents/x", headers=[("X-Test-Id", "rd")])
    assert r.status == 200
    upstream.release("hx")
    assert a.get().status == 200


def test_equal_tokens_are_not_serialized(tidemark, upstream):
    tm = tidemark()
    a = Async(put, tm, "eq", 7, "a7", [("X-Test-Hold", "ha")])
    upstream.wait_request("X-Test-Id", "a7")
    b = Async(put, tm, "eq", 7, "b7", [("X-Test-Hold", "hb")])
    # the second write with the same token reaches the upstream while the
    # first is still held
    upstream.wait_request("X-Test-Id", "b7", timeout=5)
    upstream.release("hb")
    assert b.get().status == 200
    assert a.result is None
    upstream.release("ha")
    assert a.get().status == 200


def test_lower_token_after_higher_accepted_is_stale(tidemark, upstream):
    tm = tidemark()
    a = Async(put, tm, "lo", 8, "l8", [("X-Test-Hold", "hl")])
    upstream.wait_request("X-Test-Id", "l8")
    r = put(tm, "lo", 7, "l7")
    doc = assert_problem(r, 409)
    assert doc["high_water"] == 8
    upstream.release("hl")
    assert a.get().status == 200
    assert upstream.find("X-Test-Id", "l7") == []


def test_chain_of_waiting_writes_in_token_order(tidemark, upstream):
    tm = tidemark()
    first = Async(put, tm, "ch", 10, "c10", [("X-Test-Hold", "c")])
    upstream.wait_request("X-Test-Id", "c10")
    later = [Async(put, tm, "ch", t, "c%d" % t, [("X-Test-Delay-Ms", "50")])
             for t in (13, 11, 12)]
    not_arrived(upstream, "c11", 0.4)
    upstream.release("c")
    assert first.get().status == 200
    res = {t: a.get() for t, a in zip((13, 11, 12), later)}
    forwarded = [r for r in upstream.requests
                 if r.target == "/v1/documents/ch"]
    tokens = [int(r.header("X-Test-Token")) for r in forwarded]
    assert tokens == sorted(tokens), tokens
    assert tokens[0] == 10
    # 13 was accepted (it is the highest), whatever happened to 11/12
    assert res[13].status == 200
    for t in (11, 12):
        assert res[t].status in (200, 409), res[t]
    for lo in forwarded:
        for hi in forwarded:
            if int(lo.header("X-Test-Token")) < int(hi.header("X-Test-Token")):
                assert hi.arrival > lo.answered, (lo, hi)


def test_concurrent_writers_reach_upstream_in_token_order(tidemark,
                                                          upstream):
    tm = tidemark()
    lock = threading.Lock()
    counter = [0]
    rnd = random.Random(7)
    delays = [rnd.randint(0, 30) for _ in range(400)]
    statuses = []

    def writer():
        for _ in range(12):
            with lock:
                counter[0] += 1
                tok = counter[0]
            r = put(tm, "conc", tok, "w%d" % tok,
                    [("X-Test-Delay-Ms", str(delays[tok]))])
            statuses.append(r.status)

    ts = [threading.Thread(target=writer) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60 * slow())
    assert set(statuses) <= {200, 409}, statuses
    assert statuses.count(200) >= 1
    fwd = sorted((r for r in upstream.requests
                  if r.target == "/v1/documents/conc"),
                 key=lambda r: r.arrival)
    toks = [int(r.header("X-Test-Token")) for r in fwd]
    assert toks == sorted(toks), toks
    assert len(fwd) == statuses.count(200)
    for i, lo in enumerate(fwd):
        for hi in fwd[i + 1:]:
            if int(hi.header("X-Test-Token")) > int(lo.header("X-Test-Token")):
                assert hi.arrival > lo.answered, (lo, hi)
    assert tm.mark("documents/conc") == max(toks)


def order_waiting(tm):
    """tidemark_order_waiting, read from /metrics."""
    _, _, metrics = tm.admin("GET", "/metrics")
    return int(re.search(rb"\ntidemark_order_waiting (\d+)\n",
                         metrics).group(1))


def test_lock_handed_on_at_every_write_goes_in_token_order(tidemark,
                                                           upstream):
    """The seed's hot lock handed on at every write: each write carries
    the next token, so each waits at the gate for every lower one in
    flight. A hundred queued behind one the backend holds (one from a
    client that resets its connection while it waits; a close that only
    ends what the client sends is a half-close, answered) reach the
    backend one at a time,
    in token order, each after the one before was answered; the one whose
    client left is never forwarded; tidemark_order_waiting counts them."""
    tm = tidemark()
    first = Async(put, tm, "hot", 10, "h10", [("X-Test-Hold", "hot")])
    upstream.wait_request("X-Test-Id", "h10")
    later = {}
    leaver = None
    for t in range(11, 111):
        if t == 60:
            leaver = socket.create_connection(("127.0.0.1", tm.port))
            leaver.sendall(b"PUT /v1/documents/hot HTTP/1.1\r\n"
                           b"Host: tidemark\r\nFencing-Token: 60\r\n"
                           b"X-Test-Token: 60\r\nContent-Length: 4\r\n"
                           b"\r\ndata")
        else:
            later[t] = Async(put, tm, "hot", t, "h%d" % t)
        # Accepted (its raise is durable) before the next is sent, so
        # that every one is accepted and waits.
        wait_until(lambda: tm.mark("documents/hot") == t, 10 * slow(),
                   "mark %d" % t)
    wait_until(lambda: order_waiting(tm) == 100, 5 * slow(),
               "100 writes waiting")
    leaver.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                      struct.pack("ii", 1, 0))
    leaver.close()  # a reset
    wait_until(lambda: order_waiting(tm) == 99, 5 * slow(),
               "99 writes waiting")
    assert [r.header("X-Test-Id") for r in upstream.requests
            if r.target == "/v1/documents/hot"] == ["h10"]
    upstream.release("hot")
    assert first.get().status == 200
    assert {t: a.get().status for t, a in later.items()} == \
        {t: 200 for t in later}
    assert order_waiting(tm) == 0
    fwd = sorted((r for r in upstream.requests
                  if r.target == "/v1/documents/hot"),
                 key=lambda r: r.arrival)
    assert [int(r.header("X-Test-Token")) for r in fwd] == \
        [10] + [t for t in range(11, 111) if t != 60]
    for lo, hi in zip(fwd, fwd[1:]):
        assert hi.arrival > lo.answered, (lo, hi)


def test_after_504_higher_token_waits_for_close_and_grace(tidemark,
                                                          upstream):
    grace = 1.0
    tm = tidemark(config={"proxy": {"order_grace_ms": str(int(grace * 1e3))},
                          "upstream default": {"timeout_ms": "400"}})
    r7 = put(tm, "g", 7, "g7", [("X-Test-Hold", "g7")])
    assert_problem(r7, 504)
    got504 = time.monotonic()
    s7 = upstream.find("X-Test-Id", "g7")[0]
    b = Async(put, tm, "g", 8, "g8")
    upstream.wait_for(lambda: upstream.conns[s7.conn_id].closed,
                      what="the timed-out connection to be closed")
    closed_at = upstream.conns[s7.conn_id].closed
    r8 = b.get(timeout=20)
    assert r8.status == 200, r8
    s8 = upstream.find("X-Test-Id", "g8")[0]
    assert s8.arrival >= closed_at + grace - 0.1, \
        "token 8 arrived %.3fs after the close, grace %.1fs" % (
            s8.arrival - closed_at, grace)
    assert s8.arrival >= got504 + grace - 0.15
    # and it is not held much longer than that
    assert s8.arrival - closed_at < grace + 3 * slow()


def test_after_504_other_resource_not_closed(tidemark, upstream):
    tm = tidemark(config={"proxy": {"order_grace_ms": "3000"},
                          "upstream default": {"timeout_ms": "400"}})
    assert_problem(put(tm, "g1", 7, "g1", [("X-Test-Hold", "g1")]), 504)
    t0 = time.monotonic()
    r = put(tm, "g2", 8, "g2")
    assert r.status == 200
    assert time.monotonic() - t0 < 2


def test_after_504_grace_applies_to_that_resource_only_once(tidemark,
                                                            upstream):
    # After the grace the resource is open again: a second write with an
    # even higher token is not delayed.
    tm = tidemark(config={"proxy": {"order_grace_ms": "500"},
                          "upstream default": {"timeout_ms": "400"}})
    assert_problem(put(tm, "g3", 7, "g37", [("X-Test-Hold", "g37")]), 504)
    assert put(tm, "g3", 8, "g38").status == 200
    t0 = time.monotonic()
    assert put(tm, "g3", 9, "g39").status == 200
    assert time.monotonic() - t0 < 0.4 * slow()


def test_after_502_with_closed_connection_no_grace(tidemark, upstream):
    # A write that failed and whose connection is closed has finished:
    # only a 504 holds the resource for the grace period.
    tm = tidemark(config={"proxy": {"order_grace_ms": "5000"}})
    r = put(tm, "d", 7, "d7", [("X-Test-Drop", "1")])
    assert_problem(r, 502)
    t0 = time.monotonic()
    assert put(tm, "d", 8, "d8").status == 200
    assert time.monotonic() - t0 < 2 * slow()


@pytest.mark.parametrize("kind", ["lmdb", "redis"])
def test_after_kill9_fenced_writes_wait_for_the_previous_process(
        tidemark, upstream, store_servers, kind):
    """kill -9 while the write of token 1 is still at the backend, which
    goes on with it after tidemark's connection closed and applies it
    late. The new process knows nothing of it: it holds fenced writes for
    order_grace_ms after its start, so token 2 does not overtake it; the
    backend applies 1, then 2."""
    grace = 1.5
    cfg = {"proxy": {"order_grace_ms": str(int(grace * 1e3))}}
    doc = "k-" + uuid.uuid4().hex
    if kind == "redis":
        cfg["store"] = {"type": "redis", "url": store_servers("redis").url,
                        "path": None}
    tm = tidemark(config=cfg)
    wait_ready(tm)
    t1 = Async(put, tm, doc, 1, "k1",
               [("X-Test-Hold", "k1"), ("X-Test-Apply-Late", "1")])
    s1 = upstream.wait_request("X-Test-Id", "k1")
    if kind == "lmdb":
        # a store that held no mark at start had nothing in flight
        assert tm.log_lines("holding fenced writes") == []
    else:
        # a shared store cannot tell: every start waits
        assert len(tm.log_lines("holding fenced writes")) == 1
    tm.kill9()
    t1.t.join(10 * slow())
    upstream.wait_for(lambda: upstream.conns[s1.conn_id].closed,
                      what="the killed process's connection to close")
    assert s1.applied is None
    before_start = time.monotonic()
    tm.start()
    tm.wait_log("holding fenced writes for 1500 ms after start",
                count=1 if kind == "lmdb" else 2)
    wait_ready(tm)
    st, _, body = tm.admin("GET", "/readyz")
    assert st == 200 and b"order: fenced writes held after start" in body, \
        body
    t2 = Async(put, tm, doc, 2, "k2")
    not_arrived(upstream, "k2", 0.3)
    upstream.release("k1")          # the backend applies token 1, late
    upstream.wait_for(lambda: s1.applied, what="token 1 to be applied")
    r2 = t2.get()
    assert r2.status == 200, r2
    s2 = upstream.find("X-Test-Id", "k2")[0]
    applied = sorted((s1, s2), key=lambda s: s.applied)
    assert [s.header("X-Test-Token") for s in applied] == ["1", "2"]
    assert s2.arrival >= before_start + grace, \
        "token 2 arrived %.3fs after the restart, grace %.1fs" % (
            s2.arrival - before_start, grace)
    assert s2.arrival - before_start < grace + 3 * slow()
    # the hold ends once: later writes go at once
    t0 = time.monotonic()
    assert put(tm, doc, 3, "k3").status == 200
    assert put(tm, "o-" + doc, 1, "o1").status == 200
    assert time.monotonic() - t0 < 0.5 * slow()
    st, _, body = tm.admin("GET", "/readyz")
    assert st == 200 and b"order:" not in body, body


def test_two_sidecars_order_only_their_own_writes(tidemark, upstream,
                                                  store_servers):
    """What doc/guide.md says of several sidecars on one store: the mark is
    shared (a token below it is refused through either), but each orders
    only its own writes. A slow write with token 7 through A is applied
    after token 8 through B; both are answered 200."""
    srv = store_servers("redis")
    # order_grace_ms = 0: no wait after the start on a shared store.
    cfg = {"store": {"type": "redis", "url": srv.url, "path": None},
           "proxy": {"order_grace_ms": "0"}}
    a = tidemark(config=cfg)
    b = tidemark(config=cfg)
    wait_ready(a)
    wait_ready(b)
    doc = "two-" + uuid.uuid4().hex
    t7 = Async(put, a, doc, 7, "s7", [("X-Test-Hold", "s7")])
    s7 = upstream.wait_request("X-Test-Id", "s7")
    assert put(b, doc, 8, "s8").status == 200
    upstream.release("s7")
    assert t7.get().status == 200
    s8 = upstream.find("X-Test-Id", "s8")[0]
    applied = sorted((s7, s8), key=lambda s: s.applied)
    assert [s.header("X-Test-Token") for s in applied] == ["8", "7"]
    # the mark is shared: 7 is now refused through either sidecar
    assert_problem(put(a, doc, 7, "s7b"), 409)
    assert_problem(put(b, doc, 7, "s7c"), 409)
