"""Every address of a name: a host that resolves to several addresses
(localhost on a stock Debian: ::1, then 127.0.0.1) is reached on
whichever one listens, for upstreams, Redis, etcd and Postgres, within
one connect deadline. Names come from the fakehosts preload (getaddrinfo
answers $FAKEHOSTS in the order written), whatever /etc/hosts says."""

import socket
import subprocess
import time

import pytest

import servers
from common import REPO, free_port, slow, wait_until
from daemon import STORE_ROUTES, wait_ready
from upstream import Upstream
from wire import assert_problem

FAKEHOSTS = REPO / "tests" / "preload" / "fakehosts.so"
HOSTS = "dual.test=::1,127.0.0.1 v4first.test=127.0.0.1,::1"


@pytest.fixture(scope="module")
def fakehosts():
    if not FAKEHOSTS.exists():
        p = subprocess.run(["make", "-C", str(REPO),
                            "tests/preload/fakehosts.so"],
                           capture_output=True, timeout=120)
        assert p.returncode == 0 and FAKEHOSTS.exists(), (
            "cannot build %s:\n%s" % (FAKEHOSTS, p.stderr.decode()[-2000:]))
    return {"LD_PRELOAD": str(FAKEHOSTS), "FAKEHOSTS": HOSTS}


@pytest.fixture
def v6_upstream():
    u = Upstream(host="::1")
    yield u
    u.stop()
    assert not u.errors, "upstream saw malformed traffic: %r" % u.errors


def named(upstream, name):
    return "http://%s:%d" % (name, upstream.port)


def test_upstream_on_ipv4_behind_a_name_whose_first_address_is_ipv6(
        tidemark, upstream, fakehosts):
    """dual.test is ::1 first, the upstream listens on 127.0.0.1 only:
    the ::1 attempt is refused and logged, 127.0.0.1 answers."""
    tm = tidemark(config={"upstream default": {"url": named(upstream,
                                                            "dual.test")}},
                  env=fakehosts)
    r = tm.put("a", token=1, headers=[("X-Test-Id", "dual")])
    assert r.status == 200, r
    assert len(upstream.find("X-Test-Id", "dual")) == 1
    wait_until(lambda: tm.log_lines(
        "upstream default: connect to [::1]:%d failed: Connection refused; "
        "trying 127.0.0.1:%d" % (upstream.port, upstream.port)),
        5 * slow(), "the failed ::1 attempt logged")


def test_the_address_that_worked_is_tried_first_next_time(
        tidemark, upstream, fakehosts):
    """New connections start at the address that connected last: one
    refused ::1 in the log, however many connections follow."""
    tm = tidemark(config={"upstream default": {"url": named(upstream,
                                                            "dual.test")}},
                  env=fakehosts)
    for i in range(4):
        r = tm.put("b%d" % i, token=1, headers=[("X-Test-Close", "1")])
        assert r.status == 200, r
    # A line may reach the log after its answer reached the client: wait
    # for the last request's access line, which follows any line of its
    # dials (lines keep their order).
    tm.wait_log("event=request", "path=/v1/documents/b3")
    assert len(tm.log_lines("connect to [::1]:%d failed" % upstream.port)) \
        == 1


def test_ipv6_only_upstream_by_address(tidemark, v6_upstream):
    tm = tidemark(up=v6_upstream)
    r = tm.put("c", token=1, headers=[("X-Test-Id", "v6")])
    assert r.status == 200, r
    assert len(v6_upstream.find("X-Test-Id", "v6")) == 1


def test_ipv6_only_upstream_behind_a_name_whose_first_address_is_ipv4(
        tidemark, v6_upstream, fakehosts):
    tm = tidemark(up=v6_upstream,
                  config={"upstream default": {
                      "url": named(v6_upstream, "v4first.test")}},
                  env=fakehosts)
    r = tm.put("d", token=1, headers=[("X-Test-Id", "v6name")])
    assert r.status == 200, r
    assert len(v6_upstream.find("X-Test-Id", "v6name")) == 1
    tm.wait_log("connect to 127.0.0.1:%d failed: Connection "
                "refused; trying [::1]:%d"
                % (v6_upstream.port, v6_upstream.port))


class BlackHole:
    """A port on 127.0.0.1 and ::1 where connects hang: listening, with
    its accept queue full and never accepted."""

    def __init__(self):
        self.port = free_port()
        self.socks = []
        for fam, host in ((socket.AF_INET, "127.0.0.1"),
                          (socket.AF_INET6, "::1")):
            ls = socket.socket(fam, socket.SOCK_STREAM)
            if fam == socket.AF_INET6:
                ls.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            ls.bind((host, self.port))
            ls.listen(0)
            self.socks.append(ls)
            while True:
                c = socket.socket(fam, socket.SOCK_STREAM)
                c.settimeout(0.2)
                self.socks.append(c)
                try:
                    c.connect((host, self.port))
                except socket.timeout:
                    break

    def close(self):
        for s in self.socks:
            s.close()


def test_every_address_silent_is_one_502_within_connect_timeout(
        tidemark, upstream, fakehosts):
    """Both addresses hang: one 502 after about connect_timeout_ms in
    all, not once per address; each address had its half."""
    hole = BlackHole()
    try:
        tm = tidemark(config={"upstream default": {
            "url": "http://dual.test:%d" % hole.port,
            "connect_timeout_ms": "800"}}, env=fakehosts)
        t0 = time.monotonic()
        r = tm.put("e", token=1)
        took = time.monotonic() - t0
        assert_problem(r, 502)
        assert 0.75 <= took < 1.5 * slow(), took
        assert tm.log_lines("connect to [::1]:%d failed: Connection timed "
                            "out; trying 127.0.0.1:%d"
                            % (hole.port, hole.port))
    finally:
        hole.close()


# ------------------------------------------------------------- stores


def store_at(tidemark, fakehosts, section):
    cfg = dict(STORE_ROUTES)
    cfg["store"] = section
    tm = tidemark(config=cfg, env=fakehosts)
    wait_ready(tm)
    return tm


def test_redis_on_ipv4_behind_a_name_whose_first_address_is_ipv6(
        tidemark, upstream, fakehosts, store_servers):
    """hiredis alone connects to one address of a name; tidemark gives it
    each address of dual.test in turn."""
    redis = store_servers("redis")
    tm = store_at(tidemark, fakehosts, {
        "type": "redis", "url": "redis://dual.test:%d" % redis.port,
        "path": None})
    assert tm.put("r1", token=1).status == 200
    assert tm.log_lines("redis [store]: connect to [::1]:%d failed: "
                        "Connection refused; trying 127.0.0.1:%d"
                        % (redis.port, redis.port))


class Redis6(servers.Redis):
    """A Redis listening on ::1 only."""

    def argv(self):
        return [("::1" if a == "127.0.0.1" else a)
                for a in super().argv()]

    def ready(self):
        try:
            s = socket.create_connection(("::1", self.port), timeout=1)
            s.sendall(b"PING\r\n")
            ok = s.recv(64) == b"+PONG\r\n"
            s.close()
            return ok
        except OSError:
            return False


@pytest.fixture(scope="module")
def redis6():
    r = Redis6()
    r.start()
    yield r
    r.destroy()


def test_ipv6_only_redis_behind_a_name_whose_first_address_is_ipv4(
        tidemark, upstream, fakehosts, redis6):
    tm = store_at(tidemark, fakehosts, {
        "type": "redis", "url": "redis://v4first.test:%d" % redis6.port,
        "path": None})
    assert tm.put("r2", token=1).status == 200
    assert tm.log_lines("connect to 127.0.0.1:%d failed" % redis6.port)


def test_ipv6_only_redis_by_address(tidemark, upstream, fakehosts, redis6):
    tm = store_at(tidemark, fakehosts, {
        "type": "redis", "url": "redis://[::1]:%d" % redis6.port,
        "path": None})
    assert tm.put("r3", token=1).status == 200


def test_etcd_on_ipv4_behind_a_name_whose_first_address_is_ipv6(
        tidemark, upstream, fakehosts, store_servers):
    """Each address of an endpoint is a target: a raise refused on ::1 is
    sent to 127.0.0.1 within its deadline."""
    etcd = store_servers("etcd")
    tm = store_at(tidemark, fakehosts, {
        "type": "etcd", "endpoints": "http://dual.test:%d" % etcd.port,
        "path": None, "pool_size": "1"})
    for i in range(3):
        assert tm.put("e%d" % i, token=1).status == 200
    assert tm.log_lines("etcd [store]: dual.test:%d ([::1]:%d) gave no "
                        "answer; trying 127.0.0.1:%d"
                        % (etcd.port, etcd.port, etcd.port))


def test_postgres_on_ipv4_behind_a_name_whose_first_address_is_ipv6(
        tidemark, upstream, fakehosts, store_servers):
    """libpq (since PostgreSQL 10) tries every address of a host itself,
    within the one connect tidemark gives it."""
    pg = store_servers("postgres")
    tm = store_at(tidemark, fakehosts, {
        "type": "postgres", "path": None,
        "dsn": "host=dual.test port=%d user=postgres dbname=postgres"
               % pg.port})
    assert tm.put("p1", token=1).status == 200
