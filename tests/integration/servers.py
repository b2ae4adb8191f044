"""Real store servers for the integration tests: Postgres, Redis and etcd,
each started on free loopback ports in a temporary directory, polled until
it answers (no fixed sleeps), and stopped in teardown even on failure.

A server can be stopped and started again on the same port and data
(outages, restarts). Standard library only.
"""

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time


def _free_port():
    # Outside the ephemeral range, as for every server the tests start.
    from conftest import free_port
    return free_port()


def _poll(pred, timeout, what, proc=None, log=None):
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError("%s exited with %s at start:\n%s"
                               % (what, proc.returncode, _tail(log)))
        if time.monotonic() >= deadline:
            raise RuntimeError("%s not ready after %.0fs:\n%s"
                               % (what, timeout, _tail(log)))
        time.sleep(0.02)


def _tail(path):
    if path is None:
        return ""
    try:
        with open(path, errors="replace") as f:
            return f.read()[-3000:]
    except OSError:
        return ""


def _connects(port):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=0.5)
        s.close()
        return True
    except OSError:
        return False


class Server:
    """One server process; subclasses say how to start and probe it."""

    name = "server"

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="tidemark-%s-" % self.name)
        os.chmod(self.dir, 0o755)
        self.port = _free_port()
        self.proc = None
        self.log_path = os.path.join(self.dir, "server.log")

    def argv(self):
        raise NotImplementedError

    def ready(self):
        return _connects(self.port)

    def preexec(self):
        return None

    def start(self, timeout=30.0):
        assert self.proc is None or self.proc.poll() is not None
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self.argv(), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            cwd=self.dir, preexec_fn=self.preexec(), start_new_session=True)
        log.close()
        _poll(self.ready, timeout, self.name, self.proc, self.log_path)
        return self

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=30.0):
        p = self.proc
        if p is None or p.poll() is not None:
            return
        p.send_signal(sig)
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    def tree(self):
        """The server's pid and its descendants' (Postgres backends make
        their own process groups)."""
        children = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % d) as f:
                    stat = f.read()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(d))
        out, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            out.append(pid)
            todo.extend(children.get(pid, []))
        return out

    def pause(self):
        """SIGSTOP the whole server: it accepts, but answers nothing."""
        for pid in self.tree():
            os.kill(pid, signal.SIGSTOP)

    def resume(self):
        for pid in self.tree():
            os.kill(pid, signal.SIGCONT)

    def kill9(self):
        self.stop(signal.SIGKILL)

    def restart(self):
        self.stop()
        return self.start()

    def destroy(self):
        try:
            self.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def log(self):
        return _tail(self.log_path)


class Redis(Server):
    name = "redis"

    def __init__(self, extra=()):
        super().__init__()
        self.extra = list(extra)

    def argv(self):
        return ["redis-server", "--port", str(self.port), "--bind",
                "127.0.0.1", "--save", "", "--appendonly", "yes",
                "--appendfsync", "always", "--dir", self.dir,
                "--daemonize", "no"] + self.extra

    def ready(self):
        # NOAUTH: up, with a password the probe does not know.
        reply = self.command("PING") or b""
        return reply == b"+PONG\r\n" or reply.startswith(b"-NOAUTH")

    def command(self, *args):
        """One command; the raw reply bytes (first read), or None."""
        parts = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
        try:
            s = socket.create_connection(("127.0.0.1", self.port),
                                         timeout=2)
            s.sendall(b"".join(parts))
            data = s.recv(65536)
            s.close()
            return data
        except OSError:
            return None

    @property
    def url(self):
        return "redis://127.0.0.1:%d" % self.port


def _pg_bin(name):
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/%s" % name))
    if found:
        return found[-1]
    return shutil.which(name) or name


class Postgres(Server):
    """A cluster made by initdb; run as the postgres user when we are
    root (postgres refuses to run as root)."""

    name = "postgres"

    def __init__(self):
        super().__init__()
        self.data = os.path.join(self.dir, "data")
        self.user = None
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            self.user = (pw.pw_uid, pw.pw_gid)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self._run([_pg_bin("initdb"), "-D", self.data, "-A", "trust",
                   "-U", "postgres", "-E", "UTF8", "--no-sync"])

    def preexec(self):
        if self.user is None:
            return None
        uid, gid = self.user

        def drop():
            os.setgid(gid)
            os.setgroups([])
            os.setuid(uid)
        return drop

    def _run(self, argv):
        p = subprocess.run(argv, stdin=subprocess.DEVNULL,
                           capture_output=True, cwd=self.dir,
                           preexec_fn=self.preexec(), timeout=120)
        if p.returncode != 0:
            raise RuntimeError("%s failed: %s" % (
                argv[0], p.stderr.decode(errors="replace")[-2000:]))

    def argv(self):
        return [_pg_bin("postgres"), "-D", self.data, "-k", self.dir,
                "-p", str(self.port), "-c", "listen_addresses=127.0.0.1",
                "-c", "max_connections=100"]

    def ready(self):
        p = subprocess.run([_pg_bin("pg_isready"), "-h", "127.0.0.1", "-p",
                            str(self.port), "-U", "postgres", "-d",
                            "postgres", "-t", "1"],
                           capture_output=True)
        return p.returncode == 0

    def stop(self, sig=signal.SIGINT, timeout=30.0):
        # SIGINT: the fast shutdown (abort sessions, checkpoint).
        super().stop(sig, timeout)

    def sql(self, query):
        """Run query with psql; stdout as text."""
        p = subprocess.run([_pg_bin("psql"), "-h", "127.0.0.1", "-p",
                            str(self.port), "-U", "postgres", "-d",
                            "postgres", "-At", "-c", query],
                           capture_output=True, timeout=30)
        if p.returncode != 0:
            raise RuntimeError(p.stderr.decode(errors="replace"))
        return p.stdout.decode()

    @property
    def dsn(self):
        return ("host=127.0.0.1 port=%d user=postgres dbname=postgres "
                "connect_timeout=2" % self.port)


class Etcd(Server):
    name = "etcd"

    def __init__(self):
        super().__init__()
        self.peer_port = _free_port()

    def argv(self):
        client = "http://127.0.0.1:%d" % self.port
        peer = "http://127.0.0.1:%d" % self.peer_port
        return ["etcd", "--name", "default",
                "--data-dir", os.path.join(self.dir, "data"),
                "--listen-client-urls", client,
                "--advertise-client-urls", client,
                "--listen-peer-urls", peer,
                "--initial-advertise-peer-urls", peer,
                "--initial-cluster", "default=" + peer,
                "--log-level", "warn"]

    def ready(self):
        try:
            s = socket.create_connection(("127.0.0.1", self.port),
                                         timeout=1)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n"
                      b"Connection: close\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            s.close()
            return b'"health":"true"' in data
        except OSError:
            return False

    @property
    def endpoints(self):
        return "http://127.0.0.1:%d" % self.port


KINDS = {"redis": Redis, "postgres": Postgres, "etcd": Etcd}
