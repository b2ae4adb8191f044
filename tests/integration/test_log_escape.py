"""Log injection: every value a client, a peer or a lock holder chose is
escaped in tidemark's log (control bytes, C1 controls, line separators,
quotes, backslashes, bytes that are not UTF-8), so none can end a line
and forge the next, or forge a key=value word. The tests send such bytes
in every name and header that can reach a log line, with the log at
debug so every line is written, and check that every line of the log is
a well-formed line of tidemark's and that the escaped value is in it."""
import json
import re
import time

import pytest

from common import slow, wait_until
from daemon import StoreUnderTest, readable
from wire import Conn
from test_etcd import etcd_watch
from lockapi import Admin

# A text line: a timestamp, a level, a message.
TEXT_LINE = re.compile(r"^ts=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z "
                       r"level=(error|warn|info|debug) \S")
# What no line may hold: C0 controls, DEL, C1 controls, U+2028, U+2029.
HIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def log_objects(tm, form):
    """Every line of tm's log, checked whole: UTF-8, no control, and a
    text line of tidemark's or a JSON object with ts, level and msg (an
    access line: ts, level and its fields). The text lines, or the
    objects."""
    out = []
    # The last piece is what follows the last newline: nothing, or a line
    # tidemark is still writing (stderr is unbuffered: a line goes out in
    # several writes); the next read checks it whole.
    for raw in tm.log_path.read_bytes().split(b"\n")[:-1]:
        if raw == b"" or raw.startswith(b"==== start "):
            continue
        line = raw.decode("utf-8")      # strict: a stray byte fails here
        assert not HIDDEN.search(line), line
        if form == "json":
            obj = json.loads(line)
            msg = obj.get("msg", "event=%s" % obj.get("event"))
            assert TEXT_LINE.match("ts=%s level=%s %s" % (
                obj["ts"], obj["level"], msg)), line
            out.append(obj)
        else:
            assert TEXT_LINE.match(line), line
            out.append(line)
    return out


def texts(tm, form):
    """Each line's text (a JSON line's msg is the text line's message;
    an access line's text is its fields as key=value, unescaped)."""
    objs = log_objects(tm, form)
    if form == "text":
        return [readable(ln) for ln in objs]
    return [o["msg"] if "msg" in o else
            " ".join("%s=%s" % (k, "-" if v is None else v)
                     for k, v in o.items()) for o in objs]


def wait_text(tm, form, needle, count=1):
    """Wait for count lines whose text holds needle; those lines."""
    def found():
        got = [t for t in texts(tm, form) if needle in t]
        return got if len(got) >= count else None
    return wait_until(found, 10 * slow(), "a log line with %r" % needle)


def send(tm, head):
    """A raw request head on its own connection: the status."""
    with Conn(tm.port) as c:
        c.send(head + b"Content-Length: 0\r\n\r\n")
        return c.read_response().status


def put(target, *headers):
    return (b"PUT " + target + b" HTTP/1.1\r\nHost: h\r\n" +
            b"".join(h + b"\r\n" for h in headers))


ROUTES = {
    "proxy": {"log_level": "debug"},
    "route docs": {"methods": "PUT", "path": "/v1/documents/{doc}",
                   "resource": "documents/{doc}"},
    "route files": {"methods": "PUT", "path": "/dav/{key*}",
                    "resource": "files/{key*}", "profile": "webdav"},
    "route hdr": {"path": "/v1/hdr/{rest*}", "resource": "header"},
}

# Values the proxy takes and logs: the escaped text each must appear as
# in its access line (its "resource" or "query" word).
TAKEN = [
    # %-decoded into the resource: a line separator, a C1 control (CSI),
    # a quote, a backslash, a space and '='.
    (put(b"/v1/documents/a%E2%80%A8b", b"Fencing-Token: 5"),
     'resource="documents/a\\xe2\\x80\\xa8b"', "documents/a\u2028b"),
    (put(b"/v1/documents/%C2%9B31m", b"Fencing-Token: 5"),
     'resource="documents/\\xc2\\x9b31m"', "documents/\u009b31m"),
    (put(b"/v1/documents/q%22%5C%20x%3Dy", b"Fencing-Token: 5"),
     'resource="documents/q\\"\\\\ x=y"', 'documents/q"\\ x=y'),
    # The query is logged as sent: %0a stays %0a, the backslash is
    # escaped.
    (put(b"/v1/documents/q?x=%0a%22\\", b"Fencing-Token: 5"),
     'query="x=%0a%22\\\\"', None),
    # A resource header with the same bytes raw, a Destination with them
    # %-encoded.
    (put(b"/v1/hdr/x", b"Fencing-Token: 5",
         b"Fencing-Resource: acc\xe2\x80\xa8\xc2\x9b \"\\="),
     'resource="acc\\xe2\\x80\\xa8\\xc2\\x9b \\"\\\\="',
     'acc\u2028\u009b "\\='),
    (b"MOVE /dav/a HTTP/1.1\r\nHost: h\r\nFencing-Token: 5\r\n"
     b"Destination: http://h/dav/b%E2%80%A8%22\r\n",
     'resource="files/b\\xe2\\x80\\xa8\\""', 'files/b\u2028"'),
]

# Requests refused before any value of theirs is logged: control bytes
# in the target or a header value (HTTP forbids them), a %0a that the
# resource would decode, a token or request id that is not one.
REFUSED = [
    (put(b"/v1/documents/a%0ab", b"Fencing-Token: 5"), 400,
     "path=/v1/documents/a%0ab"),
    (put(b"/v1/documents/a\x1b[31m\x7f", b"Fencing-Token: 5"), 400,
     "invalid request-target"),
    (put(b"/v1/documents/a\xffb", b"Fencing-Token: 5"), 400,
     "invalid request-target"),
] + [(put(b"/v1/documents/h", b"Fencing-Token: 5", name + b": v" + bad),
      400, "control character in field value")
     for name in (b"Destination", b"X-Request-Id", b"User-Agent",
                  b"Fencing-Resource", b"X-Forged")
     for bad in (b"\x1b[2J", b"\x7f", b"\r")] + [
    (b"PUT /v1/documents/h HTTP/1.1\r\nHost: h\x1b[2J\r\n", 400,
     "control character in field value"),
    (put(b"/v1/documents/h", b"Fencing-Token: 5\x1b[2J"), 400,
     "control character in field value"),
    (put(b"/v1/documents/h", b"Fencing-Token: 5\xff\"\\ a=b"), 400,
     "token"),
]


@pytest.mark.parametrize("form", ["text", "json"])
def test_request_values_are_escaped(tidemark, upstream, form):
    tm = tidemark(config=dict(ROUTES, proxy={"log_level": "debug",
                                             "log_format": form}))
    for head, _, _ in TAKEN:
        assert send(tm, head) == 200, head
    for head, status, _ in REFUSED:
        assert send(tm, head) == status, head
    # X-Request-Id with a line separator: replaced, never logged.
    assert send(tm, put(b"/v1/documents/rid", b"Fencing-Token: 5",
                        b"X-Request-Id: r\xe2\x80\xa8x")) == 200
    wait_text(tm, form, "event=", count=len(TAKEN) + len(REFUSED) + 1)
    lines = texts(tm, form)
    if form == "text":
        for _, want, _ in TAKEN:
            assert sum(want in t for t in lines) == 1, (want, lines)
    for _, _, want in REFUSED:
        assert any(want in t for t in lines), (want, lines)
    rid = [t for t in lines if "path=/v1/documents/rid" in t]
    assert len(rid) == 1 and re.search(r" id=[0-9a-f]{32} ", rid[0]), rid
    if form == "json":
        # A field is the value itself, escaped once (by JSON).
        got = [o.get("resource") for o in log_objects(tm, form)
               if o.get("event") == "request"]
        for _, _, value in TAKEN:
            assert value is None or value in got, (value, got)
        assert 'x=%0a%22\\' in [o.get("query") for o in
                                   log_objects(tm, form)]


@pytest.mark.parametrize("form", ["text", "json"])
def test_lock_names_are_escaped(tidemark, form):
    """Lock names on the control port: a name with a line separator, a
    quote, a backslash, a space and '=' is taken (201) and logged
    escaped when a second call waits for it and is refused; one with a
    control byte (%0a, %1b) is refused (400) before it is logged."""
    tm = tidemark(config={"proxy": {"log_level": "debug",
                                    "log_format": form}})
    api = Admin(tm)
    try:
        for name, esc in (("a\u2028b", '"a\\xe2\\x80\\xa8b"'),
                          ('q"\\ x=y', '"q\\"\\\\ x=y"')):
            assert api.acquire(name, ttl_ms=60000).status == 201
            assert api.acquire(name, ttl_ms=1000, wait_ms=50).status == 423
            wait_text(tm, form, "locks: waiting: name=" + esc)
            wait_text(tm, form, "locks: refused 423: name=" + esc)
        for name in ("a\nb", "a\x1b[2Jb", "a\x7fb"):
            assert api.acquire(name).status == 400, name
    finally:
        api.close()
    log_objects(tm, form)


def test_a_watched_etcd_lock_name_is_escaped(tidemark, upstream,
                                             store_servers):
    """A lock under the watched prefix whose name holds a newline and a
    forged line, an ESC and a byte that is not UTF-8 (a key written as
    etcdctl lock writes its own: PREFIX NAME/LEASE): the watch's lines
    name it escaped and quoted, and no line is forged."""
    import base64
    etcd = store_servers("etcd")
    prefix = "locks%d/" % time.monotonic_ns()
    tm = etcd_watch(tidemark, etcd.endpoints, prefix=prefix)
    name = b"x\nts=2026-12-01T00:00:00.000Z level=error forged\x1b[2J\xff"
    lease = etcd.call("/v3/lease/grant", {"TTL": 60})["ID"]
    key = prefix.encode() + name + b"/%x" % int(lease)
    etcd.call("/v3/kv/put", {"key": base64.b64encode(key).decode(),
                             "value": "", "lease": lease})
    esc = '"x\\nts=2026-12-01T00:00:00.000Z level=error forged\\x1b[2J\\xff'
    wait_text(tm, "text", 'watch docs: PUT of "%s%s/%x" at revision'
              % (prefix, esc[1:], int(lease)))
    wait_text(tm, "text", "watch docs: lock %s\" names no resource" % esc)
    log_objects(tm, "text")


def test_a_watched_zookeeper_lock_name_is_escaped(tidemark, upstream,
                                                  store_servers):
    """A kazoo Lock under the watched path whose name holds a line
    separator, a quote, a backslash, a space and '=' (ZooKeeper refuses
    names with control bytes, C1 controls among them): the watch's lines
    name it escaped and quoted, so it forges no line and no key."""
    from test_watch_zookeeper import kazoo, unique_prefix, watch_tidemark
    zk = store_servers("zookeeper")
    prefix = unique_prefix()
    tm = watch_tidemark(tidemark, zk.hosts, prefix)
    client = kazoo(zk.hosts)
    try:
        lock = client.Lock(prefix + '/x\u2028event=refused "q\\', "holder")
        assert lock.acquire(timeout=30 * slow())
        esc = '"x\\xe2\\x80\\xa8event=refused \\"q\\\\"'
        wait_text(tm, "text", "watch docs: lock %s: held by" % esc)
        wait_text(tm, "text", 'watch docs: "documents/%s: the holder '
                  'changed' % esc[1:])
        lock.release()
    finally:
        client.stop()
    log_objects(tm, "text")


def test_a_postgres_notice_is_a_log_line(tidemark, upstream, store_servers):
    """A Postgres server's notice (CREATE TABLE IF NOT EXISTS says one
    once the table is there) is a debug line of tidemark's, its quotes
    and its newline escaped, not text libpq writes to stderr."""
    pg = StoreUnderTest("postgres", store_servers("postgres"))
    tm = tidemark(config={"proxy": {"log_level": "debug"},
                          "store": pg.section()})
    assert tm.put("pg", token=1).status == 200
    tm.restart()        # the table is there now
    assert tm.put("pg", token=2).status == 200
    wait_text(tm, "text", 'postgres: connection 0 (marks): "NOTICE:  '
              'relation \\"tidemark_marks\\" already exists, skipping"')
    log_objects(tm, "text")
