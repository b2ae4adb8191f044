"""[follow NAME]: the sidecar follows the application's own leader
election and carries the token for it. Two "pods", each a sidecar whose
identity is its pod's name (POD_NAME), share one mark store; the
application elects with its own library (etcdctl elect, Curator's
LeaderLatch, kazoo's Election) and sends no Fencing-Token. The leader's
sidecar forwards its writes with the leader's fence (etcd: the leader
key's create revision; ZooKeeper: the leader node's czxid); the other
refuses them 503 not-leader; when the election changes hands, so do the
roles."""

import itertools
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import servers
from common import slow, wait_until
from daemon import DEFAULT_ROUTE, StoreUnderTest, run_check
from wire import assert_problem
from test_etcd import create_revision

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "conf", "examples")
CURATOR_JAR = "/usr/share/java/curator-recipes.jar"
CURATOR_LATCH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "CuratorLatch.java")

_seq = itertools.count()


def unique(prefix):
    return "%s%d-%d" % (prefix, time.monotonic_ns(), next(_seq))


def two_pods(tidemark, store, name, section):
    """Sidecars pod-a and pod-b: [follow NAME] with identity
    ${POD_NAME}, the route docs bound to it, one shared mark store."""
    pods = {}
    for pod in ("pod-a", "pod-b"):
        keys = dict(section, identity="${POD_NAME}")
        pods[pod] = tidemark(
            config={"store": store.section(),
                    "follow " + name: keys,
                    "route docs": dict(DEFAULT_ROUTE, lease=name)},
            env={"POD_NAME": pod}, name=pod)
    return pods


def carrier(tm, name):
    st, _, body = tm.admin("GET", "/v1/leases/" + name)
    assert st == 200, (st, body)
    return json.loads(body)


def wait_carrier(tm, name, state, fence=None):
    def there():
        c = carrier(tm, name)
        return c["state"] == state and (fence is None or c["fence"] == fence)
    wait_until(there, 30 * slow(), "%s %s" % (state, fence))


def refused_not_leader(tm, doc, tag):
    r = tm.put(doc, headers=[("X-Test-Id", tag)])
    assert_problem(r, 503)
    assert r.header("Tidemark-Error") == "not-leader", r


def roles_swap(tm_pods, upstream, name, lead, end):
    """lead(pod) starts pod's application in the election and returns
    (process, fence) once it leads (or (process, None) at once, for
    one that waits); end(process) ends its session. pod-a leads and
    writes through its sidecar with no token; pod-b's sidecar refuses;
    pod-a's session ends and pod-b leads: the roles swap."""
    a_side, b_side = tm_pods["pod-a"], tm_pods["pod-b"]
    doc = unique("doc")
    a, fence_a = lead("pod-a")
    b = None
    try:
        wait_carrier(a_side, name, "holding", fence_a)
        wait_carrier(b_side, name, "standby")
        # the scope mark rose with the election, before any write
        assert a_side.mark("follow/" + name) == fence_a
        r = a_side.put(doc, headers=[("X-Test-Id", "a1")])
        assert r.status == 200, r
        assert a_side.mark("documents/" + doc) == fence_a
        refused_not_leader(b_side, doc, "b0")
        # the sidecar carries the token on this route: none of the app's
        r = a_side.put(doc, token=fence_a, headers=[("X-Test-Id", "a-tok")])
        assert_problem(r, 400)
        assert r.header("Tidemark-Error") == "token-on-carried-route"
        b, _ = lead("pod-b", wait=False)
        end(a)
        fence_b = b.fence()
        assert fence_b > fence_a
        wait_carrier(b_side, name, "holding", fence_b)
        wait_carrier(a_side, name, "standby")
        assert b_side.mark("follow/" + name) == fence_b
        refused_not_leader(a_side, doc, "a2")
        r = b_side.put(doc, headers=[("X-Test-Id", "b1")])
        assert r.status == 200, r
        assert b_side.mark("documents/" + doc) == fence_b
    finally:
        for p in (a, b):
            if p is not None:
                p.stop()
    for tag in ("b0", "a-tok", "a2"):
        assert upstream.find("X-Test-Id", tag) == []
    for tag in ("a1", "b1"):
        assert len(upstream.find("X-Test-Id", tag)) == 1
        assert upstream.find("X-Test-Id", tag)[0].header(
            "Fencing-Token") is None


# ---------------------------------------------------------------- etcd


class EtcdctlElect:
    """etcdctl elect NAME POD: once it leads it prints its key and its
    proposal; fence() is its key's create revision."""

    def __init__(self, etcd, election, pod):
        self.etcd = etcd
        self.proc = subprocess.Popen(
            ["etcdctl", "--endpoints", etcd.endpoints, "elect", election,
             pod], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True,
            env=dict(os.environ, ETCDCTL_API="3"))
        self.pod = pod
        self.key = None

    def fence(self):
        self.key = self.proc.stdout.readline().decode().strip()
        assert self.key, self.proc.stderr.read().decode()[-2000:]
        assert self.proc.stdout.readline().decode().strip() == self.pod
        return create_revision(self.etcd, self.key)

    def end(self):
        """kill -9, then its lease revoked, as its TTL would end it."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        lease = self.key.rsplit("/", 1)[1]
        subprocess.run(["etcdctl", "--endpoints", self.etcd.endpoints,
                        "lease", "revoke", lease], check=True,
                       capture_output=True,
                       env=dict(os.environ, ETCDCTL_API="3"))

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def test_follow_etcdctl_elect(tidemark, upstream, store_servers):
    """The sidecar whose identity is the etcdctl elect leader's proposal
    forwards its tokenless writes with the leader key's create revision;
    the other refuses them 503 not-leader; when the leader's session
    ends and the other pod's etcdctl elect wins, the roles swap."""
    etcd = store_servers("etcd")
    name = unique("app")
    election = "/follow/" + name
    pods = two_pods(tidemark, store_for(store_servers), name,
                    {"backend": "etcd", "endpoints": etcd.endpoints,
                     "election": election, "kind": "etcd-election"})

    def lead(pod, wait=True):
        e = EtcdctlElect(etcd, election, pod)
        return e, (e.fence() if wait else None)

    roles_swap(pods, upstream, name, lead, lambda e: e.end())


def test_follow_cut_off_leader_is_refused_by_the_scope_mark(
        tidemark, upstream, store_servers):
    """pod-a's sidecar follows the election through a relay that is cut
    (a partition from the election's store, not from the mark store):
    when pod-a's session ends and pod-b leads, pod-a's sidecar cannot
    see it and still holds, but pod-b's sidecar has raised the scope mark
    to its fence, so pod-a's tokenless write is refused 409 and never
    reaches the backend; once the relay forwards again, pod-a's sidecar
    is standby and refuses 503 not-leader."""
    etcd = store_servers("etcd")
    name = unique("app")
    election = "/follow/" + name
    relay = servers.Relay(int(etcd.endpoints.rsplit(":", 1)[1]))
    section = {"backend": "etcd", "election": election,
               "kind": "etcd-election"}
    pods = {}
    for pod, endpoints in (("pod-a", relay.url), ("pod-b", etcd.endpoints)):
        pods[pod] = tidemark(
            config={"store": store_for(store_servers).section(),
                    "follow " + name: dict(section, endpoints=endpoints,
                                           identity="${POD_NAME}"),
                    "route docs": dict(DEFAULT_ROUTE, lease=name)},
            env={"POD_NAME": pod}, name=pod)
    a_side, b_side = pods["pod-a"], pods["pod-b"]
    doc = unique("doc")
    a = EtcdctlElect(etcd, election, "pod-a")
    b = None
    try:
        fence_a = a.fence()
        wait_carrier(a_side, name, "holding", fence_a)
        wait_carrier(b_side, name, "standby")
        relay.cut()
        b = EtcdctlElect(etcd, election, "pod-b")
        a.end()
        fence_b = b.fence()
        wait_carrier(b_side, name, "holding", fence_b)
        assert b_side.mark("follow/" + name) == fence_b
        # cut off, pod-a's sidecar has not seen the election change hands
        assert carrier(a_side, name)["state"] == "holding"
        r = a_side.put(doc, headers=[("X-Test-Id", "a-cut")])
        assert_problem(r, 409)
        assert r.header("Tidemark-Error") == "stale-token"
        relay.resume()
        wait_carrier(a_side, name, "standby")
        refused_not_leader(a_side, doc, "a-back")
    finally:
        relay.stop()
        for p in (a, b):
            if p is not None:
                p.stop()
    assert upstream.find("X-Test-Id", "a-cut") == []
    assert upstream.find("X-Test-Id", "a-back") == []


def test_follow_store_down_at_start_refuses(tidemark, upstream, port):
    """An election store that does not answer at start: the section is
    never decided, /readyz (ready = yes) is 503, and a tokenless write is
    refused 503 lease-starting, never forwarded without a fence."""
    name = unique("app")
    tm = tidemark(
        config={"follow " + name: {
                    "backend": "etcd",
                    "endpoints": "http://127.0.0.1:%d" % port,
                    "election": "/follow/" + name, "kind": "etcd-election",
                    "identity": "${POD_NAME}", "ready": "yes"},
                "route docs": dict(DEFAULT_ROUTE, lease=name)},
        env={"POD_NAME": "pod-a"})
    wait_until(lambda: tm.admin("GET", "/readyz")[0] == 503, 10 * slow(),
               "/readyz 503")
    assert carrier(tm, name)["state"] == "starting"
    r = tm.put("d", headers=[("X-Test-Id", "down")])
    assert_problem(r, 503)
    assert r.header("Tidemark-Error") == "lease-starting"
    assert upstream.find("X-Test-Id", "down") == []


@pytest.mark.parametrize("value", [
    b"pod-a\x00",                              # pod-a, then a NUL
    b"pod-a\n\x1b[31m" + b"x" * 70000,          # a line, a colour, 70 KB
])
def test_follow_hostile_leader_value(tidemark, upstream, store_servers,
                                     value):
    """An election's leader key whose value only starts like this
    identity (a NUL after it; a line break, an escape sequence and 70 KB
    after it) is another identity's: standby, writes refused; the value
    is shown escaped and cut, and no raw byte of it reaches the log."""
    import base64
    etcd = store_servers("etcd")
    name = unique("app")
    election = "/follow/" + name
    key = (election + "/694d0000000000aa").encode()
    r = etcd.call("/v3/kv/put", {"key": base64.b64encode(key).decode(),
                                 "value": base64.b64encode(value).decode()})
    assert "header" in r, r
    tm = tidemark(
        config={"proxy": {"log_level": "debug"},
                "follow " + name: {
                    "backend": "etcd", "endpoints": etcd.endpoints,
                    "election": election, "kind": "etcd-election",
                    "identity": "${POD_NAME}"},
                "route docs": dict(DEFAULT_ROUTE, lease=name)},
        env={"POD_NAME": "pod-a"})
    wait_carrier(tm, name, "standby")
    holder = carrier(tm, name)["holder"]
    # quoted and escaped as log values are (logesc)
    assert holder.startswith('"pod-a\\'), holder
    assert len(holder) < 128 and holder.isprintable(), holder
    refused_not_leader(tm, "d", "hostile")
    assert upstream.find("X-Test-Id", "hostile") == []
    log = tm.log_path.read_bytes()
    assert b"\x1b" not in log and b"\x00" not in log


def store_for(store_servers):
    """The mark store both pods share: etcd's."""
    return StoreUnderTest("etcd", store_servers("etcd"))


# ----------------------------------------------------------- ZooKeeper


class ZkElector:
    """An application in a ZooKeeper election as pod (argv: a process
    that prints "leader POD NODE CZXID" once it leads, and leads until
    its stdin ends); fence() is that czxid."""

    def __init__(self, argv, pod):
        self.pod = pod
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, start_new_session=True)

    def fence(self):
        deadline = time.monotonic() + 60 * slow()
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline().split()
            assert line, "the elector ended"
            if line[0] == "leader":
                assert line[1] == self.pod, line
                return int(line[3])
        raise AssertionError("no leader line")

    def end(self):
        """kill -9: its session ends after its timeout."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


KAZOO_ELECTION = r"""
import sys
from kazoo.client import KazooClient
hosts, path, ident = sys.argv[1], sys.argv[2], sys.argv[3]
zk = KazooClient(hosts=hosts, timeout=float(sys.argv[4]))
zk.start()

def lead():
    for kid in zk.get_children(path):
        data, st = zk.get(path + "/" + kid)
        if data == ident.encode():
            print("leader", ident, kid, st.czxid, flush=True)
    sys.stdin.readline()

zk.Election(path, ident).run(lead)
"""


def zk_pods(tidemark, store_servers, kind):
    zk = store_servers("zookeeper")
    name = unique("app")
    election = "/follow/" + name + "/leader"
    pods = two_pods(tidemark, store_for(store_servers), name,
                    {"backend": "zookeeper", "hosts": zk.hosts,
                     "election": election, "kind": kind,
                     "session_timeout_ms": "4000"})
    return zk, name, election, pods


def test_follow_curator_leaderlatch(tidemark, upstream, store_servers):
    """As with etcd, with Curator's LeaderLatch (participant id = the
    pod's name; the fence the leader's latch node's czxid); the leader's
    JVM is killed and its session ends."""
    assert os.path.exists(CURATOR_JAR), \
        "Curator is not installed (Debian package libcurator-recipes-java)"
    zk, name, election, pods = zk_pods(tidemark, store_servers,
                                       "curator-leaderlatch")

    def lead(pod, wait=True):
        e = ZkElector(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1",
                       "-cp", CURATOR_JAR, CURATOR_LATCH, zk.hosts, election,
                       pod, "2000"], pod)
        return e, (e.fence() if wait else None)

    roles_swap(pods, upstream, name, lead, lambda e: e.end())


def test_follow_kazoo_election(tidemark, upstream, store_servers):
    """As with etcd, with kazoo's Election (identifier = the pod's name;
    the fence the leader's lock node's czxid)."""
    pytest.importorskip("kazoo.client")
    zk, name, election, pods = zk_pods(tidemark, store_servers,
                                       "kazoo-election")

    def lead(pod, wait=True):
        e = ZkElector([sys.executable, "-c", KAZOO_ELECTION, zk.hosts,
                       election, pod, "2.0"], pod)
        return e, (e.fence() if wait else None)

    roles_swap(pods, upstream, name, lead, lambda e: e.end())


# ------------------------------------------------------------- config


FOLLOW_ETCD = """
[upstream u]
url = http://127.0.0.1:9

[follow app]
backend = %(backend)s
endpoints = http://127.0.0.1:2379
hosts = 127.0.0.1:2181
election = %(election)s
identity = %(identity)s
kind = %(kind)s

[route r]
path = /v1/{key*}
resource = {key*}
upstream = u
lease = %(lease)s
"""


@pytest.mark.parametrize("keys,env,line,message", [
    ({}, {}, 10,
     "identity: ${POD_NAME} is not set in the environment"),
    ({}, {"POD_NAME": ""}, 10,
     "identity: empty: this replica's identity is needed (an unset ${VAR} "
     "reads as empty)"),
    ({"kind": "kazoo-election"}, {"POD_NAME": "pod-a"}, 11,
     "kind: kazoo-election is an election on zookeeper, not on etcd"),
    ({"election": "/jobs/leader/"}, {"POD_NAME": "pod-a"}, 9,
     "election: the name the application elects under, not ending in '/' "
     "(its keys are NAME/<lease>)"),
    ({"backend": "zookeeper", "kind": "curator-leaderlatch",
      "election": "jobs"}, {"POD_NAME": "pod-a"}, 9,
     "election: must be an absolute znode path such as /tidemark/locks"),
    ({"lease": "other"}, {"POD_NAME": "pod-a"}, 17,
     "lease: no [lease] or [follow] section other"),
])
def test_follow_configuration_errors(tmp_path, keys, env, line, message):
    """A misconfigured identity, kind or election, or a route bound to
    no such section: FILE:LINE: message, exit 1."""
    values = {"backend": "etcd", "election": "/jobs/leader",
              "identity": "${POD_NAME}", "kind": "etcd-election",
              "lease": "app"}
    values.update(keys)
    path = tmp_path / "follow.ini"
    path.write_text(FOLLOW_ETCD % values)
    rc, lines = run_check(path, env=env)
    assert (rc, lines) == (1, ["%s:%d: %s" % (path, line, message)])


@pytest.mark.parametrize("name", ["follow-etcd", "follow-zookeeper"])
def test_follow_example_passes_check(name):
    """tidemark -c conf/examples/NAME.ini --check, with POD_NAME set as
    the pod would set it."""
    path = os.path.join(EXAMPLES, name + ".ini")
    rc, lines = run_check(path, env={"POD_NAME": "pod-a"})
    assert (rc, lines) == (0, ["%s: ok" % path])
