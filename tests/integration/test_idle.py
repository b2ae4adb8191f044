"""Thousands of idle client connections do not starve active ones."""
import resource
import socket
import time

import pytest


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
