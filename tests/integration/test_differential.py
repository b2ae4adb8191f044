"""Differential test: the same ambiguous or malformed requests go through
tidemark, HAProxy and nginx (all from Debian), each in front of its own
raw recording upstream. Whatever both HAProxy and nginx refuse to forward,
tidemark must not forward either; three valid control requests must reach
the upstream through all three.

Every payload is sent twice to each proxy: once to a path no route
matches (tidemark passes it through) and once as a fenced request to
/v1/documents/x with a valid (rising) token, so both of tidemark's paths
are covered. The outcome table is printed (run with -s to see it) and the
row of a failing payload is in its assertion message.

"Forwarded" means that any byte reached the proxy's upstream while the
payload was in flight: the recording upstream parses nothing strictly.
"""

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from common import free_port, slow
from daemon import Tidemark
from wire import chunked

CLIENT_DEADLINE = 1.0   # s a client waits for an answer, then closes
SETTLE = 0.3            # s to poll the upstream after the client is done
LANES = 8               # payloads in flight at once (one per lane)
TOKEN_LINE = b"Fencing-Token: %d\r\n"

UPSTREAM_ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n"
                   b"Connection: close\r\nX-Raw-Upstream: 1\r\n\r\n"
                   b"recorded\n")


def find_binary(name):
    found = shutil.which(name)
    if found:
        return found
    for d in ("/usr/sbin", "/sbin"):
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    return None


# ------------------------------------------------------------ payloads
#
# Templates: {T} is the request target, {F} the token line of the fenced
# variant (empty in the pass variant), {K} and {K2} two rising token
# values (for the payloads that carry their own token headers).

H = b"Host: client.test\r\n"
P = b"POST {T} HTTP/1.1\r\n" + H + b"{F}"


def case(name, tpl, control=False, lf=False):
    return {"name": name, "tpl": tpl, "control": control, "lf": lf}


MALFORMED = [
    case("cl+te", P + b"Content-Length: 5\r\n"
         b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    case("te+cl", P + b"Transfer-Encoding: chunked\r\n"
         b"Content-Length: 5\r\n\r\n0\r\n\r\n"),
    case("two-different-cl", P + b"Content-Length: 5\r\n"
         b"Content-Length: 6\r\n\r\nhello!"),
    case("duplicate-equal-cl", P + b"Content-Length: 5\r\n"
         b"Content-Length: 5\r\n\r\nhello"),
    case("cl-list-5,5", P + b"Content-Length: 5, 5\r\n\r\nhello"),
    case("cl-plus", P + b"Content-Length: +5\r\n\r\nhello"),
    case("cl-hex", P + b"Content-Length: 0x5\r\n\r\nhello"),
    case("cl-negative", P + b"Content-Length: -1\r\n\r\nhello"),
    case("te-chunked-not-last", P + b"Transfer-Encoding: chunked, gzip\r\n"
         b"\r\n0\r\n\r\n"),
    case("te-xchunked", P + b"Transfer-Encoding: xchunked\r\n\r\n"
         b"0\r\n\r\n"),
    case("te-http/1.0", b"POST {T} HTTP/1.0\r\n" + H + b"{F}"
         b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
    case("obs-fold", P + b"X-Folded: one\r\n two\r\n"
         b"Content-Length: 0\r\n\r\n"),
    case("space-before-colon", P + b"Content-Length : 5\r\n\r\nhello"),
    case("bare-cr-in-value", P + b"X-Cr: a\rb\r\n"
         b"Content-Length: 0\r\n\r\n"),
    case("bare-lf-line-ends", b"POST {T} HTTP/1.1\n"
         b"Host: client.test\n{F}Content-Length: 5\n\nhello", lf=True),
    case("nul-in-header", P + b"X-Nul: a\x00b\r\nContent-Length: 0\r\n\r\n"),
    case("ctl-in-target", b"POST {T}\x01x HTTP/1.1\r\n" + H + b"{F}"
         b"Content-Length: 0\r\n\r\n"),
    case("chunk-size-overflow", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"ffffffffffffffffff\r\nhello\r\n0\r\n\r\n"),
    case("chunk-size-space", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"5 5\r\nhello\r\n0\r\n\r\n"),
    case("chunk-no-crlf-after-data", P + b"Transfer-Encoding: chunked\r\n"
         b"\r\n5\r\nhelloXX0\r\n\r\n"),
    case("missing-host-1.1", b"POST {T} HTTP/1.1\r\n{F}"
         b"Content-Length: 0\r\n\r\n"),
    case("two-hosts", P + b"Host: other.test\r\nContent-Length: 0\r\n\r\n"),
    case("header-name-with-space", P + b"X Space: 1\r\n"
         b"Content-Length: 0\r\n\r\n"),
    case("request-line-two-spaces", b"POST  {T} HTTP/1.1\r\n" + H +
         b"{F}Content-Length: 0\r\n\r\n"),
    case("version-1.2", b"POST {T} HTTP/1.2\r\n" + H + b"{F}"
         b"Content-Length: 0\r\n\r\n"),
    case("version-2.0", b"POST {T} HTTP/2.0\r\n" + H + b"{F}"
         b"Content-Length: 0\r\n\r\n"),
    case("header-line-over-64k", P + b"X-Long: " + b"a" * 70000 +
         b"\r\nContent-Length: 0\r\n\r\n"),
    case("connect", b"CONNECT upstream.test:443 HTTP/1.1\r\n"
         b"Host: upstream.test:443\r\n{F}\r\n"),
    case("absolute-form-userinfo", b"POST http://user:pw@client.test{T} "
         b"HTTP/1.1\r\n" + H + b"{F}Content-Length: 0\r\n\r\n"),
    case("header-name-non-token", P + b"X@(Bad): 1\r\n"
         b"Content-Length: 0\r\n\r\n"),
    # The token header tricks carry their own token headers.
    case("duplicate-fencing-token", b"POST {T} HTTP/1.1\r\n" + H +
         b"Fencing-Token: {K}\r\nFencing-Token: {K2}\r\n"
         b"Content-Length: 0\r\n\r\n"),
    case("fencing_token-underscore", b"POST {T} HTTP/1.1\r\n" + H +
         b"Fencing-Token: {K}\r\nFencing_Token: {K2}\r\n"
         b"Content-Length: 0\r\n\r\n"),
    case("connection-fencing-token", b"POST {T} HTTP/1.1\r\n" + H +
         b"Connection: Fencing-Token\r\nFencing-Token: {K}\r\n"
         b"Content-Length: 0\r\n\r\n"),
    case("connection-content-length", P + b"Connection: Content-Length\r\n"
         b"Content-Length: 5\r\n\r\nhello"),
    # Framing in a spelling a CGI/WSGI-style gateway reads as the real
    # name: HAProxy and nginx may pass it on as an ordinary header (the
    # table shows what they do); tidemark refuses it (below).
    case("transfer_encoding-beside-cl", P + b"Transfer_Encoding: chunked\r\n"
         b"Content-Length: 5\r\n\r\n0\r\n\r\n"),
    case("content_length-underscore", P + b"Content_Length: 5\r\n"
         b"Content-Length: 0\r\n\r\nhello"),
]

# Cases tidemark refuses whatever HAProxy and nginx do.
REFUSED_BY_TIDEMARK = ("transfer_encoding-beside-cl",
                       "content_length-underscore", "fencing_token-underscore")

CONTROLS = [
    case("ctl-get", b"GET {T} HTTP/1.1\r\n" + H + b"{F}\r\n",
         control=True),
    case("ctl-put-cl", b"PUT {T} HTTP/1.1\r\n" + H + b"{F}"
         b"Content-Length: 5\r\n\r\nhello", control=True),
    case("ctl-put-chunked", b"PUT {T} HTTP/1.1\r\n" + H + b"{F}"
         b"Transfer-Encoding: chunked\r\n\r\n" + chunked(b"hello world", 4),
         control=True),
]

CASES = MALFORMED + CONTROLS
VARIANTS = ("pass", "fenced")
PROXIES = ("haproxy", "nginx", "tidemark")

_token_lock = threading.Lock()
_token_next = [1000]


def next_tokens():
    """Two token values above every one handed out before: each lane's
    tidemark sees its tokens rise, so a valid token is never stale."""
    with _token_lock:
        k = _token_next[0]
        _token_next[0] += 2
    return k, k + 1


def render(c, variant, k, k2):
    if variant == "pass":
        target = b"/elsewhere/diff"
        token = b""
    else:
        target = b"/v1/documents/x"
        token = TOKEN_LINE % k
    if c["lf"]:
        token = token.replace(b"\r\n", b"\n")
    return (c["tpl"].replace(b"{T}", target).replace(b"{F}", token)
            .replace(b"{K2}", b"%d" % k2).replace(b"{K}", b"%d" % k))


# ------------------------------------------------------ raw upstream


class RawUpstream:
    """Records every byte it receives, with its arrival time, per
    connection. Once something that looks like a whole request arrived
    (a blank line, then the Content-Length or chunked body if it can tell,
    or half a second) it answers a fixed 200 with Connection: close and
    keeps recording until the peer closes."""

    def __init__(self):
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.lock = threading.Lock()
        self.chunks = []        # (monotonic time, conn id, bytes)
        self.nconns = 0
        self.socks = []
        self.stopping = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopping:
            try:
                s, _ = self.lsock.accept()
            except OSError:
                return
            with self.lock:
                cid = self.nconns
                self.nconns += 1
                self.socks.append(s)
            threading.Thread(target=self._serve, args=(s, cid),
                             daemon=True).start()

    @staticmethod
    def _looks_complete(buf, head_at):
        end = buf.find(b"\r\n\r\n")
        sep = 4
        lf = buf.find(b"\n\n")
        if lf >= 0 and (end < 0 or lf < end):
            end, sep = lf, 2
        if end < 0:
            return False
        head = bytes(buf[:end]).lower()
        body = buf[end + sep:]
        if b"chunked" in head:
            return (body.startswith(b"0\r\n\r\n") or b"\n0\r\n\r\n" in body
                    or time.monotonic() - head_at[0] > 0.5)
        for line in head.split(b"\n"):
            if line.startswith(b"content-length:"):
                v = line.split(b":", 1)[1].strip()
                if v.isdigit():
                    return (len(body) >= int(v)
                            or time.monotonic() - head_at[0] > 0.5)
        return True

    def _serve(self, s, cid):
        buf = bytearray()
        answered = False
        head_at = [None]
        s.settimeout(0.05)
        idle_since = time.monotonic()
        try:
            while not self.stopping:
                try:
                    data = s.recv(65536)
                except socket.timeout:
                    data = None
                if data == b"":
                    return
                now = time.monotonic()
                if data:
                    idle_since = now
                    with self.lock:
                        self.chunks.append((now, cid, bytes(data)))
                    if not answered:
                        buf += data
                        if head_at[0] is None and (b"\r\n\r\n" in buf
                                                   or b"\n\n" in buf):
                            head_at[0] = now
                elif now - idle_since > 5.0:
                    return
                if not answered and head_at[0] is not None and \
                        self._looks_complete(buf, head_at):
                    answered = True
                    try:
                        s.sendall(UPSTREAM_ANSWER)
                        s.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
        except OSError:
            return
        finally:
            s.close()

    def arrived(self, start, end=None):
        """The bytes that arrived in [start, end]."""
        with self.lock:
            return b"".join(d for t, _, d in self.chunks
                            if t >= start and (end is None or t <= end))

    def arrived_outside(self, windows):
        with self.lock:
            return [(t, d) for t, _, d in self.chunks
                    if not any(a <= t <= b for a, b in windows)]

    def stop(self):
        self.stopping = True
        try:
            self.lsock.close()
        except OSError:
            pass
        with self.lock:
            socks = list(self.socks)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


# ----------------------------------------------------- the proxies


def start_group(argv, log_path, cwd):
    log = open(log_path, "ab")
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=log, cwd=str(cwd),
                                start_new_session=True)
    finally:
        log.close()


def stop_group(proc):
    """SIGTERM the process group, SIGKILL it if it lingers."""
    if proc is None:
        return
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    try:
        # the leader may be gone while workers of its group remain
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def wait_port(port, proc, what, log_path, timeout=10.0):
    deadline = time.monotonic() + timeout * slow()
    while True:
        if proc is not None and proc.poll() is not None:
            raise AssertionError("%s exited with %s at start:\n%s" % (
                what, proc.returncode, read_tail(log_path)))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            pass
        if time.monotonic() >= deadline:
            raise AssertionError("%s does not listen on %d:\n%s" % (
                what, port, read_tail(log_path)))
        time.sleep(0.02)


def read_tail(path, n=4000):
    try:
        return Path(path).read_text(errors="replace")[-n:]
    except OSError:
        return ""


def haproxy_cfg(pairs):
    out = ["global",
           "    nbthread 1",
           "    maxconn 256",
           "defaults",
           "    mode http",
           "    option http-server-close",
           "    timeout connect 1s",
           "    timeout client 3s",
           "    timeout server 3s",
           "    timeout http-request 3s",
           ""]
    for i, (port, up) in enumerate(pairs):
        out += ["frontend fe%d" % i,
                "    bind 127.0.0.1:%d" % port,
                "    default_backend be%d" % i,
                "backend be%d" % i,
                "    server up%d 127.0.0.1:%d" % (i, up.port),
                ""]
    return "\n".join(out)


def nginx_conf(prefix, pairs):
    out = []
    if os.geteuid() == 0:
        out.append("user root;")
    out += ["worker_processes 1;",
            "pid %s/nginx.pid;" % prefix,
            "error_log %s/error.log info;" % prefix,
            "events { worker_connections 256; }",
            "http {",
            "    access_log off;"]
    for d in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        out.append("    %s_temp_path %s/%s;" % (d, prefix, d))
    for port, up in pairs:
        out += ["    server {",
                "        listen 127.0.0.1:%d;" % port,
                "        location / {",
                "            proxy_pass http://127.0.0.1:%d;" % up.port,
                "            proxy_http_version 1.1;",
                "            proxy_connect_timeout 1s;",
                "            proxy_read_timeout 3s;",
                "            proxy_send_timeout 3s;",
                "        }",
                "    }"]
    out += ["    client_header_timeout 3s;",
            "    client_body_timeout 3s;",
            "}"]
    return "\n".join(out) + "\n"


class Rig:
    """LANES lanes; a lane is one listener of each proxy, each in front of
    its own recording upstream."""

    def __init__(self, base):
        self.base = Path(base)
        self.procs = []
        self.upstreams = []
        self.tidemarks = []
        self.lanes = []     # [{proxy: (port, RawUpstream)}]
        self.logs = {}

    def start(self, haproxy, nginx):
        ha_ups = [self._up() for _ in range(LANES)]
        ng_ups = [self._up() for _ in range(LANES)]
        tm = []
        for i in range(LANES):
            up = self._up()
            t = Tidemark(self.base / ("tm%d" % i), upstream=up)
            self.tidemarks.append(t)
            t.start()
            tm.append((t.port, up))
        ha = self._start_proxy("haproxy", ha_ups, lambda d, pairs: (
            (d / "haproxy.cfg").write_text(haproxy_cfg(pairs)),
            ([haproxy, "-f", str(d / "haproxy.cfg"), "-db"],
             d / "haproxy.log", d / "haproxy.log"))[1])
        ng = self._start_proxy("nginx", ng_ups, lambda d, pairs: (
            (d / "nginx.conf").write_text(nginx_conf(d, pairs)),
            ([nginx, "-p", str(d) + "/", "-c", str(d / "nginx.conf"), "-e",
              str(d / "error.log"), "-g", "daemon off;"],
             d / "stdout.log", d / "error.log"))[1])
        for i in range(LANES):
            self.lanes.append({"haproxy": ha[i], "nginx": ng[i],
                               "tidemark": tm[i]})

    def _start_proxy(self, what, ups, prepare):
        """Start one proxy listening on fresh ports in front of ups. A port
        picked free can be taken by another process before the proxy binds
        it: then try again with other ports (three times at most)."""
        for attempt in range(3):
            d = self.base / ("%s%d" % (what, attempt))
            d.mkdir()
            # nginx's worker may run as nobody: let it reach its prefix.
            for x in (self.base, d):
                os.chmod(str(x), 0o755)
            pairs = [(free_port(), up) for up in ups]
            argv, out_log, err_log = prepare(d, pairs)
            self.logs[what] = err_log
            p = start_group(argv, out_log, d)
            try:
                for port, _ in pairs:
                    wait_port(port, p, what, err_log)
            except AssertionError:
                stop_group(p)
                if attempt == 2:
                    raise
                continue
            self.procs.append(p)
            return pairs
        raise AssertionError("unreachable")

    def _up(self):
        u = RawUpstream()
        self.upstreams.append(u)
        return u

    def stop(self):
        errors = []
        for p in self.procs:
            stop_group(p)
        for t in self.tidemarks:
            try:
                t.check_teardown()
            except AssertionError as e:
                errors.append(str(e))
        for u in self.upstreams:
            u.stop()
        return errors


# ------------------------------------------------------------- client


def exchange(port, payload):
    """Send payload on a fresh connection; read until a whole answer, a
    close or CLIENT_DEADLINE. Returns (answer bytes, how it ended)."""
    got = bytearray()
    deadline = time.monotonic() + CLIENT_DEADLINE * slow()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
    except OSError as e:
        return b"", "connect-error %s" % e.__class__.__name__
    ended = "timeout"
    try:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            s.sendall(payload)
        except OSError:
            pass    # refused early; what it answered may still be there
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            s.settimeout(left)
            try:
                data = s.recv(65536)
            except socket.timeout:
                break
            except OSError:
                ended = "reset"
                break
            if not data:
                ended = "closed"
                break
            got += data
            if whole_response(got):
                ended = "answered"
                break
    finally:
        s.close()
    return bytes(got), ended


def whole_response(buf):
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return False
    head = bytes(buf[:end]).lower()
    for line in head.split(b"\r\n")[1:]:
        if line.startswith(b"content-length:"):
            try:
                return len(buf) - end - 4 >= int(line.split(b":", 1)[1])
            except ValueError:
                return False
        if line.startswith(b"transfer-encoding:"):
            return buf.endswith(b"0\r\n\r\n")
    return False


def status_of(answer):
    if answer.startswith(b"HTTP/"):
        parts = answer.split(b"\r\n", 1)[0].split(b" ")
        if len(parts) > 1:
            return parts[1].decode("latin-1")
    return "-" if not answer else "junk"


def run_one(port, up, payload):
    start = time.monotonic()
    answer, ended = exchange(port, payload)
    done = time.monotonic()
    settle_until = done + SETTLE * slow()
    while not up.arrived(start) and time.monotonic() < settle_until:
        time.sleep(0.01)
    end = time.monotonic()
    seen = up.arrived(start, end)
    return {"forwarded": bool(seen), "status": status_of(answer),
            "ended": ended, "window": (start, end), "seen": seen[:120],
            "from_upstream": b"X-Raw-Upstream: 1" in answer}


def run_all(rig):
    items = [(c, v) for c in CASES for v in VARIANTS]
    results = {}
    windows = {p: [[] for _ in range(LANES)] for p in PROXIES}
    lock = threading.Lock()
    errors = []

    def lane_worker(li):
        lane = rig.lanes[li]
        while True:
            with lock:
                if not items:
                    return
                c, v = items.pop(0)
            k, k2 = next_tokens()
            payload = render(c, v, k, k2)
            out = {}

            def one(proxy):
                port, up = lane[proxy]
                try:
                    out[proxy] = run_one(port, up, payload)
                    out[proxy]["payload"] = payload
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append("%s %s %s: %r" % (c["name"], v, proxy, e))

            ts = [threading.Thread(target=one, args=(p,)) for p in PROXIES]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            with lock:
                results[(c["name"], v)] = out
                for p in PROXIES:
                    if p in out:
                        windows[p][li].append(out[p]["window"])

    workers = [threading.Thread(target=lane_worker, args=(i,))
               for i in range(LANES)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors, errors
    stray = []
    for p in PROXIES:
        for li in range(LANES):
            for t, d in rig.lanes[li][p][1].arrived_outside(windows[p][li]):
                stray.append("%s lane %d: %r" % (p, li, d[:80]))
    return results, stray


def cell(o):
    if o is None:
        return "?"
    word = "FWD" if o["forwarded"] else "no"
    how = o["status"] if o["status"] not in ("-",) else o["ended"]
    return "%s %s" % (word, how)


def verdict(c, out):
    fw = {p: out[p]["forwarded"] for p in PROXIES}
    if c["control"]:
        return "ok" if all(fw.values()) else "FAIL (control)"
    if not fw["haproxy"] and not fw["nginx"]:
        return "FAIL" if fw["tidemark"] else "ok (all refuse)"
    return "n/a"


def table(results):
    rows = [("payload", "variant", "haproxy", "nginx", "tidemark",
             "verdict")]
    for c in CASES:
        for v in VARIANTS:
            out = results[(c["name"], v)]
            rows.append((c["name"], v) + tuple(cell(out.get(p))
                                               for p in PROXIES)
                        + (verdict(c, out),))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip()
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def row(results, name, variant):
    c = next(c for c in CASES if c["name"] == name)
    out = results[(name, variant)]
    parts = []
    for p in PROXIES:
        o = out[p]
        parts.append("%s: %s (ended %s%s; upstream saw %r)" % (
            p, cell(o), o["ended"],
            ", answer from upstream" if o["from_upstream"] else "",
            o["seen"]))
    return "%s [%s] %s\n  sent %r\n  %s" % (
        name, variant, verdict(c, out), out["tidemark"]["payload"][:200],
        "\n  ".join(parts))


# ------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    haproxy = find_binary("haproxy")
    nginx = find_binary("nginx")
    if haproxy is None or nginx is None:
        pytest.skip("differential test needs haproxy and nginx (make deps);"
                    " missing: %s" % ", ".join(
                        n for n, b in (("haproxy", haproxy),
                                       ("nginx", nginx)) if b is None))
    rig = Rig(tmp_path_factory.mktemp("differential"))
    try:
        rig.start(haproxy, nginx)
        t0 = time.monotonic()
        results, stray = run_all(rig)
        took = time.monotonic() - t0
        text = table(results)
        print("\n\ndifferential outcomes (%d payloads x %d variants, %.1fs;"
              " FWD = bytes reached the upstream, then the status the client"
              " got or how its connection ended)\n%s" % (
                  len(CASES), len(VARIANTS), took, text))
        if stray:
            print("bytes that reached an upstream outside any payload's "
                  "window:\n  " + "\n  ".join(stray))
        yield {"results": results, "table": text, "stray": stray}
    finally:
        errors = rig.stop()
        if errors:
            pytest.fail("\n\n".join(errors), pytrace=False)


# --------------------------------------------------------------- tests


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", [c["name"] for c in MALFORMED])
def test_tidemark_never_forwards_what_haproxy_and_nginx_refuse(
        outcomes, name, variant):
    out = outcomes["results"][(name, variant)]
    if out["haproxy"]["forwarded"] or out["nginx"]["forwarded"]:
        return  # no consensus to compare against
    assert not out["tidemark"]["forwarded"], (
        "tidemark forwarded what both HAProxy and nginx refuse:\n" +
        row(outcomes["results"], name, variant))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", REFUSED_BY_TIDEMARK)
def test_tidemark_refuses_framing_and_fencing_in_other_spellings(
        outcomes, name, variant):
    out = outcomes["results"][(name, variant)]
    assert not out["tidemark"]["forwarded"], (
        "tidemark forwarded a header some server reads as framing or "
        "fencing:\n" + row(outcomes["results"], name, variant))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", [c["name"] for c in CONTROLS])
def test_valid_controls_are_forwarded_by_all_three(outcomes, name, variant):
    out = outcomes["results"][(name, variant)]
    missing = [p for p in PROXIES if not out[p]["forwarded"]]
    assert not missing, "%s did not forward a valid request:\n%s" % (
        ", ".join(missing), row(outcomes["results"], name, variant))


def test_no_bytes_reached_an_upstream_between_payloads(outcomes):
    """Attribution check: every byte an upstream saw arrived while one
    payload of its lane was in flight."""
    assert not outcomes["stray"], outcomes["stray"]
