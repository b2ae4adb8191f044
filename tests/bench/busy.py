#!/usr/bin/python3
"""make bench-busy: resident memory per busy connection, tidemark against
nginx. For each N in BUSY_CLIENTS, each proxy in turn:

1. starts in front of a holding upstream (below) and serves N warm-up
   PUTs on N resources (tidemark raises each mark to token 1 here, so
   its mark cache is filled before the idle figure is taken);
2. idle: VmRSS once the warm-up connection is closed;
3. busy: N clients each send one PUT (an equal token, 1) and wait; the
   upstream reads every request and holds its answer, so each client has
   a request in flight on its own upstream connection. VmRSS once the
   upstream holds all N;
4. reports (busy - idle) / N: the bytes one busy connection costs.

What is counted: VmRSS from /proc/PID/status. tidemark: its one process.
nginx: its worker (worker_processes 1); the master's VmRSS does not
change with connections and is printed apart. nginx allocates its
connection table at start (worker_connections = 2N + 1024: one client
and one upstream connection each, and the slack nginx needs not to
reuse connections): that memory is in nginx's idle figure, not
in its per-connection one. The "prealloc" column is it, per busy
connection: nginx's idle VmRSS at worker_connections 2N + 1024 minus its
idle VmRSS at 1024, divided by N. "incl." adds it back.

Env: BUSY_CLIENTS ("1000 4000"), BUSY_BODY (bytes of each PUT's body,
256), TIDEMARK_BIN (./tidemark), BUSY_BINS ("A=path B=path": other
tidemark binaries, alternated with nginx as more columns).
"""
import os
import resource
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from proxies import (PROXY_PASS, nginx_argv, nginx_conf,  # noqa: E402
                     tidemark_ini, wait_port)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from common import free_port, wait_until  # noqa: E402

CLIENTS = [int(n) for n in os.environ.get("BUSY_CLIENTS",
                                          "1000 4000").split()]
BODY = b"x" * int(os.environ.get("BUSY_BODY", "256"))
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n"


class HoldUpstream:
    """Reads requests on every connection it accepts. A request with
    X-Bench-Warm is answered at once; any other is held, unanswered,
    until the connection closes. held counts the requests held."""

    def __init__(self):
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(65535)
        self.lsock.setblocking(False)
        self.port = self.lsock.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.held = 0
        self.stopping = False
        self.sel = selectors.EpollSelector()
        self.sel.register(self.lsock, selectors.EVENT_READ, None)
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def stop(self):
        self.stopping = True
        self.thread.join(5)
        for key in list(self.sel.get_map().values()):
            key.fileobj.close()

    def _accept(self):
        try:
            s, _ = self.lsock.accept()
        except BlockingIOError:
            return
        s.setblocking(False)
        self.sel.register(s, selectors.EVENT_READ, [b""])

    def _read(self, key):
        try:
            data = key.fileobj.recv(65536)
        except (BlockingIOError, ConnectionError):
            data = None if not self.stopping else b""
        if data is None:
            return
        if not data:
            self.sel.unregister(key.fileobj)
            key.fileobj.close()
            return
        buf = key.data[0] + data
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                break
            head = buf[:end].lower()
            n = 0
            for line in head.split(b"\r\n")[1:]:
                if line.startswith(b"content-length:"):
                    n = int(line.split(b":")[1])
            if len(buf) < end + 4 + n:
                break
            buf = buf[end + 4 + n:]
            if b"\r\nx-bench-warm:" in head:
                key.fileobj.sendall(OK)
            else:
                self.held += 1
        key.data[0] = buf

    def _loop(self):
        while not self.stopping:
            for key, _ in self.sel.select(0.1):
                if key.data is None:
                    self._accept()
                else:
                    self._read(key)


def vmrss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def children(pid):
    out = []
    for t in os.listdir("/proc/%d/task" % pid):
        path = "/proc/%d/task/%s/children" % (pid, t)
        with open(path) as f:
            out += [int(c) for c in f.read().split()]
    return out


class Nginx:
    name = "nginx"

    def __init__(self, d, up, conns):
        self.dir = d
        self.port = free_port()
        conf = nginx_conf(d, "    keepalive_timeout 600s;\n" + PROXY_PASS
                          % {"up": up.port, "port": self.port}, conns)
        self.proc = subprocess.Popen(nginx_argv(d, conf),
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc, "nginx")
        wait_until(lambda: children(self.proc.pid), 10, "nginx's worker")

    def rss(self):
        return sum(vmrss(p) for p in children(self.proc.pid))

    def master_rss(self):
        return vmrss(self.proc.pid)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)


class Tidemark:
    def __init__(self, name, binary, d, up, conns):
        self.name = name
        self.port = free_port()
        ini = tidemark_ini(
            d, self.port, up.url,
            proxy="max_connections = %d\nidle_timeout_ms = 600000\n"
                  "header_timeout_ms = 600000" % (conns + 100),
            upstream="timeout_ms = 600000")
        self.log = open(os.path.join(d, "tidemark.log"), "wb")
        self.proc = subprocess.Popen([binary, "-c", ini],
                                     stdout=self.log, stderr=self.log)
        wait_port(self.port, self.proc, name)

    def rss(self):
        return vmrss(self.proc.pid)

    def master_rss(self):
        return 0

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


def put(i, warm):
    return (b"PUT /v1/documents/b%d HTTP/1.1\r\nHost: b\r\n"
            b"Fencing-Token: 1\r\n%sContent-Length: %d\r\n\r\n%s"
            % (i, b"X-Bench-Warm: 1\r\n" if warm else b"", len(BODY), BODY))


def read_answer(s):
    data = b""
    while True:
        end = data.find(b"\r\n\r\n")
        if end >= 0 and len(data) >= end + 4 + 3:
            if not data.startswith(b"HTTP/1.1 200"):
                raise RuntimeError("warm-up answered %r" % data[:80])
            return
        chunk = s.recv(65536)
        if not chunk:
            raise RuntimeError("closed during the warm-up")
        data += chunk


def warm(port, n):
    s = socket.create_connection(("127.0.0.1", port), 30)
    for i in range(n):
        s.sendall(put(i, True))
        read_answer(s)
    s.close()


def busy(proxy, up, n):
    before = up.held
    socks = []
    try:
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", proxy.port), 30)
            s.sendall(put(i, False))
            socks.append(s)
        wait_until(lambda: up.held - before >= n, 120,
                   "%d requests held upstream" % n, interval=0.1)
        time.sleep(0.5)  # nothing more to arrive: let RSS settle
        return proxy.rss()
    finally:
        for s in socks:
            s.close()


def measure(make, n):
    up = HoldUpstream()
    with tempfile.TemporaryDirectory(prefix="tidemark-busy-") as d:
        proxy = make(d, up, 2 * n + 1024)
        try:
            warm(proxy.port, n)
            time.sleep(0.5)
            idle = proxy.rss()
            peak = busy(proxy, up, n)
            return idle, peak, proxy.master_rss()
        finally:
            proxy.stop()
            up.stop()


def nginx_idle(conns):
    up = HoldUpstream()
    with tempfile.TemporaryDirectory(prefix="tidemark-busy-") as d:
        ng = Nginx(d, up, conns)
        try:
            warm(ng.port, 20)
            time.sleep(0.5)
            return ng.rss()
        finally:
            ng.stop()
            up.stop()


def main():
    need = 3 * max(CLIENTS) + 300
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            sys.exit("bench-busy: open files limited to %d; need %d"
                     % (hard, need))
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    if not shutil.which("nginx"):
        sys.exit("bench-busy: nginx is not installed (make deps)")
    bins = [("tidemark", os.environ.get("TIDEMARK_BIN",
                                         str(ROOT / "tidemark")))]
    for word in os.environ.get("BUSY_BINS", "").split():
        name, _, path = word.partition("=")
        bins.append((name, path))
    print("bench-busy: VmRSS per busy connection (a PUT of %d body bytes "
          "held by the upstream); load %s"
          % (len(BODY), os.getloadavg()[0]))
    print("%-10s %6s %10s %10s %10s %9s %9s" % (
        "proxy", "N", "idle KB", "busy KB", "B/conn", "prealloc", "incl."))
    small = nginx_idle(1024)
    for n in CLIENTS:
        prealloc = None
        ngx_per = None
        rows = []
        for name, path in [("nginx", None)] + bins:
            if path is None:
                def make(d, up, c):
                    return Nginx(d, up, c)
            else:
                def make(d, up, c, name=name, path=path):
                    return Tidemark(name, path, d, up, c)
            idle, peak, master = measure(make, n)
            per = (peak - idle) / n
            if path is None:
                prealloc = (idle - small) / n
                ngx_per = per
                incl = per + prealloc
                extra = " (master %d KB)" % (master // 1024)
            else:
                incl = per
                extra = " %.2fx nginx, %.2fx with its prealloc" % (
                    per / ngx_per, per / (ngx_per + prealloc))
            rows.append("%-10s %6d %10d %10d %10.0f %9s %9.0f%s" % (
                name, n, idle // 1024, peak // 1024, per,
                "%.0f" % prealloc if path is None else "-", incl, extra))
        print("\n".join(rows))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
