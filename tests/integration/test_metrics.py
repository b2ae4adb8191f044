"""GET /metrics in the Prometheus text format: decisions by route and
outcome, store and upstream latency, upstream errors and pool use, open
connections, lock calls. The test parses the whole output strictly."""
import re

NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? '
                    r'(-?[0-9.e+]+|\+Inf|NaN)$')
LABEL = re.compile(r'^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"$')


def parse(text):
    """{family: {"type": t, "samples": [(name, labels, value)]}}."""
    fams, types = {}, {}
    for ln in text.splitlines():
        if ln.startswith("# HELP "):
            name = ln.split(" ")[2]
            assert NAME.match(name), ln
            fams.setdefault(name, {"samples": []})
            continue
        if ln.startswith("# TYPE "):
            _, _, name, t = ln.split(" ")
            assert t in ("counter", "gauge", "histogram"), ln
            assert name not in types, "two TYPE lines for %s" % name
            types[name] = t
            fams.setdefault(name, {"samples": []})["type"] = t
            continue
        assert ln and not ln.startswith("#"), repr(ln)
        m = SAMPLE.match(ln)
        assert m, "not a sample line: %r" % ln
        name, labels = m.group(1), {}
        if m.group(3):
            for part in m.group(3).split(","):
                lm = LABEL.match(part)
                assert lm, ln
                labels[lm.group(1)] = lm.group(2)
        fam = re.sub(r"_(bucket|sum|count)$", "", name)
        if fam not in types:
            fam = name
        assert fam in types, "sample before its TYPE: %r" % ln
        if types[fam] == "counter":
            assert name.endswith("_total"), name
        fams[fam]["samples"].append((name, labels, float(m.group(4))))
    return fams


def value(fams, fam, name=None, **labels):
    for n, ls, v in fams[fam]["samples"]:
        if (name or fam) == n and all(ls.get(k) == x
                                      for k, x in labels.items()):
            return v
    raise KeyError((fam, name, labels))


def check_histograms(fams):
    for fam, f in fams.items():
        if f.get("type") != "histogram":
            continue
        series = {}
        for n, ls, v in f["samples"]:
            key = tuple(sorted((k, x) for k, x in ls.items() if k != "le"))
            series.setdefault(key, {"buckets": [], "count": None})
            if n.endswith("_bucket"):
                series[key]["buckets"].append(v)
            elif n.endswith("_count"):
                series[key]["count"] = v
        for key, s in series.items():
            b = s["buckets"]
            assert b == sorted(b), (fam, key, b)
            assert b[-1] == s["count"], (fam, key)


def test_metrics_parse_and_count(tidemark, upstream):
    tm = tidemark()
    assert tm.put("m", token=5).status == 200
    assert tm.put("m", token=4).status == 409
    assert tm.put("m").status == 428
    assert tm.put("m", token="x").status == 400
    assert tm.request("GET", "/other").status == 200
    status, headers, body = tm.admin("GET", "/metrics")
    assert status == 200
    assert headers["content-type"].startswith("text/plain")
    fams = parse(body.decode())
    check_histograms(fams)
    d = "tidemark_decisions_total"
    assert value(fams, d, route="docs", outcome="accepted") == 1
    assert value(fams, d, route="docs", outcome="stale") == 1
    assert value(fams, d, route="docs", outcome="missing") == 1
    assert value(fams, d, route="docs", outcome="invalid") == 1
    assert value(fams, d, route="", outcome="bypassed") == 1
    assert value(fams, "tidemark_store_raise_seconds",
                 "tidemark_store_raise_seconds_count", backend="lmdb") == 1
    assert value(fams, "tidemark_upstream_response_seconds",
                 "tidemark_upstream_response_seconds_count",
                 upstream="default") == 2
    assert value(fams, "tidemark_upstream_connections", upstream="default",
                 state="idle") >= 1
    assert value(fams, "tidemark_connections") >= 0


def test_upstream_errors_are_counted(tidemark, upstream):
    tm = tidemark()
    r = tm.request("GET", "/x", headers=[("X-Test-Drop", "1")])
    assert r.status == 502
    fams = parse(tm.admin("GET", "/metrics")[2].decode())
    assert value(fams, "tidemark_upstream_errors_total", upstream="default",
                 kind="error") == 1


def test_lock_calls_by_outcome(tidemark, upstream):
    tm = tidemark()
    assert tm.admin("POST", "/v1/locks/jobs/m?ttl_ms=5000")[0] == 201
    assert tm.admin("POST", "/v1/locks/jobs/m?ttl_ms=5000")[0] == 423
    fams = parse(tm.admin("GET", "/metrics")[2].decode())
    check_histograms(fams)
    assert value(fams, "tidemark_lock_calls_total", outcome="acquired") == 1
    assert value(fams, "tidemark_lock_calls_total", outcome="busy") == 1
