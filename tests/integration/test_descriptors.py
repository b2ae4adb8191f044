"""When the process runs out of file descriptors (EMFILE). A request
whose upstream dial finds none waits for a pooled connection to be given
back, up to the upstream's connect_timeout_ms, instead of a 502 at once;
the shortage is logged once, not per request, and counted
(tidemark_upstream_dial_deferred_total). A listener whose accept() finds
none (the proxy's, the control port's) rests and tries again instead of
spinning, and accepts once descriptors are free.

Each test lowers the running process's open-files limit (prlimit) to the
descriptors it has open plus the few the test means to leave, so the
numbers do not depend on how many the build or the store opens."""

import os
import resource

from common import slow, wait_until
from test_metrics import scrape, value
from wire import Conn

SHORT = "cannot open a connection: Too many open files"
ACCEPT_SHORT = "proxy: accept: Too many open files"
ADMIN_SHORT = "admin: accept: Too many open files"


def fd_targets(tm):
    out = []
    for fd in os.listdir("/proc/%d/fd" % tm.proc.pid):
        try:
            out.append(os.readlink("/proc/%d/fd/%s" % (tm.proc.pid, fd)))
        except FileNotFoundError:
            pass  # closed meanwhile
    return out


def open_fds(tm):
    return len(fd_targets(tm))


def accepted(tm):
    """How many connections to tm's ports (proxy and control) it holds
    open: its sockets that /proc/net lists as not listening, on one of
    those local ports."""
    ports = {tm.port, tm.admin_port}
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                port = int(fields[1].rsplit(":", 1)[1], 16)
                if port in ports and fields[3] != "0A":  # 0A: LISTEN
                    inodes.add("socket:[%s]" % fields[9])
    return sum(1 for t in fd_targets(tm) if t in inodes)


def leave_free(tm, n):
    """Lower tm's open-files limit so that n descriptors are left, once
    the connections the start's readiness checks made are closed."""
    wait_until(lambda: accepted(tm) == 0, 10 * slow(),
               "the readiness checks' connections closed")
    limit = open_fds(tm) + n
    _, hard = resource.prlimit(tm.proc.pid, resource.RLIMIT_NOFILE)
    resource.prlimit(tm.proc.pid, resource.RLIMIT_NOFILE, (limit, hard))
    return limit


def connect(tm, n, limit, spare):
    """n client connections, all accepted, spare descriptors left."""
    conns = [tm.conn() for _ in range(n)]
    wait_until(lambda: accepted(tm) == n, 10 * slow(),
               "%d connections accepted" % n)
    assert open_fds(tm) == limit - spare
    return conns


def held_put(c, doc, hold, token=1):
    c.send(b"PUT /v1/documents/%s HTTP/1.1\r\nHost: t\r\n"
           b"Fencing-Token: %d\r\nX-Test-Hold: %s\r\n"
           b"Content-Length: 4\r\n\r\ndata" % (doc.encode(), token,
                                               hold.encode()))


def puts_seen(upstream):
    with upstream.cond:
        return sorted(r.target for r in upstream.requests
                      if r.method == "PUT")


def test_dials_without_a_descriptor_wait_for_a_pooled_connection(
        tidemark, upstream):
    clients, spare = 24, 4
    tm = tidemark({"upstream default": {"connect_timeout_ms": "60000"}})
    limit = leave_free(tm, clients + spare)
    conns = connect(tm, clients, limit, spare)
    try:
        for i, c in enumerate(conns):
            held_put(c, "d%d" % i, "h")
        # The spare descriptors carry four writes to the upstream, held
        # there; the others found none and wait.
        upstream.wait_for(lambda: len(upstream.requests) == spare,
                          what="the held writes")
        tm.wait_log(SHORT, timeout=10)
        upstream.release("h")
        statuses = [c.read_response(timeout=30 * slow()).status
                    for c in conns]
    finally:
        for c in conns:
            c.close()
    assert statuses == [200] * clients
    # Every write reached the backend once, over the connections the
    # spare descriptors opened.
    assert puts_seen(upstream) == sorted("/v1/documents/d%d" % i
                                         for i in range(clients))
    assert len(upstream.conns) == spare
    # One warning for the shortage, not one per request.
    assert len(tm.log_lines("level=warn", SHORT)) == 1
    assert "the process may open" in tm.log_lines(SHORT)[0]
    assert tm.log_lines("connect failed") == []
    # The clients are gone: a descriptor is free for the control port.
    waited = wait_until(
        lambda: value(scrape(tm), "tidemark_upstream_dial_deferred_total",
                      upstream="default"),
        10 * slow(), "the deferred dials counted")
    assert waited == clients - spare
    # Once a socket can be opened again for a second, the log says so.
    tm.wait_log("level=info", "file descriptors free again", timeout=10)


def test_a_wait_with_no_connection_given_back_ends_at_connect_timeout(
        tidemark, upstream):
    clients, spare = 4, 2
    tm = tidemark({"upstream default": {"connect_timeout_ms": "300"}})
    limit = leave_free(tm, clients + spare)
    conns = connect(tm, clients, limit, spare)
    try:
        for i, c in enumerate(conns):
            held_put(c, "t%d" % i, "forever")
        # Two writes hold the spare descriptors' connections; the others
        # give up when the connect timeout has passed.
        upstream.wait_for(lambda: len(upstream.requests) == spare,
                          what="the held writes")
        tm.wait_log("connect failed: Too many open files", count=2,
                    timeout=10)
        held = set(r.target for r in upstream.requests)
        answers = {}
        for i, c in enumerate(conns):
            if "/v1/documents/t%d" % i not in held:
                answers[i] = c.read_response(timeout=10 * slow()).status
        assert sorted(answers.values()) == [502] * (clients - spare)
        # The process goes on: the held writes end, a new one passes.
        upstream.release("forever")
        for i, c in enumerate(conns):
            if i not in answers:
                assert c.read_response(timeout=10 * slow()).status == 200
    finally:
        for c in conns:
            c.close()
    assert tm.put("after", token=1).status == 200
    assert len(puts_seen(upstream)) == spare + 1
    assert len(tm.log_lines("level=warn", SHORT)) == 1
    # The 502s came after a wait, not at the first dial.
    assert value(scrape(tm), "tidemark_upstream_dial_deferred_total",
                 upstream="default") == clients - spare


def test_accept_without_a_descriptor_rests_then_accepts_again(
        tidemark, upstream):
    tm = tidemark()
    limit = leave_free(tm, 2)
    first = [tm.conn(), tm.conn()]
    late = None
    try:
        wait_until(lambda: accepted(tm) == 2, 10 * slow(),
                   "the first two connections accepted")
        assert open_fds(tm) == limit
        late = tm.conn()  # in the backlog: accept() finds no descriptor
        tm.wait_log("level=warn", ACCEPT_SHORT, timeout=10)
        for c in first:
            c.close()
        late.send(b"GET /other HTTP/1.1\r\nHost: t\r\n\r\n")
        assert late.read_response(timeout=10 * slow()).status == 200
    finally:
        for c in first + [late]:
            if c is not None:
                c.close()
    tm.wait_log("level=info", "proxy: accepting connections again")
    # Once for the episode, however many times it tried meanwhile.
    assert len(tm.log_lines(ACCEPT_SHORT)) == 1


def test_the_control_port_rests_too(tidemark, upstream):
    tm = tidemark()
    limit = leave_free(tm, 1)
    full = tm.conn()
    adm = None
    try:
        wait_until(lambda: accepted(tm) == 1, 10 * slow(),
                   "the connection accepted")
        assert open_fds(tm) == limit
        adm = Conn(tm.admin_port, timeout=10 * slow())
        adm.send(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n"
                 % tm.admin_port)
        tm.wait_log("level=warn", ADMIN_SHORT, timeout=10)
        full.close()
        assert adm.read_response().status == 200
    finally:
        full.close()
        if adm is not None:
            adm.close()
    assert len(tm.log_lines(ADMIN_SHORT)) == 1
    # libevent's own line for each failed accept() of a spinning listener
    assert tm.log_lines("Error from accept() call") == []
