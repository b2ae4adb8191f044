"""The history checker of the chaos run: reads what the clients saw (each
call's invoke and completion time, answer, fence) and the order in which
the backend applied writes, and lists every violation of what fencing
and the lock service promise. Pure: no I/O but reading the two files
when run as a program (`checker.py RUN_DIR` checks a saved run).

The rules, per resource (one lock, one mark, one backend object):

stale-applied     the backend applied a write after a write with a
                  newer (higher) token: a paused holder overwrote its
                  successor. The backend's own apply order decides.
                  Through a sidecar-held lease the token is the fence
                  the application checked before writing, unless its
                  sidecar won a newer one meanwhile (uncertain_ops:
                  such writes are counted, not judged).
ack-lost          a write answered 2xx is not among the applied ones.
refused-applied   a write tidemark refused (an answer carrying
                  Tidemark-Error: 409, 428, 503, 403...) was applied.
                  A 502/504 or a call with no answer is indeterminate:
                  applied or not, it is no violation.
fence-reused      two acquires answered 201 got the same fence; or an
                  acquire that began after another had been answered got
                  a fence not above it (fences only grow).
two-live-leases   two leases of one lock were both live at one moment,
                  by the service's own answers. A lease answered 201 in
                  [t0, t1] with ttl_ms was granted at some g in [t0, t1]
                  and ends at g + ttl (the service's clock, the same
                  machine's realtime clock as the clients'): so it is
                  certainly live on [t1, t0 + ttl). An extend answered
                  200 in [e0, e1] makes that [t1, e0 + ttl); a release
                  answered 204 invoked at r0 ends it no earlier than r0,
                  so the certain end is min(that, r0). Two certain
                  intervals of one lock that overlap by more than
                  MARGIN_S are a violation. Only what is certain counts,
                  so a slow answer or a paused client never makes a
                  false alarm; MARGIN_S absorbs the millisecond rounding
                  of the service's expiry.
"""

import bisect
import json
import sys
from collections import defaultdict

MARGIN_S = 0.005

# tidemark's own answers that do not say whether the backend applied the
# write: it was forwarded, and the backend failed or took too long.
INDETERMINATE = (502, 504)

KINDS = ("stale-applied", "ack-lost", "refused-applied", "fence-reused",
         "two-live-leases")


def _v(kind, res, detail, **fields):
    out = {"kind": kind, "res": res, "detail": detail}
    out.update(fields)
    return out


def uncertain_ops(history):
    """Writes through a sidecar-held lease whose token is not known: the
    application wrote believing fence F, and when the write was answered
    its sidecar held another fence (it lost F and won again meanwhile),
    so tidemark may have sent either. Every other write's token is the
    fence its application checked: its sidecar held F before and no
    newer fence after."""
    return {e["op"] for e in history
            if e.get("f") == "write" and e.get("state_after") == "holding"
            and e.get("fence_after") != e["fence"]}


def check_applies(applies, uncertain=frozenset()):
    """stale-applied: per resource, in the backend's apply order."""
    out = []
    top = {}
    for a in applies:
        if a["op"] in uncertain:
            continue
        res, tok = a["res"], a["tok"]
        best = top.get(res)
        if best is not None and tok < best["tok"]:
            out.append(_v("stale-applied", res,
                          "op %s (token %d) applied at #%d after op %s "
                          "(token %d) at #%d"
                          % (a["op"], tok, a["seq"], best["op"],
                             best["tok"], best["seq"]),
                          op=a["op"], token=tok, newer=best["tok"]))
        if best is None or tok > best["tok"]:
            top[res] = a
    return out


def check_writes(history, applies):
    """ack-lost and refused-applied: each write's answer against the
    backend's record."""
    out = []
    applied = {a["op"] for a in applies}
    for e in history:
        if e.get("f") != "write":
            continue
        st = e.get("status")
        if st is not None and 200 <= st < 300 and e["op"] not in applied:
            out.append(_v("ack-lost", e["res"],
                          "op %s (token %d) answered %d, never applied"
                          % (e["op"], e["fence"], st), op=e["op"]))
        if e.get("refusal") and st not in INDETERMINATE and \
                e["op"] in applied:
            out.append(_v("refused-applied", e["res"],
                          "op %s (token %d) refused %d %s, applied"
                          % (e["op"], e["fence"], st, e["refusal"]),
                          op=e["op"]))
    return out


def check_fences(history):
    """fence-reused: no fence twice, and none below an earlier one."""
    out = []
    grants = defaultdict(list)
    for e in history:
        if e.get("f") == "acquire" and e.get("status") == 201:
            grants[e["res"]].append(e)
    for res, gs in grants.items():
        seen = {}
        for g in gs:
            if g["fence"] in seen:
                out.append(_v("fence-reused", res,
                              "fence %d granted to worker %d and worker %d"
                              % (g["fence"], seen[g["fence"]]["w"], g["w"]),
                              fence=g["fence"]))
            seen[g["fence"]] = g
        # Sorted by completion, a running maximum of the fences answered
        # before each acquire began.
        done = sorted(gs, key=lambda g: g["t1"])
        ends = [d["t1"] for d in done]
        tops, top = [], None
        for d in done:
            if top is None or d["fence"] > top["fence"]:
                top = d
            tops.append(top)
        for g in gs:
            i = bisect.bisect_left(ends, g["t0"])
            if i > 0 and g["fence"] < tops[i - 1]["fence"]:
                out.append(_v("fence-reused", res,
                              "fence %d granted after fence %d"
                              % (g["fence"], tops[i - 1]["fence"]),
                              fence=g["fence"]))
    return out


def certain_leases(history):
    """Per resource, [(start, end, fence, worker)]: the interval in which
    each lease was certainly live (see the module's comment)."""
    leases = {}
    for e in history:
        f = e.get("f")
        if f == "acquire" and e.get("status") == 201:
            leases[(e["res"], e["fence"])] = {
                "res": e["res"], "fence": e["fence"], "w": e["w"],
                "start": e["t1"], "end": e["t0"] + e["ttl_ms"] / 1e3,
                "released": None}
    for e in history:
        lease = leases.get((e.get("res"), e.get("fence")))
        if lease is None:
            continue
        if e["f"] == "extend" and e.get("status") == 200:
            lease["end"] = max(lease["end"], e["t0"] + e["ttl_ms"] / 1e3)
        elif e["f"] == "release" and e.get("status") == 204:
            lease["released"] = e["t0"]
    out = defaultdict(list)
    for lease in leases.values():
        end = lease["end"]
        if lease["released"] is not None:
            end = min(end, lease["released"])
        if end > lease["start"]:
            out[lease["res"]].append((lease["start"], end, lease["fence"],
                                      lease["w"]))
    return out


def check_leases(history):
    out = []
    for res, ivs in certain_leases(history).items():
        ivs.sort()
        for i, a in enumerate(ivs):
            for b in ivs[i + 1:]:
                if b[0] >= a[1] - MARGIN_S:
                    break
                overlap = min(a[1], b[1]) - b[0]
                if overlap > MARGIN_S:
                    out.append(_v("two-live-leases", res,
                                  "fence %d (worker %d) and fence %d "
                                  "(worker %d) both live for %.1f ms"
                                  % (a[2], a[3], b[2], b[3],
                                     overlap * 1e3),
                                  fences=[a[2], b[2]]))
    return out


def check(history, applies):
    """Every violation, as dicts with kind, res and detail."""
    return (check_applies(applies, uncertain_ops(history))
            + check_writes(history, applies)
            + check_fences(history) + check_leases(history))


def summary(history, applies):
    """Counts of what happened: calls by kind and answer, applies."""
    counts = defaultdict(int)
    for e in history:
        f = e.get("f")
        if f in ("acquire", "extend", "release", "write"):
            st = e.get("status")
            counts["%s %s" % (f, st if st is not None else e.get("err"))] \
                += 1
        elif f == "check":
            counts["check %s" % e.get("state")] += 1
        elif f == "nemesis":
            counts["fault %s" % e["fault"]] += 1
            if e.get("landed"):
                counts["fault %s landed" % e["fault"]] += 1
    counts["applied"] = len(applies)
    if any(e.get("f") == "check" for e in history):
        counts["write uncertain"] = len(uncertain_ops(history))
    return dict(sorted(counts.items()))


def load(run_dir):
    def lines(name):
        with open("%s/%s" % (run_dir, name)) as fh:
            return [json.loads(ln) for ln in fh if ln.strip()]
    return lines("history.jsonl"), lines("applies.jsonl")


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: checker.py RUN_DIR\n")
        return 2
    history, applies = load(argv[1])
    found = check(history, applies)
    for v in found:
        print("%s %s: %s" % (v["kind"], v["res"], v["detail"]))
    print("%d violations" % len(found))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
