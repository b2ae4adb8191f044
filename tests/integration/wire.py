"""The client side of HTTP/1.1 on raw sockets: a buffered reader, the
parsing of heads, chunked bodies and responses, requests built byte by
byte (so a test can send what no library would), a raw connection, and
the check of a problem+json answer tidemark makes itself. Standard library
only.
"""

import json
import re
import select
import socket
import time


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
        # port: a TCP port, or a Unix socket's path (a str).
        if isinstance(port, str):
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(port)
        else:
            self.sock = socket.create_connection((host, port),
                                                 timeout=timeout)
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
