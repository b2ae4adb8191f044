"""tidemark-lab's command line: run the scenarios, check each, write the
report; or --target: the paused client against a running tidemark."""

import argparse
import json
import os
import shutil
import sys
import time
import traceback

from . import harness as h
from . import report
from .scenarios import SCENARIOS, Lab

FULL = {"lock_ms": 300, "pause_ms": 500, "rounds": 5}
SHORT = {"lock_ms": 150, "pause_ms": 250, "rounds": 2}


def parse(argv):
    p = argparse.ArgumentParser(
        prog="tidemark-lab",
        description="Replay the failures of distributed locks on real "
        "servers, without fencing and then through tidemark, and draw "
        "them (lab-report.html). Exits 1 when a scenario did not show "
        "its failure without fencing in any round where its race "
        "happened, showed it with fencing, or never had its race.")
    p.add_argument("--short", action="store_true",
                   help="shorter timings and 2 Redlock rounds (the test "
                   "suite's run); default: the seed's 300 ms lock, 500 ms "
                   "pause, 5 rounds")
    p.add_argument("--only", action="append", metavar="SCENARIO",
                   help="run this scenario (repeatable): %s" % ", ".join(
                       s[0] for s in SCENARIOS))
    p.add_argument("--out", default="lab-report.html",
                   help="the HTML report (default lab-report.html)")
    p.add_argument("--json", metavar="FILE",
                   help="also write the recorded events as JSON")
    p.add_argument("--tidemark", metavar="BIN",
                   help="the tidemark binary (default: ./tidemark beside "
                   "the lab in a source tree, else tidemark on PATH)")
    p.add_argument("--numbers", action="store_true",
                   help="also measure the seed's lock rates on this "
                   "machine (tests/bench/locks_raw.sh: a few minutes) and "
                   "print them beside the seed's figures; with --only "
                   "none, the numbers alone")
    p.add_argument("--lock-ms", type=int)
    p.add_argument("--pause-ms", type=int)
    p.add_argument("--rounds", type=int)
    t = p.add_argument_group(
        "against your own tidemark (only the paused client)")
    t.add_argument("--target", metavar="URL",
                   help="the URL of a test resource through your tidemark, "
                   "e.g. http://127.0.0.1:7070/v1/documents/lab-test; "
                   "the lab writes only there")
    t.add_argument("--admin", metavar="URL",
                   help="your tidemark's control port (lock service), e.g. "
                   "http://127.0.0.1:7071")
    t.add_argument("--resource", metavar="NAME",
                   help="the resource that URL names (the lock's name), "
                   "e.g. documents/lab-test")
    t.add_argument("--admin-token", metavar="FILE",
                   help="a file with the control port's bearer token")
    return p.parse_args(argv)


def find_tidemark(entry, given):
    if given:
        return os.path.abspath(given)
    src = os.path.join(os.path.dirname(entry), "..", "tidemark")
    if os.path.exists(src):
        return os.path.abspath(src)
    found = shutil.which("tidemark")
    if found is None:
        sys.exit("tidemark-lab: no tidemark binary (--tidemark BIN)")
    return found


def find_clockjump(entry):
    for d in (os.path.dirname(entry),
              os.path.join(os.path.dirname(entry), "..", "lib", "tidemark",
                           "lab")):
        p = os.path.join(d, "clockjump.so")
        if os.path.exists(p):
            return os.path.abspath(p)
    return None


def main(argv, entry):
    args = parse(argv)
    if args.target:
        from .target import run_target
        return run_target(args, entry)
    timing = dict(SHORT if args.short else FULL)
    for k in ("lock_ms", "pause_ms", "rounds"):
        if getattr(args, k) is not None:
            timing[k] = getattr(args, k)
    only = args.only or [s[0] for s in SCENARIOS]
    if args.only == ["none"]:
        only = []
    unknown = set(only) - {s[0] for s in SCENARIOS}
    if unknown:
        sys.exit("tidemark-lab: no scenario %s" % ", ".join(sorted(unknown)))
    clockjump = find_clockjump(entry)
    if clockjump is None and any(s.startswith("redlock-c") for s in only):
        sys.exit("tidemark-lab: clockjump.so is missing (make lab builds it)")
    import servers
    lab = Lab(servers, find_tidemark(entry, args.tidemark), entry,
              timing["lock_ms"], timing["pause_ms"], timing["rounds"],
              clockjump)
    doc = {"mode": "short" if args.short else "full",
           "lock_ms": timing["lock_ms"], "pause_ms": timing["pause_ms"],
           "rounds": timing["rounds"],
           "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
           "scenarios": []}
    failed = 0
    try:
        for sid, title, story, fn in SCENARIOS:
            if sid not in only:
                continue
            sc = run_scenario(lab, sid, title, story % {
                "lock": timing["lock_ms"], "pause": timing["pause_ms"]}, fn)
            doc["scenarios"].append(sc)
            print(summary_line(sc), flush=True)
            failed += 0 if sc["ok"] else 1
    finally:
        lab.close()
    if args.numbers:
        from . import numbers
        doc["numbers"] = numbers.measure(entry)
        print(numbers.table(doc["numbers"]), flush=True)
    with open(args.out, "w") as f:
        f.write(report.html(doc))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    print("report: %s%s" % (args.out, " (json: %s)" % args.json
                            if args.json else ""))
    if failed:
        print("tidemark-lab: %d scenario(s) did not behave as the seed "
              "says (above)" % failed, file=sys.stderr)
        return 1
    return 0


def run_scenario(lab, sid, title, story, fn):
    sc = {"id": sid, "title": title, "story": story, "runs": [],
          "ok": True, "problem": None}
    for fenced in (False, True):
        t0 = time.monotonic()
        try:
            out = fn(lab, fenced)
        except Exception as e:  # a broken scenario is reported, not fatal
            lab.end_run()
            sc["ok"] = False
            sc["problem"] = "%s run failed: %s" % (
                "fenced" if fenced else "unfenced", e)
            if not isinstance(e, h.Broken):
                traceback.print_exc()
            continue
        runs = out if isinstance(out, list) else [out]
        for r in runs:
            r["fenced"] = fenced
            r.setdefault("name", "fencing on" if fenced else "fencing off")
            r["seconds"] = round(time.monotonic() - t0, 2)
            problem = judge(r, fenced)
            if problem is not None:
                sc["ok"] = False
                sc["problem"] = sc["problem"] or problem
            sc["runs"].append(r)
    return sc


def judge(r, fenced):
    """What a run showed, from its rounds ({race, harm, verdict}; a run
    without rounds is one round with the race): the harm counts only in
    rounds where the race happened. Sets r["harm"] and r["raced"];
    returns the problem, or None. With fencing the harm must show in no
    round with the race; without it, in at least one; a run in which the
    race never happened shows nothing either way and fails."""
    rounds = r.setdefault("rounds", [{"race": True, "harm": r["harm"],
                                      "verdict": r["verdict"]}])
    raced = [x for x in rounds if x["race"]]
    r["raced"] = len(raced)
    r["harm"] = any(x["harm"] for x in raced)
    if not raced:
        return ("the race never happened (%s, %d round%s): %s" % (
            "fencing on" if fenced else "fencing off", len(rounds),
            "" if len(rounds) == 1 else "s", why_no_race(rounds)))
    if fenced and r["harm"]:
        return "with fencing the failure still happened: " + r["verdict"]
    if not fenced and not r["harm"]:
        return ("the scenario is broken: without fencing the failure did "
                "not happen in any round with the race: " + r["verdict"])
    return None


def why_no_race(rounds):
    """What happened instead of the race, each reason once with the
    rounds it held for."""
    reasons = {}
    for i, x in enumerate(rounds):
        why = x["verdict"]
        if why.startswith("no race: "):
            why = why[len("no race: "):]
        reasons.setdefault(why, []).append(str(i + 1))
    if len(rounds) == 1:
        return next(iter(reasons))
    return "; ".join("%s (round%s %s)" % (why, "" if len(n) == 1 else "s",
                                          ", ".join(n))
                     for why, n in reasons.items())


def summary_line(sc):
    parts = ["%-14s %s" % (sc["id"], "ok" if sc["ok"] else "FAILED")]
    for r in sc["runs"]:
        parts.append("  %s: %s" % (r["name"], r["verdict"]))
        for i, x in enumerate(r["rounds"]):
            if not x["race"]:
                parts.append("    round %d: %s" % (i + 1, x["verdict"]))
    if sc["problem"]:
        parts.append("  problem: " + sc["problem"])
    return "\n".join(parts)
