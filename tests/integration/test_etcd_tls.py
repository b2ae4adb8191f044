"""etcd over https (as etcdctl --cacert --cert --key): a real etcd that
serves clients over TLS only and asks each for a certificate
(--client-cert-auth), with the test CA of test_tls.py. The mark store,
the lock service and a [watch] work over it with tidemark's client
certificate; a wrong CA or no client certificate is a log line naming
the TLS failure, /readyz 503, and every fenced write refused (503),
never forwarded unfenced."""

import base64
import json

import pytest

from common import slow, wait_until
from servers import EtcdTLS
from test_tls import pki  # noqa: F401 (the CA and certificates)


@pytest.fixture(scope="module")
def etcd_tls(pki):  # noqa: F811
    cert, key = pki["good"]
    e = EtcdTLS(pki["ca"], cert, key, pki["client"]).start()
    yield e
    e.stop()


def tls_keys(etcd_tls, pki, ca="ca", client=True):  # noqa: F811
    keys = {"endpoints": etcd_tls.endpoints, "ca_file": str(pki[ca])}
    if client:
        keys["cert_file"] = str(pki["client"][0])
        keys["key_file"] = str(pki["client"][1])
    return keys


def etcd_store(etcd_tls, pki, **kw):  # noqa: F811
    keys = {"type": "etcd", "path": None}
    keys.update(tls_keys(etcd_tls, pki, **kw))
    return keys


def ready(tm, want):
    wait_until(lambda: tm.admin("GET", "/readyz")[0] == want, 15 * slow(),
               "/readyz %d" % want)


def test_store_over_https_with_a_client_certificate(tidemark, upstream,
                                                    etcd_tls, pki):  # noqa: F811
    tm = tidemark({"store": etcd_store(etcd_tls, pki)})
    ready(tm, 200)
    assert tm.put("tls-e1", token=9).status == 200
    assert tm.put("tls-e1", token=8).status == 409
    assert len(upstream.requests) == 1
    # The mark is in etcd: its only key, written through tidemark.
    r = etcd_tls.call("/v3/kv/range", {"key": "AA==", "range_end": "AA==",
                                       "count_only": True})
    assert r.get("count") == "1", r
    tm.wait_log("etcd [store]: ready")


def test_locks_over_https_with_a_client_certificate(tidemark, etcd_tls,
                                                    pki):  # noqa: F811
    locks = {"backend": "etcd", "path": None}
    locks.update(tls_keys(etcd_tls, pki))
    tm = tidemark({"locks": locks})

    def acquired():
        st, _, body = tm.admin("POST", "/v1/locks/tls-lock?ttl_ms=5000")
        return st == 201 and body
    body = wait_until(acquired, 15 * slow(), "the lock service over https")
    lease = json.loads(body)
    assert lease["fence"] > 0
    assert tm.admin("POST", "/v1/locks/tls-lock?ttl_ms=5000")[0] == 423
    st, _, _ = tm.admin("DELETE", "/v1/locks/tls-lock?token=%s"
                        % lease["token"])
    assert st == 204


@pytest.mark.parametrize("case", ["wrong ca", "no client certificate"])
def test_tls_refused_is_logged_and_nothing_passes_unfenced(
        tidemark, upstream, etcd_tls, pki, case):  # noqa: F811
    if case == "wrong ca":
        keys = etcd_store(etcd_tls, pki, ca="other_ca")
        want = "TLS: certificate refused: unable to get local issuer " \
            "certificate"
    else:
        keys = etcd_store(etcd_tls, pki, client=False)
        want = "TLS: the peer refused: alert"
    tm = tidemark({"store": keys}, start=False)
    tm.start(wait=False)
    tm.wait_log("etcd [store]: 127.0.0.1:%d (127.0.0.1:%d)"
                % (etcd_tls.port, etcd_tls.port), want, timeout=15 * slow())
    ready(tm, 503)
    r = tm.put("tls-refused", token=4)
    assert r.status == 503, r
    assert upstream.requests == []
    # Said once, not at every probe.
    assert len(tm.log_lines(want)) == 1


def test_watch_over_https_raises_the_mark(tidemark, etcd_tls,
                                          pki):  # noqa: F811
    watch = {"prefix": "locks/", "resource": "documents/{name}"}
    watch.update(tls_keys(etcd_tls, pki))
    tm = tidemark({"watch docs": watch})
    ready(tm, 200)
    key = base64.b64encode(b"locks/tls-w1/694d7a1b2c3d4e5f").decode()
    r = etcd_tls.call("/v3/kv/put", {"key": key, "value": ""})
    rev = int(r["header"]["revision"])
    wait_until(lambda: tm.mark("documents/tls-w1") == rev, 15 * slow(),
               "the mark at the holder's revision %d" % rev)
    assert tm.put("tls-w1", token=rev - 1).status == 409


def test_store_reconnects_over_https_after_etcd_restarts(tidemark, upstream,
                                                         etcd_tls,
                                                         pki):  # noqa: F811
    tm = tidemark({"store": etcd_store(etcd_tls, pki)})
    ready(tm, 200)
    assert tm.put("tls-re", token=3).status == 200
    etcd_tls.stop()
    ready(tm, 503)
    etcd_tls.start()
    ready(tm, 200)
    # The raise of 4 goes to etcd over a new TLS connection.
    assert tm.put("tls-re", token=2).status == 409
    assert tm.put("tls-re", token=4).status == 200
    assert len(upstream.requests) == 2
