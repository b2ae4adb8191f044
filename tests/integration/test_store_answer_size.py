"""What a store may answer at most, and for how long. A mark store
(Redis, PostgreSQL, etcd) that answers one call with more than 16 MiB
(64 MiB for Redis, whose cluster map can be large), or a reply no command
waits for, or an answer that trickles in without end (a broken server, a
hostile one, or something else on its address) has its connection
dropped: the write gets a 503, nothing reaches the upstream, the proxy's
memory stays bounded, the log says why, and the next write goes through
once the store answers again. Answers under the limit are read whole and
judged as before.

The answers come from servers.Liar, a relay in front of the real server
that answers for it on cue: no real store sends them. The real server
has run the call whose answer the relay replaced (the mark it raised
stays). The lock service reads its Redis, PostgreSQL and etcd answers
through the same clients; its ZooKeeper frames are weighed at their
headers (at the end, with FrameLiar, which puts a frame of its own
before a reply).
"""

import socket
import struct
import time
import uuid

import pytest

import servers
from common import is_asan, wait_until
from daemon import STORE_ROUTES, StoreUnderTest, wait_ready
from wire import assert_problem

MAX = 16 << 20
REDIS_MAX = 64 << 20
# The lies stop at SENT_MAX bytes on each connection (a store has one or
# two), so that a proxy that kept reading would hold a GiB or more, not
# the GROWN_MAX it may grow by here: on each connection 16 MiB of answer
# (Redis: 64), what its reader built of it, and a read's worth more.
SENT_MAX = 1 << 30
GROWN_MAX = 256 << 20


def endless(head, fill=b"x"):
    """head, then fill repeated in 1 MiB chunks up to SENT_MAX."""
    def answer():
        yield head
        chunk = fill * ((1 << 20) // len(fill))
        sent = len(head)
        while sent < SENT_MAX:
            yield chunk
            sent += len(chunk)
    return answer


def once(data):
    """data, whole, in 1 MiB pieces."""
    def answer():
        for i in range(0, len(data), 1 << 20):
            yield data[i:i + (1 << 20)]
    return answer


def trickle(head):
    """head, then a byte every 100 ms for a minute: an answer that never
    stops coming, and never comes."""
    def answer():
        yield head
        for _ in range(600):
            time.sleep(0.1)
            yield b"x"
    return answer


def store_keys(kind, server, port):
    if kind == "redis":
        return {"url": "redis://127.0.0.1:%d" % port}
    if kind == "postgres":
        return {"dsn": server.dsn.replace("port=%d" % server.port,
                                          "port=%d" % port)}
    return {"endpoints": "http://127.0.0.1:%d" % port}


@pytest.fixture
def liars():
    made = []

    def make(port):
        liar = servers.Liar(port)
        made.append(liar)
        return liar

    yield make
    for liar in made:
        liar.stop()


# The store's timeout_ms for the answers weighed here: long, so that what
# drops the connection is the answer's size, not a deadline that a slow
# machine (or a sanitizer build) lets pass first while 64 MiB come.
SLOW_OK_MS = "30000"


def lied(tidemark, upstream, store_servers, liars, kind, answer,
         timeout_ms=SLOW_OK_MS):
    """A tidemark on kind's store (timeout_ms) through a Liar; one write
    accepted (token 5), then one (token 9) that the store answers with
    answer(). Returns the tidemark, the resource, the refused answer and
    how much the proxy grew."""
    server = store_servers(kind)
    liar = liars(server.port)
    cfg = dict(STORE_ROUTES)
    cfg["store"] = StoreUnderTest(kind, server).section(
        **store_keys(kind, server, liar.port), timeout_ms=timeout_ms)
    cfg["proxy"] = {"order_grace_ms": "0"}
    tm = tidemark(config=cfg)
    wait_ready(tm)
    d = uuid.uuid4().hex[:12]
    assert tm.put(d, token=5).status == 200
    before = tm.status("VmRSS")
    liar.lie(answer)
    r = tm.put(d, token=9, headers=[("X-Test-Id", d)], timeout=60)
    grown = tm.status("VmHWM") - before
    liar.lie(None)
    assert tm.proc.poll() is None
    assert upstream.find("X-Test-Id", d) == []
    return tm, d, r, grown


def recovers(tm, d):
    """The next write goes through, on a new connection."""
    wait_until(lambda: tm.put(d, token=11).status == 200, 10,
               "a write accepted once the store answers again")
    assert tm.mark("documents/" + d) == 11


# ------------------------------------------------------------- redis

REDIS_TOO_LARGE = "an answer larger than 64 MiB"


@pytest.mark.parametrize("answer", [
    # A bulk string that says 1 GiB and keeps coming.
    endless(b"$1073741824\r\n"),
    # An array that says two billion elements.
    once(b"*2000000000\r\n"),
    # An array of arrays of 65,536 empty arrays each: 3.5 MiB of replies
    # and slots built for every 256 KiB read.
    endless(b"*1000000\r\n", b"*65536\r\n" + b"*0\r\n" * 65536),
    # Integers, a 48-byte reply built for every 4 bytes read.
    endless(b"*1\r\n*1\r\n*1\r\n*1\r\n*2000000\r\n", b":1\r\n"),
    # A bulk string 64 MiB long, whole.
    once(b"$%d\r\n%s\r\n" % (REDIS_MAX, b"x" * REDIS_MAX)),
], ids=["endless-bulk", "array-header", "arrays-of-arrays", "integers",
        "bulk-64MiB"])
def test_redis_answer_too_large(tidemark, upstream, store_servers, liars,
                                answer):
    tm, d, r, grown = lied(tidemark, upstream, store_servers, liars,
                           "redis", answer)
    assert_problem(r, 503)
    assert grown < GROWN_MAX, grown
    tm.wait_log("redis: connection to", REDIS_TOO_LARGE)
    recovers(tm, d)


@pytest.mark.parametrize("length", [1, 30, 300, REDIS_MAX - 64])
def test_redis_answer_under_the_limit_is_read(tidemark, upstream,
                                              store_servers, liars, length):
    """A bulk string of 1 byte to just under 64 MiB (with its reply's own
    bytes) is read whole: it is not the script's answer, so the write
    gets a 503 for that, and the connection is not dropped for its
    size."""
    tm, d, r, grown = lied(tidemark, upstream, store_servers, liars, "redis",
                           once(b"$%d\r\n%s\r\n" % (length, b"7" * length)))
    assert_problem(r, 503)
    recovers(tm, d)
    assert tm.log_lines(REDIS_TOO_LARGE) == []


@pytest.mark.parametrize("extra", [1, 2, 300])
def test_redis_answer_to_no_command_is_dropped(tidemark, upstream,
                                               store_servers, liars, extra):
    """Replies beyond the one the command waits for: hiredis, which reads
    them, stops the process on a reply nobody waits for (an assert); the
    connection is dropped instead."""
    tm, d, r, grown = lied(tidemark, upstream, store_servers, liars, "redis",
                           once(b":1\r\n" * (1 + extra)))
    assert_problem(r, 503)
    tm.wait_log("redis: connection to", "an answer to no command")
    recovers(tm, d)


# ------------------------------------------------------------- etcd

HTTP_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"


@pytest.mark.parametrize("answer,logged", [
    # A body that says it is 16 MiB and 1 byte.
    (endless(HTTP_HEAD + b"Content-Length: %d\r\n\r\n" % (MAX + 1)),
     "16 MiB of body"),
    # One chunk that says it is 2 GiB.
    (endless(HTTP_HEAD + b"Transfer-Encoding: chunked\r\n\r\n7fffffff\r\n"),
     "16 MiB of body"),
    # A chunk's size line that never ends.
    (endless(HTTP_HEAD + b"Transfer-Encoding: chunked\r\n\r\n1", b"0"),
     "bytes unread"),
    # A header line that never ends.
    (endless(HTTP_HEAD + b"X-A: "), "64 KiB of headers"),
], ids=["content-length", "chunk-size", "chunk-size-line", "header"])
def test_etcd_answer_too_large(tidemark, upstream, store_servers, liars,
                               answer, logged):
    tm, d, r, grown = lied(tidemark, upstream, store_servers, liars, "etcd",
                           answer)
    assert_problem(r, 503)
    assert grown < GROWN_MAX, grown
    tm.wait_log("etcd", logged)
    recovers(tm, d)


@pytest.mark.parametrize("length", [1, 30, 300, MAX])
def test_etcd_body_up_to_the_limit_is_read(tidemark, upstream, store_servers,
                                           liars, length):
    """A body of 1 byte to exactly 16 MiB is read whole, and found not to
    be JSON."""
    body = b"x" * length
    tm, d, r, grown = lied(
        tidemark, upstream, store_servers, liars, "etcd",
        once(HTTP_HEAD + b"Content-Length: %d\r\n\r\n" % length + body))
    assert_problem(r, 503)
    tm.wait_log("etcd", "a body that is not JSON")
    recovers(tm, d)
    assert tm.log_lines("16 MiB of body") == []


# ------------------------------------------------------------- postgres

PG_TOO_LARGE = "an answer larger than 16 MiB"


def pg_message(kind, payload):
    return kind + struct.pack(">I", 4 + len(payload)) + payload


def pg_row(key, fence):
    """A DataRow of the store's two columns, key and fence."""
    return pg_message(b"D", struct.pack(">H", 2) +
                      struct.pack(">I", len(key)) + key +
                      struct.pack(">I", len(fence)) + fence)


PG_FIELDS = pg_message(b"T", struct.pack(">H", 2) + b"".join(
    name + b"\0" + struct.pack(">IHIHIH", 0, 0, 25, 65535, 0xffffffff, 0)
    for name in (b"key", b"fence")))
PG_END = pg_message(b"C", b"SELECT 1\0") + pg_message(b"Z", b"I")


def test_postgres_answer_too_large(tidemark, upstream, store_servers,
                                   liars):
    """Rows of 1 KiB that keep coming."""
    tm, d, r, grown = lied(tidemark, upstream, store_servers, liars,
                           "postgres",
                           endless(PG_FIELDS, pg_row(b"k" * 1000, b"5")))
    assert_problem(r, 503)
    assert grown < GROWN_MAX, grown
    tm.wait_log("postgres: connection", PG_TOO_LARGE)
    recovers(tm, d)


def test_postgres_row_too_large(tidemark, upstream, store_servers, liars):
    """One row that says it is 512 MiB, its bytes coming without a pause.
    libpq, given the row's length, would read on for as long as the bytes
    keep coming (before the relay it took 20 MiB to all of it); the pool
    counts what it passes on, and drops the connection at 16 MiB."""
    tm, d, r, grown = lied(
        tidemark, upstream, store_servers, liars, "postgres",
        endless(b"D" + struct.pack(">IHI", 1 << 29, 2, (1 << 29) - 16)))
    assert_problem(r, 503)
    # libpq reserves the 512 MiB at once and touches what comes: 16 MiB
    # and what a read holds (15 MiB of growth measured; 22 to 57 MiB
    # here, and all of it under a loaded CI, before the relay). A
    # sanitizer build also writes its own bookkeeping for the whole
    # reservation (143 MiB measured).
    assert grown < (GROWN_MAX if is_asan() else MAX + (8 << 20)), grown
    tm.wait_log("postgres: connection", PG_TOO_LARGE)
    recovers(tm, d)


@pytest.mark.parametrize("length,fill", [
    (1, b"x"), (30, b"x"), (300, b"x"), (30000, b"x"),
    (30, b"\x1b"), (30, b"\xff")])
def test_postgres_stray_row_then_no_message(tidemark, upstream,
                                            store_servers, liars, length,
                                            fill):
    """A row of 1 to 30,000 bytes that no row description announced, then
    bytes that are no message (fill, repeated: its type and its length):
    libpq ends the query with its error and closes the socket. The write
    gets a 503 and the connection is dropped then, with a log line, not
    left idle to fail at its next use (where a socket opened meanwhile may
    have taken its number). libpq's message quotes the type byte: it is
    escaped in the log."""
    tm, d, r, grown = lied(
        tidemark, upstream, store_servers, liars, "postgres",
        endless(pg_message(b"D", b"\0" * length), fill))
    assert_problem(r, 503)
    tm.wait_log("postgres: connection", "lost synchronization",
                "reconnecting")
    recovers(tm, d)
    if fill != b"x":
        assert fill not in tm.log_path.read_bytes()


def pg_answer_of(size):
    """A whole answer of exactly size bytes: the fields, rows of up to
    1 KiB whose keys name no resource, the end."""
    overhead = len(pg_row(b"", b"5"))
    rest = size - len(PG_FIELDS) - len(PG_END)
    rows = []
    while rest > 0:
        key = min(1000, rest - overhead)
        assert key >= 0, size
        rows.append(pg_row(b"k" * key, b"5"))
        rest -= overhead + key
    data = PG_FIELDS + b"".join(rows) + PG_END
    assert len(data) == size
    return data


@pytest.mark.parametrize("size", [MAX, MAX + 1])
def test_postgres_answer_at_the_limit(tidemark, upstream, store_servers,
                                      liars, size):
    """An answer of exactly 16 MiB is read whole (no row names the
    resource: a 503 for that); one byte more and the connection is
    dropped for its size."""
    tm, d, r, grown = lied(tidemark, upstream, store_servers, liars,
                           "postgres", once(pg_answer_of(size)))
    assert_problem(r, 503)
    if size > MAX:
        tm.wait_log("postgres: connection", PG_TOO_LARGE)
    recovers(tm, d)
    assert (tm.log_lines(PG_TOO_LARGE) != []) == (size > MAX)


# A server's first answers: no TLS (to libpq's SSLRequest), then
# authentication done.
PG_NO_TLS_AUTH_OK = b"N" + pg_message(b"R", struct.pack(">I", 0))


@pytest.mark.parametrize("answer", [
    # After authentication, a notice that says 512 MiB and keeps coming:
    # libpq reads a notice whole however long it says it is (it cannot
    # reserve 2 GiB, and refuses that).
    endless(PG_NO_TLS_AUTH_OK + b"N" + struct.pack(">I", 512 << 20)),
    # In place of the answer to the startup, an error longer than a
    # protocol 3 one may be: libpq reads it as an older server's, up to
    # a NUL that never comes.
    endless(b"N" + b"E" + struct.pack(">I", 0x7fffffff)),
], ids=["notice-512MiB", "error-without-end"])
def test_postgres_start_too_large(tidemark, upstream, store_servers, liars,
                                  answer):
    """The server's answers at the start of a connection are weighed as
    any other: one that goes past 16 MiB drops the connection (logged),
    the proxy does not hold what it said, and once the server answers as
    a server the store comes up and writes go through."""
    server = store_servers("postgres")
    liar = liars(server.port)
    liar.lie(answer)
    cfg = dict(STORE_ROUTES)
    cfg["store"] = StoreUnderTest("postgres", server).section(
        **store_keys("postgres", server, liar.port), timeout_ms=SLOW_OK_MS)
    tm = tidemark(config=cfg)
    # Both connections of the pool (pool_size 2) are answered so.
    tm.wait_log("postgres: connection", PG_TOO_LARGE, timeout=30, count=2)
    held = tm.status("VmHWM")
    liar.lie(None)
    wait_ready(tm)
    d = uuid.uuid4().hex[:12]
    assert tm.put(d, token=5).status == 200
    assert tm.mark("documents/" + d) == 5
    # All the proxy ever held: its own start (about 11 MiB here), and
    # what the two connections read before they were dropped.
    assert held < (GROWN_MAX if is_asan() else 64 << 20), held


def in_turn(liar, *answers):
    """The answers, one a connection, in turn; then the server's own."""
    left = list(answers)

    def answer():
        a = left.pop(0)
        if not left:
            liar.lie(None)
        yield from a()
    return answer


def test_postgres_start_again_without_tls_is_weighed(tidemark, upstream,
                                                     store_servers, liars):
    """libpq asks for TLS (sslmode prefer, the default); the server says
    yes, then sends no TLS. libpq gives that socket up and connects
    again without TLS, on a socket of its own: that one is relayed and
    weighed in turn (a notice that says 512 MiB is dropped at 16 MiB,
    the only failure logged: giving up the first socket is libpq's
    business, not one). The next connection is the server's own, and
    writes go through."""
    server = store_servers("postgres")
    liar = liars(server.port)
    liar.lie(in_turn(liar, once(b"S" + b"this is not TLS" * 10),
                     endless(pg_message(b"R", struct.pack(">I", 0))
                             + b"N" + struct.pack(">I", 512 << 20))))
    cfg = dict(STORE_ROUTES)
    cfg["store"] = StoreUnderTest("postgres", server).section(
        **store_keys("postgres", server, liar.port), timeout_ms=SLOW_OK_MS,
        pool_size="1")
    tm = tidemark(config=cfg)
    tm.wait_log("postgres: connection 0", PG_TOO_LARGE, timeout=30)
    wait_ready(tm)
    d = uuid.uuid4().hex[:12]
    assert tm.put(d, token=5).status == 200
    assert tm.mark("documents/" + d) == 5
    assert len(tm.log_lines("postgres: connection", "reconnecting")) == 1
    assert liar.accepted == 3


@pytest.mark.parametrize("rows", [1, 30, 300, 15 * 1024])
def test_postgres_answer_under_the_limit_is_read(tidemark, upstream,
                                                 store_servers, liars, rows):
    """A whole answer of 1 to 15,360 rows of 1 KiB (15 MiB, under the
    limit with its messages' own bytes) is read; no row names the
    resource, so the write gets a 503 for that."""
    row = pg_row(b"k" * 1000, b"5")
    tm, d, r, grown = lied(tidemark, upstream, store_servers, liars,
                           "postgres",
                           once(PG_FIELDS + row * rows + PG_END))
    assert_problem(r, 503)
    recovers(tm, d)
    assert tm.log_lines(PG_TOO_LARGE) == []


# ------------------------------------------------------------- zookeeper
#
# ZooKeeper's C client reads each frame into a buffer of the length its
# header gives, on a thread of its own: tidemark gives it a loopback
# port for each server and weighs the server's frames on their way
# (proxy/clients/zk_relay.c).

ZK_TOO_LARGE = "more than %d: connection dropped before the client read it" % MAX
ZK_LOST = "locks: zookeeper: connection lost"
# What the proxy may grow by when a frame is refused at its header: the
# client allocates nothing for it (a sanitizer build's own bookkeeping
# aside).
ZK_GROWN_MAX = 8 << 20


class FrameLiar(servers.Relay):
    """A Relay in front of a ZooKeeper server that passes the server's
    frames on whole and, after inject(answer), sends answer()'s bytes
    right before the next reply to a call (a frame whose xid is above
    0: not the connection's first, a ping's or a watch event's), then
    that reply if the connection still stands. sent counts what left."""

    def __init__(self, target):
        self.answer = None
        self.sent = 0
        super().__init__(target)

    def inject(self, answer):
        self.answer = answer

    def _answer(self, src, dst):
        buf, first = b"", True
        try:
            while not self.stopping.is_set():
                data = src.recv(65536)
                if not data:
                    dst.shutdown(socket.SHUT_WR)
                    return
                buf += data
                while len(buf) >= 4:
                    n = struct.unpack(">i", buf[:4])[0]
                    if len(buf) < 4 + n:
                        break
                    frame, buf = buf[:4 + n], buf[4 + n:]
                    xid = None if first else struct.unpack(">i",
                                                           frame[4:8])[0]
                    first = False
                    lie, self.answer = ((self.answer, None)
                                        if xid is not None and xid > 0
                                        else (None, self.answer))
                    for chunk in lie() if lie is not None else ():
                        dst.sendall(chunk)
                        self.sent += len(chunk)
                    dst.sendall(frame)
        except OSError:
            pass


def zk_event(frame_len):
    """A watch event (xid -1) for a path no one watches, frame_len bytes
    after its length: the reply header (xid, zxid, err), the event's type
    (a node's data changed) and state (connected), and its path."""
    path_len = frame_len - 28
    assert path_len >= 1, frame_len
    path = (b"/" + b"x" * path_len)[:path_len]
    return (struct.pack(">iiqiiii", frame_len, -1, -1, 0, 3, 3, path_len)
            + path)


@pytest.fixture
def zk_lied(tidemark, store_servers):
    """A tidemark whose lock service is on ZooKeeper through a
    FrameLiar, its session up; returns (tidemark, liar, Admin)."""
    from lockapi import Admin
    from test_locks_zookeeper import zk_tidemark

    made = []

    def make():
        zk = store_servers("zookeeper")
        liar = FrameLiar(zk.port)
        made.append(liar)
        tm = zk_tidemark(tidemark, "127.0.0.1:%d" % liar.port,
                         "/answer-size/" + uuid.uuid4().hex[:12])
        return tm, liar, Admin(tm, timeout=60)

    yield make
    for liar in made:
        liar.stop()


def zk_acquire_lied(zk_lied, answer):
    """One lock acquired; then the next acquire, its ZooKeeper reply
    preceded by answer's bytes. Returns the tidemark, its Admin, the
    second acquire's answer and how much the proxy grew."""
    from lockapi import assert_lease

    tm, liar, api = zk_lied()
    assert_lease(api.acquire("documents/a", ttl_ms=60000), "documents/a")
    before = tm.status("VmRSS")
    liar.inject(answer)
    r = api.acquire("documents/b", ttl_ms=60000)
    grown = tm.status("VmHWM") - before
    assert tm.proc.poll() is None
    return tm, api, r, grown


@pytest.mark.parametrize("answer", [
    # A watch event of 16 MiB and 1 byte, whole.
    once(zk_event(MAX + 1)),
    # A header that says 2 GiB less a byte, and the bytes keep coming.
    endless(struct.pack(">i", 0x7fffffff)),
    # A header that says -1.
    once(struct.pack(">i", -1)),
], ids=["event-16MiB+1", "header-2GiB", "header-negative"])
def test_zookeeper_frame_too_large(zk_lied, answer):
    """A frame whose header says more than 16 MiB is not read: the
    connection is dropped at the header, the lock call out is a 503 (the
    connection was lost under it), the log says why, the proxy does not
    grow by what the header said, and the client connects again: the
    next acquire is granted."""
    from lockapi import assert_lease
    from test_locks_zookeeper import unavailable

    tm, api, r, grown = zk_acquire_lied(zk_lied, answer)
    unavailable(r)
    tm.wait_log("locks: zookeeper: the server 127.0.0.1:", ZK_TOO_LARGE)
    assert grown < (GROWN_MAX if is_asan() else ZK_GROWN_MAX), grown
    r = wait_until(lambda: (lambda a: a if a.status != 503 else None)(
        api.acquire("documents/c", ttl_ms=60000)), 30,
        "an acquire answered once the client is back")
    assert_lease(r, "documents/c")


@pytest.mark.parametrize("frame_len", [29, 58, 328, MAX])
def test_zookeeper_frame_up_to_the_limit_is_read(zk_lied, frame_len):
    """Watch events of 29 bytes (a path of 1), 58, 328 and exactly 16 MiB
    go to the client whole: no connection is dropped, and the acquire
    whose reply came after the event is granted."""
    from lockapi import assert_lease

    tm, api, r, grown = zk_acquire_lied(zk_lied, once(zk_event(frame_len)))
    assert_lease(r, "documents/b")
    assert tm.log_lines(ZK_TOO_LARGE) == []
    assert tm.log_lines(ZK_LOST) == []


def test_zookeeper_relay_ports_are_the_client_alone(zk_lied):
    """Another process that connects to the port the client is given for
    a server is closed at once, and its bytes reach no server; the
    client's own session goes on."""
    from lockapi import assert_lease

    tm, liar, api = zk_lied()
    line = tm.wait_log("the client reaches the server 127.0.0.1:%d through"
                       % liar.port)[0]
    port = int(line.split(" through 127.0.0.1:")[1].split()[0].strip('"'))
    accepted = liar.accepted
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">i", 44) + b"\0" * 44)  # a connect request
        try:
            assert s.recv(1) == b""
        except ConnectionResetError:
            pass                 # closed with the request unread
    tm.wait_log("a connection to the port for 127.0.0.1:%d not from this "
                "process: closed" % liar.port)
    assert liar.accepted == accepted
    assert_lease(api.acquire("documents/d", ttl_ms=60000), "documents/d")


# ------------------------------------------------------------- all three

TRICKLED = {
    "redis": b"$1000\r\n",
    "etcd": HTTP_HEAD + b"Content-Length: 1000\r\n\r\n",
    "postgres": b"D" + struct.pack(">IHI", 1010, 2, 1000),
}


@pytest.mark.parametrize("kind", sorted(TRICKLED))
def test_an_answer_that_trickles_is_given_up(tidemark, upstream,
                                             store_servers, liars, kind):
    """An answer whose bytes keep coming, one every 100 ms, for a minute:
    each byte would start a read timeout again. The write is 503 at the
    store's timeout_ms, and the store's next writes go through within
    10 s, long before the answer would have ended (etcd's call has its
    own deadline; Redis's watch and PostgreSQL's query deadline drop the
    connection)."""
    tm, d, r, grown = lied(tidemark, upstream, store_servers, liars, kind,
                           trickle(TRICKLED[kind]), timeout_ms="2000")
    assert_problem(r, 503)
    recovers(tm, d)
