"""What every helper of the integration tests needs: the binary under
test and its pace (a sanitizer build runs slower), free loopback ports
(a range of its own for each pytest-xdist worker, so that parallel
workers never hand out one port twice), polling with a deadline, and a
loopback server for tests that script a peer byte by byte, and test
CAs and certificates made with the openssl command line tool.
Standard library only; the failure lab (lab/) ships it with servers.py.
"""

import os
import random
import socket
import subprocess
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("TIDEMARK_BIN", REPO / "tidemark")).resolve()

_asan = None


def is_asan():
    """True when the binary under test is a sanitizer build."""
    global _asan
    if _asan is None:
        try:
            data = BIN.read_bytes()
        except OSError:
            return False
        _asan = b"__asan_init" in data or b"__ubsan_handle" in data
    return _asan


def slow():
    """Deadline multiplier: sanitizer builds run several times slower."""
    return 3.0 if is_asan() else 1.0


# --------------------------------------------------------------- ports


def _ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def _outside_ephemeral():
    """The loopback ports from 10000 up that the kernel never hands to an
    outgoing connection: [(first, last), ...]."""
    lo, hi = _ephemeral_range()
    ranges = [(10000, lo - 1)] if lo > 11025 else []
    if hi < 64535:
        ranges.append((hi + 1, 65535))
    return ranges


def _worker_share(ranges, worker, count):
    """The worker-th of count equal shares of ranges (worker 0 of 1 when
    pytest-xdist does not run the tests): [(first, last), ...]."""
    total = sum(b - a + 1 for a, b in ranges)
    share = total // count
    start, end = worker * share, (worker + 1) * share
    out, base = [], 0
    for a, b in ranges:
        first, last = max(a, a + start - base), min(b, a + end - 1 - base)
        if first <= last:
            out.append((first, last))
        base += b - a + 1
    return out


def _this_worker():
    """(index, count) of this pytest-xdist worker; (0, 1) outside xdist."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if name.startswith("gw") and name[2:].isdigit() and count.isdigit():
        return int(name[2:]), max(int(count), int(name[2:]) + 1)
    return 0, 1


_PORTS = _worker_share(_outside_ephemeral(), *_this_worker())
_rng = random.Random()
_given = set()   # never hand out one port twice: servers may not bind yet


def free_port():
    """A loopback port nothing listens on right now. Taken from outside
    the kernel's ephemeral range, so that no outgoing connection (of the
    tests, of tidemark, of a store) can be handed the same port between
    now and the moment a server binds it; and from this xdist worker's
    share of that range, so that no other worker hands it out too."""
    for _ in range(200):
        if not _PORTS:
            break
        a, b = _rng.choice(_PORTS)
        port = _rng.randint(a, b)
        if port in _given:
            continue
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("127.0.0.1", port))
            _given.add(port)
            return port
        except OSError:
            continue
        finally:
            s.close()
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_until(pred, timeout, what="condition", interval=0.01):
    """Poll pred() until it returns a true value or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1fs waiting for %s"
                                 % (timeout, what))
        time.sleep(interval)


class LoopbackServer:
    """A TCP server on a free loopback port whose serve(conn) runs on a
    thread of its own for each connection; stop() closes the listener
    and every connection. Subclasses say what a connection is answered."""

    def __init__(self):
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.stopping = False
        self.conns = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopping:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=self._serve, args=(c,),
                             daemon=True).start()

    def _serve(self, c):
        try:
            self.serve(c)
        except OSError:
            pass

    def serve(self, conn):
        raise NotImplementedError

    def stop(self):
        self.stopping = True
        try:
            self.lsock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.lsock.close()
        for c in self.conns:
            try:
                c.close()
            except OSError:
                pass
        self.thread.join(timeout=5)


# ---------------------------------------------------------------- pki


def openssl(*args, cwd):
    subprocess.run(("openssl",) + args, cwd=str(cwd), check=True,
                   stdin=subprocess.DEVNULL, capture_output=True)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=%s" % name, "-keyout", "%s.key" % name,
            "-out", "%s.pem" % name, cwd=d)
    return d / ("%s.pem" % name)


def make_cert(d, ca, name, sans):
    """A server certificate for sans (e.g. DNS:localhost,IP:127.0.0.1)
    signed by ca; returns (cert, key) paths."""
    (d / "ext.cnf").write_text("subjectAltName=%s\n" % sans)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=%s" % name,
            "-keyout", "%s.key" % name, "-out", "%s.csr" % name, cwd=d)
    openssl("x509", "-req", "-in", "%s.csr" % name, "-CA", "%s.pem" % ca,
            "-CAkey", "%s.key" % ca, "-CAcreateserial", "-days", "2",
            "-extfile", "ext.cnf", "-out", "%s.crt" % name, cwd=d)
    return d / ("%s.crt" % name), d / ("%s.key" % name)
