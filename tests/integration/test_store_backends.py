"""What is particular to one network store: Redis's durability knobs and
script cache, Postgres's table and batching, etcd's value format, and
stores that answer garbage (503 and a log line, never a forwarded
write)."""

import base64
import socket
import threading
import uuid

import pytest

import servers
from common import LoopbackServer, free_port, make_ca, make_cert
from daemon import STORE_ROUTES, StoreUnderTest, run_check, wait_ready
from wire import assert_problem


def unique():
    return uuid.uuid4().hex[:12]


def start(tidemark, st, name=None, **store_keys):
    cfg = dict(STORE_ROUTES)
    cfg["store"] = st.section(**store_keys)
    # Not about ordering: no wait after the start, which a shared store
    # always has (test_ordering tests it on Redis).
    cfg["proxy"] = {"order_grace_ms": "0"}
    tm = tidemark(config=cfg, name=name)
    wait_ready(tm)
    return tm


@pytest.fixture
def own_redis():
    """Redis servers private to one test (their settings differ)."""
    made = []

    def make(extra=()):
        s = servers.Redis(extra=extra)
        made.append(s)
        return s.start()

    yield make
    for s in made:
        s.destroy()


class Garbage(LoopbackServer):
    """A TCP server that answers every connection with bytes that are
    not the store's protocol."""

    def __init__(self, answer):
        self.answer = answer
        super().__init__()

    def serve(self, conn):
        while conn.recv(65536):
            conn.sendall(self.answer)


@pytest.fixture
def garbage():
    made = []

    def make(answer):
        g = Garbage(answer)
        made.append(g)
        return g

    yield make
    for g in made:
        g.stop()


# ------------------------------------------------------------- redis


def test_redis_warns_without_appendfsync_always(tidemark, upstream,
                                                 own_redis):
    r = own_redis(["--appendfsync", "everysec"])
    tm = start(tidemark, StoreUnderTest("redis", r))
    tm.wait_log("appendfsync everysec, not always")
    assert tm.put(unique(), token=1).status == 200


def test_redis_warns_when_config_is_disabled(tidemark, upstream, own_redis):
    r = own_redis(["--rename-command", "CONFIG", ""])
    tm = start(tidemark, StoreUnderTest("redis", r))
    tm.wait_log("could not check appendfsync")
    assert tm.put(unique(), token=1).status == 200


def test_redis_always_gives_no_warning(tidemark, upstream, own_redis):
    r = own_redis()
    tm = start(tidemark, StoreUnderTest("redis", r))
    assert tm.put(unique(), token=1).status == 200
    assert tm.log_lines("appendfsync") == []


def test_redis_wait_replicas_without_a_replica_is_503(tidemark, upstream,
                                                       own_redis):
    r = own_redis()
    tm = start(tidemark, StoreUnderTest("redis", r), wait_replicas="1",
               timeout_ms="400")
    d = unique()
    res = tm.put(d, token=3, headers=[("X-Test-Id", d)])
    assert_problem(res, 503)
    assert upstream.find("X-Test-Id", d) == []
    tm.wait_log("WAIT")


def test_redis_wait_replicas_with_a_replica(tidemark, upstream, own_redis):
    primary = own_redis()
    replica = own_redis(["--replicaof", "127.0.0.1", str(primary.port)])
    servers._poll(lambda: b"master_link_status:up" in
                  (replica.command("INFO", "replication") or b""),
                  20, "replica link")
    tm = start(tidemark, StoreUnderTest("redis", primary),
               wait_replicas="1")
    d = unique()
    assert tm.put(d, token=3).status == 200
    got = replica.command("GET", "fence:{documents/%s}" % d)
    assert got == b"$1\r\n3\r\n", got


def test_redis_script_flush_is_reloaded(tidemark, upstream, store_servers):
    st = StoreUnderTest("redis", store_servers("redis"))
    tm = start(tidemark, st)
    d = unique()
    assert tm.put(d, token=4).status == 200
    assert st.server.command("SCRIPT", "FLUSH") == b"+OK\r\n"
    assert tm.put(d, token=5).status == 200
    tm.wait_log("lost the script")
    assert tm.put(d, token=6).status == 200
    assert tm.mark("documents/" + d) == 6


def test_redis_value_not_a_mark_is_503(tidemark, upstream, store_servers):
    st = StoreUnderTest("redis", store_servers("redis"))
    tm = start(tidemark, st)
    d = unique()
    st.server.command("SET", "fence:{documents/%s}" % d, "12abc")
    r = tm.put(d, token=99, headers=[("X-Test-Id", d)])
    assert_problem(r, 503)
    assert upstream.find("X-Test-Id", d) == []
    tm.wait_log("is not a mark")
    # the value is left as it was
    assert st.server.command("GET", "fence:{documents/%s}" % d) == \
        b"$5\r\n12abc\r\n"


def test_redis_mark_is_a_decimal_string(tidemark, upstream, store_servers):
    st = StoreUnderTest("redis", store_servers("redis"))
    tm = start(tidemark, st)
    d = unique()
    assert tm.put(d, token=9007199254740993).status == 200  # 2^53 + 1
    got = st.server.command("GET", "fence:{documents/%s}" % d)
    assert got == b"$16\r\n9007199254740993\r\n", got
    r = tm.put(d, token=9007199254740992)
    assert assert_problem(r, 409)["high_water"] == 9007199254740993


def test_redis_garbage_server(tidemark, upstream, garbage):
    g = garbage(b"+OK\r\n")
    cfg = dict(STORE_ROUTES)
    cfg["store"] = {"type": "redis", "url": "redis://127.0.0.1:%d" % g.port,
                    "path": None, "timeout_ms": "500"}
    tm = tidemark(config=cfg)
    tm.wait_log("SCRIPT LOAD answered")
    assert tm.admin("GET", "/readyz")[0] == 503
    d = unique()
    r = tm.put(d, token=1, headers=[("X-Test-Id", d)])
    assert_problem(r, 503)
    assert upstream.find("X-Test-Id", d) == []


# ---------------------------------------------------------- postgres


def test_postgres_table_and_rows(tidemark, upstream, store_servers):
    st = StoreUnderTest("postgres", store_servers("postgres"))
    tm = start(tidemark, st)
    d = unique()
    assert tm.put(d, token=42).status == 200
    out = st.server.sql("SELECT fence FROM tidemark_marks WHERE resource = "
                        "'documents/%s'" % d)
    assert out.strip() == "42"


def test_postgres_batches_share_commits(tidemark, upstream, store_servers):
    st = StoreUnderTest("postgres", store_servers("postgres"))
    tm = start(tidemark, st)
    d = unique()

    def commits():
        return int(st.server.sql(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = "
            "'postgres'"))

    conns = [tm.conn() for _ in range(40)]
    before = commits()
    out = []

    def one(c, i):
        out.append(c.request("PUT", "/v1/documents/%s-%d" % (d, i % 10),
                             [("Fencing-Token", str(100 + i))],
                             b"v").status)

    ts = [threading.Thread(target=one, args=(c, i))
          for i, c in enumerate(conns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for c in conns:
        c.close()
    assert sorted(set(out)) in ([200], [200, 409]), out
    # the stats collector is asynchronous: an upper bound is what counts
    after = commits()
    assert after - before < 40, (before, after)
    for i in range(10):
        assert tm.mark("documents/%s-%d" % (d, i)) == 130 + i


def test_postgres_names_that_are_not_text(tidemark, upstream,
                                          store_servers):
    """A resource name is canonical UTF-8 before it reaches any store, so
    bytes Postgres cannot keep as text are a 400 at the door (the store
    keeps its hashed form for them, now unreachable from requests)."""
    st = StoreUnderTest("postgres", store_servers("postgres"))
    cfg = {"route hdr": {"path": "/v1/hdr/{rest*}", "resource": "header",
                         "mode": "correctness"},
           "store": st.section()}
    tm = tidemark(config=cfg)
    wait_ready(tm)
    name = "bin-\xff\xfe-" + unique()  # sent as latin-1: bytes ff fe
    with tm.conn() as c:
        r = c.request("PUT", "/v1/hdr/x", [("Fencing-Token", "8"),
                                             ("Fencing-Resource", name)],
                      b"v")
        assert r.status == 400, r
    assert upstream.count() == 0


def test_postgres_garbage_server(tidemark, upstream, garbage):
    g = garbage(b"this is not postgres\r\n")
    cfg = dict(STORE_ROUTES)
    cfg["store"] = {"type": "postgres", "path": None, "timeout_ms": "500",
                    "dsn": "host=127.0.0.1 port=%d user=x dbname=y "
                           "sslmode=disable" % g.port}
    tm = tidemark(config=cfg)
    tm.wait_log("postgres: connection")
    assert tm.admin("GET", "/readyz")[0] == 503
    d = unique()
    r = tm.put(d, token=1, headers=[("X-Test-Id", d)])
    assert_problem(r, 503)
    assert upstream.find("X-Test-Id", d) == []


def fences(tm, server):
    """A write through tm raises its mark in server's table; a stale one
    is refused."""
    d = unique()
    assert tm.put(d, token=5).status == 200
    assert_problem(tm.put(d, token=4), 409)
    assert server.sql(
        "SELECT fence FROM tidemark_marks WHERE resource = "
        "'documents/%s'" % d).strip() == "5"


def test_postgres_over_tls(tidemark, upstream, tmp_path):
    """A store reached over TLS (sslmode=verify-full): libpq's TLS goes
    through the pair tidemark relays for it; the server sees tidemark's
    sessions encrypted, a write raises the mark, a stale one is refused."""
    ca = make_ca(tmp_path, "pgca")
    server = servers.Postgres(tls=make_cert(tmp_path, "pgca", "pg",
                                            "IP:127.0.0.1"))
    server.start()
    try:
        tm = start(tidemark, StoreUnderTest("postgres", server),
                   dsn=server.dsn + " sslmode=verify-full sslrootcert=%s"
                   % ca)
        fences(tm, server)
        assert server.sql(
            "SELECT bool_and(ssl) FROM pg_stat_ssl JOIN pg_stat_activity "
            "USING (pid) WHERE application_name = 'tidemark'").strip() == "t"
    finally:
        server.stop()


def test_postgres_over_a_unix_socket(tidemark, upstream, store_servers):
    """The server's Unix socket (host=DIR) is relayed as its TCP one is."""
    server = store_servers("postgres")
    tm = start(tidemark, StoreUnderTest("postgres", server),
               dsn="host=%s port=%d user=postgres dbname=postgres"
               % (server.dir, server.port))
    fences(tm, server)
    assert server.sql(
        "SELECT bool_and(client_port = -1) FROM pg_stat_activity WHERE "
        "application_name = 'tidemark'").strip() == "t"


def test_postgres_bad_dsn_is_a_check_error(tmp_path):
    p = tmp_path / "t.ini"
    p.write_text("[store]\ntype = postgres\ndsn = host=db port\n"
                 "[upstream default]\nurl = http://127.0.0.1:1\n")
    rc, lines = run_check(p)
    assert rc == 1
    assert any("t.ini:3: dsn: not a libpq connection string" in ln
               for ln in lines), lines


def test_redis_bad_url_is_a_check_error(tmp_path):
    p = tmp_path / "t.ini"
    p.write_text("[store]\ntype = redis\nurl = redis://nohostport\n"
                 "[upstream default]\nurl = http://127.0.0.1:1\n")
    rc, lines = run_check(p)
    assert rc == 1
    assert any("t.ini:3: url:" in ln for ln in lines), lines


# -------------------------------------------------------------- etcd


def etcd_get(server, key):
    """The value of key (bytes), or None."""
    doc = server.call("/v3/kv/range", {"key": base64.b64encode(key).decode()})
    assert doc is not None, "etcd did not answer"
    kvs = doc.get("kvs") or []
    return base64.b64decode(kvs[0]["value"]) if kvs else None


def etcd_put(server, key, value):
    doc = server.call("/v3/kv/put",
                      {"key": base64.b64encode(key).decode(),
                       "value": base64.b64encode(value).decode()})
    assert doc is not None and "header" in doc, doc


def test_etcd_value_is_fixed_width(tidemark, upstream, store_servers):
    st = StoreUnderTest("etcd", store_servers("etcd"))
    tm = start(tidemark, st)
    d = unique()
    assert tm.put(d, token=9).status == 200
    assert tm.put(d, token=10).status == 200
    key = b"tidemark/marks/documents/" + d.encode()
    assert etcd_get(st.server, key) == b"0000000000000000010"
    assert assert_problem(tm.put(d, token=9), 409)["high_water"] == 10


def test_etcd_value_not_a_mark_is_503(tidemark, upstream, store_servers):
    st = StoreUnderTest("etcd", store_servers("etcd"))
    tm = start(tidemark, st)
    d = unique()
    etcd_put(st.server, b"tidemark/marks/documents/" + d.encode(), b"zzz")
    r = tm.put(d, token=5, headers=[("X-Test-Id", d)])
    assert_problem(r, 503)
    assert upstream.find("X-Test-Id", d) == []
    tm.wait_log("not the expected JSON")


def test_etcd_garbage_server(tidemark, upstream, garbage):
    g = garbage(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    cfg = dict(STORE_ROUTES)
    cfg["store"] = {"type": "etcd", "path": None, "timeout_ms": "500",
                    "endpoints": "http://127.0.0.1:%d" % g.port}
    tm = tidemark(config=cfg)
    wait_ready(tm)  # the status probe only needs a 200
    d = unique()
    r = tm.put(d, token=1, headers=[("X-Test-Id", d)])
    assert_problem(r, 503)
    assert upstream.find("X-Test-Id", d) == []
    tm.wait_log("not the expected JSON")


def test_etcd_second_endpoint(tidemark, upstream, store_servers):
    """The first endpoint refuses connections: the second one serves."""
    st = StoreUnderTest("etcd", store_servers("etcd"))
    dead = free_port()
    tm = start(tidemark, st, endpoints="http://127.0.0.1:%d, %s"
               % (dead, st.server.endpoints))
    d = unique()
    for t in range(1, 6):
        r = tm.put(d, token=t)
        assert r.status in (200, 503), r
    assert tm.put(d, token=10).status == 200
    assert tm.mark("documents/" + d) == 10


def test_redis_stuck_connection_is_dropped(tidemark, upstream, own_redis):
    """Redis stops answering and stays stopped: the connection is dropped
    after about two timeouts, /readyz says 503; when Redis answers again
    tidemark reconnects."""
    r = own_redis()
    tm = start(tidemark, StoreUnderTest("redis", r), timeout_ms="200")
    d = unique()
    assert tm.put(d, token=1).status == 200
    r.pause()
    try:
        assert_problem(tm.put(d, token=2), 503)
        tm.wait_log("answered nothing in 200 ms")
        wait_ready(tm, 503)
    finally:
        r.resume()
    wait_ready(tm, 200)
    assert tm.put(d, token=3).status == 200


def test_redis_url_password_and_db(tidemark, upstream, own_redis):
    r = own_redis(["--requirepass", "s3cret"])
    cfg = dict(STORE_ROUTES)
    cfg["store"] = {"type": "redis", "path": None,
                    "url": "redis://:s3cret@127.0.0.1:%d/3" % r.port}
    tm = tidemark(config=cfg)
    wait_ready(tm)
    d = unique()
    assert tm.put(d, token=12).status == 200
    raw = b"*2\r\n$4\r\nAUTH\r\n$6\r\ns3cret\r\n" \
          b"*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n" \
          b"*2\r\n$3\r\nGET\r\n$%d\r\nfence:{documents/%s}\r\n" \
          % (len("fence:{documents/%s}" % d), d.encode())
    s = socket.create_connection(("127.0.0.1", r.port), timeout=5)
    s.sendall(raw)
    data = b""
    while not data.endswith(b"$2\r\n12\r\n"):
        chunk = s.recv(4096)
        assert chunk, data
        data += chunk
    s.close()
    assert tm.log_lines("s3cret") == []


def test_redis_wrong_password_is_logged(tidemark, upstream, own_redis):
    r = own_redis(["--requirepass", "s3cret"])
    cfg = dict(STORE_ROUTES)
    cfg["store"] = {"type": "redis", "path": None, "timeout_ms": "500",
                    "url": "redis://:Wr0ngPw@127.0.0.1:%d" % r.port}
    tm = tidemark(config=cfg)
    tm.wait_log("AUTH failed")
    assert tm.admin("GET", "/readyz")[0] == 503
    assert_problem(tm.put(unique(), token=1), 503)
    # (not "wrong": the test's own directory, in some log lines, holds it)
    assert tm.log_lines("Wr0ngPw") == []
