"""The seed's failure table, one scenario a function pair: each runs
once without fencing (clients write to the backend directly) and once
with it (through tidemark, or with the lock the seed recommends), and
reports, for each round it played, whether the race it stages happened
(two holders, a write or release arriving after the lease moved on) and
whether the harmful outcome followed. The lab (main.py) judges: without
fencing the harm shows in at least one round with the race; with it, in
none; a run in which the race never happened proves nothing and fails."""

import json
import os
import signal
import time

from . import harness as h
from .harness import Broken, wait_until


class Lab:
    """What the scenarios share: the servers, the backend, the timings
    and the tidemark binary. Servers are started when first asked for
    and stopped by close()."""

    def __init__(self, servers, tidemark_bin, entry, lock_ms, pause_ms,
                 rounds, clockjump):
        self.servers = servers          # the tests' servers.py module
        self.bin = tidemark_bin
        self.entry = entry              # tidemark-lab, for actors
        self.lock_ms = lock_ms
        self.pause_ms = pause_ms
        self.rounds = rounds
        self.clockjump = clockjump      # path of clockjump.so
        self.backend = h.Backend()
        self.made = []                  # servers and tidemarks to stop
        self.actors = []
        self._redis = None
        self._pg = None
        self.seq = 0

    # -- parts

    def redis(self):
        if self._redis is None:
            self._redis = self.keep(self.servers.Redis().start())
        return self._redis

    def postgres(self):
        if self._pg is None:
            self._pg = self.keep(self.servers.Postgres().start())
            self._pg.sql(
                "CREATE TABLE documents (name text PRIMARY KEY, body text "
                "NOT NULL, fence bigint NOT NULL DEFAULT 0);"
                "CREATE TABLE leases (name text PRIMARY KEY, owner text NOT "
                "NULL, fence bigint NOT NULL, expires_at timestamptz NOT "
                "NULL);")
        if not self._pg.running():
            self._pg.start()
        return self._pg

    def keep(self, thing):
        self.made.append(thing)
        return thing

    def tidemark(self, **kw):
        return self.keep(h.Tidemark(self.bin, self.backend.url,
                                    **kw)).start()

    def client(self, rec, name):
        a = h.Actor(name, rec, self.entry)
        self.actors.append(a)
        return a

    def doc(self, stem):
        self.seq += 1
        return "%s-%d-%d" % (stem, os.getpid(), self.seq)

    def close(self):
        for a in self.actors:
            a.close()
        self.actors = []
        for thing in reversed(self.made):
            try:
                thing.destroy()
            except Exception:  # stop the rest whatever one does
                pass
        self.made = []
        self.backend.stop()

    def end_run(self):
        for a in self.actors:
            a.close()
        self.actors = []


# ------------------------------------------------------------- helpers


def redis_acquire(rec, c, port, doc, ttl):
    """The seed's acquire script; the token or None (busy). Records the
    hold bar from the answer to the TTL's end."""
    r = c.call("redis", port=port, args=[
        "EVAL", h.ACQUIRE, 2, "lock:{%s}" % doc, "fence:{%s}" % doc, ttl])
    tok = h.acquire_reply(r)
    if tok is None:
        return None
    rec.step(c.name, "acquire: token %d" % tok, r["t1"])
    rec.span("hold", c.name, r["t1"], r["t1"] + ttl / 1000.0,
             label="token %d" % tok)
    return tok


def poll_acquire(rec, c, port, doc, ttl, timeout=10.0):
    """Try the acquire until it succeeds (the first holder's lease ends);
    a node slow to answer on a loaded machine is asked again."""
    deadline = time.monotonic() + timeout
    last = "busy"
    while time.monotonic() < deadline:
        try:
            tok = redis_acquire(rec, c, port, doc, ttl)
        except Broken as e:
            tok, last = None, str(e)
        if tok is not None:
            return tok
        time.sleep(0.005)
    raise Broken("%s never got the lock in %.0f s (last: %s)"
                 % (c.name, timeout, last))


def tm_acquire(rec, c, tm, doc, ttl, wait_ms=0, name="documents"):
    """tidemark's lock service: the fence, or None when the lock stayed
    busy (423 after wait_ms) or the store could not be used (503)."""
    r = c.call("http", method="POST", url="%s/v1/locks/%s/%s"
               "?ttl_ms=%d&wait_ms=%d" % (tm.admin, name, doc, ttl, wait_ms),
               timeout=wait_ms / 1000.0 + 10)
    fence = h.lock_fence(r)
    if fence is None:
        rec.step(c.name, "acquire: %d" % r["status"], r["t1"])
        return None
    rec.step(c.name, "acquire: token %d" % fence, r["t1"])
    rec.span("hold", c.name, r["t1"], r["t1"] + ttl / 1000.0,
             label="token %d" % fence)
    return fence


def tm_acquire_until(rec, c, tm, doc, ttl, timeout=15.0, name="documents"):
    """The lock service's acquire, waiting for the lock and asked again
    after a busy or unavailable answer until timeout: the fence."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        fence = tm_acquire(rec, c, tm, doc, ttl,
                           wait_ms=max(0, min(10000, int(left * 1000))),
                           name=name)
        if fence is not None:
            return fence
        if time.monotonic() >= deadline:
            raise Broken("%s never got the lock from tidemark in %.0f s"
                         % (c.name, timeout))
        time.sleep(0.05)


def new_lock(tok):
    """Client 1's token for a lock nobody has held: busy is Broken."""
    if tok is None:
        raise Broken("client 1's acquire on a new lock answered busy")
    return tok


def write_op(base, doc, c, body, token):
    headers = {"X-Lab-Client": c.name}
    if token is not None:
        headers["Fencing-Token"] = str(token)
    return dict(method="PUT", url="%s/v1/documents/%s" % (base, doc),
                headers=headers, body=body)


def record_write(rec, c, r, token, sent=None):
    """A client's write answer: a step, and a refusal when not 2xx."""
    st = r.get("status", 0)
    if sent is not None:
        rec.step(c.name, "write sent (%s)" % ("token %s" % token if token
                                              is not None else "no token"),
                 sent)
    if 200 <= st < 300:
        rec.step(c.name, "write: %d" % st, r["t1"])
    else:
        rec.add("refused", c.name, r["t1"], status=st, token=token,
                text="write refused: %d" % st)
    return st


def body_of(c, token):
    if token is None:
        return "%s (no token)" % c.name
    return "%s, token %s" % (c.name, token)


def write(rec, c, base, doc, token):
    body = body_of(c, token)
    r = c.call("http", **write_op(base, doc, c, body, token))
    record_write(rec, c, r, token, r["t0"])
    return r


def ok(r):
    return 200 <= r.get("status", 0) < 300


def stale_won(final):
    """The backend (or row) ends with client 1's write: the stale one."""
    return final is not None and final.startswith("client 1")


def one_round(race, harm, verdict, no_race=None):
    """One round's outcome. harm counts only where the race happened;
    no_race says what happened instead."""
    if not race:
        return {"race": False, "harm": False,
                "verdict": "no race: %s" % (no_race or verdict)}
    return {"race": True, "harm": bool(harm), "verdict": verdict}


def finish(lab, rec, doc, rnd, **extra):
    """A run of one round: its events, the round, what the backend
    holds."""
    out = timeline(lab, rec, doc)
    out.update({"harm": rnd["harm"], "verdict": rnd["verdict"],
                "rounds": [rnd]})
    out.update(extra)
    lab.end_run()
    return out


def timeline(lab, rec, doc):
    # Time 0 is 20 ms before the first event (not the start of the
    # processes the run needed).
    shift = min([e["t"] for e in rec.events] or [0]) - 20
    for e in rec.events:
        e["t"] = round(e["t"] - shift, 1)
        if "t1" in e:
            e["t1"] = round(e["t1"] - shift, 1)
    return {"events": sorted(rec.events, key=lambda e: e["t"]),
            "final": lab.backend.body(doc)}


def hold_pause(c, ms):
    """The client's pause lasts ms from its SIGSTOP: the scenario's
    length, not a synchronization."""
    left = c.paused_at + ms / 1000.0 - time.monotonic()
    if left > 0:
        time.sleep(left)


# --------------------------------------------------------------- paused


def paused(lab, fenced):
    rec = h.Recorder()
    lab.backend.reset(rec)
    doc = lab.doc("paused")
    port = lab.redis().port
    base = lab.tidemark().url if fenced else lab.backend.url
    c1, c2 = lab.client(rec, "client 1"), lab.client(rec, "client 2")
    t1 = new_lock(redis_acquire(rec, c1, port, doc, lab.lock_ms))
    c1.pause()
    c1.send("http", **write_op(base, doc, c1, "client 1, token %d" % t1,
                               t1))
    t2 = poll_acquire(rec, c2, port, doc, lab.lock_ms)
    w2 = write(rec, c2, base, doc, t2)
    hold_pause(c1, lab.pause_ms)
    c1.resume()
    r = c1.reply()
    st = record_write(rec, c1, r, t1)
    final = lab.backend.body(doc)
    # The race: client 2 held the lock and wrote while client 1 slept.
    return finish(lab, rec, doc, one_round(
        ok(w2), stale_won(final),
        "the backend ends with %r; client 1's late write: %d" % (final, st),
        "client 2's write was answered %d" % w2["status"]))


# -------------------------------------------------------------- delayed


def delayed(lab, fenced):
    rec = h.Recorder()
    lab.backend.reset(rec)
    doc = lab.doc("delayed")
    port = lab.redis().port
    target = lab.tidemark() if fenced else lab.backend
    relay = h.Relay(target.port)
    try:
        c1, c2 = lab.client(rec, "client 1"), lab.client(rec, "client 2")
        t1 = new_lock(redis_acquire(rec, c1, port, doc, lab.lock_ms))
        relay_base = "http://127.0.0.1:%d" % relay.port
        c1.send("http", **write_op(relay_base, doc, c1,
                                   "client 1, token %d" % t1, t1))
        if not relay.held.wait(10):
            raise Broken("client 1's write never reached the relay")
        rec.step(c1.name, "write sent (token %d); held in the network"
                 % t1, relay.held_at)
        t2 = poll_acquire(rec, c2, port, doc, lab.lock_ms)
        w2 = write(rec, c2, target.url, doc, t2)
        relay.release()
        r = c1.reply()
        rec.span("delay", c1.name, relay.held_at, relay.passed_at or
                 r["t1"])
        st = record_write(rec, c1, r, t1)
    finally:
        relay.stop()
    final = lab.backend.body(doc)
    return finish(lab, rec, doc, one_round(
        ok(w2), stale_won(final),
        "the backend ends with %r; the delayed write: %d" % (final, st),
        "client 2's write was answered %d" % w2["status"]))


# ------------------------------------------------------------- failover


def failover(lab, fenced):
    if fenced:
        return failover_fenced(lab)
    rec = h.Recorder()
    lab.backend.reset(rec)
    doc = lab.doc("failover")
    S = lab.servers
    # No delay before the replica's first sync (5 s by default).
    primary = lab.keep(S.Redis(extra=["--repl-diskless-sync-delay",
                                      "0"]).start())
    # The replica replicates through a relay, so that the link can be cut
    # (bytes already sent by the primary would otherwise still reach a
    # stopped replica from its socket buffer).
    link = h.Relay(primary.port)
    link.release()
    lab.keep(link)
    replica = lab.keep(S.Redis(extra=["--replicaof", "127.0.0.1",
                                      str(link.port)]).start())
    c1, c2, c3 = (lab.client(rec, "client %d" % i) for i in (1, 2, 3))
    t1 = new_lock(redis_acquire(rec, c1, primary.port, doc, lab.lock_ms))
    write(rec, c1, lab.backend.url, doc, t1)
    r = c1.call("redis", port=primary.port,
                args=["EVAL", h.RELEASE, 1, "lock:{%s}" % doc, t1])
    rec.step(c1.name, "release: %d" % h.int_reply(r, "release"), r["t1"])
    fence_key = "fence:{%s}" % doc
    wait_until(lambda: h.redis(replica.port, "GET", fence_key) == str(t1)
               and h.redis(replica.port, "EXISTS", "lock:{%s}" % doc) == 0,
               10, "the replica to have fence 1 and the release")
    rec.step("redis", "the replica has fence %d" % t1)
    link.cut.set()
    rec.step("redis", "replication lags (the link to the replica is cut)")
    t2 = redis_acquire(rec, c2, primary.port, doc, lab.lock_ms * 10)
    if t2 is None:
        raise Broken("client 2's acquire after the release answered busy")
    write(rec, c2, lab.backend.url, doc, t2)
    primary.kill9()
    rec.add("crash", "redis", text="primary killed (kill -9) before the "
            "replica had fence %d" % t2)
    # The race: the replica lost the increment (it still has t1).
    lost = h.redis(replica.port, "GET", fence_key)
    promoted = h.redis(replica.port, "REPLICAOF", "NO", "ONE")
    if promoted != "OK":
        raise Broken("REPLICAOF NO ONE answered %r" % (promoted,))
    rec.step("redis", "replica promoted (REPLICAOF NO ONE)")
    t3 = redis_acquire(rec, c3, replica.port, doc, lab.lock_ms)
    if t3 is None:
        raise Broken("client 3's acquire on the promoted replica answered "
                     "busy")
    write(rec, c3, lab.backend.url, doc, t3)
    issued = "tokens issued: %d, %d, %d%s" % (
        t1, t2, t3, " (token %d twice)" % t2 if t3 == t2 else "")
    return finish(lab, rec, doc, one_round(
        lost == str(t1), t3 == t2, issued,
        "the replica had fence %r when the primary died" % (lost,)),
        tokens=[t1, t2, t3])


def failover_fenced(lab):
    """The same story on the two durable counters the seed names: the
    embedded lock store (tidemark killed and restarted) and the Postgres
    lease row (Postgres crashed and restarted). No token repeats."""
    runs = []
    for name, kind in (("tidemark's lock store, killed", "tm"),
                       ("Postgres lease row, crashed", "pg")):
        rec = h.Recorder()
        lab.backend.reset(rec)
        doc = lab.doc("failover")
        tokens = []
        tm = lab.tidemark()
        pg = lab.postgres() if kind == "pg" else None
        for i in (1, 2, 3):
            c = lab.client(rec, "client %d" % i)
            ttl = lab.lock_ms
            if i == 3:
                crash(rec, tm, pg, kind)
            if kind == "tm":
                tok = tm_acquire_until(rec, c, tm, doc, ttl)
            else:
                tok = lease_acquire(rec, c, pg, doc, ttl)
            tokens.append(tok)
            write(rec, c, tm.url, doc, tok)
            if i == 1:
                release_first(rec, c, tm, pg, kind, doc, tok)
        out = finish(lab, rec, doc, one_round(
            True, len(set(tokens)) != len(tokens),
            "tokens issued: %s" % ", ".join(str(t) for t in tokens)),
            tokens=tokens)
        out["name"] = name
        runs.append(out)
    return runs


def crash(rec, tm, pg, kind):
    """Between the second and the third acquire: the counter's keeper
    crashes and comes back."""
    if kind == "tm":
        tm.kill9()
        rec.add("crash", "tidemark", text="tidemark killed (kill -9)")
        tm.start()
        rec.step("tidemark", "tidemark restarted")
    else:
        pg.stop(signal.SIGQUIT)
        rec.add("crash", "postgres", text="Postgres crashed "
                "(immediate shutdown)")
        pg.start()
        rec.step("postgres", "Postgres restarted (WAL recovery)")


def release_first(rec, c, tm, pg, kind, doc, tok):
    if kind == "tm":
        r = c.call("http", method="DELETE", url="%s/v1/locks/"
                   "documents/%s?token=%d" % (tm.admin, doc, tok))
        # 409: the lease had already ended (a slow machine): free too.
        if r["status"] not in (204, 409):
            raise Broken("client 1's release answered %d: %s"
                         % (r["status"], r["body"][:300]))
    else:
        out = pg.sql("UPDATE leases SET expires_at = '-infinity' "
                     "WHERE name = '%s' AND fence = %d" % (doc, tok))
        if out.strip() != "UPDATE 1":
            raise Broken("client 1's release of the lease row answered "
                         "%r" % out)
    rec.step(c.name, "release")


LEASE_SQL = ("INSERT INTO leases (name, owner, fence, expires_at) "
             "VALUES ('%(n)s', '%(o)s', 1, now() + make_interval(secs => "
             "%(s)s)) ON CONFLICT (name) DO UPDATE SET owner = "
             "EXCLUDED.owner, fence = leases.fence + 1, expires_at = "
             "EXCLUDED.expires_at WHERE leases.expires_at < now() "
             "RETURNING fence;")


def lease_acquire(rec, c, pg, doc, ttl, timeout=15.0):
    """The seed's lease row, asked again while it is held (INSERT 0 0)
    or while Postgres is still starting after its crash: the fence."""
    deadline = time.monotonic() + timeout
    last = "the row was held"
    while time.monotonic() < deadline:
        try:
            out = pg.sql(LEASE_SQL % {"n": doc, "o": c.name,
                                      "s": ttl / 1000.0})
        except RuntimeError as e:     # psql failed: not up yet
            out, last = None, str(e).strip()[-300:]
        tok = h.lease_row(out) if out is not None else None
        if tok is not None:
            now = time.monotonic()
            rec.step(c.name, "lease row: token %d" % tok, now)
            rec.span("hold", c.name, now, now + ttl / 1000.0,
                     label="token %d" % tok)
            return tok
        time.sleep(0.01)
    raise Broken("%s never got the lease row in %.0f s (last: %s)"
                 % (c.name, timeout, last))


# -------------------------------------------------------------- redlock


class Nodes:
    """Five Redis nodes; node 3's wall clock can jump (clockjump.so)."""

    def __init__(self, lab):
        S = lab.servers
        self.jump = None
        self.nodes = []
        for i in range(5):
            extra = []
            r = S.Redis(extra=extra)
            if i == 2:
                self.jump = os.path.join(r.dir, "clockjump")
                with open(self.jump, "w") as f:
                    f.write("0\n")
                argv = r.argv

                def jumped(argv=argv, r=r):
                    return ["env", "LD_PRELOAD=" + lab.clockjump,
                            "CLOCKJUMP_FILE=" + self.jump] + argv()
                r.argv = jumped
            self.nodes.append(lab.keep(r.start()))
        self.ports = [n.port for n in self.nodes]
        self.offset = 0

    def step_clock(self, ms):
        self.offset += ms
        with open(self.jump + ".tmp", "w") as f:
            f.write("%d\n" % self.offset)
        os.rename(self.jump + ".tmp", self.jump)


def fence_token(tm, c, doc):
    """Redlock has no token: with fencing, a holder takes one from a
    durable counter (tidemark's lock service: take and give back)."""
    deadline = time.monotonic() + 15
    while True:
        r = c.call("http", method="POST", url="%s/v1/locks/fence/%s"
                   "?ttl_ms=1&wait_ms=2000" % (tm.admin, doc), timeout=12)
        tok = h.lock_fence(r)
        if tok is not None:
            break
        if time.monotonic() > deadline:
            raise Broken("%s got no fence token in 15 s (last: %d)"
                         % (c.name, r["status"]))
    r = c.call("http", method="DELETE", url="%s/v1/locks/fence/%s?token=%d"
               % (tm.admin, doc, tok))
    # 409: the 1 ms lease had already ended, which gives it back too.
    if r["status"] not in (204, 409):
        raise Broken("giving the fence token back answered %d: %s"
                     % (r["status"], r["body"][:300]))
    return tok


def redlock_hold(rec, c, r, ttl):
    won = len(r["won"])
    rec.step(c.name, "Redlock: %d of 5 nodes%s" % (
        won, ", a majority" if r["majority"] else ""), r["t1"])
    if r["majority"]:
        rec.span("hold", c.name, r["t1"], r["t0"] + ttl / 1000.0,
                 label="%d of 5" % won)


def first_majority(c, ports, key, ttl, tries=5):
    """Client 1's Redlock acquire, retried as a Redlock client does when
    it got no majority in time (a loaded machine): it unlocks what it got
    and tries again."""
    for _ in range(tries):
        r = c.call("redlock", ports=ports, key=key, value="c1", ttl=ttl)
        if r["majority"]:
            return r
        for port in r["won"]:
            try:
                h.redis(port, "EVAL", h.RELEASE, 1, key, "c1")
            except OSError:
                pass    # a node that does not answer: its key expires
    return r


def redlock_clock(lab, fenced):
    return _redlock(lab, fenced, "clock")


def redlock_pause(lab, fenced):
    return _redlock(lab, fenced, "pause")


def no_majority(who, r):
    """Why a Redlock acquire did not hold: too few nodes, or a majority
    that took longer than the TTL to gather (no validity left)."""
    won = len(r["won"])
    if won >= 3:
        return ("%s got %d of 5 nodes but no validity: %.0f ms left of "
                "the TTL after asking them" % (who, won, r["validity_ms"]))
    return "%s got %d of 5 nodes, no majority" % (who, won)


def clock_round(lab, nodes, tm, base, rec, c1, c2, doc, key):
    """Client 1 reaches nodes 1-3 only (4 and 5 are cut off from it: its
    connections are refused), with a TTL long enough that its lease is
    valid by its own clock throughout; node 3's clock jumps; client 2
    takes nodes 3-5 and writes; client 1, still valid by its clock,
    writes."""
    ttl = lab.lock_ms * 20
    dead = [h.free_port(), h.free_port()]
    r1 = first_majority(c1, nodes.ports[:3] + dead, key, ttl)
    redlock_hold(rec, c1, r1, ttl)
    if not r1["majority"]:
        return one_round(False, False, "", no_majority("client 1", r1))
    t1 = fence_token(tm, c1, doc) if tm else None
    nodes.step_clock(ttl * 100)
    rec.add("crash", "redis", text="node 3's clock jumps %d s ahead"
            % (ttl * 100 // 1000))
    r2 = c2.call("redlock", ports=nodes.ports, key=key, value="c2",
                 ttl=ttl)
    redlock_hold(rec, c2, r2, ttl)
    if not r2["majority"]:
        return one_round(False, False, "", no_majority("client 2", r2))
    t2 = fence_token(tm, c2, doc) if tm else None
    w2 = write(rec, c2, base, doc, t2)
    # Client 1 checks its validity by its own clock before it writes.
    if time.monotonic() >= r1["t0"] + r1["validity_ms"] / 1e3:
        return one_round(False, False, "", "client 1's validity ended "
                         "before it could write (a slow machine)")
    r = c1.call("http", **write_op(base, doc, c1, body_of(c1, t1), t1))
    record_write(rec, c1, r, t1, r["t0"])
    final = lab.backend.body(doc)
    return one_round(ok(w2), stale_won(final),
                     "the backend ends with %r" % final,
                     "client 2's write was answered %d" % w2["status"])


def pause_round(lab, nodes, tm, base, rec, c1, c2, doc, key):
    """Client 1 holds all 5 nodes and is paused past the TTL (its write
    already sent, waiting in the paused process); client 2 takes a
    majority and writes; client 1 resumes."""
    ttl = lab.lock_ms
    r1 = first_majority(c1, nodes.ports, key, ttl)
    redlock_hold(rec, c1, r1, ttl)
    if not r1["majority"]:
        return one_round(False, False, "", no_majority("client 1", r1))
    t1 = fence_token(tm, c1, doc) if tm else None
    c1.pause()
    c1.send("http", **write_op(base, doc, c1, body_of(c1, t1), t1))
    deadline = time.monotonic() + 10
    while True:
        r2 = c2.call("redlock", ports=nodes.ports, key=key, value="c2",
                     ttl=ttl)
        if r2["majority"] or time.monotonic() > deadline:
            break
        time.sleep(0.005)
    redlock_hold(rec, c2, r2, ttl)
    w2 = None
    if r2["majority"]:
        t2 = fence_token(tm, c2, doc) if tm else None
        w2 = write(rec, c2, base, doc, t2)
    hold_pause(c1, lab.pause_ms)
    c1.resume()
    r = c1.reply()
    record_write(rec, c1, r, t1)
    final = lab.backend.body(doc)
    # Client 1 believed it held a majority when it wrote: it has no way
    # to know it was paused.
    if w2 is None:
        return one_round(False, False, "", no_majority("client 2", r2))
    return one_round(ok(w2), stale_won(final),
                     "the backend ends with %r" % final,
                     "client 2's write was answered %d" % w2["status"])


def _redlock(lab, fenced, how):
    if getattr(lab, "_nodes", None) is None:
        lab._nodes = Nodes(lab)
    play = clock_round if how == "clock" else pause_round
    tm = lab.tidemark() if fenced else None
    base = tm.url if fenced else lab.backend.url
    outs = []
    for _ in range(lab.rounds):
        rec = h.Recorder()
        lab.backend.reset(rec)
        doc = lab.doc("redlock-" + how)
        c1, c2 = lab.client(rec, "client 1"), lab.client(rec, "client 2")
        rnd = play(lab, lab._nodes, tm, base, rec, c1, c2, doc,
                   "redlock:" + doc)
        outs.append(finish(lab, rec, doc, rnd))
    return rounds_run(outs, fenced)


def rounds_run(outs, fenced):
    """One run of several rounds, shown by one of them: the first with
    the race (and, without fencing, the harm); every round's outcome in
    rounds."""
    rounds = [o["rounds"][0] for o in outs]
    raced = [i for i, r in enumerate(rounds) if r["race"]]
    harmed = [i for i in raced if rounds[i]["harm"]]
    pick = (harmed if not fenced and harmed else raced or [0])[0]
    out = dict(outs[pick])
    out["rounds"] = rounds
    out["two_holders"] = len(raced)
    out["harm"] = bool(harmed)
    out["verdict"] = ("two majority holders in %d of %d rounds; the stale "
                      "write applied in %d of them; round %d shown: %s"
                      % (len(raced), len(rounds), len(harmed), pick + 1,
                         rounds[pick]["verdict"]))
    return out


# --------------------------------------------------------- slow release


def slow_release(lab, fenced):
    rec = h.Recorder()
    lab.backend.reset(rec)
    doc = lab.doc("release")
    c1, c2, c3 = (lab.client(rec, "client %d" % i) for i in (1, 2, 3))
    long_ttl = lab.lock_ms * 10
    if not fenced:
        rnd = release_unfenced(lab, rec, doc, c1, c2, c3, long_ttl)
    else:
        rnd = release_fenced(lab, rec, doc, c1, c2, c3, long_ttl)
    return finish(lab, rec, doc, rnd)


def release_late(lab, c1, release, take, ttl):
    """Client 1 is paused with its release (an actor operation) sent;
    take() gives client 2 the lock for ttl ms; client 1 resumes. Its
    answer, and the earliest time client 2's lease can end."""
    c1.pause()
    c1.send(**release)
    c2_from = time.monotonic()
    take()
    hold_pause(c1, lab.pause_ms)
    c1.resume()
    return c1.reply(), c2_from + ttl / 1000.0


def release_unfenced(lab, rec, doc, c1, c2, c3, long_ttl):
    port = lab.redis().port
    new_lock(redis_acquire(rec, c1, port, doc, lab.lock_ms))
    r, c2_until = release_late(
        lab, c1, dict(op="redis", port=port, args=["DEL", "lock:{%s}" % doc]),
        lambda: poll_acquire(rec, c2, port, doc, long_ttl), long_ttl)
    deleted = h.int_reply(r, "client 1's DEL")
    rec.step(c1.name, "release: DEL deleted %d key" % deleted, r["t1"])
    r3 = c3.call("redis", port=port, args=[
        "EVAL", h.ACQUIRE, 2, "lock:{%s}" % doc, "fence:{%s}" % doc,
        lab.lock_ms])
    t3 = h.acquire_reply(r3)
    if t3 is None:
        rec.add("refused", c3.name, r3["t1"], text="acquire: busy")
    else:
        rec.step(c3.name, "acquire: token %d" % t3, r3["t1"])
    # The race: client 1's DEL removed client 2's live lock, and client 3
    # asked while client 2's lease was still running.
    live = deleted == 1 and r3["t1"] < c2_until
    return one_round(
        live, t3 is not None,
        "client 3 got the lock (token %s) while client 2's lease was live"
        % t3 if t3 is not None else "client 3: busy",
        "client 1's DEL deleted %d key; client 2's lease %s" % (
            deleted, "live" if r3["t1"] < c2_until else "had ended"))


def release_fenced(lab, rec, doc, c1, c2, c3, long_ttl):
    tm = lab.tidemark()
    f1 = new_lock(tm_acquire(rec, c1, tm, doc, lab.lock_ms))
    r, c2_until = release_late(
        lab, c1, dict(op="http", method="DELETE", url="%s/v1/locks/"
                      "documents/%s?token=%d" % (tm.admin, doc, f1)),
        lambda: tm_acquire_until(rec, c2, tm, doc, long_ttl), long_ttl)
    if r["status"] == 204:
        rec.step(c1.name, "release: 204", r["t1"])
    elif r["status"] == 409:
        rec.add("refused", c1.name, r["t1"], status=409,
                text="release refused: 409 (deletes nothing)")
    else:
        raise Broken("client 1's release answered %d: %s"
                     % (r["status"], r["body"][:300]))
    r3 = c3.call("http", method="POST", url="%s/v1/locks/documents/%s"
                 "?ttl_ms=%d" % (tm.admin, doc, lab.lock_ms))
    f3 = h.lock_fence(r3)
    if f3 is None and r3["status"] != 423:
        raise Broken("client 3's acquire answered %d: %s"
                     % (r3["status"], r3["body"][:300]))
    if f3 is None:
        rec.add("refused", c3.name, r3["t1"], status=423,
                text="acquire: 423")
    else:
        rec.step(c3.name, "acquire: token %d" % f3, r3["t1"])
    return one_round(
        r3["t1"] < c2_until, f3 is not None,
        "client 1's release: %d; client 3's acquire: %d"
        % (r["status"], r3["status"]),
        "client 2's lease had ended when client 3 asked")


# ---------------------------------------------------- job longer than TTL


def long_job(lab, fenced):
    rec = h.Recorder()
    lab.backend.reset(rec)
    doc = lab.doc("longjob")
    c1, c2 = lab.client(rec, "client 1"), lab.client(rec, "client 2")
    tm = None if not fenced else lab.tidemark()
    port = lab.redis().port if not fenced else None
    base = tm.url if fenced else lab.backend.url
    t1 = new_lock(redis_acquire(rec, c1, port, doc, lab.lock_ms)
                  if not fenced else tm_acquire(rec, c1, tm, doc, lab.lock_ms))
    write(rec, c1, base, doc, t1)
    c1.send("work", ms=lab.pause_ms)
    rec.step(c1.name, "a job step of %d ms" % lab.pause_ms)
    if not fenced:
        t2 = poll_acquire(rec, c2, port, doc, lab.lock_ms * 10)
    else:
        t2 = tm_acquire_until(rec, c2, tm, doc, lab.lock_ms * 10)
    w2 = write(rec, c2, base, doc, t2)
    c1.reply()
    if not fenced:
        r = c1.call("redis", port=port, args=[
            "EVAL", h.EXTEND, 1, "lock:{%s}" % doc, t1, lab.lock_ms])
        rec.step(c1.name, "extend: %d (not checked)"
                 % h.int_reply(r, "extend"), r["t1"])
        write(rec, c1, base, doc, t1)
    else:
        r = c1.call("http", method="PATCH", url="%s/v1/locks/documents/%s"
                    "?token=%d&ttl_ms=%d" % (tm.admin, doc, t1,
                                            lab.lock_ms))
        if r["status"] == 200:
            write(rec, c1, base, doc, t1)
        elif r["status"] == 409:
            rec.add("refused", c1.name, r["t1"], status=409,
                    text="extend: 409: the lock is lost, stop")
        else:
            raise Broken("client 1's extend answered %d: %s"
                         % (r["status"], r["body"][:300]))
    final = lab.backend.body(doc)
    # The race: client 2 took the lock and wrote during client 1's step.
    return finish(lab, rec, doc, one_round(
        ok(w2), stale_won(final), "the backend ends with %r" % final,
        "client 2's write was answered %d" % w2["status"]))


# ---------------------------------------------- advisory lock, same tx


def advisory(lab, fenced):
    rec = h.Recorder()
    lab.backend.reset(rec)
    doc = lab.doc("advisory")
    pg = lab.postgres()
    out = pg.sql("INSERT INTO documents (name, body) VALUES ('%s', 'v0')"
                 % doc)
    if out.strip() != "INSERT 0 1":
        raise Broken("the document row's INSERT answered %r" % out)
    c1, c2 = lab.client(rec, "client 1"), lab.client(rec, "client 2")
    for c in (c1, c2):
        c.call("sql_open", dsn=pg.dsn)
    if not fenced:
        rnd = advisory_unfenced(lab, rec, doc, c1, c2)
    else:
        rnd = advisory_fenced(lab, rec, doc, c1, c2)
    final = pg.sql("SELECT body FROM documents WHERE name = '%s'"
                   % doc).strip()
    rnd = one_round(rnd["race"], stale_won(final),
                    "the row ends with %r" % final, rnd["verdict"])
    out = finish(lab, rec, doc, rnd)
    out["final"] = final
    return out


def update_sql(doc, body):
    return "UPDATE documents SET body = '%s' WHERE name = '%s';" % (body,
                                                                     doc)


def applied(rec, c, r, what):
    rec.add("write", "postgres", r["t1"], client=c.name, body=what)


def advisory_unfenced(lab, rec, doc, c1, c2):
    """A Redis lock outside the database; the work commits on its
    own."""
    port = lab.redis().port
    t1 = new_lock(redis_acquire(rec, c1, port, doc, lab.lock_ms))
    c1.pause()
    c1.send("sql", q=update_sql(doc, "client 1, token %d" % t1))
    t2 = poll_acquire(rec, c2, port, doc, lab.lock_ms)
    r = c2.call("sql", q=update_sql(doc, "client 2, token %d" % t2))
    h.psql_answer(r, "UPDATE 1")
    applied(rec, c2, r, "client 2")
    hold_pause(c1, lab.pause_ms)
    c1.resume()
    r = c1.reply()
    h.psql_answer(r, "UPDATE 1")
    applied(rec, c1, r, "client 1")
    # Client 2 held the lock and wrote while client 1 was paused.
    return {"race": True, "verdict": ""}


def advisory_fenced(lab, rec, doc, c1, c2):
    """The advisory lock in the transaction of the work; client 1
    disconnects while paused: Postgres rolls its update back."""
    lock = "SELECT pg_try_advisory_xact_lock(hashtext('%s'));" % doc
    h.psql_answer(c1.call("sql", q="BEGIN;"), "BEGIN")
    r = c1.call("sql", q=lock)
    if h.psql_answer(r, "t", "f") != "t":
        raise Broken("client 1 found a new advisory lock busy")
    rec.step(c1.name, "BEGIN; advisory lock: t", r["t1"])
    held_from = r["t1"]
    r = c1.call("sql", q=update_sql(doc, "client 1"))
    h.psql_answer(r, "UPDATE 1")
    rec.step(c1.name, "UPDATE (uncommitted)", r["t1"])
    c1.pause()
    h.psql_answer(c2.call("sql", q="BEGIN;"), "BEGIN")
    r = c2.call("sql", q=lock)
    busy = h.psql_answer(r, "t", "f") == "f"
    rec.step(c2.name, "BEGIN; advisory lock: %s%s"
             % (r["out"].strip(), " (busy)" if busy else ""), r["t1"])
    h.psql_answer(c2.call("sql", q="ROLLBACK;"), "ROLLBACK")
    hold_pause(c1, lab.pause_ms)
    c1.kill()
    now = time.monotonic()
    rec.span("pause", c1.name, c1.paused_at, now)
    rec.span("hold", c1.name, held_from, now, label="advisory lock")
    rec.add("refused", c1.name, now, text="disconnected: Postgres "
            "rolls its transaction back")
    deadline = time.monotonic() + 10
    while True:
        h.psql_answer(c2.call("sql", q="BEGIN;"), "BEGIN")
        r = c2.call("sql", q=lock)
        if h.psql_answer(r, "t", "f") == "t":
            break
        h.psql_answer(c2.call("sql", q="ROLLBACK;"), "ROLLBACK")
        if time.monotonic() > deadline:
            raise Broken("client 2 never got the advisory lock after "
                         "client 1 was gone")
        time.sleep(0.005)
    rec.step(c2.name, "BEGIN; advisory lock: t", r["t1"])
    held2 = r["t1"]
    h.psql_answer(c2.call("sql", q=update_sql(doc, "client 2")),
                  "UPDATE 1")
    r = c2.call("sql", q="COMMIT;")
    h.psql_answer(r, "COMMIT")
    rec.span("hold", c2.name, held2, r["t1"], label="advisory lock")
    applied(rec, c2, r, "client 2")
    # The race: client 2 asked while client 1 held the lock.
    return {"race": busy, "verdict": "client 2 found the lock free while "
            "client 1 held it"}


# ------------------------------------------------------------- replicas


def carrier(tm):
    """The sidecar's lease on its control port: (state, fence)."""
    st, _, body = h.http_call("GET", tm.admin + "/v1/leases/app")
    if st != 200:
        return None, None
    doc = json.loads(body)
    return doc.get("state"), doc.get("fence")


def wait_carrier(rec, lane, tm, state, timeout=15.0):
    """Poll the sidecar until its lease is in state: its fence."""
    got = wait_until(lambda: (lambda s: s if s[0] == state else None)(
        carrier(tm)), timeout, "%s's sidecar %s" % (lane, state))
    rec.step(lane, "sidecar %s%s" % (state, ", fence %d" % got[1]
                                     if state == "holding" else ""))
    return got[1]


def replicas(lab, fenced):
    """Two replicas of an application that sends no token, each with its
    sidecar; the sidecars hold the lease [lease app] on one Redis (marks
    there too). Fencing on: the route is bound to the lease (lease =
    app); off: it is not (mode = off), and each replica only asks its
    sidecar whether it is the active one. Replica 1 is active, its whole
    pod (the client and its sidecar) pauses past the TTL; replica 2's
    sidecar wins and replica 2 writes; replica 1 resumes and writes what
    it was about to write."""
    rec = h.Recorder()
    lab.backend.reset(rec)
    doc = lab.doc("replicas")
    url = lab.redis().url
    ttl = lab.lock_ms
    extra = ("lease = app\n" if fenced else "") + (
        "[lease app]\nname = lab/%s\nttl_ms = %d\nrenew_ms = %d\n"
        % (doc, ttl, max(1, ttl // 4)))
    sides = []
    for _ in range(2):
        tm = lab.tidemark(store="type = redis\nurl = %s\n" % url,
                          locks="backend = redis\nurl = %s\n" % url,
                          extra=extra,
                          mode="correctness" if fenced else "off")
        sides.append(tm)
    tm1, tm2 = sides
    c1, c2 = lab.client(rec, "client 1"), lab.client(rec, "client 2")
    f1 = wait_carrier(rec, "client 1", tm1, "holding")
    wait_carrier(rec, "client 2", tm2, "standby")
    won = time.monotonic()
    write(rec, c1, tm1.url, doc, None)
    c1.pause()
    os.kill(tm1.proc.pid, signal.SIGSTOP)
    # Renewed until the pause, then the TTL runs out.
    rec.span("hold", "client 1", won, c1.paused_at + ttl / 1000.0,
             label="fence %d" % f1)
    try:
        rec.step("client 1", "its sidecar paused too (SIGSTOP)")
        c1.send("http", **write_op(tm1.url, doc, c1, body_of(c1, None),
                                   None))
        f2 = wait_carrier(rec, "client 2", tm2, "holding")
        rec.span("hold", "client 2", time.monotonic(),
                 time.monotonic() + ttl / 1000.0, label="fence %d" % f2)
        w2 = write(rec, c2, tm2.url, doc, None)
        hold_pause(c1, max(lab.pause_ms, ttl))
    finally:
        os.kill(tm1.proc.pid, signal.SIGCONT)
    c1.resume()
    r = c1.reply()
    st = record_write(rec, c1, r, None)
    final = lab.backend.body(doc)
    # The race: replica 2's sidecar won and replica 2 wrote while
    # replica 1's pod was paused.
    return finish(lab, rec, doc, one_round(
        ok(w2) and f2 > f1, stale_won(final),
        "the backend ends with %r; replica 1's late write: %d"
        % (final, st), "replica 2's write was answered %d" % w2["status"]))


SCENARIOS = [
    ("paused", "A client pauses past the TTL",
     "Client 1 takes a %(lock)d ms lock and is paused for %(pause)d ms "
     "(SIGSTOP: a GC pause, swap, a VM migration). Client 2 takes the "
     "lock and writes. Client 1 resumes and writes with its old token.",
     paused),
    ("delayed", "A write is delayed in the network",
     "Client 1 writes inside its lease, but a relay holds the request "
     "until the lease has ended and client 2 has written.", delayed),
    ("failover", "Redis fails over before it replicates",
     "The fence counter is incremented on the primary, which is killed "
     "before the replica has it; the promoted replica hands out the same "
     "token again. With fencing on, the same story on durable counters: "
     "tidemark's lock store and the Postgres lease row.", failover),
    ("redlock-clock", "One Redlock node's clock jumps",
     "Client 1 holds nodes 1-3 of 5. Node 3's clock steps ahead, the key "
     "expires there, and client 2 takes nodes 3-5: two majorities.",
     redlock_clock),
    ("redlock-pause", "A Redlock holder pauses",
     "Client 1 holds all 5 nodes and is paused past the TTL; client 2 "
     "takes all 5; client 1 resumes and writes.", redlock_pause),
    ("release", "A slow client releases after expiry",
     "Client 1's release arrives after its lease ended and client 2 took "
     "the lock. Without the token check it deletes client 2's lock and "
     "client 3 gets in.", slow_release),
    ("longjob", "A job runs longer than the TTL",
     "A job step outlasts the lease; client 2 takes the lock and writes. "
     "The job extends before its next write: without checking the "
     "answer it writes anyway; checking it, it stops.", long_job),
    ("advisory", "An advisory lock holder disconnects",
     "Without fencing: a Redis lock outside the database, the work "
     "committed on its own. With the seed's advice: the advisory lock in "
     "the same transaction as the work, and client 1 disconnects while "
     "paused: Postgres rolls its update back.", advisory),
    ("replicas", "Two replicas, no change to the app",
     "Two replicas of an application that sends no token, each with a "
     "sidecar holding a %(lock)d ms lease for it. Replica 1's whole pod "
     "(the application and its sidecar) pauses past the TTL; replica 2's "
     "sidecar wins the lease and replica 2 writes; replica 1 resumes and "
     "writes. Fencing off: the route is not bound to the lease; on: it "
     "is, and the sidecar carries the lease's fence.", replicas),
]
