"""The container image of make image (packaging/build-image.sh): its
HEALTHCHECK, read from the image's own configuration, fails against a
stopped tidemark and passes against a running one; it carries the OCI
labels; it stays under 40 MB with no shell or package manager; and
packaging/Containerfile describes the same image. The image is the
docker-archive TIDEMARK_IMAGE names (make test-image passes its own),
else one built here from the tree (build-deb.sh and build-image.sh: a
few minutes). No container runtime starts here: the image's layers are
unpacked and its commands run in them with chroot, as its user, with the
host's network (as smoke-image.sh does). Needs root."""
import json
import os
import re
import subprocess
import tarfile
import urllib.request
from pathlib import Path

import pytest

from common import free_port, slow, wait_until

# The packaging tier: the image.
pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[2]
PACKAGING = ROOT / "packaging"
SOURCE = "https://tidemark.example/src/tidemark.git"
LABELS = ("title", "version", "revision", "source", "licenses", "created")


def head():
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"],
                          capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    """(the image's docker configuration, its root filesystem, the bytes
    of its layers, the revision and source it was built with)."""
    work = tmp_path_factory.mktemp("image")
    archive = os.environ.get("TIDEMARK_IMAGE")
    source = os.environ.get("TIDEMARK_IMAGE_SOURCE")
    revision = os.environ.get("TIDEMARK_IMAGE_REVISION") or head()
    if not archive:
        archive = str(work / "image.tar")
        source = SOURCE
        subprocess.run(["sh", str(PACKAGING / "build-deb.sh"),
                        str(work / "deb")], check=True,
                       stdout=subprocess.DEVNULL)
        [deb] = (work / "deb").glob("tidemark_*.deb")
        subprocess.run(["sh", str(PACKAGING / "build-image.sh"), str(deb),
                        archive], check=True, stdout=subprocess.DEVNULL,
                       env=dict(os.environ, TIDEMARK_IMAGE_SOURCE=source,
                                TIDEMARK_IMAGE_REVISION=revision))
    unpacked, root = work / "archive", work / "rootfs"
    unpacked.mkdir()
    root.mkdir()
    with tarfile.open(archive) as t:
        t.extractall(unpacked)
    manifest = json.loads((unpacked / "manifest.json").read_text())[0]
    config = json.loads((unpacked / manifest["Config"]).read_text())
    size = 0
    for layer in manifest["Layers"]:
        with tarfile.open(unpacked / layer) as t:
            size += sum(m.size for m in t.getmembers() if m.isfile())
            t.extractall(root, numeric_owner=True)
    return config["config"], root, size, revision, source


def in_image(cfg, root, argv, env, **kw):
    """Start argv in the image's root as its user, in its working
    directory, with env only (the image has no shell to do it)."""
    uid, gid = (int(x) for x in cfg["User"].split(":"))

    def enter():
        os.chroot(root)
        os.chdir(cfg["WorkingDir"])
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    return subprocess.Popen(argv, env=env, preexec_fn=enter, **kw)


@pytest.fixture
def mounted(image):
    """/dev and /proc in the image's root while a test runs in it."""
    root = image[1]
    done = []
    try:
        for args in (["--bind", "/dev", str(root / "dev")],
                     ["-t", "proc", "proc", str(root / "proc")]):
            subprocess.run(["mount"] + args, check=True)
            done.append(args[-1])
        yield
    finally:
        for d in reversed(done):
            subprocess.run(["umount", d])


def test_the_healthcheck_of_the_image_checks(image, mounted, upstream):
    cfg, root, _, _, _ = image
    test = cfg["Healthcheck"]["Test"]
    # One exec-form command: nothing for a shell to cut short.
    assert test[0] == "CMD" and test[1].startswith("/"), test
    admin, proxy = free_port(), free_port()
    env = {"PATH": "/usr/bin:/bin",
           "TIDEMARK_PROXY_LISTEN": "127.0.0.1:%d" % proxy,
           "TIDEMARK_ADMIN_LISTEN": "127.0.0.1:%d" % admin,
           "TIDEMARK_UPSTREAM_DEFAULT_URL": upstream.url}

    def healthcheck():
        p = in_image(cfg, root, test[1:], env, stdout=subprocess.PIPE,
                     stderr=subprocess.STDOUT)
        out = p.communicate(timeout=30 * slow())[0].decode()
        return p.returncode, out

    rc, out = healthcheck()
    assert rc == 1, out
    tm = in_image(cfg, root, cfg["Entrypoint"] + cfg["Cmd"], env,
                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def ready():
            try:
                return urllib.request.urlopen(
                    "http://127.0.0.1:%d/readyz" % admin,
                    timeout=2).status == 200
            except OSError:
                assert tm.poll() is None, "the image's tidemark exited"
                return False
        wait_until(ready, 20 * slow(), "the image's tidemark ready")
        assert healthcheck() == (0, "tidemark: /readyz on 127.0.0.1:%d: 200\n"
                                 % admin)
    finally:
        tm.terminate()
        assert tm.wait(timeout=30 * slow()) == 0
    rc, out = healthcheck()
    assert rc == 1 and "Connection refused" in out, out


def test_the_image_has_the_oci_labels(image):
    cfg, _, _, revision, source = image
    labels = cfg["Labels"]
    oci = {k: labels.get("org.opencontainers.image." + k) for k in LABELS}
    version = (PACKAGING / "debian/changelog").read_text().split(
        "(", 1)[1].split(")", 1)[0]
    assert oci["title"] == "tidemark"
    assert oci["version"] == version
    assert oci["revision"] == revision
    assert re.fullmatch(r"[0-9a-f]{40}", revision)
    if source:
        assert oci["source"] == source
    assert oci["source"]
    assert oci["licenses"] == "LicenseRef-none-yet"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", oci["created"])


def test_the_image_is_small_and_has_no_shell(image):
    _, root, size, _, _ = image
    assert size <= 40 * 1000 * 1000, "%.1f MB" % (size / 1e6)
    for path in ("bin/sh", "usr/bin/apt-get", "usr/bin/dpkg",
                 "usr/bin/python3", "usr/bin/tidemark-lab", "usr/bin/curl"):
        assert not (root / path).exists(), path
    # What scanners read: the packages its files came from.
    status = root / "var/lib/dpkg/status.d"
    assert {"libc6", "libssl3", "tidemark"} <= {p.name for p in
                                                status.iterdir()}
    assert (root / "etc/ssl/certs/ca-certificates.crt").stat().st_size > 0


def containerfile_final_stage():
    """The instructions after the Containerfile's last FROM, with their
    continuation lines joined: [(INSTRUCTION, rest)]."""
    text = (PACKAGING / "Containerfile").read_text()
    text = re.sub(r"\\\n(\s*#.*\n)*", " ", text)
    lines = [ln.strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("#")]
    last = max(i for i, ln in enumerate(lines) if ln.startswith("FROM "))
    return [tuple(ln.split(None, 1)) for ln in lines[last + 1:]]


def test_the_containerfile_describes_the_same_image(image):
    cfg = image[0]
    stage = containerfile_final_stage()
    got = {}
    for ins, rest in stage:
        got.setdefault(ins, []).append(rest)
    hc = got["HEALTHCHECK"][0]
    assert json.loads(hc[hc.index("CMD") + 3:]) == \
        cfg["Healthcheck"]["Test"][1:]
    for flag, key in (("interval", "Interval"), ("timeout", "Timeout"),
                      ("start-period", "StartPeriod"),
                      ("retries", "Retries")):
        v = re.search(r"--%s=(\d+)(s?)" % flag, hc)
        n = int(v.group(1)) * (10 ** 9 if v.group(2) else 1)
        assert cfg["Healthcheck"][key] == n, flag
    assert json.loads(got["ENTRYPOINT"][0]) == cfg["Entrypoint"]
    assert json.loads(got["CMD"][0]) == cfg["Cmd"]
    assert got["USER"] == [cfg["User"]]
    assert got["WORKDIR"] == [cfg["WorkingDir"]]
    assert set(json.loads(got["VOLUME"][0])) == set(cfg["Volumes"])
    assert {p + "/tcp" for p in got["EXPOSE"][0].split()} == \
        set(cfg["ExposedPorts"])
    labels = set(re.findall(r"(org\.opencontainers\.image\.[a-z]+)=",
                            " ".join(got["LABEL"])))
    assert labels == {k for k in cfg["Labels"]
                      if k.startswith("org.opencontainers.image.")}
