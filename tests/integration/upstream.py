"""The fake upstream: a threaded HTTP/1.1 server on loopback that records
every request it receives and answers as the request's X-Test-* headers
say, so that a test can assert on what the backend saw. Standard library
only.
"""

import select
import socket
import threading
import time
import zlib

from common import slow
from wire import Closed, HTTPError, Reader, header_all, header_get, \
    parse_head, read_chunked


PATTERN = bytes(range(256)) * 4096  # 1 MiB


class UpstreamRequest:
    def __init__(self):
        self.method = None
        self.target = None
        self.version = None
        self.headers = []
        self.body = b""
        self.body_len = 0
        self.body_crc = 0
        self.conn_id = None
        self.seq = None
        self.head_time = None   # head parsed
        self.arrival = None     # head and body read
        self.answered = None    # just before the response was written
        self.applied = None     # the write took effect (answered, or
                                # X-Test-Apply-Late after the client left)
        self.outcome = None     # answered | dropped | closed | ...

    def header(self, name):
        return header_get(self.headers, name)

    def header_all(self, name):
        return header_all(self.headers, name)

    def __repr__(self):
        return "<UpstreamRequest #%s conn=%s %s %s %r len=%d>" % (
            self.seq, self.conn_id, self.method, self.target, self.headers,
            self.body_len)


class UpstreamConn:
    def __init__(self, cid, sock):
        self.id = cid
        self.sock = sock
        self.opened = time.monotonic()
        self.closed = None       # when EOF from the peer was seen
        self.requests = 0
        self.partial = 0         # requests started, never complete


class Upstream:
    """A threaded HTTP/1.1 server on loopback that records every request
    and behaves as the X-Test-* request headers say:

    X-Test-Status: N          answer with status N (default 200)
    X-Test-Delay-Ms: N        wait N ms before answering
    X-Test-Hold: NAME         wait until the test calls release(NAME)
    X-Test-Apply-Late: 1      with X-Test-Hold: a client that leaves does
                              not cancel the write; it takes effect
                              (applied) at the release, answered to nobody
    X-Test-Close: 1           answer with Connection: close, then close
    X-Test-Close-After: 1     answer (keep-alive), then close silently
    X-Test-Drop: 1            read the request, close without answering
    X-Test-Garbage: 1         answer with bytes that are not HTTP
    X-Test-Discard: 1         count and CRC the body, do not keep it
    X-Test-Body-Hold: NAME    read the body only after release(NAME)
    X-Test-Body-Size: N       answer with N bytes of PATTERN
    X-Test-Chunked: 1         answer with a chunked body
    X-Test-Close-Delimited: 1 answer without length; close to end it
    X-Test-Echo: 1            answer with the request body
    X-Test-Resp-Header: H: V  add a header to the answer (repeatable)
    X-Test-Raw-Response: hex  write these bytes as the answer
    X-Test-Stall: N           answer 1 MiB long, send N bytes, go quiet
    X-Test-Split-Ms: N        pause N ms between the head and the body
    """

    def __init__(self, tls=None, host="127.0.0.1", port=0):
        # tls: an ssl.SSLContext (server side) to serve HTTPS instead.
        # host: the one address listened on ("::1": IPv6 only); port: 0
        # for a free one.
        self.tls = tls
        self.tls_failures = 0
        v6 = ":" in host
        self.lsock = socket.socket(
            socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if v6:
            self.lsock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        self.lsock.bind((host, port))
        self.lsock.listen(128)
        self.port = self.lsock.getsockname()[1]
        self.url = "http://%s:%d" % ("[%s]" % host if v6 else host, self.port)
        self.cond = threading.Condition()
        self.requests = []
        self.conns = {}
        self.holds = {}
        self.stopping = threading.Event()
        self.threads = []
        self.errors = []
        self.sent_bytes = 0
        self.release_everything = False
        self._seq = 0
        self._cid = 0
        t = threading.Thread(target=self._accept_loop, daemon=True)
        t.start()
        self.threads.append(t)

    # -- test API

    def release(self, name):
        with self.cond:
            self.holds.setdefault(name, threading.Event()).set()

    def release_all(self):
        """Release every hold, present and future."""
        with self.cond:
            self.release_everything = True
            for ev in self.holds.values():
                ev.set()

    def wait_for(self, pred, timeout=10.0, what="upstream condition"):
        deadline = time.monotonic() + timeout * slow()
        with self.cond:
            while True:
                v = pred()
                if v:
                    return v
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        "timed out waiting for %s; upstream saw %r"
                        % (what, self.requests))
                self.cond.wait(min(left, 0.05))

    def find(self, name, value):
        """Requests (complete) whose header name has value."""
        with self.cond:
            return [r for r in self.requests if r.header(name) == value]

    def wait_request(self, name, value, timeout=10.0):
        return self.wait_for(lambda: self.find(name, value), timeout,
                             "a request with %s: %s" % (name, value))[0]

    def count(self):
        with self.cond:
            return len(self.requests)

    def stop(self):
        self.stopping.set()
        with self.cond:
            for ev in self.holds.values():
                ev.set()
            conns = list(self.conns.values())
        try:
            self.lsock.shutdown(socket.SHUT_RDWR)  # wakes accept()
        except OSError:
            pass
        try:
            self.lsock.close()
        except OSError:
            pass
        for c in conns:
            try:
                c.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in self.threads:
            t.join(timeout=5)

    # -- server

    def _accept_loop(self):
        while not self.stopping.is_set():
            try:
                sock, _ = self.lsock.accept()
            except OSError:
                return
            with self.cond:
                self._cid += 1
                c = UpstreamConn(self._cid, sock)
                self.conns[c.id] = c
                self.cond.notify_all()
            t = threading.Thread(target=self._serve, args=(c,), daemon=True)
            t.start()
            self.threads.append(t)

    def _mark_closed(self, c):
        with self.cond:
            if c.closed is None:
                c.closed = time.monotonic()
            self.cond.notify_all()

    def _wait(self, c, deadline=None, event=None):
        """Wait for the deadline or the event, watching for the peer
        closing meanwhile. Returns "timeout", "released", "closed" or
        "stopped"."""
        while True:
            if self.stopping.is_set():
                return "stopped"
            if event is not None and event.is_set():
                return "released"
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return "timeout"
            step = 0.01
            if deadline is not None:
                step = min(step, deadline - now)
            r, _, _ = select.select([c.sock], [], [], max(step, 0))
            if r:
                try:
                    data = c.sock.recv(1, socket.MSG_PEEK |
                                       socket.MSG_DONTWAIT)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    self._mark_closed(c)
                    return "closed"
                time.sleep(0.01)  # pipelined bytes; cannot see EOF behind

    def _serve(self, c):
        sock = c.sock
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.tls is not None:
            try:
                sock = self.tls.wrap_socket(sock, server_side=True)
            except (OSError, ValueError):
                # A refused handshake is what some tests want to see.
                with self.cond:
                    self.tls_failures += 1
                    self.cond.notify_all()
                c.sock.close()
                return
            c.sock = sock
        reader = Reader(sock)
        try:
            while not self.stopping.is_set():
                if not self._serve_one(c, reader):
                    break
        except (Closed, OSError):
            pass
        except HTTPError as e:
            with self.cond:
                self.errors.append("conn %d: %s" % (c.id, e))
        finally:
            self._mark_closed(c)
            try:
                sock.close()
            except OSError:
                pass

    def _serve_one(self, c, reader):
        try:
            head = reader.read_until(b"\r\n\r\n", limit=1 << 20)
        except Closed:
            return False
        req = UpstreamRequest()
        req.head_time = time.monotonic()
        req.conn_id = c.id
        first, req.headers = parse_head(head)
        parts = first.split(" ")
        if len(parts) != 3:
            raise HTTPError("bad request line %r" % first)
        req.method, req.target, req.version = parts
        with self.cond:
            c.partial += 1
        body_hold = req.header("X-Test-Body-Hold")
        if body_hold is not None:
            with self.cond:
                ev = self.holds.setdefault(body_hold, threading.Event())
                if self.release_everything:
                    ev.set()
            if self._wait(c, event=ev) != "released":
                return False
        discard = req.header("X-Test-Discard") is not None
        te = req.header("Transfer-Encoding")
        cl = req.header("Content-Length")
        crc = [0, 0]

        def sink(view):
            crc[0] = zlib.crc32(view, crc[0])
            crc[1] += len(view)

        if te is not None:
            if te.lower() != "chunked":
                raise HTTPError("transfer-encoding %r" % te)
            if discard:
                read_chunked(reader, sink)
            else:
                req.body = read_chunked(reader)
        elif cl is not None:
            n = int(cl)
            if discard:
                reader.stream(n, sink)
            else:
                req.body = reader.read_exact(n)
        if discard:
            req.body_crc, req.body_len = crc
        else:
            req.body_len = len(req.body)
            req.body_crc = zlib.crc32(req.body)
        req.arrival = time.monotonic()
        with self.cond:
            c.partial -= 1
            c.requests += 1
            self._seq += 1
            req.seq = self._seq
            self.requests.append(req)
            self.cond.notify_all()
        return self._answer(c, reader, req)

    def _answer(self, c, reader, req):
        sock = c.sock
        delay = req.header("X-Test-Delay-Ms")
        if delay is not None:
            how = self._wait(c, deadline=time.monotonic() + int(delay) / 1e3)
            if how != "timeout":
                req.outcome = how
                return False
        hold = req.header("X-Test-Hold")
        if hold is not None:
            with self.cond:
                ev = self.holds.setdefault(hold, threading.Event())
                if self.release_everything:
                    ev.set()
            how = self._wait(c, event=ev)
            if how == "closed" and req.header("X-Test-Apply-Late"):
                return self._apply_late(req, ev)
            if how != "released":
                req.outcome = how
                return False
        if req.header("X-Test-Drop") is not None:
            req.outcome = "dropped"
            return False
        if req.header("X-Test-Garbage") is not None:
            req.answered = time.monotonic()
            sock.sendall(b"HELLO THERE\r\nthis is not http\r\n\r\n")
            req.outcome = "garbage"
            return False
        stall = req.header("X-Test-Stall")
        if stall is not None:
            # promise 1 MiB, send stall bytes of it, then go quiet
            req.answered = time.monotonic()
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n"
                         b"\r\n" + PATTERN[:int(stall)])
            req.outcome = self._wait(c)
            return False
        raw = req.header("X-Test-Raw-Response")
        if raw is not None:
            req.answered = time.monotonic()
            sock.sendall(bytes.fromhex(raw))
            req.outcome = "raw"
            return req.header("X-Test-Close") is None
        status = int(req.header("X-Test-Status") or 200)
        size = req.header("X-Test-Body-Size")
        close = req.header("X-Test-Close") is not None
        close_after = req.header("X-Test-Close-After") is not None
        delimited = req.header("X-Test-Close-Delimited") is not None
        chunk = req.header("X-Test-Chunked") is not None
        if req.header("X-Test-Echo") is not None:
            body = req.body
        elif size is not None:
            body = None
        else:
            body = b"ok %s %s\n" % (req.method.encode(), req.target.encode())
        length = int(size) if size is not None else len(body)
        lines = ["HTTP/1.1 %d Test" % status,
                 "X-Upstream-Conn: %d" % c.id,
                 "X-Upstream-Seq: %d" % req.seq,
                 "X-Echo-Target: %s" % req.target,
                 "X-Body-Len: %d" % req.body_len,
                 "X-Body-Crc: %d" % req.body_crc]
        for h in req.header_all("X-Test-Resp-Header"):
            lines.append(h)
        nobody = req.method == "HEAD" or status in (204, 304) or \
            100 <= status < 200
        if delimited:
            close = True
        elif chunk and not nobody:
            lines.append("Transfer-Encoding: chunked")
        elif status not in (204, 304) and not 100 <= status < 200:
            lines.append("Content-Length: %d" % length)
        if close:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        req.answered = req.applied = time.monotonic()
        sock.sendall(head)
        split = req.header("X-Test-Split-Ms")
        if split is not None:
            time.sleep(int(split) / 1e3)
        if not nobody:
            self._send_body(sock, body, length, chunk and not delimited)
        req.outcome = "answered"
        if close or close_after:
            return False
        return True

    def _apply_late(self, req, ev):
        """A backend that goes on with a write whose client is gone: it
        takes effect at the release."""
        while not ev.wait(0.01):
            if self.stopping.is_set():
                req.outcome = "stopped"
                return False
        with self.cond:
            req.applied = time.monotonic()
            req.outcome = "applied-late"
            self.cond.notify_all()
        return False

    def _send_body(self, sock, body, length, chunk):
        if body is None:
            view = memoryview(PATTERN)
            left = length
            while left > 0:
                n = min(left, len(PATTERN))
                if chunk:
                    sock.sendall(b"%x\r\n" % n)
                sock.sendall(view[:n])
                if chunk:
                    sock.sendall(b"\r\n")
                left -= n
                with self.cond:
                    self.sent_bytes += n
        elif chunk:
            for i in range(0, len(body), 5):
                piece = body[i:i + 5]
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        else:
            sock.sendall(body)
        if chunk:
            sock.sendall(b"0\r\n\r\n")


def assert_holders_in_turn(grants, upstream):
    """grants: (fence, granted_at, release_started_at) of each holder of
    one lock, each of which wrote its fence as the body of one request.
    Fences are unique, each lease starts after the previous holder began
    its release, and the upstream saw the writes in fence order. Returns
    the fences, in order."""
    grants.sort()
    fences = [g[0] for g in grants]
    assert len(set(fences)) == len(fences)
    for prev, nxt in zip(grants, grants[1:]):
        assert nxt[1] > prev[2], (prev, nxt)
    seen = [int(r.body) for r in upstream.requests]
    assert seen == fences
    return fences
