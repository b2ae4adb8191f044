"""The daemon under test: a tidemark process with its INI (written from a
dict of sections over a default config), its log and its store; tidemark
--check; the [store] section for each store kind; and a pod (an
application that knows nothing of fencing, with its tidemark sidecar).
Standard library only.
"""

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.parse
from pathlib import Path

from common import BIN, REPO, is_asan, slow, free_port, wait_until
from wire import Conn, token_headers

FAILSYNC = REPO / "tests" / "preload" / "failsync.so"

SANITIZER_MARKS = (
    "AddressSanitizer",
    "LeakSanitizer",
    "UndefinedBehaviorSanitizer",
    "runtime error:",
)


def render_ini(sections):
    out = []
    for name, keys in sections.items():
        if keys is None:
            continue
        out.append("[%s]" % name)
        for k, v in keys.items():
            if v is None:
                continue
            # A list is a repeatable key given once per value.
            for one in (v if isinstance(v, list) else [v]):
                out.append("%s = %s" % (k, one))
        out.append("")
    return "\n".join(out)


DEFAULT_ROUTE = {
    "methods": "PUT POST PATCH DELETE",
    "path": "/v1/documents/{doc}",
    "resource": "documents/{doc}",
    "mode": "correctness",
    "upstream": "default",
}


def child_env(extra=None):
    """The environment tidemark runs with: ours without TIDEMARK_*
    variables (make sets TIDEMARK_BIN; tidemark refuses unknown ones),
    plus extra."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TIDEMARK_")}
    env.update(extra or {})
    return env


# A text line of prose: ts, level, and msg="the message" (" and \
# escaped, controls as \xNN).
PROSE = re.compile(r'^(ts=\S+ level=[a-z]+ )msg="((?:[^"\\]|\\.)*)"$')


def readable(line):
    """A text line as a reader sees it: a prose line's message unquoted
    after its ts= and level= ("ts=... level=warn watch docs: ..."); any
    other line as it is."""
    m = PROSE.match(line)
    if m is None:
        return line
    return m.group(1) + re.sub(r'\\(["\\])', r"\1", m.group(2))


class Tidemark:
    """One tidemark process with its config, log and store."""

    def __init__(self, workdir, upstream=None, config=None, env=None,
                 ini=None):
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.admin_port = free_port()
        self.store_path = str(self.dir / "marks.lmdb")
        self.log_path = self.dir / "tidemark.log"
        self.ini_path = self.dir / "tidemark.ini"
        self.env = dict(env or {})
        self.proc = None
        self.runs = []      # (proc, expected): every process started
        self.upstream = upstream
        self.unix_path = None   # listen = unix:PATH: the socket's path
        if ini is not None:
            text = ini
        else:
            sections = {
                "proxy": {"listen": "127.0.0.1:%d" % self.port,
                          "log_level": "info"},
                "admin": {"listen": "127.0.0.1:%d" % self.admin_port},
                "store": {"type": "lmdb", "path": self.store_path},
            }
            if upstream is not None:
                sections["upstream default"] = {"url": upstream.url}
            config = dict(config or {})
            if not any(k.startswith("route ") for k in config):
                sections["route docs"] = dict(DEFAULT_ROUTE)
            for name, keys in config.items():
                if keys is None:
                    sections.pop(name, None)
                elif name in sections:
                    merged = dict(sections[name])
                    merged.update(keys)
                    sections[name] = merged
                else:
                    sections[name] = dict(keys)
            text = render_ini(sections)
            listen = sections["proxy"].get("listen") or ""
            if listen.startswith("unix:"):
                # Relative to the process's directory, as it reads it.
                self.unix_path = str(self.dir / listen[len("unix:"):])
        self.ini_path.write_text(text)

    # -- life cycle

    def start(self, wait=True, extra_env=None, preexec=None, stderr=None):
        """stderr: a descriptor for the process's stdout and stderr
        instead of the log file (whose log() then stays empty)."""
        assert self.proc is None or self.proc.poll() is not None
        env = child_env(self.env)
        env.update(extra_env or {})
        if is_asan():
            # Keep freed memory from dominating RSS; let LD_PRELOAD shims
            # load before the sanitizer runtime.
            opts = env.get("ASAN_OPTIONS", "")
            extra = "quarantine_size_mb=16:verify_asan_link_order=0"
            env["ASAN_OPTIONS"] = (opts + ":" + extra) if opts else extra
        log = open(self.log_path, "ab")
        log.write(b"==== start %f\n" % time.time())
        log.flush()
        self.proc = subprocess.Popen(
            [str(BIN), "-c", str(self.ini_path)], stdin=subprocess.DEVNULL,
            stdout=log if stderr is None else stderr,
            stderr=log if stderr is None else stderr, env=env,
            cwd=str(self.dir),
            preexec_fn=preexec)
        log.close()
        self.runs.append([self.proc, "running"])
        if wait:
            self.wait_ready()
        return self

    def start_fails(self, timeout=20.0):
        """Start a process that must stop at start: its exit code."""
        self.start(wait=False)
        rc = self.proc.wait(timeout=timeout * slow())
        self.runs[-1][1] = "failed-start"
        return rc

    def wait_ready(self, timeout=10.0):
        deadline = time.monotonic() + timeout * slow()
        while True:
            rc = self.proc.poll()
            if rc is not None:
                self.runs[-1][1] = "failed-start"
                raise AssertionError("tidemark exited with %s at start:\n%s"
                                     % (rc, self.log()[-4000:]))
            if self._healthy() and self._listening():
                return
            if time.monotonic() >= deadline:
                raise AssertionError("tidemark not ready after %.0fs:\n%s"
                                     % (timeout, self.log()[-4000:]))
            time.sleep(0.02)

    def _healthy(self):
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.admin_port,
                                           timeout=1)
            c.request("GET", "/healthz")
            ok = c.getresponse().status == 200
            c.close()
            return ok
        except OSError:
            return False

    def _listening(self):
        try:
            self.conn(timeout=1).sock.close()
            return True
        except OSError:
            return False

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=15.0):
        """SIGTERM; the process must exit 0 on its own."""
        p = self.proc
        if p is None or p.poll() is not None:
            return p.returncode if p else None
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=timeout * slow())
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            self.runs[-1][1] = "hung"
            raise AssertionError("tidemark did not stop on SIGTERM:\n%s"
                                 % self.log()[-4000:])
        self.runs[-1][1] = "stopped"
        return rc

    def kill9(self):
        p = self.proc
        p.send_signal(signal.SIGKILL)
        p.wait()
        self.runs[-1][1] = "killed"

    def restart(self, **kw):
        rc = self.stop()
        assert rc == 0, "tidemark exited %s on SIGTERM:\n%s" % (
            rc, self.log()[-4000:])
        return self.start(**kw)

    def check_teardown(self):
        problems = []
        for entry in self.runs:
            p, state = entry
            if state == "running":
                rc = p.poll()
                if rc is not None:
                    problems.append("tidemark died during the test (exit %s)"
                                    % rc)
                    continue
                p.send_signal(signal.SIGTERM)
                try:
                    rc = p.wait(timeout=15 * slow())
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                    problems.append("tidemark did not stop on SIGTERM")
                    continue
                if rc != 0:
                    problems.append("tidemark exited %s on SIGTERM" % rc)
            elif state == "stopped" and p.returncode != 0:
                problems.append("tidemark exited %s on SIGTERM"
                                % p.returncode)
        log = self.log()
        for mark in SANITIZER_MARKS:
            if mark in log:
                problems.append("sanitizer report in the log (%s)" % mark)
        if problems:
            raise AssertionError("; ".join(problems) + "\n--- log tail:\n"
                                 + log[-6000:])

    # -- observation

    def log(self):
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_lines(self, *needles):
        """Log lines containing every needle, each as readable() shows
        it."""
        return [ln for ln in map(readable, self.log().splitlines())
                if all(n in ln for n in needles)]

    def wait_log(self, *needles, timeout=5.0, count=1):
        return wait_until(lambda: len(self.log_lines(*needles)) >= count
                          and self.log_lines(*needles),
                          timeout * slow(), "log line with %r" % (needles,))

    def status(self, field):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        raise KeyError(field)

    # -- traffic

    def conn(self, timeout=10.0):
        return Conn(self.unix_path or self.port, timeout=timeout * slow())

    def request(self, method, target, token=None, resource=None, headers=(),
                body=b"", timeout=10.0, **kw):
        if isinstance(headers, dict):
            headers = list(headers.items())
        with self.conn(timeout) as c:
            return c.request(method, target,
                             token_headers(token, resource, headers), body,
                             **kw)

    def put(self, doc, token=None, body=b"data", headers=(), **kw):
        return self.request("PUT", "/v1/documents/%s" % doc, token=token,
                            body=body, headers=headers, **kw)

    def admin(self, method, path, timeout=5.0):
        c = http.client.HTTPConnection("127.0.0.1", self.admin_port,
                                       timeout=timeout * slow())
        try:
            c.request(method, path)
            r = c.getresponse()
            body = r.read()
            return r.status, dict((k.lower(), v) for k, v in
                                  r.getheaders()), body
        finally:
            c.close()

    def mark(self, resource):
        """The mark on the control port, None when it has none. resource
        is percent-encoded text, as in the URL; the answer names the
        resource decoded (its canonical form)."""
        st, _, body = self.admin("GET", "/v1/marks/%s" % resource)
        if st == 404:
            return None
        assert st == 200, (st, body)
        doc = json.loads(body)
        assert doc["resource"] == urllib.parse.unquote(resource), doc
        return doc["high_water"]


class HeldWrite:
    """A PUT of documents/DOC with TOKEN that the upstream holds
    (X-Test-Hold: DOC), sent from a thread: a request in flight while a
    test stops tidemark."""

    def __init__(self, tm, doc, token):
        import threading
        self.tm, self.doc, self.token, self.answer = tm, doc, token, None
        self.thread = threading.Thread(target=self._send, daemon=True)
        self.thread.start()
        tm.upstream.wait_request("X-Test-Id", doc)

    def _send(self):
        self.answer = self.tm.put(self.doc, token=self.token,
                                  headers=[("X-Test-Hold", self.doc),
                                           ("X-Test-Id", self.doc)])

    def release_and_exit_0(self):
        """tidemark, draining, lives while the write is held; released,
        the write gets 200 and tidemark exits 0."""
        assert self.tm.proc.poll() is None, "exited with a write in flight"
        self.tm.upstream.release(self.doc)
        self.thread.join(10 * slow())
        assert self.answer is not None and self.answer.status == 200, \
            self.answer
        assert self.tm.proc.wait(10 * slow()) == 0
        self.tm.runs[-1][1] = "stopped"


def run_check(path, env=None, timeout=20):
    """tidemark -c path --check: (exit code, stderr lines)."""
    p = subprocess.run([str(BIN), "-c", str(path), "--check"],
                       stdin=subprocess.DEVNULL, capture_output=True,
                       cwd=str(Path(path).parent),
                       env=child_env(env), timeout=timeout * slow())
    err = p.stderr.decode(errors="replace")
    for mark in SANITIZER_MARKS:
        assert mark not in err, err
    return p.returncode, [ln for ln in err.splitlines() if ln.strip()]


def wait_ready(tm, want=200, timeout=10.0):
    """Poll /readyz until it answers want."""
    return wait_until(lambda: tm.admin("GET", "/readyz")[0] == want,
                      timeout * slow(), "/readyz %d" % want)


# ------------------------------------------------------- store servers


# Routes for store tests: one correctness, one efficiency.
STORE_ROUTES = {
    "route docs": {"path": "/v1/documents/{doc}",
                   "resource": "documents/{doc}", "mode": "correctness"},
    "route eff": {"path": "/v1/eff/{doc}", "resource": "eff/{doc}",
                  "mode": "efficiency"},
}


class StoreUnderTest:
    """A store kind and, for network stores, its server (shared by the
    session, started again if a test left it stopped)."""

    def __init__(self, kind, server):
        self.kind = kind
        self.server = server

    def section(self, **extra):
        """The [store] keys for a tidemark on this store."""
        if self.kind == "lmdb":
            keys = {"type": "lmdb"}
        elif self.kind == "postgres":
            keys = {"type": "postgres", "dsn": self.server.dsn,
                    "path": None}
        elif self.kind == "redis":
            keys = {"type": "redis", "url": self.server.url, "path": None}
        elif self.kind == "redis-cluster":
            keys = {"type": "redis", "url": self.server.url, "cluster": "yes",
                    "path": None}
        else:
            keys = {"type": "etcd", "endpoints": self.server.endpoints,
                    "path": None}
        keys.update(extra)
        return keys


# ---------------------------------------------------------------- pods


# An application that knows nothing of fencing: argv PORT PATH NAME OUT
# INTERVAL_MS. It PUTs to PATH through its sidecar at PORT in a loop,
# body and X-Test-Id "NAME-SEQ", no Fencing-Token, and appends one JSON
# line per call to OUT: seq, tag, status, Tidemark-Error, start and end
# (time.time()).
APP_WRITER = r"""
import http.client, json, sys, time
port, path, name, out, interval = int(sys.argv[1]), sys.argv[2], \
    sys.argv[3], sys.argv[4], int(sys.argv[5]) / 1000.0
seq = 0
with open(out, "a") as f:
    while True:
        seq += 1
        tag = "%s-%d" % (name, seq)
        rec = {"seq": seq, "tag": tag, "t0": time.time()}
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("PUT", path, body=tag.encode(),
                      headers={"X-Test-Id": tag})
            r = c.getresponse()
            r.read()
            rec["status"] = r.status
            rec["error"] = r.getheader("Tidemark-Error")
            c.close()
        except OSError as e:
            rec["status"] = None
            rec["error"] = type(e).__name__
        rec["t1"] = time.time()
        f.write(json.dumps(rec) + "\n")
        f.flush()
        time.sleep(interval)
"""


class Pod:
    """An application process (APP_WRITER) and its sidecar (a Tidemark),
    paused and resumed together, as a whole pod is when its node stalls."""

    def __init__(self, tm, name, path, interval_ms=50):
        self.tm = tm
        self.name = name
        self.path = path
        self.interval_ms = interval_ms
        self.out = tm.dir / "app.jsonl"
        self.app = None

    def start_app(self):
        assert self.app is None
        self.app = subprocess.Popen(
            ["/usr/bin/python3", "-c", APP_WRITER, str(self.tm.port),
             self.path, self.name, str(self.out), str(self.interval_ms)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(self.tm.dir / "app.err", "ab"))
        return self

    def pids(self):
        return [p.pid for p in (self.app, self.tm.proc)
                if p is not None and p.poll() is None]

    def pause(self):
        for pid in self.pids():
            os.kill(pid, signal.SIGSTOP)

    def resume(self):
        for pid in self.pids():
            os.kill(pid, signal.SIGCONT)

    def sent(self):
        """The application's calls so far, in order (dicts)."""
        try:
            lines = self.out.read_text().splitlines()
        except OSError:
            return []
        return [json.loads(ln) for ln in lines if ln.endswith("}")]

    def wait_sent(self, pred, timeout, what):
        """Poll until pred(call) holds for a call made after now; it."""
        start = len(self.sent())
        return wait_until(
            lambda: next((c for c in self.sent()[start:] if pred(c)), None),
            timeout * slow(), "%s: %s" % (self.name, what))

    def lease(self, carrier="app"):
        st, _, body = self.tm.admin("GET", "/v1/leases/%s" % carrier)
        assert st == 200, (st, body)
        return json.loads(body)

    def wait_state(self, state, timeout, carrier="app"):
        return wait_until(
            lambda: (lambda d: d if d["state"] == state else None)(
                self.lease(carrier)),
            timeout * slow(), "%s's carrier %s" % (self.name, state))

    def stop_app(self):
        if self.app is not None and self.app.poll() is None:
            self.app.send_signal(signal.SIGCONT)
            self.app.kill()
            self.app.wait()
