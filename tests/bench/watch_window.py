#!/usr/bin/python3
"""make bench-watch: the window a [watch] leaves. A lock changes hands:
holder A's lease ends in the store while B waits; until tidemark has
raised the mark to B's fence, a write of the paused A still passes. This
measures that window, from the end of A's lease to the mark raised (the
time of tidemark's "mark raised" log line, written once the mark store
has accepted the raise), on a 3-member etcd cluster and on a 3-server
ZooKeeper ensemble (tests/integration/servers.py), one tidemark
following both:

- etcd revoke: A's lease revoked (a release; the window runs from the
  revoke's answer);
- etcd TTL: A's lease not kept alive: from the time its TTL ends, so the
  figure adds etcd's own expiry check to the watch;
- zookeeper close: A's session closed (a release, or a client that
  stops; from the close's return);
- zookeeper expiry: A's process killed, its session left to expire: from
  the kill plus the session timeout.

Locks are taken as etcd's Mutex (a key <prefix><name>/<lease hex> under
the lease) and kazoo's Lock (an ephemeral sequential <uuid>__lock__<seq>)
take them. Log times are to the millisecond (truncated). Raw output in
tests/bench/results/<UTC time>-watch/: rounds.txt, one line a round
(case round window_ms from_send_ms: a revoke's or close's answer may
come after the mark was raised, so the window from its return can be
below 0; from its sending is the bound), and summary.txt.

Env: WATCH_ROUNDS (50: the revoke and close cases), WATCH_TTL_ROUNDS
(10: the TTL and expiry cases, seconds each), TIDEMARK_BIN (./tidemark).
"""
import base64
import datetime
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from common import wait_until  # noqa: E402
from daemon import Tidemark  # noqa: E402
import servers  # noqa: E402

ROUNDS = int(os.environ.get("WATCH_ROUNDS", "50"))
TTL_ROUNDS = int(os.environ.get("WATCH_TTL_ROUNDS", "10"))
ETCD_TTL_S = 2          # etcd's shortest lease with its default timeouts
ZK_SESSION_MS = 2000    # asked for by the holder whose session expires


class Log:
    """tidemark's log, read as it grows."""

    def __init__(self, path):
        self.path = path
        self.pos = 0
        self.lines = []

    def when(self, needle, timeout=20.0):
        """The time (epoch seconds) of the first line with needle."""
        deadline = time.monotonic() + timeout
        while True:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                data = f.read()
            cut = data.rfind(b"\n") + 1
            self.pos += cut
            self.lines.extend(data[:cut].decode(errors="replace")
                              .splitlines())
            for ln in self.lines:
                if needle in ln:
                    t = datetime.datetime.strptime(
                        ln.split(" ", 1)[0], "%Y-%m-%dT%H:%M:%S.%fZ")
                    return t.replace(
                        tzinfo=datetime.timezone.utc).timestamp()
            if time.monotonic() > deadline:
                raise RuntimeError("no log line with %r" % needle)
            time.sleep(0.005)


def b64(s):
    return base64.b64encode(s.encode()).decode()


class EtcdLocks:
    """Leases and lock keys on etcd, as concurrency.Mutex makes them."""

    def __init__(self, member):
        self.m = member

    def call(self, path, body):
        r = self.m.call(path, body)
        if r is None or "header" not in r:
            raise RuntimeError("etcd %s: %r" % (path, r))
        return r

    def take(self, name, ttl):
        """A lease of ttl s and a key under it: (lease id, create rev)."""
        lease = int(self.call("/v3/lease/grant", {"TTL": ttl})["ID"])
        key = "locks/%s/%x" % (name, lease)
        r = self.call("/v3/kv/put", {"key": b64(key), "value": "",
                                     "lease": str(lease)})
        return lease, int(r["header"]["revision"])

    def revoke(self, lease):
        self.call("/v3/lease/revoke", {"ID": str(lease)})


def raised(log, section, res, fence):
    return log.when("watch %s: %s: the holder changed: mark raised to %d"
                    % (section, res, fence))


def etcd_round(tm, log, locks, i, ttl_case):
    """One change of holder on etcd: (window from the lease's end, from
    the revoke's sending), in ms."""
    name = "t%d" % i if ttl_case else "r%d" % i
    res = "e/" + name
    granted = time.time()       # at the latest, etcd grants after this
    lease_a, rev_a = locks.take(name, ETCD_TTL_S if ttl_case else 60)
    lease_b, rev_b = locks.take(name, 60)
    raised(log, "e", res, rev_a)
    if ttl_case:
        # A's lease ends TTL seconds after its grant (no keepalive)
        end = sent = granted + ETCD_TTL_S
    else:
        sent = time.time()
        locks.revoke(lease_a)
        end = time.time()
    t = raised(log, "e", res, rev_b)
    locks.revoke(lease_b)
    return (t - end) * 1e3, (t - sent) * 1e3


HOLDER = r"""
import sys
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1], timeout=float(sys.argv[3]))
zk.start()
path = zk.create(sys.argv[2], b"", ephemeral=True, sequence=True,
                 makepath=True)
print(zk.exists(path).czxid, zk._session_timeout, flush=True)
sys.stdin.readline()
"""


def contender(zk, lock):
    """A contender node as kazoo's Lock makes it: its czxid."""
    path = zk.create("%s/%s__lock__" % (lock, uuid.uuid4().hex), b"",
                     ephemeral=True, sequence=True, makepath=True)
    return zk.exists(path).czxid


def zk_round(tm, log, hosts, i, expiry_case):
    """One change of holder on ZooKeeper, as etcd_round."""
    from kazoo.client import KazooClient
    name = "x%d" % i if expiry_case else "c%d" % i
    lock, res = "/bench/locks/" + name, "z/" + name
    a = holder = None
    if expiry_case:
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, hosts,
             "%s/%s__lock__" % (lock, uuid.uuid4().hex),
             str(ZK_SESSION_MS / 1e3)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        czxid_a, session_ms = (int(x) for x in
                               holder.stdout.readline().split())
    else:
        a = KazooClient(hosts=hosts, timeout=10.0)
        a.start()
        czxid_a = contender(a, lock)
    b = KazooClient(hosts=hosts, timeout=10.0)
    b.start()
    try:
        czxid_b = contender(b, lock)
        raised(log, "z", res, czxid_a)
        sent = time.time()
        if expiry_case:
            holder.kill()               # its session lives on, then expires
            holder.wait()
            end = sent + session_ms / 1e3
        else:
            a.stop()                    # closes the session
            end = time.time()
        t = raised(log, "z", res, czxid_b)
    finally:
        if a is not None:
            a.close()
        b.stop()
        b.close()
    return (t - end) * 1e3, (t - sent) * 1e3


def pct(xs, p):
    """Nearest-rank percentile."""
    s = sorted(xs)
    return s[max(0, min(len(s) - 1, int(round(p / 100 * len(s) + 0.5)) - 1))]


def line(case, xs):
    return ("%-18s n=%-3d min %7.1f  median %7.1f  p99 %7.1f  max %7.1f ms"
            % (case, len(xs), min(xs), statistics.median(xs), pct(xs, 99),
               max(xs)))


def version(argv):
    return subprocess.run(argv, capture_output=True,
                          text=True).stdout.split("\n")[0].strip()


def zk_version(zk):
    for ln in servers.four_letters(zk.members[0].port,
                                   b"srvr").decode().splitlines():
        if ln.startswith("Zookeeper version: "):
            return ln.split()[2].split("-")[0].rstrip(",")
    return "?"


def main():
    stamp = datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ")
    out = ROOT / "tests" / "bench" / "results" / (stamp + "-watch")
    out.mkdir(parents=True)
    etcd = servers.EtcdCluster(3)
    zk = servers.ZooKeeperEnsemble(3)
    tm = None
    try:
        etcd.start()
        zk.start(timeout=120)
        tm = Tidemark(tempfile.mkdtemp(prefix="tidemark-bench-watch-"),
                      config={
                          "upstream default": {"url": "http://127.0.0.1:9"},
                          "watch e": {"endpoints": etcd.endpoints,
                                      "prefix": "locks/",
                                      "resource": "e/{name}"},
                          "watch z": {"backend": "zookeeper",
                                      "hosts": zk.hosts,
                                      "prefix": "/bench/locks",
                                      "resource": "z/{name}"}})
        tm.start()
        wait_until(lambda: tm.admin("GET", "/readyz")[0] == 200, 30,
                   "tidemark ready, both watches ok")
        log = Log(tm.log_path)
        locks = EtcdLocks(etcd.members[0])
        cases = [("etcd revoke", ROUNDS,
                  lambda i: etcd_round(tm, log, locks, i, False)),
                 ("zookeeper close", ROUNDS,
                  lambda i: zk_round(tm, log, zk.hosts, i, False)),
                 ("etcd TTL", TTL_ROUNDS,
                  lambda i: etcd_round(tm, log, locks, i, True)),
                 ("zookeeper expiry", TTL_ROUNDS,
                  lambda i: zk_round(tm, log, zk.hosts, i, True))]
        results, sent = {}, {}
        with open(out / "rounds.txt", "w") as f:
            for case, n, fn in cases:
                results[case], sent[case] = [], []
                for i in range(n):
                    w, s = fn(i)
                    results[case].append(w)
                    sent[case].append(s)
                    f.write("%s %d %.1f %.1f\n" % (case.replace(" ", "-"),
                                                   i, w, s))
                    f.flush()
        head = ["bench-watch %s UTC: from a holder's lease ending to the "
                "mark raised (ms)" % stamp,
                "etcd %s, 3 members; ZooKeeper %s, 3 servers (tickTime "
                "%d ms); %s; %d cores" % (
                    version(["etcd", "--version"]).split()[-1],
                    zk_version(zk), servers.ZooKeeper.TICK_MS,
                    version([os.environ.get("TIDEMARK_BIN",
                                            str(ROOT / "tidemark")),
                             "--version"]), os.cpu_count()),
                "load average at the end: %s" % " ".join(
                    open("/proc/loadavg").read().split()[:3]),
                "etcd TTL: from grant + %d s; zookeeper expiry: from the "
                "kill + the session timeout (%d ms asked)" % (
                    ETCD_TTL_S, ZK_SESSION_MS)]
        text = "\n".join(
            head + ["from the lease's end (revoke, close: the call's "
                    "return):"] +
            [line(c, results[c]) for c, _, _ in cases] +
            ["from sending the revoke or close (the lease ends between "
             "the send and the return), the TTL's end, the kill:"] +
            [line(c, sent[c]) for c, _, _ in cases])
        (out / "summary.txt").write_text(text + "\n")
        print(text)
        print("raw output: %s" % out)
    finally:
        if tm is not None:
            tm.stop()
        zk.destroy()
        etcd.destroy()


if __name__ == "__main__":
    main()
