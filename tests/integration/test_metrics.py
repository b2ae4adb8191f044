"""GET /metrics in the Prometheus text format: decisions by route and
outcome, store and upstream latency, upstream answers by class, errors
and pool use, open connections, lock calls, the reload gauges, how full
the LMDB files are, the process_ family and the build. The tests parse
the whole output strictly, and promtool checks it where installed."""
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from common import free_port, slow, wait_until

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
            assert name in fams, "TYPE before HELP: %s" % name
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


def scrape(tm):
    status, _, body = tm.admin("GET", "/metrics")
    assert status == 200
    fams = parse(body.decode())
    check_histograms(fams)
    return fams


def test_promtool_check_metrics(tidemark, upstream):
    """promtool (Debian's prometheus package) lints the whole output after
    traffic of every kind: names, types, units, help; with a [watch]
    (on an etcd address nobody serves: its families all the same)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian package prometheus, "
                    "installed by tests/deps.sh)")
    tm = tidemark(config={"watch w": {
        "endpoints": "http://127.0.0.1:%d" % free_port(),
        "prefix": "locks/", "required": "no"}})
    assert "tidemark_watch_state" in scrape(tm)
    assert tm.put("p", token=5).status == 200
    assert tm.put("p", token=4).status == 409
    assert tm.request("GET", "/x", headers=[("X-Test-Drop", "1")]).status \
        == 502
    assert tm.admin("POST", "/v1/locks/jobs/p?ttl_ms=5000")[0] == 201
    body = tm.admin("GET", "/metrics")[2]
    r = subprocess.run([promtool, "check", "metrics"], input=body,
                       capture_output=True, timeout=60 * slow())
    assert r.returncode == 0, (r.stdout + r.stderr).decode()


def test_upstream_responses_by_class(tidemark, upstream):
    """Three 2xx answers, one 404, one 503: counted by class."""
    tm = tidemark()
    for i, status in enumerate((200, 201, 204, 404, 503)):
        r = tm.request("GET", "/c/%d" % i,
                       headers=[("X-Test-Status", str(status))])
        assert r.status == status
    fams = scrape(tm)
    f = "tidemark_upstream_responses_total"
    assert value(fams, f, upstream="default", **{"class": "2xx"}) == 3
    assert value(fams, f, upstream="default", **{"class": "4xx"}) == 1
    assert value(fams, f, upstream="default", **{"class": "5xx"}) == 1
    assert value(fams, f, upstream="default", **{"class": "1xx"}) == 0
    assert value(fams, f, upstream="default", **{"class": "3xx"}) == 0
    # An exchange that fails has no class: it is an error.
    tm.request("GET", "/d", headers=[("X-Test-Drop", "1")])
    fams = scrape(tm)
    assert value(fams, f, upstream="default", **{"class": "5xx"}) == 1
    assert value(fams, "tidemark_upstream_errors_total", upstream="default",
                 kind="error") == 1


def reload_gauges(tm):
    fams = scrape(tm)
    return (value(fams, "tidemark_config_last_reload_successful"),
            value(fams, "tidemark_config_last_reload_success_timestamp_seconds"))


def test_reload_gauges_follow_sighup(tidemark, upstream):
    """The start counts as a successful load; a file that does not parse
    sets successful to 0 and keeps the time; the next good file sets both."""
    t0 = time.time()
    tm = tidemark()
    ok, ts = reload_gauges(tm)
    assert ok == 1
    assert int(t0 * 1000) / 1000 <= ts <= time.time()
    good = tm.ini_path.read_text()
    tm.ini_path.write_text(good + "\n[route broken\n")
    tm.proc.send_signal(signal.SIGHUP)
    tm.wait_log("reload refused", count=1)
    assert reload_gauges(tm) == (0, ts)
    # A file that parses but is refused (a route needs the key file only
    # a restart loads) is a failed reload too.
    tm.ini_path.write_text(good + "\n[route signed]\nmethods = PUT\n"
                           "path = /s/{x}\nresource = s/{x}\n"
                           "verify = hmac\n")
    tm.proc.send_signal(signal.SIGHUP)
    tm.wait_log("reload refused", count=2)
    assert reload_gauges(tm) == (0, ts)
    t1 = time.time()
    tm.ini_path.write_text(good)
    tm.proc.send_signal(signal.SIGHUP)
    tm.wait_log("reloaded", count=1)
    ok, ts2 = reload_gauges(tm)
    assert ok == 1
    assert int(t1 * 1000) / 1000 <= ts2 <= time.time()


def test_lmdb_map_use_grows_with_writes(tidemark, upstream):
    """The store's and the lock backend's used bytes grow as marks and
    leases are written; their sizes are the configured map_size."""
    tm = tidemark(config={"store": {"map_size": "8M"},
                          "locks": {"map_size": "4M"}})
    fams = scrape(tm)
    assert value(fams, "tidemark_lmdb_map_size_bytes") == 8 << 20
    assert value(fams, "tidemark_lock_lmdb_map_size_bytes") == 4 << 20
    store0 = value(fams, "tidemark_lmdb_map_used_bytes")
    locks0 = value(fams, "tidemark_lock_lmdb_map_used_bytes")
    assert 0 < store0 < 8 << 20 and 0 < locks0 < 4 << 20
    for i in range(200):
        assert tm.put("grow-%d-%s" % (i, "x" * 100), token=1).status == 200
        assert tm.admin("POST", "/v1/locks/jobs/grow-%d-%s?ttl_ms=60000"
                        % (i, "y" * 100))[0] == 201
    # Leases are committed before they are answered; marks reach the LMDB
    # file at the journal's checkpoint, once the writer is idle.
    locks1 = value(scrape(tm), "tidemark_lock_lmdb_map_used_bytes")
    assert locks1 > locks0
    wait_until(lambda: value(scrape(tm), "tidemark_lmdb_map_used_bytes")
               > store0, 10 * slow(), "the store's used bytes to grow")
    # The file grows while the checkpoint writes; it is counted once it
    # has committed.
    wait_until(lambda: value(scrape(tm), "tidemark_lmdb_checkpoints_total")
               >= 1, 10 * slow(), "the checkpoint to be counted")


def proc_stat(pid):
    with open("/proc/%d/stat" % pid) as f:
        text = f.read()
    return text[text.rindex(")") + 2:].split()


def test_process_metrics_match_proc(tidemark, upstream):
    """process_* against what the test reads from /proc/PID."""
    tm = tidemark()
    pid = tm.proc.pid
    tick = os.sysconf("SC_CLK_TCK")
    page = os.sysconf("SC_PAGE_SIZE")
    with open("/proc/stat") as f:
        btime = next(int(ln.split()[1]) for ln in f
                     if ln.startswith("btime "))
    fields = proc_stat(pid)
    start = btime + int(fields[19]) / tick
    with open("/proc/%d/limits" % pid) as f:
        soft = next(int(ln.split()[3]) for ln in f
                    if ln.startswith("Max open files"))
    # The scrape's own connection is the one descriptor more than the
    # test sees before it; the probe of wait_ready may still be open
    # until tidemark reads its end: poll until it is gone.

    def fds_match():
        idle = len(os.listdir("/proc/%d/fd" % pid))
        return value(scrape(tm), "process_open_fds") == idle + 1
    wait_until(fds_match, 5 * slow(), "process_open_fds to match /proc")
    cpu_before = (int(fields[11]) + int(fields[12])) / tick
    fams = scrape(tm)
    assert value(fams, "process_start_time_seconds") == \
        pytest.approx(start, abs=0.01)
    assert value(fams, "process_max_fds") == soft
    fields = proc_stat(pid)
    cpu_after = (int(fields[11]) + int(fields[12])) / tick
    assert cpu_before <= value(fams, "process_cpu_seconds_total") <= cpu_after
    rss = value(fams, "process_resident_memory_bytes")
    assert rss % page == 0 and 1 << 20 < rss < 1 << 30
    vsize = value(fams, "process_virtual_memory_bytes")
    assert rss < vsize
    assert tm.status("VmRSS") // 2 < rss < tm.status("VmRSS") * 2


def test_build_info_names_the_version(tidemark, upstream):
    """tidemark_build_info{version} is packaging/debian/changelog's."""
    with open(os.path.join(os.path.dirname(__file__), "..", "..",
                           "packaging", "debian", "changelog")) as f:
        version = re.match(r".*\((.*)\)", f.readline()).group(1)
    tm = tidemark()
    fams = scrape(tm)
    assert fams["tidemark_build_info"]["samples"] == [
        ("tidemark_build_info", {"version": version}, 1.0)]
