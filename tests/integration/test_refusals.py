"""tidemark's own answers are recognisable: each carries Tidemark-Error
with the short name of its problem type, and an upstream's answer never
does, whatever its status (a WebDAV or S3 backend answers 409 for its
own reasons). Fencing-High-Water appears on a stale-token 409 and on the
answer to an accepted fenced write, nowhere else, and never from the
upstream."""
import os

import pytest

from common import free_port, slow
from daemon import DEFAULT_ROUTE
from wire import assert_problem, build_request


KEY = "0123456789abcdef0123456789abcdef"


def ours(r, status, kind):
    """r is tidemark's own answer of this status and kind."""
    doc = assert_problem(r, status)
    assert doc["type"] == "urn:tidemark:" + kind, doc
    assert r.header("Tidemark-Error") == kind, r
    assert len(r.header_all("Tidemark-Error")) == 1, r
    return doc


def raw(tm, data, timeout=10.0):
    with tm.conn(timeout) as c:
        c.send(data)
        return c.read_response()


def put(tm, doc, token=None, headers=(), body=b"data"):
    return tm.put(doc, token=token, headers=list(headers), body=body)


# -- every kind of refusal: (id, config, request, status, kind)

def key_file(tmp_path):
    path = tmp_path / "token.key"
    path.write_text(KEY + "\n")
    os.chmod(path, 0o600)
    return str(path)


def r400(tm):
    return raw(tm, b"PUT /v1/documents/a HTTP/1.1\r\nHost: x\r\n"
               b"Transfer_Encoding: chunked\r\nContent-Length: 1\r\n\r\nx")


def r403(tm):
    return put(tm, "a", token=1)


def r404(tm):
    return tm.request("GET", "/elsewhere")


def r405(tm):
    return tm.request("TRACE", "/v1/documents/a")


def r408(tm):
    with tm.conn() as c:
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\n")
        return c.read_response()


def r409(tm):
    assert put(tm, "a", token=5).status == 200
    return put(tm, "a", token=3)


def r413(tm):
    return put(tm, "a", token=1, body=b"x" * 2000)


def r428(tm):
    return put(tm, "a")


def r431(tm):
    return tm.request("GET", "/", headers=[("X-Big", "b" * 20000)])


def r501(tm):
    return raw(tm, b"PUT /v1/documents/a HTTP/1.1\r\nHost: x\r\n"
               b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n")


def r502(tm):
    # A fenced write that was accepted, then the upstream answered
    # garbage: the refusal carries no mark.
    return put(tm, "a", token=4, headers=[("X-Test-Garbage", "1")])


def r503(tm):
    return put(tm, "a", token=1)


def r504(tm):
    return put(tm, "a", token=4, headers=[("X-Test-Delay-Ms", "3000")])


def r505(tm):
    return raw(tm, b"GET / HTTP/1.2\r\nHost: x\r\n\r\n")


def cfg_hmac(tmp_path):
    return {"tokens": {"key_file": key_file(tmp_path)},
            "route docs": {"path": "/v1/documents/{doc}",
                           "resource": "documents/{doc}",
                           "verify": "hmac"}}


def cfg_store_down(tmp_path):
    return {"store": {"type": "redis",
                      "url": "redis://127.0.0.1:%d" % free_port(),
                      "path": None, "timeout_ms": "300"}}


REFUSALS = [
    ("400", None, r400, 400, "bad-request"),
    ("403", cfg_hmac, r403, 403, "forbidden-token"),
    ("404", lambda t: {"proxy": {"unmatched": "reject"}}, r404, 404,
     "no-route"),
    ("405", None, r405, 405, "method-not-allowed"),
    ("408", lambda t: {"proxy": {"header_timeout_ms": "300"}}, r408, 408,
     "request-timeout"),
    ("409", None, r409, 409, "stale-token"),
    ("413", lambda t: {"route docs": dict(DEFAULT_ROUTE, max_body="1K")}, r413,
     413, "too-large"),
    ("428", None, r428, 428, "missing-token"),
    ("431", None, r431, 431, "head-too-large"),
    ("501", None, r501, 501, "not-implemented"),
    ("502", None, r502, 502, "bad-gateway"),
    ("503", cfg_store_down, r503, 503, "store-unavailable"),
    ("504", lambda t: {"upstream default": {"timeout_ms": "300"}}, r504, 504,
     "upstream-timeout"),
    ("505", None, r505, 505, "bad-version"),
]


@pytest.mark.parametrize("name,config,send,status,kind", REFUSALS,
                         ids=[r[0] for r in REFUSALS])
def test_each_refusal_says_it_is_ours(tidemark, upstream, tmp_path, name,
                                      config, send, status, kind):
    tm = tidemark(config=config(tmp_path) if config else None)
    r = send(tm)
    doc = ours(r, status, kind)
    if status == 409:
        # The mark that refused it, in the header and the body.
        assert r.header("Fencing-High-Water") == "5", r
        assert doc["high_water"] == 5, doc
    else:
        assert r.header("Fencing-High-Water") is None, r


def test_admin_port_problems_say_they_are_ours(tidemark, upstream):
    tm = tidemark()
    st, headers, _ = tm.admin("GET", "/v1/marks/documents/none")
    assert st == 404
    assert headers.get("tidemark-error") == "no-route", headers


# -- upstream answers: never Tidemark-Error, Fencing-High-Water only ours


def test_upstream_409_is_not_ours(tidemark, upstream):
    """A WebDAV conflict from the backend comes through as the backend's:
    on an unfenced request with no mark, on a fenced one with the mark
    that accepted the write."""
    tm = tidemark()
    r = tm.request("GET", "/dav/x", headers=[("X-Test-Status", "409")])
    assert r.status == 409, r
    assert r.header("Tidemark-Error") is None, r
    assert r.header("Fencing-High-Water") is None, r
    assert r.body.startswith(b"ok GET"), r
    r = put(tm, "w", token=6, headers=[("X-Test-Status", "409")])
    assert r.status == 409, r
    assert r.header("Tidemark-Error") is None, r
    assert r.header("Fencing-High-Water") == "6", r
    assert r.body.startswith(b"ok PUT"), r


FAKES = [("Tidemark-Error", "stale-token"),
         ("tidemark_error", "stale-token"),
         ("Fencing-High-Water", "999"),
         ("FENCING_HIGH_WATER", "999"),
         ("Fencing.High.Water", "999")]


def fake_headers():
    return [("X-Test-Resp-Header", "%s: %s" % f) for f in FAKES]


def test_upstream_cannot_fake_our_headers(tidemark, upstream):
    tm = tidemark()
    # Unfenced: neither header at all.
    r = tm.request("GET", "/plain",
                   headers=fake_headers() + [("X-Test-Status", "409")])
    assert r.status == 409, r
    for name, _ in FAKES:
        assert r.header(name) is None, (name, r)
    # Fenced and accepted: only tidemark's mark.
    r = put(tm, "f", token=2, headers=fake_headers())
    assert r.status == 200, r
    assert r.header_all("Fencing-High-Water") == ["2"], r
    for name in ("Tidemark-Error", "tidemark_error", "FENCING_HIGH_WATER",
                 "Fencing.High.Water"):
        assert r.header(name) is None, (name, r)


def test_no_mark_on_answers_that_were_not_fenced(tidemark, upstream):
    tm = tidemark(config={
        "route docs": DEFAULT_ROUTE,
        "route eff": {"methods": "PUT", "path": "/eff/{doc}",
                      "resource": "eff/{doc}", "mode": "efficiency"},
        "route off": {"methods": "PUT", "path": "/off/{doc}",
                      "resource": "off/{doc}", "mode": "off"},
    })
    assert put(tm, "m", token=3).header("Fencing-High-Water") == "3"
    for target, token in (("/v1/documents/m", None),  # GET: no route
                          ("/eff/a", None),  # efficiency, no token
                          ("/off/a", 7)):  # mode off, token ignored
        method = "GET" if target.startswith("/v1") else "PUT"
        r = tm.request(method, target, token=token, body=b"x")
        assert r.status == 200, (target, r)
        assert r.header("Fencing-High-Water") is None, (target, r)
        assert r.header("Tidemark-Error") is None, (target, r)


def test_upstream_interim_answers_are_not_ours(tidemark, upstream):
    tm = tidemark()
    resp = (b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n"
            b"Tidemark-Error: fake\r\nFencing-High-Water: 9\r\n\r\n"
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    with tm.conn() as c:
        c.send(build_request("GET", "/hints",
                             [("X-Test-Raw-Response", resp.hex())]))
        c.sock.settimeout(5 * slow())
        head = c.reader.read_until(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 103 "), head
        assert b"Link: </a>" in head, head
        assert b"Tidemark-Error" not in head, head
        assert b"Fencing-High-Water" not in head, head
        r = c.read_response()
        assert r.status == 200 and r.body == b"ok", r


def test_no_interim_answers_to_http10_clients(tidemark, upstream):
    """RFC 9110 15.2: a server must not send a 1xx to an HTTP/1.0
    client, which would take it for the answer."""
    tm = tidemark()
    resp = (b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
            b"HTTP/1.1 100 Continue\r\n\r\n"
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    with tm.conn() as c:
        c.send(build_request("GET", "/hints10",
                             [("X-Test-Raw-Response", resp.hex())],
                             version="HTTP/1.0", host=None))
        c.sock.settimeout(5 * slow())
        head = c.reader.read_until(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 "), head
        assert c.reader.read_exact(2) == b"ok"
