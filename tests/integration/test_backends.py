"""Real backends behind tidemark: Apache mod_dav, nginx's DAV module and
an S3 server (s3rver, which checks AWS signatures), driven by real clients
(curl, Python requests, boto3, rclone) through the example configurations
conf/examples/webdav.ini and s3.ini, run as they are with the addresses
set from the environment.

Each backend and its tidemark start once per module; every test works on
paths of its own. Shown here:

- the paused holder: A takes the lock and writes, its lease runs out
  while it is paused, B takes the lock and writes, A resumes and writes
  with its old token: tidemark answers 409 and the backend keeps B's data;
- the side doors: every other way for A's stale token to reach B's data
  (other methods, MOVE/COPY onto it, other spellings of its path, S3
  multi-object delete and form uploads, method overrides) is closed;
- the reads a client needs (GET, HEAD, PROPFIND, OPTIONS, S3 listings)
  pass without a token;
- what an S3 client must do: sign the Host it sends to tidemark, and add
  the token after signing.
"""

import itertools
import json
import os
import subprocess
import urllib.parse
import xml.etree.ElementTree as ET

import boto3
import pytest
import requests
from botocore.config import Config
from botocore.exceptions import ClientError

from common import REPO, slow, wait_until
from daemon import Tidemark, run_check
from servers import Apache, NginxDav, S3rver

EXAMPLES = REPO / "conf" / "examples"

_names = itertools.count(1)


def unique(prefix):
    """A path segment no other test of this run uses."""
    return "%s-%d-%d" % (prefix, os.getpid(), next(_names))


# ------------------------------------------------------- configurations


def example_tidemark(tmp, name, upstream_section, upstream_url, extra=None):
    """A tidemark running conf/examples/NAME.ini, with its listen
    addresses and upstream URL given as TIDEMARK_* variables."""
    tmp.mkdir(parents=True, exist_ok=True)
    text = (EXAMPLES / ("%s.ini" % name)).read_text()
    tm = Tidemark(tmp, ini=text)
    sect = upstream_section.upper()
    tm.env.update({
        "TIDEMARK_PROXY_LISTEN": "127.0.0.1:%d" % tm.port,
        "TIDEMARK_ADMIN_LISTEN": "127.0.0.1:%d" % tm.admin_port,
        "TIDEMARK_UPSTREAM_%s_URL" % sect: upstream_url,
    })
    tm.env.update(extra or {})
    tm.start()
    return tm


class Fenced:
    """A backend, the tidemark in front of it, and the lock service."""

    def __init__(self, server, tm):
        self.server = server
        self.tm = tm

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.tm.port

    @property
    def direct(self):
        return self.server.url

    def lock(self, name, ttl_ms):
        """Take the lock; its token (a string, as the service gives it)."""
        st, _, body = self.tm.admin(
            "POST", "/v1/locks/%s?ttl_ms=%d" % (name, ttl_ms))
        assert st == 201, (st, body)
        doc = json.loads(body)
        assert doc["name"] == name, doc
        return doc["token"]

    def lease_gone(self, name, timeout=10.0):
        """Wait until the lease has run out (the holder is 'paused')."""
        wait_until(lambda: self.tm.admin("GET", "/v1/locks/%s" % name)[0]
                   == 404, timeout * slow(), "the lease of %s to end" % name)

    def unlock(self, name, token):
        st, _, body = self.tm.admin(
            "DELETE", "/v1/locks/%s?token=%s" % (name, token))
        assert st == 204, (st, body)

    def takeover(self, name):
        """A's lease on name has run out while A was paused: B takes the
        lock (eager: the mark rises to B's fence at once). B's token."""
        self.lease_gone(name)
        return self.lock(name, ttl_ms=60000)

    def teardown(self):
        try:
            self.tm.check_teardown()
        finally:
            self.server.destroy()


def start_backend(cls):
    why = cls.available()
    if why is not None:
        pytest.fail("%s: %s" % (cls.name, why), pytrace=False)
    s = cls()
    try:
        s.start()
    except Exception:
        s.destroy()
        raise
    return s


@pytest.fixture(scope="module", params=["apache", "nginx"])
def dav(request, tmp_path_factory):
    cls = {"apache": Apache, "nginx": NginxDav}[request.param]
    server = start_backend(cls)
    f = None
    try:
        tm = example_tidemark(tmp_path_factory.mktemp("tm-" + cls.name),
                              "webdav", "dav", server.url)
        f = Fenced(server, tm)
        f.kind = request.param
        yield f
    finally:
        if f is not None:
            f.teardown()
        else:
            server.destroy()


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    server = start_backend(S3rver)
    f = None
    try:
        tm = example_tidemark(tmp_path_factory.mktemp("tm-s3"), "s3", "s3",
                              server.url)
        f = Fenced(server, tm)
        yield f
    finally:
        if f is not None:
            f.teardown()
        else:
            server.destroy()


# ------------------------------------------------------------- clients


def curl(*args, data=None):
    """Run curl; (status, headers, body). headers: lower-case names,
    the values of repeated fields joined with ", "."""
    p = subprocess.run(["curl", "-sS", "-i", "--max-time", "20"]
                       + list(args), input=data, capture_output=True,
                       timeout=30 * slow())
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    out = p.stdout
    # Skip interim answers (100 Continue).
    while True:
        head, _, rest = out.partition(b"\r\n\r\n")
        first = head.split(b"\r\n", 1)[0]
        status = int(first.split()[1])
        if 100 <= status < 200 and rest.startswith(b"HTTP/"):
            out = rest
            continue
        break
    headers = {}
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.decode("latin-1").partition(":")
        k, v = k.strip().lower(), v.strip()
        headers[k] = headers[k] + ", " + v if k in headers else v
    return status, headers, rest


def client_put(client, url, body, token=None):
    """PUT through one of the real clients: (status, headers, body)."""
    if client == "curl":
        args = ["-X", "PUT", "--data-binary", "@-", url]
        if token is not None:
            args[:0] = ["-H", "Fencing-Token: %s" % token]
        return curl(*args, data=body)
    if client == "requests":
        h = {"Fencing-Token": token} if token is not None else {}
        r = requests.put(url, data=body, headers=h, timeout=20)
        return r.status_code, {k.lower(): v for k, v in r.headers.items()}, \
            r.content
    raise AssertionError(client)


def get_direct(f, path):
    """What the backend itself has at path: (status, body)."""
    r = requests.get(f.direct + path, timeout=10)
    return r.status_code, r.content


def assert_stale(status, headers, body, resource, token, mark):
    """tidemark's 409 for a stale token, with its problem document."""
    assert status == 409, (status, headers, body)
    assert headers.get("content-type", "").split(";")[0] == \
        "application/problem+json", headers
    doc = json.loads(body)
    assert doc["resource"] == resource, doc
    assert doc["token"] == int(token), doc
    assert doc["high_water"] == int(mark), doc
    assert headers.get("fencing-high-water") == str(mark), headers
    return doc


def rclone(*args, env=None, tmp=None):
    """Run rclone with a config from the environment only (and none of
    the AWS SDK's variables: AWS_CA_BUNDLE makes it refuse rclone's own
    HTTP transport)."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("AWS_", "RCLONE_"))}
    e.update(env or {})
    e["RCLONE_CONFIG"] = os.devnull
    return subprocess.run(["rclone", "--retries", "1", "--low-level-retries",
                           "1", "--contimeout", "5s", "--timeout", "20s"]
                          + list(args), capture_output=True, env=e,
                          timeout=60 * slow())


# ------------------------------------------------------------- examples


@pytest.mark.parametrize("name", ["webdav", "s3"])
def test_example_configuration_passes_check(name):
    """tidemark -c conf/examples/NAME.ini --check, as shipped."""
    path = EXAMPLES / ("%s.ini" % name)
    rc, lines = run_check(path)
    assert (rc, lines) == (0, ["%s: ok" % path])


# ---------------------------------------------------------------- WebDAV


def dav_setup(dav, prefix, client="curl"):
    """The paused-holder story up to A's resumption: A wrote v1 to
    /dav/NAME, its lease ran out, B took the lock and wrote v2. (name,
    path, A's token, B's token)."""
    name = unique(prefix)
    res, path = "dav/" + name, "/dav/" + name
    a = dav.lock(res, ttl_ms=200)
    st, h, body = client_put(client, dav.url + path, b"v1 from A", a)
    assert st == 201, (st, h, body)
    b = dav.takeover(res)
    assert int(b) > int(a)
    st, h, body = client_put(client, dav.url + path, b"v2 from B", b)
    assert st == 204, (st, h, body)
    assert h.get("fencing-high-water") == b, h
    return name, path, a, b


@pytest.mark.parametrize("client", ["curl", "requests"])
def test_dav_paused_holder_is_refused_and_the_new_data_stays(dav, client):
    name, path, a, b = dav_setup(dav, "paused", client)
    st, h, body = client_put(client, dav.url + path, b"stale from A", a)
    assert_stale(st, h, body, "dav/" + name, a, b)
    assert get_direct(dav, path) == (200, b"v2 from B")
    # Through tidemark too, without a token.
    assert get_direct(dav, path) == (200, b"v2 from B")
    dav.unlock("dav/" + name, b)


def test_dav_rclone_with_a_stale_token_cannot_overwrite(dav, tmp_path):
    name, path, a, b = dav_setup(dav, "rclone")
    src = tmp_path / "stale.txt"
    src.write_bytes(b"stale from A through rclone")
    env = {"RCLONE_CONFIG_TM_TYPE": "webdav",
           "RCLONE_CONFIG_TM_URL": dav.url + "/dav",
           "RCLONE_CONFIG_TM_VENDOR": "other"}
    p = rclone("--header", "Fencing-Token: %s" % a, "copyto", str(src),
               "tm:" + name, env=env)
    assert p.returncode != 0, p
    assert b"409" in p.stderr, p.stderr
    assert get_direct(dav, path) == (200, b"v2 from B")
    # With B's token rclone writes.
    src.write_bytes(b"v3 from B through rclone")
    p = rclone("--header", "Fencing-Token: %s" % b, "copyto", str(src),
               "tm:" + name, env=env)
    assert p.returncode == 0, p.stderr
    assert get_direct(dav, path) == (200, b"v3 from B through rclone")
    dav.unlock("dav/" + name, b)


def test_dav_stale_answer_names_its_kind(dav):
    name, path, a, b = dav_setup(dav, "kind")
    st, h, _ = client_put("curl", dav.url + path, b"stale", a)
    assert st == 409
    assert h.get("tidemark-error") == "stale-token", h


LOCKINFO = (b'<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope>'
            b'<D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype>'
            b'</D:lockinfo>')


# Methods that write at their own path, fenced by the write route's *.
@pytest.mark.parametrize("method,body", [
    ("DELETE", b""),
    ("PROPPATCH", b'<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:"'
     b' xmlns:Z="urn:x"><D:set><D:prop><Z:owner>A</Z:owner></D:prop>'
     b'</D:set></D:propertyupdate>'),
    ("LOCK", LOCKINFO),
    ("MKCOL", b""),
    ("MOVE", b""),
])
def test_dav_stale_method_on_the_path_is_refused(dav, method, body):
    name, path, a, b = dav_setup(dav, "m-" + method.lower())
    args = ["-X", method, "-H", "Fencing-Token: %s" % a,
            "-H", "Content-Type: application/xml", "--data-binary", "@-"]
    if method == "MOVE":
        # The source is the fenced path: A moves B's data away.
        args += ["-H", "Destination: %s/dav/%s-away" % (dav.url, name)]
    st, h, out = curl(*args, dav.url + path, data=body)
    assert_stale(st, h, out, "dav/" + name, a, b)
    assert get_direct(dav, path) == (200, b"v2 from B")
    if method == "MOVE":
        assert get_direct(dav, "/dav/%s-away" % name)[0] == 404


def test_dav_copy_only_reads_its_source(dav):
    """A COPY from B's path reads it: A's stale token may copy it to a
    path of its own (whose mark it then holds); B's data stays."""
    name, path, a, b = dav_setup(dav, "copy-src")
    away = "/dav/%s-away" % name
    st, h, out = curl("-X", "COPY", "-H", "Fencing-Token: %s" % a,
                      "-H", "Destination: %s%s" % (dav.url, away),
                      dav.url + path)
    # nginx answers 204 to a COPY onto a new name, Apache 201.
    assert st == {"apache": 201, "nginx": 204}[dav.kind], (st, h, out)
    assert get_direct(dav, away) == (200, b"v2 from B")
    assert get_direct(dav, path) == (200, b"v2 from B")
    assert dav.tm.mark("dav/%s-away" % name) == int(a)


@pytest.mark.parametrize("method", ["MOVE", "COPY"])
def test_dav_move_or_copy_onto_a_fenced_path_is_refused(dav, method):
    """A writes a file of its own (no mark yet: passes), then MOVEs or
    COPYs it onto B's path with Overwrite: the Destination is a write
    too."""
    name, path, a, b = dav_setup(dav, "dest-" + method.lower())
    own = "/dav/%s-own" % name
    st, h, out = client_put("curl", dav.url + own, b"stale via " +
                            method.encode(), a)
    assert st == 201, (st, h, out)
    st, h, out = curl("-X", method, "-H", "Fencing-Token: %s" % a,
                      "-H", "Destination: %s%s" % (dav.url, path),
                      "-H", "Overwrite: T", dav.url + own)
    assert_stale(st, h, out, "dav/" + name, a, b)
    assert get_direct(dav, path) == (200, b"v2 from B")


def test_dav_move_onto_a_free_path_with_a_valid_token_works(dav):
    """The fence does not stop a holder's own MOVE: B moves its file to
    a new name, and the backend has it there."""
    name, path, a, b = dav_setup(dav, "move-ok")
    dest = "/dav/%s-moved" % name
    st, h, out = curl("-X", "MOVE", "-H", "Fencing-Token: %s" % b,
                      "-H", "Destination: %s%s" % (dav.url, dest),
                      dav.url + path)
    # nginx answers 204 to a MOVE onto a new name, Apache 201.
    assert st == {"apache": 201, "nginx": 204}[dav.kind], (st, h, out)
    assert get_direct(dav, dest) == (200, b"v2 from B")
    assert get_direct(dav, path)[0] == 404


# Other spellings of B's path that the backends read as that path.
SPELLINGS = [
    ("percent-encoded letter", lambda n: "/dav/%%%02X%s" % (ord(n[0]),
                                                              n[1:])),
    ("dot segment", lambda n: "/dav/./" + n),
    ("dot-dot segment", lambda n: "/dav/x/../" + n),
    ("empty segment", lambda n: "/dav//" + n),
]


@pytest.mark.parametrize("how,spell", SPELLINGS, ids=[s[0] for s in
                                                      SPELLINGS])
def test_dav_other_spelling_of_the_path_is_the_same_mark(dav, how, spell):
    name, path, a, b = dav_setup(dav, "spell")
    st, h, out = curl("--path-as-is", "-X", "PUT", "-H",
                      "Fencing-Token: %s" % a, "--data-binary", "@-",
                      dav.url + spell(name), data=b"stale, " +
                      how.encode())
    assert_stale(st, h, out, "dav/" + name, a, b)
    assert get_direct(dav, path) == (200, b"v2 from B")


@pytest.mark.parametrize("how,args", [
    ("encoded slash", ("-X", "PUT", "{url}/dav/x%2F{name}")),
    ("lowercase method", ("-X", "put", "{url}/dav/{name}")),
    ("method override", ("-X", "POST", "-H", "X-HTTP-Method-Override: PUT",
                         "{url}/dav/{name}")),
], ids=["encoded-slash", "lowercase-method", "method-override"])
def test_dav_ambiguous_request_is_refused(dav, how, args):
    name, path, a, b = dav_setup(dav, "amb")
    args = [x.format(url=dav.url, name=name) for x in args]
    st, h, out = curl("--path-as-is", "-H", "Fencing-Token: %s" % a,
                      "--data-binary", "@-", *args, data=b"stale")
    assert st == 400, (how, st, h, out)
    assert get_direct(dav, path) == (200, b"v2 from B")


def test_dav_reads_need_no_token(dav):
    name, path, a, b = dav_setup(dav, "read")
    r = requests.get(dav.url + path, timeout=10)
    assert (r.status_code, r.content) == (200, b"v2 from B")
    r = requests.head(dav.url + path, timeout=10)
    assert r.status_code == 200
    assert r.headers["Content-Length"] == str(len(b"v2 from B"))
    st, h, _ = curl("-X", "OPTIONS", dav.url + path)
    assert st == 200, (st, h)
    assert "1" in [v.strip() for v in h.get("dav", "").split(",")], h
    # A read with a token is not a write: the mark stays B's.
    r = requests.get(dav.url + path, headers={"Fencing-Token": a},
                     timeout=10)
    assert r.status_code == 200
    assert dav.tm.mark("dav/" + name) == int(b)


def propfind_hrefs(body):
    root = ET.fromstring(body)
    return [urllib.parse.unquote(e.text) for e in
            root.iter("{DAV:}href")]


@pytest.mark.parametrize("target", ["/dav/", "/dav/{name}"])
def test_dav_propfind_needs_no_token(dav, target):
    name, path, a, b = dav_setup(dav, "propfind")
    st, h, body = curl("-X", "PROPFIND", "-H", "Depth: 1",
                       dav.url + target.format(name=name))
    assert st == 207, (st, h, body)
    assert path in propfind_hrefs(body), body


def test_dav_rclone_lists_without_a_token(dav, tmp_path):
    name, path, a, b = dav_setup(dav, "rclone-ls")
    env = {"RCLONE_CONFIG_TM_TYPE": "webdav",
           "RCLONE_CONFIG_TM_URL": dav.url + "/dav",
           "RCLONE_CONFIG_TM_VENDOR": "other"}
    p = rclone("lsjson", "tm:", env=env)
    assert p.returncode == 0, p.stderr
    assert name in [e["Path"] for e in json.loads(p.stdout)]
    p = rclone("cat", "tm:" + name, env=env)
    assert (p.returncode, p.stdout) == (0, b"v2 from B"), p.stderr


def test_dav_unrouted_path_is_refused(dav):
    """unmatched = reject: a path outside /dav/ is no way around."""
    st, h, body = curl("-X", "PUT", "--data-binary", "@-",
                       dav.url + "/elsewhere", data=b"x")
    assert st == 404, (st, h, body)


def test_dav_write_without_token_is_refused(dav):
    name = unique("notoken")
    st, h, body = client_put("requests", dav.url + "/dav/" + name, b"x")
    assert st == 428, (st, h, body)
    assert get_direct(dav, "/dav/" + name)[0] == 404


# -------------------------------------------------- WebDAV collections

OLD, NEW = 5, 10  # a stale holder's token and the member writer's


def dav_call(dav, method, path, token, *headers):
    """A WebDAV request with a token through tidemark (curl)."""
    args = ["-X", method, "-H", "Fencing-Token: %s" % token]
    for h in headers:
        args += ["-H", h]
    return curl(*args, dav.url + path)


def dav_mkcol(dav, path, token=1):
    st, h, out = dav_call(dav, "MKCOL", path, token)
    assert st == 201, (path, st, h, out)


def dav_tree(dav, prefix):
    """A collection /dav/NAME/ whose member two levels down,
    /dav/NAME/sub/m, is written with the token NEW (Apache needs the
    collections made first). (NAME, the member's path)."""
    name = unique(prefix)
    dav_mkcol(dav, "/dav/%s/" % name)
    dav_mkcol(dav, "/dav/%s/sub/" % name)
    member = "/dav/%s/sub/m" % name
    st, h, out = client_put("curl", dav.url + member, b"member", NEW)
    assert st == 201, (st, h, out)
    return name, member


def collection_op(dav, op, name, slash, token):
    """op on the collection /dav/NAME (with or without a trailing slash):
    DELETE it, MOVE it away, or MOVE or COPY the caller's own collection
    onto it (Overwrite: T: the backend first deletes what is there)."""
    path = "/dav/%s%s" % (name, slash)
    if op == "DELETE":
        return dav_call(dav, "DELETE", path, token)
    if op == "MOVE-away":
        return dav_call(dav, "MOVE", path, token, "Destination: %s/dav/%s-"
                        "away%s" % (dav.url, name, slash))
    own = "/dav/%s-own/" % name
    dav_mkcol(dav, own, token)
    return dav_call(dav, op.split("-")[0], own.rstrip("/") + slash, token,
                    "Destination: %s%s" % (dav.url, path), "Overwrite: T")


@pytest.mark.parametrize("slash", ["", "/"], ids=["no-slash", "slash"])
@pytest.mark.parametrize("op", ["DELETE", "MOVE-away", "MOVE-onto",
                                "COPY-onto"])
def test_dav_stale_collection_op_keeps_a_newer_member(dav, op, slash):
    """A member two levels down was written with NEW; a DELETE, MOVE or
    COPY of its collection with the older token would destroy it on the
    backend: refused 409, naming the collection and the member's mark."""
    name, member = dav_tree(dav, "coll")
    st, h, out = collection_op(dav, op, name, slash, OLD)
    assert_stale(st, h, out, "dav/" + name, OLD, NEW)
    assert get_direct(dav, member) == (200, b"member")
    # The refusal raised nothing: the collection's own mark is MKCOL's.
    assert dav.tm.mark("dav/" + name) == 1


@pytest.mark.parametrize("op", ["DELETE", "MOVE-away", "COPY-onto"])
def test_dav_collection_op_with_a_current_token_works(dav, op):
    name, member = dav_tree(dav, "coll-ok")
    st, h, out = collection_op(dav, op, name, "/", NEW)
    assert st in (201, 204), (st, h, out)
    if op == "COPY-onto":
        # What was there is replaced by the (empty) copied collection.
        assert get_direct(dav, member)[0] == 404
    elif op == "DELETE":
        assert get_direct(dav, "/dav/%s/" % name)[0] == 404
    else:
        assert get_direct(dav, "/dav/%s-away/sub/m" % name) == \
            (200, b"member")


def test_dav_stale_member_write_beside_a_newer_one_passes(dav):
    """Members are independent: only an operation on the collection
    compares a token with the marks below it."""
    name, member = dav_tree(dav, "coll-beside")
    st, h, out = client_put("curl", dav.url + "/dav/%s/sub/n" % name,
                            b"other", OLD)
    assert st == 201, (st, h, out)
    st, h, out = collection_op(dav, "DELETE", name, "/", OLD + 1)
    assert_stale(st, h, out, "dav/" + name, OLD + 1, NEW)


@pytest.mark.parametrize("depth", [None, "infinity", "1"])
def test_dav_stale_lock_of_a_collection_is_refused(dav, depth):
    """A LOCK of depth infinity (LOCK's default) locks every member: a
    stale holder would lock the new one out."""
    name, member = dav_tree(dav, "coll-lock")
    headers = ["Content-Type: application/xml"]
    if depth is not None:
        headers.append("Depth: " + depth)
    st, h, out = curl("-X", "LOCK", "-H", "Fencing-Token: %d" % OLD,
                      *sum([["-H", x] for x in headers], []),
                      "--data-binary", "@-", dav.url + "/dav/%s/" % name,
                      data=LOCKINFO)
    assert_stale(st, h, out, "dav/" + name, OLD, NEW)


def test_dav_lock_of_depth_0_checks_only_the_collection(dav):
    name, member = dav_tree(dav, "coll-lock0")
    st, h, out = curl("-X", "LOCK", "-H", "Fencing-Token: %d" % OLD,
                      "-H", "Depth: 0", "-H", "Content-Type: application/xml",
                      "--data-binary", "@-", dav.url + "/dav/%s/" % name,
                      data=LOCKINFO)
    # Forwarded: Apache locks it, nginx has no LOCK.
    assert st == {"apache": 200, "nginx": 405}[dav.kind], (st, h, out)


def test_dav_lock_service_fences_collections_above_their_members(dav):
    """B takes the lock of a member: eager fencing raises the subtree
    marks above it at once, so a collection request with an older token
    is refused before B has written. A holder of the collection's own
    lock gets a fence above every member's mark and may delete it."""
    name, member = dav_tree(dav, "coll-locks")
    b = dav.lock("dav/%s/sub/m" % name, ttl_ms=60000)
    assert int(b) > NEW
    st, h, out = collection_op(dav, "DELETE", name, "/", NEW)
    assert_stale(st, h, out, "dav/" + name, NEW, b)
    c = dav.lock("dav/" + name, ttl_ms=60000)
    assert int(c) > int(b)
    st, h, out = collection_op(dav, "DELETE", name, "/", c)
    assert st == 204, (st, h, out)
    assert get_direct(dav, member)[0] == 404
    dav.unlock("dav/" + name, c)
    dav.unlock("dav/%s/sub/m" % name, b)


def test_dav_subtree_marks_survive_a_restart(dav):
    """The subtree marks are in the mark store, not only in memory."""
    name, member = dav_tree(dav, "coll-restart")
    dav.tm.restart()
    st, h, out = collection_op(dav, "DELETE", name, "", OLD)
    assert_stale(st, h, out, "dav/" + name, OLD, NEW)
    assert get_direct(dav, member) == (200, b"member")


# -------------------------------------------------------------------- S3


BUCKET = S3rver.bucket


def s3_client(url, token=None, when="before-send"):
    """A boto3 S3 client for url (path-style, SigV4, no retries). With a
    token, a handler adds Fencing-Token to every request at `when`:
    before-send (after signing: the way that works) or before-sign."""
    c = boto3.client(
        "s3", endpoint_url=url, region_name="us-east-1",
        aws_access_key_id=S3rver.access_key,
        aws_secret_access_key=S3rver.secret_key,
        config=Config(signature_version="s3v4",
                      s3={"addressing_style": "path"},
                      retries={"max_attempts": 1, "mode": "standard"}))
    if token is not None:
        def add_token(request, **kw):
            request.headers["Fencing-Token"] = token
        c.meta.events.register(when + ".s3", add_token)
    return c


def client_error(call, *args, **kw):
    """The ClientError a boto3 call raises: (status, error code, headers)."""
    with pytest.raises(ClientError) as e:
        call(*args, **kw)
    r = e.value.response
    return (r["ResponseMetadata"]["HTTPStatusCode"], r["Error"]["Code"],
            r["ResponseMetadata"]["HTTPHeaders"])


def s3_body(s3, key):
    """The object as the backend itself has it (read straight from it,
    signed), or None when it has none."""
    try:
        return s3_client(s3.direct).get_object(Bucket=BUCKET,
                                               Key=key)["Body"].read()
    except ClientError as e:
        if e.response["Error"]["Code"] == "NoSuchKey":
            return None
        raise


def s3_setup(s3, prefix):
    """A wrote v1 to KEY, its lease ran out, B took the lock and wrote
    v2. (key, resource, A's token, B's token)."""
    key = unique(prefix)
    res = "s3/%s/%s" % (BUCKET, key)
    a = s3.lock(res, ttl_ms=200)
    r = s3_client(s3.url, a).put_object(Bucket=BUCKET, Key=key,
                                        Body=b"v1 from A")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200, r
    b = s3.takeover(res)
    assert int(b) > int(a)
    r = s3_client(s3.url, b).put_object(Bucket=BUCKET, Key=key,
                                        Body=b"v2 from B")
    assert r["ResponseMetadata"]["HTTPHeaders"]["fencing-high-water"] == b
    return key, res, a, b


def test_s3_paused_holder_is_refused_and_the_new_data_stays(s3):
    key, res, a, b = s3_setup(s3, "paused")
    st, code, h = client_error(s3_client(s3.url, a).put_object,
                               Bucket=BUCKET, Key=key, Body=b"stale from A")
    assert (st, code) == (409, "409"), h
    assert h["content-type"] == "application/problem+json", h
    assert h["fencing-high-water"] == b, h
    assert s3_body(s3, key) == b"v2 from B"
    s3.unlock(res, b)


def test_s3_stale_answer_names_its_kind(s3):
    key, res, a, b = s3_setup(s3, "kind")
    st, _, h = client_error(s3_client(s3.url, a).put_object,
                            Bucket=BUCKET, Key=key, Body=b"stale")
    assert st == 409
    assert h.get("tidemark-error") == "stale-token", h


RCLONE_S3 = {"RCLONE_CONFIG_TMS3_TYPE": "s3",
             "RCLONE_CONFIG_TMS3_PROVIDER": "Other",
             "RCLONE_CONFIG_TMS3_ACCESS_KEY_ID": S3rver.access_key,
             "RCLONE_CONFIG_TMS3_SECRET_ACCESS_KEY": S3rver.secret_key,
             "RCLONE_CONFIG_TMS3_REGION": "us-east-1",
             "RCLONE_CONFIG_TMS3_FORCE_PATH_STYLE": "true",
             "RCLONE_CONFIG_TMS3_NO_CHECK_BUCKET": "true"}


def test_s3_rclone_writes_with_its_token_and_not_with_a_stale_one(s3,
                                                                   tmp_path):
    """rclone's --header adds the token to each request after the SDK
    signed it, so it is never signed."""
    key, res, a, b = s3_setup(s3, "rclone")
    env = dict(RCLONE_S3, RCLONE_CONFIG_TMS3_ENDPOINT=s3.url)
    src = tmp_path / "f.txt"
    src.write_bytes(b"stale from A through rclone")
    p = rclone("--header", "Fencing-Token: %s" % a, "copyto", str(src),
               "tms3:%s/%s" % (BUCKET, key), env=env)
    assert p.returncode != 0, p
    assert b"409" in p.stderr, p.stderr
    assert s3_body(s3, key) == b"v2 from B"
    src.write_bytes(b"v3 from B through rclone")
    p = rclone("--header", "Fencing-Token: %s" % b, "copyto", str(src),
               "tms3:%s/%s" % (BUCKET, key), env=env)
    assert p.returncode == 0, p.stderr
    assert s3_body(s3, key) == b"v3 from B through rclone"
    # Reads without a token: a listing and the object.
    p = rclone("lsjson", "tms3:" + BUCKET, env=env)
    assert p.returncode == 0, p.stderr
    assert key in [e["Path"] for e in json.loads(p.stdout)]
    p = rclone("cat", "tms3:%s/%s" % (BUCKET, key), env=env)
    assert (p.returncode, p.stdout) == (0, b"v3 from B through rclone"), \
        p.stderr
    s3.unlock(res, b)


def test_s3_reads_need_no_token(s3):
    key, res, a, b = s3_setup(s3, "read")
    c = s3_client(s3.url)
    assert c.get_object(Bucket=BUCKET, Key=key)["Body"].read() == \
        b"v2 from B"
    assert c.head_object(Bucket=BUCKET, Key=key)["ContentLength"] == 9
    keys = [o["Key"] for o in c.list_objects_v2(
        Bucket=BUCKET, Prefix=key)["Contents"]]
    assert keys == [key]
    assert BUCKET in [x["Name"] for x in c.list_buckets()["Buckets"]]
    c.head_bucket(Bucket=BUCKET)
    # Unsigned reads (the server allows them) too.
    r = requests.get("%s/%s/%s" % (s3.url, BUCKET, key), timeout=10)
    assert (r.status_code, r.content) == (200, b"v2 from B")


def test_s3_stale_delete_is_refused(s3):
    key, res, a, b = s3_setup(s3, "delete")
    st, code, h = client_error(s3_client(s3.url, a).delete_object,
                               Bucket=BUCKET, Key=key)
    assert st == 409, (code, h)
    assert s3_body(s3, key) == b"v2 from B"


def test_s3_stale_copy_onto_the_key_is_refused(s3):
    """CopyObject is a PUT on the destination key: fenced by it."""
    key, res, a, b = s3_setup(s3, "copy")
    own = key + "-own"
    s3_client(s3.url, a).put_object(Bucket=BUCKET, Key=own, Body=b"stale")
    st, code, h = client_error(
        s3_client(s3.url, a).copy_object, Bucket=BUCKET, Key=key,
        CopySource={"Bucket": BUCKET, "Key": own})
    assert st == 409, (code, h)
    assert s3_body(s3, key) == b"v2 from B"


def s3_stale_upload(s3, prefix):
    """A, holding the lock of KEY, creates an upload of KEY and sends a
    part; its lease runs out; B takes the lock and writes v2. (key,
    resource, A's token, A's client, B's token, upload id, part 1's
    ETag)."""
    key = unique(prefix)
    res = "s3/%s/%s" % (BUCKET, key)
    a = s3.lock(res, ttl_ms=300)
    ca = s3_client(s3.url, a)
    up = ca.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    part = ca.upload_part(Bucket=BUCKET, Key=key, UploadId=up, PartNumber=1,
                          Body=b"stale from A, in parts")
    b = s3.takeover(res)
    s3_client(s3.url, b).put_object(Bucket=BUCKET, Key=key,
                                    Body=b"v2 from B")
    return key, res, a, ca, b, up, part["ETag"]


def test_s3_stale_multipart_completion_is_refused(s3):
    """A starts a multipart upload while it holds the lock and uploads a
    part, then pauses; B takes over and writes; A's completion (a POST
    on the key) is refused, and so is another part."""
    key, res, _, ca, b, up, etag = s3_stale_upload(s3, "multipart")
    st, _, _ = client_error(ca.upload_part, Bucket=BUCKET, Key=key,
                            UploadId=up, PartNumber=2, Body=b"more")
    assert st == 409
    st, _, _ = client_error(
        ca.complete_multipart_upload, Bucket=BUCKET, Key=key, UploadId=up,
        MultipartUpload={"Parts": [{"ETag": etag, "PartNumber": 1}]})
    assert st == 409
    assert s3_body(s3, key) == b"v2 from B"
    s3.unlock(res, b)


def s3_mark(s3, key):
    return s3.tm.mark(urllib.parse.quote("s3/%s/%s" % (BUCKET, key)))


def s3_put(s3, key, token):
    s3_client(s3.url, str(token)).put_object(Bucket=BUCKET, Key=key,
                                             Body=b"written at %s" % (
                                                 str(token).encode()))


def test_s3_multi_object_delete_raises_every_keys_mark(s3):
    """POST /BUCKET?delete names its keys in the body: each is fenced as
    a DELETE of it. With B's token every object goes and every key's
    mark is B's token."""
    key, res, a, b = s3_setup(s3, "multidelete")
    others = [unique("multi/dir") + "/x y", unique("multi") + "&caf\u00e9"]
    for k in others:
        s3_put(s3, k, a)
    r = s3_client(s3.url, b).delete_objects(
        Bucket=BUCKET, Delete={"Objects": [{"Key": k}
                                           for k in [key] + others]})
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200, r
    assert not r.get("Errors") and len(r["Deleted"]) == 3, r
    for k in [key] + others:
        assert s3_body(s3, k) is None, k
        assert s3_mark(s3, k) == int(b), k
    s3.unlock(res, b)


def test_s3_multi_object_delete_with_one_stale_key_deletes_nothing(s3):
    key, res, a, b = s3_setup(s3, "multistale")
    free = unique("multifree")
    s3_put(s3, free, a)
    st, code, h = client_error(
        s3_client(s3.url, a).delete_objects, Bucket=BUCKET,
        Delete={"Objects": [{"Key": free}, {"Key": key}]})
    assert (st, code) == (409, "409"), h
    assert h["content-type"] == "application/problem+json", h
    assert h["fencing-high-water"] == b, h
    assert s3_body(s3, key) == b"v2 from B"
    assert s3_body(s3, free) == b"written at " + a.encode()
    assert s3_mark(s3, key) == int(b)
    assert s3_mark(s3, free) == int(a)
    s3.unlock(res, b)


@pytest.mark.parametrize("body,status", [
    (b"<Delete><Object><Key>k</Key></Object>", 400),
    (b"<Delete>" + b"<Object><Key>k</Key></Object>" * 1001 + b"</Delete>",
     400),
    (b"<Delete>" + b" " * (2 << 20) + b"</Delete>", 413),
], ids=["malformed", "1001-keys", "over-2MiB"])
def test_s3_bad_multi_object_delete_bodies_forward_nothing(s3, body, status):
    key, res, a, b = s3_setup(s3, "multibad")
    body = body.replace(b"<Key>k</Key>", b"<Key>%s</Key>" % key.encode())
    st, h, out = curl("-X", "POST", "-H", "Fencing-Token: " + b,
                      "--data-binary", "@-",
                      "%s/%s?delete" % (s3.url, BUCKET), data=body)
    assert st == status, (st, h, out)
    assert h["content-type"] == "application/problem+json", h
    assert s3_body(s3, key) == b"v2 from B"
    assert s3_mark(s3, key) == int(b)
    s3.unlock(res, b)


def test_s3_rclone_purge_with_its_token(s3, tmp_path):
    """rclone purge lists a prefix and deletes its objects (rclone 1.60
    one DELETE each): refused below the keys' marks, done above."""
    prefix = unique("purge")
    keys = ["%s/f%d" % (prefix, i) for i in range(3)] + [prefix + "/d/g"]
    for k in keys:
        s3_put(s3, k, 5)
    env = dict(RCLONE_S3, RCLONE_CONFIG_TMS3_ENDPOINT=s3.url)
    p = rclone("--header", "Fencing-Token: 4", "purge",
               "tms3:%s/%s" % (BUCKET, prefix), env=env)
    assert p.returncode != 0, p
    assert b"409" in p.stderr, p.stderr
    assert [s3_body(s3, k) for k in keys] == [b"written at 5"] * 4
    p = rclone("--header", "Fencing-Token: 6", "purge",
               "tms3:%s/%s" % (BUCKET, prefix), env=env)
    assert p.returncode == 0, p.stderr
    assert [s3_body(s3, k) for k in keys] == [None] * 4
    assert [s3_mark(s3, k) for k in keys] == [6] * 4


def test_s3_form_upload_is_refused(s3):
    """A browser form POST to the bucket names its key in the form: on
    an s3 route it is refused (400), whatever the token."""
    key, res, a, b = s3_setup(s3, "form")
    r = requests.post("%s/%s" % (s3.url, BUCKET),
                      headers={"Fencing-Token": a},
                      data={"key": key}, files={"file": ("f", b"stale")},
                      timeout=10)
    assert r.status_code == 400, (r.status_code, r.headers, r.content)
    assert s3_body(s3, key) == b"v2 from B"


@pytest.mark.parametrize("how,target,method,status", [
    ("percent-encoded letter", lambda k: "/%s/%%%02X%s" % (
        BUCKET, ord(k[0]), k[1:]), "PUT", 409),
    ("encoded slash", lambda k: "/%s/x%%2F%s" % (BUCKET, k), "PUT", 400),
    ("lowercase method", lambda k: "/%s/%s" % (BUCKET, k), "put", 400),
], ids=["percent-encoded-letter", "encoded-slash", "lowercase-method"])
def test_s3_other_spelling_of_the_key(s3, how, target, method, status):
    """Unsigned requests (the server takes anonymous writes): the key
    spelled otherwise is the same mark, or the request is refused."""
    key, res, a, b = s3_setup(s3, "spell")
    st, h, out = curl("--path-as-is", "-X", method, "-H",
                      "Fencing-Token: %s" % a, "--data-binary", "@-",
                      s3.url + target(key), data=b"stale, " + how.encode())
    assert st == status, (how, st, h, out)
    assert s3_body(s3, key) == b"v2 from B"


def test_s3_signature_covers_the_host_tidemark_forwards(s3, tmp_path):
    """The client signs the Host it sends to tidemark; with host =
    upstream tidemark would send the backend's address instead and every
    signed request fails. The example keeps host = preserve."""
    key, res, a, b = s3_setup(s3, "host")
    tm = example_tidemark(tmp_path / "tm-host-upstream", "s3", "s3",
                          s3.direct,
                          extra={"TIDEMARK_UPSTREAM_S3_HOST": "upstream"})
    try:
        url = "http://127.0.0.1:%d" % tm.port
        st, code, _ = client_error(s3_client(url).get_object,
                                   Bucket=BUCKET, Key=key)
        assert (st, code) == (403, "SignatureDoesNotMatch")
    finally:
        tm.check_teardown()


def test_s3_a_signed_token_header_breaks_the_signature(s3):
    """Added before signing, Fencing-Token is in SignedHeaders; tidemark
    removes it, so the backend's signature check fails: add it after
    signing (boto3: before-send). The mark still rises to the token:
    tidemark cannot know the backend will refuse."""
    key, res, a, b = s3_setup(s3, "signed")
    c = s3_client(s3.url, str(int(b) + 1), when="before-sign")
    st, code, _ = client_error(c.put_object, Bucket=BUCKET, Key=key,
                               Body=b"v3, signed token")
    assert (st, code) == (403, "SignatureDoesNotMatch")
    assert s3_body(s3, key) == b"v2 from B"
    assert s3.tm.mark(res) == int(b) + 1


def test_s3_curl_aws_sigv4_signs_every_header_it_is_given(s3):
    """curl --aws-sigv4 signs each -H header, the token too: it can read
    through tidemark, but its writes fail the backend's check."""
    key, res, a, b = s3_setup(s3, "curl")
    sig = ["--aws-sigv4", "aws:amz:us-east-1:s3", "--user", "%s:%s" % (
        S3rver.access_key, S3rver.secret_key),
        "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]
    st, h, out = curl(*sig, "%s/%s/%s" % (s3.url, BUCKET, key))
    assert (st, out) == (200, b"v2 from B"), h
    st, h, out = curl(*sig, "-X", "PUT", "-H", "Fencing-Token: %s" % b,
                      "--data-binary", "@-", "%s/%s/%s" % (s3.url, BUCKET,
                                                          key),
                      data=b"v3 from curl")
    assert st == 403, (st, h, out)
    assert b"SignatureDoesNotMatch" in out
    assert s3_body(s3, key) == b"v2 from B"


def test_s3_unrouted_and_tokenless_writes_are_refused(s3):
    key = unique("notoken")
    st, code, h = client_error(s3_client(s3.url).put_object, Bucket=BUCKET,
                               Key=key, Body=b"x")
    assert st == 428, (code, h)
    assert s3_body(s3, key) is None
