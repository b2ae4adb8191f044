"""Client and upstream timeouts, upstream failures (502/504), and that a
write is never sent twice."""

import socket
import threading
import time

import pytest

from common import free_port, slow, wait_until
from wire import Closed, assert_problem, build_request, read_response


def closed_within(c, lo, hi):
    """The connection closes, with no answer (there is no request to
    answer), no sooner than lo and no later than hi seconds from now."""
    t0 = time.monotonic()
    assert c.closed(timeout=hi * slow()), \
        "still open after %.1fs, or bytes came: %r" % (hi, bytes(c.reader.buf))
    took = time.monotonic() - t0
    assert took >= lo, "closed after %.2fs, sooner than %.2fs" % (took, lo)
    return took


def _timeout_answer(c, hi):
    """A 408 raced the last byte the slowloris test trickled."""
    if not c.reader.buf:
        return False
    r = read_response(c.reader)
    assert r.status == 408, r
    return c.closed(timeout=hi * slow())


# ---------------------------------------------------------------- client


def test_header_timeout_slowloris(tidemark, upstream):
    tm = tidemark(config={"proxy": {"header_timeout_ms": "800",
                                    "idle_timeout_ms": "60000"}})
    c = tm.conn()
    try:
        head = b"GET /slow HTTP/1.1\r\nHost: a\r\n" + b"X-A: b\r\n" * 200
        t0 = time.monotonic()
        closed = False
        for i in range(len(head)):  # one byte every 50 ms, never done
            try:
                c.send(head[i:i + 1])
            except OSError:
                closed = True
                break
            if c.closed(timeout=0.05):
                closed = True
                break
            if time.monotonic() - t0 > 6 * slow():
                break
        took = time.monotonic() - t0
        if not closed:
            # the last byte might have raced the close
            closed = c.closed(timeout=0.5) or _timeout_answer(c, 0.5)
        assert closed, "a trickled head kept the connection %.1fs" % took
        assert 0.6 <= took <= 3.5 * slow(), took
    finally:
        c.close()
    assert upstream.count() == 0


def test_silent_connection_is_closed(tidemark, upstream):
    tm = tidemark(config={"proxy": {"header_timeout_ms": "600",
                                    "idle_timeout_ms": "800"}})
    with tm.conn() as c:
        closed_within(c, 0.4, 4)


def open_connections(tm):
    """The tidemark_connections gauge: client connections open."""
    _, _, body = tm.admin("GET", "/metrics")
    for line in body.decode().splitlines():
        if line.startswith("tidemark_connections "):
            return int(line.split()[1])
    raise AssertionError("no tidemark_connections in /metrics")


def test_silent_connection_gets_header_timeout_not_idle_timeout(tidemark,
                                                                upstream):
    # A connection that never sends a byte is not a keep-alive one: it
    # is closed after header_timeout_ms, silently (there is no request
    # to answer), long before idle_timeout_ms.
    tm = tidemark(config={"proxy": {"header_timeout_ms": "500",
                                    "idle_timeout_ms": "60000"}})
    with tm.conn() as c:
        t0 = time.monotonic()
        assert c.closed(timeout=5 * slow()), "still open"
        assert time.monotonic() - t0 >= 0.3
        assert not c.reader.buf


def test_partial_head_gets_408(tidemark, upstream):
    tm = tidemark(config={"proxy": {"header_timeout_ms": "500",
                                    "idle_timeout_ms": "60000"}})
    with tm.conn() as c:
        c.send(b"GET /partial HTTP/1.1\r\nHost: a\r\n")
        assert_problem(c.read_response(timeout=5 * slow()), 408)
        assert c.closed(timeout=2 * slow())
    assert upstream.count() == 0


def test_at_max_connections_idle_ones_make_room(tidemark, upstream):
    # Long timeouts: only reclaiming idle connections can let a new
    # client in. Oldest idle first: silent ones, then keep-alive ones.
    tm = tidemark(config={"proxy": {"max_connections": "10",
                                    "header_timeout_ms": "60000",
                                    "idle_timeout_ms": "60000"}})
    silent = [tm.conn() for _ in range(5)]
    kept = [tm.conn() for _ in range(5)]
    new = []
    try:
        for c in kept:
            assert c.request("GET", "/ka").status == 200
        wait_until(lambda: open_connections(tm) == 10, 5 * slow(),
                   "10 connections open")
        for i in range(7):
            # Each new connection stays open, keeping the limit reached.
            c = tm.conn()
            new.append(c)
            r = c.request("GET", "/new%d" % i)
            assert r.status == 200, r
            # It took the place of the oldest idle one.
            old = silent[i] if i < 5 else kept[i - 5]
            assert old.closed(timeout=2 * slow()), i
        assert open_connections(tm) == 10
        # The keep-alive connections not reclaimed still work.
        for c in kept[2:]:
            assert c.request("GET", "/still").status == 200
    finally:
        for c in silent + kept + new:
            c.close()


def test_at_max_connections_busy_ones_are_freed_by_header_timeout(
        tidemark, upstream):
    # Connections in the middle of a head cannot be reclaimed: a new
    # connection is refused until header_timeout_ms frees them (408).
    tm = tidemark(config={"proxy": {"max_connections": "5",
                                    "header_timeout_ms": "2000",
                                    "idle_timeout_ms": "60000"}})
    busy = [tm.conn() for _ in range(5)]
    try:
        for c in busy:
            c.send(b"GET /slow HTTP/1.1\r\nHost: a\r\n")
        wait_until(lambda: open_connections(tm) == 5, 5 * slow(),
                   "5 connections open")
        with tm.conn() as c:
            assert c.closed(timeout=1 * slow()), "a sixth connection"
        t0 = time.monotonic()

        def served():
            try:
                with tm.conn() as c:
                    return c.request("GET", "/after").status == 200
            except (OSError, Closed):
                return False

        wait_until(served, 6 * slow(), "a client served")
        assert time.monotonic() - t0 <= 4 * slow()
        for c in busy:
            assert_problem(c.read_response(timeout=5 * slow()), 408)
    finally:
        for c in busy:
            c.close()


def test_idle_timeout_after_a_request(tidemark, upstream):
    tm = tidemark(config={"proxy": {"idle_timeout_ms": "800",
                                    "header_timeout_ms": "10000"}})
    with tm.conn() as c:
        assert c.request("GET", "/one").status == 200
        closed_within(c, 0.5, 5)


def test_idle_timeout_does_not_cut_a_slow_answer(tidemark, upstream):
    tm = tidemark(config={"proxy": {"idle_timeout_ms": "500",
                                    "header_timeout_ms": "500"}})
    with tm.conn() as c:
        r = c.request("GET", "/slow", [("X-Test-Delay-Ms", "1500")])
        assert r.status == 200, r


def test_slow_body_within_idle_timeout_passes(tidemark, upstream):
    # The header timeout covers the head only; a body that keeps coming
    # (each piece well within the idle timeout) is not cut.
    tm = tidemark(config={"proxy": {"idle_timeout_ms": "700",
                                    "header_timeout_ms": "500"}})
    _trickle_put(tm, "trickle")


def _trickle_put(tm, doc):
    """PUT a 100-byte body 10 bytes every 0.15 s (1.5 s in all): it is
    carried whole and answered 200."""
    body = b"0123456789" * 10
    with tm.conn() as c:
        c.send(build_request("PUT", "/v1/documents/" + doc,
                             [("Fencing-Token", "1"),
                              ("Content-Length", str(len(body)))],
                             content_length=False))
        for i in range(0, len(body), 10):
            assert not c.closed(timeout=0.15)
            c.send(body[i:i + 10])
        r = c.read_response()
        assert r.status == 200, r
        assert r.header("X-Body-Len") == str(len(body))


# -------------------------------------------------------------- upstream


def test_upstream_refused_is_502(tidemark, upstream):
    dead = "http://127.0.0.1:%d" % free_port()
    tm = tidemark(config={"upstream default": {"url": dead}})
    t0 = time.monotonic()
    r = tm.put("d", token=1)
    assert_problem(r, 502)
    assert time.monotonic() - t0 < 3 * slow()
    r = tm.request("GET", "/plain")
    assert_problem(r, 502)
    assert tm.alive()


def test_upstream_connect_timeout(tidemark, upstream):
    # A listener whose accept queue is full never completes a handshake.
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(0)
    port = ls.getsockname()[1]
    fillers = []
    for _ in range(4):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(s)
    try:
        tm = tidemark(config={"upstream default": {
            "url": "http://127.0.0.1:%d" % port,
            "connect_timeout_ms": "500", "timeout_ms": "30000"}})
        t0 = time.monotonic()
        r = tm.put("ct", token=1, timeout=20)
        took = time.monotonic() - t0
        assert r.status == 502, r
        assert_problem(r, r.status)
        assert 0.4 <= took <= 3 * slow(), took
    finally:
        for s in fillers:
            s.close()
        ls.close()


def test_upstream_response_timeout_is_504(tidemark, upstream):
    tm = tidemark(config={"upstream default": {"timeout_ms": "500"}})
    t0 = time.monotonic()
    r = tm.put("slow", token=1, headers=[("X-Test-Delay-Ms", "10000"),
                                         ("X-Test-Id", "slow")])
    took = time.monotonic() - t0
    assert_problem(r, 504)
    assert 0.4 <= took <= 3 * slow(), took
    # tidemark gives that upstream connection up: the upstream sees it
    # close, and the next request goes over another one.
    seen = upstream.wait_request("X-Test-Id", "slow")
    upstream.wait_for(lambda: upstream.conns[seen.conn_id].closed,
                      what="the timed-out upstream connection to close")
    r = tm.request("GET", "/next")
    assert r.status == 200
    assert r.header("X-Upstream-Conn") != str(seen.conn_id)


def test_body_streaming_longer_than_timeout_ms_is_answered(tidemark,
                                                          upstream):
    # timeout_ms is the wait for the upstream's answer once the request
    # is sent whole (as nginx's proxy_read_timeout): a body that keeps
    # coming for longer than timeout_ms is carried, not cut with a 504.
    tm = tidemark(config={"upstream default": {"timeout_ms": "500"}})
    _trickle_put(tm, "long-upload")


def test_upstream_bad_answer_is_502(tidemark, upstream):
    tm = tidemark()
    r = tm.request("GET", "/garbage", headers=[("X-Test-Garbage", "1")])
    assert_problem(r, 502)
    assert tm.request("GET", "/fine").status == 200


def test_upstream_ambiguous_framing_is_502(tidemark, upstream):
    tm = tidemark()
    raw = (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
           b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n").hex()
    r = tm.request("GET", "/amb", headers=[("X-Test-Raw-Response", raw),
                                           ("X-Test-Close", "1")])
    assert_problem(r, 502)


def test_upstream_closing_mid_body_closes_client(tidemark, upstream):
    # The response head went out; the body can't be completed: the client
    # must see the connection close, not a short body taken as whole.
    tm = tidemark()
    raw = (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly-part").hex()
    with tm.conn() as c:
        c.send(build_request("GET", "/cut", [("X-Test-Raw-Response", raw),
                                             ("X-Test-Close", "1")]))
        with pytest.raises(Closed):
            c.read_response()


def test_upstream_stalling_mid_body_is_cut(tidemark, upstream):
    # timeout_ms also bounds the wait between body reads: the client's
    # connection is closed (the head is out, so no 504 can be sent) and
    # the upstream connection given up.
    tm = tidemark(config={"upstream default": {"timeout_ms": "600"}})
    with tm.conn() as c:
        c.send(build_request("GET", "/stall", [("X-Test-Stall", "1000"),
                                               ("X-Test-Id", "stall")]))
        t0 = time.monotonic()
        with pytest.raises(Closed):
            c.read_response(timeout=10 * slow())
        assert time.monotonic() - t0 < 4 * slow()
    seen = upstream.wait_request("X-Test-Id", "stall")
    upstream.wait_for(lambda: upstream.conns[seen.conn_id].closed,
                      what="the stalled upstream connection to close")


# ------------------------------------------------------- never retried


def test_write_not_retried_on_pooled_connection(tidemark, upstream):
    tm = tidemark()
    warm = tm.request("GET", "/warm")
    assert warm.status == 200
    r = tm.put("once", token=1, headers=[("X-Test-Drop", "1"),
                                         ("X-Test-Id", "once")])
    assert_problem(r, 502)
    seen = upstream.find("X-Test-Id", "once")
    assert len(seen) == 1, seen
    assert seen[0].conn_id == int(warm.header("X-Upstream-Conn"))
    # nothing arrives later either
    with pytest.raises(AssertionError):
        upstream.wait_for(lambda: len(upstream.find("X-Test-Id", "once")) > 1,
                          timeout=0.5)
    assert tm.request("GET", "/after").status == 200


def test_write_not_retried_on_fresh_connection(tidemark, upstream):
    tm = tidemark()
    r = tm.request("POST", "/v1/documents/fresh", token=1, body=b"x" * 1000,
                   headers=[("X-Test-Drop", "1"), ("X-Test-Id", "fresh")])
    assert_problem(r, 502)
    with pytest.raises(AssertionError):
        upstream.wait_for(
            lambda: len(upstream.find("X-Test-Id", "fresh")) > 1,
            timeout=0.5)
    assert len(upstream.find("X-Test-Id", "fresh")) == 1


def test_pooled_connection_closed_by_upstream_not_used(tidemark, upstream):
    # The upstream drops an idle keep-alive connection (its own idle
    # timeout): the next write must go out on a fresh connection and work.
    tm = tidemark()
    r = tm.request("GET", "/first", headers=[("X-Test-Close-After", "1")])
    assert r.status == 200
    cid = int(r.header("X-Upstream-Conn"))
    upstream.wait_for(lambda: upstream.conns[cid].closed,
                      what="upstream to drop the idle connection")
    r = tm.put("afterdrop", token=1)
    assert r.status == 200, r
    assert r.header("X-Upstream-Conn") != str(cid)


def test_many_clients_while_upstream_is_slow(tidemark, upstream):
    tm = tidemark()
    out = []

    def one(i):
        out.append(tm.request("GET", "/c%d" % i,
                              headers=[("X-Test-Delay-Ms", "300")]).status)

    ts = [threading.Thread(target=one, args=(i,)) for i in range(30)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert out == [200] * 30
    # served concurrently, not one after the other
    assert time.monotonic() - t0 < 5 * slow()
