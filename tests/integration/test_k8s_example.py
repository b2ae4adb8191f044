"""packaging/k8s/sidecar.yaml: valid YAML; no service-link variables in
the pod; the lock API is not open on the pod network (a token from a
Secret); the probes need no token. Its tidemark.ini is run for real:
probes with the pod's address as Host pass, /v1/ without the token is
refused. Its Service and podmonitor.yaml's PodMonitor reach the control
port the container names; sidecar-legacy.yaml (clusters without native
sidecars) is the same pod with tidemark as the first plain container,
held ready by its postStart hook, and keeps in step with sidecar.yaml."""
import copy
import http.client
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from common import BIN, slow
from daemon import child_env

# The packaging tier: packaging/k8s/sidecar.yaml.
pytestmark = pytest.mark.packaging

K8S = Path(__file__).resolve().parents[2] / "packaging/k8s"
SIDECAR = K8S / "sidecar.yaml"
LEGACY = K8S / "sidecar-legacy.yaml"
TOKEN = "0123456789abcdef0123456789abcdef"


def documents(path):
    """The file's documents by kind, each kind once."""
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    kinds = {d["kind"]: d for d in docs}
    assert len(kinds) == len(docs), [d["kind"] for d in docs]
    return kinds


def load(path=SIDECAR):
    kinds = documents(path)
    assert set(kinds) == {"ConfigMap", "Deployment", "Service"}, list(kinds)
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    ini = kinds["ConfigMap"]["data"]["tidemark.ini"]
    tm = [c for c in pod.get("initContainers", []) + pod["containers"]
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


def admin_port(ini):
    return int(ini_value(ini, "admin", "listen").rsplit(":", 1)[1])


def named_port(container, name):
    """The containerPort the container names name."""
    ports = [p["containerPort"] for p in container.get("ports", [])
             if p.get("name") == name]
    assert len(ports) == 1, (name, container.get("ports"))
    return ports[0]


def test_the_service_is_the_control_port():
    kinds = documents(SIDECAR)
    pod, tm, ini = load()
    labels = kinds["Deployment"]["spec"]["template"]["metadata"]["labels"]
    svc = kinds["Service"]
    assert svc["apiVersion"] == "v1"
    sel = svc["spec"]["selector"]
    assert sel and sel.items() <= labels.items()
    [port] = svc["spec"]["ports"]
    # The control port, by the container's name for it; never the proxy
    # port, which only the app in the pod may use.
    assert named_port(tm, port["targetPort"]) == admin_port(ini)
    proxy = int(ini_value(ini, "proxy", "listen").rsplit(":", 1)[1])
    assert port["port"] != proxy and named_port(tm, "admin") != proxy


def test_the_podmonitor_scrapes_metrics():
    kinds = documents(K8S / "podmonitor.yaml")
    assert set(kinds) == {"PodMonitor"}
    pm = kinds["PodMonitor"]
    assert pm["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(pm["spec"]) == {"selector", "podMetricsEndpoints"}
    labels = documents(SIDECAR)["Deployment"]["spec"]["template"][
        "metadata"]["labels"]
    assert pm["spec"]["selector"]["matchLabels"].items() <= labels.items()
    [ep] = pm["spec"]["podMetricsEndpoints"]
    # Keys of the operator's PodMetricsEndpoint, with their types.
    types = {"port": str, "path": str, "interval": str,
             "scrapeTimeout": str}
    assert set(ep) <= set(types), set(ep) - set(types)
    for k, v in ep.items():
        assert isinstance(v, types[k]), k
    assert ep["path"] == "/metrics"
    _, tm, ini = load()
    assert named_port(tm, ep["port"]) == admin_port(ini)
    # The pod's own annotations say the same to a plain Prometheus.
    ann = documents(SIDECAR)["Deployment"]["spec"]["template"]["metadata"][
        "annotations"]
    assert (ann["prometheus.io/port"], ann["prometheus.io/path"]) == \
        (str(admin_port(ini)), ep["path"])


def test_the_legacy_variant_is_the_same_pod_without_native_sidecars():
    native, legacy = documents(SIDECAR), documents(LEGACY)
    assert legacy["ConfigMap"] == native["ConfigMap"]
    assert legacy["Service"] == native["Service"]
    pod = legacy["Deployment"]["spec"]["template"]["spec"]
    assert "initContainers" not in pod
    first = pod["containers"][0]
    assert first["name"] == "tidemark" and "restartPolicy" not in first
    # Its postStart hook holds the app until tidemark is ready: the
    # probe of the image, on the file the container runs with.
    hook = first["lifecycle"]["postStart"]["exec"]["command"]
    assert hook[:1] == ["/usr/bin/tidemark"] and hook[1:3] == first["args"]
    assert hook[3:5] == ["--health", "--wait"] and int(hook[5]) > 0
    # Everything else is sidecar.yaml's pod, tidemark moved.
    want = copy.deepcopy(native["Deployment"])
    wpod = want["spec"]["template"]["spec"]
    [tm] = wpod.pop("initContainers")
    del tm["restartPolicy"]
    tm["lifecycle"] = first["lifecycle"]
    wpod["containers"].insert(0, tm)
    assert legacy["Deployment"] == want


def test_the_legacy_hook_waits_for_the_sidecar(tidemark, upstream, tmp_path):
    """The hook's command against the ConfigMap's file run here: it
    returns 0 once tidemark is ready, not before."""
    pod, container, ini = load(LEGACY)
    hook = container["lifecycle"]["postStart"]["exec"]["command"]
    tm = tidemark(start=False)
    text = ini.replace("/var/lib/tidemark/", str(tmp_path) + "/")
    text = text.replace(ini_value(ini, "admin", "token_file"), "")
    text = text.replace("127.0.0.1:7070", "127.0.0.1:%d" % tm.port)
    text = text.replace("0.0.0.0:7071", "127.0.0.1:%d" % tm.admin_port)
    tm.ini_path.write_text(text)
    tm.env["TIDEMARK_UPSTREAM_DEFAULT_URL"] = upstream.url
    argv = [str(BIN)] + [str(tm.ini_path) if a == hook[2] else a
                         for a in hook[1:]]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, env=child_env())
    try:
        tm.start()
        assert p.wait(timeout=60 * slow()) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert subprocess.run(argv[:-2], env=child_env()).returncode == 0
    tm.stop()
    assert subprocess.run(argv[:-2], env=child_env(),
                          stdout=subprocess.DEVNULL).returncode == 1
