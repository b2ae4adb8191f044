"""Configuration: --check reports every problem as FILE:LINE: message and
exits 1; a good file exits 0; TIDEMARK_<SECTION>_<KEY> overrides."""

import re
import subprocess
import time

import pytest

from common import BIN, REPO, free_port
from daemon import child_env, run_check
from wire import assert_problem

BASE = """\
[proxy]
listen = 127.0.0.1:7070

[admin]
listen = 127.0.0.1:7071

[store]
type = lmdb
path = ./marks.lmdb

[upstream default]
url = http://127.0.0.1:8080

[route docs]
path = /v1/documents/{doc}
resource = documents/{doc}
"""
BASE_LINES = BASE.count("\n")


def problems(path, lines):
    """{line number: message} of every FILE:LINE: message line."""
    out = {}
    pat = re.compile(r"^%s:(\d+): (.+)$" % re.escape(str(path)))
    for ln in lines:
        m = pat.match(ln)
        if m:
            out.setdefault(int(m.group(1)), []).append(m.group(2))
    return out


def check_text(tmp_path, text, env=None):
    p = tmp_path / "check.ini"
    p.write_text(text)
    rc, lines = run_check(p, env)
    return p, rc, lines


def test_valid_file_exits_0(tmp_path):
    p, rc, lines = check_text(tmp_path, BASE)
    assert rc == 0, lines
    assert problems(p, lines) == {}


def test_every_documented_key(tmp_path):
    text = """\
; every key the contract names
[proxy]
listen = 127.0.0.1:7070
unmatched = reject            ; pass | reject
token_header = Fencing-Token
resource_header = Fencing-Resource
header_timeout_ms = 10000
idle_timeout_ms = 60000
max_head = 16384
max_headers = 100
max_connections = 1000
order_grace_ms = 1000
discard_limit = 65536
buffer_size = 65536
log_level = debug

[admin]
listen = 127.0.0.1:7071

[store]
type = lmdb
path = ./data/marks.lmdb
map_size = 1073741824
cache_entries = 100000
timeout_ms = 5000
pool_size = 2
wait_replicas = 0

[upstream default]
url = http://127.0.0.1:8080
connect_timeout_ms = 2000
timeout_ms = 30000
max_idle = 64

[upstream other]
url = http://localhost:9090/

[route documents]
methods = PUT POST PATCH DELETE
path = /v1/documents/{doc}
resource = documents/{doc}
mode = correctness
verify = none
upstream = default

[route files]
methods = PUT
path = /v1/files/{bucket}/{key*}
resource = files/{bucket}/{key*}
mode = efficiency
upstream = other

[route by-header]
path = /v1/any/{rest*}
resource = header
mode = off
"""
    p, rc, lines = check_text(tmp_path, text)
    assert rc == 0, lines
    assert problems(p, lines) == {}


def with_key(section, line):
    """BASE with line set in [section] (replacing the key's line if the
    section has it, else right after the header); and its number."""
    lines = BASE.splitlines()
    i = lines.index("[%s]" % section) + 1
    key = line.split("=")[0].strip()
    j = i
    while j < len(lines) and lines[j] and not lines[j].startswith("["):
        if lines[j].split("=")[0].strip() == key:
            lines[j] = line
            return "\n".join(lines) + "\n", {j + 1}
        j += 1
    lines.insert(i, line)
    return "\n".join(lines) + "\n", {i + 1}


def appended(extra, rel):
    return BASE + extra, {BASE_LINES + n for n in rel}


# Each case: the file, the line numbers the one problem may be reported
# at, and a word the message should contain (None: any).
CASES = [
    ("unknown-section", appended("[proxi]\nlisten = x\n", {1}), None),
    ("unknown-key", with_key("admin", "listn = 127.0.0.1:1"), "listn"),
    ("unknown-key-in-route", appended(
        "[route r]\npath = /r/{id}\nresource = r/{id}\ncolour = red\n",
        {4}), "colour"),
    ("bad-integer", with_key("proxy", "header_timeout_ms = soon"), None),
    ("negative-integer", with_key("proxy", "idle_timeout_ms = -5"), None),
    ("bad-unmatched", with_key("proxy", "unmatched = maybe"), None),
    ("bad-log-level", with_key("proxy", "log_level = loud"), None),
    ("bad-listen", with_key("admin", "listen = nowhere"), None),
    ("bad-upstream-url", appended("[upstream u]\nurl = ftp://x\n", {2}),
     None),
    ("upstream-without-url",
     appended("[upstream u]\ntimeout_ms = 5\n", {1, 2}), None),
    ("bad-map-size", with_key("store", "map_size = huge"), None),
    ("log-buffer-below-least", with_key("proxy", "log_buffer = 65535"),
     "must be 0 or between 65536 and 1073741824"),
    ("log-buffer-1-byte", with_key("proxy", "log_buffer = 1"),
     "must be 0 or between 65536 and 1073741824"),
    ("log-buffer-past-most", with_key("proxy", "log_buffer = 1073741825"),
     "must be 0 or between 65536 and 1073741824"),
    ("log-buffer-not-a-size", with_key("proxy", "log_buffer = lots"),
     "must be a size in bytes"),
    ("bad-store-type", with_key("store", "type = floppy"), None),
    ("bad-mode", with_key("route docs", "mode = strict"), None),
    ("bad-method", with_key("route docs", "methods = PUT put"), None),
    ("bad-method-token", with_key("route docs", "methods = PUT P(T"), None),
    ("path-not-canonical",
     with_key("route docs", "path = /v1/documents/{doc}/"), "canonical"),
    ("resource-not-canonical",
     with_key("route docs", "resource = documents//{doc}"), "canonical"),
    ("route-unknown-upstream", appended(
        "[route r]\npath = /r/{id}\nresource = r/{id}\nupstream = nosuch\n",
        {1, 4}), None),
    ("route-without-path", appended("[route r]\nresource = r\n", {1, 2}),
     None),
    ("template-unbalanced",
     appended("[route r]\npath = /r/{id\nresource = r\n", {2}),
     "missing its closing '}'"),
    ("template-no-slash",
     appended("[route r]\npath = r/{id}\nresource = r/{id}\n", {2}), None),
    ("template-rest-not-last",
     appended("[route r]\npath = /r/{a*}/x\nresource = r/{a}\n", {2}),
     None),
    ("template-duplicate-name",
     appended("[route r]\npath = /r/{a}/{a}\nresource = r/{a}\n", {2}),
     None),
    ("template-bad-name",
     appended("[route r]\npath = /r/{a-b}\nresource = r\n", {2}), None),
    ("resource-unknown-capture",
     appended("[route r]\npath = /r/{id}\nresource = r/{nope}\n", {3}),
     None),
    ("duplicate-route", appended(
        "[route docs]\npath = /v2/{doc}\nresource = d/{doc}\n", {1}), None),
    ("duplicate-upstream",
     appended("[upstream default]\nurl = http://a:1\n", {1, 2}), None),
    ("route-without-name",
     appended("[route]\npath = /r/{id}\nresource = r/{id}\n", {1}), None),
]


@pytest.mark.parametrize("text,want,word", [c[1] + (c[2],) for c in CASES],
                         ids=[c[0] for c in CASES])
def test_check_reports_problem_with_file_and_line(tmp_path, text, want,
                                                  word):
    p, rc, lines = check_text(tmp_path, text)
    assert rc == 1, lines
    found = problems(p, lines)
    assert found, "no FILE:LINE: message in %r" % lines
    assert set(found) & want, (found, want)
    assert sum(len(v) for v in found.values()) == 1, found
    for msgs in found.values():
        for m in msgs:
            assert m.strip(), found
            if word:
                assert word in m, m


@pytest.mark.parametrize("size", ["0", "65536", "64K", "1M", "1G"])
def test_log_buffer_sizes_that_load(tmp_path, size):
    p, rc, lines = check_text(tmp_path, with_key(
        "proxy", "log_buffer = %s" % size)[0])
    assert rc == 0, lines
    assert problems(p, lines) == {}


def test_route_without_upstream_and_no_default(tmp_path):
    text = BASE.replace("[upstream default]", "[upstream api]")
    p, rc, lines = check_text(tmp_path, text)
    assert rc == 1, lines
    found = problems(p, lines)
    route_line = text.splitlines().index("[route docs]") + 1
    assert set(found) & set(range(route_line, route_line + 3)), found


def test_every_problem_is_reported(tmp_path):
    text = """\
[proxy]
listen = 127.0.0.1:7070
unmatched = sometimes
bogus = 1

[nonsense]
a = b

[upstream default]
url = http://127.0.0.1:8080

[route a]
path = /a/{x
resource = a

[route b]
path = /b/{id}
resource = b/{id}
mode = loose

[route c]
path = /c/{id}
resource = c/{id}
upstream = missing
"""
    p, rc, lines = check_text(tmp_path, text)
    assert rc == 1, lines
    found = problems(p, lines)
    expected = [{3}, {4}, {6, 7}, {13}, {19}, {21, 24}]
    for want in expected:
        assert set(found) & want, (want, found, lines)
    assert sum(len(v) for v in found.values()) == len(expected), found


def test_missing_file(tmp_path):
    p = tmp_path / "nope.ini"
    rc, lines = run_check(p)
    assert rc == 1
    assert any(str(p) in ln for ln in lines), lines


def test_relative_path_is_named_as_given(tmp_path):
    text, line = with_key("proxy", "what = 1")
    (tmp_path / "rel.ini").write_text(text)
    r = subprocess.run([str(BIN), "-c", "rel.ini", "--check"],
                       capture_output=True, cwd=str(tmp_path),
                       env=child_env(), timeout=20)
    assert r.returncode == 1
    err = r.stderr.decode()
    assert re.search(r"^rel\.ini:%d: " % min(line), err, re.M), err


def test_running_with_a_bad_file_fails(tmp_path):
    p = tmp_path / "bad.ini"
    text, line = with_key("proxy", "unmatched = maybe")
    p.write_text(text)
    r = subprocess.run([str(BIN), "-c", str(p)], capture_output=True,
                       env=child_env(), timeout=20)
    assert r.returncode != 0
    assert "%s:%d:" % (p, min(line)) in r.stderr.decode()


# -------------------------------------------------------- env overrides


def test_env_override_bad_value_is_reported(tmp_path):
    p, rc, lines = check_text(tmp_path, BASE, env={
        "TIDEMARK_PROXY_HEADER_TIMEOUT_MS": "soon"})
    assert rc == 1
    assert any("TIDEMARK_PROXY_HEADER_TIMEOUT_MS" in ln for ln in lines), \
        lines


@pytest.mark.parametrize("name", ["TIDEMARK_NOSUCH_KEY",
                                  "TIDEMARK_PROXY_NOSUCH",
                                  "TIDEMARK_ROUTE_NOSUCH_MODE"])
def test_unknown_env_variable_is_an_error(tmp_path, name):
    p, rc, lines = check_text(tmp_path, BASE, env={name: "1"})
    assert rc == 1, lines
    assert any(name in ln for ln in lines), lines


# What Kubernetes puts in every pod of a namespace with a Service named
# tidemark (here with a port named http) and one named tidemark-admin.
K8S_LINKS = {
    "TIDEMARK_SERVICE_HOST": "10.96.0.10",
    "TIDEMARK_SERVICE_PORT": "7070",
    "TIDEMARK_SERVICE_PORT_HTTP": "7070",
    "TIDEMARK_PORT": "tcp://10.96.0.10:7070",
    "TIDEMARK_PORT_7070_TCP": "tcp://10.96.0.10:7070",
    "TIDEMARK_PORT_7070_TCP_PROTO": "tcp",
    "TIDEMARK_PORT_7070_TCP_PORT": "7070",
    "TIDEMARK_PORT_7070_TCP_ADDR": "10.96.0.10",
    "TIDEMARK_ADMIN_SERVICE_HOST": "10.96.0.11",
    "TIDEMARK_ADMIN_SERVICE_PORT": "7071",
    "TIDEMARK_ADMIN_PORT": "tcp://10.96.0.11:7071",
    "TIDEMARK_ADMIN_PORT_7071_TCP": "tcp://10.96.0.11:7071",
    "TIDEMARK_ADMIN_PORT_7071_TCP_PROTO": "tcp",
    "TIDEMARK_ADMIN_PORT_7071_TCP_PORT": "7071",
    "TIDEMARK_ADMIN_PORT_7071_TCP_ADDR": "10.96.0.11",
}


def test_kubernetes_service_links_do_not_stop_startup(tidemark, upstream):
    tm = tidemark(start=False,
                  env=dict(K8S_LINKS, TIDEMARK_ROUTE_DOCS_MODE="efficiency"))
    p, rc, lines = check_text(tm.dir, BASE, env=K8S_LINKS)
    assert rc == 0, lines
    tm.start()
    # Set aside in one line; the real override beside them applied.
    line = tm.wait_log("env: ignored as Kubernetes service links:")[0]
    for name in K8S_LINKS:
        assert (" " + name + " ") in line + " ", (name, line)
    assert tm.put("k", token=None).status == 200   # efficiency


def test_typos_stay_errors_beside_service_links(tmp_path):
    env = dict(K8S_LINKS, TIDEMARK_PROXY_LISTN="127.0.0.1:1",
               TIDEMARK_PROXY_PORT="7070")
    p, rc, lines = check_text(tmp_path, BASE, env=env)
    assert rc == 1
    assert lines == [
        "env:TIDEMARK_PROXY_LISTN: names no section and key of the "
        "configuration",
        "env:TIDEMARK_PROXY_PORT: names no section and key of the "
        "configuration"], lines


def test_env_override_valid_value_passes_check(tmp_path):
    p, rc, lines = check_text(tmp_path, BASE, env={
        "TIDEMARK_PROXY_UNMATCHED": "reject",
        "TIDEMARK_ROUTE_DOCS_MODE": "efficiency"})
    assert rc == 0, lines


def test_env_overrides_apply_at_run_time(tidemark, upstream,
                                         upstream_factory, tmp_path):
    other = upstream_factory()
    env_port = free_port()
    store = tmp_path / "env-store.lmdb"
    tm = tidemark(start=False, env={
        "TIDEMARK_PROXY_LISTEN": "127.0.0.1:%d" % env_port,
        "TIDEMARK_UPSTREAM_DEFAULT_URL": other.url,
        "TIDEMARK_STORE_PATH": str(store),
        "TIDEMARK_ROUTE_DOCS_MODE": "efficiency"})
    file_port = tm.port
    tm.port = env_port  # where it must listen now
    tm.start()
    r = tm.put("e", token=None, headers=[("X-Test-Id", "env")])
    assert r.status == 200, r  # efficiency: a missing token is forwarded
    assert len(other.find("X-Test-Id", "env")) == 1
    assert upstream.count() == 0
    assert tm.put("e", token=3).status == 200
    assert store.exists()
    # nothing listens on the port the file named
    import socket
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", file_port), timeout=1)
    tm.restart()
    assert tm.mark("documents/e") == 3


def test_token_header_name_is_configurable(tidemark, upstream):
    tm = tidemark(config={"proxy": {"token_header": "X-Lock-Token"}})
    r = tm.put("th", headers=[("X-Lock-Token", "4"), ("X-Test-Id", "th")])
    assert r.status == 200, r
    seen = upstream.find("X-Test-Id", "th")[0]
    assert seen.header("X-Lock-Token") is None
    assert_problem(tm.put("th", token=9), 428)


def test_check_is_quick_and_starts_nothing(tmp_path):
    port = free_port()
    text = BASE.replace("127.0.0.1:7070", "127.0.0.1:%d" % port)
    t0 = time.monotonic()
    p, rc, lines = check_text(tmp_path, text)
    assert rc == 0
    assert time.monotonic() - t0 < 5
    # validating creates no store
    assert not (tmp_path / "marks.lmdb").exists()


def test_the_application_sends_the_token_example_passes_check():
    """conf/examples/app-token.ini, the first of the three ways (README.md)
    to get a token to the fence, is a configuration tidemark takes as it
    is (lease.ini and the follow examples are checked by their tests)."""
    path = REPO / "conf" / "examples" / "app-token.ini"
    rc, lines = run_check(path)
    assert (rc, lines) == (0, ["%s: ok" % path])
