"""The token header gets the care framing gets: a duplicate, a list, an
underscore variant, or the header named in Connection is refused with
400, the connection closed, and the upstream never sees a token."""
import pytest

from conftest import build_request


CASES = [
    ("duplicate", [("Fencing-Token", "5"), ("Fencing-Token", "6")]),
    ("list", [("Fencing-Token", "5, 6")]),
    ("underscore", [("Fencing-Token", "5"), ("Fencing_Token", "9")]),
    ("underscore alone", [("fencing_token", "9")]),
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
