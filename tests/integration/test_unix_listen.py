"""The application reaches the sidecar over a Unix socket (listen =
unix:PATH, as nginx spells it): fenced writes through it with curl and
Python's http.client; a stale socket file of a killed process removed at
start, a path a live process answers on refused ("in use"), a file that
is not a socket left alone; the file's mode and group set before anyone
can connect; the file removed at a clean stop; a reload keeps the
listener; a client on the socket is "unix:" in the access log and in
X-Forwarded-For; socket paths in each length class (1 byte, tens, 107 =
what sun_path holds, 108, 109), which test-sanitize runs under ASan."""

import grp
import http.client
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile

import pytest

from common import slow
from daemon import run_check

SUN_PATH_MAX = 107      # sizeof(sun_path) - 1


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over AF_UNIX."""

    def __init__(self, path, timeout=10.0):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.path)
        self.sock = s


def unix_tm(tidemark, path, **proxy):
    keys = {"listen": "unix:%s" % path}
    keys.update(proxy)
    return tidemark({"proxy": keys}, start=False)


def sock_path(tmp_path, name="app.sock"):
    return str(tmp_path / name)


def put(path, doc, token):
    c = UnixHTTPConnection(path, timeout=10 * slow())
    c.request("PUT", "/v1/documents/%s" % doc, body=b"data",
              headers={"Fencing-Token": str(token)})
    r = c.getresponse()
    r.read()
    c.close()
    return r.status


def test_fenced_writes_through_the_socket_with_http_client(tidemark,
                                                           upstream,
                                                           tmp_path):
    path = sock_path(tmp_path)
    tm = unix_tm(tidemark, path).start()
    assert put(path, "u1", 5) == 200
    assert put(path, "u1", 3) == 409
    assert put(path, "u1", 5) == 200
    assert [r.method for r in upstream.requests] == ["PUT", "PUT"]
    assert tm.mark("documents/u1") == 5
    tm.wait_log("event=refused", 'client="unix:"', "status=409")


def test_fenced_writes_through_the_socket_with_curl(tidemark, upstream,
                                                    tmp_path):
    path = sock_path(tmp_path)
    unix_tm(tidemark, path).start()

    def curl(token):
        p = subprocess.run(
            ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
             "--unix-socket", path, "-X", "PUT", "--data-binary", "x",
             "-H", "Fencing-Token: %d" % token,
             "http://localhost/v1/documents/c1"],
            capture_output=True, timeout=20 * slow(), check=True)
        return p.stdout.decode()

    assert curl(7) == "200"
    assert curl(6) == "409"
    assert len(upstream.requests) == 1


@pytest.mark.parametrize("how", ["x-forwarded-for", "forwarded"])
def test_a_socket_client_is_named_unix_when_forwarded(tidemark, upstream,
                                                      tmp_path, how):
    path = sock_path(tmp_path)
    tm = tidemark({"proxy": {"listen": "unix:%s" % path},
                   "upstream default": {"forwarded": how}})
    assert put(path, "f1", 1) == 200
    seen = upstream.wait_for(lambda: upstream.requests, what="a request")[0]
    if how == "x-forwarded-for":
        assert seen.header("X-Forwarded-For") == "unix:"
    else:
        assert seen.header("Forwarded") == "for=unknown"
    assert tm.alive()


def test_a_path_in_use_is_refused_and_left_to_its_owner(tidemark, tmp_path):
    path = sock_path(tmp_path)
    first = unix_tm(tidemark, path).start()
    second = unix_tm(tidemark, path)
    assert second.start_fails() == 1
    assert "cannot listen on unix:%s: in use (a running process answers " \
        "on it)" % path in second.log()
    # The first keeps its socket and serves on it.
    assert stat.S_ISSOCK(os.lstat(path).st_mode)
    assert put(path, "inuse", 2) == 200
    assert first.alive()


def test_a_stale_socket_of_a_killed_process_is_removed(tidemark, tmp_path):
    path = sock_path(tmp_path)
    tm = unix_tm(tidemark, path).start()
    assert put(path, "stale", 4) == 200
    tm.kill9()
    assert stat.S_ISSOCK(os.lstat(path).st_mode)   # left behind
    tm.start()
    tm.wait_log("removed the stale socket unix:%s" % path)
    assert put(path, "stale", 3) == 409
    assert put(path, "stale", 4) == 200


def test_a_file_that_is_not_a_socket_is_left_alone(tidemark, tmp_path):
    path = sock_path(tmp_path)
    with open(path, "w") as f:
        f.write("keep me\n")
    tm = unix_tm(tidemark, path)
    assert tm.start_fails() == 1
    assert "cannot listen on unix:%s: the file exists and is not a socket " \
        "(not removed)" % path in tm.log()
    with open(path) as f:
        assert f.read() == "keep me\n"


def test_a_clean_stop_removes_the_socket_file(tidemark, tmp_path):
    path = sock_path(tmp_path)
    tm = unix_tm(tidemark, path).start()
    assert os.path.exists(path)
    assert tm.stop() == 0
    assert not os.path.exists(path)


def test_a_reload_keeps_the_listener(tidemark, tmp_path):
    path = sock_path(tmp_path)
    tm = unix_tm(tidemark, path).start()
    ino = os.lstat(path).st_ino
    tm.ini_path.write_text(tm.ini_path.read_text().replace(
        "listen = unix:%s" % path, "listen = unix:%s.new" % path))
    tm.proc.send_signal(signal.SIGHUP)
    tm.wait_log("reload: [proxy] listen changed: needs a restart; keeping "
                "unix:%s" % path)
    assert os.lstat(path).st_ino == ino
    assert not os.path.exists(path + ".new")
    assert put(path, "reload", 1) == 200


def test_mode_and_group_are_set_before_clients_come(tidemark, tmp_path):
    path = sock_path(tmp_path)
    group = grp.getgrnam("daemon")
    unix_tm(tidemark, path, listen_mode="0640",
            listen_group="daemon").start()
    st = os.lstat(path)
    assert stat.S_IMODE(st.st_mode) == 0o640
    assert st.st_gid == group.gr_gid


def test_the_default_mode_keeps_other_users_out(tidemark, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to connect as another user")
    os.chmod(tmp_path, 0o755)
    path = sock_path(tmp_path)
    unix_tm(tidemark, path).start()
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o660
    code = ("import socket\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            "try:\n"
            "    s.connect(%r)\n"
            "    print('connected')\n"
            "except PermissionError:\n"
            "    print('refused')\n" % path)
    p = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup",
                        "--clear-groups", "/usr/bin/python3", "-c", code],
                       capture_output=True, timeout=20 * slow())
    assert p.stdout.decode().strip() == "refused", p.stderr


@pytest.fixture
def short_dir():
    """A directory with a short path (tmp_path's takes 70 bytes)."""
    d = tempfile.mkdtemp(prefix="tm", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def exact_path(tmp_path, n):
    """An absolute path of exactly n bytes in tmp_path."""
    base = str(tmp_path) + "/"
    assert len(base) + 1 < n, base
    return base + "s" * (n - len(base))


@pytest.mark.lengths
@pytest.mark.parametrize("n", [1, 40, SUN_PATH_MAX])
def test_socket_paths_that_fit_serve(tidemark, tmp_path, short_dir, n):
    if n == 1:
        listen = "s"        # relative to tidemark's directory
        path = str(tmp_path / "tm0" / listen)
    else:
        path = listen = exact_path(short_dir if n < 60 else tmp_path, n)
    assert len(listen) == n
    tm = tidemark({"proxy": {"listen": "unix:%s" % listen}})
    assert tm.unix_path == path
    assert put(path, "len%d" % n, 1) == 200
    assert tm.stop() == 0
    assert not os.path.exists(path)


@pytest.mark.lengths
@pytest.mark.parametrize("n", [SUN_PATH_MAX + 1, SUN_PATH_MAX + 2])
def test_socket_paths_too_long_are_errors_at_load(tidemark, tmp_path, n):
    path = exact_path(tmp_path, n)
    tm = unix_tm(tidemark, path)
    rc, lines = run_check(tm.ini_path)
    line = [i for i, ln in enumerate(tm.ini_path.read_text().splitlines(), 1)
            if ln.startswith("listen = unix:")][0]
    assert rc != 0
    assert "%s:%d: listen: the socket path is %d bytes; a Unix " \
        "socket path holds at most %d" % (tm.ini_path, line, n,
                                          SUN_PATH_MAX) in lines, lines
    assert tm.start_fails() != 0
    assert not os.path.exists(path)


@pytest.mark.parametrize("listen, mode, want", [
    ("unix:", "0660", "listen: unix: needs a socket path"),
    ("unix:/tmp/x.sock", "660x", "listen_mode: must be octal permission"),
    ("unix:/tmp/x.sock", "01777", "listen_mode: must be octal permission"),
])
def test_bad_socket_settings_are_errors_at_load(tidemark, listen, mode,
                                                want):
    tm = tidemark({"proxy": {"listen": listen, "listen_mode": mode}},
                  start=False)
    rc, lines = run_check(tm.ini_path)
    assert rc != 0
    assert [ln for ln in lines if want in ln], lines


def test_a_group_that_does_not_exist_is_an_error(tidemark, tmp_path):
    path = sock_path(tmp_path)
    tm = unix_tm(tidemark, path, listen_group="no-such-group-here")
    rc, lines = run_check(tm.ini_path)
    line = [i for i, ln in enumerate(tm.ini_path.read_text().splitlines(), 1)
            if ln.startswith("listen_group =")][0]
    want = "listen_group no-such-group-here: no such group"
    assert rc != 0
    assert "%s:%d: %s" % (tm.ini_path, line, want) in lines, lines
    assert tm.start_fails() == 1
    assert want in tm.log()
    assert not os.path.exists(path)
