"""Bodies are streamed both ways with back-pressure: memory stays bounded
whatever the body size."""

import socket
import threading
import time
import zlib

from common import is_asan, slow, wait_until
from upstream import PATTERN
from wire import build_request

MiB = 1024 * 1024
# The contract: a 512 MiB upload passes with peak RSS under 64 MiB. A
# sanitizer build has shadow memory and allocator overhead of its own
# (its quarantine is capped at 16 MiB by the fixture), so it gets a looser
# bound that still proves the body is not buffered.
RSS_LIMIT = (128 if is_asan() else 64) * MiB


def upload(c, target, size, headers):
    """Send a PUT of size bytes of PATTERN; returns the CRC sent."""
    c.send(build_request("PUT", target, headers + [
        ("Content-Length", str(size))], content_length=False))
    view = memoryview(PATTERN)
    crc = 0
    left = size
    while left > 0:
        n = min(left, len(PATTERN))
        c.sock.sendall(view[:n])
        crc = zlib.crc32(view[:n], crc)
        left -= n
    return crc


def test_512mib_upload_with_bounded_memory(tidemark, upstream):
    tm = tidemark()
    size = 512 * MiB
    with tm.conn(timeout=120) as c:
        crc = upload(c, "/v1/documents/big", size, [
            ("Fencing-Token", "1"), ("X-Test-Discard", "1"),
            ("X-Test-Id", "upload")])
        r = c.read_response(timeout=120 * slow())
    assert r.status == 200, r
    assert r.header("Fencing-High-Water") == "1"
    assert r.header("X-Body-Len") == str(size), r
    assert r.header("X-Body-Crc") == str(crc), r
    hwm = tm.status("VmHWM")
    assert hwm < RSS_LIMIT, "peak RSS %.1f MiB" % (hwm / MiB)


def test_chunked_upload_streams(tidemark, upstream):
    tm = tidemark()
    size = 96 * MiB
    piece = PATTERN[:65536 + 7]
    with tm.conn(timeout=120) as c:
        c.send(build_request("PUT", "/v1/documents/chunky", [
            ("Fencing-Token", "1"), ("X-Test-Discard", "1"),
            ("Transfer-Encoding", "chunked")]))
        crc = 0
        left = size
        while left > 0:
            n = min(left, len(piece))
            c.sock.sendall(b"%x\r\n" % n + piece[:n] + b"\r\n")
            crc = zlib.crc32(piece[:n], crc)
            left -= n
        c.sock.sendall(b"0\r\n\r\n")
        r = c.read_response(timeout=120 * slow())
    assert r.status == 200, r
    assert r.header("X-Body-Len") == str(size), r
    assert r.header("X-Body-Crc") == str(crc), r
    assert tm.status("VmHWM") < RSS_LIMIT


def _download(c, size, extra=()):
    c.send(build_request("GET", "/download", [
        ("X-Test-Body-Size", str(size))] + list(extra)))
    got = [0, 0]

    def sink(view):
        got[0] = zlib.crc32(view, got[0])
        got[1] += len(view)

    r = c.read_response(sink=sink, timeout=120 * slow())
    return r, got


def _pattern_crc(size):
    crc = 0
    left = size
    view = memoryview(PATTERN)
    while left > 0:
        n = min(left, len(PATTERN))
        crc = zlib.crc32(view[:n], crc)
        left -= n
    return crc


def test_large_download_with_bounded_memory(tidemark, upstream):
    tm = tidemark()
    size = 384 * MiB
    with tm.conn(timeout=120) as c:
        r, (crc, n) = _download(c, size)
    assert r.status == 200, r
    assert n == size
    assert crc == _pattern_crc(size)
    assert tm.status("VmHWM") < RSS_LIMIT


def test_chunked_download(tidemark, upstream):
    tm = tidemark()
    size = 64 * MiB + 3
    with tm.conn(timeout=120) as c:
        r, (crc, n) = _download(c, size, [("X-Test-Chunked", "1")])
        assert r.status == 200, r
        assert n == size and crc == _pattern_crc(size)
        # still in step afterwards
        r = c.request("GET", "/next")
        assert r.header("X-Echo-Target") == "/next"


def test_slow_reader_applies_back_pressure(tidemark, upstream):
    """A client that stops reading makes tidemark stop reading the
    upstream: the upstream's sends stall well before the whole body."""
    tm = tidemark()
    size = 512 * MiB
    c = tm.conn(timeout=120)
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    try:
        c.send(build_request("GET", "/download",
                             [("X-Test-Body-Size", str(size))]))
        last = [-1, time.monotonic()]

        def stalled():
            with upstream.cond:
                sent = upstream.sent_bytes
            now = time.monotonic()
            if sent != last[0]:
                last[0], last[1] = sent, now
                return False
            return sent > 0 and now - last[1] > 0.5

        wait_until(stalled, 30 * slow(), "the upstream's sends to stall")
        with upstream.cond:
            sent = upstream.sent_bytes
        assert sent < 128 * MiB, "upstream pushed %d MiB to a client that " \
            "read nothing" % (sent // MiB)
        assert tm.status("VmRSS") < RSS_LIMIT
        got = [0, 0]

        def sink(view):
            got[0] = zlib.crc32(view, got[0])
            got[1] += len(view)

        r = c.read_response(sink=sink, timeout=120 * slow())
        assert r.status == 200
        assert got[1] == size and got[0] == _pattern_crc(size)
    finally:
        c.close()
    assert tm.status("VmHWM") < RSS_LIMIT


def test_slow_upstream_reader_applies_back_pressure(tidemark, upstream):
    """An upstream that does not read the body yet: the client's upload
    stalls; tidemark does not soak it up."""
    tm = tidemark()
    size = 512 * MiB
    c = tm.conn(timeout=120)
    sent = [0]
    crc = [0]

    def send():
        try:
            view = memoryview(PATTERN)
            left = size
            while left > 0:
                n = min(left, len(PATTERN))
                c.sock.sendall(view[:n])
                crc[0] = zlib.crc32(view[:n], crc[0])
                sent[0] += n
                left -= n
        except OSError:
            pass

    c.send(build_request("PUT", "/v1/documents/slow", [
        ("Fencing-Token", "1"), ("X-Test-Discard", "1"),
        ("X-Test-Body-Hold", "body"), ("Content-Length", str(size))],
        content_length=False))
    t = threading.Thread(target=send)
    t.start()
    try:
        last = [-1, time.monotonic()]

        def stalled():
            now = time.monotonic()
            if sent[0] != last[0]:
                last[0], last[1] = sent[0], now
                return False
            return now - last[1] > 0.5

        wait_until(stalled, 30 * slow(), "the client's upload to stall")
        assert sent[0] < 128 * MiB, "tidemark took %d MiB while the " \
            "upstream read nothing" % (sent[0] // MiB)
        assert tm.status("VmRSS") < RSS_LIMIT
        upstream.release("body")
        t.join(120 * slow())
        r = c.read_response(timeout=120 * slow())
        assert r.status == 200, r
        assert r.header("X-Body-Len") == str(size)
        assert r.header("X-Body-Crc") == str(crc[0])
    finally:
        upstream.release("body")
        t.join(30)
        c.close()
    assert tm.status("VmHWM") < RSS_LIMIT
