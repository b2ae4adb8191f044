"""Tools that cannot send a header write through a sidecar-held lease:
cadaver (put, mkcol, delete; driven by a script on its stdin), rclone
without --header, and the aws CLI without a plugin (unsigned, tidemark
signs as in conf/examples/s3-signed.ini), in front of the WebDAV
(Apache, nginx) and S3 (s3rver) backends. Two replicas run the example
configurations (webdav.ini, s3-signed.ini) with their write routes bound
to one [lease app] (the lease on Postgres, the marks on Postgres): the
holder's commands write, the standby's identical commands are refused
and the backend stays as the holder left it."""

import os
import re
import subprocess
import uuid

import pytest

from common import REPO, slow
from daemon import Pod, Tidemark
from servers import Apache, NginxDav, S3rver
from test_backends import rclone, s3_body, start_backend
from test_sign import CREDS, NO_CREDS

EXAMPLES = REPO / "conf" / "examples"
BUCKET = S3rver.bucket


def section_re(name):
    return re.compile(r"^\[%s\]\n(?:(?!\[).*\n)*" % re.escape(name), re.M)


def leased_ini(example, routes, pg, lease):
    """conf/examples/EXAMPLE.ini with its store and locks on Postgres, a
    [lease app] (TTL 2 s) and the write routes ROUTES bound to it."""
    text = (EXAMPLES / ("%s.ini" % example)).read_text()
    for sect in ("store", "locks"):
        text, n = section_re(sect).subn("", text)
        assert n == 1, sect
    for route in routes:
        text, n = re.subn(r"^(\[route %s\]\n)" % re.escape(route),
                          r"\1lease = app\n", text, flags=re.M)
        assert n == 1, route
    return text + (
        "\n[store]\ntype = postgres\ndsn = %s\n"
        "\n[locks]\nbackend = postgres\ndsn = %s\n"
        "\n[lease app]\nname = %s\nttl_ms = 2000\nrenew_ms = 500\n"
        % (pg.dsn, pg.dsn, lease))


class Replicas:
    """Two tidemarks on one configuration in front of one backend: A
    holds the lease, B is its standby."""

    def __init__(self, tmp, server, example, upstream, routes, pg,
                 env=None):
        lease = "tools-" + uuid.uuid4().hex[:12]
        ini = leased_ini(example, routes, pg, lease)
        self.server = server
        self.tms = []
        for name in ("A", "B"):
            tm = Tidemark(tmp / name, ini=ini)
            tm.env.update({
                "TIDEMARK_PROXY_LISTEN": "127.0.0.1:%d" % tm.port,
                "TIDEMARK_ADMIN_LISTEN": "127.0.0.1:%d" % tm.admin_port,
                "TIDEMARK_UPSTREAM_%s_URL" % upstream: server.url,
            })
            tm.env.update(env or {})
            self.tms.append(tm)
            tm.start()
            Pod(tm, name, "/").wait_state(
                "holding" if name == "A" else "standby", 10.0)
        self.a, self.b = self.tms

    def url(self, tm):
        return "http://127.0.0.1:%d" % tm.port

    @property
    def direct(self):
        return self.server.url

    def teardown(self):
        errors = []
        for tm in self.tms:
            try:
                tm.check_teardown()
            except AssertionError as e:
                errors.append(str(e))
        self.server.destroy()
        assert not errors, errors


def replicas_on(cls, tmp_path_factory, store_servers, example, upstream,
                routes, env=None):
    server = start_backend(cls)
    r = None
    try:
        r = Replicas(tmp_path_factory.mktemp("tools-" + cls.name), server,
                     example, upstream, routes, store_servers("postgres"),
                     env)
        yield r
    finally:
        if r is not None:
            r.teardown()
        else:
            server.destroy()


@pytest.fixture(scope="module", params=["apache", "nginx"])
def dav(request, tmp_path_factory, store_servers):
    cls = {"apache": Apache, "nginx": NginxDav}[request.param]
    yield from replicas_on(cls, tmp_path_factory, store_servers, "webdav",
                           "DAV", ["dav-write"])


@pytest.fixture(scope="module")
def s3(tmp_path_factory, store_servers):
    yield from replicas_on(S3rver, tmp_path_factory, store_servers,
                           "s3-signed", "S3",
                           ["s3-bucket-write", "s3-object-write"],
                           dict(NO_CREDS, **CREDS))


def unique(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:10])


def tree(root):
    """{relative path: bytes or None for a directory} under root."""
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs:
            out[os.path.relpath(os.path.join(d, n), root)] = None
        for n in files:
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = f.read()
    return out


# ------------------------------------------------------------- cadaver


def cadaver(url, *commands):
    """Run cadaver on url with commands on its stdin; its output."""
    script = "".join(c + "\n" for c in commands) + "quit\n"
    p = subprocess.run(["cadaver", url], input=script.encode(),
                       capture_output=True, timeout=60 * slow(),
                       env=dict(os.environ, HOME=os.devnull))
    return p.stdout.decode(errors="replace") + p.stderr.decode(
        errors="replace")


def outcomes(out):
    """cadaver's verdict of each command: 'succeeded', or the status of
    a failure."""
    return [m[0] or m[1] for m in
            re.findall(r"\b(succeeded)\.|\bfailed:\s*(\d{3})", out)]


def cadaver_script(coll, src):
    return ["mkcol " + coll, "put %s %s/report.txt" % (src, coll),
            "put %s %s/gone.txt" % (src, coll), "delete %s/gone.txt" % coll]


def test_cadaver_writes_through_the_holder_not_the_standby(dav, tmp_path):
    """cadaver's mkcol, put and delete through the holder's sidecar
    write; the same commands through the standby's are refused (503),
    on a new collection and on the holder's, and the backend's tree
    stays as the holder left it."""
    coll = unique("cad")
    src = tmp_path / "report.txt"
    src.write_bytes(b"from the holder\n")
    out = cadaver(dav.url(dav.a) + "/dav/", *cadaver_script(coll, src))
    assert outcomes(out) == ["succeeded"] * 4, out
    want = {coll: None, coll + "/report.txt": b"from the holder\n"}
    assert tree(dav.server.root) | want == tree(dav.server.root)
    assert not os.path.exists(dav.server.path(coll + "/gone.txt"))
    before = tree(dav.server.root)

    stale = tmp_path / "stale.txt"
    stale.write_bytes(b"from the standby\n")
    out = cadaver(dav.url(dav.b) + "/dav/",
                  *cadaver_script(unique("cad"), stale),
                  "put %s %s/report.txt" % (stale, coll),
                  "delete %s/report.txt" % coll)
    assert outcomes(out) == ["503"] * 6, out
    assert tree(dav.server.root) == before


# -------------------------------------------------------------- rclone


def rclone_dav(r, tm):
    return {"RCLONE_CONFIG_TM_TYPE": "webdav",
            "RCLONE_CONFIG_TM_URL": r.url(tm) + "/dav",
            "RCLONE_CONFIG_TM_VENDOR": "other"}


def test_rclone_webdav_without_header(dav, tmp_path):
    name = unique("rc")
    src = tmp_path / "src"
    src.write_bytes(b"rclone through the holder")
    p = rclone("copyto", str(src), "tm:" + name, env=rclone_dav(dav, dav.a))
    assert p.returncode == 0, p.stderr
    assert open(dav.server.path(name), "rb").read() == \
        b"rclone through the holder"
    before = tree(dav.server.root)
    src.write_bytes(b"rclone through the standby")
    p = rclone("copyto", str(src), "tm:" + name, env=rclone_dav(dav, dav.b))
    assert p.returncode != 0
    assert b"503" in p.stderr, p.stderr
    p = rclone("deletefile", "tm:" + name, env=rclone_dav(dav, dav.b))
    assert p.returncode != 0
    assert tree(dav.server.root) == before


def rclone_s3(r, tm):
    # No credentials: rclone sends anonymous requests, tidemark signs.
    return {"RCLONE_CONFIG_TMS3_TYPE": "s3",
            "RCLONE_CONFIG_TMS3_PROVIDER": "Other",
            "RCLONE_CONFIG_TMS3_ENDPOINT": r.url(tm),
            "RCLONE_CONFIG_TMS3_REGION": "us-east-1",
            "RCLONE_CONFIG_TMS3_FORCE_PATH_STYLE": "true",
            "RCLONE_CONFIG_TMS3_NO_CHECK_BUCKET": "true"}


def test_rclone_s3_without_header(s3, tmp_path):
    key = unique("rc")
    src = tmp_path / "src"
    src.write_bytes(b"rclone through the holder")
    p = rclone("copyto", str(src), "tms3:%s/%s" % (BUCKET, key),
               env=rclone_s3(s3, s3.a))
    assert p.returncode == 0, p.stderr
    assert s3_body(s3, key) == b"rclone through the holder"
    src.write_bytes(b"rclone through the standby")
    p = rclone("copyto", str(src), "tms3:%s/%s" % (BUCKET, key),
               env=rclone_s3(s3, s3.b))
    assert p.returncode != 0
    p = rclone("deletefile", "tms3:%s/%s" % (BUCKET, key),
               env=rclone_s3(s3, s3.b))
    assert p.returncode != 0
    assert s3_body(s3, key) == b"rclone through the holder"


# ------------------------------------------------------------- aws CLI


def aws(s3, tm, *args):
    """Debian's aws CLI, unsigned (--no-sign-request: tidemark signs),
    no retries, no configuration of this machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_CONFIG_FILE": os.devnull,
                "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_EC2_METADATA_DISABLED": "true",
                "AWS_MAX_ATTEMPTS": "1", "AWS_RETRY_MODE": "standard"})
    return subprocess.run(["/usr/bin/aws", "--endpoint-url", s3.url(tm),
                           "--no-sign-request"] + list(args),
                          capture_output=True, env=env, timeout=60 * slow())


def test_aws_cli_without_plugin(s3, tmp_path):
    key = unique("aws")
    src = tmp_path / "src"
    src.write_bytes(b"aws through the holder")
    p = aws(s3, s3.a, "s3", "cp", str(src), "s3://%s/%s" % (BUCKET, key))
    assert p.returncode == 0, p.stderr
    assert s3_body(s3, key) == b"aws through the holder"
    src.write_bytes(b"aws through the standby")
    p = aws(s3, s3.b, "s3", "cp", str(src), "s3://%s/%s" % (BUCKET, key))
    assert p.returncode != 0
    assert b"503" in p.stderr, p.stderr
    p = aws(s3, s3.b, "s3", "rm", "s3://%s/%s" % (BUCKET, key))
    assert p.returncode != 0
    assert s3_body(s3, key) == b"aws through the holder"
    p = aws(s3, s3.a, "s3", "rm", "s3://%s/%s" % (BUCKET, key))
    assert p.returncode == 0, p.stderr
    assert s3_body(s3, key) is None


def test_aws_cli_batch_deletes_without_plugin(s3, tmp_path):
    """aws s3 rm --recursive (one DeleteObject each in this CLI) and aws
    s3api delete-objects (one multi-object delete, its body read by
    tidemark, which signs it with the body's own hash): the standby's
    delete nothing, the holder's delete everything."""
    prefix = unique("awsbatch")
    keys = ["%s/f%d" % (prefix, i) for i in range(3)]
    src = tmp_path / "src"
    src.write_bytes(b"aws batch")
    for k in keys:
        p = aws(s3, s3.a, "s3", "cp", str(src), "s3://%s/%s" % (BUCKET, k))
        assert p.returncode == 0, p.stderr
    delete = "Objects=[%s],Quiet=false" % ",".join(
        "{Key=%s}" % k for k in keys[:2])
    for tm in (s3.b, s3.a):
        p = aws(s3, tm, "s3api", "delete-objects", "--bucket", BUCKET,
                "--delete", delete)
        if tm is s3.b:
            assert p.returncode != 0
            assert b"503" in p.stderr, p.stderr
            assert [s3_body(s3, k) for k in keys] == [b"aws batch"] * 3
    assert p.returncode == 0, p.stderr
    assert b"Errors" not in p.stdout, p.stdout
    assert [s3_body(s3, k) for k in keys] == [None, None, b"aws batch"]
    p = aws(s3, s3.b, "s3", "rm", "--recursive",
            "s3://%s/%s/" % (BUCKET, prefix))
    assert p.returncode != 0
    assert s3_body(s3, keys[2]) == b"aws batch"
    p = aws(s3, s3.a, "s3", "rm", "--recursive",
            "s3://%s/%s/" % (BUCKET, prefix))
    assert p.returncode == 0, p.stderr
    assert s3_body(s3, keys[2]) is None
