"""[upstream] forwarded: off by default (the sidecar's client is usually
trusted loopback), the client's headers pass as they are; with
x-forwarded-for the upstream gets one X-Forwarded-For, the client's list
and then the client's address; with forwarded one RFC 7239 Forwarded,
the client's elements and then for=ADDRESS, an IPv6 address bracketed
and quoted. Checked against what the recording upstream received."""
import re

import pytest

from daemon import run_check
from wire import Conn, token_headers


def dual_stack(tidemark, forwarded):
    """tidemark listening on [::] (so 127.0.0.1 and ::1 both reach it),
    with forwarded set on its upstream."""
    tm = tidemark({"upstream default": {"forwarded": forwarded}},
                  start=False)
    ini = tm.ini_path.read_text()
    tm.ini_path.write_text(ini.replace("127.0.0.1:%d" % tm.port,
                                       "[::]:%d" % tm.port))
    tm.start()
    return tm


def forward(tm, host, headers=()):
    """A PUT from host; the request the upstream received."""
    with Conn(tm.port, host=host) as c:
        r = c.request("PUT", "/v1/documents/fw",
                      token_headers(5, None, list(headers)), b"x")
    assert r.status == 200, r
    return tm.upstream.requests[-1]


def test_off_by_default_the_client_headers_pass_as_they_are(tidemark,
                                                            upstream):
    tm = tidemark()
    got = forward(tm, "127.0.0.1", [("X-Forwarded-For", "203.0.113.9"),
                                    ("Forwarded", "for=192.0.2.60")])
    assert got.header_all("X-Forwarded-For") == ["203.0.113.9"]
    assert got.header_all("Forwarded") == ["for=192.0.2.60"]


def test_x_forwarded_for_appends_the_client(tidemark, upstream):
    tm = dual_stack(tidemark, "x-forwarded-for")
    got = forward(tm, "127.0.0.1")
    assert got.header_all("X-Forwarded-For") == ["127.0.0.1"]
    assert got.header_all("Forwarded") == []
    got = forward(tm, "::1", [("X-Forwarded-For", "203.0.113.9"),
                              ("X-Forwarded-For", "198.51.100.2, 10.0.0.1"),
                              ("Forwarded", "for=192.0.2.60")])
    assert got.header_all("X-Forwarded-For") == \
        ["203.0.113.9, 198.51.100.2, 10.0.0.1, ::1"]
    assert got.header_all("Forwarded") == ["for=192.0.2.60"]


def test_forwarded_adds_an_rfc7239_element(tidemark, upstream):
    tm = dual_stack(tidemark, "forwarded")
    got = forward(tm, "127.0.0.1", [("X-Forwarded-For", "203.0.113.9")])
    assert got.header_all("Forwarded") == ["for=127.0.0.1"]
    assert got.header_all("X-Forwarded-For") == ["203.0.113.9"]
    got = forward(tm, "::1", [("Forwarded", "for=192.0.2.60;proto=http")])
    assert got.header_all("Forwarded") == \
        ['for=192.0.2.60;proto=http, for="[::1]"']


@pytest.mark.parametrize("value", ["yes", "X-Forwarded-For", ""])
def test_a_bad_forwarded_value_is_a_config_error(tidemark, upstream, value):
    tm = tidemark({"upstream default": {"forwarded": value}}, start=False)
    assert tm.start_fails() == 1
    assert [ln for ln in tm.log_lines("forwarded: must be one of none, "
                                      "x-forwarded-for or forwarded")
            if re.search(r"tidemark\.ini:\d+: forwarded: ", ln)], tm.log()


@pytest.mark.parametrize("forwarded,header", [
    ("x-forwarded-for", "X-Forwarded-For"),
    ("x-forwarded-for", "x-forwarded-for"),
    ("forwarded", "Forwarded"),
])
def test_add_header_of_the_forwarded_header_is_refused(tmp_path, forwarded,
                                                       header):
    """The header would go twice (the option's, the add_header's): a
    config error at forwarded's line, nothing started."""
    ini = tmp_path / "fw.ini"
    ini.write_text("[upstream default]\nurl = http://127.0.0.1:8080\n"
                   "add_header = %s: 203.0.113.1\nforwarded = %s\n"
                   "[route r]\npath = /v1/r/{id}\nresource = r/{id}\n"
                   % (header, forwarded))
    rc, lines = run_check(ini)
    canonical = {"x-forwarded-for": "X-Forwarded-For",
                 "forwarded": "Forwarded"}[forwarded]
    assert (rc, lines) == (1, [
        "%s:4: forwarded = %s writes %s: an add_header of it would send it "
        "twice; keep one of them" % (ini, forwarded, canonical)])


def test_add_header_of_the_other_header_passes(tidemark, upstream):
    tm = tidemark({"upstream default": {
        "forwarded": "x-forwarded-for",
        "add_header": "Forwarded: for=203.0.113.1"}})
    got = forward(tm, "127.0.0.1")
    assert got.header_all("X-Forwarded-For") == ["127.0.0.1"]
    assert got.header_all("Forwarded") == ["for=203.0.113.1"]
