"""The seed's failure table, one scenario a function pair: each runs
once without fencing (clients write to the backend directly) and once
with it (through tidemark, or with the lock the seed recommends), and
says whether the harmful outcome happened. The lab checks that it did
without fencing (else the scenario is broken) and did not with it."""

import json
import os
import signal
import subprocess
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
    if "error" in r or isinstance(r.get("reply"), dict):
        raise Broken("redis acquire failed: %r" % r)
    tok = r["reply"]
    if tok is None:
        return None
    rec.step(c.name, "acquire: token %d" % tok, r["t1"])
    rec.span("hold", c.name, r["t1"], r["t1"] + ttl / 1000.0,
             label="token %d" % tok)
    return tok


def poll_acquire(rec, c, port, doc, ttl, timeout=10.0):
    """Try the acquire until it succeeds (the first holder's lease ends)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tok = redis_acquire(rec, c, port, doc, ttl)
        if tok is not None:
            return tok
        time.sleep(0.005)
    raise Broken("%s never got the lock" % c.name)


def tm_acquire(rec, c, tm, doc, ttl, wait_ms=0):
    """tidemark's lock service: (status, fence)."""
    r = c.call("http", method="POST", url="%s/v1/locks/documents/%s"
               "?ttl_ms=%d&wait_ms=%d" % (tm.admin, doc, ttl, wait_ms))
    if r["status"] != 201:
        rec.step(c.name, "acquire: %d (busy)" % r["status"], r["t1"])
        return r["status"], None
    fence = json.loads(r["body"])["fence"]
    rec.step(c.name, "acquire: token %d" % fence, r["t1"])
    rec.span("hold", c.name, r["t1"], r["t1"] + ttl / 1000.0,
             label="token %d" % fence)
    return 201, fence


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
        rec.step(c.name, "write sent (token %s)" % token, sent)
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


def finish(lab, rec, doc, harm, verdict, **extra):
    # Time 0 is 20 ms before the first event (not the start of the
    # processes the run needed).
    shift = min([e["t"] for e in rec.events] or [0]) - 20
    for e in rec.events:
        e["t"] = round(e["t"] - shift, 1)
        if "t1" in e:
            e["t1"] = round(e["t1"] - shift, 1)
    out = {"events": sorted(rec.events, key=lambda e: e["t"]),
           "harm": harm, "verdict": verdict,
           "final": lab.backend.body(doc)}
    out.update(extra)
    lab.end_run()
    return out


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
    t1 = redis_acquire(rec, c1, port, doc, lab.lock_ms)
    c1.pause()
    c1.send("http", **write_op(base, doc, c1, "client 1, token %d" % t1,
                               t1))
    t2 = poll_acquire(rec, c2, port, doc, lab.lock_ms)
    write(rec, c2, base, doc, t2)
    hold_pause(c1, lab.pause_ms)
    c1.resume()
    r = c1.reply()
    st = record_write(rec, c1, r, t1)
    final = lab.backend.body(doc)
    harm = final is not None and final.startswith("client 1")
    return finish(lab, rec, doc, harm,
                  "the backend ends with %r; client 1's late write: %d"
                  % (final, st))


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
        t1 = redis_acquire(rec, c1, port, doc, lab.lock_ms)
        relay_base = "http://127.0.0.1:%d" % relay.port
        c1.send("http", **write_op(relay_base, doc, c1,
                                   "client 1, token %d" % t1, t1))
        relay.held.wait(10)
        rec.step(c1.name, "write sent (token %d); held in the network"
                 % t1, relay.held_at)
        t2 = poll_acquire(rec, c2, port, doc, lab.lock_ms)
        write(rec, c2, target.url, doc, t2)
        relay.release()
        r = c1.reply()
        rec.span("delay", c1.name, relay.held_at, relay.passed_at)
        st = record_write(rec, c1, r, t1)
    finally:
        relay.stop()
    final = lab.backend.body(doc)
    harm = final is not None and final.startswith("client 1")
    return finish(lab, rec, doc, harm,
                  "the backend ends with %r; the delayed write: %d"
                  % (final, st))


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
    t1 = redis_acquire(rec, c1, primary.port, doc, lab.lock_ms)
    write(rec, c1, lab.backend.url, doc, t1)
    c1.call("redis", port=primary.port,
            args=["EVAL", h.RELEASE, 1, "lock:{%s}" % doc, t1])
    rec.step(c1.name, "release")
    wait_until(lambda: h.redis(replica.port, "GET", "fence:{%s}" % doc)
               == str(t1) and h.redis(replica.port, "EXISTS",
                                      "lock:{%s}" % doc) == 0,
               10, "the replica to have fence 1 and the release")
    rec.step("redis", "the replica has fence %d" % t1)
    link.cut.set()
    rec.step("redis", "replication lags (the link to the replica is cut)")
    t2 = redis_acquire(rec, c2, primary.port, doc, lab.lock_ms * 10)
    write(rec, c2, lab.backend.url, doc, t2)
    primary.kill9()
    rec.add("crash", "redis", text="primary killed (kill -9) before the "
            "replica had fence %d" % t2)
    h.redis(replica.port, "REPLICAOF", "NO", "ONE")
    rec.step("redis", "replica promoted (REPLICAOF NO ONE)")
    t3 = redis_acquire(rec, c3, replica.port, doc, lab.lock_ms)
    write(rec, c3, lab.backend.url, doc, t3)
    harm = t3 == t2
    return finish(lab, rec, doc, harm,
                  "tokens issued: %d, %d, %d%s" % (
                      t1, t2, t3, " (token %d twice)" % t2 if harm else ""),
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
                lane = "tidemark" if kind == "tm" else "postgres"
                if kind == "tm":
                    tm.kill9()
                    rec.add("crash", lane, text="tidemark killed (kill -9)")
                    tm.start()
                    rec.step(lane, "tidemark restarted")
                else:
                    pg.stop(signal.SIGQUIT)
                    rec.add("crash", lane, text="Postgres crashed "
                            "(immediate shutdown)")
                    pg.start()
                    rec.step(lane, "Postgres restarted (WAL recovery)")
            if kind == "tm":
                _, tok = tm_acquire(rec, c, tm, doc, ttl, wait_ms=10000)
            else:
                tok = lease_acquire(rec, c, pg, doc, ttl)
            tokens.append(tok)
            write(rec, c, tm.url, doc, tok)
            if i == 1:
                if kind == "tm":
                    c.call("http", method="DELETE", url="%s/v1/locks/"
                           "documents/%s?token=%d" % (tm.admin, doc, tok))
                else:
                    pg.sql("UPDATE leases SET expires_at = '-infinity' "
                           "WHERE name = '%s' AND fence = %d" % (doc, tok))
                rec.step(c.name, "release")
        harm = len(set(tokens)) != len(tokens)
        out = finish(lab, rec, doc, harm, "tokens issued: %s" % ", ".join(
            str(t) for t in tokens), tokens=tokens)
        out["name"] = name
        runs.append(out)
    return runs


LEASE_SQL = ("INSERT INTO leases (name, owner, fence, expires_at) "
             "VALUES ('%(n)s', '%(o)s', 1, now() + make_interval(secs => "
             "%(s)s)) ON CONFLICT (name) DO UPDATE SET owner = "
             "EXCLUDED.owner, fence = leases.fence + 1, expires_at = "
             "EXCLUDED.expires_at WHERE leases.expires_at < now() "
             "RETURNING fence;")


def lease_acquire(rec, c, pg, doc, ttl, timeout=10.0):
    """The seed's lease row, tried until free: the fence."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = pg.sql(LEASE_SQL % {"n": doc, "o": c.name,
                                  "s": ttl / 1000.0}).strip()
        if out:
            now = time.monotonic()
            tok = int(out.split()[0])
            rec.step(c.name, "lease row: token %d" % tok, now)
            rec.span("hold", c.name, now, now + ttl / 1000.0,
                     label="token %d" % tok)
            return tok
        time.sleep(0.01)
    raise Broken("%s never got the lease row" % c.name)


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


def fence_token(lab, tm, c, doc):
    """Redlock has no token: with fencing, a holder takes one from a
    durable counter (tidemark's lock service: take and give back)."""
    r = c.call("http", method="POST", url="%s/v1/locks/fence/%s?ttl_ms=1"
               "&wait_ms=2000" % (tm.admin, doc))
    tok = json.loads(r["body"])["fence"]
    c.call("http", method="DELETE", url="%s/v1/locks/fence/%s?token=%d"
           % (tm.admin, doc, tok))
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
            h.redis(port, "EVAL", h.RELEASE, 1, key, "c1")
    return r


def redlock_clock(lab, fenced):
    return _redlock(lab, fenced, "clock")


def redlock_pause(lab, fenced):
    return _redlock(lab, fenced, "pause")


def _redlock(lab, fenced, how):
    if getattr(lab, "_nodes", None) is None:
        lab._nodes = Nodes(lab)
    nodes = lab._nodes
    tm = lab.tidemark() if fenced else None
    base = tm.url if fenced else lab.backend.url
    two = 0
    outs = []
    for rnd in range(lab.rounds):
        rec = h.Recorder()
        lab.backend.reset(rec)
        doc = lab.doc("redlock-" + how)
        c1, c2 = lab.client(rec, "client 1"), lab.client(rec, "client 2")
        key = "redlock:" + doc
        if how == "clock":
            # Client 1 reaches nodes 1-3 only (4 and 5 are cut off from
            # it: its connections are refused); a TTL long enough that
            # its lease is valid by its own clock throughout.
            ttl = lab.lock_ms * 20
            dead = [h.free_port(), h.free_port()]
            r1 = first_majority(c1, nodes.ports[:3] + dead, key, ttl)
            redlock_hold(rec, c1, r1, ttl)
            t1 = fence_token(lab, tm, c1, doc) if fenced else None
            nodes.step_clock(ttl * 100)
            rec.add("crash", "redis", text="node 3's clock jumps %d s "
                    "ahead" % (ttl * 100 // 1000))
            r2 = c2.call("redlock", ports=nodes.ports, key=key, value="c2",
                         ttl=ttl)
            redlock_hold(rec, c2, r2, ttl)
            t2 = fence_token(lab, tm, c2, doc) if fenced else None
            write(rec, c2, base, doc, t2)
            # Client 1, still inside its validity by its own clock.
            still = time.monotonic() < r1["t0"] + r1["validity_ms"] / 1e3
            r = c1.call("http", **write_op(base, doc, c1,
                                            body_of(c1, t1), t1))
            record_write(rec, c1, r, t1, r["t0"])
            both = r1["majority"] and r2["majority"] and still
        else:
            ttl = lab.lock_ms
            r1 = first_majority(c1, nodes.ports, key, ttl)
            redlock_hold(rec, c1, r1, ttl)
            t1 = fence_token(lab, tm, c1, doc) if fenced else None
            c1.pause()
            c1.send("http", **write_op(base, doc, c1,
                                       body_of(c1, t1), t1))
            deadline = time.monotonic() + 10
            while True:
                r2 = c2.call("redlock", ports=nodes.ports, key=key,
                             value="c2", ttl=ttl)
                if r2["majority"] or time.monotonic() > deadline:
                    break
                time.sleep(0.005)
            redlock_hold(rec, c2, r2, ttl)
            t2 = fence_token(lab, tm, c2, doc) if fenced else None
            write(rec, c2, base, doc, t2)
            hold_pause(c1, lab.pause_ms)
            c1.resume()
            r = c1.reply()
            record_write(rec, c1, r, t1)
            # Client 1 believed it held a majority when it wrote: it has
            # no way to know it was paused.
            both = r1["majority"] and r2["majority"]
        two += 1 if both else 0
        final = lab.backend.body(doc)
        stale = final is not None and final.startswith("client 1")
        outs.append(finish(lab, rec, doc, stale,
                           "the backend ends with %r" % final))
    if two != lab.rounds:
        raise Broken("two majority holders in only %d of %d rounds"
                     % (two, lab.rounds))
    first = outs[0]
    stale = sum(1 for o in outs if o["harm"])
    first["harm"] = stale == len(outs) if not fenced else stale > 0
    first["verdict"] = ("two majority holders in %d of %d rounds; the "
                        "stale write applied in %d; first round: %s"
                        % (two, lab.rounds, stale, first["verdict"]))
    first["two_holders"] = two
    first["rounds"] = lab.rounds
    return first


# --------------------------------------------------------- slow release


def slow_release(lab, fenced):
    rec = h.Recorder()
    lab.backend.reset(rec)
    doc = lab.doc("release")
    c1, c2, c3 = (lab.client(rec, "client %d" % i) for i in (1, 2, 3))
    long_ttl = lab.lock_ms * 10
    if not fenced:
        port = lab.redis().port
        redis_acquire(rec, c1, port, doc, lab.lock_ms)
        c1.pause()
        c1.send("redis", port=port, args=["DEL", "lock:{%s}" % doc])
        poll_acquire(rec, c2, port, doc, long_ttl)
        hold_pause(c1, lab.pause_ms)
        c1.resume()
        r = c1.reply()
        rec.step(c1.name, "release: DEL deleted %d key" % r["reply"],
                 r["t1"])
        t3 = redis_acquire(rec, c3, port, doc, lab.lock_ms)
        harm = t3 is not None
        if t3 is None:
            rec.add("refused", c3.name, text="acquire: busy")
        verdict = ("client 3 got the lock (token %s) while client 2's "
                   "lease was live" % t3 if harm else "client 3: busy")
    else:
        tm = lab.tidemark()
        _, f1 = tm_acquire(rec, c1, tm, doc, lab.lock_ms)
        c1.pause()
        c1.send("http", method="DELETE", url="%s/v1/locks/documents/%s"
                "?token=%d" % (tm.admin, doc, f1))
        tm_acquire(rec, c2, tm, doc, long_ttl, wait_ms=10000)
        hold_pause(c1, lab.pause_ms)
        c1.resume()
        r = c1.reply()
        if r["status"] == 204:
            rec.step(c1.name, "release: 204", r["t1"])
        else:
            rec.add("refused", c1.name, r["t1"], status=r["status"],
                    text="release refused: %d (deletes nothing)"
                    % r["status"])
        st, f3 = tm_acquire(rec, c3, tm, doc, lab.lock_ms)
        if f3 is None:
            rec.add("refused", c3.name, status=st, text="acquire: %d" % st)
        harm = f3 is not None
        verdict = ("client 1's release: %d; client 3's acquire: %d"
                   % (r["status"], st))
    return finish(lab, rec, doc, harm, verdict)


# ---------------------------------------------------- job longer than TTL


def long_job(lab, fenced):
    rec = h.Recorder()
    lab.backend.reset(rec)
    doc = lab.doc("longjob")
    c1, c2 = lab.client(rec, "client 1"), lab.client(rec, "client 2")
    if not fenced:
        port = lab.redis().port
        base = lab.backend.url
        t1 = redis_acquire(rec, c1, port, doc, lab.lock_ms)
    else:
        tm = lab.tidemark()
        base = tm.url
        _, t1 = tm_acquire(rec, c1, tm, doc, lab.lock_ms)
    write(rec, c1, base, doc, t1)
    c1.send("work", ms=lab.pause_ms)
    rec.step(c1.name, "a job step of %d ms" % lab.pause_ms)
    if not fenced:
        t2 = poll_acquire(rec, c2, port, doc, lab.lock_ms * 10)
    else:
        _, t2 = tm_acquire(rec, c2, tm, doc, lab.lock_ms * 10,
                           wait_ms=10000)
    write(rec, c2, base, doc, t2)
    c1.reply()
    if not fenced:
        r = c1.call("redis", port=port, args=[
            "EVAL", h.EXTEND, 1, "lock:{%s}" % doc, t1, lab.lock_ms])
        rec.step(c1.name, "extend: %s (not checked)" % r["reply"], r["t1"])
        r = write(rec, c1, base, doc, t1)
    else:
        r = c1.call("http", method="PATCH", url="%s/v1/locks/documents/%s"
                    "?token=%d&ttl_ms=%d" % (tm.admin, doc, t1,
                                            lab.lock_ms))
        if r["status"] == 200:
            write(rec, c1, base, doc, t1)
        else:
            rec.add("refused", c1.name, r["t1"], status=r["status"],
                    text="extend: %d: the lock is lost, stop" % r["status"])
    final = lab.backend.body(doc)
    harm = final is not None and final.startswith("client 1")
    return finish(lab, rec, doc, harm, "the backend ends with %r" % final)


# ---------------------------------------------- advisory lock, same tx


def advisory(lab, fenced):
    rec = h.Recorder()
    lab.backend.reset(rec)
    doc = lab.doc("advisory")
    pg = lab.postgres()
    pg.sql("INSERT INTO documents (name, body) VALUES ('%s', 'v0')" % doc)
    c1, c2 = lab.client(rec, "client 1"), lab.client(rec, "client 2")
    dsn = pg.dsn
    upd = "UPDATE documents SET body = '%%s' WHERE name = '%s';" % doc

    def applied(c, r, what):
        if r.get("out", "").strip() == "UPDATE 1" or "COMMIT" in \
                r.get("out", ""):
            rec.add("write", "postgres", r["t1"], client=c.name,
                    body=what)

    for c in (c1, c2):
        c.call("sql_open", dsn=dsn)
    if not fenced:
        # A Redis lock outside the database; the work commits on its own.
        port = lab.redis().port
        t1 = redis_acquire(rec, c1, port, doc, lab.lock_ms)
        c1.pause()
        c1.send("sql", q=upd % ("client 1, token %d" % t1))
        t2 = poll_acquire(rec, c2, port, doc, lab.lock_ms)
        r = c2.call("sql", q=upd % ("client 2, token %d" % t2))
        applied(c2, r, "client 2")
        hold_pause(c1, lab.pause_ms)
        c1.resume()
        r = c1.reply()
        applied(c1, r, "client 1")
    else:
        lock = "SELECT pg_try_advisory_xact_lock(hashtext('%s'));" % doc
        c1.call("sql", q="BEGIN;")
        r = c1.call("sql", q=lock)
        rec.step(c1.name, "BEGIN; advisory lock: %s" % r["out"].strip(),
                 r["t1"])
        held_from = r["t1"]
        r = c1.call("sql", q=upd % "client 1")
        rec.step(c1.name, "UPDATE (uncommitted)", r["t1"])
        c1.pause()
        c2.call("sql", q="BEGIN;")
        r = c2.call("sql", q=lock)
        rec.step(c2.name, "BEGIN; advisory lock: %s (busy)"
                 % r["out"].strip(), r["t1"])
        c2.call("sql", q="ROLLBACK;")
        hold_pause(c1, lab.pause_ms)
        c1.kill()
        now = time.monotonic()
        rec.span("pause", c1.name, c1.paused_at, now)
        rec.span("hold", c1.name, held_from, now, label="advisory lock")
        rec.add("refused", c1.name, now, text="disconnected: Postgres "
                "rolls its transaction back")
        deadline = time.monotonic() + 10
        while True:
            c2.call("sql", q="BEGIN;")
            r = c2.call("sql", q=lock)
            if r["out"].strip() == "t" or time.monotonic() > deadline:
                break
            c2.call("sql", q="ROLLBACK;")
            time.sleep(0.005)
        rec.step(c2.name, "BEGIN; advisory lock: t", r["t1"])
        held2 = r["t1"]
        c2.call("sql", q=upd % "client 2")
        r = c2.call("sql", q="COMMIT;")
        rec.span("hold", c2.name, held2, r["t1"], label="advisory lock")
        applied(c2, r, "client 2")
    final = pg.sql("SELECT body FROM documents WHERE name = '%s'"
                   % doc).strip()
    harm = final.startswith("client 1")
    out = finish(lab, rec, doc, harm, "the row ends with %r" % final)
    out["final"] = final
    return out


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
]
