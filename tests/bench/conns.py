#!/usr/bin/python3
"""make bench-conns: tidemark's resident memory (VmRSS) when idle, with
10,000 client connections open at once (a quarter sending a request and
staying open, a quarter sending most of a head, half silent), and once
they have all gone. Memory that a burst of connections took should come
back: the last figure should be close to the first.

Env: CONNS_TOTAL (10000), CONNS_ROUNDS (1: how many bursts),
TIDEMARK_BIN (./tidemark).
"""
import os
import resource
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from common import wait_until  # noqa: E402
from daemon import Tidemark  # noqa: E402
from upstream import Upstream  # noqa: E402

TOTAL = int(os.environ.get("CONNS_TOTAL", "10000"))
ROUNDS = int(os.environ.get("CONNS_ROUNDS", "1"))


def rss_mb(tm):
    return tm.status("VmRSS") / 1e6


def open_connections(tm):
    _, _, body = tm.admin("GET", "/metrics")
    for line in body.decode().splitlines():
        if line.startswith("tidemark_connections "):
            return int(line.split()[1])
    raise RuntimeError("no tidemark_connections gauge")


def burst(tm):
    """Open TOTAL connections and keep them; returns them."""
    socks = []
    for i in range(TOTAL):
        s = socket.create_connection(("127.0.0.1", tm.port), timeout=30)
        socks.append(s)
        kind = i % 4
        if kind == 0:
            # A request; the connection stays open (keep-alive).
            s.sendall(b"GET /burst/%d HTTP/1.1\r\nHost: b\r\n\r\n" % i)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = s.recv(65536)
                if not chunk:
                    raise RuntimeError("closed before answering")
                data += chunk
        elif kind == 1:
            # Most of a head: 8 KiB of headers, never finished.
            s.sendall(b"GET /partial HTTP/1.1\r\nHost: b\r\n" +
                      b"X-Pad: " + b"p" * 8000 + b"\r\n")
        # else: silent
    return socks


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = TOTAL + 200
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            sys.exit("bench-conns: open files limited to %d; need %d"
                     % (hard, want))
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    up = Upstream()
    with tempfile.TemporaryDirectory(prefix="tidemark-conns-") as d:
        tm = Tidemark(d, upstream=up, config={"proxy": {
            "max_connections": str(TOTAL + 100),
            "header_timeout_ms": "600000", "idle_timeout_ms": "600000",
            "log_level": "warn"}})
        tm.start()
        try:
            for i in range(20):
                tm.request("GET", "/warm/%d" % i)
            idle = rss_mb(tm)
            print("bench-conns: %d connections a burst, %d burst%s"
                  % (TOTAL, ROUNDS, "" if ROUNDS == 1 else "s"))
            print("  idle                 VmRSS %7.1f MB" % idle)
            for r in range(ROUNDS):
                socks = burst(tm)
                wait_until(lambda: open_connections(tm) == TOTAL, 60,
                           "every connection accepted")
                peak = rss_mb(tm)
                for s in socks:
                    s.close()
                wait_until(lambda: open_connections(tm) == 0, 60,
                           "every connection closed")
                # The reaper frees at the end of the loop turn; one more
                # request makes sure that turn has passed.
                tm.request("GET", "/after")
                closed = rss_mb(tm)
                # tidemark gives memory back a second after a burst.
                time.sleep(2)
                after = rss_mb(tm)
                print("  burst %d: %5d open  VmRSS %7.1f MB; all closed "
                      "%7.1f MB; 2 s later %7.1f MB (%+.1f MB over idle)"
                      % (r + 1, TOTAL, peak, closed, after, after - idle))
        finally:
            tm.stop()
            up.stop()


if __name__ == "__main__":
    main()
