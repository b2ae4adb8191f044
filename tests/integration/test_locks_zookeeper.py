"""ZooKeeper, beyond the conformance suite (test_locks.py): the zookeeper
lock backend on a 3-server ensemble whose leader is killed in the middle
of acquires, and locks applications already take with kazoo, fenced
through tidemark with the lock node's czxid as the token."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from common import slow, wait_until
from scenarios import KAZOO_HOLDER, leader_killed_under_acquires
from upstream import assert_holders_in_turn
from wire import assert_problem
from servers import ZooKeeperEnsemble
from lockapi import Admin, assert_lease

kazoo_client = pytest.importorskip("kazoo.client")

ZXID_EPOCH = 1 << 32     # a zxid is (leader epoch << 32) | counter


@pytest.fixture(scope="module")
def ensemble():
    e = ZooKeeperEnsemble(3)
    try:
        e.start()
        yield e
    finally:
        e.destroy()


@pytest.fixture
def healed(ensemble):
    """The ensemble with every member running and serving, before and
    after the test (a test kills a leader)."""
    def heal():
        for m in ensemble.members:
            if not m.running():
                m.launch()
        ensemble.wait_serving(60 * slow(), members=ensemble.members)
    heal()
    yield ensemble
    heal()


def zk_tidemark(tidemark, hosts, root, **locks):
    keys = {"backend": "zookeeper", "hosts": hosts, "root": root,
            "session_timeout_ms": "10000"}
    keys.update(locks)
    tm = tidemark(config={"locks": keys,
                          "proxy": {"log_level": "debug"}})
    wait_until(lambda: Admin(tm).get("probe/ready").status != 503,
               20 * slow(), "tidemark's ZooKeeper session")
    return tm


def unavailable(r):
    """A clear 503: the backend's problem, with Retry-After."""
    doc = assert_problem(r, 503)
    assert r.header("retry-after") is not None, r
    assert doc["type"] == "urn:tidemark:lock-backend-unavailable", doc
    return doc


def release_until_done(api, name, token):
    """Release, polling through an outage (503) until the ensemble
    answers: 204, or 409 when the release had reached it before its
    answer was lost."""
    def once():
        r = api.release(name, token)
        if r.status == 503:
            unavailable(r)
            return None
        return r
    return wait_until(once, 60 * slow(), "release of %s" % name)


def new_leader(ensemble, old):
    return wait_until(lambda: (lambda m: m if m is not None and m is not old
                               else None)(ensemble.leader()),
                      60 * slow(), "a new leader")


# ------------------------------------------------------------ failover


def test_leader_killed_in_flight_is_503_and_waiter_served(tidemark,
                                                           healed):
    """A holder and a waiter; the leader stops, an acquire goes out and
    gets no answer, the leader is killed: that acquire is a 503 (never a
    guess), the holder's lease survives the new election, and the waiter
    is served when the holder releases, with a fence of the new epoch."""
    ens = healed
    tm = zk_tidemark(tidemark, ens.hosts, "/failover/a")
    api = Admin(tm, timeout=60)
    held = assert_lease(api.acquire("documents/f", ttl_ms=120000),
                        "documents/f")
    results = {}

    def waiter():
        w = Admin(tm, timeout=120)
        results["w"] = w.acquire("documents/f", ttl_ms=60000,
                                 wait_ms=60000)
        w.close()

    def in_flight():
        f = Admin(tm, timeout=60)
        results["x"] = f.acquire("documents/g", ttl_ms=60000)
        f.close()

    tw = threading.Thread(target=waiter)
    tw.start()
    tm.wait_log("locks: waiting: name=documents/f")
    leader = ens.leader()
    assert leader is not None
    leader.pause()                       # writes hang on the old leader
    tx = threading.Thread(target=in_flight)
    tx.start()
    tm.wait_log("locks: zookeeper: acquire name=documents/g")
    leader.kill9()
    tx.join(60 * slow())
    unavailable(results["x"])
    new_leader(ens, leader)
    wait_until(lambda: api.get("documents/f").status != 503, 60 * slow(),
               "tidemark back on the ensemble")
    # the holder's session, and so its lease, outlived the failover
    r = api.get("documents/f")
    assert r.status == 200 and r.json()["fence"] == held["fence"], r
    assert "w" not in results
    assert release_until_done(api, "documents/f",
                              held["token"]).status == 204
    tw.join(60 * slow())
    got = assert_lease(results["w"], "documents/f")
    assert got["fence"] > held["fence"]
    assert got["fence"] >= ZXID_EPOCH * ((held["fence"] >> 32) + 1)
    assert tm.mark("documents/f") == got["fence"]
    assert release_until_done(api, "documents/f",
                              got["token"]).status == 204
    assert api.get("documents/g").status == 404


def test_leader_killed_under_acquires(tidemark, upstream, healed):
    """8 clients take, write under and give back one lock while the
    leader is killed: no fence twice, never two live holders, every write
    under the lock accepted in fence order, waiters served after the
    failover, and every answer in between a clear 503."""
    ens = healed
    tm = zk_tidemark(tidemark, ens.hosts, "/failover/b")
    refused = []                         # the 503s' documents

    def on_refused(api, r):
        if r.status == 423:
            return
        refused.append(unavailable(r))
        # back when the ensemble is: poll, do not spin
        wait_until(lambda: api.get("probe").status != 503, 60 * slow(),
                   "the ensemble back")

    def release(api, name, token):
        rel = release_until_done(api, name, token)
        if rel.status != 204:
            # the release reached the ensemble, its answer did not
            assert_problem(rel, 409)

    grants = leader_killed_under_acquires(
        tm, ens, 20, 60000, on_refused, release,
        lambda leader: new_leader(ens, leader), join_s=120)
    fences = assert_holders_in_turn(grants, upstream)
    # the new epoch's fences are above every one of the old epoch
    assert fences[-1] >> 32 > fences[0] >> 32
    for doc in refused:
        assert doc["resource"] == "documents/hot"


def test_session_ended_extend_is_409(tidemark, store_servers):
    """tidemark itself is paused past its session: ZooKeeper deletes its
    lock nodes, another holder can take the lock, and when tidemark wakes
    the lease's extend is 409, "stop the work" (never a 200 from what it
    remembered), and a new acquire gets a higher fence."""
    zk = store_servers("zookeeper")
    root = "/expiry/%d" % time.monotonic_ns()
    tm = zk_tidemark(tidemark, zk.hosts, root, session_timeout_ms="1000")
    api = Admin(tm)
    a = assert_lease(api.acquire("documents/e", ttl_ms=60000),
                     "documents/e")
    api.close()
    kz = kazoo_client.KazooClient(hosts=zk.hosts, timeout=10.0)
    kz.start()
    try:
        lock_dir = root + "/documents%2Fe"
        assert len(kz.get_children(lock_dir)) == 1
        os.kill(tm.proc.pid, signal.SIGSTOP)
        try:
            wait_until(lambda: kz.get_children(lock_dir) == [],
                       30 * slow(), "the paused session's node to go")
        finally:
            os.kill(tm.proc.pid, signal.SIGCONT)
    finally:
        kz.stop()
        kz.close()
    api = Admin(tm)

    def extend():
        r = api.extend("documents/e", a["token"])
        return None if r.status == 503 else r
    r = wait_until(extend, 30 * slow(), "an answer from the ensemble")
    doc = assert_problem(r, 409)
    assert doc["type"] == "urn:tidemark:lock-lost", doc
    tm.wait_log("the session ended", timeout=30)
    wait_until(lambda: api.get("documents/e").status != 503, 30 * slow(),
               "the new session")
    b = assert_lease(api.acquire("documents/e"), "documents/e")
    assert b["fence"] > a["fence"]


# -------------------------------------------- locks users already run


def kazoo_write(tm, token, tag):
    return tm.put("k", token=str(token), body=tag.encode(),
                  headers=[("X-Test-Id", tag)])


def test_kazoo_lock_czxid_fences_a_paused_holder(tidemark, upstream,
                                                   store_servers):
    """An application locks with kazoo (the ZooKeeper lock recipe), as it
    already does, and sends its lock node's czxid as Fencing-Token. The
    holder is paused (SIGSTOP) past its session; ZooKeeper deletes its
    node, the next holder takes the lock and writes; the paused holder
    wakes and writes: refused, 409."""
    zk = store_servers("zookeeper")
    tm = tidemark()
    path = "/app/locks/k-%d" % time.monotonic_ns()
    a = subprocess.Popen(
        [sys.executable, "-c", KAZOO_HOLDER, zk.hosts, path, "k",
         str(tm.port), "1.0"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        start_new_session=True)
    b = kazoo_client.KazooClient(hosts=zk.hosts, timeout=10.0)
    try:
        kind, token_a = a.stdout.readline().split()
        assert kind == "token"
        token_a = int(token_a)
        assert a.stdout.readline().split() == ["a1", "200"]
        os.kill(a.pid, signal.SIGSTOP)   # the seed's paused client
        b.start()
        lock_b = b.Lock(path, "next-holder")
        assert lock_b.acquire(timeout=60 * slow())   # A's session ended
        token_b = b.exists(path + "/" + lock_b.node).czxid
        assert token_b > token_a
        assert kazoo_write(tm, token_b, "b1").status == 200
        os.kill(a.pid, signal.SIGCONT)
        a.stdin.write("go\n")
        a.stdin.flush()
        assert a.stdout.readline().split() == ["a2", "409"]
        assert upstream.find("X-Test-Id", "a2") == []
        assert len(upstream.find("X-Test-Id", "b1")) == 1
        assert tm.mark("documents/k") == token_b
        lock_b.release()
    finally:
        os.kill(a.pid, signal.SIGCONT)
        a.kill()
        a.wait()
        b.stop()
        b.close()


def test_kazoo_lock_czxid_only_grows(tidemark, upstream, store_servers):
    """Each new kazoo holder's czxid is above the last one's, so
    successive holders write in order and a late write of an earlier
    holder is refused."""
    zk = store_servers("zookeeper")
    tm = tidemark()
    c = kazoo_client.KazooClient(hosts=zk.hosts, timeout=10.0)
    c.start()
    try:
        path = "/app/locks/g-%d" % time.monotonic_ns()
        tokens = []
        for i in range(3):
            lk = c.Lock(path, "holder-%d" % i)
            assert lk.acquire(timeout=10 * slow())
            tokens.append(c.exists(path + "/" + lk.node).czxid)
            assert kazoo_write(tm, tokens[-1], "g%d" % i).status == 200
            lk.release()
        assert tokens == sorted(set(tokens))
        assert_problem(kazoo_write(tm, tokens[0], "late"), 409)
        assert upstream.find("X-Test-Id", "late") == []
    finally:
        c.stop()
        c.close()


# ------------------------------------------------------------ reaching

def test_a_server_down_at_start_is_logged_once_then_reached(tidemark):
    """tidemark starts before its ZooKeeper server: the client's tries
    each fail (tidemark's relay finds the port closed), the log says so
    once at warn (each further try at debug), and when the server comes
    up the session is made through the relay and a lock is granted."""
    from servers import ZooKeeper

    zk = ZooKeeper()                     # its port chosen, nothing on it
    try:
        tm = tidemark(config={"locks": {"backend": "zookeeper",
                                        "hosts": "127.0.0.1:%d" % zk.port,
                                        "root": "/reaching",
                                        "session_timeout_ms": "10000"},
                              "proxy": {"log_level": "debug"}})
        cannot = "cannot reach the server 127.0.0.1:%d" % zk.port
        tm.wait_log(cannot, count=3, timeout=30)
        assert len(tm.log_lines("level=warn", cannot)) == 1
        zk.start()
        tm.wait_log("reached the server 127.0.0.1:%d" % zk.port, "again",
                    timeout=30)
        api = Admin(tm, timeout=30)
        wait_until(lambda: api.get("probe/ready").status != 503,
                   20 * slow(), "tidemark's ZooKeeper session")
        assert_lease(api.acquire("documents/r", ttl_ms=60000),
                     "documents/r")
        assert len(tm.log_lines("level=warn", cannot)) == 1
    finally:
        zk.destroy()
