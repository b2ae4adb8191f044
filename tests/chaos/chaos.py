#!/usr/bin/python3
"""A randomized history check of fencing.

Worker processes take locks from tidemark's lock service and write the
protected resources, recording every step (the history). A nemesis,
driven by one seed, pauses workers past their TTL (SIGSTOP), kills
tidemark (kill -9) and starts it again, stops the mark store (Redis,
SIGSTOP) and makes the backend slow. A checker then reads the history and
the backend's apply order and counts:

  stale-apply      a write applied after a write with a newer token
  acked-lost       a write answered 2xx that the backend never applied
  refused-applied  a write answered 409 that the backend applied
  fence-reused     one fence handed out twice for a resource
  two-leases       a lease granted while another was surely still live

It runs first with fencing off (the workers write to the backend
directly), where it must find violations (a checker that finds nothing
there is blind), then through tidemark, where it must find none. Exit 0
only then. The seed is printed; --seed N replays a schedule.

  tests/chaos/chaos.py [--seconds 8] [--seed N] [--workers 4]
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "lab"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

from tmlab import harness as h  # noqa: E402

TTL = 400


# --------------------------------------------------------------- worker


def worker(cfg):
    """Take a lock, write 2-4 times with its fence, give it back; again.
    One JSON line per step on stdout (monotonic times)."""
    rng = random.Random(cfg["seed"])
    n = 0

    def out(**ev):
        ev["w"] = cfg["id"]
        sys.stdout.write(json.dumps(ev) + "\n")
        sys.stdout.flush()

    while time.monotonic() < cfg["until"] and \
            not os.path.exists(cfg["stop"]):
        res = rng.choice(cfg["resources"])
        t0 = time.monotonic()
        st, _, body = h.http_call(
            "POST", "%s/v1/locks/documents/%s?ttl_ms=%d&wait_ms=%d"
            % (cfg["admin"], res, TTL, TTL * 2), timeout=5)
        t1 = time.monotonic()
        if st != 201:
            time.sleep(0.01)
            continue
        fence = json.loads(body)["fence"]
        out(ev="acquire", res=res, fence=fence, req=t0, rep=t1)
        for _ in range(rng.randint(2, 4)):
            n += 1
            wid = "%d-%d" % (cfg["id"], n)
            out(ev="invoke", wid=wid, res=res, token=fence,
                t=time.monotonic())
            st, _, _ = h.http_call(
                "PUT", "%s/v1/documents/%s" % (cfg["base"], res),
                {"Fencing-Token": str(fence), "X-Write-Id": wid},
                wid.encode(), timeout=5)
            out(ev="result", wid=wid, res=res, status=st,
                t=time.monotonic())
            time.sleep(rng.uniform(0, TTL / 4000.0))
        r0 = time.monotonic()
        st, _, _ = h.http_call(
            "DELETE", "%s/v1/locks/documents/%s?token=%d"
            % (cfg["admin"], res, fence), timeout=5)
        out(ev="release", res=res, fence=fence, status=st, req=r0,
            rep=time.monotonic())


# -------------------------------------------------------------- checker


def check(history, applied):
    """Violations by kind: lists of short descriptions."""
    v = {k: [] for k in ("stale-apply", "acked-lost", "refused-applied",
                         "fence-reused", "two-leases")}
    top = {}
    for a in applied:
        tok = int(a["token"]) if a["token"] else 0
        if tok < top.get(a["doc"], 0):
            v["stale-apply"].append("%s: token %d applied after %d (%s)"
                                    % (a["doc"], tok, top[a["doc"]], a["id"]))
        top[a["doc"]] = max(top.get(a["doc"], 0), tok)
    ids = {a["id"] for a in applied}
    for e in history:
        if e["ev"] != "result":
            continue
        if 200 <= e["status"] < 300 and e["wid"] not in ids:
            v["acked-lost"].append(e["wid"])
        if e["status"] == 409 and e["wid"] in ids:
            v["refused-applied"].append(e["wid"])
    acq = [e for e in history if e["ev"] == "acquire"]
    rel = {(e["res"], e["fence"]): e for e in history
           if e["ev"] == "release" and e["status"] == 204}
    seen = {}
    for a in acq:
        key = (a["res"], a["fence"])
        if key in seen:
            v["fence-reused"].append("%s fence %d" % key)
        seen[key] = a
    for a in acq:
        end = a["req"] + TTL / 1000.0      # the lease lasts at least this
        r = rel.get((a["res"], a["fence"]))
        if r is not None:
            end = min(end, r["req"])
        for b in acq:
            if b is a or b["res"] != a["res"] or b["req"] <= a["rep"]:
                continue
            if b["rep"] < end:
                v["two-leases"].append("%s: fences %d and %d" % (
                    a["res"], a["fence"], b["fence"]))
    return v


# ---------------------------------------------------------------- a run


def run(args, fenced, seed, tidemark_bin):
    import servers
    rng = random.Random(seed)
    backend = h.Backend()
    redis = servers.Redis().start()
    tm = h.Tidemark(tidemark_bin, backend.url, grace_ms=1000,
                    store="type = redis\nurl = %s\ntimeout_ms = 1000\n"
                    % redis.url)
    tm.start()
    resources = ["r%d" % i for i in range(args.resources)]
    # Fencing on: the given seconds. Fencing off: at least that, and on
    # (up to 5 times as long) until the checker has seen a violation, so
    # that a slow machine does not make the blindness check fail.
    start = time.monotonic()
    until = start + args.seconds * (1 if fenced else 5)
    stop = os.path.join(tm.dir, "stop")
    procs, history, nemesis = [], [], []
    lock = threading.Lock()

    def reader(p):
        for line in p.stdout:
            with lock:
                history.append(json.loads(line))

    try:
        for i in range(args.workers):
            cfg = {"id": i, "seed": rng.randrange(1 << 30),
                   "resources": resources, "admin": tm.admin,
                   "base": tm.url if fenced else backend.url,
                   "until": until, "stop": stop}
            p = subprocess.Popen([sys.executable, __file__, "--worker",
                                  json.dumps(cfg)], stdout=subprocess.PIPE,
                                 stdin=subprocess.DEVNULL)
            procs.append(p)
            t = threading.Thread(target=reader, args=(p,), daemon=True)
            t.start()
        def more():
            now = time.monotonic()
            if now >= until - 0.5:
                return False
            if fenced or now < start + args.seconds:
                return True
            with lock:
                hist = list(history)
            found = check(hist, list(backend.applied))
            return not any(found.values())

        while more():
            time.sleep(rng.uniform(0.1, 0.4))
            act = rng.choice(["pause", "pause", "pause", "kill", "store",
                              "slow"])
            nemesis.append({"t": time.monotonic(), "act": act})
            if act == "pause":
                # A worker that holds a lock now, when one does.
                with lock:
                    last = {}
                    for e in history:
                        last[e["w"]] = e["ev"]
                holders = sorted(w for w, ev in last.items()
                                 if ev != "release")
                p = procs[rng.choice(holders)] if holders else \
                    rng.choice(procs)
                p.send_signal(signal.SIGSTOP)
                time.sleep(rng.uniform(1.5, 2.5) * TTL / 1000.0)
                p.send_signal(signal.SIGCONT)
            elif act == "kill":
                tm.kill9()
                time.sleep(rng.uniform(0.05, 0.3))
                tm.start()
            elif act == "store":
                redis.pause()
                time.sleep(rng.uniform(0.2, 0.8))
                redis.resume()
            else:
                backend.delay_ms = 200     # below order_grace_ms
                time.sleep(rng.uniform(0.3, 1.0))
                backend.delay_ms = 0
        open(stop, "w").close()
        for p in procs:
            p.send_signal(signal.SIGCONT)
            p.wait(timeout=30)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        tm.destroy()
        redis.destroy()
    applied = list(backend.applied)
    backend.stop()
    return history, applied, nemesis


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=8.0,
                    help="per run (fencing off, then on)")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--resources", type=int, default=2)
    ap.add_argument("--tidemark", default=os.path.join(ROOT, "tidemark"))
    ap.add_argument("--out", help="the histories and verdicts as JSON")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    print("chaos: seed %d (replay: --seed %d)" % (seed, seed), flush=True)
    result = {"seed": seed}
    ok = True
    for fenced in (False, True):
        history, applied, nemesis = run(args, fenced, seed,
                                        os.path.abspath(args.tidemark))
        v = check(history, applied)
        found = sum(len(x) for x in v.values())
        name = "fencing on" if fenced else "fencing off"
        writes = sum(1 for e in history if e["ev"] == "result")
        print("chaos: %s: %d writes, %d applied, %d nemesis actions; "
              "violations: %s" % (name, writes, len(applied), len(nemesis),
                                  ", ".join("%s %d" % (k, len(x))
                                            for k, x in v.items())),
              flush=True)
        for k, x in v.items():
            for one in x[:3]:
                print("  %s: %s" % (k, one))
        if not fenced and found == 0:
            print("chaos: the checker found nothing with fencing off: it "
                  "is blind (or the nemesis did nothing)", flush=True)
            ok = False
        if fenced and found:
            ok = False
        result[name] = {"violations": v, "history": history,
                        "applied": applied, "nemesis": nemesis}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, default=str)
    print("chaos: %s (seed %d)" % ("ok" if ok else "FAILED", seed))
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(json.loads(sys.argv[2]))
        sys.exit(0)
    sys.exit(main())
