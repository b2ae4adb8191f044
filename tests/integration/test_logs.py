"""Logs an operator can query: one line per forwarded request and one
per refusal, each with the same keys (event id client method path query
status route resource token mark ms conn upstream upstream_ms bytes_in
bytes_out http ua reason detail), in text as key=value words after ts=
and level= (quoted when needed, "-" when absent) or, with log_format =
json, one JSON object a line, one field per key, where numbers are
numbers and an absent value is null. The request id is the client's X-Request-Id
when it is sane, else one tidemark makes; the upstream gets it. Every
test parses the lines and checks them against the requests it made."""
import fcntl
import json
import os
import re
import signal
import socket
import struct
import termios
import threading

import pytest

from common import slow, wait_until
from test_metrics import parse, value
from wire import Conn, build_request, token_headers

ACCESS_KEYS = ["event", "id", "client", "method", "path", "query", "status",
               "route", "resource", "token", "mark", "ms", "conn", "upstream",
               "upstream_ms", "bytes_in", "bytes_out", "http", "ua",
               "reason", "detail"]
HEX32 = re.compile(r"^[0-9a-f]{32}$")

# A text line's key=value words: bare, or "quoted" with \" and \\.
WORD = re.compile(r'([A-Za-z_]+)=("(?:[^"\\]|\\.)*"|[^ ]*)')


def parse_text(line):
    """The key=value words of a text line, as json would give them."""
    out = {}
    for k, v in WORD.findall(line):
        if v.startswith('"'):
            out[k] = re.sub(r"\\(.)", r"\1", v[1:-1])
        elif v == "-":
            out[k] = None
        elif re.fullmatch(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?", v):
            out[k] = float(v) if "." in v else int(v)
        else:
            out[k] = v
    return out


def json_lines(tm):
    return [json.loads(ln) for ln in tm.log().splitlines()
            if not ln.startswith("====")]


def access_json(tm):
    return [o for o in json_lines(tm) if o.get("event") in
            ("request", "refused")]


def access_text(tm):
    return [parse_text(ln) for ln in tm.log().splitlines()
            if " event=request " in ln or " event=refused " in ln]


def send(tm, method, target, token=None, headers=(), body=b""):
    """One request on its own connection: (response, the client's
    address as tidemark sees it)."""
    with Conn(tm.port) as c:
        addr = "%s:%d" % c.sock.getsockname()[:2]
        r = c.request(method, target, token_headers(token, None, headers),
                      body)
    return r, addr


def check_shape(lines):
    for o in lines:
        keys = [k for k in o if k not in ("ts", "level")]
        assert keys == ACCESS_KEYS, o
        assert isinstance(o["status"], int), o
        assert isinstance(o["conn"], int), o
        # No duration for a head that never made a request.
        assert (o["ms"] is None) == (o["method"] is None), o
        assert o["ms"] is None or (isinstance(o["ms"], (int, float)) and
                                   o["ms"] >= 0), o
        assert o["token"] is None or isinstance(o["token"], int), o
        assert o["mark"] is None or isinstance(o["mark"], int), o


def traffic(tm):
    """The requests both formats are checked against, with what each
    line must say."""
    want = []
    r, a = send(tm, "PUT", "/v1/documents/lg?x=1&y=%20", token=7,
                headers=[("X-Request-Id", "abc-123")], body=b"v7")
    assert r.status == 200, r
    want.append({"event": "request", "id": "abc-123", "client": a,
                 "method": "PUT", "path": "/v1/documents/lg",
                 "query": "x=1&y=%20", "status": 200, "route": "docs",
                 "resource": "documents/lg", "token": 7, "mark": 7,
                 "reason": None, "detail": None})
    r, a = send(tm, "PUT", "/v1/documents/lg", token=6, body=b"v6")
    assert r.status == 409, r
    want.append({"event": "refused", "client": a, "method": "PUT",
                 "path": "/v1/documents/lg", "query": None, "status": 409,
                 "route": "docs", "resource": "documents/lg", "token": 6,
                 "mark": 7, "reason": "stale"})
    r, a = send(tm, "GET", "/elsewhere?q=1")
    assert r.status == 200, r
    want.append({"event": "request", "client": a, "method": "GET",
                 "path": "/elsewhere", "query": "q=1", "status": 200,
                 "route": None, "resource": None, "token": None,
                 "mark": None, "reason": None, "detail": None})
    r, a = send(tm, "PUT", "/v1/documents/nt", body=b"x")
    assert r.status == 428, r
    want.append({"event": "refused", "client": a, "method": "PUT",
                 "path": "/v1/documents/nt", "status": 428, "route": "docs",
                 "resource": "documents/nt", "token": None, "mark": None,
                 "reason": "missing"})
    with Conn(tm.port) as c:
        a = "%s:%d" % c.sock.getsockname()[:2]
        c.send(b"PUT /x HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n")
        assert c.read_response().status == 400
    want.append({"event": "refused", "id": None, "client": a,
                 "method": None, "path": None, "query": None, "status": 400,
                 "route": None, "resource": None, "token": None,
                 "mark": None, "reason": "malformed"})
    return want


def check_against(lines, want, upstream):
    check_shape(lines)
    assert len(lines) == len(want), lines
    for got, w in zip(lines, want):
        for k, v in w.items():
            assert got[k] == v, (k, got, w)
    # The id: the client's when sane, else 32 hex digits; the upstream
    # got the same one.
    assert upstream.requests[0].header_all("X-Request-Id") == ["abc-123"]
    assert HEX32.match(lines[2]["id"]), lines[2]
    assert upstream.requests[1].header_all("X-Request-Id") == \
        [lines[2]["id"]]
    assert HEX32.match(lines[1]["id"]) and HEX32.match(lines[3]["id"])
    assert len({o["id"] for o in lines[:4]}) == 4


def test_json_access_lines(tidemark, upstream):
    tm = tidemark({"proxy": {"log_format": "json"}})
    want = traffic(tm)
    tm.wait_log('"event":"refused"', count=3)
    lines = access_json(tm)
    check_against(lines, want, upstream)
    for o in json_lines(tm):
        # Prose has its msg; an access line is its fields, no msg.
        assert ("msg" in o) == ("event" not in o), o
    assert [o["level"] for o in lines] == ["info", "info", "info", "info",
                                           "warn"]


def test_text_access_lines(tidemark, upstream):
    tm = tidemark()
    want = traffic(tm)
    tm.wait_log("event=refused", count=3)
    check_against(access_text(tm), want, upstream)
    line = tm.log_lines("event=request", "abc-123")[0]
    assert " event=request id=abc-123 client=127.0.0.1:" in line, line
    assert " method=PUT path=/v1/documents/lg query=x=1&y=%20 status=200 " \
        "route=docs resource=documents/lg token=7 mark=7 ms=" in line, line
    # Durations are milliseconds with exactly three decimals.
    assert re.search(r" ms=(0|[1-9][0-9]*)\.[0-9]{3} conn=[1-9][0-9]* "
                     r"upstream=127\.0\.0\.1:[0-9]+ "
                     r"upstream_ms=(0|[1-9][0-9]*)\.[0-9]{3} ", line), line
    line = tm.log_lines("event=refused", "status=409")[0]
    assert 'reason=stale detail=-' in line, line


def test_an_insane_request_id_is_replaced(tidemark, upstream):
    tm = tidemark({"proxy": {"log_format": "json"}})
    for bad in ("a b", "x" * 129, "{evil}", "\u00e9".encode().decode(
            "latin-1")):
        r, _ = send(tm, "GET", "/r", headers=[("X-Request-Id", bad)])
        assert r.status == 200, (bad, r)
    r, _ = send(tm, "GET", "/r", headers=[("X-Request-Id", "one"),
                                          ("X-Request-Id", "two")])
    assert r.status == 200, r
    tm.wait_log('"event":"request"', count=5)
    lines = access_json(tm)
    assert len(lines) == 5, lines
    for o, req in zip(lines, upstream.requests):
        assert HEX32.match(o["id"]), o
        assert req.header_all("X-Request-Id") == [o["id"]], req
    r, _ = send(tm, "GET", "/r", headers=[("X-Request-Id", "x" * 128)])
    assert upstream.requests[-1].header_all("X-Request-Id") == ["x" * 128]


def test_values_that_need_quotes_read_back(tidemark, upstream):
    """A route named like a number stays a string; a query with a quote
    and a backslash reads back as sent."""
    tm = tidemark({"proxy": {"log_format": "json"},
                   "route 42": {"methods": "PUT", "path": "/n/{x}",
                                "resource": "n/{x}"}})
    r, _ = send(tm, "PUT", '/n/7?a="b"\\c', token=3, body=b"x")
    assert r.status == 200, r
    tm.wait_log('"event":"request"')
    (o,) = access_json(tm)
    assert o["route"] == "42" and o["resource"] == "n/7", o
    assert o["query"] == 'a="b"\\c', o


def test_text_log_has_one_line_per_request(tidemark, upstream):
    tm = tidemark()
    for i in range(3):
        assert tm.request("GET", "/t%d" % i).status == 200
    tm.wait_log("event=request", "method=GET", count=3)
    paths = [o["path"] for o in access_text(tm)]
    assert paths == ["/t0", "/t1", "/t2"]


def test_warn_level_drops_request_lines(tidemark, upstream):
    tm = tidemark({"proxy": {"log_level": "warn"}})
    assert tm.request("GET", "/quiet").status == 200
    assert tm.put("q", token=2).status == 200
    assert tm.log_lines("event=request") == []


def test_json_log_stays_utf8_with_any_resource_bytes(tidemark, upstream):
    """A resource header may carry any obs-text byte; one that is not
    UTF-8 is refused (400: not a canonical name), UTF-8 is logged as
    itself, and every line is still UTF-8 JSON."""
    tm = tidemark({"proxy": {"log_format": "json"},
                   "route hdr": {"path": "/v1/hdr/{rest*}",
                                 "resource": "header"}})
    r = tm.request("PUT", "/v1/hdr/x", token=5, resource="accounts/\xff",
                   body=b"x")
    assert r.status == 400, r
    utf8 = "accounts/\u00e9".encode().decode("latin-1")  # sent as UTF-8
    r = tm.request("PUT", "/v1/hdr/x", token=5, resource=utf8, body=b"x")
    assert r.status == 200, r
    r = tm.request("PUT", "/v1/hdr/x", token=4, resource=utf8, body=b"x")
    assert r.status == 409, r
    tm.wait_log("refused", count=2)
    raw = tm.log_path.read_bytes()
    # Whole lines only: the last piece may be a line still being written.
    objs = [json.loads(ln) for ln in raw.decode("utf-8").split("\n")[:-1]
            if ln and not ln.startswith("====")]
    refused = [o for o in objs if o.get("event") == "refused"]
    assert len(refused) == 2, objs
    assert "not UTF-8" in refused[0]["detail"], refused
    assert refused[0]["resource"] is None, refused
    assert refused[1]["resource"] == "accounts/\u00e9", refused


@pytest.mark.parametrize("ids", [
    ["two words"],
    ["x" * 129],
    ["a\\b"],
    ["first", "second"],
], ids=["space", "too-long", "backslash", "repeated"])
def test_an_unusable_request_id_is_replaced(tidemark, upstream, ids):
    """A client's X-Request-Id that is not one sane value never reaches
    the backend: the backend gets one id of tidemark's, the log the
    same."""
    tm = tidemark()
    r, _ = send(tm, "PUT", "/v1/documents/rid", token=3,
                headers=[("X-Request-Id", v) for v in ids], body=b"v")
    assert r.status == 200, r
    got = upstream.requests[0].header_all("X-Request-Id")
    assert len(got) == 1 and HEX32.match(got[0]), got
    tm.wait_log("event=request", "id=" + got[0])


# A text access line whole: ts= and level=, then key=value words only.
STRICT = re.compile(r'^ts=\S+ level=(info|warn)( [a-z_]+=("(?:[^"\\]|\\.)*"'
                    r'|[^ "]*))+$')


@pytest.mark.parametrize("form", ["text", "json"])
def test_transfer_fields(tidemark, upstream, form):
    """bytes_in: the request as sent (head and body); bytes_out: the
    answer as read; upstream: where it went ("-" when refused), with its
    time; http: the client's version; ua: its User-Agent."""
    tm = tidemark({"proxy": {"log_format": form}})
    raw = build_request("PUT", "/v1/documents/tf", body=b"0123456789",
                        headers=token_headers(4, None, [
                            ("User-Agent", 'curl/8 "x y"')]))
    with Conn(tm.port) as c:
        c.send(raw)
        ok = c.read_response()
    raw10 = build_request("PUT", "/v1/documents/tf", body=b"ab",
                          version="HTTP/1.0",
                          headers=token_headers(3, None, ()))
    with Conn(tm.port) as c:
        c.send(raw10)
        stale = c.read_response()
    assert (ok.status, stale.status) == (200, 409)
    tm.wait_log("refused", count=1)
    got = access_json(tm) if form == "json" else access_text(tm)
    check_shape(got)
    req, ref = got
    assert (req["bytes_in"], req["bytes_out"]) == \
        (len(raw), len(ok.raw_head) + len(ok.body)), req
    assert req["upstream"] == "127.0.0.1:%d" % upstream.port, req
    assert 0 <= req["upstream_ms"] <= req["ms"], req
    assert (req["http"], req["ua"]) == ("1.1", 'curl/8 "x y"'), req
    assert (ref["bytes_in"], ref["bytes_out"]) == \
        (len(raw10) - 2, len(stale.raw_head) + len(stale.body)), ref
    assert (ref["upstream"], ref["upstream_ms"], ref["http"], ref["ua"]) \
        == (None, None, "1.0", None), ref
    if form == "text":
        for ln in tm.log_lines(" event="):
            assert STRICT.match(ln), ln


# Any text line: ts= and level=, then key=value words only (a quoted
# value cut to fit the line is followed by "...", as logesc marks it).
ANY_STRICT = re.compile(r'^ts=\S+ level=(error|warn|info|debug)'
                        r'( [a-z_]+=("(?:[^"\\]|\\.)*"(\.\.\.)?|[^ "]*))+$')


def test_every_text_line_is_key_value(tidemark, upstream):
    """Prose lines too (start, a refused write, a lock with quotes and a
    backslash in its name, a reload, the stop): msg="..." holds the
    message, its quotes and backslashes escaped, and reads back whole."""
    tm = tidemark({"proxy": {"log_level": "debug"}})
    assert tm.put("p", token=5).status == 200
    assert tm.put("p", token=4).status == 409
    name = 'documents/q%22%5Cx'   # documents/q"\x
    assert tm.admin("POST", "/v1/locks/%s?ttl_ms=60000" % name)[0] == 201
    tm.proc.send_signal(signal.SIGHUP)
    tm.wait_log("reloaded: ")
    assert tm.stop() == 0
    lines = [ln for ln in tm.log().splitlines()
             if not ln.startswith("==== ")]
    prose = [ln for ln in lines if " msg=" in ln]
    assert len(prose) >= 4, lines
    for ln in lines:
        assert ANY_STRICT.match(ln), ln
    msgs = [parse_text(ln)["msg"] for ln in prose]
    assert any(m.startswith("reloaded: ") for m in msgs), msgs
    assert any('locks: acquired: name="documents/q\\"\\\\x"' in m
               for m in msgs), msgs


@pytest.mark.parametrize("form", ["text", "json"])
def test_each_line_arrives_in_one_write(tidemark, upstream, form):
    """Whoever reads tidemark's stderr (a pipe, journald's socket, a file
    other processes append to) gets each line whole, never in pieces:
    every write holds whole lines, and at most PIPE_BUF (4,096) bytes
    unless it is one longer line, so that a pipe shared with other
    processes takes it at once. Here stderr is a SOCK_SEQPACKET socket,
    on which each write(2) arrives as one record. Lines of every length class: access
    lines for resource names of 1 to 512 bytes with a quote, a
    backslash, a space and UTF-8, and a query of 5,000 bytes (cut to fit
    the line, and said so: "..." after it in text, "cut":["query"] in
    JSON); refusals of a name of 513 bytes, of a path with a control
    byte and of a stale token; prose lines for
    lock names of 1 to 512 bytes."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    records = []

    def read():
        while True:
            r = ours.recv(1 << 17)
            if not r:
                return
            records.append(r)

    reader = threading.Thread(target=read)
    reader.start()
    tm = tidemark({"proxy": {"log_level": "debug", "log_format": form}},
                  start=False)
    try:
        tm.start(stderr=theirs.fileno())
    finally:
        theirs.close()
    docs = []
    odd = "%22%5C%C3%A9%20"     # '"', '\\', 'é' and ' ': 5 bytes decoded
    # The resource, documents/DOC, of 1, tens, hundreds of bytes and the
    # longest (512); the last request adds a query of 5,000 bytes.
    for n in (1, 60, 300, 512 - len("documents/L-") - 5):
        docs.append("L-" + "x" * n + odd)
    for doc in docs:
        assert tm.put(doc, token=5).status == 200
    assert tm.put(docs[0] + "?q=" + "y" * 5000, token=6).status == 200
    docs.append(docs[0])
    assert tm.put("L-x" + docs[-2][2:], token=5).status == 400  # 513
    assert tm.put(docs[0], token=4).status == 409
    assert tm.put("c%01%7F", token=6).status == 400
    for n in (1, 300, 512 - len("documents/n-") - 2):
        name = "documents/n-" + "q" * n + "%22%5C"
        assert tm.admin("POST", "/v1/locks/%s?ttl_ms=60000" % name)[0] == 201
    assert tm.stop() == 0
    reader.join(timeout=10)
    assert not reader.is_alive()
    ours.close()

    for r in records:
        assert r.endswith(b"\n"), r[-200:]
        assert len(r) <= 4096 or r.count(b"\n") == 1, r[:200]
    lines = b"".join(records).decode().splitlines()
    if form == "json":
        fields = [json.loads(ln) for ln in lines]
    else:
        for ln in lines:
            assert ANY_STRICT.match(ln), ln
        fields = [parse_text(ln) for ln in lines]
    access = [o for o in fields if o.get("event") == "request"]
    assert [o["path"][:24] for o in access] == \
        [("/v1/documents/" + d)[:24] for d in docs]
    assert [o["status"] for o in access] == [200] * 5
    # The 5,000-byte query is cut: text marks it "..."..., JSON lists it.
    long_q = [ln for ln in lines if "yyyy" in ln]
    assert len(long_q) == 1, long_q
    if form == "json":
        assert [o.get("cut") for o in access] == [None] * 4 + [["query"]]
        assert access[4]["query"].startswith("q=yyyy")
    else:
        assert re.search(r' query="q=y+"\.\.\. ', long_q[0]), long_q[0]
    assert [o["status"] for o in fields if o.get("event") == "refused"] \
        == [400, 409, 400]
    acquired = [o["msg"] for o in fields
                if str(o.get("msg", "")).startswith("locks: acquired: ")]
    assert len(acquired) == 3, acquired
    assert 'name="documents/n-q\\"\\\\"' in acquired[0], acquired[0]


F_SETPIPE_SZ = 1031


def on_full_pipe(tidemark, log_buffer):
    """A tidemark with log_buffer whose stderr is a pipe of one page (the
    least the kernel gives) that nobody reads yet: (tm, the read end)."""
    r, w = os.pipe()
    fcntl.fcntl(w, F_SETPIPE_SZ, 4096)
    tm = tidemark({"proxy": {"log_buffer": log_buffer}}, start=False)
    try:
        tm.start(stderr=w)
    finally:
        os.close(w)
    return tm, r


def drain_pipe(fd, got, until):
    """Read fd into got (a bytearray) until EOF or until(got)."""
    while not until(got):
        b = os.read(fd, 65536)
        if not b:
            return
        got += b


def access_docs(text, prefix):
    """The access lines of text for documents named prefix..., in
    order."""
    return [ln for ln in text.splitlines()
            if " event=request " in ln and
            ' path="/v1/documents/%s' % prefix in ln
            or " path=/v1/documents/%s" % prefix in ln]


def test_a_stderr_nobody_reads_does_not_stop_the_proxy(tidemark, upstream):
    """A log reader that stalls (a full pipe to journald or a container
    runtime) does not stop tidemark: with log_buffer = 64K and stderr a
    pipe nobody reads, 1,000 writes are each answered and forwarded. The
    lines that found no room are counted in /metrics; once the pipe is
    read again, one warning says how many, and with the lines that came
    they make the 1,000."""
    tm, r = on_full_pipe(tidemark, "64K")
    got = bytearray()
    try:
        with Conn(tm.port) as c:
            for i in range(1000):
                resp = c.request("PUT", "/v1/documents/nb%d" % i,
                                 token_headers(5, None, []), b"x")
                assert resp.status == 200, (i, resp)
        assert len(upstream.requests) == 1000
        fams = parse(tm.admin("GET", "/metrics")[2].decode())
        dropped = value(fams, "tidemark_log_lines_dropped_total")
        assert dropped > 0
        reader = threading.Thread(
            target=drain_pipe,
            args=(r, got, lambda g: b"dropped=" in g and g.endswith(b"\n")))
        reader.start()
        reader.join(timeout=10)
        assert not reader.is_alive(), bytes(got[-3000:])
        assert tm.stop() == 0
        drain_pipe(r, got, lambda g: False)
    finally:
        os.close(r)
    text = got.decode()
    warn = [ln for ln in text.splitlines() if "log: lines dropped" in ln]
    assert len(warn) == 1, warn
    assert warn[0].startswith("ts=") and " level=warn " in warn[0], warn
    said = parse_text(warn[0])
    assert said["msg"].endswith(": dropped=%d log_buffer=65536"
                                % dropped), said
    came = access_docs(text, "nb")
    assert len(came) + dropped == 1000
    # The lines that came are in the order of the requests.
    nums = [int(re.search(r"/nb(\d+)", ln).group(1)) for ln in came]
    assert nums == sorted(nums)


def test_log_buffer_0_waits_for_stderr_and_drops_nothing(tidemark,
                                                        upstream):
    """log_buffer = 0: each line is written by the loop at once, so while
    the pipe is full the writes wait (as nginx's do); once it is read,
    every line is there and none was dropped."""
    tm, r = on_full_pipe(tidemark, "0")
    got = bytearray()
    statuses = []

    def writes():
        with Conn(tm.port) as c:
            for i in range(300):
                statuses.append(c.request(
                    "PUT", "/v1/documents/nz%d" % i,
                    token_headers(5, None, []), b"x").status)

    writer = threading.Thread(target=writes)
    writer.start()
    try:
        # The pipe fills (300 lines are some 100 KB): the loop waits.
        # A write of a line takes the pipe only whole: one no longer fits.
        wait_until(lambda: fionread(r) > 4096 - 400, 10 * slow(),
                   "a full pipe")
        drain_pipe(r, got, lambda g: len(access_docs(g.decode(errors="replace"), "nz")) == 300)
        writer.join(timeout=10)
        assert not writer.is_alive()
        assert statuses == [200] * 300
        fams = parse(tm.admin("GET", "/metrics")[2].decode())
        assert value(fams, "tidemark_log_lines_dropped_total") == 0
        assert tm.stop() == 0
        drain_pipe(r, got, lambda g: False)
    finally:
        os.close(r)
    text = got.decode()
    assert len(access_docs(text, "nz")) == 300
    assert "lines dropped" not in text


def fionread(fd):
    """Bytes waiting in a pipe."""
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD,
                                          b"\0\0\0\0"))[0]
