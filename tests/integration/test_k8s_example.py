"""packaging/k8s/sidecar.yaml: valid YAML; no service-link variables in
the pod; the lock API is not open on the pod network (a token from a
Secret); the probes need no token. Its tidemark.ini is run for real:
probes with the pod's address as Host pass, /v1/ without the token is
refused."""
import http.client
import os
import re
from pathlib import Path

import pytest
import yaml

from common import slow

# The packaging tier: packaging/k8s/sidecar.yaml.
pytestmark = pytest.mark.packaging

SIDECAR = Path(__file__).resolve().parents[2] / "packaging/k8s/sidecar.yaml"
TOKEN = "0123456789abcdef0123456789abcdef"


def load():
    docs = [d for d in yaml.safe_load_all(SIDECAR.read_text()) if d]
    kinds = {d["kind"]: d for d in docs}
    assert set(kinds) == {"ConfigMap", "Deployment"}, list(kinds)
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    ini = kinds["ConfigMap"]["data"]["tidemark.ini"]
    tm = [c for c in pod["initContainers"] + pod["containers"]
          if c["name"] == "tidemark"]
    assert len(tm) == 1
    return pod, tm[0], ini


def ini_value(ini, section, key):
    m = re.search(r"^\[%s\]\n(.*?)(?=^\[|\Z)" % re.escape(section), ini,
                  re.M | re.S)
    assert m, section
    k = re.search(r"^%s\s*=\s*([^;\n]*)" % re.escape(key), m.group(1), re.M)
    return k.group(1).strip() if k else None


def test_pod_spec():
    pod, tm, ini = load()
    assert pod["enableServiceLinks"] is False
    # Probes use the open endpoints on the control port.
    assert tm["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert tm["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert tm["readinessProbe"]["httpGet"]["path"] == "/readyz"
    # The control port listens on the pod's address, so /v1/ needs a
    # token, and the token file comes from a Secret mounted readable by
    # the pod's group only.
    listen = ini_value(ini, "admin", "listen")
    assert listen.startswith("0.0.0.0:")
    token_file = ini_value(ini, "admin", "token_file")
    assert token_file, "the control port is open on the pod network"
    mounts = {m["name"]: m["mountPath"] for m in tm["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    secret_vols = [n for n, v in volumes.items() if "secret" in v]
    assert len(secret_vols) == 1
    name = secret_vols[0]
    assert os.path.dirname(token_file) == mounts[name]
    assert volumes[name]["secret"]["defaultMode"] & 0o007 == 0
    assert pod["securityContext"]["fsGroup"]


def test_its_config_runs(tidemark, upstream, tmp_path):
    """The ConfigMap's file with this machine's paths and loopback ports
    (the pod's address as Host, with listen = 0.0.0.0, is in
    tests/unit/test_origin.c): the probes pass, /v1/ needs the token."""
    _, container, ini = load()
    tok = tmp_path / "token"
    tok.write_text(TOKEN + "\n")
    os.chmod(tok, 0o440)
    tm = tidemark(start=False, env={
        e["name"]: e["value"] for e in container.get("env", [])
        if "value" in e})
    tm.env["TIDEMARK_UPSTREAM_DEFAULT_URL"] = upstream.url
    text = ini.replace("/var/lib/tidemark/", str(tmp_path) + "/")
    text = text.replace(ini_value(ini, "admin", "token_file"), str(tok))
    text = text.replace("127.0.0.1:7070", "127.0.0.1:%d" % tm.port)
    text = text.replace("0.0.0.0:7071", "127.0.0.1:%d" % tm.admin_port)
    tm.ini_path.write_text(text)
    tm.start()

    def call(method, path, headers):
        c = http.client.HTTPConnection("127.0.0.1", tm.admin_port,
                                       timeout=10 * slow())
        try:
            c.request(method, path, headers=headers)
            return c.getresponse().status
        finally:
            c.close()
    pod = {"Host": "127.0.0.1:%d" % tm.admin_port,
           "User-Agent": "kube-probe/1.29"}
    assert call("GET", "/healthz", pod) == 200
    assert call("GET", "/readyz", pod) == 200
    assert call("GET", "/metrics", pod) == 200
    assert call("POST", "/v1/locks/jobs/k8s?ttl_ms=1000", pod) == 401
    assert call("POST", "/v1/locks/jobs/k8s?ttl_ms=1000", dict(
        pod, Authorization="Bearer " + TOKEN)) == 201
