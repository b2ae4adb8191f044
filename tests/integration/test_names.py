"""Upstream names are looked up again: every resolve_ms and after a
failed connect. A name that does not resolve at start leaves the
upstream down (502 with the reason, /readyz says why, one log line, a
metric), not the start; once it resolves, requests pass without a
restart; when it moves, new requests reach the new address. The
resolver is [proxy] resolver pointed at dnsstub.DnsStub, which stands
in for DNS (a test cannot change the machine's)."""
import pytest

from common import slow, wait_until
from daemon import run_check
from dnsstub import DnsStub
from test_metrics import scrape, value
from upstream import Upstream

NAME = "svc.tidemark.test"


@pytest.fixture
def dns():
    d = DnsStub()
    yield d
    d.stop()


@pytest.fixture
def two_hosts():
    """Two upstreams on one port, at 127.0.0.2 and 127.0.0.3: the same
    url reaches one or the other as the name says."""
    a = Upstream(host="127.0.0.2")
    b = None
    try:
        b = Upstream(host="127.0.0.3", port=a.port)
        yield a, b
    finally:
        a.stop()
        if b is not None:
            b.stop()


def named(tidemark, dns, port, **keys):
    up = {"url": "http://%s:%d" % (NAME, port)}
    up.update(keys)
    return tidemark({"proxy": {"resolver": dns.addr},
                     "upstream default": up})


def get(tm, path="/other"):
    return tm.request("GET", path)


def served(up, path):
    return [r for r in up.requests if r.target == path]


def test_a_name_that_resolves_late_then_moves(tidemark, dns, two_hosts):
    a, b = two_hosts
    tm = named(tidemark, dns, a.port, resolve_ms="200")

    # Not in DNS: the start goes on, the upstream is down.
    r = get(tm)
    assert r.status == 502
    assert r.json()["detail"].startswith(
        "upstream default: cannot resolve %s: " % NAME), r.json()
    st, _, body = tm.admin("GET", "/readyz")
    assert st == 503
    assert ("\nupstream default: down: cannot resolve %s: " % NAME
            in body.decode()), body
    fams = scrape(tm)
    assert value(fams, "tidemark_upstream_addresses", upstream="default") == 0
    assert value(fams, "tidemark_upstream_resolve_failures_total",
                 upstream="default") >= 1
    tm.wait_log("upstream default: cannot resolve %s" % NAME,
                "down until it resolves")

    # In DNS now: requests pass, without a restart.
    dns.set(NAME, ["127.0.0.2"])
    wait_until(lambda: get(tm, "/late").status == 200, 10 * slow(),
               "the name resolved")
    assert served(a, "/late") and not b.requests
    tm.wait_log("upstream default: up: %s resolves to 127.0.0.2" % NAME)
    assert tm.admin("GET", "/readyz")[0] == 200
    assert value(scrape(tm), "tidemark_upstream_addresses",
                 upstream="default") == 1
    assert len(tm.log_lines("down until it resolves")) == 1

    # Moved to the other upstream's address: new requests go there.
    dns.set(NAME, ["127.0.0.3"])
    wait_until(lambda: get(tm, "/moved").status == 200 and
               served(b, "/moved"), 10 * slow(), "the name moved")
    before = len(served(a, "/moved"))
    for _ in range(3):
        assert get(tm, "/after").status == 200
    assert len(served(b, "/after")) == 3 and not served(a, "/after")
    assert len(served(a, "/moved")) == before
    tm.wait_log("upstream default: %s now resolves to 127.0.0.3" % NAME)


def test_a_failed_connect_looks_the_name_up_again(tidemark, dns, two_hosts):
    """resolve_ms = 0: no schedule, only a failed connect asks again (a
    second at most after the last answer)."""
    a, b = two_hosts
    dns.set(NAME, ["127.0.0.2"])
    tm = named(tidemark, dns, a.port, resolve_ms="0")
    assert get(tm, "/first").status == 200 and served(a, "/first")
    asked = dns.queries
    dns.set(NAME, ["127.0.0.3"])
    a.stop()
    assert get(tm, "/refused").status == 502
    wait_until(lambda: get(tm, "/next").status == 200, 10 * slow(),
               "the new address")
    assert served(b, "/next") and dns.queries > asked


def test_a_resolver_that_fails_keeps_the_addresses(tidemark, dns,
                                                   two_hosts):
    a, _ = two_hosts
    dns.set(NAME, ["127.0.0.2"])
    tm = named(tidemark, dns, a.port, resolve_ms="100")
    assert get(tm, "/one").status == 200
    failed = value(scrape(tm), "tidemark_upstream_resolve_failures_total",
                   upstream="default")
    dns.set(NAME, None)
    tm.wait_log("upstream default: cannot resolve %s" % NAME,
                "keeping the addresses it had")
    assert value(scrape(tm), "tidemark_upstream_resolve_failures_total",
                 upstream="default") > failed
    assert get(tm, "/two").status == 200 and served(a, "/two")
    assert tm.admin("GET", "/readyz")[0] == 200
    dns.set(NAME, ["127.0.0.2"])
    tm.wait_log("upstream default: %s resolves again" % NAME)


@pytest.mark.parametrize("bad", ["localhost", "10.0.0.1:99999", "1.2.3.4:x",
                                 "10.0.0.1,", "[::1"])
def test_a_bad_resolver_is_an_error_at_its_line(tmp_path, bad):
    ini = tmp_path / "r.ini"
    ini.write_text("[proxy]\nresolver = %s\n[upstream default]\n"
                   "url = http://127.0.0.1:8080\n" % bad)
    rc, lines = run_check(ini)
    assert rc == 1
    assert lines[0] == ("%s:2: resolver: must be IP addresses with "
                        "an optional port (10.0.0.2, 127.0.0.1:5353, "
                        "[::1]:53), comma-separated" % ini), lines


def test_a_resolver_list_passes_the_check(tmp_path):
    ini = tmp_path / "r.ini"
    ini.write_text("[proxy]\nresolver = 10.0.0.2, 127.0.0.1:5353,[::1]:53, "
                   "::1\n[upstream default]\nurl = http://127.0.0.1:8080\n"
                   "[route r]\npath = /v1/r/{id}\nresource = r/{id}\n")
    assert run_check(ini) == (0, ["%s: ok" % ini])


def test_check_leaves_names_to_the_resolver_it_cannot_ask(tmp_path):
    """The system's resolver does not know a name only [proxy] resolver
    serves: --check warns of it without a resolver set, not with one."""
    ini = tmp_path / "r.ini"
    body = ("[upstream default]\nurl = http://%s:8080\n"
            "[route r]\npath = /v1/r/{id}\nresource = r/{id}\n" % NAME)
    ini.write_text(body)
    rc, lines = run_check(ini)
    assert rc == 0 and lines[0].startswith(
        "%s:2: warning: [upstream default] url: host %s: " % (ini, NAME))
    ini.write_text("[proxy]\nresolver = 127.0.0.1:53\n" + body)
    assert run_check(ini) == (0, ["%s: ok" % ini])
