#!/usr/bin/python3
"""make bench-instr: instructions per request on the equal path, counted
by valgrind (callgrind), so that the figure does not move with the
machine's load: tidemark against nginx (one process, master_process off)
in front of the same upstream (an nginx, return 200, not counted). One
keep-alive client sends PUTs with an equal Fencing-Token to
INSTR_RESOURCES resources, one at a time (INSTR_WORKLOAD=rising: each
with a token one above the last, so that every request is a durable
raise, handed to the store's writer thread). Each proxy is counted over
INSTR_FEW and INSTR_MANY requests (after the same warm-up); the
difference over (MANY - FEW) requests is the cost of one request, start
and stop left out. Callgrind counts instructions, not cache misses or
system call time: the kernel's share is not in it.

Each thread is counted apart (--separate-threads); the figure is their
sum, and tidemark's line is followed by each thread's share (thread 1 is
the main thread, which runs the network loop).

Env: TIDEMARK_BIN (./tidemark), INSTR_WORKLOAD (equal or rising), INSTR_BINS ("NAME=PATH ...": more
tidemark binaries), INSTR_FEW (2000), INSTR_MANY (6000),
INSTR_RESOURCES (1000), INSTR_PROFILE (a folder: keep each run's
callgrind.out there for callgrind_annotate), BENCH_RESULTS
(tests/bench/results: what it prints is also kept in a new
<time>-instr/summary.txt there).
"""
import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from proxies import (PROXY_PASS, nginx_argv, nginx_conf, read_answer,  # noqa: E402
                     tidemark_ini, wait_port)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from common import free_port  # noqa: E402

FEW = int(os.environ.get("INSTR_FEW", "2000"))
MANY = int(os.environ.get("INSTR_MANY", "6000"))
RES = int(os.environ.get("INSTR_RESOURCES", "1000"))
PROFILE = os.environ.get("INSTR_PROFILE", "")
WORKLOAD = os.environ.get("INSTR_WORKLOAD", "equal")
BODY = b'{"state":"bench"}\n'


def send(port, first, count):
    s = socket.create_connection(("127.0.0.1", port), 60)
    for i in range(first, first + count):
        token = 7 if WORKLOAD == "equal" else 1000 + i
        s.sendall(b"PUT /v1/documents/i%d HTTP/1.1\r\nHost: b\r\n"
                  b"Fencing-Token: %d\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s"
                  % (i % RES, token, len(BODY), BODY))
        data = read_answer(s)
        if not data.startswith(b"HTTP/1.1 200"):
            raise RuntimeError("answered %r" % data[:60])
    s.close()


def tidemark_argv(binary, d, port, up):
    return [binary, "-c", tidemark_ini(d, port, "http://127.0.0.1:%d" % up)]


def proxy_nginx_argv(d, port, up):
    conf = nginx_conf(d, PROXY_PASS % {"up": up, "port": port}, single=True)
    return nginx_argv(d, conf)


def count(name, argv_of, up, total):
    """Instructions callgrind counted in a run that served total
    requests after a warm-up of RES: a list, one count a thread, in the
    order the threads started."""
    with tempfile.TemporaryDirectory(prefix="tidemark-instr-") as d:
        port = free_port()
        out = os.path.join(d, "callgrind.out")
        proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
             "--separate-threads=yes", "--trace-children=no"] +
            argv_of(d, port, up),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(port, proc, name)
            send(port, 0, RES)
            send(port, RES, total)
        finally:
            proc.terminate()
            proc.wait(120)
        counts = []
        # out-01, out-02, ...: one file a thread (out itself is empty).
        for path in sorted(glob.glob(out + "-[0-9]*")):
            with open(path) as f:
                m = re.search(r"^(?:summary|totals): (\d+)", f.read(),
                              re.M)
            counts.append(int(m.group(1)))
            if PROFILE:
                os.makedirs(PROFILE, exist_ok=True)
                shutil.copy(path, os.path.join(
                    PROFILE, "callgrind.out.%s.%d%s"
                    % (name, total, path[len(out):])))
        return counts


def say(out, line):
    print(line)
    sys.stdout.flush()
    out.append(line)


def version(argv):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except OSError:
        return "?"
    return (p.stdout + p.stderr).strip().splitlines()[0]


def main():
    if WORKLOAD not in ("equal", "rising"):
        sys.exit("bench-instr: INSTR_WORKLOAD=%s: equal or rising" % WORKLOAD)
    for tool in ("valgrind", "nginx"):
        if not shutil.which(tool):
            sys.exit("bench-instr: %s is not installed" % tool)
    with tempfile.TemporaryDirectory(prefix="tidemark-instr-up-") as ud:
        up = free_port()
        conf = nginx_conf(ud, """    server {
        listen 127.0.0.1:%d;
        location / { return 200 "ok\\n"; }
    }""" % up)
        upp = subprocess.Popen(nginx_argv(ud, conf),
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        try:
            wait_port(up, upp, "the upstream")
            targets = [("nginx", proxy_nginx_argv)]
            bins = [("tidemark", os.environ.get("TIDEMARK_BIN",
                                                 str(ROOT / "tidemark")))]
            for word in os.environ.get("INSTR_BINS", "").split():
                name, _, path = word.partition("=")
                bins.append((name, path))
            for name, path in bins:
                targets.append((name, lambda d, p, u, path=path:
                                tidemark_argv(path, d, p, u)))
            out = []
            say(out, "bench-instr: instructions per request (callgrind), "
                "one keep-alive client, PUT with %s, "
                "%d resources, (count at %d - count at %d) / %d"
                % ("an equal token" if WORKLOAD == "equal" else
                   "a rising token (a durable raise each)",
                   RES, MANY, FEW, MANY - FEW))
            say(out, "%s UTC; %s; %s; tidemark %s" % (
                time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                version(["valgrind", "--version"]),
                version(["nginx", "-v"]),
                version(["git", "-C", str(ROOT), "describe", "--always",
                         "--dirty"])))
            base = None
            for name, argv_of in targets:
                few = count(name, argv_of, up, FEW)
                many = count(name, argv_of, up, MANY)
                per = (sum(many) - sum(few)) / (MANY - FEW)
                base = base or per
                say(out, "%-12s %10.0f instructions/request (%.2fx nginx)"
                    % (name, per, per / base))
                few += [0] * (len(many) - len(few))
                if name != "nginx" and len(many) > 1:
                    say(out, "%-12s by thread: %s" % ("", "; ".join(
                        "%d %.0f" % (t + 1, max(0, many[t] - few[t]) /
                                     (MANY - FEW))
                        for t in range(len(many)))))
        finally:
            upp.terminate()
            upp.wait(30)
    folder = Path(os.environ.get("BENCH_RESULTS",
                                 ROOT / "tests" / "bench" / "results"))
    folder = folder / time.strftime("%Y%m%dT%H%M%SZ-instr", time.gmtime())
    folder.mkdir(parents=True)
    (folder / "summary.txt").write_text("\n".join(out) + "\n")
    print("raw output: %s/" % folder)


if __name__ == "__main__":
    main()
