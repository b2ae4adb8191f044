"""The wire contract and the modes table: what tidemark answers for each
kind of token, what reaches the upstream, and that a refusal never moves
a mark."""

import pytest

from wire import assert_problem

ROUTES = {
    "route docs": {"path": "/v1/documents/{doc}",
                   "resource": "documents/{doc}", "mode": "correctness"},
    "route eff": {"path": "/v1/eff/{doc}", "resource": "eff/{doc}",
                  "mode": "efficiency"},
    "route off": {"path": "/v1/off/{doc}", "resource": "off/{doc}",
                  "mode": "off"},
    "route hdr": {"path": "/v1/hdr/{rest*}", "resource": "header",
                  "mode": "correctness"},
    "route files": {"methods": "PUT POST PATCH DELETE",
                    "path": "/v1/files/{key*}", "resource": "files/{key*}",
                    "mode": "correctness", "upstream": "default"},
}

BAD_TOKENS = [
    ("zero", "0"),
    ("negative", "-1"),
    ("fraction", "1.5"),
    ("trailing-junk", " 7x"),
    ("two-to-the-63", "9223372036854775808"),
    ("two-to-the-64", "18446744073709551616"),
    ("letters", "abc"),
    ("plus-sign", "+5"),
    ("hex", "0x10"),
    ("empty", ""),
    ("inner-space", "1 2"),
    ("list", "5, 6"),
    ("non-ascii-digit", "\xb2"),
]


@pytest.fixture
def tm(tidemark):
    return tidemark(config=ROUTES)


def no_fencing_headers(req):
    assert req.header("Fencing-Token") is None, req
    assert req.header("Fencing-Resource") is None, req


# ----------------------------------------------------------- correctness


def test_accepted_write_is_forwarded_with_high_water(tm, upstream):
    r = tm.put("a", token=7, body=b"hello", headers=[("X-Test-Id", "w1")])
    assert r.status == 200, r
    assert r.header("Fencing-High-Water") == "7", r
    assert r.body.startswith(b"ok PUT /v1/documents/a"), r
    seen = upstream.find("X-Test-Id", "w1")
    assert len(seen) == 1
    assert seen[0].method == "PUT" and seen[0].target == "/v1/documents/a"
    assert seen[0].body == b"hello"
    no_fencing_headers(seen[0])
    assert tm.mark("documents/a") == 7


def test_upstream_status_passed_through_with_high_water(tm, upstream):
    r = tm.put("st", token=3, headers=[("X-Test-Status", "201")])
    assert r.status == 201, r
    assert r.header("Fencing-High-Water") == "3", r


def test_equal_token_is_accepted(tm, upstream):
    assert tm.put("eq", token=7).status == 200
    r = tm.put("eq", token=7)
    assert r.status == 200, r
    assert r.header("Fencing-High-Water") == "7", r
    assert upstream.count() == 2
    assert tm.mark("documents/eq") == 7


def test_higher_token_raises_the_mark(tm):
    assert tm.put("up", token=7).status == 200
    r = tm.put("up", token=9)
    assert r.status == 200, r
    assert r.header("Fencing-High-Water") == "9", r
    assert tm.mark("documents/up") == 9


def test_stale_token_is_409_with_problem_fields(tm, upstream):
    assert tm.put("s", token=9).status == 200
    for attempt in range(2):  # a retry with the same token fails the same
        r = tm.put("s", token=5, headers=[("X-Test-Id", "stale")])
        doc = assert_problem(r, 409)
        assert doc["resource"] == "documents/s", doc
        assert doc["token"] == 5, doc
        assert doc["high_water"] == 9, doc
        assert r.header("Fencing-High-Water") == "9", r
    assert upstream.find("X-Test-Id", "stale") == []
    assert tm.mark("documents/s") == 9
    lines = tm.wait_log("route=docs resource=documents/s token=5 mark=9",
                        count=2)
    assert len(lines) == 2, lines
    assert all("stale" in ln for ln in lines), lines


def test_missing_token_on_correctness_route_is_428(tm, upstream):
    r = tm.put("m", token=None, headers=[("X-Test-Id", "missing")])
    doc = assert_problem(r, 428)
    assert doc["resource"] == "documents/m", doc
    assert upstream.count() == 0
    assert tm.mark("documents/m") is None
    lines = tm.wait_log("route=docs", "resource=documents/m ", "missing")
    assert len(lines) == 1, lines


@pytest.mark.parametrize("value", [v for _, v in BAD_TOKENS],
                         ids=[i for i, _ in BAD_TOKENS])
def test_malformed_token_is_400_and_moves_nothing(tm, upstream, value):
    assert tm.put("inv", token=3).status == 200
    r = tm.put("inv", headers=[("Fencing-Token", value),
                               ("X-Test-Id", "bad")])
    assert_problem(r, 400)
    assert upstream.find("X-Test-Id", "bad") == []
    assert tm.mark("documents/inv") == 3
    lines = tm.wait_log("route=docs", "resource=documents/inv ", "invalid")
    assert len(lines) == 1, lines


def test_malformed_token_without_mark_creates_none(tm, upstream):
    r = tm.put("inv2", headers=[("Fencing-Token", "99x")])
    assert_problem(r, 400)
    assert tm.mark("documents/inv2") is None
    assert upstream.count() == 0


def test_largest_token_is_accepted(tm):
    top = 9223372036854775807
    r = tm.put("max", token=top)
    assert r.status == 200, r
    assert r.header("Fencing-High-Water") == str(top), r
    assert tm.mark("documents/max") == top
    r = tm.put("max", token=top - 1)
    doc = assert_problem(r, 409)
    assert doc["high_water"] == top and doc["token"] == top - 1, doc


@pytest.mark.parametrize("values", [("5", "5"), ("5", "6")],
                         ids=["same", "different"])
def test_two_token_headers_are_400(tm, upstream, values):
    r = tm.put("two", headers=[("Fencing-Token", values[0]),
                               ("X-Test-Id", "two"),
                               ("Fencing-Token", values[1])])
    assert_problem(r, 400)
    assert upstream.count() == 0
    assert tm.mark("documents/two") is None


def test_token_header_name_is_case_insensitive(tm, upstream):
    r = tm.put("case", headers=[("fencing-token", "4"),
                                ("X-Test-Id", "case")])
    assert r.status == 200, r
    assert r.header("Fencing-High-Water") == "4"
    no_fencing_headers(upstream.find("X-Test-Id", "case")[0])


def test_refused_request_keeps_the_connection_usable(tm, upstream):
    assert tm.put("ka", token=9).status == 200
    with tm.conn() as c:
        r = c.request("PUT", "/v1/documents/ka",
                      [("Fencing-Token", "2")], b"body")
        assert r.status == 409
        r = c.request("PUT", "/v1/documents/ka",
                      [("Fencing-Token", "10")], b"body")
        assert r.status == 200, r
        assert r.header("Fencing-High-Water") == "10"


# ------------------------------------------------------------ efficiency


def test_efficiency_missing_token_is_forwarded(tm, upstream):
    r = tm.request("PUT", "/v1/eff/a", body=b"x",
                   headers=[("X-Test-Id", "eff-missing")])
    assert r.status == 200, r
    assert len(upstream.find("X-Test-Id", "eff-missing")) == 1
    assert tm.mark("eff/a") is None


def test_efficiency_accepted_has_high_water(tm, upstream):
    r = tm.request("PUT", "/v1/eff/b", token=4, body=b"x",
                   headers=[("X-Test-Id", "eff-ok")])
    assert r.status == 200, r
    assert r.header("Fencing-High-Water") == "4"
    no_fencing_headers(upstream.find("X-Test-Id", "eff-ok")[0])
    assert tm.mark("eff/b") == 4


def test_efficiency_stale_is_409(tm, upstream):
    assert tm.request("PUT", "/v1/eff/c", token=9, body=b"x").status == 200
    r = tm.request("PUT", "/v1/eff/c", token=2, body=b"x",
                   headers=[("X-Test-Id", "eff-stale")])
    doc = assert_problem(r, 409)
    assert doc["resource"] == "eff/c" and doc["token"] == 2 and \
        doc["high_water"] == 9, doc
    assert r.header("Fencing-High-Water") == "9"
    assert upstream.find("X-Test-Id", "eff-stale") == []
    assert tm.mark("eff/c") == 9
    tm.wait_log("route=eff resource=eff/c token=2 mark=9", "stale")


def test_efficiency_malformed_token_is_400(tm, upstream):
    r = tm.request("PUT", "/v1/eff/d", body=b"x",
                   headers=[("Fencing-Token", "-3")])
    assert_problem(r, 400)
    assert upstream.count() == 0


# ------------------------------------------------------------------- off


def test_off_route_forwards_everything_and_strips(tm, upstream):
    cases = [("9", "off-9"), ("5", "off-5"), (None, "off-none"),
             ("abc", "off-bad")]
    for token, tid in cases:
        h = [("X-Test-Id", tid)]
        if token is not None:
            h.append(("Fencing-Token", token))
        r = tm.request("PUT", "/v1/off/a", body=b"x", headers=h)
        assert r.status == 200, (token, r)
        seen = upstream.find("X-Test-Id", tid)
        assert len(seen) == 1, (token, seen)
        no_fencing_headers(seen[0])
    # off bypasses the store: no mark is kept for the resource.
    assert tm.mark("off/a") is None


# ------------------------------------------------- resources and routes


def test_resource_from_header(tm, upstream):
    r = tm.request("PUT", "/v1/hdr/anything/here", token=3,
                   resource="accounts/42", body=b"x",
                   headers=[("X-Test-Id", "hdr")])
    assert r.status == 200, r
    assert r.header("Fencing-High-Water") == "3"
    no_fencing_headers(upstream.find("X-Test-Id", "hdr")[0])
    assert tm.mark("accounts/42") == 3
    r = tm.request("PUT", "/v1/hdr/other", token=2, resource="accounts/42",
                   body=b"x")
    doc = assert_problem(r, 409)
    assert doc["resource"] == "accounts/42" and doc["high_water"] == 3, doc


def test_resource_header_bytes_answer_valid_json(tm, upstream):
    """A resource header is read as a canonical name: UTF-8 (sent as
    itself or percent-encoded) comes back as itself in the problem
    document; other bytes are a 400, never forwarded, and the document is
    still valid JSON."""
    utf8 = "accounts/\u00e9".encode().decode("latin-1")  # sent as UTF-8
    for res in (utf8, "accounts/%C3%A9", "/accounts//%c3%a9/"):
        r = tm.request("PUT", "/v1/hdr/x", token=5, resource=res, body=b"x")
        assert r.status == 200, r
        r = tm.request("PUT", "/v1/hdr/x", token=4, resource=res, body=b"x")
        doc = assert_problem(r, 409)
        assert doc["resource"] == "accounts/\u00e9", doc
    before = upstream.count()
    for res in ("accounts/\xff\xfe\xc3", "accounts/%FF", "a%2", "..", "/"):
        r = tm.request("PUT", "/v1/hdr/x", token=9, resource=res, body=b"x")
        assert_problem(r, 400)
    assert upstream.count() == before
    assert tm.mark("accounts/%C3%A9") == 5


def test_resource_header_missing_is_400(tm, upstream):
    r = tm.request("PUT", "/v1/hdr/x", token=3, body=b"x")
    assert_problem(r, 400)
    assert upstream.count() == 0


def test_rest_capture_fills_resource(tm):
    r = tm.request("PUT", "/v1/files/a/b/c.txt", token=2, body=b"x")
    assert r.status == 200, r
    assert tm.mark("files/a/b/c.txt") == 2
    r = tm.request("PUT", "/v1/files/a/b/c.txt", token=1, body=b"x")
    assert assert_problem(r, 409)["resource"] == "files/a/b/c.txt"


def test_segment_capture_does_not_span_slashes(tm, upstream):
    # /v1/documents/{doc} does not match two segments: unmatched, passed.
    r = tm.request("PUT", "/v1/documents/a/b", body=b"x",
                   headers=[("X-Test-Id", "twoseg")])
    assert r.status == 200, r
    assert len(upstream.find("X-Test-Id", "twoseg")) == 1
    assert tm.mark("documents/a/b") is None


def test_query_is_not_part_of_the_resource(tm, upstream):
    r = tm.request("PUT", "/v1/documents/q?x=1&y=2", token=4, body=b"x",
                   headers=[("X-Test-Id", "query")])
    assert r.status == 200, r
    assert upstream.find("X-Test-Id", "query")[0].target == \
        "/v1/documents/q?x=1&y=2"
    assert tm.mark("documents/q") == 4


def test_method_outside_route_is_unmatched_and_stripped(tm, upstream):
    assert tm.put("g", token=9).status == 200
    r = tm.request("GET", "/v1/documents/g", token=1,
                   headers=[("X-Test-Id", "get")])
    assert r.status == 200, r
    seen = upstream.find("X-Test-Id", "get")
    assert len(seen) == 1
    no_fencing_headers(seen[0])
    assert tm.mark("documents/g") == 9


def test_unmatched_reject_is_404(tidemark, upstream):
    tm = tidemark(config={"proxy": {"unmatched": "reject"}})
    for method, target in (("GET", "/v1/documents/a"), ("PUT", "/other"),
                           ("PUT", "/v1/documents/a/b")):
        r = tm.request(method, target, token=5, body=b"x")
        assert_problem(r, 404)
    assert upstream.count() == 0
    assert tm.put("a", token=5).status == 200


def test_first_matching_route_wins(tidemark, upstream):
    loose = {"methods": "PUT", "path": "/v1/x/{id}", "resource": "x/{id}",
             "mode": "off"}
    strict = {"methods": "PUT", "path": "/v1/x/{id}", "resource": "x/{id}",
              "mode": "correctness"}
    a = tidemark(config={"route loose": loose, "route strict": strict})
    assert a.request("PUT", "/v1/x/1", body=b"x").status == 200
    b = tidemark(config={"route strict": strict, "route loose": loose})
    assert_problem(b.request("PUT", "/v1/x/1", body=b"x"), 428)


def test_route_applies_only_to_its_methods(tidemark, upstream):
    post_off = {"methods": "POST", "path": "/v1/x/{id}",
                "resource": "x/{id}", "mode": "off"}
    put_strict = {"methods": "PUT", "path": "/v1/x/{id}",
                  "resource": "x/{id}", "mode": "correctness"}
    tm = tidemark(config={"route p": post_off, "route q": put_strict})
    assert tm.request("POST", "/v1/x/1", body=b"x").status == 200
    assert_problem(tm.request("PUT", "/v1/x/1", body=b"x"), 428)
    r = tm.request("DELETE", "/v1/x/1")
    assert r.status == 200, r  # no route: passed


def test_long_resource_name(tm, upstream):
    ok = "d" * 400
    r = tm.put(ok, token=1)
    assert r.status == 200, r
    assert tm.mark("documents/" + ok) == 1
    # Longer than any store key: refused with a clear 4xx, nothing moved.
    long = "e" * 2000
    r = tm.put(long, token=1, headers=[("X-Test-Id", "long")])
    assert 400 <= r.status < 500, r
    assert upstream.find("X-Test-Id", "long") == []
    assert tm.alive()


def test_absolute_form_target_cannot_bypass_the_fence(tm, upstream):
    assert tm.put("abs", token=9).status == 200
    with tm.conn() as c:
        r = c.request("PUT", "http://client.test/v1/documents/abs",
                      [("Fencing-Token", "1"), ("X-Test-Id", "abs")], b"x")
    # understood as the fenced path: stale
    assert r.status == 409, r
    assert upstream.find("X-Test-Id", "abs") == []
    assert tm.mark("documents/abs") == 9


def test_token_with_surrounding_whitespace(tm, upstream):
    r = tm.put("ows", headers=[("Fencing-Token", "  12 \t")])
    assert r.status == 200, r
    assert tm.mark("documents/ows") == 12
