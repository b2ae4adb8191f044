"""[watch NAME] backend = zookeeper: tidemark follows the locks that
applications take with ZooKeeper's lock recipe (kazoo's Lock, Curator's
InterProcessMutex) and raises a resource's mark to the new holder's czxid
the moment the lock changes holder, so a paused holder is refused before
the next one writes, with no change to either application."""

import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest

from common import slow, wait_until
from daemon import run_check, wait_ready
from scenarios import KAZOO_HOLDER
from wire import assert_problem
import servers
from test_etcd import wait_failing, watch_health

kazoo_client = pytest.importorskip("kazoo.client")


def unique_prefix():
    return "/watched/%d" % time.monotonic_ns()


def watch_tidemark(tidemark, hosts, prefix, **keys):
    section = {"backend": "zookeeper", "hosts": hosts, "prefix": prefix,
               "resource": "documents/{name}"}
    section.update(keys)
    return tidemark(config={"proxy": {"log_level": "debug"},
                            "watch docs": section})


def kazoo(hosts, timeout=10.0):
    c = kazoo_client.KazooClient(hosts=hosts, timeout=timeout)
    c.start(timeout=30 * slow())
    return c


def czxid_of(client, lock):
    return client.exists(lock.path + "/" + lock.node).czxid


def wait_mark(tm, resource, want, what):
    wait_until(lambda: tm.mark(resource) == want, 20 * slow(), what)


def test_watch_fences_the_paused_kazoo_holder_before_the_next_one_writes(
        tidemark, upstream, store_servers):
    """A holds a kazoo Lock on PREFIX/doc1 and writes with its node's
    czxid; A is paused past its session, ZooKeeper deletes its node and B
    takes the lock. Before B writes anything the mark of documents/doc1
    is B's czxid, so A's write when it wakes is refused (409) and never
    reaches the upstream."""
    zk = store_servers("zookeeper")
    prefix = unique_prefix()
    tm = watch_tidemark(tidemark, zk.hosts, prefix)
    a = subprocess.Popen(
        [sys.executable, "-c", KAZOO_HOLDER, zk.hosts, prefix + "/doc1",
         "doc1", str(tm.port), "1.0"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        start_new_session=True)
    b = None
    try:
        kind, token_a = a.stdout.readline().split()
        assert kind == "token"
        token_a = int(token_a)
        assert a.stdout.readline().split() == ["a1", "200"]
        wait_mark(tm, "documents/doc1", token_a, "the mark at A's czxid")
        os.kill(a.pid, signal.SIGSTOP)   # the seed's paused client
        b = kazoo(zk.hosts)
        lock_b = b.Lock(prefix + "/doc1", "next-holder")
        assert lock_b.acquire(timeout=60 * slow())   # A's session ended
        token_b = czxid_of(b, lock_b)
        assert token_b > token_a
        # B holds the lock and has written nothing: the watch raised the
        # mark to B's node's czxid
        wait_mark(tm, "documents/doc1", token_b, "the mark at B's czxid")
        assert upstream.find("X-Test-Id", "b1") == []
        os.kill(a.pid, signal.SIGCONT)
        a.stdin.write("go\n")
        a.stdin.flush()
        assert a.stdout.readline().split() == ["a2", "409"]
        r = tm.put("doc1", token=str(token_b), body=b"b1",
                   headers=[("X-Test-Id", "b1")])
        assert r.status == 200
        lock_b.release()
    finally:
        os.kill(a.pid, signal.SIGCONT)
        a.kill()
        a.wait()
        if b is not None:
            b.stop()
            b.close()
    assert upstream.find("X-Test-Id", "a2") == []
    assert len(upstream.find("X-Test-Id", "b1")) == 1
    assert tm.log_lines("watch docs: documents/doc1: the holder changed")


CURATOR_JAR = "/usr/share/java/curator-recipes.jar"
CURATOR_HOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              "CuratorHolder.java")


def curator_holder(zk, lock_path, doc, tm, session_ms):
    """A Java application holding Curator's InterProcessMutex on
    lock_path (CuratorHolder.java, run from source): its first line,
    once it holds the mutex, is its token as doc/guide.md tells a Curator
    user to read it. Each line written to it is a PUT of doc with that
    token; its answer is a line "TAG STATUS"."""
    assert os.path.exists(CURATOR_JAR), \
        "Curator is not installed (Debian package libcurator-recipes-java)"
    return subprocess.Popen(
        ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp",
         CURATOR_JAR, CURATOR_HOLDER, zk.hosts, lock_path, doc,
         str(tm.port), str(session_ms)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True, start_new_session=True)


def holder_token(holder):
    """The token a curator_holder printed once it held the mutex."""
    line = holder.stdout.readline().split()
    assert len(line) == 3 and line[0] == "token", line
    return int(line[1])


def holder_put(holder, tag):
    """The status of the PUT the holder made for tag."""
    holder.stdin.write(tag + "\n")
    holder.stdin.flush()
    line = holder.stdout.readline().split()
    assert len(line) == 2 and line[0] == tag, line
    return int(line[1])


def test_watch_fences_the_paused_curator_holder(tidemark, upstream,
                                                store_servers):
    """Two Java applications lock one resource with Curator's
    InterProcessMutex and send the token doc/guide.md's Curator advice
    gives. A holds the mutex and writes; A's JVM is paused past its
    session and B takes the mutex. Before B writes anything, the watch
    has raised the mark to exactly B's token, so A's write when it wakes
    is refused (409) and never reaches the upstream; B's is forwarded."""
    zk = store_servers("zookeeper")
    prefix = unique_prefix()
    tm = watch_tidemark(tidemark, zk.hosts, prefix)
    a = curator_holder(zk, prefix + "/doc5", "doc5", tm, 2000)
    b = None
    try:
        token_a = holder_token(a)
        assert holder_put(a, "a1") == 200
        wait_mark(tm, "documents/doc5", token_a, "the mark at A's token")
        os.kill(a.pid, signal.SIGSTOP)   # the seed's paused client
        b = curator_holder(zk, prefix + "/doc5", "doc5", tm, 10000)
        token_b = holder_token(b)        # A's session ended
        assert token_b > token_a
        wait_mark(tm, "documents/doc5", token_b, "the mark at B's token")
        assert upstream.find("X-Test-Id", "b1") == []
        os.kill(a.pid, signal.SIGCONT)
        assert holder_put(a, "a2") == 409
        assert holder_put(b, "b1") == 200
    finally:
        for h in (a, b):
            if h is not None:
                os.kill(h.pid, signal.SIGCONT)
                h.kill()
                h.wait()
    assert upstream.find("X-Test-Id", "a2") == []
    assert len(upstream.find("X-Test-Id", "b1")) == 1
    assert tm.log_lines("watch docs: documents/doc5: the holder changed")


def curator_node(client, lock_path):
    """A contender as Curator's InterProcessMutex makes it: an ephemeral
    sequential _c_<uuid>-lock-<seq> under the lock's znode."""
    path = client.create("%s/_c_%s-lock-" % (lock_path, uuid.uuid4()),
                         b"", ephemeral=True, sequence=True, makepath=True)
    return path, client.exists(path).czxid


def test_watch_follows_curator_names_and_new_locks(tidemark, upstream,
                                                   store_servers):
    """Curator-style contenders: the holder is the lowest sequence
    number; when it goes, the next one's czxid becomes the mark. A lock
    made after tidemark started is followed too, and a child of the
    prefix without sequential children (not a lock) raises nothing."""
    zk = store_servers("zookeeper")
    prefix = unique_prefix()
    c = kazoo(zk.hosts)
    try:
        first, z1 = curator_node(c, prefix + "/doc2")
        c.create(prefix + "/config/settings", b"x", makepath=True)
        tm = watch_tidemark(tidemark, zk.hosts, prefix)
        wait_mark(tm, "documents/doc2", z1, "the mark at the holder's czxid")
        second, z2 = curator_node(c, prefix + "/doc2")
        assert z2 > z1
        # a waiter is no holder: the mark stays at the holder's
        tm.wait_log("watch docs: lock doc2: held by", first, timeout=10,
                    count=2)
        assert tm.mark("documents/doc2") == z1
        c.delete(first)
        wait_mark(tm, "documents/doc2", z2, "the mark at the next czxid")
        assert_problem(tm.put("doc2", token=str(z1)), 409)
        _, z3 = curator_node(c, prefix + "/doc3")
        wait_mark(tm, "documents/doc3", z3, "a lock made after the start")
        assert tm.mark("documents/config") is None
    finally:
        c.stop()
        c.close()


def test_watch_waits_for_zookeeper_and_catches_up_after_restarts(
        tidemark, upstream):
    """ZooKeeper is down when tidemark starts: tidemark runs, warns that
    the watch cannot follow its locks and is not ready; once ZooKeeper
    serves it says the watch follows them again, is ready, and fences.
    ZooKeeper killed: a warning and not ready; started again: the holder
    that comes after is fenced. tidemark paused past its own session (its
    watches gone with it): the holder that took the lock meanwhile is
    fenced once it wakes."""
    zk = servers.ZooKeeper()
    prefix = unique_prefix()
    clients = []
    try:
        tm = watch_tidemark(tidemark, zk.hosts, prefix,
                            session_timeout_ms="1000")
        assert tm.proc.poll() is None
        # not there: one warning, /readyz 503, failing in /metrics
        assert wait_failing(tm, 1) >= 1
        zk.start(timeout=60 * slow())
        tm.wait_log("level=warn watch docs: follows its locks again, after ",
                    timeout=30)
        wait_ready(tm, 200, timeout=10)
        assert watch_health(tm)[2] == ["ok"]
        a = kazoo(zk.hosts)
        clients.append(a)
        lock_a = a.Lock(prefix + "/doc4", "a")
        assert lock_a.acquire(timeout=30 * slow())
        wait_mark(tm, "documents/doc4", czxid_of(a, lock_a),
                  "the mark once ZooKeeper serves")

        zk.kill9()
        wait_failing(tm, 2)     # lost while it followed its locks
        zk.start(timeout=60 * slow())
        tm.wait_log("watch docs: reading every lock", timeout=30, count=2)
        wait_ready(tm, 200, timeout=30)
        b = kazoo(zk.hosts)
        clients.append(b)
        lock_b = b.Lock(prefix + "/doc4", "b")
        assert lock_a.release()
        assert lock_b.acquire(timeout=30 * slow())
        token_b = czxid_of(b, lock_b)
        wait_mark(tm, "documents/doc4", token_b, "the mark after a restart")

        session = tm.log_lines("watch docs: zookeeper: connected, "
                               "session 0x")[-1].split("session ")[1]
        session = session.split(",")[0]
        assert session in connected_sessions(zk)
        os.kill(tm.proc.pid, signal.SIGSTOP)
        try:
            c = kazoo(zk.hosts)
            clients.append(c)
            lock_c = c.Lock(prefix + "/doc4", "c")
            assert lock_b.release()
            assert lock_c.acquire(timeout=30 * slow())
            token_c = czxid_of(c, lock_c)
            # tidemark's session ends while it sleeps, with its watches
            wait_until(lambda: session not in connected_sessions(zk),
                       30 * slow(), "tidemark's session to expire")
        finally:
            os.kill(tm.proc.pid, signal.SIGCONT)
        tm.wait_log("watch docs: the session ended", timeout=30)
        wait_mark(tm, "documents/doc4", token_c, "the mark after a pause")
        assert token_c > token_b
    finally:
        for cl in clients:
            cl.stop()
            cl.close()
        zk.destroy()


def connected_sessions(zk):
    """The ids of the sessions connected to zk ("cons": one line per
    connection, its session as sid=0x...)."""
    out = servers.four_letters(zk.port, b"cons").decode(errors="replace")
    return set(re.findall(r"sid=(0x[0-9a-f]+)", out))


def test_watch_zookeeper_sections_are_checked(tmp_path, upstream):
    """A bad [watch] zookeeper section is FILE:LINE: message and a
    non-zero exit."""
    def check(text):
        ini = tmp_path / "w.ini"
        ini.write_text("[upstream default]\nurl = %s\n%s"
                       % (upstream.url, text))
        return str(ini), run_check(ini)

    ini, (rc, lines) = check("[watch a]\nbackend = zookeeper\n"
                             "prefix = /locks\n")
    assert rc == 1
    assert "%s:3: [watch a] backend zookeeper needs hosts" % ini in lines, \
        lines
    ini, (rc, lines) = check("[watch a]\nbackend = zookeeper\n"
                             "hosts = 127.0.0.1:2181\nprefix = locks\n")
    assert rc == 1
    assert any(ln.startswith("%s:6: prefix: must be an absolute znode path"
                             % ini) for ln in lines), lines
    ini, (rc, lines) = check("[watch a]\nbackend = zookeeper\n"
                             "hosts = 127.0.0.1:2181\nprefix = /locks/\n")
    assert rc == 1
    assert any(ln.startswith("%s:6: prefix:" % ini) for ln in lines), lines
    ini, (rc, lines) = check("[watch a]\nbackend = zookeeper\n"
                             "hosts = zk1\nprefix = /locks\n")
    assert rc == 1
    assert any(ln.startswith("%s:5: hosts: must be host:port" % ini)
               for ln in lines), lines
    ini, (rc, lines) = check("[watch a]\nbackend = zookeeper\n"
                             "hosts = 127.0.0.1:2181\nprefix = /locks\n"
                             "session_timeout_ms = 10\n")
    assert rc == 1
    assert any(ln.startswith("%s:7: session_timeout_ms" % ini)
               for ln in lines), lines
    ini, (rc, lines) = check("[watch a]\nbackend = consul\n"
                             "hosts = 127.0.0.1:2181\nprefix = /locks\n")
    assert rc == 1
    assert any(ln.startswith("%s:4: backend: must be etcd or zookeeper"
                             % ini) for ln in lines), lines
    ini, (rc, lines) = check("[watch a]\nbackend = zookeeper\n"
                             "hosts = 127.0.0.1:2181\nprefix = /locks\n"
                             "token = lock_revision\n")
    assert rc == 1
    assert "%s:7: token: lock_revision is for backend etcd (a ZooKeeper " \
        "lock's token is its node's czxid)" % ini in lines, lines
    ini, (rc, lines) = check("[watch a]\nbackend = zookeeper\n"
                             "hosts = 127.0.0.1:2181,127.0.0.2:2181\n"
                             "prefix = /app/locks\n"
                             "resource = documents/{name}\n")
    assert rc == 0, lines
