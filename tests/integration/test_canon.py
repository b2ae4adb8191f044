"""One canonical name per resource: every spelling of a path that a
mainstream backend reads as one object reaches one mark, through routes,
the lock service, eager fencing, signed tokens and the marks API alike;
what no spelling can make unambiguous is a 400 and never forwarded. And
methods as the backend sees them: any method token can be fenced, and
lower-case methods and method overrides are refused."""

import http.client
import json
import os

import pytest

from wire import assert_problem

KEY = "0123456789abcdef0123456789abcdef"

# The same document, a b, written in ways every mainstream backend reads
# as one object.
SPELLINGS = ("a%20b", "%61%20b", "./a%20b", "x/../a%20b", "/a%20b",
             "a%20b/", "a%20b;x=1", "a+b", "a%2Bb", "%2e/a%20b")


def lock(tm, method, name, **query):
    c = http.client.HTTPConnection("127.0.0.1", tm.admin_port, timeout=10)
    try:
        path = "/v1/locks/" + name
        if query:
            path += "?" + "&".join("%s=%s" % kv for kv in query.items())
        c.request(method, path)
        r = c.getresponse()
        return r.status, json.loads(r.read() or b"null")
    finally:
        c.close()


def test_every_spelling_raises_and_is_refused_against_one_mark(tidemark,
                                                              upstream):
    tm = tidemark()
    assert tm.put("a%20b", token=1).status == 200
    for i, spelling in enumerate(SPELLINGS):
        token = i + 2
        r = tm.request("PUT", "/v1/documents/" + spelling, token=token,
                       body=b"x")
        assert r.status == 200, (spelling, r)
        assert r.header("Fencing-High-Water") == str(token)
        # forwarded as sent: the backend reads it the same way
        assert upstream.requests[-1].target == "/v1/documents/" + spelling
        assert tm.mark("documents/a%20b") == token
        # the one mark refuses the token before, whatever the spelling
        for other in SPELLINGS:
            r = tm.request("PUT", "/v1/documents/" + other,
                           token=token - 1, body=b"x")
            doc = assert_problem(r, 409)
            assert doc["resource"] == "documents/a b", doc
            assert doc["high_water"] == token, doc
    assert upstream.count() == 1 + len(SPELLINGS)
    # the same name from the other side: spellings of the marks API
    for name in ("documents/a%20b", "documents/a+b", "documents%2Fa%20b",
                 "documents//./a%20b/"):
        st, _, body = tm.admin("GET", "/v1/marks/" + name)
        assert st == 200, (name, body)
        assert json.loads(body) == {"resource": "documents/a b",
                                    "high_water": len(SPELLINGS) + 1}


@pytest.mark.parametrize("target", [
    "/v1/documents/a%2Fb",        # an encoded slash: no form fits all
    "/v1/documents/a%2fb",
    "/v1/documents/%2e%2e/%2e%2e/%2e%2e",  # above the root
    "/../v1/documents/a",
    "/v1/documents/a%zz",         # a '%' without two hex digits
    "/v1/documents/a%",
    "/v1/documents/a%00",         # a control character
    "/v1/documents/a%0d%0a",
    "/v1/documents/a%FF",         # not UTF-8
    "/v1/documents/%C0%AF",       # an overlong '/'
    "/elsewhere/a%2Fb",           # unmatched routes too
    "/elsewhere/%ED%A0%80",
])
def test_paths_that_cannot_be_made_unambiguous_are_400(tidemark, upstream,
                                                       target):
    tm = tidemark()
    with tm.conn() as c:
        r = c.request("PUT", target, [("Fencing-Token", "5")], b"x")
        doc = assert_problem(r, 400)
        assert doc["detail"].startswith("the request path: "), doc
        assert c.closed()
    with tm.conn() as c:
        r = c.request("GET", target)
        assert_problem(r, 400)
    assert upstream.count() == 0
    assert tm.mark("documents/a") is None


def test_options_star_is_forwarded(tidemark, upstream):
    tm = tidemark()
    r = tm.request("OPTIONS", "*")
    assert r.status == 200, r
    assert upstream.requests[-1].target == "*"


def test_eager_lock_on_an_encoded_name_fences_the_route(tidemark, upstream):
    tm = tidemark()
    assert tm.put("a%20b", token=5).status == 200
    st, doc = lock(tm, "POST", "documents/%61+b", ttl_ms=60000)
    assert st == 201, doc
    assert doc["name"] == "documents/a b" and doc["fence"] == 6, doc
    # eager: the mark is the new fence before the holder writes
    assert tm.mark("documents/a%20b") == 6
    r = tm.put("a%20b", token=5)
    assert assert_problem(r, 409)["high_water"] == 6
    assert upstream.count() == 1
    # the lease is the same lock under any spelling
    st, doc = lock(tm, "GET", "documents%2F./a%20b/")
    assert st == 200 and doc["fence"] == 6, doc
    st, doc = lock(tm, "POST", "/documents/a%20b", ttl_ms=1000)
    assert st == 423, doc
    assert tm.put("a+b", token=6).status == 200


def test_signed_token_for_an_encoded_name_is_accepted(tidemark, upstream,
                                                      tmp_path):
    key = tmp_path / "token.key"
    key.write_text(KEY + "\n")
    os.chmod(key, 0o600)
    tm = tidemark(config={
        "tokens": {"key_file": str(key)},
        "route docs": {"path": "/v1/documents/{doc}",
                       "resource": "documents/{doc}", "verify": "hmac"},
    })
    st, a = lock(tm, "POST", "documents/a%20b%C3%A9", ttl_ms=60000)
    assert st == 201, a
    assert a["name"] == "documents/a b\u00e9"
    assert "." in a["token"]
    for spelling in ("a%20b%C3%A9", "a+b%c3%a9", "./a%20b%C3%A9/"):
        r = tm.request("PUT", "/v1/documents/" + spelling, token=a["token"],
                       body=b"x")
        assert r.status == 200, (spelling, r)
    # issued for another name: refused, never forwarded
    st, o = lock(tm, "POST", "documents/a%20c", ttl_ms=60000)
    assert st == 201, o
    before = upstream.count()
    r = tm.request("PUT", "/v1/documents/a%20b%C3%A9", token=o["token"],
                   body=b"x")
    assert_problem(r, 403)
    assert upstream.count() == before


def test_bad_lock_and_mark_names_are_400(tidemark):
    tm = tidemark()
    for name in ("a%2", "..", "a/../..", "%2F", "a%00", "a%FF"):
        st, doc = lock(tm, "POST", name, ttl_ms=1000)
        assert st == 400, (name, doc)
        st, _, body = tm.admin("GET", "/v1/marks/" + name)
        assert st == 400, (name, body)


DAV = {"route dav": {"methods": "PUT DELETE MKCOL MOVE COPY PROPPATCH",
                     "path": "/dav/{p*}", "resource": "dav/{p}",
                     "mode": "correctness", "upstream": "default"}}


def test_any_method_token_can_be_fenced(tidemark, upstream):
    tm = tidemark(config=DAV)
    r = tm.request("MKCOL", "/dav/col")
    assert_problem(r, 428)
    assert upstream.count() == 0
    r = tm.request("MKCOL", "/dav/col", token=3)
    assert r.status == 200, r
    assert upstream.requests[-1].method == "MKCOL"
    assert tm.mark("dav/col") == 3
    r = tm.request("PROPPATCH", "/dav/col", token=2)
    assert assert_problem(r, 409)["high_water"] == 3
    # a read the route does not name passes unfenced
    r = tm.request("PROPFIND", "/dav/col", headers=[("Depth", "0")])
    assert r.status == 200, r
    assert upstream.requests[-1].method == "PROPFIND"
    assert upstream.count() == 2


@pytest.mark.parametrize("method,target,headers", [
    ("put", "/dav/col", []),
    ("Mkcol", "/dav/col", []),
    ("propfind", "/dav/col", []),
    ("POST", "/dav/col", [("X-HTTP-Method-Override", "PUT")]),
    ("POST", "/dav/col", [("x-http-method", "DELETE")]),
    ("POST", "/dav/col", [("X_Method_Override", "MKCOL")]),
    ("GET", "/elsewhere", [("X-HTTP-Method-Override", "GET")]),
    ("POST", "/dav/col?_method=PUT", []),
    ("POST", "/dav/col?a=1&%5Fmethod=DELETE", []),
])
def test_method_in_disguise_is_400(tidemark, upstream, method, target,
                                   headers):
    tm = tidemark(config=DAV)
    with tm.conn() as c:
        r = c.request(method, target, [("Fencing-Token", "4")] + headers,
                      b"x")
        doc = assert_problem(r, 400)
        assert c.closed()
    if method.isupper():
        assert doc["detail"] == ("method overrides are refused: send the "
                                 "method itself"), doc
    else:
        assert "upper case" in doc["detail"], doc
    assert upstream.count() == 0
    assert tm.mark("dav/col") is None
