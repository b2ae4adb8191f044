"""tidemark on a Redis Cluster (3 masters, 3 replicas, made by
`redis-cli --cluster create` in servers.py): keys go to their slot's
master, MOVED and ASK are followed during a slot migration, a master
killed under load is followed to its promoted replica, and what an
asynchronous failover can lose is shown exactly: a fence INCR and a
mark the old master acknowledged but never replicated. The conformance
suites (test_locks.py, test_store_conformance.py) also run on a cluster."""

import threading
import time
import uuid

import pytest

from common import slow, wait_until
from daemon import STORE_ROUTES, render_ini, run_check, wait_ready
from wire import assert_problem
from servers import RedisCluster, key_slot, resp
from lockapi import assert_lease, lock_api


@pytest.fixture
def cluster():
    """A fresh cluster for this test (failovers change who is master)."""
    c = RedisCluster()
    try:
        c.start()
        yield c
    finally:
        c.destroy()


def start(tidemark, c, store="cluster", name=None, **locks):
    """A tidemark whose lock backend is the cluster; its marks in the
    cluster too, or in lmdb (store="lmdb")."""
    cfg = dict(STORE_ROUTES)
    cfg["proxy"] = {"order_grace_ms": "0"}
    if store == "cluster":
        cfg["store"] = {"type": "redis", "url": c.url, "cluster": "yes",
                        "path": None, "timeout_ms": "1000"}
    locks_keys = {"backend": "redis", "url": c.url, "cluster": "yes",
                  "timeout_ms": "1000"}
    locks_keys.update(locks)
    cfg["locks"] = locks_keys
    tm = tidemark(config=cfg, name=name)
    wait_ready(tm, timeout=20)
    return tm


def docs_on(c, master, n, taken=()):
    """n document names whose resources ("documents/<doc>") live in the
    slots master serves."""
    slots = {s for a, b, p in c.slot_ranges(c.live()[0]) if p == master.port
             for s in range(a, b + 1)}
    out = []
    while len(out) < n:
        d = uuid.uuid4().hex[:10]
        if d not in taken and key_slot("fence:{documents/%s}" % d) in slots:
            out.append(d)
    return out


def doc_in_slot(slot):
    while True:
        d = uuid.uuid4().hex[:10]
        if key_slot("documents/" + d) == slot:
            return d


def raw_get(node, key, asking=False):
    cmds = ([("ASKING",)] if asking else []) + [("GET", key)]
    return resp(node.port, *cmds)[-1]


def wait_promoted(c, replica, timeout=60.0):
    """The replica serves its old master's slots, and every live node
    agrees on a map whose masters run."""
    wait_until(lambda: replica.info("replication").get("role") == "master"
               and c.healthy(), timeout * slow(), "replica promoted")


def acquire_when_served(api, name, timeout=30.0):
    """Poll an acquire until it is not 503: a sidecar's own connections
    follow the new master on their own schedule (the map is read again at
    most every 100 ms, a dropped connection comes back with backoff)."""
    got = []

    def served():
        r = api.acquire(name)
        got.append(r)
        return r.status != 503
    wait_until(served, timeout * slow(), "acquire of %s served" % name,
               interval=0.1)
    return got[-1]


# ------------------------------------------------------------- routing


def test_keys_live_on_their_slots_master(tidemark, cluster):
    tm = start(tidemark, cluster)
    api = lock_api(tm)
    docs = [uuid.uuid4().hex[:10] for _ in range(30)]
    for i, d in enumerate(docs):
        assert tm.put(d, token=i + 1).status == 200
        assert_lease(api.acquire("locks/" + d), "locks/" + d, fence=1)
    api.close()
    used = set()
    for i, d in enumerate(docs):
        fence = "fence:{documents/%s}" % d
        m = cluster.master_of(key_slot(fence))
        used.add(m.port)
        # Asked directly, with no redirection: the key is on that master.
        assert raw_get(m, fence) == str(i + 1).encode()
        m = cluster.master_of(key_slot("locks/" + d))
        used.add(m.port)
        assert raw_get(m, "lock:{locks/%s}" % d) == b"1"
        assert raw_get(m, "fence:{locks/%s}" % d) == b"1"
    assert len(used) == 3


def test_moved_and_ask_are_followed(tidemark, cluster):
    """A slot migrates from S to D while tidemark runs: a key not on S
    yet is answered by D after ASK (ASKING), a key still on S by S, a key
    moved already by D (ASK again); once the slot is D's, MOVED sends
    everything there. The answer always comes from the node that holds
    the key, never from a guess: a fresh sidecar reads D's mark."""
    tm = start(tidemark, cluster)
    x = uuid.uuid4().hex[:10]
    slot = key_slot("documents/" + x)
    src = cluster.master_of(slot)
    dst = next(m for m in cluster.masters() if m is not src)
    y, z = doc_in_slot(slot), doc_in_slot(slot)
    assert tm.put(x, token=5).status == 200
    sid, did = src.node_id(), dst.node_id()
    assert dst.call("CLUSTER", "SETSLOT", slot, "IMPORTING", sid) == "OK"
    assert src.call("CLUSTER", "SETSLOT", slot, "MIGRATING", did) == "OK"

    # New keys: ASK to dst.
    assert tm.put(y, token=3).status == 200
    assert raw_get(dst, "fence:{documents/%s}" % y, asking=True) == b"3"
    assert str(raw_get(src, "fence:{documents/%s}" % y)).startswith("ASK ")
    # A new lock's two keys, in a slot being migrated: Redis answers
    # TRYAGAIN to a script on keys it does not have yet; tidemark tries
    # again a few times, then answers 503: no lease is half taken.
    api = lock_api(tm)
    assert_problem(api.acquire("documents/" + z), 503)
    assert raw_get(dst, "fence:{documents/%s}" % z, asking=True) is None
    tm.wait_log("TRYAGAIN")
    # A key still on src: src answers.
    assert tm.put(x, token=6).status == 200
    assert raw_get(src, "fence:{documents/%s}" % x) == b"6"

    # x's key moves: ASK again; a sidecar with no cache reads dst's 6.
    assert src.call("MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "KEYS",
                    "fence:{documents/%s}" % x) == "OK"
    fresh = start(tidemark, cluster, name="fresh")
    assert assert_problem(fresh.put(x, token=5), 409)["high_water"] == 6

    # The slot is dst's: MOVED, and the map follows.
    for m in cluster.masters():
        assert m.call("CLUSTER", "SETSLOT", slot, "NODE", did) == "OK"
    assert tm.put(x, token=7).status == 200
    assert raw_get(dst, "fence:{documents/%s}" % x) == b"7"
    assert fresh.put(y, token=4).status == 200
    assert raw_get(dst, "fence:{documents/%s}" % y) == b"4"
    assert_lease(api.acquire("documents/" + z), "documents/" + z, fence=1)
    assert raw_get(dst, "lock:{documents/%s}" % z) == b"1"
    r = api.release("documents/" + z, "1")
    assert r.status == 204, r
    api.close()
    assert "cluster map" in tm.log()


# ------------------------------------------------------------ failover


def test_master_killed_under_load(tidemark, cluster):
    """Lock pairs and fenced writes spread over every master; one master
    is killed with -9. tidemark follows the promoted replica without a
    restart; while no master serves a slot its calls are 503 with
    Retry-After, never another error and never a wrong answer. With the
    marks in a durable store (lmdb, eager fencing), no fence is handed
    out twice, whatever Redis loses; and the sidecar that accepted a
    write refuses every lower token afterwards."""
    locks_tm = start(tidemark, cluster, store="lmdb", name="locks")
    marks_tm = start(tidemark, cluster, name="marks")
    victim = cluster.masters()[0]
    replica = cluster.replica_of(victim)
    on_victim = docs_on(cluster, victim, 5)
    # Lock names and written documents apart: a lock's counter is the
    # mark of its resource in the cluster.
    names = on_victim[:3] + [uuid.uuid4().hex[:10] for _ in range(6)]
    docs = on_victim[3:] + [uuid.uuid4().hex[:10] for _ in range(2)]
    stop = threading.Event()
    promoted = threading.Event()
    fences = {n: [] for n in names}
    after = {n: 0 for n in names + docs}  # successes after the promotion
    accepted = {}
    errors = []

    def check_503(r, what):
        if r.status != 503 or r.header("retry-after") is None:
            errors.append("%s: %r" % (what, r))

    def locker(my):
        api = lock_api(locks_tm)
        try:
            while not stop.is_set():
                for n in my:
                    name = "documents/" + n
                    r = api.acquire(name, ttl_ms=2000)
                    if r.status == 201:
                        f = r.json()["fence"]
                        fences[n].append(f)
                        if promoted.is_set():
                            after[n] += 1
                        r = api.release(name, str(f))
                        # 409: the failover lost the lease: nothing to free
                        if r.status not in (204, 409):
                            check_503(r, "release %s" % name)
                    elif r.status != 423:  # a lease whose release failed
                        check_503(r, "acquire %s" % name)
        finally:
            api.close()

    def writer(n):
        t = 0
        while not stop.is_set():
            t += 1
            r = marks_tm.put(n, token=t)
            if r.status == 200:
                accepted[n] = t
                if promoted.is_set():
                    after[n] += 1
            else:
                check_503(r, "put %s %d" % (n, t))

    threads = [threading.Thread(target=locker, args=(names[i::3],))
               for i in range(3)]
    threads += [threading.Thread(target=writer, args=(n,)) for n in docs]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: all(len(fences[n]) >= 3 for n in names),
                   30 * slow(), "load before the kill")
        victim.kill9()
        wait_promoted(cluster, replica)
        promoted.set()
        wait_until(lambda: all(after[n] >= 3 for n in names + docs),
                   60 * slow(), "every name served after the failover")
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == []
    for n in names:
        seq = fences[n]
        assert seq == sorted(seq) and len(set(seq)) == len(seq), (n, seq)
    for n, t in accepted.items():
        r = marks_tm.put(n, token=t - 1)
        assert assert_problem(r, 409)["high_water"] >= t
    assert "cluster map" in locks_tm.log()


def test_failover_loses_what_was_not_replicated(tidemark, cluster):
    """Redis replicates asynchronously: the seed's "a failover can lose a
    lock and repeat a token". The link from a master to its replica is
    cut, a lock is taken and a mark raised there (both acknowledged),
    and the master dies; the promoted replica never saw them.

    - Marks in the cluster: a sidecar with no cached mark (another one,
      or any after a restart) accepts the stale holder's write and hands
      out the same fence again. The sidecar that saw the higher token
      still refuses the write and hands out a higher fence (its cache),
      while it runs.
    - Marks in a durable store (lmdb, eager fencing): the acquire's floor
      is the mark, so the next fence is above every one handed out."""
    in_cluster = start(tidemark, cluster, name="in_cluster")
    durable = start(tidemark, cluster, store="lmdb", name="durable")
    master = cluster.masters()[0]
    replica = cluster.replica_of(master)
    a, b = docs_on(cluster, master, 2)
    la, lb = "documents/" + a, "documents/" + b
    api_a, api_b = lock_api(in_cluster), lock_api(durable)
    for api, n in ((api_a, la), (api_b, lb)):
        assert_lease(api.acquire(n), n, fence=1)
        assert api.release(n, "1").status == 204
    cluster.wait_synced(master)

    replica.pause()
    try:
        assert master.call("CLIENT", "KILL", "TYPE", "replica") >= 1
        # Acknowledged by the master alone.
        assert_lease(api_a.acquire(la), la, fence=2)
        assert_lease(api_b.acquire(lb), lb, fence=2)
        assert in_cluster.put(a, token=2).status == 200
        master.kill9()
    finally:
        replica.resume()
    wait_promoted(cluster, replica)
    assert replica.call("GET", "fence:{%s}" % la) == b"1"

    # The stale holder (fence 1) writes: a sidecar with no cache accepts.
    late = start(tidemark, cluster, name="late")
    assert late.put(a, token=1).status == 200
    # The sidecar that accepted 2 refuses it from its cache.
    wait_until(lambda: in_cluster.put(a, token=1).status == 409,
               30 * slow(), "in_cluster answers again")
    # The fence 2 is handed out a second time, by a sidecar that did not
    # see it (another sidecar, or this one after a restart).
    api_late = lock_api(late)
    assert_lease(api_late.acquire(la), la, fence=2)
    assert api_late.release(la, "2").status == 204
    api_late.close()
    # The sidecar that handed it out remembers the mark 2 while it runs.
    assert_lease(acquire_when_served(api_a, la), la, fence=3)
    # With durable marks: above every fence handed out.
    assert_lease(acquire_when_served(api_b, lb), lb, fence=3)
    api_a.close()
    api_b.close()


# -------------------------------------------------------------- config


def test_check_cluster_urls(tmp_path, upstream):
    def check(section, keys):
        sections = {"proxy": {"listen": "127.0.0.1:1"}, section: keys}
        if section == "locks":
            sections["store"] = {"path": str(tmp_path / "m.lmdb")}
        p = tmp_path / "t.ini"
        p.write_text(render_ini(sections))
        return run_check(p)

    two = "redis://127.0.0.1:7000, redis://127.0.0.1:7001"
    rc, err = check("store", {"type": "redis", "url": two})
    assert rc == 1
    assert len(err) == 1 and "set cluster = yes" in err[0], err
    assert err[0].startswith(str(tmp_path / "t.ini") + ":"), err
    rc, err = check("locks", {"backend": "redis", "url": two})
    assert rc == 1 and "set cluster = yes" in err[0], err
    rc, err = check("store", {"type": "redis", "cluster": "yes",
                              "url": "redis://127.0.0.1:7000/2"})
    assert rc == 1 and "only database 0" in err[0], err
    rc, err = check("store", {"type": "redis", "cluster": "yes", "url": two,
                              "wait_replicas": "1"})
    assert rc == 1 and "wait_replicas" in err[0], err
    rc, err = check("store", {"type": "redis", "cluster": "yes",
                              "url": "redis://127.0.0.1:7000,"})
    assert rc == 1 and "must be redis://host:port" in err[0], err
    rc, err = check("locks", {"backend": "redis", "cluster": "yes",
                              "url": two})
    assert rc == 0, err
