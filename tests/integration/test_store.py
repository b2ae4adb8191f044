"""The embedded LMDB store: durable marks across restarts and kill -9, a
failed sync, a full map."""

import random
import re
import threading
import time

from common import slow, wait_until
from wire import Closed, HTTPError, assert_problem, build_request

ROUTES = {
    "route docs": {"path": "/v1/documents/{doc}",
                   "resource": "documents/{doc}", "mode": "correctness"},
    "route eff": {"path": "/v1/eff/{doc}", "resource": "eff/{doc}",
                  "mode": "efficiency"},
}


def test_marks_survive_restart(tidemark, upstream):
    tm = tidemark()
    assert tm.put("a", token=5).status == 200
    assert tm.put("b", token=9000000000).status == 200
    tm.restart()
    assert tm.mark("documents/a") == 5
    assert tm.mark("documents/b") == 9000000000
    r = tm.put("a", token=4, headers=[("X-Test-Id", "after")])
    doc = assert_problem(r, 409)
    assert doc["high_water"] == 5
    assert upstream.find("X-Test-Id", "after") == []
    assert tm.put("a", token=5).status == 200


def test_marks_survive_kill9_right_after_answer(tidemark, upstream):
    tm = tidemark()
    for i in range(1, 30):
        assert tm.put("k", token=i).status == 200
    tm.kill9()
    tm.start()
    assert tm.mark("documents/k") == 29


def test_stale_answered_from_cache_and_store_agree(tidemark, upstream):
    tm = tidemark(config={"store": {"cache_entries": "16"}})
    # more resources than the cache holds: evicted marks still come back
    for i in range(200):
        assert tm.put("c%d" % i, token=100 + i).status == 200
    for i in range(0, 200, 7):
        r = tm.put("c%d" % i, token=50)
        assert assert_problem(r, 409)["high_water"] == 100 + i
        assert tm.mark("documents/c%d" % i) == 100 + i
    assert upstream.count() == 200


def test_cold_refusal_does_not_wait_for_the_writer(tidemark, upstream,
                                                   failsync, tmp_path):
    """A token the cache does not hold (here after a restart) is checked
    against the file on the loop thread: a stale one is refused, and an
    equal one forwarded, while the store's writer is held in a sync that
    does not return (before, both waited behind it)."""
    shim, _ = failsync
    stall = tmp_path / "stall"
    held = tmp_path / "stall.held"
    tm = tidemark(config={"store": {"timeout_ms": "60000"}},
                  env={"LD_PRELOAD": str(shim), "FAILSYNC_STALL": str(stall)})
    assert tm.put("cold", token=5).status == 200
    tm.restart()
    busy = {}
    t = threading.Thread(target=lambda: busy.update(
        r=tm.put("busy", token=1, timeout=60)))
    try:
        stall.write_text("")
        t.start()
        wait_until(held.exists, 10 * slow(), "the writer held in its sync")
        r = tm.put("cold", token=4, headers=[("X-Test-Id", "stale")],
                   timeout=5)
        assert assert_problem(r, 409)["high_water"] == 5
        assert upstream.find("X-Test-Id", "stale") == []
        r = tm.put("cold", token=5, headers=[("X-Test-Id", "equal")],
                   timeout=5)
        assert r.status == 200, r
        assert len(upstream.find("X-Test-Id", "equal")) == 1
    finally:
        stall.unlink(missing_ok=True)
        if t.is_alive():
            t.join(60 * slow())
    assert busy["r"].status == 200
    assert tm.mark("documents/busy") == 1


def lmdb_counter(tm, name):
    """One of the lmdb store's counters from the control port's
    metrics."""
    status, _, body = tm.admin("GET", "/metrics")
    assert status == 200
    m = re.search(rb"^tidemark_lmdb_%s_total (\d+)$" % name.encode(), body,
                  re.M)
    assert m, "no tidemark_lmdb_%s_total in /metrics" % name
    return int(m.group(1))


def journal_syncs(tm):
    """How many groups of raises the store has written to its journal
    and synced."""
    return lmdb_counter(tm, "journal_syncs")


def test_idle_store_checkpoints_the_journal(tidemark, upstream):
    """A raise is durable in the journal at once; once the store has had
    nothing to do for a moment, LMDB takes it over (a checkpoint), and a
    restart then has nothing to replay."""
    tm = tidemark()
    assert tm.put("idle", token=8).status == 200
    assert journal_syncs(tm) == 1
    wait_until(lambda: lmdb_counter(tm, "checkpoints") >= 1, 5 * slow(),
               "an idle checkpoint")
    tm.kill9()
    tm.start()
    assert tm.mark("documents/idle") == 8
    assert tm.log_lines("replayed") == []


def test_group_commit(tidemark, upstream):
    """Raises that arrive together share journal syncs: 64 new marks
    sent at once over 64 connections take far fewer than 64."""
    tm = tidemark()
    assert tm.put("first", token=1).status == 200
    conns = [tm.conn() for _ in range(64)]
    reqs = [build_request("PUT", "/v1/documents/g%d" % i,
                          [("Fencing-Token", "1")], b"v")
            for i in range(64)]
    before = journal_syncs(tm)
    for c, raw in zip(conns, reqs):  # as close together as we can
        c.send(raw)
    out = [c.read_response().status for c in conns]
    for c in conns:
        c.close()
    assert out == [200] * 64
    syncs = journal_syncs(tm) - before
    assert 1 <= syncs <= 16, "%d journal syncs for 64 raises" % syncs
    for i in range(64):
        assert tm.mark("documents/g%d" % i) == 1


class Writers:
    """Threads writing increasing tokens to a few resources over
    keep-alive connections, recording which tokens got a 2xx."""

    def __init__(self, tm, resources, counters, acked, sent, lock):
        self.tm = tm
        self.resources = resources
        self.counters = counters
        self.acked = acked
        self.sent = sent
        self.lock = lock
        self.stop = threading.Event()
        self.oks = 0
        self.threads = [threading.Thread(target=self._run, args=(i,))
                        for i in range(6)]
        for t in self.threads:
            t.start()

    def _run(self, i):
        rnd = random.Random(i)
        conn = None
        while not self.stop.is_set():
            res = rnd.choice(self.resources)
            with self.lock:
                self.counters[res] += 1
                tok = self.counters[res]
                self.sent[res] = max(self.sent[res], tok)
            try:
                if conn is None:
                    conn = self.tm.conn(timeout=5)
                r = conn.request("PUT", "/v1/documents/%s" % res,
                                 [("Fencing-Token", str(tok))], b"v")
            except (OSError, Closed, HTTPError):
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.005)
                continue
            if 200 <= r.status < 300:
                with self.lock:
                    self.acked[res] = max(self.acked[res], tok)
                    self.oks += 1
        if conn is not None:
            conn.close()

    def join(self):
        self.stop.set()
        for t in self.threads:
            t.join(20)
            assert not t.is_alive()


def test_kill9_under_write_load_never_lowers_a_mark(tidemark, upstream):
    tm = tidemark()
    resources = ["r%d" % i for i in range(4)]
    counters = {r: 0 for r in resources}
    acked = {r: 0 for r in resources}
    sent = {r: 0 for r in resources}
    seen = {r: 0 for r in resources}
    lock = threading.Lock()
    rnd = random.Random(42)
    t_start = time.monotonic()
    rounds = 8
    for rnd_no in range(rounds):
        w = Writers(tm, resources, counters, acked, sent, lock)
        base = w.oks
        wait_until(lambda: w.oks >= base + 60, 20 * slow(),
                   "writes to be answered")
        time.sleep(rnd.uniform(0, 0.15))  # a random moment, not a sync
        tm.kill9()
        w.join()
        tm.start()
        for r in resources:
            m = tm.mark("documents/%s" % r) or 0
            assert m >= acked[r], (
                "round %d: %s answered 2xx with token %d but the mark is %d"
                % (rnd_no, r, acked[r], m))
            assert m >= seen[r], "round %d: %s went down %d -> %d" % (
                rnd_no, r, seen[r], m)
            assert m <= sent[r], (r, m, sent[r])
            seen[r] = m
    assert time.monotonic() - t_start < 90 * slow()
    # Killed mid-load, the process left accepted raises that only the
    # journal held: restarts replayed them (the path this test is for).
    assert tm.log_lines("replayed", "from the journal"), (
        "no restart replayed the journal")
    # the store still works after all that
    r0 = resources[0]
    assert tm.put(r0, token=counters[r0] + 1).status == 200


# ---------------------------------------------------------- failed sync


def test_failed_sync_stops_writes_on_correctness_routes(tidemark, upstream,
                                                        failsync, tmp_path):
    shim, var = failsync
    trigger = tmp_path / "fail-now"
    tm = tidemark(config=ROUTES, env={"LD_PRELOAD": str(shim),
                                      var: str(trigger)})
    assert tm.put("s", token=1).status == 200
    assert tm.put("c", token=5).status == 200
    assert tm.admin("GET", "/readyz")[0] == 200
    trigger.write_text("")
    r = tm.put("s", token=2, headers=[("X-Test-Id", "s2")])
    assert_problem(r, 503)
    assert r.header("Retry-After") is not None, r
    assert upstream.find("X-Test-Id", "s2") == []
    assert tm.admin("GET", "/readyz")[0] == 503
    assert tm.admin("GET", "/healthz")[0] == 200
    tm.wait_log("route=docs", "resource=documents/s ", "token=2",
                "unavailable")
    # It stays failed, even once syncs would work again.
    trigger.unlink()
    for tok, doc in ((3, "s"), (1, "fresh")):
        r = tm.put(doc, token=tok, headers=[("X-Test-Id", "late%d" % tok)])
        assert_problem(r, 503)
        assert upstream.find("X-Test-Id", "late%d" % tok) == []
    assert tm.admin("GET", "/readyz")[0] == 503
    # a token below the cached mark is stale without asking the store
    r = tm.put("c", token=3, headers=[("X-Test-Id", "c3")])
    assert assert_problem(r, 409)["high_water"] == 5
    assert upstream.find("X-Test-Id", "c3") == []
    # efficiency routes keep working when the store is down
    r = tm.request("PUT", "/v1/eff/e", token=5, body=b"x",
                   headers=[("X-Test-Id", "eff")])
    assert r.status == 200, r
    assert len(upstream.find("X-Test-Id", "eff")) == 1
    assert tm.alive()
    # A restart (without the shim) brings it back; no acknowledged mark
    # was lost.
    tm.env.pop("LD_PRELOAD")
    tm.env.pop(var)
    tm.restart()
    assert tm.admin("GET", "/readyz")[0] == 200
    assert tm.mark("documents/s") in (1, 2)
    assert tm.put("s", token=4).status == 200


# ------------------------------------------------------------- map full


def test_full_map_is_503_and_keeps_marks(tidemark, upstream):
    # 1 MiB is the smallest map_size the loader takes; names near the
    # longest a resource may be fill it after about a thousand marks.
    # Concurrent writers let group commit keep this quick.
    tm = tidemark(config={"store": {"map_size": "1048576"}})
    accepted = []
    refused = []
    lock = threading.Lock()
    counter = [0]
    stop = threading.Event()
    deadline = time.monotonic() + 60 * slow()

    def writer():
        with tm.conn() as c:
            while not stop.is_set() and time.monotonic() < deadline:
                with lock:
                    i = counter[0]
                    counter[0] += 1
                if i >= 20000:
                    return
                doc = "%05d-%s" % (i, "x" * 480)
                r = c.request("PUT", "/v1/documents/%s" % doc,
                              [("Fencing-Token", str(i + 1))], b"v")
                with lock:
                    if r.status == 200:
                        accepted.append((doc, i + 1))
                    else:
                        refused.append(r)
                        stop.set()

    ts = [threading.Thread(target=writer) for _ in range(32)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(90 * slow())
    assert refused, "a 1 MiB map never filled"
    for r in refused:
        assert_problem(r, 503)
        assert r.header("Retry-After") is not None
    assert accepted, "not a single write fit"
    wait_until(lambda: [ln for ln in tm.log().splitlines()
                        if re.search(r"map[ _-]?full", ln, re.I)],
               5 * slow(), "a log line that says the map is full")
    assert tm.alive()
    assert tm.admin("GET", "/healthz")[0] == 200
    accepted.sort(key=lambda a: a[1])
    sample = accepted[:3] + accepted[len(accepted) // 2:][:3] + accepted[-3:]
    for doc, tok in sample:
        assert tm.mark("documents/" + doc) == tok
        # a stale write on an old resource is still refused
        if tok > 1:
            assert tm.put(doc, token=tok - 1).status == 409
    # Full lasts: a raise that would write a mark is refused, on a new
    # resource or an old one; one that writes nothing is answered.
    doc, tok = accepted[-1]
    assert_problem(tm.put("new-after-full", token=1), 503)
    assert_problem(tm.put(doc, token=tok + 1), 503)
    assert tm.put(doc, token=tok).status == 200
    assert tm.mark("documents/" + doc) == tok
    # A kill -9 (the journal replayed into the full file) and a clean
    # restart: the store opens, full, and every acknowledged mark is
    # there, not a sample.
    tm.kill9()
    tm.start()
    assert tm.admin("GET", "/readyz")[0] == 200
    for doc, tok in accepted:
        assert tm.mark("documents/" + doc) == tok
    assert_problem(tm.put("new-after-restart", token=1), 503)
    tm.wait_log("map full", "raises that would write a mark are "
                "refused until")  # the store opened full
    tm.restart()
    for doc, tok in accepted:
        assert tm.mark("documents/" + doc) == tok
        if tok > 1:
            assert tm.put(doc, token=tok - 1).status == 409
