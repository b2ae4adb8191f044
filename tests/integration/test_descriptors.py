"""When the process runs out of file descriptors (EMFILE). A request
whose upstream dial finds none waits for a pooled connection to be given
back, up to the upstream's connect_timeout_ms, instead of a 502 at once;
the shortage is logged once, not per request, and counted
(tidemark_upstream_dial_deferred_total). A listener whose accept() finds
none (the proxy's, the control port's) rests and tries again instead of
spinning, and accepts once descriptors are free. A reload while writes
wait cannot open its file: it is refused, the waiting are served by the
old configuration (or get their 502 at their connect timeout), and a
reload once descriptors are free applies the file. Writes that started
before a reload and wait for a descriptor keep their configuration:
served by its upstream once one frees, else a 502 at its connect
timeout (the last of them ends the retired configuration). A drain
(SIGTERM, PUT /v1/drain) answers the waiting whose connect timeout comes
first; at drain_timeout_ms it answers 503 to those still waiting (never
forwarded), closes those held upstream without an answer, and exits 0.

Each test lowers the running process's open-files limit (prlimit) to the
descriptors it has open plus the few the test means to leave, so the
numbers do not depend on how many the build or the store opens."""

import os
import resource
import signal
import time

import pytest

from common import slow, wait_until
from daemon import DEFAULT_ROUTE, render_ini
from test_admin_token import TOKEN, token_file
from test_metrics import parse, scrape, value
from wire import Conn, assert_problem, build_request

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


# ---- a reload or a drain while requests wait for a descriptor ---------


def admin_conn(tm):
    """A control-port connection, kept open: the metrics and the drain
    are asked on it while no descriptor is free to accept another."""
    return Conn(tm.admin_port, timeout=10 * slow())


def admin_ask(adm, tm, method, path, token=None):
    headers = [("Authorization", "Bearer " + token)] if token else []
    return adm.request(method, path, headers,
                       host="127.0.0.1:%d" % tm.admin_port)


def deferred(adm, tm):
    r = admin_ask(adm, tm, "GET", "/metrics")
    assert r.status == 200, r
    return value(parse(r.body.decode()),
                 "tidemark_upstream_dial_deferred_total", upstream="default")


def starve(tm, upstream, clients, spare, hold, token=1):
    """clients writes of documents/wI, each with its own token (I+token);
    spare descriptors carry as many to the upstream, which holds them
    (X-Test-Hold: hold), and the others wait for a descriptor, counted
    (tidemark_upstream_dial_deferred_total). The control port's
    connection, the client connections and the limit."""
    limit = leave_free(tm, clients + spare + 1)
    adm = admin_conn(tm)
    wait_until(lambda: accepted(tm) == 1, 10 * slow(),
               "the control port's connection accepted")
    conns = [tm.conn() for _ in range(clients)]
    wait_until(lambda: accepted(tm) == clients + 1, 10 * slow(),
               "%d connections accepted" % clients)
    assert open_fds(tm) == limit - spare
    for i, c in enumerate(conns):
        held_put(c, "w%d" % i, hold, token=token + i)
    upstream.wait_for(lambda: len(upstream.requests) == spare,
                      what="the held writes")
    wait_until(lambda: deferred(adm, tm) == clients - spare, 10 * slow(),
               "the writes waiting for a descriptor")
    return adm, conns, limit


def free_descriptors(tm):
    """The open-files limit raised to the hard one: descriptors free."""
    _, hard = resource.prlimit(tm.proc.pid, resource.RLIMIT_NOFILE)
    resource.prlimit(tm.proc.pid, resource.RLIMIT_NOFILE, (hard, hard))


def reload_to(tm, upstream_url):
    """The file rewritten to send the writes to upstream_url: the
    reloads below read it."""
    tm.ini_path.write_text(render_ini({
        "proxy": {"listen": "127.0.0.1:%d" % tm.port, "log_level": "info"},
        "admin": {"listen": "127.0.0.1:%d" % tm.admin_port},
        "store": {"type": "lmdb", "path": tm.store_path},
        "upstream default": {"url": upstream_url,
                             "connect_timeout_ms": "60000"},
        "route docs": dict(DEFAULT_ROUTE)}))


def reload_refused(tm, upstream_url):
    """The file rewritten (reload_to) and SIGHUP sent with no descriptor
    free: wait for the reload's refusal, it cannot open the file."""
    reload_to(tm, upstream_url)
    tm.proc.send_signal(signal.SIGHUP)
    tm.wait_log("reload: ", "cannot open: Too many open files", timeout=10)


def test_a_reload_without_a_descriptor_is_refused_and_the_waiting_are_served(
        tidemark, upstream, upstream_factory):
    """SIGHUP while writes wait for a descriptor: the file cannot be
    opened, so the reload is refused and the old configuration stays;
    the waiting writes are served by it once descriptors are free, each
    answered once, forwarded once to the old upstream with its mark.
    SIGHUP again then applies the file."""
    clients, spare = 4, 2
    tm = tidemark({"upstream default": {"connect_timeout_ms": "60000"}})
    other = upstream_factory()
    adm, conns, _ = starve(tm, upstream, clients, spare, "h")
    try:
        reload_refused(tm, other.url)
        assert tm.log_lines("reload refused, the old configuration stays")
        free_descriptors(tm)
        upstream.release("h")
        answers = [c.read_response(timeout=10 * slow()) for c in conns]
    finally:
        adm.close()
        for c in conns:
            c.close()
    assert [(r.status, r.header("X-Echo-Target")) for r in answers] == \
        [(200, "/v1/documents/w%d" % i) for i in range(clients)]
    assert puts_seen(upstream) == sorted("/v1/documents/w%d" % i
                                         for i in range(clients))
    assert other.requests == []
    for i in range(clients):
        assert tm.mark("documents/w%d" % i) == 1 + i
    assert tm.log_lines("reloaded") == []
    # With descriptors free, the same file reloads and serves new writes.
    tm.proc.send_signal(signal.SIGHUP)
    tm.wait_log("reloaded", timeout=10)
    assert tm.put("after", token=1).status == 200
    assert [r.target for r in other.requests] == ["/v1/documents/after"]
    assert len(puts_seen(upstream)) == clients


def test_a_reload_while_none_frees_leaves_the_waiting_their_connect_timeout(
        tidemark, upstream, upstream_factory):
    """SIGHUP while writes wait, and no descriptor frees: each waiting
    write still gets its 502 once connect_timeout_ms has passed since it
    began to wait, not sooner; the held ones end when released, and the
    process serves on (a reload then applies the file)."""
    clients, spare, timeout_ms = 4, 2, 1000
    tm = tidemark({"upstream default": {
        "connect_timeout_ms": str(timeout_ms)}})
    other = upstream_factory()
    sent = time.monotonic()
    adm, conns, _ = starve(tm, upstream, clients, spare, "forever")
    try:
        reload_refused(tm, other.url)
        held = set(r.target for r in upstream.requests)
        waited = [i for i in range(clients)
                  if "/v1/documents/w%d" % i not in held]
        assert len(waited) == clients - spare
        for i in waited:
            assert conns[i].read_response(timeout=10 * slow()).status == 502
        assert time.monotonic() - sent >= timeout_ms / 1000
        tm.wait_log("connect failed: Too many open files",
                    count=clients - spare)
        free_descriptors(tm)
        upstream.release("forever")
        for i in range(clients):
            if i not in waited:
                r = conns[i].read_response(timeout=10 * slow())
                assert r.status == 200, r
    finally:
        adm.close()
        for c in conns:
            c.close()
    assert tm.put("after", token=1).status == 200
    assert len(puts_seen(upstream)) == spare + 1
    assert len(tm.log_lines("connect failed")) == clients - spare
    tm.proc.send_signal(signal.SIGHUP)
    tm.wait_log("reloaded", timeout=10)
    assert tm.put("after", token=2).status == 200
    assert [r.target for r in other.requests] == ["/v1/documents/after"]


def assert_stopping(r):
    """The 503 of a request the drain's timeout found not forwarded."""
    doc = assert_problem(r, 503)
    assert (doc["type"], doc["title"]) == ("urn:tidemark:stopping",
                                           "Proxy stopping"), doc
    assert "not forwarded" in doc["detail"], doc
    assert r.header("Connection") == "close", r


@pytest.mark.parametrize("how", ["SIGTERM", "PUT /v1/drain"])
def test_a_drain_answers_503_to_the_waiting_at_drain_timeout_and_exits_0(
        tidemark, upstream, tmp_path, how):
    """A drain (SIGTERM, or PUT /v1/drain on the control port) while
    writes wait for a descriptor whose connect timeout is far off: the
    drain does not wait for it. The listener's descriptor, which the
    drain closes, carries one of them to the upstream. At
    drain_timeout_ms each write still waiting gets a 503 (the proxy is
    stopping, the write was not forwarded) and the upstream never sees
    it; the writes held upstream are closed without an answer (their
    outcome is unknown); tidemark exits 0."""
    clients, spare, drain_ms = 6, 2, 1000
    carried = spare + 1  # the listener's descriptor carries one more
    tm = tidemark({
        "upstream default": {"connect_timeout_ms": "60000"},
        "proxy": {"drain_timeout_ms": str(drain_ms)},
        "admin": {"token_file": str(token_file(tmp_path))}})
    adm, conns, _ = starve(tm, upstream, clients, spare, "forever")
    try:
        began = time.monotonic()
        if how == "SIGTERM":
            tm.proc.send_signal(signal.SIGTERM)
        else:
            r = admin_ask(adm, tm, "PUT", "/v1/drain", TOKEN)
            assert (r.status, r.body) == (202, b"draining\n")
        upstream.wait_for(lambda: len(upstream.requests) == carried,
                          what="the write the listener's descriptor carries")
        rc = tm.proc.wait(10 * slow())
        took = time.monotonic() - began
        tm.runs[-1][1] = "stopped"
        held = puts_seen(upstream)
        waited = [i for i in range(clients)
                  if "/v1/documents/w%d" % i not in held]
        for i in waited:
            assert_stopping(conns[i].read_response(timeout=5 * slow()))
        assert [c.closed(timeout=5 * slow()) for c in conns] == \
            [True] * clients
        assert [conns[i].reader.buf for i in range(clients)
                if i not in waited] == [b""] * carried
    finally:
        adm.close()
        for c in conns:
            c.close()
    assert rc == 0
    assert len(held) == carried and len(waited) == clients - carried
    assert drain_ms / 1000 <= took < drain_ms / 1000 + 2 * slow()
    assert len(tm.log_lines(
        "drain timeout: closed %d connections still open: %d requests not "
        "forwarded answered 503, %d closed mid-exchange"
        % (clients, clients - carried, carried))) == 1
    assert len(tm.log_lines("status=503", "stopping")) == clients - carried
    assert tm.log_lines("stopped")


def test_a_drain_answers_the_waiting_whose_connect_timeout_comes_first(
        tidemark, upstream):
    """SIGTERM while writes wait for a descriptor, their connect timeout
    before drain_timeout_ms: the listener's descriptor, which the drain
    closes, carries the first of them to the upstream; each other one
    gets its 502 at its connect timeout, then its connection closes; once
    the held writes are answered, tidemark exits 0 without waiting for
    the drain's timeout."""
    clients, spare, waiting, drain_ms = 5, 2, 3, 30000
    tm = tidemark({
        "upstream default": {"connect_timeout_ms": "1000"},
        "proxy": {"drain_timeout_ms": str(drain_ms)}})
    adm, conns, _ = starve(tm, upstream, clients, spare, "forever")
    assert clients - spare == waiting
    try:
        began = time.monotonic()
        tm.proc.send_signal(signal.SIGTERM)
        upstream.wait_for(lambda: len(upstream.requests) == spare + 1,
                          what="the write the listener's descriptor carries")
        held = set(r.target for r in upstream.requests)
        answers = {}
        for i, c in enumerate(conns):
            if "/v1/documents/w%d" % i not in held:
                answers[i] = c.read_response(timeout=10 * slow())
        assert [r.status for r in answers.values()] == [502] * (waiting - 1)
        upstream.release("forever")
        for i, c in enumerate(conns):
            if i not in answers:
                answers[i] = c.read_response(timeout=10 * slow())
                assert (answers[i].status, answers[i].header(
                    "X-Echo-Target")) == (200, "/v1/documents/w%d" % i)
        assert [c.closed(timeout=5 * slow()) for c in conns] == \
            [True] * clients
        rc = tm.proc.wait(10 * slow())
        took = time.monotonic() - began
        tm.runs[-1][1] = "stopped"
    finally:
        adm.close()
        for c in conns:
            c.close()
    assert rc == 0
    assert took < drain_ms / 1000
    assert len(tm.log_lines("connect failed: Too many open files")) == \
        waiting - 1
    assert tm.log_lines("drain timeout") == []


def metric(adm, tm, fam, **labels):
    r = admin_ask(adm, tm, "GET", "/metrics")
    assert r.status == 200, r
    return value(parse(r.body.decode()), fam, **labels)


def upstream_fds(tm, upstream):
    """tm's descriptors of its connections to upstream."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if int(fields[2].rsplit(":", 1)[1], 16) == upstream.port:
                    inodes.add("socket:[%s]" % fields[9])
    fds = []
    for fd in os.listdir("/proc/%d/fd" % tm.proc.pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (tm.proc.pid, fd)) in inodes:
                fds.append(int(fd))
        except FileNotFoundError:
            pass  # closed meanwhile
    return sorted(fds)


def wait_after_a_reload(tm, upstream, other, queued):
    """Writes that wait for a descriptor in the pool of a configuration
    a reload has retired: a write of documents/x (token 1) held by the
    upstream, queued writes of it with token 2 behind it (they hold the
    configuration they started under), a reload that sends new writes to
    other, then no descriptor free as the first write ends: one queued
    write takes its pooled connection (held by the upstream), the others
    wait for a descriptor. The control port's connection, the first
    write's connection and the queued writes' connections."""
    wait_until(lambda: accepted(tm) == 0, 10 * slow(),
               "the readiness checks' connections closed")
    adm = admin_conn(tm)
    first = tm.conn()
    first.send(build_request("PUT", "/v1/documents/x", [
        ("Fencing-Token", "1"), ("X-Test-Hold", "a")], b"data"))
    upstream.wait_for(lambda: len(upstream.requests) == 1,
                      what="the first write")
    conns = [tm.conn() for _ in range(queued)]
    for i, c in enumerate(conns):
        c.send(build_request("PUT", "/v1/documents/x", [
            ("Fencing-Token", "2"), ("X-Test-Hold", "b"),
            ("X-Test-Close", "1"), ("X-Test-Id", "q%d" % i)], b"data"))
    wait_until(lambda: metric(adm, tm, "tidemark_decisions_total",
                              route="docs", outcome="accepted") ==
               1 + queued, 10 * slow(), "the queued writes checked")
    reload_to(tm, other.url)
    tm.proc.send_signal(signal.SIGHUP)
    tm.wait_log("reloaded", timeout=10)
    # The limit at the first write's upstream connection, every
    # descriptor below it open: none can be opened, even once the queued
    # write that takes that connection over has closed it.
    up = upstream_fds(tm, upstream)
    assert len(up) == 1
    assert all(os.path.exists("/proc/%d/fd/%d" % (tm.proc.pid, fd))
               for fd in range(up[0]))
    _, hard = resource.prlimit(tm.proc.pid, resource.RLIMIT_NOFILE)
    resource.prlimit(tm.proc.pid, resource.RLIMIT_NOFILE, (up[0], hard))
    upstream.release("a")
    assert first.read_response(timeout=10 * slow()).status == 200
    upstream.wait_for(lambda: len(upstream.requests) == 2,
                      what="the queued write on the pooled connection")
    wait_until(lambda: metric(adm, tm, "tidemark_upstream_dial_deferred_total",
                              upstream="default") == queued - 1,
               10 * slow(), "the queued writes waiting for a descriptor")
    return adm, first, conns


def test_writes_waiting_after_a_reload_are_served_by_their_configuration(
        tidemark, upstream, upstream_factory):
    """Writes that started before a reload and wait for a descriptor in
    the retired configuration's pool: once descriptors are free, each is
    forwarded once to the upstream it started with and answered 200,
    while new writes go to the new upstream."""
    queued = 3
    tm = tidemark({"upstream default": {"connect_timeout_ms": "60000"}})
    other = upstream_factory()
    adm, first, conns = wait_after_a_reload(tm, upstream, other, queued)
    try:
        free_descriptors(tm)
        upstream.wait_for(lambda: len(upstream.requests) == 1 + queued,
                          what="the waiting writes forwarded")
        upstream.release("b")
        answers = [c.read_response(timeout=10 * slow()) for c in conns]
    finally:
        for c in [adm, first] + conns:
            c.close()
    assert [(r.status, r.header("X-Echo-Target")) for r in answers] == \
        [(200, "/v1/documents/x")] * queued
    assert sorted(r.header("X-Test-Id") or "-" for r in upstream.requests) \
        == ["-"] + ["q%d" % i for i in range(queued)]
    assert other.requests == []
    assert tm.mark("documents/x") == 2
    assert tm.put("after", token=1).status == 200
    assert [r.target for r in other.requests] == ["/v1/documents/after"]


def test_writes_waiting_after_a_reload_get_502_at_connect_timeout(
        tidemark, upstream, upstream_factory):
    """Writes that started before a reload and wait for a descriptor in
    the retired configuration's pool, none freeing: each gets its 502
    once connect_timeout_ms has passed, the last of them ending the
    retired configuration; the process serves on with the new one."""
    queued = 3
    tm = tidemark({"upstream default": {"connect_timeout_ms": "1000"}})
    other = upstream_factory()
    adm, first, conns = wait_after_a_reload(tm, upstream, other, queued)
    try:
        # The write on the pooled connection ends first: the waiting
        # ones are the last requests of the retired configuration.
        held = upstream.requests[1].header("X-Test-Id")
        upstream.release("b")
        waited = [c for i, c in enumerate(conns) if "q%d" % i != held]
        assert conns[int(held[1:])].read_response(
            timeout=10 * slow()).status == 200
        statuses = [c.read_response(timeout=10 * slow()).status
                    for c in waited]
    finally:
        for c in [adm, first] + conns:
            c.close()
    assert statuses == [502] * (queued - 1)
    tm.wait_log("connect failed: Too many open files", count=queued - 1)
    assert len(tm.log_lines("connect failed: Too many open files")) == \
        queued - 1
    free_descriptors(tm)
    assert tm.put("after", token=1).status == 200
    assert [r.target for r in other.requests] == ["/v1/documents/after"]
    assert len(upstream.requests) == 2
