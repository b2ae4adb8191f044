"""Requests that write somewhere else: WebDAV COPY and MOVE write their
Destination, S3's multi-object delete and form uploads name their keys in
the body. Each is fenced at what it writes (a multi-object delete at
every key), or refused; never passed unfenced because its path matched
no per-key route."""

import json

import pytest

from wire import assert_problem, read_response
from test_ordering import Async, not_arrived

ROUTES = {
    # methods lists no COPY or MOVE: the webdav profile adds its writes.
    "route files": {"methods": "PUT DELETE", "path": "/dav/{key*}",
                    "resource": "files/{key*}", "profile": "webdav"},
    "route open": {"methods": "*", "path": "/open/{key*}",
                   "resource": "open/{key*}", "mode": "off"},
    "route bucket": {"methods": "PUT", "path": "/bucket/{key*}",
                     "resource": "bucket/{key*}", "profile": "s3"},
}

HOST = "client.test"  # the Host the test client sends


@pytest.fixture
def tm(tidemark):
    return tidemark(config=ROUTES)


def dav(tm, method, src, dest, token=None, headers=()):
    h = [("Destination", dest)] if dest is not None else []
    return tm.request(method, src, token=token, headers=h + list(headers))


def seen(upstream, method):
    return [r for r in upstream.requests if r.method == method]


# ------------------------------------------------------------ WebDAV


def test_stale_move_onto_fenced_file_is_refused(tm, upstream):
    """The side door: a stale writer PUTs a temp file (its own, so its
    token is fine there), then MOVEs it onto the fenced file."""
    assert tm.request("PUT", "/dav/f", token=5, body=b"v5").status == 200
    assert tm.request("PUT", "/dav/tmp", token=3, body=b"v3").status == 200
    r = dav(tm, "MOVE", "/dav/tmp", "http://%s/dav/f" % HOST, token=3)
    doc = assert_problem(r, 409)
    assert doc["resource"] == "files/f", doc
    assert doc["high_water"] == 5 and doc["token"] == 3, doc
    assert r.header("Fencing-High-Water") == "5", r
    assert seen(upstream, "MOVE") == []
    assert tm.mark("files/f") == 5
    assert tm.mark("files/tmp") == 3


def test_fresh_move_raises_both_marks(tm, upstream):
    r = dav(tm, "MOVE", "/dav/a", "http://%s/dav/b?x=1" % HOST, token=7,
            headers=[("Overwrite", "T")])
    assert r.status == 200, r
    assert r.header("Fencing-High-Water") == "7", r
    assert tm.mark("files/a") == 7
    assert tm.mark("files/b") == 7
    (req,) = seen(upstream, "MOVE")
    assert req.target == "/dav/a"
    # Under the authority the upstream gets as its Host.
    assert req.header("Host") == "127.0.0.1:%d" % upstream.port
    assert req.header("Destination") == \
        "http://127.0.0.1:%d/dav/b?x=1" % upstream.port, req
    assert req.header("Overwrite") == "T"
    assert req.header("Fencing-Token") is None


def test_move_with_a_path_destination(tm, upstream):
    r = dav(tm, "MOVE", "/dav/p1", "/dav/p2", token=2)
    assert r.status == 200, r
    (req,) = seen(upstream, "MOVE")
    assert req.header("Destination") == \
        "http://127.0.0.1:%d/dav/p2" % upstream.port
    assert tm.mark("files/p1") == 2 and tm.mark("files/p2") == 2


def test_destination_checked_against_an_absolute_form_target(tm, upstream):
    """The request's authority is its absolute-form target's, not Host's
    (RFC 9112 3.2.2)."""
    with tm.conn() as c:
        r = c.request("MOVE", "http://Real.Test/dav/af",
                      [("Fencing-Token", "2"),
                       ("Destination", "http://real.test/dav/ag")])
        assert r.status == 200, r
        r = c.request("MOVE", "http://real.test/dav/af",
                      [("Fencing-Token", "2"),
                       ("Destination", "http://%s/dav/ag" % HOST)])
        doc = assert_problem(r, 400)
        assert "another host" in doc["detail"], doc
    assert tm.mark("files/ag") == 2


def test_copy_raises_only_the_destination(tm, upstream):
    r = dav(tm, "COPY", "/dav/c", "http://%s:80/dav/d" % HOST, token=4)
    assert r.status == 200, r
    assert tm.mark("files/d") == 4
    assert tm.mark("files/c") is None
    assert len(seen(upstream, "COPY")) == 1


def test_stale_copy_onto_fenced_file_is_refused(tm, upstream):
    assert tm.request("PUT", "/dav/g", token=8).status == 200
    r = dav(tm, "COPY", "/dav/src", "/dav/g", token=6)
    doc = assert_problem(r, 409)
    assert doc["resource"] == "files/g", doc
    assert seen(upstream, "COPY") == []


def test_move_stale_at_its_source_raises_nothing(tm, upstream):
    """Both marks are checked against the cache before any is raised."""
    assert tm.request("PUT", "/dav/s", token=9).status == 200
    r = dav(tm, "MOVE", "/dav/s", "/dav/new", token=5)
    doc = assert_problem(r, 409)
    assert doc["resource"] == "files/s", doc
    assert doc["high_water"] == 9, doc
    assert tm.mark("files/new") is None
    assert seen(upstream, "MOVE") == []


@pytest.mark.parametrize("held", ["src2", "dst2"])
def test_move_waits_for_writes_in_flight_on_both_ends(tm, upstream, held):
    """A MOVE takes its turn in the ordering gate of both resources."""
    put = Async(tm.request, "PUT", "/dav/" + held, token=5, timeout=30,
                headers=[("X-Test-Id", "p5"), ("X-Test-Hold", "h5")])
    upstream.wait_request("X-Test-Id", "p5")
    move = Async(dav, tm, "MOVE", "/dav/src2", "/dav/dst2", token=6,
                 headers=[("X-Test-Id", "m6")])
    not_arrived(upstream, "m6")
    upstream.release("h5")
    assert put.get().status == 200
    assert move.get().status == 200
    assert tm.mark("files/src2") == tm.mark("files/dst2") == 6


@pytest.mark.parametrize("method", ["DELETE", "MOVE"])
def test_member_write_waits_for_a_collection_request_in_flight(
        tm, upstream, method):
    """A request on a collection with an older token, accepted before a
    member's newer write raised the subtree marks, is still on its way:
    the member's write reaches the backend only once it has finished, so
    it cannot remove what the newer write wrote. Writes elsewhere, and
    with the same token, do not wait."""
    h = [("X-Test-Id", "c5"), ("X-Test-Hold", "hc")]
    if method == "MOVE":
        h.append(("Destination", "/dav/away"))
    coll = Async(tm.request, method, "/dav/c", token=5, timeout=30,
                 headers=h)
    upstream.wait_request("X-Test-Id", "c5")
    put = Async(tm.request, "PUT", "/dav/c/sub/x", token=10, timeout=30,
                headers=[("X-Test-Id", "p10")])
    assert tm.request("PUT", "/dav/d/x", token=10).status == 200
    assert tm.request("PUT", "/dav/c/y", token=5).status == 200
    not_arrived(upstream, "p10")
    upstream.release("hc")
    assert coll.get().status == 200
    assert put.get().status == 200
    (c,) = upstream.find("X-Test-Id", "c5")
    (p,) = upstream.find("X-Test-Id", "p10")
    assert p.arrival > c.answered


def test_move_onto_itself_is_one_resource(tm, upstream):
    r = dav(tm, "MOVE", "/dav/same", "/dav/same", token=3)
    assert r.status == 200, r
    assert tm.mark("files/same") == 3


def test_move_without_token(tm, upstream):
    r = dav(tm, "MOVE", "/dav/nt", "/dav/nt2")
    doc = assert_problem(r, 428)
    assert doc["resource"] == "files/nt2", doc
    assert seen(upstream, "MOVE") == []


@pytest.mark.parametrize("dest,why", [
    ("http://elsewhere.test/dav/x", "another host"),
    ("http://%s:8080/dav/x" % HOST, "another host"),
    ("https://%s:80/dav/x" % HOST, "another host"),
    ("http://u@%s/dav/x" % HOST, "userinfo"),
    ("/dav/x#frag", "fragment"),
    ("ftp://%s/dav/x" % HOST, "scheme"),
    ("//%s/dav/x" % HOST, "not an absolute URI or path"),
    ("dav/x", "not an absolute URI or path"),
])
def test_bad_destination_is_400(tm, upstream, dest, why):
    with tm.conn() as c:
        r = c.request("MOVE", "/dav/x0",
                      [("Fencing-Token", "3"), ("Destination", dest)])
        doc = assert_problem(r, 400)
        assert why in doc["detail"], doc
        assert c.closed()
    assert seen(upstream, "MOVE") == []
    assert tm.mark("files/x0") is None


def test_destination_missing_or_twice_is_400(tm, upstream):
    doc = assert_problem(dav(tm, "MOVE", "/dav/m", None, token=3), 400)
    assert "needs a Destination" in doc["detail"], doc
    r = tm.request("COPY", "/dav/m", token=3,
                   headers=[("Destination", "/dav/a"),
                            ("Destination", "/dav/b")])
    doc = assert_problem(r, 400)
    assert "more than one Destination" in doc["detail"], doc
    assert upstream.count() == 0


@pytest.mark.parametrize("dest", [
    "/dav/%66", "/dav/x/../f", "/dav/./f", "/dav//f/", "/dav/f;v=1",
    "http://%s/dav/%%66" % HOST,
])
def test_destination_spellings_reach_one_mark(tm, upstream, dest):
    """The Destination is canonicalized like a request path: every
    spelling of the fenced file reaches its mark."""
    assert tm.request("PUT", "/dav/f", token=5).status == 200
    doc = assert_problem(dav(tm, "MOVE", "/dav/tmp", dest, token=3), 409)
    assert doc["resource"] == "files/f", doc
    assert seen(upstream, "MOVE") == []


@pytest.mark.parametrize("dest", ["/dav/a%2Fb", "/dav/%zz", "/dav/%c3",
                                  "/dav/%00", "/dav/../../etc"])
def test_destination_the_canon_refuses_is_400(tm, upstream, dest):
    assert_problem(dav(tm, "MOVE", "/dav/a", dest, token=3), 400)
    assert seen(upstream, "MOVE") == []


@pytest.mark.parametrize("dest", ["/open/x", "/nowhere/x", "/dav"])
def test_destination_not_under_a_fenced_route_is_400(tm, upstream, dest):
    r = dav(tm, "MOVE", "/dav/u", dest, token=3)
    doc = assert_problem(r, 400)
    assert "not under a fenced route" in doc["detail"], doc
    assert seen(upstream, "MOVE") == []
    assert tm.mark("files/u") is None


def test_copy_from_unfenced_path_onto_fenced_file(tm, upstream):
    """A source no fenced route matches does not open the door."""
    assert tm.request("PUT", "/dav/h", token=5).status == 200
    assert_problem(dav(tm, "COPY", "/open/h", "/dav/h"), 428)
    assert_problem(dav(tm, "MOVE", "/nowhere/h", "/dav/h", token=4), 409)
    assert seen(upstream, "COPY") == seen(upstream, "MOVE") == []
    r = dav(tm, "MOVE", "/nowhere/h", "/dav/h", token=6)
    assert r.status == 200, r
    assert tm.mark("files/h") == 6
    assert tm.mark("open/h") is None


def test_unfenced_moves_pass_as_before(tm, upstream):
    r = dav(tm, "MOVE", "/open/a", "/open/b")
    assert r.status == 200, r
    (req,) = seen(upstream, "MOVE")
    assert req.header("Destination") == "/open/b"  # untouched


def test_profile_write_methods_are_fenced(tm, upstream):
    """methods = PUT DELETE, but MKCOL and PROPPATCH write on WebDAV."""
    assert_problem(tm.request("MKCOL", "/dav/dir"), 428)
    assert_problem(tm.request("PROPPATCH", "/dav/f"), 428)
    r = tm.request("MKCOL", "/dav/dir", token=2)
    assert r.status == 200, r
    assert tm.mark("files/dir") == 2
    # Reads are not fenced.
    assert tm.request("PROPFIND", "/dav/dir").status == 200


# ---------------------------------------------------------------- S3


def delete_xml(*keys, quiet=False):
    """A DeleteObjects body naming keys (XML-escaped here)."""
    esc = [k.replace("&", "&amp;").replace("<", "&lt;") for k in keys]
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<Delete xmlns='
            '"http://s3.amazonaws.com/doc/2006-03-01/">%s%s</Delete>' % (
                "<Quiet>true</Quiet>" if quiet else "",
                "".join("<Object><Key>%s</Key></Object>" % k for k in esc))
            ).encode()


def multi_delete(tm, target, body, token=None, headers=()):
    return tm.request("POST", target, token=token, body=body, headers=[
        ("Content-Type", "application/xml")] + list(headers))


@pytest.mark.parametrize("target", [
    "/bucket?delete", "/bucket?delete=", "/bucket/?delete",
    "/bucket?x=1&Delete", "/bucket?%64elete",
])
def test_s3_multi_object_delete_raises_each_keys_mark(tm, upstream, target):
    """Each key is fenced as a DELETE of it would be; the body reaches
    the server byte for byte."""
    assert tm.request("PUT", "/bucket/a", token=5).status == 200
    body = delete_xml("a", "b c", "dir/x&y", "caf\u00e9", quiet=True)
    r = multi_delete(tm, target, body, token=6)
    assert r.status == 200, r
    assert r.header("Fencing-High-Water") == "6", r
    for res in ("a", "b%20c", "dir/x%26y", "caf%C3%A9"):
        assert tm.mark("bucket/" + res) == 6, res
    (req,) = seen(upstream, "POST")
    assert req.body == body
    assert req.header("Fencing-Token") is None
    # A DELETE of one of those keys now checks the same mark.
    assert_problem(tm.request("DELETE", "/bucket/b%20c", token=5), 409)


@pytest.mark.parametrize("cold", [False, True], ids=["cached", "restarted"])
def test_a_stale_key_refuses_the_whole_delete(tm, upstream, cold):
    """Restarted, tidemark knows no mark until it reads it: the marks are
    read before any is raised, so still none is."""
    assert tm.request("PUT", "/bucket/held", token=9).status == 200
    if cold:
        tm.stop()
        tm.start()
    r = multi_delete(tm, "/bucket?delete",
                     delete_xml("free1", "held", "free2"), token=7)
    doc = assert_problem(r, 409)
    assert doc["resource"] == "bucket/held", doc
    assert doc["high_water"] == 9 and doc["token"] == 7, doc
    assert seen(upstream, "POST") == []
    assert tm.mark("bucket/free1") is None
    assert tm.mark("bucket/free2") is None
    assert tm.mark("bucket/held") == 9
    assert_problem(multi_delete(tm, "/bucket?delete", delete_xml("a")), 428)


@pytest.mark.parametrize("body,words", [
    (b"<Delete><Object><Key>a</Key></Object>", "ends"),
    (b'<!DOCTYPE d [<!ENTITY e "k">]><Delete><Object><Key>&e;</Key>'
     b"</Object></Delete>", "DOCTYPE"),
    (b"<Delete><Object><Key><![CDATA[a]]></Key></Object></Delete>", "CDATA"),
    (b"<Delete></Delete>", "no Object"),
    (b"<Delete><Object><Key>../../etc</Key></Object></Delete>", "bucket"),
    (b"<Delete><Object><Key>&#1;</Key></Object></Delete>", "control"),
    (b"<Delete><Object><Key>" + b"k" * 1025 + b"</Key></Object></Delete>",
     "1024"),
    (delete_xml(*["k%d" % i for i in range(1001)]), "more than 1000"),
])
def test_a_malformed_multi_object_delete_is_400(tm, upstream, body, words):
    r = multi_delete(tm, "/bucket?delete", body, token=4)
    doc = assert_problem(r, 400)
    assert words in doc["detail"], doc
    assert upstream.count() == 0
    assert tm.mark("bucket/a") is None
    assert tm.mark("bucket/k0") is None


def test_a_multi_object_delete_of_1000_keys(tm, upstream):
    """S3's most keys, each as long as a resource name here can be."""
    keys = ["%04d" % i + "k" * 500 for i in range(1000)]
    body = delete_xml(*keys)
    r = multi_delete(tm, "/bucket?delete", body, token=3)
    assert r.status == 200, r
    assert tm.mark("bucket/" + keys[0]) == 3
    assert tm.mark("bucket/" + keys[999]) == 3
    (req,) = seen(upstream, "POST")
    assert req.body == body


@pytest.mark.parametrize("n", [1, 17, 505, 1024, 1025])
def test_a_key_is_fenced_as_its_delete_is(tm, upstream, n):
    """Key length classes: a key whose resource name fits is fenced at
    it, one that does not is refused as a DELETE of it is."""
    key = "k" * n
    r = multi_delete(tm, "/bucket?delete", delete_xml(key), token=2)
    one = tm.request("DELETE", "/bucket/" + key, token=2)
    fits = len("bucket/" + key) <= 512
    assert r.status == (200 if fits else 400), r
    assert one.status == r.status, one
    if fits:
        assert tm.mark("bucket/" + key) == 2
    assert len(seen(upstream, "POST")) == (1 if fits else 0)


def test_an_oversized_or_unframed_multi_object_delete(tidemark, upstream):
    tm = tidemark(config=dict(ROUTES, proxy={"multi_delete_max": "1024"}))
    body = delete_xml(*["k%d" % i for i in range(60)])
    assert len(body) > 1024
    doc = assert_problem(multi_delete(tm, "/bucket?delete", body, token=4),
                         413)
    assert "multi_delete_max" in doc["detail"], doc
    with tm.conn() as c:
        c.send(b"POST /bucket?delete HTTP/1.1\r\nHost: x\r\n"
               b"Fencing-Token: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"0\r\n\r\n")
        assert_problem(c.read_response(), 411)
    doc = assert_problem(multi_delete(tm, "/?delete", delete_xml("k0"),
                                      token=4), 400)
    assert "POST /<bucket>?delete" in doc["detail"], doc
    assert upstream.count() == 0
    assert tm.mark("bucket/k0") is None


def test_keys_spelled_two_ways_are_one_resource(tm, upstream):
    """"a", "x/../a" and "./a" have one canonical name, as a DELETE of
    each has: one mark, checked and raised once."""
    assert tm.request("PUT", "/bucket/a", token=6).status == 200
    doc = assert_problem(multi_delete(tm, "/bucket?delete", delete_xml(
        "b", "x/../a"), token=5), 409)
    assert doc["resource"] == "bucket/a", doc
    r = multi_delete(tm, "/bucket?delete", delete_xml("a", "x/../a", "./a"),
                     token=7)
    assert r.status == 200, r
    assert tm.mark("bucket/a") == 7
    assert tm.mark("bucket/b") is None


def test_a_client_that_leaves_a_multi_object_delete(tm, upstream):
    """Half a body, then gone: nothing forwarded, no mark. A whole one,
    then gone before the answer (its marks being read or raised): the
    next requests are served as ever."""
    body = delete_xml("gone1", "gone2")
    head = (b"POST /bucket?delete HTTP/1.1\r\nHost: x\r\nFencing-Token: 3"
            b"\r\nContent-Length: %d\r\n\r\n" % len(body))
    with tm.conn() as c:
        c.send(head + body[:20])
    for _ in range(20):
        with tm.conn() as c:
            c.send(head + body)
    after = delete_xml("after")
    r = multi_delete(tm, "/bucket?delete", after, token=3)
    assert r.status == 200, r
    assert tm.mark("bucket/after") == 3
    # The whole ones may reach the upstream after "after" (the upstream
    # records in the order requests end): each came whole, none half.
    bodies = [req.body for req in seen(upstream, "POST")]
    assert bodies.count(after) == 1
    assert [b for b in bodies if b not in (body, after)] == []


def test_a_multi_object_delete_with_expect_continue(tm, upstream):
    body = delete_xml("e1", "e2")
    with tm.conn() as c:
        c.send(b"POST /bucket?delete HTTP/1.1\r\nHost: x\r\n"
               b"Fencing-Token: 8\r\nExpect: 100-continue\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body))
        r = read_response(c.reader, skip_interim=False)
        assert r.status == 100, r
        c.send(body)
        r = c.read_response()
        assert r.status == 200, r
    assert tm.mark("bucket/e2") == 8
    (req,) = seen(upstream, "POST")
    assert req.body == body and req.header("Expect") is None

def test_s3_form_upload_is_400(tm, upstream):
    body = (b"--b\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\n"
            b"k\r\n--b--\r\n")
    r = tm.request("POST", "/bucket", token=9, body=body, headers=[
        ("Content-Type", "multipart/form-data; boundary=b")])
    doc = assert_problem(r, 400)
    assert "form upload" in doc["detail"], doc
    assert upstream.count() == 0


@pytest.mark.parametrize("name", ["x-amz-rename-source",
                                  "X_Amz_Rename_Source"])
def test_s3_rename_is_400(tm, upstream, name):
    """In any spelling a gateway may read as the header (hname.h)."""
    r = tm.request("PUT", "/bucket/new?renameObject", token=9, headers=[
        (name, "/bucket/old")])
    doc = assert_problem(r, 400)
    assert "rename" in doc["detail"], doc
    assert upstream.count() == 0


def test_s3_key_writes_are_fenced(tm, upstream):
    assert tm.request("PUT", "/bucket/k", token=3).status == 200
    assert tm.mark("bucket/k") == 3
    assert_problem(tm.request("PUT", "/bucket/k", token=2), 409)
    assert_problem(tm.request("PUT", "/bucket/k"), 428)
    # A copy writes its path; its source is only read.
    r = tm.request("PUT", "/bucket/k", token=4,
                   headers=[("x-amz-copy-source", "/bucket/other")])
    assert r.status == 200, r
    # Multipart uploads name the key in the path: POST and DELETE are
    # the profile's write methods even though methods says PUT.
    assert_problem(tm.request("POST", "/bucket/k?uploads"), 428)
    assert tm.request("POST", "/bucket/k?uploads", token=4).status == 200
    # An upload tidemark did not see created (this upstream's answer
    # names none) is refused, whatever the token.
    r = tm.request("POST", "/bucket/k?uploadId=1", token=5)
    assert_problem(r, 400)
    assert r.header("Tidemark-Error") == "unknown-upload", r
    assert_problem(tm.request("DELETE", "/bucket/k"), 428)
    assert tm.mark("bucket/k") == 4


def test_s3_posts_elsewhere_pass(tm, upstream):
    """A delete on a bucket with no fenced route under it is not ours."""
    body = delete_xml("k")
    r = tm.request("POST", "/other?delete", body=body)
    assert r.status == 200, r
    assert upstream.count() == 1
    assert tm.mark("other/k") is None


# ------------------------------------------------------- signed tokens


def test_signed_tokens_on_both_ends(tidemark, upstream, tmp_path):
    """With verify = hmac each end is verified under its own route: a
    token signed for the Destination copies onto it, but a MOVE would
    also write the source, for which that token is borrowed."""
    key = tmp_path / "token.key"
    key.write_text("0123456789abcdef0123456789abcdef\n")
    key.chmod(0o600)
    config = dict(ROUTES)
    config["tokens"] = {"key_file": str(key)}
    config["route files"] = dict(ROUTES["route files"], verify="hmac")
    tm = tidemark(config=config)
    st, _, body = tm.admin("POST", "/v1/locks/files/b?ttl_ms=60000")
    assert st == 201, body
    token = json.loads(body)["token"]
    assert "." in token
    r = dav(tm, "COPY", "/dav/a", "/dav/b", token=token)
    assert r.status == 200, r
    doc = assert_problem(dav(tm, "MOVE", "/dav/a", "/dav/b", token=token),
                         403)
    assert doc["resource"] == "files/a", doc
    assert tm.mark("files/a") is None
    assert len(seen(upstream, "MOVE")) == 0


def test_a_profile_adds_no_writes_to_an_off_route(tidemark, upstream):
    """A read route with a profile and mode = off, before the fenced route
    of the same path: the profile's write methods must not match it, or a
    PUT or MOVE would pass unfenced; they reach the fenced route."""
    tm = tidemark(config={
        "route reads": {"methods": "GET PROPFIND", "path": "/dav/{key*}",
                        "resource": "files/{key*}", "mode": "off",
                        "profile": "webdav"},
        "route files": {"methods": "PUT", "path": "/dav/{key*}",
                        "resource": "files/{key*}", "profile": "webdav"},
    })
    assert_problem(tm.request("PUT", "/dav/x", body=b"v"), 428)
    assert_problem(dav(tm, "MOVE", "/dav/y", "/dav/x"), 428)
    assert upstream.count() == 0
    assert tm.request("PROPFIND", "/dav/x").status == 200
