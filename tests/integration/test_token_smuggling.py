"""The token header gets the care framing gets: a duplicate, a list, an
underscore variant, or the header named in Connection is refused with
400, the connection closed, and the upstream never sees a token."""
import pytest

from wire import build_request, chunked


CASES = [
    ("duplicate", [("Fencing-Token", "5"), ("Fencing-Token", "6")]),
    ("list", [("Fencing-Token", "5, 6")]),
    ("underscore", [("Fencing-Token", "5"), ("Fencing_Token", "9")]),
    ("underscore alone", [("fencing_token", "9")]),
    ("dot", [("Fencing-Token", "5"), ("Fencing.Token", "9")]),
    ("resource underscore", [("Fencing-Token", "5"),
                             ("Fencing_Resource", "other")]),
    ("named in Connection", [("Connection", "Fencing-Token"),
                             ("Fencing-Token", "5")]),
    ("resource named in Connection", [("Connection", "fencing-resource"),
                                      ("Fencing-Resource", "x"),
                                      ("Fencing-Token", "5")]),
]


@pytest.mark.parametrize("name,headers", CASES, ids=[c[0] for c in CASES])
def test_token_tricks_are_refused(tidemark, upstream, name, headers):
    tm = tidemark()
    with tm.conn() as c:
        c.send(build_request("PUT", "/v1/documents/sm", headers, b"x"))
        r = c.read_response()
        assert r.status == 400, r
        assert c.closed()
    assert upstream.requests == []
    status, _, _ = tm.admin("GET", "/v1/marks/documents/sm")
    assert status == 404


def test_underscore_variant_refused_on_unfenced_paths(tidemark, upstream):
    tm = tidemark()
    r = tm.request("GET", "/elsewhere", headers=[("Fencing_Token", "1")])
    assert r.status == 400, r
    assert upstream.requests == []


TRAILERS = [("token", "Fencing-Token", "9"),
            ("token lowercase", "fencing-token", "9"),
            ("resource", "Fencing-Resource", "other"),
            ("content-length", "Content-Length", "5"),
            ("host", "Host", "evil.example"),
            # Every spelling a server may read as one of these names.
            ("token underscore", "Fencing_Token", "9"),
            ("token dot", "FENCING.TOKEN", "9"),
            ("resource underscore", "fencing_resource", "other"),
            ("content-length underscore", "Content_Length", "5"),
            ("transfer-encoding underscore", "Transfer_Encoding", "chunked"),
            ("host upper", "HOST", "evil.example")]


@pytest.mark.parametrize("name,field,val", TRAILERS,
                         ids=[t[0] for t in TRAILERS])
def test_token_or_framing_in_trailers_is_refused(tidemark, upstream, name,
                                                 field, val):
    tm = tidemark()
    with tm.conn() as c:
        c.send(build_request("PUT", "/v1/documents/tr",
                             [("Fencing-Token", "3"),
                              ("Transfer-Encoding", "chunked"),
                              ("X-Test-Id", "tr")],
                             chunked(b"hello", trailers=[(field, val)])))
        r = c.read_response()
        assert r.status == 400, r
        assert c.closed()
    # The upstream never got a complete request with that trailer.
    assert upstream.find("X-Test-Id", "tr") == []


def test_harmless_trailer_passes(tidemark, upstream):
    tm = tidemark()
    with tm.conn() as c:
        c.send(build_request("PUT", "/v1/documents/tr2",
                             [("Fencing-Token", "3"),
                              ("Transfer-Encoding", "chunked"),
                              ("X-Test-Id", "tr2")],
                             chunked(b"hello", trailers=[("X-Sum", "1")])))
        assert c.read_response().status == 200
    assert upstream.find("X-Test-Id", "tr2")[0].body == b"hello"


def test_configured_token_header_in_other_spellings(tidemark, upstream):
    """The configured name, not only the default, is refused in every
    spelling, in the head and in trailers, however long it is."""
    name = "X-Application-Specific-Lock-Fencing-Token"
    tm = tidemark(config={"proxy": {"token_header": name}})
    r = tm.request("PUT", "/v1/documents/cfg",
                   headers=[(name, "3"), (name.replace("-", "_"), "9")],
                   body=b"x")
    assert r.status == 400, r
    with tm.conn() as c:
        c.send(build_request("PUT", "/v1/documents/cfg",
                             [(name, "3"), ("Transfer-Encoding", "chunked"),
                              ("X-Test-Id", "cfg")],
                             chunked(b"hello", trailers=[
                                 (name.lower().replace("-", "_"), "9")])))
        assert c.read_response().status == 400
        assert c.closed()
    assert upstream.find("X-Test-Id", "cfg") == []
    assert tm.put("cfg", headers=[(name, "3")]).status == 200
