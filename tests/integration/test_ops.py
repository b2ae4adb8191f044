"""What an operator asks of a daemon: its version, the configuration in
effect (--check --print, GET /v1/config), systemd's readiness protocol
(Type=notify), and --check catching what would fail at start."""
import http.client
import os
import re
import resource
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from common import BIN, REPO, slow
from daemon import child_env, run_check

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "0123456789abcdef0123456789abcdef"


def changelog_version():
    first = (ROOT / "packaging/debian/changelog").read_text().splitlines()[0]
    return re.search(r"\((.*)\)", first).group(1)


def run(args, env=None, cwd=None):
    p = subprocess.run([str(BIN)] + args, stdin=subprocess.DEVNULL,
                       capture_output=True, env=child_env(env), cwd=cwd,
                       timeout=20 * slow())
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def test_version_is_the_packaged_one():
    rc, out, _ = run(["--version"])
    assert rc == 0
    assert out == "tidemark %s\n" % changelog_version()


def test_version_verbose_lists_the_build_and_each_library():
    rc, out, _ = run(["--version", "-v"])
    assert rc == 0
    assert run(["--verbose", "--version"]) == (0, out, "")
    lines = out.splitlines()
    assert lines[0] == "tidemark %s" % changelog_version()
    names = [ln.split(" ")[0].rstrip(":") for ln in lines[1:]]
    assert names == ["compiler", "CFLAGS", "sanitizers", "libevent", "lmdb",
                     "hiredis", "libpq", "OpenSSL", "jansson", "zookeeper",
                     "inih"]
    for ln in lines[4:]:
        assert re.match(r"\S+ \d+(\.\d+)*\S* ", ln + " "), ln


def test_verbose_without_version_is_a_usage_error():
    rc, out, err = run(["--verbose"])
    assert (rc, out) == (2, "")
    assert err.startswith("usage: tidemark")


def secret_file(tmp_path):
    p = tmp_path / "admin.token"
    p.write_text(TOKEN + "\n")
    os.chmod(p, 0o600)
    return p


def test_print_shows_overrides_and_hides_secrets(tmp_path):
    ini = tmp_path / "t.ini"
    ini.write_text(
        "[proxy]\nlisten = 127.0.0.1:7070\n"
        "[admin]\nlisten = 127.0.0.1:7071\ntoken_file = %s\n"
        "[upstream default]\nurl = http://127.0.0.1:8080\n"
        "add_header = Authorization: Bearer ${API_KEY}\n"
        "[route docs]\npath = /v1/documents/{doc}\n"
        "resource = documents/{doc}\n" % secret_file(tmp_path))
    env = {"API_KEY": "s3cr3t-key", "TIDEMARK_PROXY_IDLE_TIMEOUT_MS": "1234"}
    rc, out, err = run(["-c", str(ini), "--check", "--print"], env=env)
    assert rc == 0, err
    assert "idle_timeout_ms = 1234\n" in out
    assert "add_header = Authorization: (secret)\n" in out
    assert "s3cr3t-key" not in out and TOKEN not in out
    assert "[route docs]\n" in out and "resource = documents/{doc}\n" in out
    # What it prints is a configuration tidemark reads as the same one.
    again = tmp_path / "printed.ini"
    again.write_text(out)
    rc, out2, err = run(["-c", str(again), "-T"])
    assert rc == 0, err
    assert out2.splitlines()[1:] == out.splitlines()[1:]


def test_control_port_serves_the_configuration_behind_the_token(
        tidemark, tmp_path):
    tm = tidemark({"admin": {"token_file": str(secret_file(tmp_path))},
                   "proxy": {"idle_timeout_ms": "4321"}})

    def get(token=None):
        c = http.client.HTTPConnection("127.0.0.1", tm.admin_port,
                                       timeout=10)
        try:
            headers = {"Authorization": "Bearer " + token} if token else {}
            c.request("GET", "/v1/config", headers=headers)
            r = c.getresponse()
            return r.status, r.read().decode()
        finally:
            c.close()

    assert get()[0] == 401
    status, body = get(TOKEN)
    assert status == 200
    _, printed, _ = run(["-c", str(tm.ini_path), "--print"], cwd=str(tm.dir))
    assert body.splitlines() == printed.splitlines()[1:]
    assert "idle_timeout_ms = 4321" in body.splitlines()
    assert TOKEN not in body


def test_no_route_is_a_warning_and_strict_fails(tmp_path):
    ini = tmp_path / "locks-only.ini"
    ini.write_text("[proxy]\nlisten = 127.0.0.1:7070\n")
    rc, lines = run_check(ini)
    assert rc == 0
    assert "%s: warning: no [route] section: no request is fenced " \
           "(unmatched requests are passed or refused, per [proxy] " \
           "unmatched)" % ini in lines
    rc, _, err = run(["-c", str(ini), "--check", "--strict"])
    assert rc == 1
    assert err.splitlines()[-1] == "%s: warnings (--strict)" % ini


def test_proxy_and_control_port_on_one_address_is_an_error(tmp_path):
    ini = tmp_path / "clash.ini"
    ini.write_text("[proxy]\nlisten = 0.0.0.0:7300\n"
                   "[admin]\nlisten = 127.0.0.1:7300\n")
    rc, lines = run_check(ini)
    assert rc == 1
    assert lines == ["%s:4: [admin] listen 127.0.0.1:7300 is the address of "
                     "[proxy] listen 0.0.0.0:7300: the control port needs "
                     "its own" % ini]


def test_template_names_the_missing_brace(tmp_path):
    ini = tmp_path / "brace.ini"
    ini.write_text("[upstream default]\nurl = http://127.0.0.1:8080\n"
                   "[route r]\npath = /v1/r/{id\nresource = r/{id}\n")
    rc, lines = run_check(ini)
    assert rc == 1
    assert lines[0] == "%s:4: path: '{id' is missing its closing '}'" % ini


def test_check_names_a_store_path_that_cannot_be_opened(tmp_path):
    (tmp_path / "afile").write_text("")
    ini = tmp_path / "store.ini"
    ini.write_text("[upstream default]\nurl = http://127.0.0.1:8080\n"
                   "[store]\ntype = lmdb\npath = %s/afile/marks.lmdb\n"
                   "[locks]\npath = %s/locks.lmdb\n" % (tmp_path, tmp_path))
    rc, lines = run_check(ini)
    assert rc == 1
    assert lines == ["%s:5: [store] path %s/afile/marks.lmdb cannot be "
                     "opened: Not a directory" % (ini, tmp_path)]


def test_check_names_a_default_store_path_without_a_line(tmp_path):
    (tmp_path / "data").write_text("")     # where ./data/ would be made
    ini = tmp_path / "default-store.ini"
    ini.write_text("[upstream default]\nurl = http://127.0.0.1:8080\n"
                   "[locks]\npath = %s/locks.lmdb\n" % tmp_path)
    rc, lines = run_check(ini)
    assert rc == 1
    assert lines == ["%s: [store] path ./data/marks.lmdb cannot be opened: "
                     "Not a directory" % ini]


def test_check_accepts_a_store_directory_to_be_made_and_makes_none(
        tmp_path):
    ini = tmp_path / "new-dir.ini"
    ini.write_text("[upstream default]\nurl = http://127.0.0.1:8080\n"
                   "[route r]\npath = /v1/r/{id}\nresource = r/{id}\n"
                   "[store]\npath = %s/new/sub/marks.lmdb\n" % tmp_path)
    rc, lines = run_check(ini)
    assert (rc, lines) == (0, ["%s: ok" % ini])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new-dir.ini"]


def test_upstream_host_that_does_not_resolve_is_a_warning(tmp_path):
    ini = tmp_path / "dns.ini"
    ini.write_text("[upstream default]\n"
                   "url = http://no-such-host.invalid:8080\n"
                   "[route r]\npath = /v1/r/{id}\nresource = r/{id}\n")
    rc, lines = run_check(ini)
    assert rc == 0
    assert lines[0].startswith(
        "%s:2: warning: [upstream default] url: host no-such-host.invalid: "
        % ini), lines
    assert lines[1:] == ["%s: ok" % ini]
    rc, _, err = run(["-c", str(ini), "--check", "--strict"])
    assert rc == 1
    assert err.splitlines()[-1] == "%s: warnings (--strict)" % ini


def test_listen_failure_names_the_errno(tidemark):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    try:
        tm = tidemark({"proxy": {"listen": "127.0.0.1:%d"
                                 % busy.getsockname()[1]}}, start=False)
        assert tm.start_fails() == 1
        assert tm.log_lines("cannot listen on 127.0.0.1:%d: Address already "
                            "in use (EADDRINUSE)" % busy.getsockname()[1])
    finally:
        busy.close()


class NotifySocket:
    """The end of systemd's notification socket (sd_notify's peer)."""

    def __init__(self, path):
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(20 * slow())

    def next(self):
        data = self.sock.recv(4096).decode()
        return dict(kv.split("=", 1) for kv in data.splitlines())

    def close(self):
        self.sock.close()


def test_systemd_hears_ready_reloading_and_stopping(tidemark, tmp_path):
    ns = NotifySocket(tmp_path / "notify.sock")
    try:
        tm = tidemark(env={"NOTIFY_SOCKET": ns.path}, start=False)
        tm.start(wait=False)
        msg = ns.next()
        assert msg["READY"] == "1"
        tm.wait_ready()
        tm.proc.send_signal(signal.SIGHUP)
        msg = ns.next()
        assert msg["RELOADING"] == "1" and int(msg["MONOTONIC_USEC"]) > 0
        msg = ns.next()
        assert msg["READY"] == "1"
        assert msg["STATUS"] == "serving; configuration reloaded"
        tm.stop()
        msg = ns.next()
        assert msg["STOPPING"] == "1"
    finally:
        ns.close()


def test_systemd_hears_a_refused_reload(tidemark, tmp_path):
    ns = NotifySocket(tmp_path / "notify.sock")
    try:
        tm = tidemark(env={"NOTIFY_SOCKET": ns.path}, start=False)
        tm.start(wait=False)
        assert ns.next()["READY"] == "1"
        tm.wait_ready()
        tm.ini_path.write_text(tm.ini_path.read_text() + "[nonsense]\n")
        tm.proc.send_signal(signal.SIGHUP)
        assert ns.next()["RELOADING"] == "1"
        msg = ns.next()
        assert msg["READY"] == "1"
        assert msg["STATUS"] == "reload refused: the old configuration stays"
    finally:
        ns.close()


def nofile(soft, hard=None):
    """A preexec that sets the child's open-files limit."""
    def set_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE,
                           (soft, soft if hard is None else hard))
    return set_limit


def max_open_files(pid):
    with open("/proc/%d/limits" % pid) as f:
        for ln in f:
            if ln.startswith("Max open files"):
                return int(ln.split()[3])
    raise AssertionError("no Max open files in /proc/%d/limits" % pid)


def test_default_max_connections_fits_a_low_open_files_limit(tidemark):
    tm = tidemark(start=False)
    tm.start(preexec=nofile(1024))
    assert tm.log_lines("level=warn ") == []
    assert tm.log_lines("note: max_connections = 480, not the default "
                        "10000: the open files limit is 1024") != []
    assert tm.put("fit", token=2).status == 200


def test_the_shipped_configuration_starts_without_a_warning(tidemark,
                                                             upstream):
    """conf/tidemark.ini (the .deb's and the image's, once its paths are
    set) leaves max_connections to its default: under an open files limit
    of 1024 the start warns of nothing."""
    text = (REPO / "conf" / "tidemark.ini").read_text()
    assert re.search(r"^max_connections", text, re.M) is None
    tm = tidemark(start=False)
    # In the file's order: [proxy] and [admin] listen, [store] and
    # [locks] path, [upstream default] url.
    values = iter(["127.0.0.1:%d" % tm.port, "127.0.0.1:%d" % tm.admin_port,
                   str(tm.dir / "marks.lmdb"), str(tm.dir / "locks.lmdb"),
                   upstream.url])
    text = re.sub(r"^(listen|path|url) = \S+",
                  lambda m: "%s = %s" % (m.group(1), next(values)), text,
                  count=5, flags=re.M)
    assert next(values, None) is None
    tm.ini_path.write_text(text)
    tm.start(preexec=nofile(1024))
    assert tm.log_lines("level=warn ") == []
    assert tm.put("fit", token=2).status == 200


def test_default_start_raises_the_soft_open_files_limit(tidemark):
    """Soft limit 1024 under the hard one: raised to what the default
    max_connections (10000) needs, 20064, or to the hard limit."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    want = 20064 if hard == resource.RLIM_INFINITY else min(20064, hard)
    tm = tidemark(start=False)
    tm.start(preexec=nofile(1024, hard))
    assert tm.log_lines("level=warn ") == []
    assert max_open_files(tm.proc.pid) == want


def test_explicit_max_connections_over_the_limit_is_a_warning(tidemark):
    tm = tidemark({"proxy": {"max_connections": "10000"}}, start=False)
    tm.start(preexec=nofile(1024))
    warns = tm.log_lines("level=warn ")
    assert len(warns) == 1, warns
    assert warns[0].endswith("open files limited to 1024; max_connections "
                             "= 10000 may need 20064"), warns
