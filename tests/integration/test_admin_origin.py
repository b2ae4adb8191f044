"""No web page can drive the control port: requests from another origin
(Origin, Sec-Fetch-Site; another port of the same host is another
origin) and Host names that are not the control port's own (DNS
rebinding) are refused, before any route and whatever the token. Each
test sends what a browser sends; curl-style calls (no Origin) work."""
import http.client
import http.server
import json
import shutil
import signal
import socket
import subprocess
import threading

import pytest

from common import free_port, slow
from daemon import run_check

CHROMIUM = shutil.which("chromium")


def call(tm, method, path, headers=None):
    """One request; a Host in headers replaces http.client's own."""
    c = http.client.HTTPConnection("127.0.0.1", tm.admin_port,
                                   timeout=10 * slow())
    try:
        c.request(method, path, headers=headers or {})
        r = c.getresponse()
        return r.status, r.getheader("Content-Type"), r.read()
    finally:
        c.close()


def assert_refused(resp, status, detail):
    st, ctype, body = resp
    assert st == status, resp
    assert ctype == "application/problem+json", resp
    doc = json.loads(body)
    assert doc["status"] == status
    assert detail in doc["detail"], doc


def browser(tm, origin_port=None, site=None, mode="cors"):
    """The headers Chromium sends with a fetch to the control port from a
    page on origin_port (None: the control port's own page)."""
    own = origin_port is None
    port = tm.admin_port if own else origin_port
    h = {"Origin": "http://127.0.0.1:%d" % port,
         "Sec-Fetch-Site": site or ("same-origin" if own else "same-site"),
         "Sec-Fetch-Mode": mode, "Sec-Fetch-Dest": "empty",
         "User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0"}
    return h


def test_cross_origin_post_takes_no_lock(tidemark):
    """A page on another localhost port: a plain cross-site POST (what
    fetch with mode no-cors or a form sends) is refused, and nothing is
    taken or raised."""
    tm = tidemark()
    other = free_port()
    for mode in ("no-cors", "cors", "navigate"):
        assert_refused(call(tm, "POST", "/v1/locks/jobs/x?ttl_ms=3600000",
                            browser(tm, other, mode=mode)),
                       403, "another origin")
    # Sec-Fetch-Site alone (an Origin-less navigation), Origin alone.
    assert_refused(call(tm, "POST", "/v1/locks/jobs/x?ttl_ms=3600000",
                        {"Sec-Fetch-Site": "cross-site"}), 403,
                   "Sec-Fetch-Site")
    assert_refused(call(tm, "POST", "/v1/locks/jobs/x?ttl_ms=3600000",
                        {"Origin": "http://127.0.0.1:%d" % other}), 403,
                   "Origin")
    # Sandboxed frames and file: pages send Origin: null.
    assert_refused(call(tm, "POST", "/v1/locks/jobs/x",
                        {"Origin": "null"}), 403, "Origin")
    # Another name of the same address is another origin, too.
    assert_refused(call(tm, "POST", "/v1/locks/jobs/x", {
        "Origin": "http://localhost:%d" % tm.admin_port}), 403, "Origin")
    # Nothing was taken, nothing raised.
    assert call(tm, "GET", "/v1/locks/jobs/x")[0] == 404
    assert tm.mark("jobs/x") is None
    tm.wait_log("admin: refused /v1/locks/jobs/x")
    # Read-only calls are refused as well: they reveal marks and leases.
    for path in ("/v1/marks/jobs/x", "/v1/recent", "/metrics", "/"):
        assert_refused(call(tm, "GET", path, browser(tm, other)), 403,
                       "another origin")


def test_same_origin_and_curl_calls_work(tidemark):
    tm = tidemark()
    # The live page's own fetches (a POST carries Origin; a GET only
    # Sec-Fetch-Site).
    st, _, body = call(tm, "POST", "/v1/locks/jobs/own?ttl_ms=10000",
                       browser(tm))
    assert st == 201, body
    fence = json.loads(body)["fence"]
    h = browser(tm)
    del h["Origin"]
    st, _, body = call(tm, "GET", "/v1/locks/jobs/own", h)
    assert st == 200 and json.loads(body)["fence"] == fence
    assert call(tm, "GET", "/v1/recent", h)[0] == 200
    # Typed in the address bar.
    assert call(tm, "GET", "/", {"Sec-Fetch-Site": "none",
                                 "Sec-Fetch-Mode": "navigate"})[0] == 200
    # curl: no Origin, no Sec-Fetch-*; by name or by address.
    assert call(tm, "POST", "/v1/locks/jobs/curl?ttl_ms=1000")[0] == 201
    for host in ("localhost", "127.0.0.1", "LOCALHOST.", "x.localhost"):
        assert call(tm, "GET", "/healthz", {
            "Host": "%s:%d" % (host, tm.admin_port)})[0] == 200, host


def test_foreign_host_is_421_everywhere(tidemark):
    """DNS rebinding: a page of evil.example whose name now resolves to
    127.0.0.1 sends Host: evil.example:PORT, and same-origin headers."""
    tm = tidemark()
    assert tm.put("rebound", token=5).status == 200
    evil = "evil.example:%d" % tm.admin_port
    h = {"Host": evil, "Origin": "http://" + evil,
         "Sec-Fetch-Site": "same-origin"}
    for method, path in (("POST", "/v1/locks/jobs/r?ttl_ms=3600000"),
                         ("GET", "/v1/marks/documents/rebound"),
                         ("GET", "/v1/recent"), ("GET", "/metrics"),
                         ("GET", "/"), ("GET", "/healthz"),
                         ("GET", "/readyz")):
        assert_refused(call(tm, method, path, h), 421, "allowed_hosts")
        assert_refused(call(tm, method, path, {"Host": evil}), 421,
                       "allowed_hosts")
    assert call(tm, "GET", "/v1/locks/jobs/r")[0] == 404
    # A port that is not the control port's: a forwarder in between.
    assert_refused(call(tm, "GET", "/healthz",
                        {"Host": "127.0.0.1:%d" % free_port()}),
                   421, "port")
    # An address that is not the one listened on (127.0.0.1 here) nor
    # loopback.
    assert_refused(call(tm, "GET", "/healthz",
                        {"Host": "192.0.2.1:%d" % tm.admin_port}),
                   421, "allowed_hosts")


def test_host_without_a_port_names_port_80(tidemark):
    """A Host without a port is what a browser sends for http://name/:
    port 80, judged like name:80 (the page of another origin, or a
    forwarder from port 80), by address or by name, loopback or not;
    nothing is taken."""
    tm = tidemark()
    for host in ("127.0.0.1", "localhost", "[::1]", "evil.example"):
        for h in ({"Host": host},
                  {"Host": host, "Origin": "http://" + host,
                   "Sec-Fetch-Site": "same-origin"}):
            assert_refused(call(tm, "POST", "/v1/locks/jobs/p?ttl_ms=10000",
                                h), 421, "port 80")
            assert_refused(call(tm, "GET", "/healthz", h), 421, "port 80")
    assert call(tm, "GET", "/v1/locks/jobs/p")[0] == 404


def raw(tm, head):
    """Send head (request line and fields, without the blank line) on a
    connection of its own: everything tidemark answers until it closes
    the connection."""
    s = socket.create_connection(("127.0.0.1", tm.admin_port),
                                 timeout=5 * slow())
    try:
        s.sendall(head + b"\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break    # the server closed the connection
            data += chunk
    finally:
        s.close()
    return data


def test_http11_without_host_is_400(tidemark):
    """RFC 9112 section 3.2: an HTTP/1.1 request without Host is a 400
    (and takes nothing); HTTP/1.0 may leave it out (old probes)."""
    tm = tidemark()
    data = raw(tm, b"POST /v1/locks/jobs/h?ttl_ms=10000 HTTP/1.1\r\n"
               b"Content-Length: 0\r\n")
    assert data.startswith(b"HTTP/1.1 400 "), data
    assert b"application/problem+json" in data
    assert b"needs a Host header" in data
    assert call(tm, "GET", "/v1/locks/jobs/h")[0] == 404
    data = raw(tm, b"GET /healthz HTTP/1.0\r\n")
    assert data.startswith(b"HTTP/1.0 200 "), data


def test_allowed_hosts(tidemark):
    tm = tidemark(config={"admin": {
        "allowed_hosts": "tm.internal  Admin.Example"}})
    for host in ("tm.internal", "admin.example", "ADMIN.EXAMPLE."):
        name = "%s:%d" % (host, tm.admin_port)
        assert call(tm, "GET", "/healthz", {"Host": name})[0] == 200
        # Its own origin under that name is same-origin.
        assert call(tm, "POST", "/v1/locks/jobs/%s?ttl_ms=1000" % host, {
            "Host": name, "Origin": "http://" + name,
            "Sec-Fetch-Site": "same-origin"})[0] == 201
    assert_refused(call(tm, "GET", "/healthz", {
        "Host": "x.tm.internal:%d" % tm.admin_port}), 421, "allowed_hosts")
    # From the environment as well.
    tm2 = tidemark(env={"TIDEMARK_ADMIN_ALLOWED_HOSTS": "env.example"})
    assert call(tm2, "GET", "/healthz", {
        "Host": "env.example:%d" % tm2.admin_port})[0] == 200
    # SIGHUP applies a new list.
    text = tm.ini_path.read_text().replace("tm.internal  Admin.Example",
                                           "later.example")
    tm.ini_path.write_text(text)
    tm.proc.send_signal(signal.SIGHUP)
    tm.wait_log("reloaded:")
    assert call(tm, "GET", "/healthz", {
        "Host": "later.example:%d" % tm.admin_port})[0] == 200
    assert_refused(call(tm, "GET", "/healthz", {
        "Host": "tm.internal:%d" % tm.admin_port}), 421, "allowed_hosts")


def test_bad_allowed_hosts_is_a_config_error(tidemark):
    tm = tidemark(config={"admin": {"allowed_hosts": "ok.example bad:80"}},
                  start=False)
    rc, lines = run_check(tm.ini_path)
    assert rc == 1
    assert any("allowed_hosts: must be host names" in ln for ln in lines), \
        lines


def test_malformed_or_repeated_host_is_400_and_closes(tidemark):
    tm = tidemark()
    for head in (b"Host: localhost:%d\r\nHost: evil.example\r\n",
                 b"Host: localhost:%d\r\nOrigin: http://a\r\nOrigin: b\r\n",
                 b"Host: [::1\r\n", b"Host: local host:%d\r\n",
                 b"Host: localhost:0\r\n"):
        if b"%d" in head:
            head = head % tm.admin_port
        data = raw(tm, b"POST /v1/locks/jobs/m?ttl_ms=1000 HTTP/1.1\r\n" +
                   head + b"Content-Length: 0\r\n")
        assert data.startswith(b"HTTP/1.1 400 "), (head, data)
        assert b"application/problem+json" in data
    assert call(tm, "GET", "/v1/locks/jobs/m")[0] == 404


class _PageHandler(http.server.BaseHTTPRequestHandler):
    page = b""

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, *a):
        pass


def run_chromium(url, tmp_path, extra=()):
    p = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--user-data-dir=%s" % (tmp_path / "chromium"),
         "--virtual-time-budget=5000", *extra, "--dump-dom", url],
        stdin=subprocess.DEVNULL, capture_output=True, timeout=90)
    assert p.returncode == 0, p.stderr.decode(errors="replace")[-2000:]
    return p.stdout.decode(errors="replace")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                    "(make deps installs it)")
def test_chromium_page_on_another_port_takes_no_lock(tidemark, tmp_path):
    """A real browser: a page served from another localhost port fires
    a no-cors POST and a form POST at the lock API; neither takes the
    lock."""
    tm = tidemark()
    target = "http://127.0.0.1:%d/v1/locks/jobs/web?ttl_ms=3600000" % (
        tm.admin_port)
    handler = type("H", (_PageHandler,), {"page": (
        "<!doctype html><title>x</title><p id=r>waiting</p>"
        "<iframe name=f></iframe>"
        "<form id=form method=post target=f action='%s&form=1'></form>"
        "<script>"
        "fetch('%s',{method:'POST',mode:'no-cors'})"
        ".then(function(){document.getElementById('r').textContent="
        "'fetched'},function(e){document.getElementById('r')"
        ".textContent='failed '+e});"
        "document.getElementById('form').submit();"
        "</script>" % (target, target)).encode()})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        dom = run_chromium("http://127.0.0.1:%d/" % srv.server_port,
                           tmp_path)
    finally:
        srv.shutdown()
        srv.server_close()
        th.join()
    # A no-cors fetch resolves to an opaque answer whatever the status.
    assert "fetched" in dom, dom
    # Both requests reached tidemark and were refused.
    tm.wait_log("admin: refused /v1/locks/jobs/web", count=2)
    assert call(tm, "GET", "/v1/locks/jobs/web")[0] == 404
    assert tm.mark("jobs/web") is None


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                    "(make deps installs it)")
def test_chromium_rebound_name_gets_no_page(tidemark, tmp_path):
    """A name that resolves to the control port (what DNS rebinding
    achieves) gets a 421, not the page or its data."""
    tm = tidemark()
    dom = run_chromium(
        "http://rebound.example:%d/" % tm.admin_port, tmp_path,
        ("--host-resolver-rules=MAP rebound.example 127.0.0.1",))
    assert "allowed_hosts" in dom, dom
    assert "updated " not in dom
    tm.wait_log("admin: refused /:")
