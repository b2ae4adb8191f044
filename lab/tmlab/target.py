"""--target: the paused client against a running tidemark and its real
backend. Two clients take the lock on the resource the user named from
the control port's lock service; client 1 is paused past its lease,
client 2 writes, client 1 resumes and writes with its old token: the
tidemark must answer 409 and the backend keep client 2's write. Only the
given URL is written; the leases taken are given back; the mark stays
(marks never go down: that is the point)."""

import json
import sys
import time
import urllib.parse

from . import harness as h
from . import report


def run_target(args, entry):
    if not args.admin or not args.resource:
        sys.exit("tidemark-lab: --target needs --admin URL and "
                 "--resource NAME")
    lock_ms = args.lock_ms or 300
    pause_ms = args.pause_ms or 500
    auth = {}
    if args.admin_token:
        with open(args.admin_token) as f:
            auth["Authorization"] = "Bearer " + f.read().strip()
    lock_url = "%s/v1/locks/%s" % (args.admin.rstrip("/"), urllib.parse.quote(
        args.resource, safe="/"))
    rec = h.Recorder()
    c1, c2 = h.Actor("client 1", rec, entry), h.Actor("client 2", rec, entry)
    leases = []
    problem = None
    try:
        f1 = acquire(rec, c1, lock_url, lock_ms, 0, auth)
        leases.append((c1, f1))
        c1.pause()
        c1.send("http", method="PUT", url=args.target,
                headers={"Fencing-Token": str(f1), "X-Lab-Client": c1.name},
                body="tidemark-lab: client 1, token %d" % f1)
        f2 = acquire(rec, c2, lock_url, lock_ms, 10000 + pause_ms, auth)
        leases.append((c2, f2))
        r = c2.call("http", method="PUT", url=args.target,
                    headers={"Fencing-Token": str(f2),
                             "X-Lab-Client": c2.name},
                    body="tidemark-lab: client 2, token %d" % f2)
        rec.step(c2.name, "write: %d" % r["status"], r["t1"])
        if not 200 <= r["status"] < 300:
            problem = "client 2's write was answered %d: %s" % (
                r["status"], r["body"][:300])
        left = c1.paused_at + pause_ms / 1000.0 - time.monotonic()
        if left > 0:
            time.sleep(left)
        c1.resume()
        r1 = c1.reply()
        if r1["status"] == 409:
            rec.add("refused", c1.name, r1["t1"], status=409, token=f1,
                    text="write refused: 409 (stale token %d)" % f1)
        else:
            rec.step(c1.name, "write: %d" % r1["status"], r1["t1"])
            problem = problem or ("client 1's stale write was answered %d, "
                                  "not 409: %s" % (r1["status"],
                                                   r1["body"][:300]))
    finally:
        for c, f in reversed(leases):
            c.call("http", method="DELETE", url="%s?token=%d"
                   % (lock_url, f), headers=auth)
        c1.close()
        c2.close()
    harm = problem is not None
    verdict = problem or ("client 1's stale write (token %d) was refused "
                          "with 409; the resource keeps client 2's write "
                          "(token %d)" % (f1, f2))
    shift = min(e["t"] for e in rec.events) - 20
    for e in rec.events:
        e["t"] = round(e["t"] - shift, 1)
        if "t1" in e:
            e["t1"] = round(e["t1"] - shift, 1)
    doc = {"mode": "target", "lock_ms": lock_ms, "pause_ms": pause_ms,
           "rounds": 1, "target": args.target,
           "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
           "scenarios": [{
               "id": "paused", "title": "A client pauses past the TTL, "
               "against " + args.target,
               "story": "Against your tidemark: client 1 takes a %d ms "
               "lock on %s and is paused for %d ms; client 2 takes the "
               "lock and writes; client 1 resumes and writes with its old "
               "token." % (lock_ms, args.resource, pause_ms),
               "ok": not harm, "problem": problem,
               "runs": [{"name": "through your tidemark", "fenced": True,
                         "harm": harm, "verdict": verdict,
                         "events": sorted(rec.events,
                                          key=lambda e: e["t"])}]}]}
    with open(args.out, "w") as f:
        f.write(report.html(doc))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    print("%s: %s" % ("ok" if not harm else "FAILED", verdict))
    print("report: %s" % args.out)
    return 1 if harm else 0


def acquire(rec, c, lock_url, ttl, wait_ms, auth):
    r = c.call("http", method="POST", url="%s?ttl_ms=%d&wait_ms=%d"
               % (lock_url, ttl, wait_ms), headers=auth)
    if r["status"] != 201:
        raise SystemExit("tidemark-lab: the lock service answered %d: %s"
                         % (r["status"], r["body"][:300]))
    fence = json.loads(r["body"])["fence"]
    rec.step(c.name, "acquire: token %d" % fence, r["t1"])
    rec.span("hold", c.name, r["t1"], r["t1"] + ttl / 1000.0,
             label="token %d" % fence)
    return fence
