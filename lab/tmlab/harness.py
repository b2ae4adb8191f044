"""The lab's parts: a recording document backend, a tidemark process, a
Redis client in a few lines, a relay that holds a write in the network,
and actors (client processes the lab can pause with SIGSTOP).

Standard library only. Times are time.monotonic() (CLOCK_MONOTONIC, one
clock for every process of the machine), so the actors' steps, the
backend's applies and the orchestrator's signals sit on one time line.
"""

import http.client
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import servers  # the tests' server starters, shipped with the lab
from common import free_port, wait_until  # shipped with servers.py


class Broken(Exception):
    """A scenario could not set itself up or did not run as written."""


# ------------------------------------------------------ peers' answers
#
# Every answer a peer gives is read strictly: the answers a scenario can
# legitimately get are named, anything else is Broken with the answer in
# the message (never an exception from deep inside a parse).

_FENCE = re.compile(r"[1-9][0-9]{0,18}")


def lease_row(out):
    """psql -At's answer to the lease row's INSERT ... RETURNING fence:
    the fence ("N" then "INSERT 0 1"), or None when the row is still
    held by a live lease ("INSERT 0 0": nothing inserted or updated)."""
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    if lines == ["INSERT 0 0"]:
        return None
    if len(lines) == 2 and lines[1] == "INSERT 0 1" and \
            _FENCE.fullmatch(lines[0]):
        return int(lines[0])
    raise Broken("the lease row's INSERT answered %r" % out)


def psql_answer(r, *wanted):
    """The text of an actor's psql answer (one statement), which must be
    one of wanted ("UPDATE 1", "t", ...); Broken otherwise."""
    if "error" in r:
        raise Broken("psql: %s" % r["error"])
    out = r.get("out", "").strip()
    if out not in wanted:
        raise Broken("psql answered %r, expected %s"
                     % (out, " or ".join(repr(w) for w in wanted)))
    return out


def acquire_reply(r):
    """An actor's answer to the seed's acquire script: the token, or
    None when the lock is held (the script's false: a nil reply)."""
    if "error" in r:
        raise Broken("redis acquire: %s" % r["error"])
    tok = r.get("reply")
    if tok is None:
        return None
    if isinstance(tok, bool) or not isinstance(tok, int) or tok < 1:
        raise Broken("redis acquire answered %r, not a token or nil" % tok)
    return tok


def int_reply(r, what):
    """An actor's answer to a Redis command that returns an integer."""
    if "error" in r:
        raise Broken("%s: %s" % (what, r["error"]))
    v = r.get("reply")
    if isinstance(v, bool) or not isinstance(v, int):
        raise Broken("%s answered %r, not an integer" % (what, v))
    return v


# What the lock service may answer an acquire besides 201: busy (423,
# after wait_ms) and store unavailable for now (503, Retry-After).
LOCK_RETRY = (423, 503)


def lock_fence(r):
    """The fence of the lock service's answer to an acquire (201 with a
    JSON body whose fence is a positive integer); None for an answer in
    LOCK_RETRY; Broken for anything else."""
    st = r.get("status", 0)
    if st in LOCK_RETRY:
        return None
    body = r.get("body", "")
    if st != 201:
        raise Broken("the lock service answered %d: %s" % (st, body[:300]))
    try:
        fence = json.loads(body)["fence"]
    except (ValueError, KeyError, TypeError):
        fence = None
    if isinstance(fence, bool) or not isinstance(fence, int) or fence < 1:
        raise Broken("the lock service's 201 carries no fence: %s"
                     % body[:300])
    return fence


# ------------------------------------------------------------ recorder


class Recorder:
    """The events of one run, in ms since the run started."""

    def __init__(self):
        self.t0 = time.monotonic()
        self.events = []
        self.lock = threading.Lock()

    def ms(self, mono):
        return round((mono - self.t0) * 1000.0, 1)

    def add(self, kind, lane, mono=None, **kw):
        ev = {"kind": kind, "lane": lane,
              "t": self.ms(mono if mono is not None else time.monotonic())}
        ev.update(kw)
        with self.lock:
            self.events.append(ev)
        return ev

    def span(self, kind, lane, m0, m1, **kw):
        ev = {"kind": kind, "lane": lane, "t": self.ms(m0),
              "t1": self.ms(m1)}
        ev.update(kw)
        with self.lock:
            self.events.append(ev)
        return ev

    def step(self, lane, text, mono=None):
        return self.add("step", lane, mono, text=text)


# ------------------------------------------------------------- backend


class Backend:
    """A document store over HTTP: PUT, POST, PATCH and DELETE on
    /v1/documents/{doc} replace (or remove) the document; GET reads it.
    Every write it applies is recorded with its time, body and the
    headers that name the client and its token. It checks nothing: the
    storage that cannot fence by itself."""

    def __init__(self):
        self.docs = {}
        self.applied = []
        self.delay_ms = 0
        self.cond = threading.Condition()
        self.recorder = None
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _answer(self, status, body=b""):
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _doc(self):
                path = urllib.parse.unquote(self.path.split("?")[0])
                return path.rsplit("/", 1)[-1]

            def do_GET(self):
                doc = self._doc()
                with outer.cond:
                    body = outer.docs.get(doc)
                if body is None:
                    self._answer(404)
                else:
                    self._answer(200, body)

            def _write(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                doc = self._doc()
                if outer.delay_ms:
                    time.sleep(outer.delay_ms / 1000.0)  # a slow backend
                now = time.monotonic()
                with outer.cond:
                    if self.command == "DELETE":
                        outer.docs.pop(doc, None)
                    else:
                        outer.docs[doc] = body
                    rec = {"mono": now, "doc": doc, "method": self.command,
                           "body": body.decode("utf-8", "replace"),
                           "client": self.headers.get("X-Lab-Client"),
                           "id": self.headers.get("X-Write-Id"),
                           "token": self.headers.get("Fencing-Token")}
                    outer.applied.append(rec)
                    outer.cond.notify_all()
                r = outer.recorder
                if r is not None:
                    r.add("write", "backend", now, client=rec["client"],
                          token=rec["token"], body=rec["body"])
                self._answer(200 if self.command != "DELETE" else 204)

            do_PUT = do_POST = do_PATCH = do_DELETE = _write

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        # A client that went away (killed, timed out) is no error here.
        self.server.handle_error = lambda *a: None
        self.port = self.server.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       daemon=True)
        self.thread.start()

    def reset(self, recorder):
        with self.cond:
            self.docs.clear()
            self.applied = []
            self.recorder = recorder

    def body(self, doc):
        with self.cond:
            b = self.docs.get(doc)
        return None if b is None else b.decode("utf-8", "replace")

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


# ------------------------------------------------------------ tidemark


class Tidemark:
    """One tidemark in front of a URL, with the embedded stores (marks
    and leases) in a temporary directory of its own."""

    def __init__(self, binary, upstream_url, locks=None, extra="",
                 store=None, grace_ms=0, mode="correctness"):
        self.binary = binary
        self.dir = tempfile.mkdtemp(prefix="tidemark-lab-")
        self.port = free_port()
        self.admin_port = free_port()
        locks = locks or ("backend = lmdb\npath = %s/locks.lmdb\n"
                          % self.dir)
        store = store or "type = lmdb\npath = %s/marks.lmdb\n" % self.dir
        self.ini = os.path.join(self.dir, "tidemark.ini")
        with open(self.ini, "w") as f:
            f.write("[proxy]\nlisten = 127.0.0.1:%d\nlog_level = warn\n"
                    "order_grace_ms = %d\n"
                    "[admin]\nlisten = 127.0.0.1:%d\n"
                    "[store]\n%s"
                    "[locks]\n%s"
                    "[upstream default]\nurl = %s\n"
                    "[route documents]\nmethods = PUT POST PATCH DELETE\n"
                    "path = /v1/documents/{doc}\n"
                    "resource = documents/{doc}\nmode = %s\n%s"
                    % (self.port, grace_ms, self.admin_port, store, locks,
                       upstream_url, mode, extra))
        self.proc = None
        self.url = "http://127.0.0.1:%d" % self.port
        self.admin = "http://127.0.0.1:%d" % self.admin_port

    def start(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("TIDEMARK_")}
        log = open(os.path.join(self.dir, "tidemark.log"), "ab")
        self.proc = subprocess.Popen([self.binary, "-c", self.ini],
                                     stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=log, env=env, cwd=self.dir)
        log.close()

        def ready():
            if self.proc.poll() is not None:
                raise Broken("tidemark exited at start: %s" % self.log())
            return http_call("GET", self.admin + "/readyz")[0] == 200
        wait_until(ready, 20, "tidemark /readyz")
        return self

    def kill9(self):
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log(self):
        try:
            with open(os.path.join(self.dir, "tidemark.log"),
                      errors="replace") as f:
                return f.read()[-3000:]
        except OSError:
            return ""

    def destroy(self):
        self.stop()
        import shutil
        shutil.rmtree(self.dir, ignore_errors=True)


def http_call(method, url, headers=None, body=b"", timeout=5.0):
    """(status, headers dict lower-cased, body); status 0: no answer."""
    u = urllib.parse.urlsplit(url)
    try:
        c = http.client.HTTPConnection(u.hostname, u.port or 80,
                                       timeout=timeout)
        path = u.path or "/"
        if u.query:
            path += "?" + u.query
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    except OSError as e:
        return 0, {}, str(e).encode()


# ---------------------------------------------------------------- redis


def _text(v):
    """A reply as the scenarios read it: strings as str, an error reply
    as {"error": message}, arrays element by element."""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, servers.RespError):
        return {"error": str(v)}
    if isinstance(v, list):
        return [_text(x) for x in v]
    return v


def redis(port, *args, timeout=2.0):
    """One command on a new connection: the decoded reply. Raises OSError
    when the node does not answer within timeout."""
    return _text(servers.resp(port, args, timeout=timeout)[0])


# The seed's scripts, as printed there.
ACQUIRE = """if redis.call('EXISTS', KEYS[1]) == 1 then
  return false
end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], token, 'PX', ARGV[1])
return token"""

RELEASE = """if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0"""

EXTEND = """if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0"""


# ---------------------------------------------------------------- relay


class Relay:
    """A TCP relay that holds the client's bytes until release(): a write
    stuck in a slow network path. The server's bytes pass at once, until
    cut is set: then they are lost (a partition)."""

    def __init__(self, target_port):
        self.target = target_port
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(8)
        self.port = self.lsock.getsockname()[1]
        self.gate = threading.Event()
        self.cut = threading.Event()    # set: server bytes are dropped
        self.held = threading.Event()   # some client bytes are waiting
        self.held_at = None
        self.passed_at = None
        self.stopping = False
        threading.Thread(target=self._accept, daemon=True).start()

    def release(self):
        self.gate.set()

    def _accept(self):
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                c.close()   # the server is gone: so is this connection
                continue
            threading.Thread(target=self._up, args=(c, u),
                             daemon=True).start()
            threading.Thread(target=self._down, args=(u, c),
                             daemon=True).start()

    def _up(self, c, u):
        try:
            while True:
                data = c.recv(65536)
                if not data:
                    break
                if not self.gate.is_set():
                    self.held_at = self.held_at or time.monotonic()
                    self.held.set()
                    self.gate.wait()
                    self.passed_at = time.monotonic()
                u.sendall(data)
        except OSError:
            pass
        finally:
            try:
                u.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def _down(self, u, c):
        try:
            while True:
                data = u.recv(65536)
                if not data:
                    break
                if not self.cut.is_set():
                    c.sendall(data)
        except OSError:
            pass
        finally:
            for s in (u, c):
                try:
                    s.close()
                except OSError:
                    pass

    def destroy(self):
        self.stop()

    def stop(self):
        self.gate.set()
        try:
            self.lsock.close()
        except OSError:
            pass


# --------------------------------------------------------------- actors


class Actor:
    """A client in a process of its own (tidemark-lab --actor), so that
    SIGSTOP pauses it the way a GC pause or a VM migration would: it gets
    no signal, its clock runs on, its requests wait. The orchestrator
    sends it operations (JSON lines) and reads its answers."""

    def __init__(self, name, recorder, entry):
        self.name = name
        self.rec = recorder
        self.proc = subprocess.Popen(
            [sys.executable, entry, "--actor"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, bufsize=0)
        self.out = self.proc.stdout
        self.pending = 0
        self.paused_at = None

    def send(self, op, **kw):
        kw["op"] = op
        self.proc.stdin.write((json.dumps(kw) + "\n").encode())
        self.proc.stdin.flush()
        self.pending += 1

    def reply(self, timeout=60.0):
        """The next answer; Broken when none comes within timeout (a
        peer that never answers must not hang the lab)."""
        ready, _, _ = select.select([self.out], [], [], timeout)
        if not ready:
            raise Broken("%s did not answer within %.0f s"
                         % (self.name, timeout))
        line = self.out.readline()
        self.pending -= 1
        if not line:
            raise Broken("%s exited" % self.name)
        try:
            return json.loads(line)
        except ValueError:
            raise Broken("%s answered %r" % (self.name, line[:200]))

    def call(self, op, **kw):
        self.send(op, **kw)
        return self.reply()

    def pause(self):
        self.paused_at = time.monotonic()
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.rec.step(self.name, "paused (SIGSTOP)", self.paused_at)

    def resume(self):
        now = time.monotonic()
        os.kill(self.proc.pid, signal.SIGCONT)
        self.rec.span("pause", self.name, self.paused_at, now)
        self.rec.step(self.name, "resumes (SIGCONT)", now)
        self.paused_at = None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self):
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGCONT)
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def actor_main():
    """The actor's loop: one JSON operation a line in, one answer out.
    Each answer has t0/t1: monotonic times around the operation."""
    while True:
        line = sys.stdin.readline()
        if not line:
            return
        op = json.loads(line)
        t0 = time.monotonic()
        try:
            out = _actor_op(op)
        except OSError as e:
            out = {"error": str(e)}
        out["t0"] = t0
        out["t1"] = time.monotonic()
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


_psql = None


def _actor_op(op):
    kind = op["op"]
    if kind == "redis":
        return {"reply": redis(op["port"], *op["args"],
                               timeout=op.get("timeout", 2.0))}
    if kind == "http":
        st, hd, body = http_call(op["method"], op["url"],
                                 op.get("headers"),
                                 op.get("body", "").encode(),
                                 op.get("timeout", 10.0))
        return {"status": st, "body": body.decode("utf-8", "replace"),
                "high_water": hd.get("fencing-high-water")}
    if kind == "redlock":
        return _redlock(op)
    if kind == "sql_open":
        # psql as this client's connection: one session, statements fed
        # one at a time, so a transaction stays open between them. When
        # the client dies, psql reads EOF and the connection ends.
        global _psql
        _psql = subprocess.Popen(
            ["psql", "-X", "-At", op["dsn"]], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0)
        return {}
    if kind == "sql":
        _psql.stdin.write((op["q"] + "\n\\echo __lab_end__\n").encode())
        _psql.stdin.flush()
        out = []
        while True:
            ln = _psql.stdout.readline()
            if not ln or ln.strip() == b"__lab_end__":
                break
            out.append(ln.decode("utf-8", "replace"))
        return {"out": "".join(out)}
    if kind == "work":
        # A step of the job: CPU time the client spends, not a sleep
        # standing in for synchronization.
        end = time.monotonic() + op["ms"] / 1000.0
        while time.monotonic() < end:
            time.sleep(0.001)
        return {}
    raise ValueError(kind)


def _redlock(op):
    """Redlock's acquire: SET key value NX PX ttl on every node, each with
    a short timeout; the lock is held when a majority said OK within the
    TTL (validity = ttl - elapsed)."""
    t0 = time.monotonic()
    won = []
    for port in op["ports"]:
        try:
            r = redis(port, "SET", op["key"], op["value"], "NX", "PX",
                      op["ttl"], timeout=op.get("node_timeout", 0.5))
        except OSError:
            continue
        if r == "OK":
            won.append(port)
    elapsed = (time.monotonic() - t0) * 1000.0
    validity = op["ttl"] - elapsed
    return {"won": won, "majority": len(won) >= len(op["ports"]) // 2 + 1
            and validity > 0, "validity_ms": validity}
