"""The randomized history check: worker processes take locks from
tidemark's lock service and write through tidemark to a recording
backend, while a nemesis pauses holders past their TTL (SIGSTOP), kills
tidemark (kill -9) and restarts it on the same store, stops the store
(a shared one: Redis) and makes the backend slow. The checker
(checker.py) then reads the clients' history and the backend's apply
order. The same seed runs twice: with the route's mode = off, where the
checker must find violations (if it finds none, it is blind), then with
mode = correctness, where it must find none.

Usage: chaos.py [--seed S] [--duration SECONDS] [--store lmdb|redis]
                 [--workdir DIR]
The seed fixes the nemesis' schedule and every worker's choices;
threads and processes still interleave as the machine runs them, so a
replay repeats the story, not every interleaving. Exit 0 when fencing
off shows violations and fencing on shows none (and has refused a
paused holder's write).
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests" / "integration"))

import checker  # noqa: E402
from common import wait_until  # noqa: E402
from daemon import DEFAULT_ROUTE, Tidemark  # noqa: E402
from upstream import Upstream  # noqa: E402

TTL_MS = 300            # the seed's lock
WAIT_MS = 600           # how long an acquire queues for a busy lock
WORKERS = 5
RESOURCES = ["documents/c1", "documents/c2"]
# A slow backend goes on with a write whose client (tidemark) gave up:
# tidemark times out at UPSTREAM_TIMEOUT_MS and keeps the resource closed
# to newer tokens for ORDER_GRACE_MS after that, and after a restart.
# The nemesis keeps the backend's delay below the grace (SLOW_MAX_MS), the
# bound tidemark documents; beyond it even fencing cannot order writes.
UPSTREAM_TIMEOUT_MS = 600
ORDER_GRACE_MS = 1500
SLOW_MAX_MS = 800
# --lease: pods of a worker and its own sidecar, which holds the lease.
PODS = 3
LEASE_TTL_MS = 1000
LEASE_RENEW_MS = 250
# The lease's margin_ms (its default: (LEASE_TTL_MS - LEASE_RENEW_MS) / 2).
LEASE_MARGIN_MS = (LEASE_TTL_MS - LEASE_RENEW_MS) // 2
LEASE_SLOW_MAX_MS = LEASE_MARGIN_MS - 25    # below the margin, the bound


class ChaosUpstream(Upstream):
    """conftest's recording upstream, with a record of the order in
    which writes took effect and a slow mode the nemesis switches on: a
    write then takes effect after a delay, whether or not its client is
    still waiting (a backend that goes on with a request whose client
    left)."""

    def __init__(self, seed):
        super().__init__()
        self.applies = []
        self.slow_ms = None
        self.pending = 0
        self.delay_rng = random.Random("%s:upstream" % seed)

    def _answer(self, c, reader, req):
        with self.cond:
            delay = 0.0
            if self.slow_ms is not None:
                delay = self.delay_rng.uniform(*self.slow_ms) / 1e3
            self.pending += 1
        if delay:
            self.stopping.wait(delay)
        try:
            rec = json.loads(req.body)
        except ValueError:
            rec = None
        with self.cond:
            self.pending -= 1
            if rec is not None:
                rec["seq"] = len(self.applies) + 1
                rec["t"] = time.time()
                self.applies.append(rec)
            self.cond.notify_all()
        return super()._answer(c, reader, req)

    def settled(self):
        with self.cond:
            return self.pending == 0 and len(self.applies) == \
                len(self.requests)


class Run:
    """One run of the workload and the nemesis on one tidemark."""

    ttl_ms = TTL_MS
    slow_max_ms = SLOW_MAX_MS

    def __init__(self, mode, seed, duration, workdir, store="lmdb"):
        self.mode = mode
        self.seed = seed
        self.duration = duration
        self.dir = Path(workdir)
        self.store = store
        self.hist_file = None
        self.rng = random.Random("%s:nemesis" % seed)
        self.cond = threading.Condition()
        self.history = []
        self.last = {}          # worker -> its last event
        self.paused = set()
        self.landed = 0         # paused clients that wrote after resuming
        self.workers = {}
        self.readers = []
        self.up = None
        self.tm = None
        self.redis = None
        self.stop_ev = threading.Event()

    # -- the system under test

    def config(self):
        route = dict(DEFAULT_ROUTE)
        route["mode"] = "off" if self.mode == "off" else "correctness"
        cfg = {
            "proxy": {"order_grace_ms": ORDER_GRACE_MS},
            "upstream default": {"timeout_ms": UPSTREAM_TIMEOUT_MS},
            "route docs": route,
            "locks": {"path": str(self.dir / "tidemark" / "locks.lmdb"),
                      "eager": "yes"},
        }
        if self.redis is not None:
            cfg["store"] = {"type": "redis", "url": self.redis.url,
                            "path": None}
            cfg["locks"] = {"backend": "redis", "url": self.redis.url,
                            "eager": "yes"}
        return cfg

    def start(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        self.hist_file = open(self.dir / "history.jsonl", "w")
        self.up = ChaosUpstream(self.seed)
        if self.store == "redis":
            import servers
            self.redis = servers.Redis().start()
        self.tm = Tidemark(self.dir / "tidemark", upstream=self.up,
                           config=self.config())
        self.tm.start()
        self.wait_backend()
        for wid in range(WORKERS):
            self.spawn(wid)

    def wait_backend(self, tm=None):
        """A network store connects after tidemark starts: wait until
        the lock service answers something but 503."""
        if self.redis is None:
            return
        tm = tm or self.tm
        wait_until(lambda: tm.admin("GET", "/v1/locks/probe")[0]
                   != 503, 15, "the lock backend to connect")

    def worker_argv(self, wid):
        return [str(wid), str(self.seed), str(self.tm.port),
                str(self.tm.admin_port), str(TTL_MS), str(WAIT_MS)]

    def spawn(self, wid):
        err = open(self.dir / ("worker%d.err" % wid), "w")
        p = subprocess.Popen(
            [sys.executable, str(HERE / "worker.py")]
            + self.worker_argv(wid) + RESOURCES,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
        err.close()
        self.workers[wid] = p
        t = threading.Thread(target=self.read_worker, args=(p,),
                             daemon=True)
        t.start()
        self.readers.append(t)

    def read_worker(self, p):
        for line in p.stdout:
            self.record(json.loads(line))

    def record(self, ev):
        with self.cond:
            self.history.append(ev)
            if "w" in ev and ev.get("f") != "nemesis":
                self.last[ev["w"]] = ev
            self.hist_file.write(json.dumps(ev, sort_keys=True) + "\n")
            self.cond.notify_all()

    def nemesis_event(self, fault, **kw):
        ev = {"f": "nemesis", "fault": fault, "t": time.time()}
        ev.update(kw)
        self.record(ev)

    # -- the nemesis

    def wait_cond(self, pred, timeout):
        """pred() under the lock, until it is neither None nor False (a
        worker's number 0 counts) or timeout; its value."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                v = pred()
                left = deadline - time.monotonic()
                if (v is not None and v is not False) or left <= 0 or \
                        self.stop_ev.is_set():
                    return v
                self.cond.wait(min(left, 0.1))

    def about_to_write(self):
        """A worker whose lease was just confirmed (acquired or
        extended): its next call is a write."""
        ready = [w for w, e in self.last.items() if w not in self.paused
                 and ((e["f"] == "acquire" and e["status"] == 201)
                      or (e["f"] == "extend" and e["status"] == 200))]
        return self.rng.choice(sorted(ready)) if ready else None

    def pause(self, wid):
        os.kill(self.workers[wid].pid, signal.SIGSTOP)
        self.paused.add(wid)

    def resume(self, wid):
        os.kill(self.workers[wid].pid, signal.SIGCONT)
        self.paused.discard(wid)

    def fault_pause_overtaken(self):
        """The seed's paused client: stop a holder between its check and
        its write, past its TTL, until another holder of the same lock
        has written with a newer token; then let it go on."""
        wid = self.wait_cond(self.about_to_write, 5)
        if wid is None:
            return
        self.pause(wid)
        t_stop = time.time()
        with self.cond:
            lease = self.last[wid]
            mark = len(self.history)

        def overtaken():
            if time.time() - t_stop < self.ttl_ms * 1.5 / 1e3:
                return False
            return any(self.overtakes(e, lease, wid)
                       for e in self.history[mark:])

        ok = self.wait_cond(overtaken, 5)
        self.resume(wid)

        # It landed when the worker's next call is the write it was about
        # to make (invoked after the stop); a stop that came after the
        # write finds the worker extending, refused, and stopping.
        def next_call():
            return next((e for e in self.history[mark:]
                         if e.get("w") == wid and e.get("f") != "nemesis"
                         and e["t0"] >= t_stop), None)

        nxt = self.wait_cond(next_call, 5)
        landed = bool(ok) and nxt is not None and nxt["f"] == "write" \
            and nxt["fence"] == lease["fence"]
        self.landed += landed
        self.nemesis_event("pause-overtaken", worker=wid,
                           res=lease.get("res"),
                           fence=lease["fence"], t_stop=t_stop,
                           overtaken=bool(ok), landed=landed)

    def overtakes(self, e, lease, wid):
        """e is a write by another holder of lease's lock with a newer
        token, accepted."""
        return (e.get("f") == "write" and e["res"] == lease["res"]
                and e["w"] != wid and e["fence"] > lease["fence"]
                and e["status"] == 200)

    def fault_pause_random(self):
        wid = self.rng.randrange(len(self.workers))
        d = self.rng.uniform(0.3, 2.0) * self.ttl_ms / 1e3
        self.pause(wid)
        self.stop_ev.wait(d)
        self.resume(wid)
        self.nemesis_event("pause", worker=wid, seconds=round(d, 3))

    def fault_kill_tidemark(self):
        down = self.rng.uniform(0, 0.3)
        self.tm.kill9()
        self.nemesis_event("kill-tidemark", down=round(down, 3))
        self.stop_ev.wait(down)
        self.tm.start()
        self.wait_backend()

    def fault_slow_upstream(self):
        d = self.rng.uniform(1.0, 3.0)
        with self.up.cond:
            self.up.slow_ms = (50, self.slow_max_ms)
        self.nemesis_event("slow-upstream", seconds=round(d, 3))
        self.stop_ev.wait(d)
        with self.up.cond:
            self.up.slow_ms = None

    def fault_store_down(self):
        d = self.rng.uniform(0.3, 1.5)
        if self.rng.random() < 0.5:
            self.redis.pause()
            self.nemesis_event("store-pause", seconds=round(d, 3))
            self.stop_ev.wait(d)
            self.redis.resume()
        else:
            self.redis.kill9()
            self.nemesis_event("store-kill", seconds=round(d, 3))
            self.stop_ev.wait(d)
            self.redis.start()
            self.wait_backend()

    def faults(self):
        faults = [self.fault_pause_random, self.fault_kill_tidemark,
                  self.fault_slow_upstream]
        if self.redis is not None:
            faults.append(self.fault_store_down)
        return faults

    def nemesis(self, deadline):
        faults = self.faults()
        i = 0
        while time.monotonic() < deadline and not self.stop_ev.is_set():
            # Every third fault is the paused client, and every fault
            # until one has landed: each run shows the seed's failure.
            if i % 3 == 0 or not self.landed:
                self.fault_pause_overtaken()
            else:
                self.rng.choice(faults)()
            i += 1
            self.stop_ev.wait(self.rng.uniform(0.2, 0.8))

    # -- the run

    def heal(self):
        for wid in list(self.paused):
            self.resume(wid)
        if self.up is not None:
            with self.up.cond:
                self.up.slow_ms = None
        if self.redis is not None and self.redis.running():
            self.redis.resume()

    def stop_workers(self):
        for p in self.workers.values():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.send_signal(signal.SIGTERM)
        bad = []
        for wid, p in self.workers.items():
            try:
                rc = p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = p.wait()
            if rc != 0:
                err = (self.dir / ("worker%d.err" % wid)).read_text()
                bad.append("worker %d exited %s:\n%s" % (wid, rc,
                                                         err[-2000:]))
        for t in self.readers:
            t.join(timeout=10)
        # A worker that died early would leave a quieter run that still
        # passes: that is a broken run, not a clean one.
        assert not bad, "\n".join(bad)

    def revive(self):
        if not self.tm.alive():
            self.tm.start()

    def check_teardown(self):
        if self.tm is not None:
            self.tm.check_teardown()

    def run(self):
        """Start, run the nemesis for duration seconds, stop, check.
        Returns (violations, summary)."""
        try:
            self.start()
            self.nemesis(time.monotonic() + self.duration)
            self.heal()
            if self.redis is not None and not self.redis.running():
                self.redis.start()
            self.revive()
            self.stop_workers()
            wait_until(self.up.settled, 15,
                       "the backend to apply every write it received")
        finally:
            self.stop_ev.set()
            self.heal()
            for p in self.workers.values():
                if p.poll() is None:
                    p.kill()
                    p.wait()
            try:
                self.check_teardown()
            finally:
                if self.up is not None:
                    self.up.stop()
                if self.redis is not None:
                    self.redis.destroy()
                if self.hist_file is not None:
                    self.hist_file.close()
        with open(self.dir / "applies.jsonl", "w") as fh:
            for a in self.up.applies:
                fh.write(json.dumps(a, sort_keys=True) + "\n")
        violations = checker.check(self.history, self.up.applies)
        return violations, checker.summary(self.history, self.up.applies)


class LeaseRun(Run):
    """The same check with no token in the application (--lease): PODS
    pods, each a worker (worker.py --lease) and its own tidemark, share
    a mark store and a lock backend (one Redis). Each tidemark holds the
    lease [lease app] for its worker; with fencing on, the route is
    bound to it (lease = app): a write carries the sidecar's fence, or
    is refused when the sidecar does not hold the lease. With fencing
    off, nothing is bound (mode = off): the workers still ask their
    sidecars whether they are the active one, and a worker paused after
    that check writes anyway. The nemesis pauses whole pods (worker and
    sidecar, SIGSTOP) past the TTL, kills sidecars with kill -9 and
    starts them again, and slows the backend (below the lease's
    margin_ms, the bound the sidecar documents: a write goes out only
    while that much of the lease is left, and a backend slower than that
    can apply it after a new holder's, which no fence orders)."""

    ttl_ms = LEASE_TTL_MS
    slow_max_ms = LEASE_SLOW_MAX_MS

    def __init__(self, mode, seed, duration, workdir, store="redis"):
        super().__init__(mode, seed, duration, workdir, "redis")
        self.tms = {}

    def config(self):
        route = dict(DEFAULT_ROUTE)
        if self.mode == "off":
            route["mode"] = "off"
        else:
            route.update(mode="correctness", lease="app")
        return {
            "proxy": {"order_grace_ms": ORDER_GRACE_MS},
            "upstream default": {"timeout_ms": UPSTREAM_TIMEOUT_MS},
            "route docs": route,
            "store": {"type": "redis", "url": self.redis.url, "path": None},
            "locks": {"backend": "redis", "url": self.redis.url},
            "lease app": {"name": "chaos/leader", "ttl_ms": LEASE_TTL_MS,
                          "renew_ms": LEASE_RENEW_MS,
                          "margin_ms": LEASE_MARGIN_MS},
        }

    def start(self):
        import servers
        self.dir.mkdir(parents=True, exist_ok=True)
        self.hist_file = open(self.dir / "history.jsonl", "w")
        self.up = ChaosUpstream(self.seed)
        self.redis = servers.Redis().start()
        for wid in range(PODS):
            tm = Tidemark(self.dir / ("pod%d" % wid), upstream=self.up,
                          config=self.config())
            self.tms[wid] = tm
            tm.start()
            self.wait_backend(tm)
        self.tm = self.tms[0]
        for wid in range(PODS):
            self.spawn(wid)

    def worker_argv(self, wid):
        tm = self.tms[wid]
        return ["--lease", str(wid), str(self.seed), str(tm.port),
                str(tm.admin_port), str(LEASE_TTL_MS), "0"]

    def pause(self, wid):
        super().pause(wid)
        if self.tms[wid].alive():
            os.kill(self.tms[wid].proc.pid, signal.SIGSTOP)

    def resume(self, wid):
        if self.tms[wid].alive():
            os.kill(self.tms[wid].proc.pid, signal.SIGCONT)
        super().resume(wid)

    def about_to_write(self):
        ready = [w for w, e in self.last.items() if w not in self.paused
                 and e["f"] == "check" and e["state"] == "holding"]
        return self.rng.choice(sorted(ready)) if ready else None

    def overtakes(self, e, lease, wid):
        return (e.get("f") == "write" and e["w"] != wid
                and e["fence"] > lease["fence"] and e["status"] == 200)

    def fault_kill_tidemark(self):
        live = sorted(set(self.tms) - self.paused)
        if not live:
            return
        wid = self.rng.choice(live)
        down = self.rng.uniform(0, 0.3)
        self.tms[wid].kill9()
        self.nemesis_event("kill-sidecar", worker=wid, down=round(down, 3))
        self.stop_ev.wait(down)
        self.tms[wid].start()
        self.wait_backend(self.tms[wid])

    def faults(self):
        return [self.fault_pause_random, self.fault_kill_tidemark,
                self.fault_slow_upstream]

    def revive(self):
        for tm in self.tms.values():
            if not tm.alive():
                tm.start()

    def check_teardown(self):
        errors = []
        for tm in self.tms.values():
            try:
                tm.check_teardown()
            except AssertionError as e:
                errors.append(str(e))
        assert not errors, "\n\n".join(errors)


def report(mode, violations, summary, say=print, examples=3):
    say("fencing %s: %s" % (mode, ", ".join("%s=%d" % kv
                                            for kv in summary.items())))
    by_kind = {}
    for v in violations:
        by_kind.setdefault(v["kind"], []).append(v)
    say("fencing %s: %d violations%s" % (
        mode, len(violations),
        (" (" + ", ".join("%s %d" % (k, len(vs))
                          for k, vs in sorted(by_kind.items())) + ")")
        if violations else ""))
    for k, vs in sorted(by_kind.items()):
        for v in vs[:examples]:
            say("  %s %s: %s" % (k, v["res"], v["detail"]))


def run_both(seed, duration, workdir, store="lmdb", say=print, lease=False):
    """Fencing off, then on, with one seed. Returns (ok, {mode: result})."""
    if lease:
        store = "redis"
    say("chaos: seed %s, %gs per run, store %s%s (replay: SEED=%s "
        "DURATION=%g STORE=%s%s make chaos)"
        % (seed, duration, store, ", sidecar-held lease" if lease else "",
           seed, duration, store, " LEASE=1" if lease else ""))
    results = {}
    cls = LeaseRun if lease else Run
    for mode in ("off", "on"):
        v, s = cls(mode, seed, duration, Path(workdir) / mode,
                   store).run()
        report(mode, v, s, say)
        results[mode] = (v, s)
    ok = True
    if not results["off"][0]:
        say("FAIL: fencing off showed no violation: the check is blind")
        ok = False
    refused = results["on"][1].get("write 409", 0)
    if lease:
        refused += results["on"][1].get("write 503", 0)
    if refused == 0:
        say("FAIL: fencing on refused no write: no paused holder reached "
            "the fence")
        ok = False
    if results["on"][0]:
        say("FAIL: fencing on showed violations (seed %s); the run is "
            "kept in %s" % (seed, workdir))
        ok = False
    return ok, results


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", default="")
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--store", choices=("lmdb", "redis"), default="lmdb")
    ap.add_argument("--workdir", default="")
    ap.add_argument("--lease", action="store_true",
                    help="no token in the workers: each has a sidecar "
                    "that holds the lease (store and locks on Redis)")
    a = ap.parse_args(argv[1:])
    seed = a.seed or str(random.SystemRandom().randrange(1, 10 ** 9))
    workdir = a.workdir or tempfile.mkdtemp(prefix="tidemark-chaos-")
    ok, _ = run_both(seed, a.duration, workdir, a.store, lease=a.lease)
    if ok and not a.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    elif not ok:
        print("history and logs: %s (checker.py %s/on re-checks a run)"
              % (workdir, workdir))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
