"""Real servers for the integration tests: the stores (Postgres, Redis,
etcd, ZooKeeper) and the backends tidemark fronts (Apache mod_dav, nginx's DAV
module, the S3 server s3rver), each started on free loopback ports in a
temporary directory with a configuration written here (never the system's
packaged one), polled until it answers (no fixed sleeps), and stopped in
teardown even on failure.

A server can be stopped and started again on the same port and data
(outages, restarts). Standard library only.
"""

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

from common import free_port


def _poll(pred, timeout, what, proc=None, log=None):
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError("%s exited with %s at start:\n%s"
                               % (what, proc.returncode, _tail(log)))
        if time.monotonic() >= deadline:
            raise RuntimeError("%s not ready after %.0fs:\n%s"
                               % (what, timeout, _tail(log)))
        time.sleep(0.02)


def _tail(path):
    if path is None:
        return ""
    try:
        with open(path, errors="replace") as f:
            return f.read()[-3000:]
    except OSError:
        return ""


def _ask(port, data):
    """Send data to 127.0.0.1:port and read until the peer closes; b""
    when nothing answers."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=1)
        s.sendall(data)
        got = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        s.close()
        return got
    except OSError:
        return b""


def _connects(port):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=0.5)
        s.close()
        return True
    except OSError:
        return False


class Server:
    """One server process; subclasses say how to start and probe it."""

    name = "server"

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="tidemark-%s-" % self.name)
        os.chmod(self.dir, 0o755)
        self.port = free_port()
        self.proc = None
        self.log_path = os.path.join(self.dir, "server.log")

    def argv(self):
        raise NotImplementedError

    def ready(self):
        return _connects(self.port)

    def preexec(self):
        return None

    def start(self, timeout=30.0):
        assert self.proc is None or self.proc.poll() is not None
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self.argv(), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            cwd=self.dir, preexec_fn=self.preexec(), start_new_session=True)
        log.close()
        _poll(self.ready, timeout, self.name, self.proc, self.log_path)
        return self

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=30.0):
        p = self.proc
        if p is None or p.poll() is not None:
            return
        p.send_signal(sig)
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    def tree(self):
        """The server's pid and its descendants' (Postgres backends make
        their own process groups)."""
        children = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % d) as f:
                    stat = f.read()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(d))
        out, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            out.append(pid)
            todo.extend(children.get(pid, []))
        return out

    def pause(self):
        """SIGSTOP the whole server: it accepts, but answers nothing."""
        for pid in self.tree():
            os.kill(pid, signal.SIGSTOP)

    def resume(self):
        for pid in self.tree():
            os.kill(pid, signal.SIGCONT)

    def kill9(self):
        self.stop(signal.SIGKILL)

    def restart(self):
        self.stop()
        return self.start()

    def destroy(self):
        try:
            self.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def log(self):
        return _tail(self.log_path)


class Redis(Server):
    name = "redis"

    def __init__(self, extra=()):
        super().__init__()
        self.extra = list(extra)

    def argv(self):
        return ["redis-server", "--port", str(self.port), "--bind",
                "127.0.0.1", "--save", "", "--appendonly", "yes",
                "--appendfsync", "always", "--dir", self.dir,
                "--daemonize", "no"] + self.extra

    def ready(self):
        # NOAUTH: up, with a password the probe does not know.
        reply = self.command("PING") or b""
        return reply == b"+PONG\r\n" or reply.startswith(b"-NOAUTH")

    def command(self, *args):
        """One command; the raw reply bytes (first read), or None."""
        parts = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
        try:
            s = socket.create_connection(("127.0.0.1", self.port),
                                         timeout=2)
            s.sendall(b"".join(parts))
            data = s.recv(65536)
            s.close()
            return data
        except OSError:
            return None

    @property
    def url(self):
        return "redis://127.0.0.1:%d" % self.port


def _pg_bin(name):
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/%s" % name))
    if found:
        return found[-1]
    return shutil.which(name) or name


class Postgres(Server):
    """A cluster made by initdb; run as the postgres user when we are
    root (postgres refuses to run as root)."""

    name = "postgres"

    def __init__(self, tls=None):
        """tls: (certificate, key) paths: the server takes TLS with them
        (and plain connections too)."""
        super().__init__()
        self.data = os.path.join(self.dir, "data")
        self.user = None
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            self.user = (pw.pw_uid, pw.pw_gid)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self._run([_pg_bin("initdb"), "-D", self.data, "-A", "trust",
                   "-U", "postgres", "-E", "UTF8", "--no-sync"])
        self.tls_args = []
        if tls is not None:
            # The key is the server user's, and its alone.
            for src, what in zip(tls, ("cert", "key")):
                dst = os.path.join(self.dir, "server." + what)
                shutil.copyfile(src, dst)
                os.chmod(dst, 0o600)
                if self.user is not None:
                    os.chown(dst, *self.user)
                self.tls_args += ["-c", "ssl_%s_file=%s" % (what, dst)]
            self.tls_args += ["-c", "ssl=on"]

    def preexec(self):
        if self.user is None:
            return None
        uid, gid = self.user

        def drop():
            os.setgid(gid)
            os.setgroups([])
            os.setuid(uid)
        return drop

    def _run(self, argv):
        p = subprocess.run(argv, stdin=subprocess.DEVNULL,
                           capture_output=True, cwd=self.dir,
                           preexec_fn=self.preexec(), timeout=120)
        if p.returncode != 0:
            raise RuntimeError("%s failed: %s" % (
                argv[0], p.stderr.decode(errors="replace")[-2000:]))

    def argv(self):
        return [_pg_bin("postgres"), "-D", self.data, "-k", self.dir,
                "-p", str(self.port), "-c", "listen_addresses=127.0.0.1",
                "-c", "max_connections=100"] + self.tls_args

    def ready(self):
        p = subprocess.run([_pg_bin("pg_isready"), "-h", "127.0.0.1", "-p",
                            str(self.port), "-U", "postgres", "-d",
                            "postgres", "-t", "1"],
                           capture_output=True)
        return p.returncode == 0

    def stop(self, sig=signal.SIGINT, timeout=30.0):
        # SIGINT: the fast shutdown (abort sessions, checkpoint).
        super().stop(sig, timeout)

    def sql(self, query):
        """Run query with psql; stdout as text."""
        p = subprocess.run([_pg_bin("psql"), "-h", "127.0.0.1", "-p",
                            str(self.port), "-U", "postgres", "-d",
                            "postgres", "-At", "-c", query],
                           capture_output=True, timeout=30)
        if p.returncode != 0:
            raise RuntimeError(p.stderr.decode(errors="replace"))
        return p.stdout.decode()

    @property
    def dsn(self):
        return ("host=127.0.0.1 port=%d user=postgres dbname=postgres "
                "connect_timeout=2" % self.port)


def etcd_call(port, path, body, timeout=5.0):
    """POST body (a dict) to etcd's JSON gateway at port; the answer as a
    dict, or None when nothing answered."""
    import http.client
    import json
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        c.request("POST", path, json.dumps(body),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        return json.loads(data) if data else {}
    except (OSError, ValueError):
        return None


class Etcd(Server):
    """One etcd member; alone (a cluster of one), or one of an
    EtcdCluster's. The election timeout is etcd's default (1 s), so the
    shortest lease etcd grants is 2 s."""

    name = "etcd"

    def __init__(self, member="default", cluster=None, peer_port=None,
                 extra=()):
        super().__init__()
        self.member = member
        self.peer_port = peer_port or free_port()
        self.cluster = cluster
        self.extra = list(extra)

    def argv(self):
        client = "http://127.0.0.1:%d" % self.port
        peer = "http://127.0.0.1:%d" % self.peer_port
        return ["etcd", "--name", self.member,
                "--data-dir", os.path.join(self.dir, "data"),
                "--listen-client-urls", client,
                "--advertise-client-urls", client,
                "--listen-peer-urls", peer,
                "--initial-advertise-peer-urls", peer,
                "--initial-cluster",
                self.cluster or "%s=%s" % (self.member, peer),
                "--initial-cluster-state", "new",
                "--log-level", "warn"] + self.extra

    def ready(self):
        return b'"health":"true"' in _ask(
            self.port,
            b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")

    def call(self, path, body, timeout=5.0):
        return etcd_call(self.port, path, body, timeout)

    def wipe(self):
        """Delete every key (a test's empty store)."""
        r = self.call("/v3/kv/deleterange", {"key": "AA==",
                                             "range_end": "AA=="})
        assert r is not None and "header" in r, r

    def status(self):
        """(member id, leader id, raft term) or None."""
        r = self.call("/v3/maintenance/status", {}, timeout=2.0)
        if not r or "leader" not in r:
            return None
        return r["header"]["member_id"], r["leader"], r.get("raftTerm")

    @property
    def endpoints(self):
        return "http://127.0.0.1:%d" % self.port


class EtcdTLS(Etcd):
    """One etcd member that serves clients over https only and asks each
    for a certificate of ca (--client-cert-auth); cert, key: its own,
    client: (cert, key) the tests' own calls show."""

    name = "etcd-tls"

    def __init__(self, ca, cert, key, client):
        super().__init__()
        self.ca, self.cert, self.key, self.client = ca, cert, key, client

    def argv(self):
        argv = super().argv()
        client = "https://127.0.0.1:%d" % self.port
        for flag in ("--listen-client-urls", "--advertise-client-urls"):
            argv[argv.index(flag) + 1] = client
        return argv + ["--cert-file", str(self.cert), "--key-file",
                       str(self.key), "--trusted-ca-file", str(self.ca),
                       "--client-cert-auth"]

    def _https(self, timeout):
        import http.client
        import ssl
        ctx = ssl.create_default_context(cafile=str(self.ca))
        ctx.load_cert_chain(str(self.client[0]), str(self.client[1]))
        return http.client.HTTPSConnection("127.0.0.1", self.port,
                                           timeout=timeout, context=ctx)

    def ready(self):
        try:
            c = self._https(1)
            c.request("GET", "/health")
            ok = b'"health":"true"' in c.getresponse().read()
            c.close()
            return ok
        except OSError:
            return False

    def call(self, path, body, timeout=5.0):
        import json
        try:
            c = self._https(timeout)
            c.request("POST", path, json.dumps(body),
                      {"Content-Type": "application/json"})
            data = c.getresponse().read()
            c.close()
            return json.loads(data) if data else {}
        except (OSError, ValueError):
            return None

    @property
    def endpoints(self):
        return "https://127.0.0.1:%d" % self.port


# Debian's zookeeperd: the server's jar names its dependencies in its
# manifest. A small heap and the client JIT keep the start near 2 s.
ZK_JAR = "/usr/share/java/zookeeper.jar"
ZK_JVM = ["-Xms16m", "-Xmx128m", "-XX:+UseSerialGC",
          "-XX:TieredStopAtLevel=1", "-Xshare:auto"]


def four_letters(port, word):
    """A four-letter-word command's answer (b"" when none): srvr, ruok
    and cons are whitelisted in the configuration below."""
    return _ask(port, word)


class ZooKeeper(Server):
    """One ZooKeeper server: standalone, or member myid of an ensemble
    (ZooKeeperEnsemble). tickTime is short, so that sessions can be
    short (2 to 20 ticks) and a dead leader is noticed quickly."""

    name = "zookeeper"
    TICK_MS = 200

    def __init__(self, myid=0):
        super().__init__()
        self.myid = myid
        self.quorum_port = free_port()
        self.election_port = free_port()
        self.members = None              # the ensemble's ZooKeepers

    def config(self):
        data = os.path.join(self.dir, "data")
        os.makedirs(data, exist_ok=True)
        lines = ["tickTime=%d" % self.TICK_MS,
                 "initLimit=20", "syncLimit=10",
                 "dataDir=%s" % data,
                 "clientPort=%d" % self.port,
                 "clientPortAddress=127.0.0.1",
                 "admin.enableServer=false",
                 # cons: the sessions connected ([watch] tests)
                 "4lw.commands.whitelist=srvr,ruok,cons",
                 # sessions of up to 60 s (the default stops at 20 ticks)
                 "maxSessionTimeout=60000",
                 "maxClientCnxns=0"]
        if self.members:
            with open(os.path.join(data, "myid"), "w") as f:
                f.write("%d\n" % self.myid)
            for m in self.members:
                lines.append("server.%d=127.0.0.1:%d:%d"
                             % (m.myid, m.quorum_port, m.election_port))
        path = os.path.join(self.dir, "zoo.cfg")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def argv(self):
        return (["java"] + ZK_JVM + ["-cp", ZK_JAR,
                "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                self.config()])

    def mode(self):
        """standalone, leader or follower; None while not serving (no
        quorum, starting, stopped)."""
        for line in four_letters(self.port, b"srvr").splitlines():
            if line.startswith(b"Mode: "):
                return line[6:].decode()
        return None

    def ready(self):
        return self.mode() is not None

    def launch(self):
        """Start without waiting: an ensemble member serves only once a
        quorum of members runs."""
        assert self.proc is None or self.proc.poll() is not None
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self.argv(), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            cwd=self.dir, start_new_session=True)
        log.close()

    @property
    def hosts(self):
        return "127.0.0.1:%d" % self.port


class ZooKeeperEnsemble:
    """Three ZooKeeper servers on loopback, in one quorum."""

    def __init__(self, size=3):
        self.members = [ZooKeeper(myid=i + 1) for i in range(size)]
        for m in self.members:
            m.members = self.members

    def start(self, timeout=60.0):
        for m in self.members:
            m.launch()
        self.wait_serving(timeout)
        return self

    def wait_serving(self, timeout=60.0, members=None):
        """Poll until every running member (or those given) serves."""
        todo = members or [m for m in self.members if m.running()]
        _poll(lambda: all(m.mode() is not None for m in todo), timeout,
              "zookeeper ensemble")

    def leader(self):
        for m in self.members:
            if m.running() and m.mode() == "leader":
                return m
        return None

    @property
    def hosts(self):
        return ",".join(m.hosts for m in self.members)

    def destroy(self):
        for m in self.members:
            m.destroy()


class EtcdCluster:
    """Three etcd members on loopback ports: start, find and kill the
    leader, start a member again on its data. Each member's ready probe
    (/health) passes only once the cluster has a leader."""

    def __init__(self, n=3):
        names = ["m%d" % i for i in range(n)]
        peers = [free_port() for _ in names]
        cluster = ",".join("%s=http://127.0.0.1:%d" % (m, p)
                           for m, p in zip(names, peers))
        self.members = [Etcd(m, cluster, p) for m, p in zip(names, peers)]

    def start(self, timeout=60.0):
        # Members wait for each other: start all, then poll each.
        for m in self.members:
            log = open(m.log_path, "ab")
            m.proc = subprocess.Popen(
                m.argv(), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                cwd=m.dir, start_new_session=True)
            log.close()
        for m in self.members:
            _poll(m.ready, timeout, "etcd " + m.member, m.proc, m.log_path)
        return self

    @property
    def endpoints(self):
        return ", ".join(m.endpoints for m in self.members)

    def running(self):
        return [m for m in self.members if m.running()]

    def leader(self, timeout=30.0):
        """The member that leads now (every running member agrees)."""
        found = []

        def agreed():
            ids = {}
            for m in self.running():
                st = m.status()
                if st is None or st[1] in ("0", None):
                    return False
                ids[st[0]] = (m, st[1])
            leaders = {lead for _, lead in ids.values()}
            if len(leaders) != 1:
                return False
            lead = leaders.pop()
            if lead not in ids:
                return False
            found[:] = [ids[lead][0]]
            return True
        _poll(agreed, timeout, "an etcd leader")
        return found[0]

    def wipe(self):
        self.running()[0].wipe()

    def destroy(self):
        for m in self.members:
            m.destroy()


class RespError(Exception):
    """An error reply."""


def _resp_read(f):
    line = f.readline()
    if not line.endswith(b"\r\n"):
        raise OSError("connection closed")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        return RespError(rest.decode(errors="replace"))
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)
        return data[:-2]
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_resp_read(f) for _ in range(n)]
    raise OSError("bad reply %r" % line)


def resp(port, *cmds, timeout=5):
    """Send each command (a tuple of arguments) on one connection, in
    order; the decoded replies (bytes, str, int, list, None, RespError)."""
    out = []
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        for c in cmds:
            parts = [b"*%d\r\n" % len(c)]
            for a in c:
                a = a if isinstance(a, bytes) else str(a).encode()
                parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
            s.sendall(b"".join(parts))
        f = s.makefile("rb")
        for _ in cmds:
            out.append(_resp_read(f))
    return out


def crc16(data):
    """Redis Cluster's CRC16 (XMODEM)."""
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xffff
    return crc


def key_slot(key):
    """The hash slot of key (str or bytes), hash tags included."""
    k = key.encode() if isinstance(key, str) else key
    i = k.find(b"{")
    if i >= 0:
        j = k.find(b"}", i + 1)
        if j > i + 1:
            k = k[i + 1:j]
    return crc16(k) & 16383


class ClusterNode(Redis):
    """One node of a RedisCluster: cluster mode, its own bus port."""

    name = "redis-node"

    def __init__(self, node_timeout_ms):
        super().__init__()
        self.bus_port = free_port()
        self.node_timeout_ms = node_timeout_ms

    def argv(self):
        return super().argv() + [
            "--cluster-enabled", "yes",
            "--cluster-config-file", os.path.join(self.dir, "nodes.conf"),
            "--cluster-port", str(self.bus_port),
            "--cluster-node-timeout", str(self.node_timeout_ms),
            # A replica that lost its master for a while may still take
            # over: the failover tests cut the link on purpose.
            "--cluster-replica-validity-factor", "0"]

    def call(self, *args):
        r = resp(self.port, args)[0]
        if isinstance(r, RespError):
            raise r
        return r

    def info(self, section):
        """INFO section ("cluster": CLUSTER INFO) as a dict."""
        if section == "cluster":
            text = self.call("CLUSTER", "INFO").decode()
        else:
            text = self.call("INFO", section).decode()
        return dict(ln.split(":", 1) for ln in text.splitlines()
                    if ":" in ln)

    def node_id(self):
        return self.call("CLUSTER", "MYID").decode()


class RedisCluster:
    """A Redis Cluster of 3 masters and 3 replicas, made with
    `redis-cli --cluster create ... --cluster-replicas 1` on free loopback
    ports (a client port and a bus port per node), with the interface of
    Server (start, stop, restart, pause, resume, destroy, running, url,
    command) applied to every node, and helpers to find a slot's master,
    wait for a failover and cut a replica's link."""

    name = "redis-cluster"
    NODE_TIMEOUT_MS = 3000

    def __init__(self, nodes=6):
        self.nodes = [ClusterNode(self.NODE_TIMEOUT_MS) for _ in range(nodes)]
        self.created = False

    @property
    def url(self):
        return ",".join(n.url for n in self.nodes)

    @property
    def proc(self):
        return self.nodes[0].proc

    @property
    def dir(self):
        return self.nodes[0].dir

    def running(self):
        return all(n.running() for n in self.nodes)

    def start(self, timeout=60.0):
        try:
            return self._start(timeout)
        except BaseException:
            self.stop(signal.SIGKILL)
            raise

    def _start(self, timeout):
        for n in self.nodes:
            if not n.running():
                n.start()
        if not self.created:
            p = subprocess.run(
                ["redis-cli", "--cluster", "create"]
                + ["127.0.0.1:%d" % n.port for n in self.nodes]
                + ["--cluster-replicas", "1", "--cluster-yes"],
                stdin=subprocess.DEVNULL, capture_output=True,
                timeout=120)
            if p.returncode != 0:
                raise RuntimeError("redis-cli --cluster create failed:\n%s"
                                   % (p.stdout + p.stderr).decode(
                                       errors="replace")[-3000:])
            self.created = True
        _poll(self.healthy, timeout, "redis cluster")
        return self

    def healthy(self):
        """Every running node says cluster_state:ok and agrees on one map
        whose masters all run, and each master has a replica in sync."""
        try:
            maps = set()
            for n in self.nodes:
                if not n.running():
                    continue
                if n.info("cluster").get("cluster_state") != "ok":
                    return False
                maps.add(tuple(sorted(self.slot_ranges(n))))
            if len(maps) != 1:
                return False
            ports = {n.port: n for n in self.nodes}
            for _, _, port in maps.pop():
                m = ports.get(port)
                if m is None or not m.running():
                    return False
                rep = m.info("replication")
                if rep.get("role") != "master":
                    return False
                live = [r for r in self.nodes if r is not m and r.running()
                        and r.info("replication").get("master_port")
                        == str(m.port)]
                if live and not all(
                        r.info("replication").get("master_link_status")
                        == "up" for r in live):
                    return False
            return True
        except (OSError, RespError):
            return False

    @staticmethod
    def slot_ranges(node):
        """[(start, end, master port)] from CLUSTER SLOTS on node."""
        out = []
        for e in node.call("CLUSTER", "SLOTS"):
            out.append((e[0], e[1], e[2][1]))
        return out

    def live(self):
        return [n for n in self.nodes if n.running()]

    def master_of(self, slot):
        """The node that serves slot now, as a live node's map says."""
        for start, end, port in self.slot_ranges(self.live()[0]):
            if start <= slot <= end:
                return next(n for n in self.nodes if n.port == port)
        raise LookupError(slot)

    def masters(self):
        ports = sorted({p for _, _, p in self.slot_ranges(self.live()[0])})
        return [n for n in self.nodes if n.port in ports]

    def replica_of(self, master):
        for n in self.live():
            if n is master:
                continue
            try:
                if n.info("replication").get("master_port") == \
                        str(master.port):
                    return n
            except (OSError, RespError):
                continue
        raise LookupError(master.port)

    def wait_synced(self, master, timeout=20.0):
        """Poll until master's replica has everything master wrote."""
        def synced():
            rep = master.info("replication")
            off = rep.get("master_repl_offset")
            slave = rep.get("slave0", "")
            return ("offset=%s," % off) in slave + ","
        _poll(synced, timeout, "replica in sync")

    def command(self, *args):
        """FLUSHALL on every master (the raw +OK), or one keyed command
        sent to its slot's master (the first read's raw bytes)."""
        if args and str(args[0]).upper() in ("FLUSHALL", "FLUSHDB"):
            replies = [m.command(*args) for m in self.masters()]
            ok = all(r == b"+OK\r\n" for r in replies)
            return b"+OK\r\n" if ok else b"".join(r or b"" for r in replies)
        return self.master_of(key_slot(args[1])).command(*args)

    def stop(self, sig=signal.SIGTERM, timeout=30.0):
        for n in self.nodes:
            n.stop(sig, timeout)

    def restart(self):
        self.stop()
        return self.start()

    def pause(self):
        for n in self.live():
            n.pause()

    def resume(self):
        for n in self.nodes:
            if n.running():
                n.resume()

    def kill9(self):
        self.stop(signal.SIGKILL)

    def destroy(self):
        for n in self.nodes:
            n.destroy()

    def log(self):
        return "\n".join(n.log() for n in self.nodes)


class Relay:
    """A TCP relay on a free loopback port to 127.0.0.1:target, between a
    client (a sidecar) and a server (its lock store), that can be cut:
    cut() stops forwarding in both directions without closing anything
    (bytes wait in the sockets, new connections are accepted and left
    unanswered), as a network partition looks to both ends; resume()
    forwards everything that waited and connects what was accepted.
    Threads, standard library; stop() closes every connection."""

    def __init__(self, target):
        self.target = target
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.open = threading.Event()
        self.open.set()
        self.stopping = threading.Event()
        self.socks = []
        self.lock = threading.Lock()
        self.accepted = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def cut(self):
        self.open.clear()

    def resume(self):
        self.open.set()

    def _keep(self, s):
        with self.lock:
            self.socks.append(s)

    def _accept(self):
        while not self.stopping.is_set():
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            self._keep(c)
            with self.lock:
                self.accepted += 1
            threading.Thread(target=self._connect, args=(c,),
                             daemon=True).start()

    def _connect(self, c):
        self.open.wait()
        if self.stopping.is_set():
            return
        try:
            u = socket.create_connection(("127.0.0.1", self.target),
                                         timeout=5)
        except OSError:
            c.close()
            return
        u.settimeout(None)
        self._keep(u)
        for pump, a, b in ((self._pump, c, u), (self._answer, u, c)):
            threading.Thread(target=pump, args=(a, b), daemon=True).start()

    def _answer(self, src, dst):
        """The server's bytes to the client."""
        self._pump(src, dst)

    def _pump(self, src, dst):
        while True:
            self.open.wait()
            if self.stopping.is_set():
                return
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            # A cut that came while we were reading holds these bytes.
            self.open.wait()
            if self.stopping.is_set():
                return
            try:
                if not data:
                    dst.shutdown(socket.SHUT_WR)
                    return
                dst.sendall(data)
            except OSError:
                return

    def stop(self):
        self.stopping.set()
        self.open.set()
        for s in [self.lsock] + self.socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass


class Liar(Relay):
    """A Relay that can answer for its server: after lie(answer), the
    server's next bytes to the client are dropped, and the client gets
    answer's chunks instead (answer() yields bytes; sent until it ends or
    the client stops reading), and the connection is closed. As a store
    that is broken, hostile, or not the store looks to its client. sent
    counts the lie's bytes that left."""

    def __init__(self, target):
        self.answer = None
        self.sent = 0
        super().__init__(target)

    def lie(self, answer):
        self.answer = answer

    def _answer(self, src, dst):
        while not self.stopping.is_set():
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            try:
                if not data:
                    dst.shutdown(socket.SHUT_WR)
                    return
                if self.answer is None:
                    dst.sendall(data)
                    continue
                for chunk in self.answer():
                    if self.stopping.is_set():
                        return
                    dst.sendall(chunk)
                    self.sent += len(chunk)
            except OSError:
                pass
            for s in (dst, src):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            return


KINDS = {"redis": Redis, "postgres": Postgres, "etcd": Etcd,
         "redis-cluster": RedisCluster, "zookeeper": ZooKeeper}


# ------------------------------------------------------------- backends


def _http_status(port, method="GET", path="/", host="127.0.0.1"):
    """The status of one request, or None when nothing answers."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=1)
        s.sendall(("%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n"
                   "\r\n" % (method, path, host)).encode())
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        s.close()
        parts = data.split(b" ", 2)
        return int(parts[1]) if len(parts) > 1 else None
    except (OSError, ValueError):
        return None


def _find(name, dirs=("/usr/sbin", "/sbin")):
    found = shutil.which(name)
    if found:
        return found
    for d in dirs:
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    return None


class DavServer(Server):
    """A WebDAV server whose collection /dav/ is the directory self.root
    + "/dav". Its workers run as www-data when we are root, so the
    directories they write are given to that user."""

    prefix = "/dav/"

    def __init__(self):
        super().__init__()
        self.docroot = os.path.join(self.dir, "root")
        self.root = os.path.join(self.docroot, "dav")
        os.makedirs(self.root)
        self.user = None
        if os.geteuid() == 0:
            pw = pwd.getpwnam("www-data")
            self.user = (pw.pw_name, pw.pw_uid, pw.pw_gid)
            for d in (self.docroot, self.root):
                os.chown(d, pw.pw_uid, pw.pw_gid)

    @classmethod
    def available(cls):
        """None when this server can run here, else why not."""
        raise NotImplementedError

    def ready(self):
        return _http_status(self.port, "GET", self.prefix) == 200

    def path(self, rel):
        """The file behind /dav/rel on the server's disk."""
        return os.path.join(self.root, rel)

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def write_conf(self, workdir, name):
        """Make self.dir/workdir (the workers' own when they run as
        www-data) and write self.conf() to self.dir/name; its path."""
        d = os.path.join(self.dir, workdir)
        os.makedirs(d, exist_ok=True)
        if self.user is not None:
            os.chown(d, self.user[1], self.user[2])
        conf = os.path.join(self.dir, name)
        with open(conf, "w") as f:
            f.write(self.conf())
        return conf


APACHE_MODULES = "/usr/lib/apache2/modules"


class Apache(DavServer):
    """Debian's apache2 with mod_dav and mod_dav_fs, event MPM in the
    foreground (-DFOREGROUND), with our own ServerRoot, PidFile, logs and
    lock database."""

    name = "apache"

    @classmethod
    def available(cls):
        if _find("apache2") is None:
            return "apache2 is not installed (make deps)"
        if not os.path.exists(os.path.join(APACHE_MODULES, "mod_dav.so")):
            return "mod_dav is missing from %s" % APACHE_MODULES
        return None

    def conf(self):
        user = ""
        if self.user is not None:
            user = "User %s\nGroup %s\n" % (self.user[0], self.user[0])
        mods = ["mpm_event", "authz_core", "dir", "mime", "autoindex",
                "dav", "dav_fs"]
        load = "".join("LoadModule %s_module %s/mod_%s.so\n"
                       % (m, APACHE_MODULES, m) for m in mods)
        return (load + user +
                "ServerRoot %(d)s\n"
                "ServerName 127.0.0.1\n"
                "Listen 127.0.0.1:%(port)d\n"
                "PidFile %(d)s/apache.pid\n"
                "ErrorLog %(d)s/server.log\n"
                "LogLevel warn\n"
                "LogFormat \"%%h %%r %%>s\" tm\n"
                "CustomLog %(d)s/access.log tm\n"
                "StartServers 1\nServerLimit 1\nThreadsPerChild 16\n"
                "MaxRequestWorkers 16\n"
                "KeepAlive On\n"
                "TypesConfig /etc/mime.types\n"
                "DocumentRoot %(docroot)s\n"
                "DavLockDB %(d)s/davlock/db\n"
                "<Directory />\n  Require all granted\n"
                "  Options Indexes\n</Directory>\n"
                "<Directory %(root)s>\n  Dav On\n</Directory>\n"
                % {"d": self.dir, "port": self.port,
                   "docroot": self.docroot, "root": self.root})

    def argv(self):
        conf = self.write_conf("davlock", "apache.conf")
        return [_find("apache2"), "-d", self.dir, "-f", conf,
                "-DFOREGROUND"]

    def stop(self, sig=signal.SIGTERM, timeout=30.0):
        # SIGTERM to the parent stops its children too.
        super().stop(sig, timeout)


NGINX_DAV_EXT = "/usr/lib/nginx/modules/ngx_http_dav_ext_module.so"


class NginxDav(DavServer):
    """Debian's nginx: its own DAV module (PUT DELETE MKCOL COPY MOVE)
    and the dav-ext module (PROPFIND OPTIONS), with our own prefix, pid
    and temp paths."""

    name = "nginx-dav"

    @classmethod
    def available(cls):
        ng = _find("nginx")
        if ng is None:
            return "nginx is not installed (make deps)"
        v = subprocess.run([ng, "-V"], capture_output=True, text=True)
        if "--with-http_dav_module" not in v.stderr:
            return "this nginx has no DAV module"
        if not os.path.exists(NGINX_DAV_EXT):
            return "libnginx-mod-http-dav-ext is not installed (make deps)"
        return None

    def conf(self):
        user = ""
        if self.user is not None:
            user = "user %s;\n" % self.user[0]
        tmp = os.path.join(self.dir, "tmp")
        return (
            "load_module %(ext)s;\n" % {"ext": NGINX_DAV_EXT} + user +
            "daemon off;\n"
            "worker_processes 1;\n"
            "pid %(d)s/nginx.pid;\n"
            "error_log %(d)s/server.log warn;\n"
            "events { worker_connections 256; }\n"
            "http {\n"
            "  access_log %(d)s/access.log;\n"
            "  client_body_temp_path %(tmp)s/body;\n"
            "  proxy_temp_path %(tmp)s/proxy;\n"
            "  fastcgi_temp_path %(tmp)s/fastcgi;\n"
            "  uwsgi_temp_path %(tmp)s/uwsgi;\n"
            "  scgi_temp_path %(tmp)s/scgi;\n"
            "  server {\n"
            "    listen 127.0.0.1:%(port)d;\n"
            "    root %(docroot)s;\n"
            "    location /dav/ {\n"
            "      dav_methods PUT DELETE MKCOL COPY MOVE;\n"
            "      dav_ext_methods PROPFIND OPTIONS;\n"
            "      create_full_put_path on;\n"
            "      dav_access user:rw group:rw all:r;\n"
            "      client_max_body_size 0;\n"
            "      autoindex on;\n"
            "    }\n"
            "  }\n"
            "}\n" % {"d": self.dir, "tmp": tmp, "port": self.port,
                      "docroot": self.docroot})

    def argv(self):
        conf = self.write_conf("tmp", "nginx.conf")
        return [_find("nginx"), "-p", self.dir + "/", "-c", conf,
                "-e", os.path.join(self.dir, "server.log")]

    def stop(self, sig=signal.SIGTERM, timeout=30.0):
        # SIGTERM is nginx's fast shutdown.
        super().stop(sig, timeout)


S3DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))), "s3")


class S3rver(Server):
    """s3rver (npm, installed into tests/s3 by make deps; serve.js runs
    its command line): an S3 server on disk that checks AWS signatures,
    V2 and V4 (the Host, every signed header, the payload hash), with the
    access key S3RVER and the secret S3RVER. Buckets are path-style; the
    bucket self.bucket exists from the start."""

    name = "s3rver"
    access_key = "S3RVER"
    secret_key = "S3RVER"
    bucket = "tidemark"

    @classmethod
    def available(cls):
        if _find("node") is None:
            return "node is not installed (make deps)"
        if not os.path.exists(os.path.join(S3DIR, "node_modules")):
            return "s3rver is not installed in tests/s3 (make deps)"
        return None

    def argv(self):
        data = os.path.join(self.dir, "data")
        os.makedirs(data, exist_ok=True)
        return [_find("node"), os.path.join(S3DIR, "serve.js"), "-d", data,
                "-a", "127.0.0.1", "-p", str(self.port),
                "--no-vhost-buckets", "--configure-bucket", self.bucket]

    def ready(self):
        # Any answer from the HTTP server (403: our probe is unsigned).
        return _http_status(self.port, "GET", "/") is not None

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port


BACKENDS = {"apache": Apache, "nginx": NginxDav, "s3rver": S3rver}
