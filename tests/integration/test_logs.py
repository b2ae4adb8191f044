"""Logs: one line per forwarded request and one per refusal, as text or,
with log_format = json, one JSON object a line whose key=value words are
fields of their own."""
import json


def json_lines(tm):
    out = []
    for ln in tm.log().splitlines():
        if ln.startswith("===="):
            continue
        out.append(json.loads(ln))
    return out


def test_json_log_lines(tidemark, upstream):
    tm = tidemark({"proxy": {"log_format": "json"}})
    assert tm.put("lg", token=7).status == 200
    assert tm.put("lg", token=6).status == 409
    tm.wait_log("refused")
    lines = json_lines(tm)
    for obj in lines:
        assert set(obj) >= {"ts", "level", "msg"}, obj
    req = [o for o in lines if "request" in o["msg"] and
           o.get("status") == "200"]
    assert len(req) == 1, lines
    assert req[0]["route"] == "docs"
    assert req[0]["resource"] == "documents/lg"
    assert req[0]["token"] == "7"
    assert req[0]["method"] == "PUT"
    refused = [o for o in lines if "refused" in o["msg"]]
    assert len(refused) == 1, lines
    assert refused[0]["level"] == "info"
    assert refused[0]["token"] == "6"
    assert refused[0]["mark"] == "7"
    assert refused[0]["resource"] == "documents/lg"


def test_text_log_has_one_line_per_request(tidemark, upstream):
    tm = tidemark()
    for i in range(3):
        assert tm.request("GET", "/t%d" % i).status == 200
    tm.wait_log("request method=GET", count=3)
    assert len(tm.log_lines("request method=GET")) == 3


def test_warn_level_drops_request_lines(tidemark, upstream):
    tm = tidemark({"proxy": {"log_level": "warn"}})
    assert tm.request("GET", "/quiet").status == 200
    assert tm.put("q", token=2).status == 200
    assert tm.log_lines("request method=") == []


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
    objs = [json.loads(ln) for ln in raw.decode("utf-8").splitlines()
            if not ln.startswith("====")]
    refused = [o for o in objs if "refused" in o["msg"]]
    assert len(refused) == 2, objs
    assert "not UTF-8" in refused[0]["msg"], refused
    assert refused[0].get("resource", "-") == "-", refused
    assert refused[1]["resource"] == "accounts/\u00e9", refused