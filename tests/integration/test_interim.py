"""Interim answers (1xx) from the upstream: each is passed on to an
HTTP/1.1 client as it comes, and the upstream is read no faster than the
client takes them, so an upstream that sends them without end (broken,
hostile, or a WebDAV server's 102 Processing over a long operation to a
client that has stopped reading) cannot grow the proxy. The upstream
here is a socket server written for this (the recording upstream always
answers at once)."""

import socket

from common import LoopbackServer, slow, wait_until

INTERIM = b"HTTP/1.1 102 Processing\r\n\r\n"


class InterimUpstream(LoopbackServer):
    """Answers each request with `count` interim answers (None: without
    end, up to 1 GiB), then a 200 with body "hello"; sent counts the
    bytes that left."""

    def __init__(self, count):
        self.count = count
        self.sent = 0
        super().__init__()

    def serve(self, c):
        c.recv(65536)
        batch = INTERIM * 1000
        left = self.count
        while left is None and self.sent < 1 << 30 or left:
            n = 1000 if left is None else min(left, 1000)
            c.sendall(batch[:n * len(INTERIM)])
            self.sent += n * len(INTERIM)
            if left is not None:
                left -= n
        if left == 0:
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
                      b"hello")


def request(tm):
    s = socket.create_connection(("127.0.0.1", tm.port), timeout=10 * slow())
    s.sendall(b"GET /plain HTTP/1.1\r\nHost: a\r\n\r\n")
    return s


def held_back(up):
    """Wait until what the upstream sent stops growing (a second of
    polls): the proxy has stopped reading it."""
    seen = []
    wait_until(lambda: up.sent > 0 and seen.append(up.sent) is None
               and len(seen) > 20 and seen[-1] == seen[-20],
               10 * slow(), "the upstream held back", interval=0.05)


def test_endless_interim_answers_wait_for_the_client(tidemark):
    """A client that sends a request and reads nothing: the proxy holds
    about one buffer_size of interim answers for it and stops reading
    the upstream, which gets to send what the sockets between hold."""
    up = InterimUpstream(None)
    tm = tidemark(up=None, config={"upstream default": {"url": up.url}})
    before = tm.status("VmRSS")
    s = request(tm)
    try:
        held_back(up)
        assert up.sent < 64 << 20, up.sent
        assert tm.status("VmRSS") - before < 32 << 20
    finally:
        s.close()
        up.stop()


def test_many_interim_answers_then_the_answer(tidemark):
    """A million interim answers (44 MiB passed on) to a client that reads
    only once the proxy has stopped reading the upstream: every one
    reaches it, then the final answer."""
    count = 1000000
    up = InterimUpstream(count)
    tm = tidemark(up=None, config={"upstream default": {"url": up.url}})
    s = request(tm)
    got = bytearray()
    try:
        held_back(up)
        assert up.sent < count * len(INTERIM)
        while not got.endswith(b"\r\n\r\nhello"):
            data = s.recv(65536)
            assert data, "closed after %d bytes" % len(got)
            got += data
    finally:
        s.close()
        up.stop()
    heads = bytes(got).split(b"\r\n\r\n")
    assert [h.split(b"\r\n")[0] for h in heads[:-2]] == \
        [b"HTTP/1.1 102 Processing"] * count
    assert heads[-2].startswith(b"HTTP/1.1 200 OK\r\n"), heads[-2]
    assert heads[-1] == b"hello"
