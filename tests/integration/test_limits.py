"""Limits with their own status codes: a body over the route's max_body
is 413 (before any byte reaches the upstream when the length is known),
TRACE is refused."""
from wire import build_request, chunked


def test_body_over_max_body_is_413_and_not_forwarded(tidemark, upstream):
    tm = tidemark({"route docs": {"path": "/v1/documents/{doc}",
                                  "resource": "documents/{doc}",
                                  "max_body": "1K"}})
    with tm.conn() as c:
        c.send(build_request("PUT", "/v1/documents/lim",
                             [("Fencing-Token", "3")], b"x" * 2000))
        r = c.read_response()
        assert r.status == 413, r
        assert c.closed()
    assert upstream.requests == []
    assert tm.admin("GET", "/v1/marks/documents/lim")[0] == 404
    assert tm.put("lim", token=3, body=b"y" * 1024).status == 200


def test_chunked_body_over_max_body_never_completes_upstream(tidemark,
                                                             upstream):
    tm = tidemark({"route docs": {"path": "/v1/documents/{doc}",
                                  "resource": "documents/{doc}",
                                  "max_body": "1K"}})
    with tm.conn() as c:
        c.send(build_request("PUT", "/v1/documents/limc",
                             [("Fencing-Token", "3"),
                              ("Transfer-Encoding", "chunked")],
                             chunked(b"z" * 5000, size=512)))
        r = c.read_response()
        assert r.status == 413, r
    # Whatever reached the upstream is an unfinished request.
    assert [q for q in upstream.requests if q.target ==
            "/v1/documents/limc"] == []


def test_trace_is_refused(tidemark, upstream):
    tm = tidemark()
    r = tm.request("TRACE", "/anything")
    assert r.status == 405, r
    assert upstream.requests == []
