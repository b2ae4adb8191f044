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
