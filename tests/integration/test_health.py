"""tidemark -c FILE --health, the probe the container image's HEALTHCHECK
runs: it asks the control port FILE names (after the TIDEMARK_ overrides)
for /readyz and exits 0 only when it answers 200; --wait S asks again
until then. The image's own command is run in test_image.py."""
import socket
import subprocess
import threading
import time

from common import BIN, free_port, slow
from daemon import child_env
from test_admin_token import TOKEN, call, token_file


def health(tm, *args, env=None):
    """Run the probe against tm's file; (exit status, its line)."""
    p = subprocess.run([str(BIN), "-c", str(tm.ini_path), "--health"] +
                       list(args), capture_output=True, env=child_env(env),
                       timeout=60 * slow())
    return p.returncode, p.stdout.decode() + p.stderr.decode()


def test_it_follows_readiness(tidemark, tmp_path):
    tm = tidemark({"admin": {"token_file": str(token_file(tmp_path))}},
                  start=False)
    rc, out = health(tm)
    assert rc == 1 and "Connection refused" in out, out
    tm.start()
    assert health(tm) == (0, "tidemark: /readyz on 127.0.0.1:%d: 200\n"
                          % tm.admin_port)
    assert call(tm, "PUT", "/v1/ready", TOKEN, b"fail")[0] == 200
    assert health(tm) == (1, "tidemark: /readyz on 127.0.0.1:%d: 503\n"
                          % tm.admin_port)
    assert call(tm, "PUT", "/v1/ready", TOKEN, b"ok")[0] == 200
    assert health(tm)[0] == 0
    assert tm.stop() == 0
    assert health(tm)[0] == 1


def test_it_follows_the_environment_and_wildcards(tidemark):
    """TIDEMARK_ADMIN_LISTEN moves the control port, and the probe with
    it; a wildcard address is asked on loopback."""
    tm = tidemark(start=False)
    port = free_port()
    env = {"TIDEMARK_ADMIN_LISTEN": "0.0.0.0:%d" % port}
    tm.env.update(env)
    tm.admin_port = port
    tm.start()
    assert health(tm, env=env) == (0, "tidemark: /readyz on 0.0.0.0:%d: 200\n"
                                   % port)
    # The file's own address has nothing behind it now.
    assert health(tm)[0] == 1


def test_a_peer_that_is_no_control_port_fails_it(tidemark):
    """Something that accepts and says nothing, or says no HTTP, is not
    ready: exit 1 within the probe's 2 s, not a hang."""
    tm = tidemark(start=False)
    srv = socket.socket()
    srv.bind(("127.0.0.1", tm.admin_port))
    srv.listen(8)
    conns = []

    def serve():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            conns.append(c)
            if len(conns) == 2:
                c.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        start = time.monotonic()
        rc, out = health(tm)
        assert rc == 1 and "no HTTP answer in time" in out, out
        assert time.monotonic() - start < 10 * slow()
        rc, out = health(tm)
        assert rc == 1 and "no HTTP answer in time" in out, out
    finally:
        srv.close()
        for c in conns:
            c.close()


def test_wait_holds_until_ready(tidemark):
    tm = tidemark(start=False)
    p = subprocess.Popen([str(BIN), "-c", str(tm.ini_path), "--health",
                          "--wait", "60"], stdout=subprocess.PIPE,
                         env=child_env())
    try:
        tm.start()
        assert p.wait(timeout=30 * slow()) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_bad_use_is_a_usage_error(tidemark):
    tm = tidemark(start=False)
    for args in (["--wait", "x"], ["--wait", "3601"], ["--check"]):
        assert health(tm, *args)[0] == 2, args
    p = subprocess.run([str(BIN), "-c", str(tm.ini_path), "--wait", "3"],
                       capture_output=True, env=child_env())
    assert p.returncode == 2
