"""etcd for real: the lock backend and the mark store against a 3-member
cluster whose leader is killed in the middle of the traffic (no fence
handed out twice, never two live holders, a waiter served after the
failover, every call in flight answered 201 or a clear 503); a cluster
without quorum (503 with Retry-After, nothing guessed); and the locks
applications already take with `etcdctl lock`, whose revision is their
Fencing-Token, with a holder paused (SIGSTOP) past its lease."""

import os
import signal
import subprocess
import time

import pytest

from common import free_port, slow, wait_until
from daemon import run_check, wait_ready
from scenarios import leader_killed_under_acquires
from upstream import assert_holders_in_turn
from wire import assert_problem
import servers
from servers import EtcdCluster
from lockapi import Admin, assert_lease, wait_locks_ready


@pytest.fixture
def cluster():
    c = EtcdCluster(3).start()
    try:
        yield c
    finally:
        c.destroy()


def locks_on(tidemark, endpoints, **locks):
    keys = {"backend": "etcd", "endpoints": endpoints, "timeout_ms": "3000"}
    keys.update(locks)
    tm = tidemark(config={"locks": keys})
    wait_locks_ready(tm, timeout=20.0)
    return tm


def test_leader_killed_in_the_middle_of_acquires(tidemark, upstream,
                                                 cluster):
    """8 clients take, write under and give back one lock (waiting in
    line) while the leader is killed. Every acquire is 201 or a 503 with
    Retry-After; fences are never handed out twice; each holder's lease
    starts after the previous holder began its release; writes under the
    lock are accepted and reach the upstream in fence order; the line
    keeps moving after the failover."""
    tm = locks_on(tidemark, cluster.endpoints)
    refused = []          # answers other than 201 to an acquire
    grants = leader_killed_under_acquires(
        tm, cluster, 10, 5000, lambda api, r: refused.append(r),
        lambda api, name, token: api.release(name, token))
    for r in refused:
        assert r.status == 503, r
        assert r.header("retry-after") == "1", r
    assert_holders_in_turn(grants, upstream)


def test_no_quorum_is_503_and_nothing_is_guessed(tidemark, cluster):
    """Two of three members gone: acquires, lookups and releases are 503
    with Retry-After; with quorum back the lease taken before is still
    there and the next fence is above it."""
    tm = locks_on(tidemark, cluster.endpoints, timeout_ms="1500")
    api = Admin(tm, timeout=30.0)
    held = assert_lease(api.acquire("documents/q", ttl_ms=60000),
                        "documents/q")
    leader = cluster.leader()
    other = [m for m in cluster.members if m is not leader][0]
    leader.kill9()
    other.kill9()
    for r in (api.acquire("documents/n", ttl_ms=60000),
              api.get("documents/q"),
              api.release("documents/q", held["token"])):
        doc = assert_problem(r, 503)
        assert r.header("retry-after") == "1", r
        assert doc["resource"] in ("documents/n", "documents/q")
    leader.start(timeout=60.0)
    other.start(timeout=60.0)
    wait_until(lambda: api.get("documents/q").status == 200, 30 * slow(),
               "the lease to be readable again")
    assert api.get("documents/q").json()["fence"] == held["fence"]
    assert api.release("documents/q", held["token"]).status == 204
    nxt = assert_lease(api.acquire("documents/q"), "documents/q")
    assert nxt["fence"] > held["fence"]


def test_mark_store_on_three_members_survives_the_leader(tidemark, cluster):
    """[store] endpoints names all three members: raises go on after the
    leader dies, and no mark accepted before is lost."""
    tm = tidemark(config={"store": {"type": "etcd", "path": None,
                                    "endpoints": cluster.endpoints,
                                    "timeout_ms": "3000"}})
    wait_until(lambda: tm.admin("GET", "/readyz")[0] == 200, 20 * slow(),
               "/readyz")
    for i in range(5):
        assert tm.put("m%d" % i, token=100 + i).status == 200
    cluster.leader().kill9()
    statuses = [tm.put("m%d" % i, token=200 + i).status for i in range(5)]
    # in flight at the kill: accepted, or a clear 503; never refused
    assert [st for st in statuses if st != 503] == \
        [200] * sum(1 for st in statuses if st != 503), statuses
    wait_until(lambda: tm.put("after", token=1).status == 200, 30 * slow(),
               "a raise after the failover")
    for i in range(5):
        r = tm.put("m%d" % i, token=99 + i)
        assert r.status == 409, (i, r.status)
    # a fresh sidecar reads the marks from the surviving members
    tm2 = tidemark(config={"store": {"type": "etcd", "path": None,
                                     "endpoints": cluster.endpoints}})
    wait_until(lambda: tm2.admin("GET", "/readyz")[0] == 200, 20 * slow(),
               "/readyz")
    for i in range(5):
        assert tm2.mark("documents/m%d" % i) >= 100 + i


# ------------------------------------------------ locks users already run


def etcdctl_lock(endpoints, name, script, ttl=2):
    """etcdctl lock NAME -- sh -c script: the script runs while the lock
    is held, with ETCD_LOCK_REV (the revision at which it got the lock)
    and ETCD_LOCK_KEY set."""
    return subprocess.Popen(
        ["etcdctl", "--endpoints", endpoints, "lock", "--ttl", str(ttl),
         name, "--", "sh", "-c", script],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, start_new_session=True,
        env=dict(os.environ, ETCDCTL_API="3"))


def put_script(tm, doc, tag):
    return ("echo rev=$ETCD_LOCK_REV; curl -s -o /dev/null -w "
            "'status=%%{http_code}\\n' -X PUT -H \"Fencing-Token: "
            "$ETCD_LOCK_REV\" -H 'X-Test-Id: %s' "
            "http://127.0.0.1:%d/v1/documents/%s; " % (tag, tm.port, doc))


def read_fields(proc, *keys, timeout=30.0):
    """key=value lines of proc's stdout until every key is seen."""
    out = {}
    deadline = time.monotonic() + timeout * slow()
    while not all(k in out for k in keys):
        assert time.monotonic() < deadline, out
        line = proc.stdout.readline().decode()
        assert line, (out, proc.stderr.read().decode()[-2000:])
        if "=" in line:
            k, v = line.strip().split("=", 1)
            out[k] = v
    return out


def stop_all(procs):
    """Kill the etcdctl lock processes still running, paused or not."""
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGCONT)
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def test_etcdctl_lock_revision_is_a_fencing_token(tidemark, upstream,
                                                  store_servers):
    """A holder takes `etcdctl lock`, writes with its revision, and is
    paused (SIGSTOP) past its lease; the next holder's revision writes;
    the paused one, resumed, is refused (409) and its write never
    reaches the upstream."""
    etcd = store_servers("etcd")
    tm = tidemark()
    a = etcdctl_lock(etcd.endpoints, "docs/x",
                     put_script(tm, "x", "a1") + "sleep 600")
    try:
        fa = read_fields(a, "rev", "status")
        assert fa["status"] == "200"
        os.killpg(a.pid, signal.SIGSTOP)    # no keepalive: the lease ends
        b = etcdctl_lock(etcd.endpoints, "docs/x", put_script(tm, "x", "b1"))
        fb = read_fields(b, "rev", "status")
        assert b.wait(30 * slow()) == 0
        assert fb["status"] == "200"
        assert int(fb["rev"]) > int(fa["rev"])
        os.killpg(a.pid, signal.SIGCONT)
        r = tm.put("x", token=fa["rev"], headers=[("X-Test-Id", "a2")])
        doc = assert_problem(r, 409)
        assert doc["high_water"] == int(fb["rev"])
    finally:
        stop_all([a])
    assert upstream.find("X-Test-Id", "a2") == []
    assert len(upstream.find("X-Test-Id", "b1")) == 1


def etcd_kvs(etcd, key, prefix=False):
    """What etcd holds at key, or under it with prefix (its kvs)."""
    import base64
    k = key.encode()
    body = {"key": base64.b64encode(k).decode()}
    if prefix:
        end = k[:-1] + bytes([k[-1] + 1])
        body["range_end"] = base64.b64encode(end).decode()
    return etcd.call("/v3/kv/range", body).get("kvs", [])


def create_revision(etcd, key):
    return int(etcd_kvs(etcd, key)[0]["create_revision"])


def etcd_watch(tidemark, endpoints, **keys):
    """tidemark with [watch docs] on the etcdctl locks under "locks/"."""
    section = {"endpoints": endpoints, "prefix": "locks/",
               "resource": "documents/{name}"}
    section.update(keys)
    return tidemark(config={"proxy": {"log_level": "debug"},
                            "watch docs": section})


def test_watch_fences_the_paused_holder_before_the_next_one_writes(
        tidemark, upstream, store_servers, tmp_path):
    """[watch docs] follows the etcdctl locks under "locks/": when a
    paused holder's lease ends and the next holder takes the lock, the
    resource's mark is raised to the new holder's revision before it has
    written anything, so the paused holder's write is refused (409), with
    no change to either application."""
    etcd = store_servers("etcd")
    tm = etcd_watch(tidemark, etcd.endpoints)
    go = tmp_path / "b-may-write"
    a = etcdctl_lock(etcd.endpoints, "locks/w",
                     put_script(tm, "w", "a1") + "sleep 600")
    b = None
    try:
        fa = read_fields(a, "rev", "status")
        assert fa["status"] == "200"
        wait_until(lambda: tm.mark("documents/w") == int(fa["rev"]),
                   10 * slow(), "the mark at A's revision")
        os.killpg(a.pid, signal.SIGSTOP)    # no keepalive: the lease ends
        b = etcdctl_lock(etcd.endpoints, "locks/w",
                         "echo key=$ETCD_LOCK_KEY; "
                         "while [ ! -e %s ]; do sleep 0.05; done; %s"
                         % (go, put_script(tm, "w", "b1")))
        created = create_revision(etcd, read_fields(b, "key")["key"])
        assert created > int(fa["rev"])
        # B holds the lock and has written nothing: the watch raised the
        # mark to B's key's create revision
        wait_until(lambda: tm.mark("documents/w") == created,
                   10 * slow(), "the mark at B's create revision")
        assert upstream.find("X-Test-Id", "b1") == []
        os.killpg(a.pid, signal.SIGCONT)
        r = tm.put("w", token=fa["rev"], headers=[("X-Test-Id", "a2")])
        doc = assert_problem(r, 409)
        assert doc["high_water"] == created
        go.write_text("")
        fb = read_fields(b, "rev", "status")
        assert fb["status"] == "200"
        assert int(fb["rev"]) >= created
        assert b.wait(30 * slow()) == 0
    finally:
        stop_all([p for p in (a, b) if p is not None])
    assert upstream.find("X-Test-Id", "a2") == []
    assert len(upstream.find("X-Test-Id", "b1")) == 1
    assert tm.log_lines("watch docs: documents/w: the holder changed")


def lock_keys(etcd, lock):
    """The create revisions of lock's keys (its holder's and waiters'),
    oldest first."""
    return sorted(int(kv["create_revision"])
                  for kv in etcd_kvs(etcd, lock + "/", prefix=True))


def queue_behind(etcd, endpoints, tm, procs, tmp_path):
    """H holds locks/q; A and B queue behind it, in that order, sending
    their ETCD_LOCK_REV. H releases, so A holds and writes (a1). B
    waits, once it holds, for the file it returns. Returns (A, B, A's
    ETCD_LOCK_REV, B's key's create revision, B's go file)."""
    h_done, b_go = tmp_path / "h-done", tmp_path / "b-may-write"
    h = etcdctl_lock(endpoints, "locks/q",
                     "echo rev=$ETCD_LOCK_REV; "
                     "while [ ! -e %s ]; do sleep 0.05; done" % h_done)
    procs.append(h)
    read_fields(h, "rev")
    a = etcdctl_lock(endpoints, "locks/q",
                     put_script(tm, "q", "a1") + "sleep 600")
    procs.append(a)
    wait_until(lambda: len(lock_keys(etcd, "locks/q")) == 2,
               10 * slow(), "A's key behind H's")
    b = etcdctl_lock(endpoints, "locks/q",
                     "echo rev=$ETCD_LOCK_REV; "
                     "while [ ! -e %s ]; do sleep 0.05; done; %s"
                     % (b_go, put_script(tm, "q", "b1")))
    procs.append(b)
    wait_until(lambda: len(lock_keys(etcd, "locks/q")) == 3,
               10 * slow(), "B's key behind A's")
    b_created = lock_keys(etcd, "locks/q")[2]
    h_done.write_text("")               # H releases: A holds
    fa = read_fields(a, "rev", "status")
    assert fa["status"] == "200"
    rev_a = int(fa["rev"])
    assert rev_a > b_created            # the case create revisions miss
    assert tm.mark("documents/q") == rev_a
    return a, b, rev_a, b_created, b_go


def a_refused_b_forwarded(tm, upstream, a, b, rev_a, rev_b, b_go):
    """B holds and has not written; the mark is past A's lock revision
    and not past B's: A's write is refused, then B's forwarded."""
    wait_until(lambda: tm.mark("documents/q") > rev_a, 10 * slow(),
               "the mark past A's lock revision")
    mark = tm.mark("documents/q")
    assert mark <= rev_b, (mark, rev_b)
    assert upstream.find("X-Test-Id", "b1") == []
    os.killpg(a.pid, signal.SIGCONT)
    r = tm.put("q", token=str(rev_a), headers=[("X-Test-Id", "a2")])
    doc = assert_problem(r, 409)
    assert doc["high_water"] == mark
    b_go.write_text("")
    assert read_fields(b, "status")["status"] == "200"
    assert b.wait(30 * slow()) == 0


def test_watch_with_lock_revisions_fences_a_holder_that_queued(
        tidemark, upstream, store_servers, tmp_path):
    """token = lock_revision: the holders send etcdctl lock's
    ETCD_LOCK_REV. A and B queue behind H, so A's ETCD_LOCK_REV is above
    B's key's create revision: a mark at B's create revision would let
    paused A through. When A's lease ends, the mark is raised to the
    revision at which B got the lock: above A's ETCD_LOCK_REV, not above
    B's. A's write is refused (409) before B has written; B's is
    forwarded."""
    etcd = store_servers("etcd")
    tm = etcd_watch(tidemark, etcd.endpoints, token="lock_revision")
    procs = []
    try:
        a, b, rev_a, _, b_go = queue_behind(etcd, etcd.endpoints, tm, procs,
                                            tmp_path)
        os.killpg(a.pid, signal.SIGSTOP)    # no keepalive: the lease ends
        rev_b = int(read_fields(b, "rev")["rev"])
        a_refused_b_forwarded(tm, upstream, a, b, rev_a, rev_b, b_go)
    finally:
        stop_all(procs)
    assert upstream.find("X-Test-Id", "a2") == []
    assert len(upstream.find("X-Test-Id", "b1")) == 1


def follower_first(cluster):
    """(a follower, the two others, every endpoint with the follower's
    first): the watch goes to the first endpoint, and losing a follower
    leaves the leader, and the leases it keeps, alone."""
    leader = cluster.leader()
    f = next(m for m in cluster.members if m is not leader)
    rest = [m for m in cluster.members if m is not f]
    return f, rest, ", ".join(m.endpoints for m in [f] + rest)


def test_watch_picks_up_where_its_member_was_lost(tidemark, upstream,
                                                 cluster, tmp_path):
    """The watch runs on member m0 (the first endpoint, a follower).
    While tidemark is paused, m0 is killed and the lock changes holder:
    A's lease ends and B takes the lock. When tidemark wakes, its watch
    is gone with m0: it watches again from the revision after the last
    event it had, on another member, sees A's key deleted, and fences A
    before B writes. A full read instead would find B and mark it at its
    key's create revision, below A's ETCD_LOCK_REV."""
    m0, (m1, m2), endpoints = follower_first(cluster)
    survivors = ",".join((m1.endpoints, m2.endpoints))
    tm = etcd_watch(tidemark, endpoints, token="lock_revision")
    procs = []
    try:
        a, b, rev_a, _, b_go = queue_behind(m1, survivors, tm, procs,
                                            tmp_path)
        os.kill(tm.proc.pid, signal.SIGSTOP)
        try:
            m0.kill9()
            os.killpg(a.pid, signal.SIGSTOP)    # the lease ends
            rev_b = int(read_fields(b, "rev")["rev"])
        finally:
            os.kill(tm.proc.pid, signal.SIGCONT)
        tm.wait_log("watch docs: the watch ended: watching again from "
                    "revision", timeout=10)
        a_refused_b_forwarded(tm, upstream, a, b, rev_a, rev_b, b_go)
    finally:
        stop_all(procs)
    assert tm.log_lines("reading every lock again") == []
    assert upstream.find("X-Test-Id", "a2") == []
    assert len(upstream.find("X-Test-Id", "b1")) == 1


def test_watch_reads_every_lock_when_its_revision_was_compacted(
        tidemark, upstream, cluster, tmp_path):
    """As above, but etcd compacts its history while tidemark sleeps, so
    the revision to watch from is gone: etcd ends the new watch, and
    tidemark reads every lock again and fences the holder it finds (B,
    at its key's create revision)."""
    m0, (m1, m2), endpoints = follower_first(cluster)
    survivors = ",".join((m1.endpoints, m2.endpoints))
    tm = etcd_watch(tidemark, endpoints)
    procs = []
    try:
        a_done = tmp_path / "a-done"
        a = etcdctl_lock(survivors, "locks/c",
                         "echo rev=$ETCD_LOCK_REV; "
                         "while [ ! -e %s ]; do sleep 0.05; done" % a_done)
        procs.append(a)
        rev_a = int(read_fields(a, "rev")["rev"])
        wait_until(lambda: tm.mark("documents/c") == rev_a, 10 * slow(),
                   "the mark at A's revision")
        a_done.write_text("")               # A releases
        assert a.wait(30 * slow()) == 0
        os.kill(tm.proc.pid, signal.SIGSTOP)
        try:
            m0.kill9()
            b = etcdctl_lock(survivors, "locks/c",
                             "echo key=$ETCD_LOCK_KEY; sleep 600")
            procs.append(b)
            created = create_revision(m1, read_fields(b, "key")["key"])
            # a write outside the prefix, then history up to it is gone:
            # the revision after B's key, where tidemark would resume
            r = m1.call("/v3/kv/put", {"key": "b3RoZXI=", "value": ""})
            now = int(r["header"]["revision"])
            assert now > created
            r = m1.call("/v3/kv/compaction", {"revision": str(now),
                                               "physical": True})
            assert r is not None and "header" in r, r
            for m in (m1, m2):          # where tidemark may resume
                wait_until(lambda: "compacted" in str(m.call(
                    "/v3/kv/range", {"key": "AA==",
                                     "revision": str(created)})),
                           10 * slow(), "the compaction on " + m.member)
        finally:
            os.kill(tm.proc.pid, signal.SIGCONT)
        tm.wait_log("watch docs: etcd ended the watch (compacted up to "
                    "revision %d): reading every lock again" % now,
                    timeout=10)
        wait_until(lambda: tm.mark("documents/c") == created, 10 * slow(),
                   "the mark at B's create revision")
    finally:
        stop_all(procs)


def watch_health(tm, name="docs"):
    """(the /readyz status, the watch's line of its body, its state and
    error count in /metrics)."""
    from test_metrics import scrape, value
    st, _, body = tm.admin("GET", "/readyz")
    line = [ln for ln in body.decode().splitlines()
            if ln.startswith("watch %s: " % name)]
    fams = scrape(tm)
    state = [s for s in ("starting", "ok", "failing")
             if value(fams, "tidemark_watch_state", watch=name,
                      state=s) == 1]
    errors = value(fams, "tidemark_watch_errors_total", watch=name)
    return st, line, state, errors


def wait_failing(tm, count):
    """The count-th warning that the watch cannot follow its locks, and
    what readiness and metrics say then."""
    tm.wait_log("level=warn watch docs: cannot follow its locks: ", timeout=15,
                count=count)
    wait_until(lambda: watch_health(tm)[0] == 503, 10 * slow(),
               "/readyz 503")
    st, line, state, errors = watch_health(tm)
    assert line and line[0].startswith("watch docs: failing since "), line
    assert state == ["failing"]
    return errors


def test_watch_tells_when_its_etcd_cannot_be_read(tidemark, upstream):
    """A [watch] on an etcd that is not there yet: one warning, /readyz
    503 naming the watch as failing, its state and errors in /metrics.
    etcd starts on that address: the watch says it follows its locks
    again, /readyz is 200, and a lock taken then raises the mark. etcd
    killed: failing again, with a warning."""
    etcd = servers.Etcd()
    tm = etcd_watch(tidemark, etcd.endpoints)
    procs = []
    try:
        assert wait_failing(tm, 1) >= 1
        # retries count, but are not logged one by one
        wait_until(lambda: watch_health(tm)[3] >= 3, 10 * slow(),
                   "three failed reads")
        assert len(tm.log_lines("watch docs: cannot follow its locks")) == 1
        etcd.start()
        tm.wait_log("level=warn watch docs: follows its locks again, after ",
                    timeout=15)
        wait_ready(tm, 200, timeout=10)
        st, line, state, _ = watch_health(tm)
        assert line[0].startswith("watch docs: ok since "), line
        assert state == ["ok"]
        a = etcdctl_lock(etcd.endpoints, "locks/up",
                         "echo key=$ETCD_LOCK_KEY; sleep 600")
        procs.append(a)
        created = create_revision(etcd, read_fields(a, "key")["key"])
        wait_until(lambda: tm.mark("documents/up") == created, 10 * slow(),
                   "the mark at the holder's create revision")
        stop_all(procs)
        errors = watch_health(tm)[3]
        etcd.kill9()
        assert wait_failing(tm, 2) > errors
    finally:
        stop_all(procs)
        etcd.destroy()


def test_a_silent_watch_stream_is_taken_for_broken(tidemark, upstream):
    """etcd sends a progress notice on a quiet watch every 500 ms here:
    the watch stays ok past its idle_timeout_ms (2 s). etcd paused
    (SIGSTOP: its connections stay open, nothing comes): after 2 s of
    silence the watch is failing, with a warning; resumed, it follows
    its locks again."""
    from test_metrics import scrape, value
    etcd = servers.Etcd(extra=["--experimental-watch-progress-notify-"
                               "interval", "500ms"])
    try:
        etcd.start()
        tm = etcd_watch(tidemark, etcd.endpoints, idle_timeout_ms="2000")
        wait_ready(tm, 200, timeout=10)
        quiet_from = time.monotonic()
        # 3 s with no change under the prefix: progress notices only
        wait_until(lambda: time.monotonic() - quiet_from > 3 and value(
            scrape(tm), "tidemark_watch_last_read_age_seconds",
            watch="docs") < 1, 10 * slow(), "a progress notice after 3 s")
        assert watch_health(tm)[2] == ["ok"]
        assert tm.log_lines("cannot follow its locks") == []
        etcd.pause()
        wait_failing(tm, 1)
        assert tm.log_lines("cannot follow its locks: \"the watch stream "
                            "was silent for 2000 ms\"")
        etcd.resume()
        tm.wait_log("level=warn watch docs: follows its locks again, after ",
                    timeout=15)
        wait_ready(tm, 200, timeout=10)
    finally:
        etcd.resume()
        etcd.destroy()


def test_a_watch_not_required_is_shown_not_counted(tidemark, upstream):
    """required = no: a failing watch is in /readyz's body, and tidemark
    is ready all the same."""
    tm = etcd_watch(tidemark, "http://127.0.0.1:%d" % free_port(),
                    required="no")
    tm.wait_log("level=warn watch docs: cannot follow its locks: ", timeout=15)
    st, line, state, _ = watch_health(tm)
    assert st == 200
    assert line[0].startswith("watch docs: failing since "), line
    assert line[0].endswith(" (not required)"), line
    assert state == ["failing"]


def test_watch_sections_are_checked(tmp_path, upstream):

    def check(text):
        ini = tmp_path / "w.ini"
        ini.write_text("[upstream default]\nurl = %s\n%s"
                       % (upstream.url, text))
        return run_check(ini)
    rc, lines = check("[watch a]\nprefix = locks/\n")
    assert rc == 1 and any("endpoints" in ln for ln in lines), lines
    rc, lines = check("[watch a]\nendpoints = http://e:1\nprefix =\n")
    assert rc == 1 and any("prefix: must not be empty" in ln
                           for ln in lines), lines
    rc, lines = check("[watch a]\nendpoints = http://e:1\nprefix = l/\n"
                      "resource = d/{other}\n")
    assert rc == 1 and any("no other braces" in ln for ln in lines), lines
    rc, lines = check("[watch a]\nbackend = consul\nendpoints = http://e:1\n"
                      "prefix = l/\n")
    assert rc == 1, lines
    rc, lines = check("[watch a]\nendpoints = http://e:1\nprefix = l/\n"
                      "resource = documents/{name}\n")
    assert rc == 0, lines
    rc, lines = check("[watch a]\nendpoints = http://e:1\nprefix = l/\n"
                      "token = lock_rev\n")
    assert rc == 1, lines
    assert any(":6: token: must be create_revision or lock_revision" in ln
               for ln in lines), lines
    rc, lines = check("[watch a]\nendpoints = http://e:1\nprefix = l/\n"
                      "token = lock_revision\n")
    assert rc == 0, lines
