"""HTTPS upstreams: the certificate is verified against ca_file or the
system CAs, the host name is checked, and a failure is a 502 with a log
line, never a fallback to plain HTTP. The test makes its own CAs with the
openssl command line tool."""
import ssl

import pytest

from common import make_ca, make_cert, openssl
from daemon import run_check
from upstream import Upstream


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = make_ca(d, "testca")
    other_ca = make_ca(d, "otherca")
    good = make_cert(d, "testca", "good", "DNS:localhost,IP:127.0.0.1")
    wrong = make_cert(d, "testca", "wrong", "DNS:other.example")
    client = make_cert(d, "testca", "client", "DNS:tidemark.client")
    return {"ca": ca, "other_ca": other_ca, "good": good, "wrong": wrong,
            "client": client}


@pytest.fixture
def tls_upstream(pki):
    made = []

    def make(cert, client_ca=None):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
        if client_ca is not None:
            # Mutual TLS: a client without a certificate of client_ca's
            # is refused in the handshake.
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(str(client_ca))
        u = Upstream(tls=ctx)
        made.append(u)
        return u

    yield make
    for u in made:
        u.stop()


def https(up, host="localhost"):
    return "https://%s:%d" % (host, up.port)


def test_verified_upstream_gets_the_request(tidemark, tls_upstream, pki):
    up = tls_upstream(pki["good"])
    tm = tidemark({"upstream default": {"url": https(up),
                                        "ca_file": str(pki["ca"])}}, up=up)
    r = tm.put("tls1", token=3, body=b"secret body")
    assert r.status == 200, r
    assert r.header("Fencing-High-Water") == "3"
    seen = up.wait_for(lambda: up.requests, what="a request")[0]
    assert seen.method == "PUT"
    assert seen.body == b"secret body"
    assert seen.header("Host") == "localhost:%d" % up.port
    assert seen.header("Fencing-Token") is None


def test_ip_address_upstream_is_checked_against_ip_san(tidemark,
                                                       tls_upstream, pki):
    up = tls_upstream(pki["good"])
    tm = tidemark({"upstream default": {"url": https(up, "127.0.0.1"),
                                        "ca_file": str(pki["ca"])}}, up=up)
    assert tm.request("GET", "/ip").status == 200


def test_pooled_tls_connection_is_reused(tidemark, tls_upstream, pki):
    up = tls_upstream(pki["good"])
    tm = tidemark({"upstream default": {"url": https(up),
                                        "ca_file": str(pki["ca"])}}, up=up)
    for i in range(3):
        assert tm.request("GET", "/reuse%d" % i).status == 200
    ids = {r.conn_id for r in up.requests}
    assert len(ids) == 1, up.requests


def test_wrong_host_name_is_502_and_logged(tidemark, tls_upstream, pki):
    up = tls_upstream(pki["wrong"])
    tm = tidemark({"upstream default": {"url": https(up),
                                        "ca_file": str(pki["ca"])}}, up=up)
    r = tm.put("tls2", token=3)
    assert r.status == 502, r
    tm.wait_log("TLS", "refused", "hostname mismatch")
    assert up.requests == []


def test_unknown_ca_is_502_and_logged(tidemark, tls_upstream, pki):
    up = tls_upstream(pki["good"])
    tm = tidemark({"upstream default": {"url": https(up),
                                        "ca_file": str(pki["other_ca"])}},
                  up=up)
    r = tm.put("tls3", token=3)
    assert r.status == 502, r
    tm.wait_log("TLS", "refused")
    assert up.requests == []
    # Never a fallback to plain HTTP: nothing but handshakes reached it.
    # The upstream sees the refusal only after tidemark logged it.
    up.wait_for(lambda: up.tls_failures >= 1, what="a refused handshake")
    assert up.requests == []


def test_system_cas_do_not_trust_a_private_ca(tidemark, tls_upstream, pki):
    up = tls_upstream(pki["good"])
    tm = tidemark({"upstream default": {"url": https(up)}}, up=up)
    assert tm.put("tls4", token=3).status == 502
    assert up.requests == []


def test_host_preserve_sends_the_clients_host(tidemark, tls_upstream, pki):
    up = tls_upstream(pki["good"])
    tm = tidemark({"upstream default": {"url": https(up),
                                        "ca_file": str(pki["ca"]),
                                        "host": "preserve"}}, up=up)
    r = tm.request("GET", "/h", host="api.example")
    assert r.status == 200, r
    assert up.requests[0].header("Host") == "api.example"


def test_missing_ca_file_is_a_startup_error(tidemark, tls_upstream, pki,
                                            tmp_path):
    up = tls_upstream(pki["good"])
    tm = tidemark({"upstream default": {
        "url": https(up), "ca_file": str(tmp_path / "nope.pem")}},
        up=up, start=False)
    assert tm.start_fails() == 1
    assert "%s:%d: [upstream default] ca_file %s: No such file or " \
        "directory" % (tm.ini_path, ini_line(tm, "ca_file"),
                       tmp_path / "nope.pem") in tm.log()


def ini_line(tm, key):
    """The line of tm's configuration that sets key (the first)."""
    for n, line in enumerate(tm.ini_path.read_text().splitlines(), 1):
        if line.split("=")[0].strip() == key:
            return n
    raise AssertionError("no %s in %s" % (key, tm.ini_path))


def mtls(up, pki, cert=None, key=None):
    keys = {"url": https(up), "ca_file": str(pki["ca"])}
    if cert is not None:
        keys["cert_file"] = str(cert)
    if key is not None:
        keys["key_file"] = str(key)
    return {"upstream default": keys}


def test_upstream_asking_for_a_client_certificate_gets_it(tidemark,
                                                         tls_upstream, pki):
    up = tls_upstream(pki["good"], client_ca=pki["ca"])
    cert, key = pki["client"]
    tm = tidemark(mtls(up, pki, cert, key), up=up)
    r = tm.put("mtls1", token=4, body=b"mutual")
    assert r.status == 200, r
    seen = up.wait_for(lambda: up.requests, what="a request")[0]
    assert seen.body == b"mutual"
    assert up.tls_failures == 0


@pytest.mark.parametrize("version", ["TLSv1_2", "TLSv1_3"])
def test_upstream_refusing_a_missing_client_certificate_is_502(
        tidemark, tls_upstream, pki, version):
    up = tls_upstream(pki["good"], client_ca=pki["ca"])
    up.tls.maximum_version = getattr(ssl.TLSVersion, version)
    tm = tidemark(mtls(up, pki), up=up)
    r = tm.put("mtls2", token=4)
    assert r.status == 502, r
    up.wait_for(lambda: up.tls_failures >= 1, what="a refused handshake")
    assert up.requests == []
    if version == "TLSv1_2":
        # The refusal comes in the handshake: its alert is logged.
        tm.wait_log("upstream default: TLS with localhost",
                    "alert handshake failure")
    else:
        # TLS 1.3 ends the client's handshake first; the refusal comes
        # as an alert (logged when it is read) or as the connection
        # closed under the request.
        tm.wait_log("level=error", "upstream default:")


@pytest.mark.parametrize("case", ["mismatch", "missing cert", "no key",
                                  "not pem", "encrypted"])
def test_bad_client_certificate_files_are_errors_at_load(tidemark, pki,
                                                         tmp_path, case):
    cert, key = pki["client"]
    other_key = pki["good"][1]
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    enc = tmp_path / "enc.key"
    openssl("pkey", "-in", str(key), "-aes256", "-passout", "pass:secret",
            "-out", str(enc), cwd=tmp_path)
    keys, key_name, want = {
        "mismatch": ({"cert_file": cert, "key_file": other_key}, "key_file",
                     "key_file %s: does not match the certificate %s"
                     % (other_key, cert)),
        "missing cert": ({"cert_file": tmp_path / "nope.crt",
                          "key_file": key}, "cert_file",
                         "cert_file %s: No such file or directory"
                         % (tmp_path / "nope.crt")),
        "no key": ({"cert_file": cert}, "cert_file",
                   "cert_file %s: a client certificate needs both cert_file "
                   "and key_file" % cert),
        "not pem": ({"cert_file": cert, "key_file": junk}, "key_file",
                    "key_file %s: no PEM private key in it (an encrypted key "
                    "cannot be read unattended)" % junk),
        "encrypted": ({"cert_file": cert, "key_file": enc}, "key_file",
                      "key_file %s: no PEM private key in it (an encrypted "
                      "key cannot be read unattended)" % enc),
    }[case]
    conf = {"url": "https://localhost:1", "ca_file": str(pki["ca"])}
    conf.update({k: str(v) for k, v in keys.items()})
    tm = tidemark({"upstream default": conf}, start=False)
    rc, lines = run_check(tm.ini_path)
    where = "%s:%d: [upstream default] " % (tm.ini_path,
                                            ini_line(tm, key_name))
    assert rc != 0
    assert [ln for ln in lines if ln.startswith(where)] == [where + want], \
        lines
    assert tm.start_fails() == 1
    assert where + want in tm.log()
