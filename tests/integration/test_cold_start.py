"""Cold start: a call that reaches a shared store or lock backend while it
makes its first connection waits for it, up to the backend's timeout_ms,
instead of failing at once with 503. Once it has been up, an outage
fails fast."""

import re
import time

import pytest

from common import slow, wait_until
from daemon import STORE_ROUTES, wait_ready
from wire import Conn, assert_problem, build_request, token_headers

NETWORK = ["postgres", "redis", "etcd"]


def store_keys(kind, srv, timeout_ms):
    keys = {"type": kind, "path": None, "timeout_ms": str(timeout_ms)}
    if kind == "postgres":
        keys["dsn"] = srv.dsn
    elif kind == "redis":
        keys["url"] = srv.url
    else:
        keys["endpoints"] = srv.endpoints
    return keys


def requests_read(tm):
    body = tm.admin("GET", "/metrics")[-1]
    body = body if isinstance(body, bytes) else body.encode()
    m = re.search(rb"^tidemark_requests_total (\d+)", body, re.M)
    return int(m.group(1)) if m else 0


@pytest.mark.parametrize("kind", NETWORK)
def test_write_at_cold_start_waits_for_the_store(tidemark, upstream,
                                                 store_servers, kind):
    """The store is down when tidemark starts; a fenced write arrives;
    the store comes up within timeout_ms: the write is forwarded (200),
    not refused (503)."""
    srv = store_servers(kind)
    srv.stop()
    try:
        cfg = dict(STORE_ROUTES)
        cfg["store"] = store_keys(kind, srv, int(15000 * slow()))
        tm = tidemark(config=cfg)
        c = Conn(tm.port, timeout=30 * slow())
        c.send(build_request("PUT", "/v1/documents/cold-" + kind,
                             token_headers(1) + [("X-Test-Id", "cold")],
                             b"data"))
        wait_until(lambda: requests_read(tm) >= 1, 5 * slow(),
                   "tidemark to read the write")
    finally:
        srv.start()
    r = c.read_response()
    assert r.status == 200, r
    assert len(upstream.find("X-Test-Id", "cold")) == 1
    c.close()


@pytest.mark.parametrize("kind", NETWORK)
def test_outage_after_the_first_connection_fails_fast(tidemark, upstream,
                                                      store_servers, kind):
    """After the store has been up once, a write during an outage is
    refused at once, not held for timeout_ms."""
    srv = store_servers(kind)
    cfg = dict(STORE_ROUTES)
    cfg["store"] = store_keys(kind, srv, 20000)
    tm = tidemark(config=cfg)
    wait_ready(tm)
    srv.stop()
    try:
        wait_ready(tm, 503)
        t0 = time.monotonic()
        assert_problem(tm.put("fast-" + kind, token=1), 503)
        assert time.monotonic() - t0 < 5 * slow()
    finally:
        srv.start()


@pytest.mark.parametrize("kind", ["redis", "postgres"])
def test_lock_acquire_at_cold_start_waits_for_the_backend(
        tidemark, store_servers, kind):
    srv = store_servers(kind)
    keys = {"backend": kind, "timeout_ms": str(int(15000 * slow()))}
    if kind == "redis":
        keys["url"] = srv.url
    else:
        keys["dsn"] = srv.dsn
    srv.stop()
    try:
        tm = tidemark(config={"locks": keys})
        c = Conn(tm.admin_port, timeout=30 * slow())
        c.send(build_request("POST", "/v1/locks/cold-%s-%f?ttl_ms=10000"
                             % (kind, time.time()),
                             host="127.0.0.1:%d" % tm.admin_port))
        wait_until(lambda: tm.log_lines("cannot connect"), 5 * slow(),
                   "tidemark to fail its first connect")
    finally:
        srv.start()
    r = c.read_response()
    assert r.status == 201, r
    c.close()


def test_redis_still_loading_its_data_becomes_usable(tidemark, upstream):
    """A Redis that accepts while it loads its append-only file answers
    LOADING to SCRIPT LOAD: the connection is dropped and made again until
    the scripts load, not kept unusable for ever (a restarted Redis with
    a large file, as after the conformance suite on a fast disk)."""
    import socket
    import subprocess
    import servers

    r = servers.Redis(extra=["--key-load-delay", "500",
                             "--loading-process-events-interval-bytes",
                             "1024"])
    r.start()
    try:
        s = socket.create_connection(("127.0.0.1", r.port))
        n = 3000
        s.sendall(b"".join(b"*3\r\n$3\r\nSET\r\n$%d\r\nk%d\r\n$1\r\nv\r\n"
                           % (len(str(j)) + 1, j) for j in range(n)))
        got = b""
        while got.count(b"+OK") < n:
            got += s.recv(65536)
        s.close()
        r.stop()
        # Started again without waiting: it loads for about 1.5 s.
        log = open(r.log_path, "ab")
        r.proc = subprocess.Popen(r.argv(), stdout=log, stderr=log,
                                  cwd=r.dir, start_new_session=True)
        log.close()
        cfg = dict(STORE_ROUTES)
        cfg["store"] = {"type": "redis", "url": r.url, "path": None}
        tm = tidemark(config=cfg)
        tm.wait_log("LOADING", timeout=10)
        wait_ready(tm, 200, timeout=20)
        assert tm.put("loaded", token=1).status == 200
    finally:
        r.destroy()
