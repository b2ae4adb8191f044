#!/usr/bin/python3
"""make bench-marks-counts: what a refusal costs as the marks grow, in
counts that do not move with the machine's load (make bench-marks gives
the timed figures). For each count in MARKS_COUNTS, an LMDB store holding
that many marks (documents/m0 .. documents/m<count-1>, mark 1000, written
by premark as marks.sh does) is served by tidemark while MARKS_CONNECTIONS
keep-alive clients send PUTs with token 1 to resources drawn at random
(a fixed seed), one request on each connection a round: every answer is a
409, and beyond [store] cache_entries most are cache misses. Per refusal:

- instructions, user space, every thread (valgrind's callgrind): the
  count after MARKS_MANY refusals minus the count after MARKS_FEW, over
  (MANY - FEW), both after MARKS_WARM refusals; from the same runs, the
  data cache misses of callgrind's cache model (D1: the first level, LL:
  the last, as valgrind sizes them for this CPU), and the calls to
  malloc, mdb_get, mdb_txn_renew and lmdb_raise (a raise through the
  writer). How the loop's passes fall moves the instructions by about
  0.5% from run to run;
- system calls (perf stat -e raw_syscalls:sys_enter -p) and page faults
  (minflt, majflt of /proc/PID/stat), every thread, over MARKS_RUN
  refusals after the warm-up, tidemark run without valgrind (the first
  touch of each page of the map faults: over a run as long as make
  bench-marks' the faults spread thin, over a short one they do not);
- RSS at the end of that run (the pages of the map it touched count:
  they are the file's, in the page cache, not memory of tidemark's own).

Env: TIDEMARK_BIN (./tidemark), PREMARK (build/tools/premark),
MARKS_COUNTS ("1000 10000000"), MARKS_CONNECTIONS (32), MARKS_WARM
(2000), MARKS_FEW (2000), MARKS_MANY (10000), MARKS_RUN (200000),
MARKS_STORES (a folder: keep the stores there as
store-<count>/marks.lmdb and reuse them on the next run; by default they
are written into a temporary folder), MARKS_PROFILE (a folder: keep each
callgrind file there, for callgrind_annotate).
"""
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from common import free_port, wait_until  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "bench"))
from proxies import read_answer, tidemark_ini  # noqa: E402

COUNTS = [int(c) for c in
          os.environ.get("MARKS_COUNTS", "1000 10000000").split()]
CONNS = int(os.environ.get("MARKS_CONNECTIONS", "32"))
WARM = int(os.environ.get("MARKS_WARM", "2000"))
FEW = int(os.environ.get("MARKS_FEW", "2000"))
MANY = int(os.environ.get("MARKS_MANY", "10000"))
RUN = int(os.environ.get("MARKS_RUN", "200000"))
BIN = os.environ.get("TIDEMARK_BIN", str(ROOT / "tidemark"))
PREMARK = os.environ.get("PREMARK", str(ROOT / "build" / "tools" / "premark"))
STORES = os.environ.get("MARKS_STORES", "")
PROFILE = os.environ.get("MARKS_PROFILE", "")
MARK = 1000
BODY = b'{"state":"bench"}\n'
# Functions whose calls are counted from callgrind's files.
CALLED = ("malloc", "mdb_get", "mdb_txn_renew", "lmdb_raise")


def ini(d, store, port):
    return tidemark_ini(d, port, "http://127.0.0.1:9",
                        store="path = %s\nmap_size = 2G\n" % store)


class Clients:
    """CONNS keep-alive connections sending stale PUTs in rounds."""

    def __init__(self, port, count):
        self.socks = [socket.create_connection(("127.0.0.1", port), 120)
                      for _ in range(CONNS)]
        self.rng = random.Random(7)
        self.count = count

    def request(self):
        return (b"PUT /v1/documents/m%d HTTP/1.1\r\nHost: b\r\n"
                b"Fencing-Token: 1\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s"
                % (self.rng.randrange(self.count), len(BODY), BODY))

    @staticmethod
    def answer(s):
        data = read_answer(s)
        if not data.startswith(b"HTTP/1.1 409"):
            raise RuntimeError("answered %r, not 409" % data[:60])

    def send(self, n):
        while n > 0:
            k = min(n, len(self.socks))
            for s in self.socks[:k]:
                s.sendall(self.request())
            for s in self.socks[:k]:
                self.answer(s)
            n -= k

    def close(self):
        for s in self.socks:
            s.close()


def start(argv, port):
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)

    def up():
        if proc.poll() is not None:
            raise RuntimeError("%s exited: %d" % (argv[0], proc.returncode))
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return True
        except OSError:
            return False
    wait_until(up, 600, "tidemark listening", interval=0.01)
    return proc


def stop(proc):
    proc.terminate()
    proc.wait(300)


def callgrind(store, count, total, d):
    """Events callgrind counted (by name: Ir, and with its cache model
    D1mr, DLmr, ...) and calls made in a run that refused WARM + total
    requests."""
    port = free_port()
    out = os.path.join(d, "callgrind.out")
    proc = start(["valgrind", "--tool=callgrind", "--cache-sim=yes",
                  "--callgrind-out-file=" + out, BIN,
                  "-c", ini(d, store, port)], port)
    try:
        c = Clients(port, count)
        c.send(WARM + total)
        c.close()
    finally:
        stop(proc)
    calls = dict.fromkeys(CALLED, 0)
    names = {}
    target = None
    events = []
    totals = {}
    with open(out) as f:
        for line in f:
            # Names are compressed: "(id) name" the first time, by fn=
            # or cfn=, then "(id)" alone.
            m = re.match(r"(c?)fn=\((\d+)\)(?: (.*))?", line)
            if m:
                if m.group(3):
                    names[m.group(2)] = m.group(3).strip()
                target = names.get(m.group(2)) if m.group(1) else None
                continue
            if line.startswith("calls=") and target in calls:
                calls[target] += int(line[6:].split()[0])
                continue
            if line.startswith("events:"):
                events = line.split()[1:]
            m = re.match(r"(?:summary|totals):((?: \d+)+)", line)
            if m:
                totals = dict(zip(events, map(int, m.group(1).split())))
    if PROFILE:
        os.makedirs(PROFILE, exist_ok=True)
        shutil.copy(out, os.path.join(PROFILE, "callgrind.out.%d.%d"
                                      % (count, total)))
    os.unlink(out)
    return totals, calls


def counted(store, count, d):
    """Faults and system calls over RUN refusals after the warm-up, and
    RSS at the end."""
    port = free_port()
    proc = start([BIN, "-c", ini(d, store, port)], port)
    try:
        c = Clients(port, count)
        c.send(WARM)
        f0 = faults(proc.pid)
        perf = subprocess.Popen(
            ["perf", "stat", "-x", ",", "-e", "raw_syscalls:sys_enter",
             "-p", str(proc.pid)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)  # perf attaches; calls before are not counted
        c.send(RUN)
        perf.send_signal(signal.SIGINT)
        err = perf.communicate(60)[1]
        f1 = faults(proc.pid)
        rss_end = rss_kb(proc.pid)
        c.close()
    finally:
        stop(proc)
    m = re.search(r"^(\d+),,raw_syscalls:sys_enter", err, re.M)
    calls = int(m.group(1)) if m else float("nan")
    return {"minflt": (f1[0] - f0[0]) / RUN, "majflt": (f1[1] - f0[1]) / RUN,
            "syscalls": calls / RUN, "rss_mb": rss_end / 1024}


def faults(pid):
    with open("/proc/%d/stat" % pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return int(v[7]), int(v[9])  # minflt, majflt (fields 10 and 12)


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"^VmRSS:\s+(\d+)", f.read(), re.M).group(1))


def store_for(count, tmp):
    base = STORES or tmp
    path = os.path.join(base, "store-%d" % count, "marks.lmdb")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        print("marks-counts: writing %d marks" % count, file=sys.stderr)
        subprocess.run([PREMARK, path, "documents/m", str(count), str(MARK),
                        str(2 << 30)], check=True, stdout=subprocess.DEVNULL)
    return path


def main():
    for tool in ("valgrind", "perf", PREMARK, BIN):
        if not shutil.which(tool):
            sys.exit("marks-counts: %s not found" % tool)
    print("marks-counts: per refusal (token 1 below mark %d, random "
          "resources, %d connections): instructions (callgrind, count at "
          "%d - count at %d refusals, after %d), calls, system calls and "
          "page faults over %d refusals after %d"
          % (MARK, CONNS, MANY, FEW, WARM, RUN, WARM))
    print("%-9s %9s %7s %7s %7s %7s %7s %7s %8s %8s %8s %8s"
          % ("marks", "instr", "D1miss", "LLmiss", "malloc", "mdb_get",
             "renew", "raise", "syscalls", "minflt", "majflt", "rss_mb"))
    with tempfile.TemporaryDirectory(prefix="tidemark-marks-") as tmp:
        for count in COUNTS:
            store = store_for(count, tmp)
            with tempfile.TemporaryDirectory(dir=tmp) as d:
                few, few_calls = callgrind(store, count, FEW, d)
                many, calls = callgrind(store, count, MANY, d)
                n = counted(store, count, d)
            per = dict((k, (calls[k] - few_calls[k]) / (MANY - FEW))
                       for k in CALLED)
            ev = dict((k, (many[k] - few[k]) / (MANY - FEW)) for k in many)
            print("%-9d %9.0f %7.1f %7.1f %7.2f %7.2f %7.2f %7.2f %8.2f "
                  "%8.4f %8.4f %8.1f"
                  % (count, ev["Ir"], ev["D1mr"] + ev["D1mw"],
                     ev["DLmr"] + ev["DLmw"], per["malloc"],
                     per["mdb_get"], per["mdb_txn_renew"], per["lmdb_raise"],
                     n["syscalls"], n["minflt"], n["majflt"], n["rss_mb"]))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
