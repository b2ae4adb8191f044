"""The failure lab (lab/tidemark-lab) in its short mode: every scenario
of the seed's failure table must show its failure without fencing and
not with it; the report must draw what was recorded (headless Chromium);
--target must refuse the paused client against a running tidemark and
write nothing but the resource it was given."""

import html.parser
import json
import subprocess
import sys
import time

import pytest

from common import BIN, REPO
from test_page import CHROMIUM, dump_dom

# The lab starts its own redis-server and PostgreSQL.
pytestmark = pytest.mark.backend

LAB = REPO / "lab" / "tidemark-lab"
sys.path.insert(0, str(REPO / "lab"))

SCENARIOS = ["paused", "delayed", "failover", "redlock-clock",
             "redlock-pause", "release", "longjob", "advisory", "replicas"]


def run_lab(args, timeout=300):
    return subprocess.run(["/usr/bin/python3", str(LAB)] + args,
                          stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """One short run of every scenario: (process, json doc, directory)."""
    if not (REPO / "lab" / "clockjump.so").exists():
        pytest.fail("lab/clockjump.so is missing: make integration "
                    "builds it")
    d = tmp_path_factory.mktemp("lab")
    p = run_lab(["--short", "--tidemark", str(BIN), "--out",
                 str(d / "lab-report.html"), "--json", str(d / "lab.json")])
    out = p.stdout.decode(errors="replace") + p.stderr.decode(
        errors="replace")
    assert (d / "lab.json").exists(), out
    doc = json.loads((d / "lab.json").read_text())
    return p, doc, d, out


def test_lab_exits_0_and_runs_every_scenario(lab):
    p, doc, _, out = lab
    assert p.returncode == 0, out
    assert [s["id"] for s in doc["scenarios"]] == SCENARIOS, out


@pytest.mark.parametrize("sid", SCENARIOS)
def test_scenario_fails_without_fencing_and_holds_with_it(lab, sid):
    _, doc, _, out = lab
    sc = {s["id"]: s for s in doc["scenarios"]}[sid]
    assert sc["ok"] and sc["problem"] is None, (sc["problem"], out)
    off = [r for r in sc["runs"] if not r["fenced"]]
    on = [r for r in sc["runs"] if r["fenced"]]
    assert len(off) == 1 and on, sc
    assert off[0]["harm"] is True, off[0]["verdict"]
    for r in on:
        assert r["harm"] is False, r["verdict"]
    if sid in ("paused", "delayed", "redlock-clock", "redlock-pause"):
        # The stale client's write reached the backend without fencing
        # and was refused by tidemark with it.
        assert off[0]["final"].startswith("client 1"), off[0]
        assert on[0]["final"].startswith("client 2"), on[0]
        refused = [e for e in on[0]["events"] if e["kind"] == "refused"]
        assert [(e["lane"], e["status"]) for e in refused] == \
            [("client 1", 409)], refused
        assert not [e for e in on[0]["events"] if e["kind"] == "write"
                    and e["client"] == "client 1" and "redlock" not in sid]
    if sid == "replicas":
        # Replica 1's late write (no token) landed without the binding;
        # with it, its sidecar refused it (the lease lost: 503) and the
        # backend kept replica 2's.
        assert off[0]["final"].startswith("client 1"), off[0]
        assert on[0]["final"].startswith("client 2"), on[0]
        refused = [e for e in on[0]["events"] if e["kind"] == "refused"]
        assert [(e["lane"], e["status"]) for e in refused] == \
            [("client 1", 503)], refused
    if sid == "failover":
        t = off[0]["tokens"]
        assert t[1] == t[2], t          # the promoted replica repeats
        for r in on:
            assert r["tokens"] == sorted(set(r["tokens"])), r["tokens"]
    if sid.startswith("redlock"):
        # Every round is reported; the shown one had two holders.
        for r in sc["runs"]:
            assert len(r["rounds"]) == doc["rounds"], r
            assert r["two_holders"] == r["raced"] == \
                sum(x["race"] for x in r["rounds"]) >= 1, r


def test_seed_timings_are_the_full_mode():
    sys.path.insert(0, str(REPO / "tests" / "integration"))
    from tmlab import main
    assert main.FULL == {"lock_ms": 300, "pause_ms": 500, "rounds": 5}


def test_a_scenario_without_its_failure_is_reported_broken():
    from tmlab import main

    def harmless(lab, fenced):
        return {"events": [], "harm": False, "verdict": "nothing"}

    sc = main.run_scenario(FakeLab(), "x", "t", "s", harmless)
    assert not sc["ok"]
    assert sc["problem"].startswith("the scenario is broken"), sc

    def harmful(lab, fenced):
        return {"events": [], "harm": True, "verdict": "stale"}

    sc = main.run_scenario(FakeLab(), "x", "t", "s", harmful)
    assert not sc["ok"]
    assert sc["problem"].startswith("with fencing the failure"), sc


def rounds(*outcomes):
    """A run of rounds: (race, harm) each."""
    rs = [{"race": race, "harm": harm, "verdict": "r%d" % i}
          for i, (race, harm) in enumerate(outcomes)]
    return {"events": [], "harm": False, "verdict": "v", "rounds": rs}


class FakeLab:
    def end_run(self):
        pass


def test_rounds_without_the_race_are_reported_not_failed():
    """A round whose race did not happen (a loaded machine lost the
    timing) is no failure: without fencing the harm must show in one
    round with the race, with fencing in none."""
    from tmlab import main

    def some(lab, fenced):
        if fenced:
            return rounds((False, False), (True, False), (True, False))
        return rounds((True, False), (False, False), (True, True))

    sc = main.run_scenario(FakeLab(), "x", "t", "s", some)
    assert sc["ok"] and sc["problem"] is None, sc
    off, on = sc["runs"]
    assert (off["harm"], off["raced"], on["harm"], on["raced"]) == \
        (True, 2, False, 2)

    def never(lab, fenced):
        return rounds((False, False), (False, False))

    sc = main.run_scenario(FakeLab(), "x", "t", "s", never)
    assert not sc["ok"]
    assert sc["problem"] == ("the race never happened (fencing off, 2 "
                             "rounds): r0 (round 1); r1 (round 2)"), sc

    def stale_with_fencing(lab, fenced):
        return rounds((False, False), (True, True))

    sc = main.run_scenario(FakeLab(), "x", "t", "s", stale_with_fencing)
    assert sc["problem"].startswith("with fencing the failure"), sc


def test_peer_answers_are_read_strictly():
    """psql's and the lock service's answers: the legitimate ones are
    read (a held lease row is INSERT 0 0: ask again), anything else is a
    clear Broken, not a crash in a parse."""
    from tmlab import harness as h
    assert h.lease_row("7\nINSERT 0 1\n") == 7
    assert h.lease_row("INSERT 0 0\n") is None
    for bad in ("", "INSERT 0 1\n", "x\nINSERT 0 1\n", "7\n",
                "ERROR:  relation \"leases\" does not exist\n"):
        with pytest.raises(h.Broken, match="lease row"):
            h.lease_row(bad)
    assert h.lock_fence({"status": 201, "body": '{"fence": 3}'}) == 3
    assert h.lock_fence({"status": 423, "body": ""}) is None
    assert h.lock_fence({"status": 503, "body": ""}) is None
    for bad in ({"status": 0, "body": "timed out"},
                {"status": 201, "body": "{}"},
                {"status": 201, "body": '{"fence": "3"}'},
                {"status": 400, "body": "nope"}):
        with pytest.raises(h.Broken, match="lock service"):
            h.lock_fence(bad)
    assert h.acquire_reply({"reply": None}) is None
    assert h.acquire_reply({"reply": 4}) == 4
    for bad in ({"reply": {"error": "NOSCRIPT"}}, {"reply": "OK"},
                {"error": "timed out"}):
        with pytest.raises(h.Broken, match="redis acquire"):
            h.acquire_reply(bad)
    assert h.psql_answer({"out": "t\n"}, "t", "f") == "t"
    with pytest.raises(h.Broken, match="psql answered"):
        h.psql_answer({"out": "ERROR:  deadlock\n"}, "t", "f")


class Svg(html.parser.HTMLParser):
    """The drawn timelines: per (scenario, run), the classes and data-t
    of the marks and bars."""

    def __init__(self):
        super().__init__()
        self.scenario = None
        self.run = None
        self.drawn = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section" and "scenario" in (a.get("class") or ""):
            self.scenario = a.get("data-id")
        if tag == "svg" and a.get("class") == "timeline":
            self.run = (self.scenario, a.get("data-run"))
            self.drawn[self.run] = []
        cls = a.get("class") or ""
        if self.run and cls.split("-")[0] in ("mark", "bar"):
            self.drawn[self.run].append((cls, float(a["data-t"])))
        if tag == "g" and cls == "lane" and self.run:
            self.drawn[self.run].append(("lane", a.get("data-lane")))


KIND = {"write": "mark-write", "refused": "mark-refused",
        "crash": "mark-crash", "step": "mark-step", "hold": "bar-hold",
        "pause": "bar-pause", "delay": "bar-delay"}


def drawn_from(path, tmp_path):
    parser = Svg()
    parser.feed(dump_dom(path.as_uri(), tmp_path))
    return parser.drawn


def expected(doc):
    want = {}
    for sc in doc["scenarios"]:
        for r in sc["runs"]:
            want[(sc["id"], r["name"])] = sorted(
                (KIND[e["kind"]], float(e["t"])) for e in r["events"])
    return want


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                    "(make deps installs it)")
def test_report_draws_the_recorded_events(lab, tmp_path):
    _, doc, d, _ = lab
    report = d / "lab-report.html"
    text = report.read_text()
    # Self-contained: nothing is loaded from anywhere else.
    assert "src=" not in text and "href=" not in text
    drawn = drawn_from(report, tmp_path)
    want = expected(doc)
    assert set(drawn) == set(want)
    for key, marks in want.items():
        got = sorted(m for m in drawn[key] if m[0] != "lane")
        assert got == marks, key
        lanes = [m[1] for m in drawn[key] if m[0] == "lane"]
        assert set(e["lane"] for sc in doc["scenarios"]
                   for r in sc["runs"] if (sc["id"], r["name"]) == key
                   for e in r["events"]) <= set(lanes), key
    # Change the recording: the drawing follows (it is not a fixed image).
    from tmlab import report as rep
    sc = doc["scenarios"][0]
    run = sc["runs"][0]
    run["events"] = [e for e in run["events"] if e["kind"] != "write"][:3]
    run["events"].append({"kind": "refused", "lane": "client 9",
                          "t": 12.5, "text": "x"})
    other = tmp_path / "changed.html"
    other.write_text(rep.html(doc))
    drawn = drawn_from(other, tmp_path)
    key = (sc["id"], run["name"])
    assert sorted(m for m in drawn[key] if m[0] != "lane") == \
        expected(doc)[key]
    assert ("lane", "client 9") in drawn[key]
    # And a picture a person can look at, kept beside the report.
    shot = d / "lab-report.png"
    p = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         "--hide-scrollbars", "--no-first-run",
         "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--user-data-dir=%s" % (tmp_path / "shot"),
         "--window-size=1150,2400", "--screenshot=%s" % shot,
         report.as_uri()], stdin=subprocess.DEVNULL, capture_output=True,
        timeout=90)
    assert p.returncode == 0, p.stderr.decode(errors="replace")[-2000:]
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20000


def test_target_refuses_the_paused_client(tidemark, upstream, tmp_path):
    tm = tidemark()
    url = "http://127.0.0.1:%d/v1/documents/lab-test" % tm.port
    p = run_lab(["--target", url, "--admin",
                 "http://127.0.0.1:%d" % tm.admin_port, "--resource",
                 "documents/lab-test", "--out", str(tmp_path / "t.html"),
                 "--json", str(tmp_path / "t.json")], timeout=120)
    out = p.stdout.decode(errors="replace") + p.stderr.decode(
        errors="replace")
    assert p.returncode == 0, out
    # Only the given resource was written, once: client 2's write. The
    # stale one never reached the backend.
    seen = [(r.method, r.target) for r in upstream.requests]
    assert seen == [("PUT", "/v1/documents/lab-test")], seen
    assert upstream.requests[0].body.startswith(b"tidemark-lab: client 2")
    doc = json.loads((tmp_path / "t.json").read_text())
    refused = [e for e in doc["scenarios"][0]["runs"][0]["events"]
               if e["kind"] == "refused"]
    assert [(e["lane"], e["status"]) for e in refused] == \
        [("client 1", 409)]
    # The leases it took are given back.
    st, _, _ = tm.admin("GET", "/v1/locks/documents/lab-test")
    assert st == 404
    # The control port's page draws the run on its timeline: the lane of
    # the resource, its mark and the stale write's refusal, from
    # /v1/recent (when_ms: the events are less than a second apart).
    _, _, body = tm.admin("GET", "/v1/recent")
    recent = json.loads(body)
    times = [m["when_ms"] for m in recent["marks"]] + \
        [f["when_ms"] for f in recent["refusals"]]
    assert all(abs(t / 1000.0 - time.time()) < 120 for t in times), times
    if CHROMIUM is None:
        return
    dom = dump_dom("http://127.0.0.1:%d/" % tm.admin_port, tmp_path)
    assert dom.count('class="tl-lane"') == 1, dom
    assert 'data-lane="documents/lab-test"' in dom
    assert dom.count('class="tl-refused"') == len(recent["refusals"]) == 1
    assert dom.count('class="tl-mark"') == len(recent["marks"]) == 1


def test_lab_help_names_every_scenario():
    p = run_lab(["--help"], timeout=30)
    assert p.returncode == 0
    text = p.stdout.decode()
    for sid in SCENARIOS:
        assert sid in text
