"""Thousands of idle client connections do not starve active ones."""
import resource
import socket
import time

import pytest

from common import is_asan, wait_until


def test_idle_connections_do_not_starve_active_ones(tidemark, upstream):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2200:
        if hard != resource.RLIM_INFINITY and hard < 2200:
            pytest.skip("open files limited to %d here" % hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (2200, hard))
    tm = tidemark()
    idle = []
    try:
        for _ in range(2000):
            s = socket.create_connection(("127.0.0.1", tm.port), timeout=5)
            idle.append(s)
        # Half of them sent half a head: the proxy holds them, waiting.
        for s in idle[::2]:
            s.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n")
        took = []
        for i in range(20):
            t0 = time.monotonic()
            assert tm.put("busy%d" % i, token=1).status == 200
            took.append(time.monotonic() - t0)
        took.sort()
        # Generous: starvation would be seconds, not milliseconds.
        assert took[len(took) // 2] < 0.5, took
        assert tm.alive()
    finally:
        for s in idle:
            s.close()


def open_connections(tm):
    _, _, body = tm.admin("GET", "/metrics")
    for line in body.decode().splitlines():
        if line.startswith("tidemark_connections "):
            return int(line.split()[1])
    raise AssertionError("no tidemark_connections gauge")


@pytest.mark.skipif(is_asan(), reason="the sanitizer's allocator keeps "
                    "freed memory on purpose")
def test_memory_a_burst_took_goes_back(tidemark, upstream):
    """libevent keeps a small slot per descriptor number; from the heap,
    each would pin a page of the burst's freed memory (6 MB here)."""
    n = 3000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 200:
        if hard != resource.RLIM_INFINITY and hard < n + 200:
            pytest.skip("open files limited to %d here" % hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (n + 200, hard))
    tm = tidemark(config={"proxy": {"max_connections": str(n + 100),
                                    "header_timeout_ms": "60000"}})
    for i in range(10):
        assert tm.put("warm%d" % i, token=1).status == 200
    idle = tm.status("VmRSS")
    socks = []
    try:
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", tm.port), timeout=5)
            socks.append(s)
            if i % 2 == 0:
                s.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\nX-Pad: " +
                          b"p" * 4000)
        wait_until(lambda: open_connections(tm) == n, 30, "all accepted")
        assert tm.status("VmRSS") > idle + 8e6
    finally:
        for s in socks:
            s.close()
    wait_until(lambda: open_connections(tm) == 0, 30, "all closed")
    # Given back a second after the burst has gone.
    wait_until(lambda: tm.status("VmRSS") < idle + 3e6, 10,
               "VmRSS back within 3 MB of idle (%.1f MB)" % (idle / 1e6))
