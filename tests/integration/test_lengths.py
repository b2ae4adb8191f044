"""Names and values from outside, in every length class and with odd bytes,
on every path that takes one: request paths on fenced routes, the
Fencing-Token, Fencing-Resource, Destination, Host and x-amz-* headers,
the lock service's names on each lock backend, locks under a watched etcd
prefix and a watched ZooKeeper path (keys written directly, as anyone who
can write there may), mark-store keys on the shared stores, and the
control port's mark look-ups.

Length classes: 1 byte, 40, 300, the most that fits (a resource name is at
most 512 bytes in canonical form, TM_RESOURCE_MAX; the rest of a route's
or watch's template takes its share) and one more. Each case has one
answer: accepted and working (the mark raised, the lock taken, extended
and released) or a clear refusal (400, 414 or 431 with Tidemark-Error, or
a logged skip of a watched key); and tidemark is alive afterwards. The
teardown of the tidemark fixture fails a test whose tidemark died or
whose log holds a sanitizer report; `make test-sanitize` runs this file
against the ASan + UBSan build (marker: lengths)."""

import base64
import itertools
import json
import time
import urllib.parse

import pytest

from common import slow, wait_until
from daemon import StoreUnderTest
from lockapi import Admin, assert_lease, wait_locks_ready
from wire import assert_problem, build_request
from test_etcd import etcd_watch
from test_store_conformance import start as start_on_store
from test_locks import empty_lock_store

pytestmark = pytest.mark.lengths

RES_MAX = 512       # TM_RESOURCE_MAX (policies/route.h)
CLASSES = ["1", "40", "300", "max", "max+1"]
FILL = "abcdefghijklmnopqrstuvwxyz0123456789-_"
_unique = itertools.count(int(time.time()))


def length(cls, room):
    """The bytes of a name of class cls where room bytes fit."""
    return {"max": room, "max+1": room + 1}.get(cls) or int(cls)


def filler(n):
    return (FILL * (n // len(FILL) + 1))[:n]


def fits(cls):
    return cls != "max+1"


def still_alive(tm, status=200):
    """tidemark answers a fenced write after the case (status: its
    answer to token 1, 403 on an hmac route)."""
    assert tm.alive()
    assert tm.put("after-%d" % next(_unique), token=1).status == status


# ------------------------------------------------- request paths


@pytest.mark.parametrize("cls", CLASSES)
def test_route_path_of_each_length(tidemark, upstream, cls):
    """PUT /v1/documents/{doc}: the resource documents/<doc> fits 512
    bytes; one byte more is a 400 that reaches neither the upstream nor
    the store."""
    tm = tidemark()
    doc = filler(length(cls, RES_MAX - len("documents/")))
    r = tm.put(doc, token=7)
    if fits(cls):
        assert r.status == 200, r
        assert upstream.requests[-1].target == "/v1/documents/" + doc
        assert tm.mark("documents/" + doc) == 7
        stale = assert_problem(tm.put(doc, token=6), 409)
        assert stale["resource"] == "documents/" + doc
    else:
        assert_problem(r, 400)
        assert upstream.requests == []
    still_alive(tm)


def test_names_of_each_length_replayed_from_the_journal(tidemark):
    """The embedded store keeps each name, up to the longest, across
    kill -9 (replayed from its journal, or read from LMDB once
    checkpointed)."""
    tm = tidemark()
    docs = [filler(length(c, RES_MAX - len("documents/")))
            for c in CLASSES[:-1]] + ["\u00e9" * 251, "a b", "'\"q\"'"]
    for i, doc in enumerate(docs):
        quoted = urllib.parse.quote(doc, safe="")
        assert tm.request("PUT", "/v1/documents/" + quoted, token=10 + i,
                          body=b"x").status == 200
    tm.kill9()
    tm.start()
    for i, doc in enumerate(docs):
        assert tm.mark(urllib.parse.quote("documents/" + doc)) == 10 + i
    still_alive(tm)


# (raw request-target suffix, canonical resource or None for a 400)
ODD_PATHS = [
    ("a%0Ab", None),            # newline
    ("a%1Bb", None),            # ESC
    ("a%7Fb", None),            # DEL
    ("a%00b", None),            # NUL
    ("a%FFb", None),            # not UTF-8
    ("a%C0%80", None),          # an overlong NUL
    ("a%ED%A0%80", None),       # a surrogate
    ("a%2Fb", None),            # an encoded slash in a path
    ("a%", None),               # a '%' without two hex digits
    ("a%20b", "documents/a b"),
    ("a'b", "documents/a'b"),
    ("%22q%22", 'documents/"q"'),
    ("a%5Cb", "documents/a\\b"),
    ("%C3%A9t%C3%A9", "documents/\u00e9t\u00e9"),
    ("a/../b", "documents/b"),
]


@pytest.mark.parametrize("raw,res", ODD_PATHS, ids=[p for p, _ in ODD_PATHS])
def test_route_path_with_odd_bytes(tidemark, upstream, raw, res):
    tm = tidemark()
    r = tm.request("PUT", "/v1/documents/" + raw, token=7, body=b"x")
    if res is None:
        assert_problem(r, 400)
        assert upstream.requests == []
    else:
        assert r.status == 200, r
        assert tm.mark(urllib.parse.quote(res)) == 7
        stale = assert_problem(
            tm.request("PUT", "/v1/documents/" + raw, token=6, body=b"x"),
            409)
        assert stale["resource"] == res
    still_alive(tm)


# raw bytes on the request line: not a request-target (RFC 9112 3.2)
@pytest.mark.parametrize("raw", [b"a\x1bb", b"a\xffb", b"a\x00b", b"a\tb"],
                         ids=["esc", "high", "nul", "tab"])
def test_raw_bytes_in_the_request_target_are_400(tidemark, upstream, raw):
    tm = tidemark()
    with tm.conn() as c:
        c.send(b"PUT /v1/documents/" + raw + b" HTTP/1.1\r\nHost: x\r\n"
               b"Fencing-Token: 7\r\nContent-Length: 1\r\n\r\nx")
        assert_problem(c.read_response(), 400)
    assert upstream.requests == []
    still_alive(tm)


def test_target_over_max_uri_is_414_and_head_over_max_head_is_431(
        tidemark, upstream):
    tm = tidemark()
    assert_problem(tm.put("x" * 9000, token=7), 414)
    assert_problem(tm.put("x", token=7, headers=[("X-Big", "v" * 17000)]),
                   431)
    assert upstream.requests == []
    still_alive(tm)


# ------------------------------------------------- header values


TOKENS = [
    ("1", 200),
    ("9223372036854775807", 200),       # the largest
    ("9223372036854775808", 400),       # one more
    ("1" * 40, 400),
    ("1" * 300, 400),
    ("1" * 8000, 400),
    ("0", 400),
    ("-7", 400),
    ("+7", 400),
    ("7.0", 400),
    ("0x7", 400),
    ("7%00", 400),
    ("\"7\"", 400),
    ("7 7", 400),
    ("7\x1b", 400),
    ("7\xff", 400),
]


@pytest.mark.parametrize("value,status", TOKENS,
                         ids=["t%d" % i for i in range(len(TOKENS))])
def test_fencing_token_values(tidemark, upstream, value, status):
    tm = tidemark()
    r = tm.put("tok", headers=[("Fencing-Token", value)])
    if status == 200:
        assert r.status == 200, r
        assert tm.mark("documents/tok") == int(value)
    else:
        assert_problem(r, status)
        assert upstream.requests == []
        assert tm.mark("documents/tok") is None
    still_alive(tm)


HEADER_ROUTE = {"route hdr": {"path": "/v1/h/{x}", "resource": "header",
                              "mode": "correctness"},
                "route docs": {"path": "/v1/documents/{doc}",
                               "resource": "documents/{doc}"}}

# (Fencing-Resource value, canonical resource or None for a 400)
ODD_RESOURCES = [
    ("a%0Ab", None), ("a%1Bb", None), ("a%00b", None), ("a%FFb", None),
    ("..", None), ("a/../..", None), ("%", None), ("", None),
    ("a\x1bb", None), ("a\xffb", None),
    ("a b", "a b"), ("a%2Fb", "a/b"), ("a/../b", "b"), ("'q'", "'q'"),
    ("\"q\"", "\"q\""), ("a\\b", "a\\b"),
]


def put_header_resource(tm, value, token):
    return tm.request("PUT", "/v1/h/x", token=token, resource=value,
                      body=b"x")


@pytest.mark.parametrize("cls", CLASSES)
def test_fencing_resource_header_of_each_length(tidemark, upstream, cls):
    tm = tidemark(config=HEADER_ROUTE)
    res = filler(length(cls, RES_MAX))
    r = put_header_resource(tm, res, 7)
    if fits(cls):
        assert r.status == 200, r
        assert tm.mark(res) == 7
        assert put_header_resource(tm, res, 6).status == 409
    else:
        assert_problem(r, 400)
        assert upstream.requests == []
    still_alive(tm)


@pytest.mark.parametrize("value,res", ODD_RESOURCES,
                         ids=["r%d" % i for i in range(len(ODD_RESOURCES))])
def test_fencing_resource_header_with_odd_bytes(tidemark, upstream, value,
                                                res):
    tm = tidemark(config=HEADER_ROUTE)
    r = put_header_resource(tm, value, 7)
    if res is None:
        assert_problem(r, 400)
        assert upstream.requests == []
    else:
        assert r.status == 200, r
        assert tm.mark(urllib.parse.quote(res, safe="/")) == 7
        stale = assert_problem(put_header_resource(tm, value, 6), 409)
        assert stale["resource"] == res
    still_alive(tm)


DAV_ROUTE = {"route files": {"methods": "PUT DELETE", "path": "/dav/{key*}",
                             "resource": "files/{key*}",
                             "profile": "webdav"},
             "route docs": {"path": "/v1/documents/{doc}",
                            "resource": "documents/{doc}"}}


@pytest.mark.parametrize("cls", CLASSES)
def test_destination_of_each_length(tidemark, upstream, cls):
    """A MOVE's Destination names the resource it writes: its mark is
    raised, or the MOVE is a 400 and nothing is raised."""
    tm = tidemark(config=DAV_ROUTE)
    name = filler(length(cls, RES_MAX - len("files/")))
    r = tm.request("MOVE", "/dav/src", token=5,
                   headers=[("Destination", "http://client.test/dav/" +
                             name)])
    if fits(cls):
        assert r.status == 200, r
        assert tm.mark("files/" + name) == 5
    else:
        assert_problem(r, 400)
        assert upstream.requests == []
        assert tm.mark("files/src") is None
    still_alive(tm)


ODD_DESTINATIONS = [
    ("/dav/a%0Ab", None), ("/dav/a%1Bb", None), ("/dav/a%00b", None),
    ("/dav/a%FFb", None), ("/dav/a%2Fb", None), ("/dav/../../x", None),
    ("/dav/" + "d" * 5000, None),                 # over DAV_DEST_MAX
    ("/dav/a\x1bb", None), ("/dav/a\xffb", None),
    ("/dav/a%20b", "files/a b"), ("/dav/'q'", "files/'q'"),
    ("/dav/%22q%22", "files/\"q\""), ("/dav/a/../b", "files/b"),
]


@pytest.mark.parametrize("dest,res", ODD_DESTINATIONS,
                         ids=["d%d" % i for i in range(len(ODD_DESTINATIONS))])
def test_destination_with_odd_bytes(tidemark, upstream, dest, res):
    tm = tidemark(config=DAV_ROUTE)
    r = tm.request("COPY", "/dav/src", token=5,
                   headers=[("Destination", dest)])
    if res is None:
        assert_problem(r, 400)
        assert upstream.requests == []
    else:
        assert r.status == 200, r
        assert tm.mark(urllib.parse.quote(res, safe="/")) == 5
    still_alive(tm)


HOSTS = [("h", 200), ("h" * 40, 200), ("h" * 300, 200), ("h" * 8000, 200),
         ("h" * 17000, 431), ("h\x1bx", 400), ("h\xffx", 400),
         ("h x", 400), ("h/x", 400)]


@pytest.mark.parametrize("host,status", HOSTS,
                         ids=["h%d" % i for i in range(len(HOSTS))])
def test_host_of_each_length_with_a_destination(tidemark, upstream, host,
                                                status):
    """The Host is the authority a Destination is compared with."""
    tm = tidemark(config=DAV_ROUTE)
    with tm.conn() as c:
        c.send(build_request("MOVE", "/dav/src",
                             [("Fencing-Token", "5"),
                              ("Destination", "http://%s/dav/dst" % host)],
                             host=host))
        r = c.read_response()
    if status == 200:
        assert r.status == 200, r
        assert tm.mark("files/dst") == 5
    else:
        assert_problem(r, status)
        assert upstream.requests == []
    still_alive(tm)


AMZ = [("1", "1"), ("v" * 40, "v" * 40), ("v" * 300, "v" * 300),
       ("v" * 8000, "v" * 8000), ("a  b", "a  b"), ("'\"q\"'", "'\"q\"'"),
       ("%00", "%00"), ("\xe9\xff", "\xe9\xff")]


@pytest.mark.parametrize("value,seen", AMZ,
                         ids=["a%d" % i for i in range(len(AMZ))])
def test_x_amz_header_values_are_signed_and_forwarded(tidemark, upstream,
                                                      value, seen):
    """sign = aws-sigv4 puts every x-amz-* header into the signature;
    each value reaches the upstream as sent."""
    tm = tidemark({"upstream default": {"sign": "aws-sigv4",
                                        "sign_region": "eu-west-1"}},
                  env={"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
                       "AWS_SECRET_ACCESS_KEY": "secret"})
    r = tm.put("amz", token=7, headers=[("X-Amz-Meta-A", value)])
    assert r.status == 200, r
    got = upstream.requests[-1]
    assert got.header("X-Amz-Meta-A") == seen
    assert "SignedHeaders=host;x-amz-content-sha256;x-amz-date;" \
        "x-amz-meta-a, " in got.header("Authorization")
    still_alive(tm)


@pytest.mark.parametrize("value,status", [("v" * 17000, 431),
                                          ("a\x1bb", 400)],
                         ids=["over-max-head", "esc"])
def test_x_amz_header_values_refused(tidemark, upstream, value, status):
    tm = tidemark({"upstream default": {"sign": "aws-sigv4",
                                        "sign_region": "eu-west-1"}},
                  env={"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
                       "AWS_SECRET_ACCESS_KEY": "secret"})
    assert_problem(tm.put("amz", token=7,
                          headers=[("X-Amz-Meta-A", value)]), status)
    assert upstream.requests == []
    still_alive(tm)


# ---------------------------------- User-Agent and X-Forwarded-For

# The access line keeps at most 256 bytes of a User-Agent (cut and
# marked beyond); forwarded = x-forwarded-for passes the client's own
# X-Forwarded-For on with its address added.
UA_LOG_MAX = 256
PEER_VALUES = [("1", "u"), ("40", filler(40)), ("300", filler(300)),
               ("big", filler(8000)), ("spaces", "a  b"),
               ("quotes", "'\"q\"'"), ("pct00", "%00"),
               ("latin1", "\xe9\xff")]


def _access_lines(tm):
    return [json.loads(ln) for ln in tm.log().splitlines()
            if ln.startswith("{") and '"event":"request"' in ln]


@pytest.mark.parametrize("cls,value", PEER_VALUES,
                         ids=[c for c, _ in PEER_VALUES])
def test_user_agent_and_forwarded_for_of_each_length(tidemark, upstream,
                                                     cls, value):
    tm = tidemark({"proxy": {"log_format": "json", "log_level": "info"},
                   "upstream default": {"forwarded": "x-forwarded-for"}})
    r = tm.put("ua", token=7, headers=[("User-Agent", value),
                                       ("X-Forwarded-For", value)])
    assert r.status == 200, r
    assert upstream.requests[-1].header("X-Forwarded-For") == \
        value + ", 127.0.0.1"
    tm.wait_log('"event":"request"')
    ua = _access_lines(tm)[-1]["ua"]
    if len(value.encode("latin-1")) <= UA_LOG_MAX - 8:
        # The JSON form writes a byte that is not UTF-8 as U+FFFD.
        assert ua == value.encode("latin-1").decode("utf-8", "replace")
    else:
        assert ua.startswith(value[:UA_LOG_MAX // 2]) and \
            len(ua) <= UA_LOG_MAX + 8, ua
    still_alive(tm)


@pytest.mark.parametrize("name,value,status",
                         [("User-Agent", "v" * 17000, 431),
                          ("User-Agent", "a\x1bb", 400),
                          ("X-Forwarded-For", "v" * 17000, 431),
                          ("X-Forwarded-For", "a\x1bb", 400)],
                         ids=["ua-over-max-head", "ua-esc",
                              "xff-over-max-head", "xff-esc"])
def test_user_agent_and_forwarded_for_refused(tidemark, upstream, name,
                                              value, status):
    tm = tidemark({"upstream default": {"forwarded": "x-forwarded-for"}})
    assert_problem(tm.put("ua", token=7, headers=[(name, value)]), status)
    assert upstream.requests == []
    still_alive(tm)


# ------------------------------------------- the control port's names


def marks_get(tm, raw):
    st, headers, body = tm.admin("GET", "/v1/marks/" + raw)
    return st, headers, body


@pytest.mark.parametrize("cls", CLASSES + ["over-path"])
def test_mark_lookup_of_each_length(tidemark, cls):
    tm = tidemark()
    if cls == "over-path":
        st, headers, _ = marks_get(tm, "m" * 3000)     # adm.c path[2048]
        assert st == 414
    else:
        name = filler(length(cls, RES_MAX))
        st, headers, _ = marks_get(tm, name)
        assert st == (404 if fits(cls) else 400)
    assert headers["content-type"] == "application/problem+json"
    assert headers["tidemark-error"]
    still_alive(tm)


ODD_LOOKUPS = ["a%0Ab", "a%1Bb", "a%00b", "a%FFb", "a%C0%80", "..", "a/../..",
               "%", "a%2"]


@pytest.mark.parametrize("raw", ODD_LOOKUPS)
def test_mark_lookup_with_odd_bytes_is_400(tidemark, raw):
    tm = tidemark()
    st, headers, body = marks_get(tm, raw)
    assert st == 400, body
    assert headers["content-type"] == "application/problem+json"
    still_alive(tm)


# --------------------------------------- the lock service, each backend


LOCK_BACKENDS = ["lmdb", "redis", "postgres", "etcd", "zookeeper"]


@pytest.fixture(params=LOCK_BACKENDS)
def locks_tm(request, tidemark, store_servers):
    kind, _, keys = empty_lock_store(request.param, store_servers)
    tm = tidemark(config={"locks": keys} if keys else None)
    if keys:
        wait_locks_ready(tm)
    return tm


def take_extend_release(api, tm, name):
    doc = assert_lease(api.acquire(name, ttl_ms=30000), name)
    assert tm.mark(urllib.parse.quote(name, safe="/")) == doc["fence"]
    assert api.get(name).json()["name"] == name
    assert_lease(api.extend(name, doc["token"], ttl_ms=30000), name,
                 fence=doc["fence"], code=200)
    assert api.release(name, doc["token"]).status == 204
    assert api.get(name).status == 404


@pytest.mark.parametrize("cls", CLASSES)
def test_lock_names_of_each_length(locks_tm, cls):
    """A lock of 512 bytes is taken (its mark raised: eager), extended
    and released on every backend; 513 bytes are a 400 that takes
    nothing."""
    tm = locks_tm
    api = Admin(tm)
    name = filler(length(cls, RES_MAX))
    if fits(cls):
        take_extend_release(api, tm, name)
    else:
        doc = assert_problem(api.acquire(name), 400)
        assert "long" in doc["detail"], doc
    # two bytes per character: 256 characters of UTF-8 are 512 bytes
    wide = "\u00e9" * (length(cls, RES_MAX) // 2)
    if wide and len(wide.encode()) <= RES_MAX:
        take_extend_release(api, tm, wide)
    api.close()
    still_alive(tm)


# (percent-encoded name, canonical name or None for a 400)
ODD_LOCKS = [
    ("a%0Ab", None), ("a%1Bb", None), ("a%7Fb", None), ("a%00b", None),
    ("a%FFb", None), ("%C0%80", None), ("..", None), ("a/../..", None),
    ("%", None),
    ("a%20b", "a b"), ("a%2Fb", "a/b"), ("a/../b", "b"), ("'q'", "'q'"),
    ("%22q%22", "\"q\""), ("a%5Cb", "a\\b"), ("%25", "%"),
    ("%E2%82%AC%F0%9F%94%92", "\u20ac\U0001f512"),
]


def test_lock_names_with_odd_bytes(locks_tm):
    tm = locks_tm
    api = Admin(tm)
    for raw, name in ODD_LOCKS:
        st, headers, body = tm.admin("POST", "/v1/locks/%s?ttl_ms=30000"
                                     % raw)
        if name is None:
            assert st == 400, (raw, st, body)
            assert headers["tidemark-error"] == "bad-request", raw
            continue
        assert st == 201, (raw, st, body)
        doc = json.loads(body)
        assert doc["name"] == name, raw
        assert api.get(name).json()["fence"] == doc["fence"], raw
        assert api.release(name, doc["token"]).status == 204, raw
    st, _, _ = tm.admin("POST", "/v1/locks/%s?ttl_ms=10" % ("l" * 3000))
    assert st == 414
    api.close()
    still_alive(tm)


# --------------------------------------------- shared mark stores' keys


STORE_KINDS = ["redis", "postgres", "etcd"]

STORE_NAMES = [filler(1), filler(40), filler(300),
               filler(RES_MAX - len("documents/")),
               "a b", "'q'", "\"q\"", "a\\b", "%", "\u00e9\u20ac",
               "{tag}", "*", "\u2028"]


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_mark_store_keys(tidemark, store_servers, kind):
    """Each resource name, up to the longest, is one key on a shared
    store: a second sidecar on it reads the mark and refuses the stale
    token."""
    st = StoreUnderTest(kind, store_servers(kind))
    if kind == "etcd":
        st.server.wipe()
    elif kind == "redis":
        assert st.server.command("FLUSHALL") == b"+OK\r\n"
    else:
        st.server.sql("DROP TABLE IF EXISTS tidemark_marks")
    one = start_on_store(tidemark, st)
    two = start_on_store(tidemark, st)
    for i, doc in enumerate(STORE_NAMES):
        quoted = urllib.parse.quote(doc, safe="")
        r = one.request("PUT", "/v1/documents/" + quoted, token=100 + i,
                        body=b"x")
        assert r.status == 200, (doc, r)
        assert two.mark(urllib.parse.quote("documents/" + doc)) == 100 + i
        stale = assert_problem(
            two.request("PUT", "/v1/documents/" + quoted, token=99 + i,
                        body=b"x"), 409)
        assert stale["resource"] == "documents/" + doc
        assert stale["high_water"] == 100 + i
    still_alive(one)
    still_alive(two)


# ------------------------------------------------- watched etcd locks


def etcd_put(etcd, key):
    """Put key (bytes) as etcdctl lock would (a lock's key); its create
    revision."""
    r = etcd.call("/v3/kv/put", {"key": base64.b64encode(key).decode(),
                                 "value": ""})
    assert r and "header" in r, r
    return int(r["header"]["revision"])


def skipped(tm):
    """Watched locks skipped so far, each with a log line (counted in
    the whole log: a name may hold a newline)."""
    return tm.log().count(": not fenced")


def watched_etcd(tidemark, etcd):
    prefix = "len%d/" % next(_unique)
    tm = etcd_watch(tidemark, etcd.endpoints, prefix=prefix)
    return tm, prefix.encode()


def expect_watched(tm, name, rev, res, before, what):
    """The lock name, created at rev, raised res's mark to rev; or, with
    res None, was skipped with a log line."""
    if res is None:
        wait_until(lambda: skipped(tm) > before, 10 * slow(),
                   "a logged skip of %s" % what)
    else:
        quoted = urllib.parse.quote(res, safe="/")
        wait_until(lambda: tm.mark(quoted) == rev, 10 * slow(),
                   "the mark of %s at %d" % (what, rev))
        assert skipped(tm) == before


@pytest.mark.parametrize("cls", CLASSES)
def test_watched_etcd_lock_names_of_each_length(tidemark, store_servers,
                                                cls):
    """A key written under the watched prefix with a name of each class
    raises documents/<name> (the max fills 512 bytes); one byte more is
    skipped, logged. (A 16-byte name overflowed the look's buffer.)"""
    etcd = store_servers("etcd")
    tm, prefix = watched_etcd(tidemark, etcd)
    name = filler(length(cls, RES_MAX - len("documents/")))
    before = skipped(tm)
    rev = etcd_put(etcd, prefix + name.encode() + b"/694d7a1c3b2a")
    expect_watched(tm, name, rev, "documents/" + name if fits(cls) else None,
                   before, "a %s-byte name" % len(name))
    still_alive(tm)


# (the name's bytes in the key, the resource or None for a logged skip)
ODD_WATCHED = [
    (b"a\nb", None), (b"a\x1bb", None), (b"a\x00b", None), (b"a\xffb", None),
    (b"a%00b", None), (b"a%0Ab", None), (b"..", None), (b"a/../..", None),
    (b"%", None),
    # out of the template's scope: a lock under the prefix names no
    # resource outside documents/
    (b"../x", None), (b"a/../../x", None), (b"%2E%2E/x", None),
    (b"x/..", None), (b";x", None),
    (b"a b", "documents/a b"), (b"a/../b", "documents/b"), (b"'q'", "documents/'q'"),
    (b"\"q\"", "documents/\"q\""), (b"a\\b", "documents/a\\b"),
    (b"a/b", "documents/a/b"), (b"\xc3\xa9", "documents/\u00e9"),
]


@pytest.mark.parametrize("name,res", ODD_WATCHED,
                         ids=["w%d" % i for i in range(len(ODD_WATCHED))])
def test_watched_etcd_lock_names_with_odd_bytes(tidemark, store_servers,
                                                name, res):
    etcd = store_servers("etcd")
    tm, prefix = watched_etcd(tidemark, etcd)
    before = skipped(tm)
    rev = etcd_put(etcd, prefix + name + b"/694d7a1c3b2a")
    expect_watched(tm, name, rev, res, before, repr(name))
    still_alive(tm)


def test_watched_etcd_key_of_3000_bytes_is_skipped_and_logged(
        tidemark, store_servers):
    """A 3000-byte key (its name far over a resource name's 512 bytes)
    is skipped with a log line, not dropped unseen; the next lock is
    followed."""
    etcd = store_servers("etcd")
    tm, prefix = watched_etcd(tidemark, etcd)
    before = skipped(tm)
    rev = etcd_put(etcd, prefix + b"l" * 3000 + b"/694d7a1c3b2a")
    expect_watched(tm, "l" * 3000, rev, None, before, "a 3000-byte key")
    rev = etcd_put(etcd, prefix + b"next/694d7a1c3b2a")
    expect_watched(tm, "next", rev, "documents/next", before + 1, "next")
    still_alive(tm)


# ---------------------------------------------- watched ZooKeeper locks


ZK_ODD = [
    ("a%00b", None), ("a%0Ab", None), ("a%1Bb", None), ("a%FFb", None),
    ("%", None), ("..%2Fx", None), ("%2E%2E%2Fx", None), (";x", None),
    ("a b", "documents/a b"), ("'q'", "documents/'q'"),
    ("\"q\"", "documents/\"q\""), ("a\\b", "documents/a\\b"),
    ("\u00e9", "documents/\u00e9"), ("...", "documents/..."),
]


def zk_watch_case(tidemark, store_servers, name, res):
    from test_watch_zookeeper import curator_node, kazoo, watch_tidemark
    zk = store_servers("zookeeper")
    prefix = "/len/%d" % next(_unique)
    c = kazoo(zk.hosts)
    try:
        c.ensure_path(prefix)
        tm = watch_tidemark(tidemark, zk.hosts, prefix)
        before = skipped(tm)
        _, czxid = curator_node(c, prefix + "/" + name)
        expect_watched(tm, name, czxid, res, before, repr(name))
        still_alive(tm)
    finally:
        c.stop()
        c.close()


@pytest.mark.parametrize("cls", CLASSES)
def test_watched_zookeeper_lock_names_of_each_length(tidemark, store_servers,
                                                     cls):
    name = filler(length(cls, RES_MAX - len("documents/")))
    zk_watch_case(tidemark, store_servers, name,
                  "documents/" + name if fits(cls) else None)


@pytest.mark.parametrize("name,res", ZK_ODD,
                         ids=["z%d" % i for i in range(len(ZK_ODD))])
def test_watched_zookeeper_lock_names_with_odd_bytes(tidemark, store_servers,
                                                     name, res):
    zk_watch_case(tidemark, store_servers, name, res)


# ------------------------------------ signed tokens and lock query values


@pytest.mark.parametrize("cls", CLASSES[:-1])
def test_signed_token_for_a_name_of_each_length(tidemark, upstream, tmp_path,
                                                cls):
    """verify = hmac: the token the lock service signs for a resource of
    each length writes it; the same token on another resource is 403."""
    from test_locks import key_config
    tm = tidemark(config={
        "tokens": {"key_file": key_config(tmp_path)},
        "route docs": {"path": "/v1/documents/{doc}",
                       "resource": "documents/{doc}", "verify": "hmac"}})
    doc = filler(length(cls, RES_MAX - len("documents/")))
    lease = assert_lease(Admin(tm).acquire("documents/" + doc),
                         "documents/" + doc)
    assert tm.put(doc, token=lease["token"]).status == 200
    assert tm.mark("documents/" + doc) == lease["fence"]
    assert_problem(tm.put("other", token=lease["token"]), 403)
    assert upstream.requests[-1].target == "/v1/documents/" + doc
    still_alive(tm, 403)


SIG = "A" * 43      # a signature's length (TOKEN_SIG_LEN)
SIGNED = [
    ("7." + SIG, 403),                          # well formed, not ours
    ("9223372036854775807." + SIG, 403),        # the longest well formed
    ("9223372036854775808." + SIG, 400),
    ("7." + SIG + "A", 400),
    ("7." + SIG[:-1], 400),
    ("7." + "A" * 300, 400),
    ("7." + "A" * 8000, 400),
    ("7.", 400),
    (".", 400),
    ("7." + SIG[:-1] + "=", 400),
    ("7." + SIG[:-1] + "\xff", 400),
    ("7." + SIG[:-1] + "%", 400),
]


@pytest.mark.parametrize("value,status", SIGNED,
                         ids=["s%d" % i for i in range(len(SIGNED))])
def test_signed_token_values(tidemark, upstream, tmp_path, value, status):
    from test_locks import key_config
    tm = tidemark(config={
        "tokens": {"key_file": key_config(tmp_path)},
        "route docs": {"path": "/v1/documents/{doc}",
                       "resource": "documents/{doc}", "verify": "hmac"}})
    assert_problem(tm.put("sig", headers=[("Fencing-Token", value)]), status)
    assert upstream.requests == []
    assert tm.mark("documents/sig") is None
    still_alive(tm, 403)


LOCK_QUERIES = ["ttl_ms=" + "9" * 40, "ttl_ms=" + "1" * 300,
                "ttl_ms=" + "1" * 8000, "ttl_ms=1%00", "ttl_ms=1%0A",
                "ttl_ms=%FF", "ttl_ms=1&ttl_ms=2", "ttl_ms=1&wait_ms=" +
                "9" * 300, "ttl_ms", "=", "&&&", "ttl_ms=1%"]


@pytest.mark.parametrize("query", LOCK_QUERIES,
                         ids=["q%d" % i for i in range(len(LOCK_QUERIES))])
def test_lock_query_values_are_400(tidemark, query):
    tm = tidemark()
    st, headers, body = tm.admin("POST", "/v1/locks/documents/q?" + query)
    assert st == 400, body
    assert headers["tidemark-error"] == "bad-request"
    assert Admin(tm).get("documents/q").status == 404
    still_alive(tm)


# ------------------------------------------------ the control port's page


def test_recent_page_with_names_of_each_length(tidemark):
    """/v1/recent shows names cut for display (to at most 127 bytes):
    cut between characters, never inside one (a cut "\u00e9" showed as
    U+FFFD), in JSON of valid UTF-8, for marks, refusals and leases."""
    tm = tidemark()
    names = [filler(length(c, RES_MAX - len("documents/")))
             for c in CLASSES[:-1]] + ["\u00e9" * 251, "\u20ac" * 167,
                                       "\\\"" * 200, "\u2028" * 100]
    for doc in names:
        quoted = urllib.parse.quote(doc, safe="")
        assert tm.request("PUT", "/v1/documents/" + quoted, token=5,
                          body=b"x").status == 200
        assert tm.request("PUT", "/v1/documents/" + quoted, token=4,
                          body=b"x").status == 409
        st, _, _ = tm.admin("POST", "/v1/locks/%s?ttl_ms=60000" %
                            urllib.parse.quote("documents/" + doc))
        assert st == 201
    st, headers, body = tm.admin("GET", "/v1/recent")
    assert st == 200
    page = json.loads(body.decode("utf-8"))      # strict: valid UTF-8
    shown = [m["resource"] for m in page["marks"]] + \
        [f["resource"] for f in page["refusals"]] + \
        [lk["name"] for lk in page["locks"]]
    for s in shown:
        assert 0 < len(s.encode()) <= 127 and "\ufffd" not in s, s
    for doc in names:
        full = "documents/" + doc
        # whole, or cut within a character's length (4 bytes) of 127
        want = min(len(full.encode()), 124)
        assert any(full.startswith(s) and len(s.encode()) >= want
                   for s in shown), (doc, shown)
    assert len(page["refusals"]) == len(names)
    still_alive(tm)
