"""Fixtures for tidemark's black-box integration tests.

Everything here drives the real binary (TIDEMARK_BIN, default ./tidemark)
against a recording upstream written with raw sockets, so the tests can
assert on the exact bytes each side saw. Standard library and pytest only.
"""

import http.client
import json
import os
import re
import select
import signal
import random
import socket
import subprocess
import threading
import time
import urllib.parse
import zlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("TIDEMARK_BIN", REPO / "tidemark")).resolve()
FAILSYNC = REPO / "tests" / "preload" / "failsync.so"

SANITIZER_MARKS = (
    "AddressSanitizer",
    "LeakSanitizer",
    "UndefinedBehaviorSanitizer",
    "runtime error:",
)

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


_EPHEMERAL = _ephemeral_range()
_rng = random.Random()
_given = set()   # never hand out one port twice: servers may not bind yet


def free_port():
    """A loopback port nothing listens on right now. Taken from outside
    the kernel's ephemeral range, so that no outgoing connection (of the
    tests, of tidemark, of a store) can be handed the same port between
    now and the moment a server binds it."""
    lo, hi = _EPHEMERAL
    candidates = [(1025, lo - 1)] if lo > 11025 else []
    if hi < 64535:
        candidates.append((hi + 1, 65535))
    for _ in range(200):
        if not candidates:
            break
        a, b = _rng.choice(candidates)
        port = _rng.randint(max(a, 10000) if b > 10000 else a, b)
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


@pytest.fixture
def port():
    return free_port()


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


# ------------------------------------------------------- HTTP messages


class HTTPError(Exception):
    """The peer sent something that is not a valid HTTP message."""


class Closed(Exception):
    """The peer closed the connection before a complete message."""


class Reader:
    """Buffered reads from a socket; keeps bytes past one message."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()
        self.eof = False

    def _fill(self, n=65536):
        if self.eof:
            return False
        try:
            data = self.sock.recv(n)
        except ConnectionResetError:
            data = b""
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def read_until(self, sep, limit=1 << 20):
        start = 0
        while True:
            i = self.buf.find(sep, start)
            if i >= 0:
                out = bytes(self.buf[:i + len(sep)])
                del self.buf[:i + len(sep)]
                return out
            start = max(0, len(self.buf) - len(sep) + 1)
            if len(self.buf) > limit:
                raise HTTPError("no %r within %d bytes" % (sep, limit))
            if not self._fill():
                raise Closed(bytes(self.buf))

    def read_exact(self, n):
        while len(self.buf) < n:
            if not self._fill(max(65536, n - len(self.buf))):
                raise Closed(bytes(self.buf))
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def stream(self, n, sink, bufsize=1 << 20):
        """Pass n bytes to sink(memoryview) without keeping them."""
        if self.buf:
            take = min(n, len(self.buf))
            sink(memoryview(bytes(self.buf[:take])))
            del self.buf[:take]
            n -= take
        if n == 0:
            return
        block = bytearray(bufsize)
        view = memoryview(block)
        while n > 0:
            try:
                got = self.sock.recv_into(view, min(n, bufsize))
            except ConnectionResetError:
                got = 0
            if got == 0:
                self.eof = True
                raise Closed(b"")
            sink(view[:got])
            n -= got

    def read_to_eof(self, sink=None):
        while self._fill():
            if sink is not None:
                sink(memoryview(bytes(self.buf)))
                del self.buf[:]
        if sink is None:
            out = bytes(self.buf)
            del self.buf[:]
            return out
        return b""


def parse_head(head):
    """Split a head into its first line and a list of (name, value)."""
    text = head.decode("latin-1")
    lines = text[:-4].split("\r\n")
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise HTTPError("bad header line %r" % line)
        headers.append((name, value.strip(" \t")))
    return lines[0], headers


def header_get(headers, name):
    name = name.lower()
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


def header_all(headers, name):
    name = name.lower()
    return [v for k, v in headers if k.lower() == name]


def read_chunked(reader, sink=None):
    """Decode a chunked body; returns it (or b"" with a sink)."""
    out = bytearray()
    while True:
        line = reader.read_until(b"\r\n", limit=65536)
        size_s = line[:-2].split(b";", 1)[0].strip()
        try:
            size = int(size_s, 16)
        except ValueError:
            raise HTTPError("bad chunk size %r" % line)
        if size == 0:
            break
        if sink is not None:
            reader.stream(size, sink)
        else:
            out += reader.read_exact(size)
        if reader.read_exact(2) != b"\r\n":
            raise HTTPError("no CRLF after chunk data")
    # trailer section
    while True:
        line = reader.read_until(b"\r\n", limit=65536)
        if line == b"\r\n":
            break
    return bytes(out)


class Response:
    def __init__(self, version, status, reason, headers, body, raw_head):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body
        self.raw_head = raw_head

    def header(self, name):
        return header_get(self.headers, name)

    def header_all(self, name):
        return header_all(self.headers, name)

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "<Response %d %r %r>" % (self.status, self.headers,
                                         self.body[:200])


def read_response(reader, head_request=False, sink=None,
                  skip_interim=True):
    """Read one response from reader. With sink the body is streamed to
    it (and Response.body is b"")."""
    while True:
        head = reader.read_until(b"\r\n\r\n", limit=1 << 20)
        first, headers = parse_head(head)
        m = re.match(r"^HTTP/(\d\.\d) (\d{3})(?: (.*))?$", first)
        if not m:
            raise HTTPError("bad status line %r" % first)
        status = int(m.group(2))
        if 100 <= status < 200 and skip_interim and status != 101:
            continue
        break
    te = header_get(headers, "transfer-encoding")
    cl = header_get(headers, "content-length")
    if head_request or status in (204, 304) or 100 <= status < 200:
        body = b""
    elif te is not None and te.lower().endswith("chunked"):
        body = read_chunked(reader, sink)
    elif cl is not None:
        n = int(cl)
        if sink is not None:
            reader.stream(n, sink)
            body = b""
        else:
            body = reader.read_exact(n)
    else:
        body = reader.read_to_eof(sink)
    return Response(m.group(1), status, m.group(3) or "", headers, body,
                    head)


def build_request(method, target, headers=(), body=b"", host="client.test",
                  version="HTTP/1.1", content_length=True):
    """Bytes of one request. headers: list of (name, value) or a dict."""
    if isinstance(headers, dict):
        headers = list(headers.items())
    lines = ["%s %s %s" % (method, target, version)]
    if host is not None:
        lines.append("Host: %s" % host)
    names = {k.lower() for k, _ in headers}
    for k, v in headers:
        lines.append("%s: %s" % (k, v))
    if content_length and "content-length" not in names and \
            "transfer-encoding" not in names and \
            (body or method in ("PUT", "POST", "PATCH")):
        lines.append("Content-Length: %d" % len(body))
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def chunked(body, size=7, ext=False, trailers=()):
    """Encode body as chunks of at most size bytes."""
    out = bytearray()
    for i in range(0, len(body), size):
        piece = body[i:i + size]
        out += b"%x%s\r\n" % (len(piece), b";x=y" if ext else b"")
        out += piece + b"\r\n"
    out += b"0\r\n"
    for k, v in trailers:
        out += ("%s: %s\r\n" % (k, v)).encode()
    out += b"\r\n"
    return bytes(out)


class Conn:
    """A raw client connection."""

    def __init__(self, port, timeout=10.0, host="127.0.0.1"):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.reader = Reader(self.sock)

    def send(self, data):
        self.sock.sendall(data)

    def request(self, method, target, headers=(), body=b"", **kw):
        self.send(build_request(method, target, headers, body, **kw))
        return self.read_response(head_request=(method == "HEAD"))

    def read_response(self, head_request=False, sink=None, timeout=None):
        self.sock.settimeout(timeout if timeout is not None
                             else self.timeout)
        return read_response(self.reader, head_request, sink)

    def closed(self, timeout=2.0):
        """True when the peer closes (or resets) within timeout with no
        more bytes; False when it stays open or sends data."""
        if self.reader.buf:
            return False
        if self.reader.eof:
            return True
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            r, _, _ = select.select([self.sock], [], [], left)
            if not r:
                return False
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                return True
            except OSError:
                return True
            if not data:
                self.reader.eof = True
                return True
            self.reader.buf += data
            return False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


def token_headers(token=None, resource=None, extra=()):
    h = []
    if token is not None:
        h.append(("Fencing-Token", str(token)))
    if resource is not None:
        h.append(("Fencing-Resource", resource))
    h.extend(extra)
    return h


def assert_problem(resp, status):
    """A problem+json answer tidemark made itself."""
    assert resp.status == status, resp
    ctype = resp.header("Content-Type") or ""
    assert ctype.split(";")[0].strip().lower() == \
        "application/problem+json", resp
    doc = resp.json()
    for field in ("type", "title", "status", "detail"):
        assert field in doc, (field, doc)
    assert doc["status"] == status, doc
    # Every answer tidemark makes itself says so in a header: the short
    # name of its problem type.
    assert resp.header("Tidemark-Error") == \
        doc["type"].rsplit(":", 1)[-1], resp
    return doc


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


# ------------------------------------------------------------ upstream


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

    def __init__(self, tls=None, host="127.0.0.1"):
        # tls: an ssl.SSLContext (server side) to serve HTTPS instead.
        # host: the one address listened on ("::1": IPv6 only).
        self.tls = tls
        self.tls_failures = 0
        v6 = ":" in host
        self.lsock = socket.socket(
            socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if v6:
            self.lsock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        self.lsock.bind((host, 0))
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


@pytest.fixture
def upstream():
    u = Upstream()
    yield u
    u.stop()
    assert not u.errors, "upstream saw malformed traffic: %r" % u.errors


@pytest.fixture
def upstream_factory():
    made = []

    def make():
        u = Upstream()
        made.append(u)
        return u

    yield make
    for u in made:
        u.stop()


# ------------------------------------------------------------ tidemark


def render_ini(sections):
    out = []
    for name, keys in sections.items():
        if keys is None:
            continue
        out.append("[%s]" % name)
        for k, v in keys.items():
            if v is None:
                continue
            # A list is a repeatable key given once per value.
            for one in (v if isinstance(v, list) else [v]):
                out.append("%s = %s" % (k, one))
        out.append("")
    return "\n".join(out)


DEFAULT_ROUTE = {
    "methods": "PUT POST PATCH DELETE",
    "path": "/v1/documents/{doc}",
    "resource": "documents/{doc}",
    "mode": "correctness",
    "upstream": "default",
}


def child_env(extra=None):
    """The environment tidemark runs with: ours without TIDEMARK_*
    variables (make sets TIDEMARK_BIN; tidemark refuses unknown ones),
    plus extra."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TIDEMARK_")}
    env.update(extra or {})
    return env


class Tidemark:
    """One tidemark process with its config, log and store."""

    def __init__(self, workdir, upstream=None, config=None, env=None,
                 ini=None):
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.admin_port = free_port()
        self.store_path = str(self.dir / "marks.lmdb")
        self.log_path = self.dir / "tidemark.log"
        self.ini_path = self.dir / "tidemark.ini"
        self.env = dict(env or {})
        self.proc = None
        self.runs = []      # (proc, expected): every process started
        self.upstream = upstream
        if ini is not None:
            text = ini
        else:
            sections = {
                "proxy": {"listen": "127.0.0.1:%d" % self.port,
                          "log_level": "info"},
                "admin": {"listen": "127.0.0.1:%d" % self.admin_port},
                "store": {"type": "lmdb", "path": self.store_path},
            }
            if upstream is not None:
                sections["upstream default"] = {"url": upstream.url}
            config = dict(config or {})
            if not any(k.startswith("route ") for k in config):
                sections["route docs"] = dict(DEFAULT_ROUTE)
            for name, keys in config.items():
                if keys is None:
                    sections.pop(name, None)
                elif name in sections:
                    merged = dict(sections[name])
                    merged.update(keys)
                    sections[name] = merged
                else:
                    sections[name] = dict(keys)
            text = render_ini(sections)
        self.ini_path.write_text(text)

    # -- life cycle

    def start(self, wait=True, extra_env=None):
        assert self.proc is None or self.proc.poll() is not None
        env = child_env(self.env)
        env.update(extra_env or {})
        if is_asan():
            # Keep freed memory from dominating RSS; let LD_PRELOAD shims
            # load before the sanitizer runtime.
            opts = env.get("ASAN_OPTIONS", "")
            extra = "quarantine_size_mb=16:verify_asan_link_order=0"
            env["ASAN_OPTIONS"] = (opts + ":" + extra) if opts else extra
        log = open(self.log_path, "ab")
        log.write(b"==== start %f\n" % time.time())
        log.flush()
        self.proc = subprocess.Popen(
            [str(BIN), "-c", str(self.ini_path)], stdin=subprocess.DEVNULL,
            stdout=log, stderr=log, env=env, cwd=str(self.dir))
        log.close()
        self.runs.append([self.proc, "running"])
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout=10.0):
        deadline = time.monotonic() + timeout * slow()
        while True:
            rc = self.proc.poll()
            if rc is not None:
                self.runs[-1][1] = "failed-start"
                raise AssertionError("tidemark exited with %s at start:\n%s"
                                     % (rc, self.log()[-4000:]))
            if self._healthy() and self._listening():
                return
            if time.monotonic() >= deadline:
                raise AssertionError("tidemark not ready after %.0fs:\n%s"
                                     % (timeout, self.log()[-4000:]))
            time.sleep(0.02)

    def _healthy(self):
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.admin_port,
                                           timeout=1)
            c.request("GET", "/healthz")
            ok = c.getresponse().status == 200
            c.close()
            return ok
        except OSError:
            return False

    def _listening(self):
        try:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=1)
            s.close()
            return True
        except OSError:
            return False

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=15.0):
        """SIGTERM; the process must exit 0 on its own."""
        p = self.proc
        if p is None or p.poll() is not None:
            return p.returncode if p else None
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=timeout * slow())
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            self.runs[-1][1] = "hung"
            raise AssertionError("tidemark did not stop on SIGTERM:\n%s"
                                 % self.log()[-4000:])
        self.runs[-1][1] = "stopped"
        return rc

    def kill9(self):
        p = self.proc
        p.send_signal(signal.SIGKILL)
        p.wait()
        self.runs[-1][1] = "killed"

    def restart(self, **kw):
        rc = self.stop()
        assert rc == 0, "tidemark exited %s on SIGTERM:\n%s" % (
            rc, self.log()[-4000:])
        return self.start(**kw)

    def check_teardown(self):
        problems = []
        for entry in self.runs:
            p, state = entry
            if state == "running":
                rc = p.poll()
                if rc is not None:
                    problems.append("tidemark died during the test (exit %s)"
                                    % rc)
                    continue
                p.send_signal(signal.SIGTERM)
                try:
                    rc = p.wait(timeout=15 * slow())
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                    problems.append("tidemark did not stop on SIGTERM")
                    continue
                if rc != 0:
                    problems.append("tidemark exited %s on SIGTERM" % rc)
            elif state == "stopped" and p.returncode != 0:
                problems.append("tidemark exited %s on SIGTERM"
                                % p.returncode)
        log = self.log()
        for mark in SANITIZER_MARKS:
            if mark in log:
                problems.append("sanitizer report in the log (%s)" % mark)
        if problems:
            raise AssertionError("; ".join(problems) + "\n--- log tail:\n"
                                 + log[-6000:])

    # -- observation

    def log(self):
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_lines(self, *needles):
        """Log lines containing every needle."""
        return [ln for ln in self.log().splitlines()
                if all(n in ln for n in needles)]

    def wait_log(self, *needles, timeout=5.0, count=1):
        return wait_until(lambda: len(self.log_lines(*needles)) >= count
                          and self.log_lines(*needles),
                          timeout * slow(), "log line with %r" % (needles,))

    def status(self, field):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        raise KeyError(field)

    # -- traffic

    def conn(self, timeout=10.0):
        return Conn(self.port, timeout=timeout * slow())

    def request(self, method, target, token=None, resource=None, headers=(),
                body=b"", timeout=10.0, **kw):
        if isinstance(headers, dict):
            headers = list(headers.items())
        with self.conn(timeout) as c:
            return c.request(method, target,
                             token_headers(token, resource, headers), body,
                             **kw)

    def put(self, doc, token=None, body=b"data", headers=(), **kw):
        return self.request("PUT", "/v1/documents/%s" % doc, token=token,
                            body=body, headers=headers, **kw)

    def admin(self, method, path, timeout=5.0):
        c = http.client.HTTPConnection("127.0.0.1", self.admin_port,
                                       timeout=timeout * slow())
        try:
            c.request(method, path)
            r = c.getresponse()
            body = r.read()
            return r.status, dict((k.lower(), v) for k, v in
                                  r.getheaders()), body
        finally:
            c.close()

    def mark(self, resource):
        """The mark on the control port, None when it has none. resource
        is percent-encoded text, as in the URL; the answer names the
        resource decoded (its canonical form)."""
        st, _, body = self.admin("GET", "/v1/marks/%s" % resource)
        if st == 404:
            return None
        assert st == 200, (st, body)
        doc = json.loads(body)
        assert doc["resource"] == urllib.parse.unquote(resource), doc
        return doc["high_water"]


@pytest.fixture
def tidemark(tmp_path, upstream):
    """Factory: tidemark(config=dict, env=dict, ini=str, start=True).

    config maps section names to key dicts merged over a default config
    (proxy/admin on free ports, an lmdb store in tmp_path, upstream
    default = the recording upstream, route docs for
    /v1/documents/{doc}); a None value drops a key or section; giving any
    "route ..." section replaces the default route."""
    made = []

    def make(config=None, env=None, ini=None, start=True, up=upstream,
             name=None):
        d = tmp_path / (name or "tm%d" % len(made))
        tm = Tidemark(d, upstream=up, config=config, env=env, ini=ini)
        made.append(tm)
        if start:
            tm.start()
        return tm

    yield make
    upstream.release_all()
    errors = []
    for tm in made:
        try:
            tm.check_teardown()
        except AssertionError as e:
            errors.append(str(e))
    if errors:
        pytest.fail("\n\n".join(errors), pytrace=False)


def run_check(path, env=None, timeout=20):
    """tidemark -c path --check: (exit code, stderr lines)."""
    p = subprocess.run([str(BIN), "-c", str(path), "--check"],
                       stdin=subprocess.DEVNULL, capture_output=True,
                       cwd=str(Path(path).parent),
                       env=child_env(env), timeout=timeout * slow())
    err = p.stderr.decode(errors="replace")
    for mark in SANITIZER_MARKS:
        assert mark not in err, err
    return p.returncode, [ln for ln in err.splitlines() if ln.strip()]


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "lengths: names and values from outside in each length "
        "class and with odd bytes (make test-sanitize runs them)")


@pytest.fixture(scope="session", autouse=True)
def _binary():
    if not BIN.exists():
        pytest.exit("TIDEMARK_BIN %s does not exist: run make" % BIN,
                    returncode=1)


# ------------------------------------------------------- store servers


# Routes for store tests: one correctness, one efficiency.
STORE_ROUTES = {
    "route docs": {"path": "/v1/documents/{doc}",
                   "resource": "documents/{doc}", "mode": "correctness"},
    "route eff": {"path": "/v1/eff/{doc}", "resource": "eff/{doc}",
                  "mode": "efficiency"},
}


class StoreUnderTest:
    """A store kind and, for network stores, its server (shared by the
    session, started again if a test left it stopped)."""

    def __init__(self, kind, server):
        self.kind = kind
        self.server = server

    def section(self, **extra):
        """The [store] keys for a tidemark on this store."""
        if self.kind == "lmdb":
            keys = {"type": "lmdb"}
        elif self.kind == "postgres":
            keys = {"type": "postgres", "dsn": self.server.dsn,
                    "path": None}
        elif self.kind == "redis":
            keys = {"type": "redis", "url": self.server.url, "path": None}
        elif self.kind == "redis-cluster":
            keys = {"type": "redis", "url": self.server.url, "cluster": "yes",
                    "path": None}
        else:
            keys = {"type": "etcd", "endpoints": self.server.endpoints,
                    "path": None}
        keys.update(extra)
        return keys


@pytest.fixture(scope="session")
def store_servers():
    """get(kind): the session's server of that kind, running."""
    import servers
    made = {}

    def get(kind):
        s = made.get(kind)
        if s is None:
            s = servers.KINDS[kind]()
            made[kind] = s
        if not s.running():
            s.start()
        return s

    yield get
    for s in made.values():
        s.destroy()


def wait_ready(tm, want=200, timeout=10.0):
    """Poll /readyz until it answers want."""
    return wait_until(lambda: tm.admin("GET", "/readyz")[0] == want,
                      timeout * slow(), "/readyz %d" % want)


# A process that takes a kazoo Lock and writes through tidemark with its
# node's czxid as Fencing-Token: argv HOSTS LOCK_PATH DOC PORT
# SESSION_TIMEOUT. Prints "token CZXID", then "a1 STATUS" for its first
# PUT /v1/documents/DOC, waits for a line on stdin (the test pauses it
# there with SIGSTOP, past its session), then "a2 STATUS".
KAZOO_HOLDER = r"""
import http.client, sys
from kazoo.client import KazooClient
hosts, path, doc, port, timeout = sys.argv[1], sys.argv[2], sys.argv[3], \
    int(sys.argv[4]), float(sys.argv[5])
zk = KazooClient(hosts=hosts, timeout=timeout)
zk.start()
lock = zk.Lock(path, "paused-holder")
lock.acquire()
czxid = zk.exists(lock.path + "/" + lock.node).czxid

def put(tag):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("PUT", "/v1/documents/" + doc, body=tag.encode(),
              headers={"Fencing-Token": str(czxid), "X-Test-Id": tag})
    r = c.getresponse()
    r.read()
    print(tag, r.status, flush=True)

print("token", czxid, flush=True)
put("a1")
sys.stdin.readline()               # SIGSTOP arrives while waiting here
put("a2")
"""


# ---------------------------------------------------------------- pods


# An application that knows nothing of fencing: argv PORT PATH NAME OUT
# INTERVAL_MS. It PUTs to PATH through its sidecar at PORT in a loop,
# body and X-Test-Id "NAME-SEQ", no Fencing-Token, and appends one JSON
# line per call to OUT: seq, tag, status, Tidemark-Error, start and end
# (time.time()).
APP_WRITER = r"""
import http.client, json, sys, time
port, path, name, out, interval = int(sys.argv[1]), sys.argv[2], \
    sys.argv[3], sys.argv[4], int(sys.argv[5]) / 1000.0
seq = 0
with open(out, "a") as f:
    while True:
        seq += 1
        tag = "%s-%d" % (name, seq)
        rec = {"seq": seq, "tag": tag, "t0": time.time()}
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("PUT", path, body=tag.encode(),
                      headers={"X-Test-Id": tag})
            r = c.getresponse()
            r.read()
            rec["status"] = r.status
            rec["error"] = r.getheader("Tidemark-Error")
            c.close()
        except OSError as e:
            rec["status"] = None
            rec["error"] = type(e).__name__
        rec["t1"] = time.time()
        f.write(json.dumps(rec) + "\n")
        f.flush()
        time.sleep(interval)
"""


class Pod:
    """An application process (APP_WRITER) and its sidecar (a Tidemark),
    paused and resumed together, as a whole pod is when its node stalls."""

    def __init__(self, tm, name, path, interval_ms=50):
        self.tm = tm
        self.name = name
        self.path = path
        self.interval_ms = interval_ms
        self.out = tm.dir / "app.jsonl"
        self.app = None

    def start_app(self):
        assert self.app is None
        self.app = subprocess.Popen(
            ["/usr/bin/python3", "-c", APP_WRITER, str(self.tm.port),
             self.path, self.name, str(self.out), str(self.interval_ms)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(self.tm.dir / "app.err", "ab"))
        return self

    def pids(self):
        return [p.pid for p in (self.app, self.tm.proc)
                if p is not None and p.poll() is None]

    def pause(self):
        for pid in self.pids():
            os.kill(pid, signal.SIGSTOP)

    def resume(self):
        for pid in self.pids():
            os.kill(pid, signal.SIGCONT)

    def sent(self):
        """The application's calls so far, in order (dicts)."""
        try:
            lines = self.out.read_text().splitlines()
        except OSError:
            return []
        return [json.loads(ln) for ln in lines if ln.endswith("}")]

    def wait_sent(self, pred, timeout, what):
        """Poll until pred(call) holds for a call made after now; it."""
        start = len(self.sent())
        return wait_until(
            lambda: next((c for c in self.sent()[start:] if pred(c)), None),
            timeout * slow(), "%s: %s" % (self.name, what))

    def lease(self, carrier="app"):
        st, _, body = self.tm.admin("GET", "/v1/leases/%s" % carrier)
        assert st == 200, (st, body)
        return json.loads(body)

    def wait_state(self, state, timeout, carrier="app"):
        return wait_until(
            lambda: (lambda d: d if d["state"] == state else None)(
                self.lease(carrier)),
            timeout * slow(), "%s's carrier %s" % (self.name, state))

    def stop_app(self):
        if self.app is not None and self.app.poll() is None:
            self.app.send_signal(signal.SIGCONT)
            self.app.kill()
            self.app.wait()


@pytest.fixture
def pods(tidemark):
    """Factory: pods(name, config) -> Pod with its sidecar started (not
    its application: pod.start_app()). Every application is killed and
    every paused process resumed at the end, before the sidecars'
    teardown checks."""
    made = []

    def make(name, config, path="/v1/documents/d", interval_ms=50):
        tm = tidemark(config=config, name=name)
        pod = Pod(tm, name, path, interval_ms)
        made.append(pod)
        return pod

    yield make
    for pod in made:
        pod.stop_app()
        if pod.tm.alive():
            os.kill(pod.tm.proc.pid, signal.SIGCONT)
