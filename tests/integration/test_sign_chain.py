"""sign = aws-sigv4 with the AWS SDKs' credential chain: web identity
(STS's AssumeRoleWithWebIdentity), the shared credentials file, the
container credentials endpoint (ECS task roles, EKS Pod Identity) and
IMDSv2, each giving credentials the S3 server (s3rver, which checks every
signature) accepts; temporary credentials renewed before they expire,
under load, with no request signed with an expired set and none
dropped; an endpoint down at the start or at a renewal, and a malformed
STS answer: 503 with a problem body, never a stale signature; no secret
in the log.

AwsStandIn below stands in for AWS: a local HTTP server that speaks the
documented protocols (STS's XML answer, the container endpoint's JSON with
its Authorization check, IMDSv2's session token with its TTL header).
SigV4Checker stands in for an AWS service: it verifies each request's
signature with the secret of the key it names and refuses a key that has
expired."""

import hashlib
import hmac
import json
import signal
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
import ssl

from common import wait_until, slow
from daemon import run_check
from servers import S3rver
from test_sign import (BUCKET, EXAMPLE, NO_CREDS, direct_body, lock,
                       signing_tidemark, unique, url)
from test_sign import s3rver  # noqa: F401 (the module's fixture)
from test_metrics import scrape, value
from test_names import dns  # noqa: F401 (a DnsStub for [proxy] resolver)
from test_tls import pki  # noqa: F401 (a CA and certificates)

ROLE = "arn:aws:iam::123456789012:role/tidemark-test"
SECRET_MARK = "sekrit"  # in every secret handed out: grep the log for it
EXPIRY = "tidemark_sign_credentials_expiry_timestamp_seconds"


def iso(t):
    return datetime.fromtimestamp(t, timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


class _Server:
    """A threaded HTTP server on a free loopback port, stopped by stop()."""

    def __init__(self, handler, tls=None):
        # tls: (certificate, key) paths to serve HTTPS with
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.httpd.owner = self
        self.port = self.httpd.server_address[1]
        self.url = "%s://127.0.0.1:%d" % ("https" if tls else "http",
                                          self.port)
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(tls[0]), str(tls[1]))
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket,
                                                server_side=True,
                                                do_handshake_on_connect=False)
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class _StandInHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def answer(self, status, body, ctype="application/json"):
        body = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def body(self):
        n = int(self.headers.get("Content-Length", "0"))
        return self.rfile.read(n).decode()

    def do_POST(self):
        self.server.owner.serve(self, "POST")

    def do_GET(self):
        self.server.owner.serve(self, "GET")

    def do_PUT(self):
        self.server.owner.serve(self, "PUT")


# What the "endless" stand-in sends at most: a client that kept reading
# would hold all of it.
ENDLESS_MAX = 256 << 20


class AwsStandIn(_Server):
    """Stands in for AWS's credential endpoints. Each set it hands out
    lives `lifetime` seconds and is recorded in `issued` (key id ->
    secret, session token, expiry); with fixed=(key, secret) every set
    has that key and secret (s3rver's) and a new session token. mode:
    "ok", "down" (503 to everything), "malformed" (a 200 whose body
    is not the protocol's answer), "huge" (a 200 of 70 KiB) or
    "endless" (a chunked 200 whose first chunk's size line never ends:
    bytes until ENDLESS_MAX or the client goes; `sent` counts them) or
    "trickle" (a 200 of 1,000 bytes, one every 100 ms)."""

    def __init__(self, lifetime=3600, fixed=None, web_token="jwt-1",
                 auth_token="container-auth-1", tls=None):
        self.lifetime = lifetime
        self.fixed = fixed
        self.web_token = web_token
        self.web_tokens = {web_token}  # what STS takes
        self.auth_token = auth_token
        self.mode = "ok"
        self.lock = threading.Lock()
        self.issued = {}
        self.calls = []
        self.imds_tokens = set()
        self.n = 0
        self.sent = 0
        super().__init__(_StandInHandler, tls)

    def new_set(self):
        with self.lock:
            self.n += 1
            n = self.n
            key, secret = self.fixed or ("ASIATEST%08d" % n,
                                         "%s-%d-%s" % (SECRET_MARK, n,
                                                       "x" * 20))
            session = "session-%d/%s==" % (n, "T" * 40)
            exp = int(time.time()) + self.lifetime
            self.issued[session] = (secret, session, exp)
        return key, secret, session, exp

    def serve(self, h, method):
        path = h.path
        body = h.body() if method == "POST" else ""
        with self.lock:
            self.calls.append((method, path))
        if self.mode == "down":
            return h.answer(503, "{}")
        if self.mode == "huge":
            return h.answer(200, " " * 70000)
        if self.mode == "endless":
            return self.endless(h)
        if self.mode == "trickle":
            return self.trickle(h)
        if method == "POST" and path == "/":
            return self.sts(h, body)
        if path == "/container/creds" and method == "GET":
            return self.container(h)
        if path.startswith("/latest/"):
            return self.imds(h, method, path)
        h.answer(404, "{}")

    def endless(self, h):
        h.close_connection = True
        try:
            h.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json"
                          b"\r\nTransfer-Encoding: chunked\r\n\r\n1")
            chunk = b"0" * (1 << 16)
            while self.sent < ENDLESS_MAX:
                h.wfile.write(chunk)
                self.sent += len(chunk)
        except OSError:
            pass

    def trickle(self, h):
        h.close_connection = True
        try:
            h.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json"
                          b"\r\nContent-Length: 1000\r\n\r\n")
            for _ in range(1000):
                h.wfile.write(b" ")
                h.wfile.flush()
                time.sleep(0.1)
        except OSError:
            pass

    def sts(self, h, body):
        form = urllib.parse.parse_qs(body)
        if (form.get("Action") != ["AssumeRoleWithWebIdentity"]
                or form.get("RoleArn") != [ROLE]
                or len(form.get("WebIdentityToken", [])) != 1
                or form["WebIdentityToken"][0] not in self.web_tokens
                or not form.get("RoleSessionName")):
            return h.answer(
                400, "<ErrorResponse><Error><Type>Sender</Type><Code>"
                "InvalidIdentityToken</Code><Message>no</Message></Error>"
                "</ErrorResponse>", "text/xml")
        if self.mode == "malformed":
            return h.answer(200, "<AssumeRoleWithWebIdentityResponse><Assume"
                            "RoleWithWebIdentityResult><Credentials><Access"
                            "KeyId>AKID</AccessKeyId></Credentials>",
                            "text/xml")
        key, secret, session, exp = self.new_set()
        h.answer(200, """<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <Credentials>
      <AccessKeyId>%s</AccessKeyId>
      <SecretAccessKey>%s</SecretAccessKey>
      <SessionToken>%s</SessionToken>
      <Expiration>%s</Expiration>
    </Credentials>
    <AssumedRoleUser><Arn>%s/x</Arn></AssumedRoleUser>
  </AssumeRoleWithWebIdentityResult>
</AssumeRoleWithWebIdentityResponse>""" % (key, secret, session, iso(exp),
                                           ROLE), "text/xml")

    def creds_json(self, code=False):
        key, secret, session, exp = self.new_set()
        d = {"AccessKeyId": key, "SecretAccessKey": secret, "Token": session,
             "Expiration": iso(exp)}
        if code:
            d.update(Code="Success", Type="AWS-HMAC",
                     LastUpdated=iso(time.time()))
        return json.dumps(d)

    def container(self, h):
        if h.headers.get("Authorization") != self.auth_token:
            return h.answer(401, '{"message":"bad token"}')
        h.answer(200, self.creds_json())

    def imds(self, h, method, path):
        if method == "PUT" and path == "/latest/api/token":
            ttl = h.headers.get("X-aws-ec2-metadata-token-ttl-seconds", "")
            if not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
                return h.answer(400, "", "text/plain")
            tok = "imds-token-%d" % len(self.imds_tokens)
            self.imds_tokens.add(tok)
            return h.answer(200, tok, "text/plain")
        if h.headers.get("X-aws-ec2-metadata-token") not in self.imds_tokens:
            return h.answer(401, "", "text/plain")
        base = "/latest/meta-data/iam/security-credentials/"
        if path == base:
            return h.answer(200, "test-role", "text/plain")
        if path == base + "test-role":
            return h.answer(200, self.creds_json(code=True))
        h.answer(404, "", "text/plain")

    def fetches(self):
        with self.lock:
            return len(self.issued)


def _signing_key(secret, date, region, service):
    k = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


class _CheckerHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_PUT(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        status, why = self.server.owner.verify(self)
        body = why.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class SigV4Checker(_Server):
    """Stands in for an AWS service: 200 when the request's SigV4
    signature is right for the secret of the set its session token names
    (AwsStandIn.issued) and that set has not expired; else 403 with why.
    Every verdict is kept in `verdicts`."""

    def __init__(self, standin):
        self.standin = standin
        self.verdicts = []
        self.vlock = threading.Lock()
        super().__init__(_CheckerHandler)

    def verify(self, h):
        why = self._why(h)
        with self.vlock:
            self.verdicts.append(why)
        return (200, "ok") if why == "ok" else (403, why)

    def _why(self, h):
        auth = h.headers.get("Authorization", "")
        session = h.headers.get("x-amz-security-token")
        with self.standin.lock:
            got = self.standin.issued.get(session)
        if got is None:
            return "unknown session token"
        secret, _, exp = got
        if time.time() >= exp:
            return "expired"
        try:
            algo, rest = auth.split(" ", 1)
            parts = dict(p.strip().split("=", 1) for p in rest.split(","))
            key, date, region, service, _ = parts["Credential"].split("/")
        except ValueError:
            return "no Authorization"
        names = parts["SignedHeaders"].split(";")
        hdrs = "".join("%s:%s\n" % (n, ",".join(
            v.strip() for v in h.headers.get_all(n, []))) for n in names)
        path, _, query = h.path.partition("?")
        creq = "\n".join([h.command, path, query, hdrs,
                          parts["SignedHeaders"],
                          h.headers["x-amz-content-sha256"]])
        scope = "/".join([date, region, service, "aws4_request"])
        sts = "\n".join(["AWS4-HMAC-SHA256", h.headers["x-amz-date"], scope,
                         hashlib.sha256(creq.encode()).hexdigest()])
        want = hmac.new(_signing_key(secret, date, region, service),
                        sts.encode(), hashlib.sha256).hexdigest()
        if algo != "AWS4-HMAC-SHA256" or parts["Signature"] != want:
            return "signature does not match"
        return "ok"


@pytest.fixture
def standin():
    s = AwsStandIn(fixed=(S3rver.access_key, S3rver.secret_key))
    yield s
    s.stop()


def chain_env(tmp_path, **extra):
    """An environment with no static keys, no shared file and IMDS off,
    plus extra: the chain finds what extra gives it."""
    env = dict(NO_CREDS, HOME=str(tmp_path), AWS_EC2_METADATA_DISABLED="true",
               AWS_PROFILE="", AWS_SHARED_CREDENTIALS_FILE="",
               AWS_ROLE_ARN="", AWS_WEB_IDENTITY_TOKEN_FILE="",
               AWS_CONTAINER_CREDENTIALS_FULL_URI="",
               AWS_CONTAINER_CREDENTIALS_RELATIVE_URI="",
               AWS_ENDPOINT_URL="", AWS_ENDPOINT_URL_STS="")
    env.update(extra)
    return env


def web_identity_env(tmp_path, standin):
    tok = tmp_path / "web-token"
    tok.write_text(standin.web_token + "\n")
    return chain_env(tmp_path, AWS_ROLE_ARN=ROLE,
                     AWS_WEB_IDENTITY_TOKEN_FILE=str(tok),
                     AWS_ENDPOINT_URL_STS=standin.url + "/")


def container_env(tmp_path, standin):
    tok = tmp_path / "auth-token"
    tok.write_text(standin.auth_token)
    return chain_env(tmp_path, AWS_CONTAINER_CREDENTIALS_FULL_URI=(
        standin.url + "/container/creds"),
        AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=str(tok))


def imds_env(tmp_path, standin):
    return chain_env(tmp_path, AWS_EC2_METADATA_DISABLED="",
                     AWS_EC2_METADATA_SERVICE_ENDPOINT=standin.url)


SOURCES = {"web identity": web_identity_env, "container": container_env,
           "imds": imds_env}


def put_through(tm, key, data):
    token = lock(tm, "s3/%s/%s" % (BUCKET, key))
    return requests.put(url(tm, key), data=data,
                        headers={"Fencing-Token": token}, timeout=20)


def wait_signing(tm, standin, fetched=1):
    wait_until(lambda: standin.fetches() >= fetched, 10 * slow(),
               "credentials fetched")
    tm.wait_log("credentials from", "valid until", timeout=10)


def rotation_ini(refresh_ms=3000):
    """The example, its sets renewed refresh_ms before they end."""
    return EXAMPLE.read_text().replace(
        "sign_region = us-east-1",
        "sign_region = us-east-1\nsign_refresh_ms = %d" % refresh_ms)


@pytest.fixture
def temporary(tmp_path):
    """make(mode, source, lifetime, renew, refresh_ms): an AwsStandIn (in
    mode, its sets living lifetime seconds), a SigV4Checker behind
    tidemark, and tidemark taking its credentials from source (web
    identity), renewed refresh_ms (3 s) early when renew; all stopped at
    the end."""
    made = []

    def make(mode="ok", source=None, lifetime=6, renew=True,
             refresh_ms=3000):
        standin = AwsStandIn(lifetime=lifetime)
        standin.mode = mode
        made.append(standin)
        checker = SigV4Checker(standin)
        made.append(checker)
        tm = signing_tidemark(tmp_path / "tm", checker.url,
                              env=(source or web_identity_env)(tmp_path,
                                                               standin),
                              ini=rotation_ini(refresh_ms) if renew
                              else None)
        made.append(tm)
        return standin, checker, tm

    yield make
    try:
        if len(made) == 3:
            made[2].check_teardown()
    finally:
        for server in made[:2]:
            server.stop()


# ------------------------------------------------------------- each source


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_each_source_signs_requests_s3rver_accepts(s3rver, standin, tmp_path,
                                                   source):
    env = SOURCES[source](tmp_path, standin)
    tm = signing_tidemark(tmp_path / "tm", s3rver.url, env=env)
    try:
        wait_signing(tm, standin)
        key = unique(source.replace(" ", "-"))
        r = put_through(tm, key, b"signed by " + source.encode())
        assert r.status_code == 200, r.content
        assert direct_body(s3rver, key) == b"signed by " + source.encode()
        assert "secret" not in tm.log().lower()
        assert "session-1/" not in tm.log()
        assert standin.auth_token not in tm.log()
    finally:
        tm.check_teardown()


def test_the_chain_order_environment_first_then_web_identity(
        s3rver, standin, tmp_path):
    # Both a web identity and a container endpoint: the SDKs take the web
    # identity. Static keys in the environment beat both.
    env = web_identity_env(tmp_path, standin)
    env.update({k: v for k, v in container_env(tmp_path, standin).items()
                if k.startswith("AWS_CONTAINER")})
    tm = signing_tidemark(tmp_path / "tm", s3rver.url, env=env)
    try:
        wait_signing(tm, standin)
        assert [c for c in standin.calls if c[1] != "/"] == []
        assert tm.log_lines("credentials from web identity (STS)")
    finally:
        tm.check_teardown()
    env.update(AWS_ACCESS_KEY_ID=S3rver.access_key,
               AWS_SECRET_ACCESS_KEY=S3rver.secret_key)
    calls = len(standin.calls)
    tm = signing_tidemark(tmp_path / "tm2", s3rver.url, env=env)
    try:
        r = put_through(tm, unique("env-first"), b"x")
        assert r.status_code == 200, r.content
        assert len(standin.calls) == calls
        assert value(scrape(tm), EXPIRY, upstream="s3") == float("inf")
    finally:
        tm.check_teardown()


def test_shared_file_of_the_chain_is_read_again_when_it_changes(
        s3rver, tmp_path):
    aws = tmp_path / ".aws"
    aws.mkdir()
    creds = aws / "credentials"
    creds.write_text("[default]\naws_access_key_id = %s\n"
                     "aws_secret_access_key = wrong-%s\n"
                     % (S3rver.access_key, SECRET_MARK))
    creds.chmod(0o600)
    tm = signing_tidemark(tmp_path / "tm", s3rver.url, env=chain_env(tmp_path))
    try:
        r = put_through(tm, unique("file-old"), b"x")
        assert r.status_code == 403, r.content
        creds.write_text("[default]\naws_access_key_id = %s\n"
                         "aws_secret_access_key = %s\n\n"
                         % (S3rver.access_key, S3rver.secret_key))
        tm.wait_log("credentials read from the shared credentials file",
                    count=2)
        key = unique("file-new")
        r = put_through(tm, key, b"new keys")
        assert r.status_code == 200, r.content
        assert direct_body(s3rver, key) == b"new keys"
        # A broken rewrite keeps the last good keys.
        creds.write_text("[default]\naws_access_key_id = only-half\n")
        tm.wait_log("credentials from the shared credentials file",
                    "no aws_secret_access_key")
        r = put_through(tm, unique("file-kept"), b"x")
        assert r.status_code == 200, r.content
        assert SECRET_MARK not in tm.log()
    finally:
        tm.check_teardown()


def test_container_endpoint_checks_its_authorization_token(
        s3rver, standin, tmp_path):
    env = container_env(tmp_path, standin)
    standin.auth_token = "rotated-by-the-agent"  # the file holds the old one
    tm = signing_tidemark(tmp_path / "tm", s3rver.url, env=env)
    try:
        tm.wait_log("the container credentials endpoint", "answered 401")
        r = put_through(tm, unique("no-auth"), b"x")
        assert r.status_code == 503, r.content
        assert r.headers["Tidemark-Error"] == "credentials-unavailable"
        (tmp_path / "auth-token").write_text("rotated-by-the-agent")
        wait_signing(tm, standin)
        r = put_through(tm, unique("auth"), b"x")
        assert r.status_code == 200, r.content
        assert "rotated-by-the-agent" not in tm.log()
    finally:
        tm.check_teardown()


def test_the_web_identity_token_file_is_read_for_every_call(tmp_path,
                                                           temporary):
    # Kubernetes rotates the projected token; STS must get the new one.
    standin, checker, tm = temporary()
    wait_signing(tm, standin)
    standin.web_tokens = {"jwt-1", "jwt-2"}
    (tmp_path / "web-token").write_text("jwt-2")
    standin.web_tokens = {"jwt-2"}
    n = standin.fetches()
    wait_until(lambda: standin.fetches() >= n + 2, 15 * slow(),
               "two renewals with the new token")
    assert tm.log_lines("answered 400") == []
    assert put_through(tm, unique("jwt2"), b"x").status_code == 200
    assert "jwt-2" not in tm.log()


def test_a_reload_signs_on_with_the_set_it_had(s3rver, standin, tmp_path):
    # The endpoint is down when SIGHUP comes: the new configuration signs
    # with the set the old one had while it asks for its own.
    tm = signing_tidemark(tmp_path / "tm", s3rver.url,
                          env=web_identity_env(tmp_path, standin))
    try:
        wait_signing(tm, standin)
        standin.mode = "down"
        tm.proc.send_signal(signal.SIGHUP)
        tm.wait_log("reloaded:")
        key = unique("reloaded")
        r = put_through(tm, key, b"after the reload")
        assert r.status_code == 200, r.content
        assert direct_body(s3rver, key) == b"after the reload"
        tm.wait_log("answered 503", "the current ones serve until")
    finally:
        tm.check_teardown()


# -------------------------------------------------- expiry and rotation


def test_rotation_under_load_signs_every_request_with_a_live_set(temporary):
    """Sets live 6 s and are renewed 3 s before they end; the PUTs of 8
    connections for 8 s, across the renewals, all succeed, and the
    checker saw only right signatures of unexpired sets."""
    standin, checker, tm = temporary()
    wait_signing(tm, standin)
    token = lock(tm, "s3/%s/load" % BUCKET)
    deadline = time.monotonic() + 8

    def writer(i):
        s = requests.Session()
        codes = []
        n = 0
        while time.monotonic() < deadline:
            n += 1
            r = s.put(url(tm, "load"), data=b"x%d" % n,
                      headers={"Fencing-Token": token}, timeout=20)
            codes.append(r.status_code)
        return codes

    with ThreadPoolExecutor(8) as pool:
        codes = sum(pool.map(writer, range(8)), [])
    assert len(codes) >= 100, len(codes)
    assert set(codes) == {200}, [c for c in codes if c != 200][:5]
    assert set(checker.verdicts) == {"ok"}
    assert standin.fetches() >= 3  # renewed while the load ran
    assert SECRET_MARK not in tm.log()


def test_endpoint_down_at_start_then_up_then_down_past_expiry(temporary):
    standin, checker, tm = temporary(mode="down")
    tm.wait_log("web identity (STS)", "answered 503", "requests get 503")
    r = put_through(tm, unique("down-at-start"), b"x")
    assert r.status_code == 503, r.content
    body = r.json()
    assert body["type"] == "urn:tidemark:credentials-unavailable"
    assert "no credentials have come yet" in body["detail"]
    assert checker.verdicts == []
    assert value(scrape(tm), EXPIRY, upstream="s3") == 0
    standin.mode = "ok"
    wait_signing(tm, standin)
    assert put_through(tm, unique("up"), b"x").status_code == 200
    exp = value(scrape(tm), EXPIRY, upstream="s3")
    assert time.time() < exp <= time.time() + 6
    # Down at the renewal: the set serves until its end, then 503.
    standin.mode = "down"
    tm.wait_log("the current ones serve until")
    wait_until(lambda: put_through(tm, unique("exp"), b"x").status_code
               == 503, 10 * slow(), "503 once the set expired")
    r = put_through(tm, unique("expired"), b"x")
    assert "expired" in r.json()["detail"]
    assert value(scrape(tm), EXPIRY, upstream="s3") == 0
    assert set(checker.verdicts) == {"ok"}
    assert len(tm.log_lines("answered 503")) == 2  # once each time


@pytest.mark.parametrize("mode,source,why", [
    ("malformed", web_identity_env,
     "the Credentials lack a field, or have one twice"),
    ("huge", container_env, "the answer is too long"),
])
def test_a_bad_answer_keeps_nothing_and_says_why(temporary, mode, source,
                                                 why):
    # A malformed STS answer, a container answer over 64 KiB.
    standin, checker, tm = temporary(mode=mode, source=source,
                                     lifetime=3600, renew=False)
    tm.wait_log("upstream s3: credentials from", why)
    r = put_through(tm, unique(mode), b"x")
    assert r.status_code == 503, r.content
    assert checker.verdicts == []
    assert tm.alive()


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_an_answer_that_never_ends_is_dropped(temporary, source):
    """A 200 whose chunk-size line never ends, from each source's
    endpoint: the fetch fails with why once the bytes waiting unread pass
    what a whole answer (64 KiB) could be, the connection closes, and
    nothing is kept."""
    standin, checker, tm = temporary(mode="endless", source=SOURCES[source],
                                     lifetime=3600, renew=False)
    tm.wait_log("upstream s3: credentials from",
                "the answer is too long (a line without an end)")
    assert standin.sent < 16 << 20, standin.sent
    r = put_through(tm, unique("endless"), b"x")
    assert r.status_code == 503, r.content
    assert checker.verdicts == []
    assert tm.alive()


def test_an_answer_that_trickles_ends_at_the_deadline(temporary):
    """A 200 whose body comes a byte every 100 ms: each byte starts
    evhttp's own timeout again, so the fetch's deadline (5 s, lookup and
    answer together) is what ends it, with why."""
    standin, checker, tm = temporary(mode="trickle", lifetime=3600,
                                     renew=False)
    tm.wait_log("upstream s3: credentials from",
                "no whole answer within 5000 ms", timeout=15)
    r = put_through(tm, unique("trickle"), b"x")
    assert r.status_code == 503, r.content
    assert checker.verdicts == []


def test_no_source_at_all_is_a_503_that_says_so(tmp_path):
    tm = signing_tidemark(tmp_path / "tm", "http://127.0.0.1:9",
                          env=chain_env(tmp_path))
    try:
        tm.wait_log("sign: no credentials", "IMDS is disabled")
        r = put_through(tm, unique("none"), b"x")
        assert r.status_code == 503, r.content
        assert "found no source" in r.json()["detail"]
    finally:
        tm.check_teardown()


def test_sts_over_https_is_checked_against_aws_ca_bundle(s3rver, pki,
                                                         tmp_path):
    standin = AwsStandIn(fixed=(S3rver.access_key, S3rver.secret_key),
                         tls=pki["good"])
    env = web_identity_env(tmp_path, standin)
    try:
        env["AWS_CA_BUNDLE"] = str(pki["other_ca"])
        tm = signing_tidemark(tmp_path / "tm", s3rver.url, env=env)
        try:
            tm.wait_log("web identity (STS)", "certificate refused")
            assert put_through(tm, unique("tls-no"), b"x").status_code == 503
            assert standin.fetches() == 0
        finally:
            tm.check_teardown()
        env["AWS_CA_BUNDLE"] = str(pki["ca"])
        tm = signing_tidemark(tmp_path / "tm2", s3rver.url, env=env)
        try:
            wait_signing(tm, standin)
            r = put_through(tm, unique("tls"), b"x")
            assert r.status_code == 200, r.content
        finally:
            tm.check_teardown()
    finally:
        standin.stop()


# ------------------------------------------------ STS reached by its name


STS_NAME = "sts.tidemark.test"


def named_sts(dns):
    """A source: web identity, STS reached as http://STS_NAME:PORT/, a
    name only dns (tidemark's [proxy] resolver) knows."""
    def env(tmp_path, standin):
        dns.set(STS_NAME, ["127.0.0.1"])
        e = web_identity_env(tmp_path, standin)
        e.update(AWS_ENDPOINT_URL_STS="http://%s:%d/" % (STS_NAME,
                                                         standin.port),
                 TIDEMARK_PROXY_RESOLVER=dns.addr)
        return e
    return env


def test_sts_reached_by_a_name_the_resolver_serves_and_renewed(temporary,
                                                                dns):
    standin, checker, tm = temporary(source=named_sts(dns))
    wait_signing(tm, standin, fetched=2)  # the first set, then a renewal
    assert put_through(tm, unique("named"), b"x").status_code == 200
    assert set(checker.verdicts) == {"ok"}
    assert not tm.log_lines("cannot resolve")


def timed_puts(tm, token, seconds):
    """PUTs one after the other for seconds: (status, seconds taken)."""
    s = requests.Session()
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        r = s.put(url(tm, "quiet"), data=b"x",
                  headers={"Fencing-Token": token}, timeout=20)
        out.append((r.status_code, time.monotonic() - t0))
    return out


def hang_the_renewal(tm, standin, dns):
    """Once the first set came, the resolver goes silent; returns when
    the renewal's lookup has been sent to it (and hangs)."""
    wait_signing(tm, standin)
    dns.silent = True
    asked = dns.queries
    wait_until(lambda: dns.queries > asked, 15 * slow(),
               "the renewal's lookup")


def test_a_silent_resolver_at_a_renewal_stalls_no_request(temporary, dns):
    """Sets live 16 s, renewed after 8 s. The resolver stops answering:
    the renewal's lookup hangs for seconds (evdns: 2 tries of 2 s each),
    and meanwhile the requests tidemark serves answer promptly, each well
    under 1 s over the 2 s measured while it hangs. The set in hand signs
    them; the failed lookup is logged and retried, and once the resolver
    answers again the renewal gets a new set."""
    standin, checker, tm = temporary(source=named_sts(dns), lifetime=16,
                                     refresh_ms=10000)
    token = lock(tm, "s3/%s/quiet" % BUCKET)
    hang_the_renewal(tm, standin, dns)
    puts = timed_puts(tm, token, 2.0)
    assert not tm.log_lines("cannot resolve")  # still hanging after 2 s
    assert len(puts) >= 10, puts
    assert {code for code, _ in puts} == {200}, puts
    assert max(t for _, t in puts) < 1.0, puts
    tm.wait_log("web identity (STS)", "cannot resolve %s" % STS_NAME,
                "the current ones serve until", timeout=10)
    dns.silent = False
    tm.wait_log("valid until", "(the source answers again)", timeout=10)
    assert put_through(tm, unique("renewed"), b"x").status_code == 200
    assert set(checker.verdicts) == {"ok"}


def test_a_reload_and_a_stop_while_the_lookup_hangs(temporary, dns):
    """A SIGHUP while the renewal's lookup hangs: the new configuration
    signs with the set it inherits, promptly, and starts its own lookup;
    SIGTERM while that one hangs stops tidemark cleanly (exit 0, and
    nothing from the sanitizers under ASan)."""
    standin, checker, tm = temporary(source=named_sts(dns), lifetime=16,
                                     refresh_ms=10000)
    token = lock(tm, "s3/%s/quiet" % BUCKET)
    hang_the_renewal(tm, standin, dns)
    asked = dns.queries
    tm.proc.send_signal(signal.SIGHUP)
    tm.wait_log("reloaded:")
    wait_until(lambda: dns.queries > asked, 10 * slow(),
               "the new configuration's lookup")
    puts = timed_puts(tm, token, 1.0)
    assert {code for code, _ in puts} == {200}, puts
    assert max(t for _, t in puts) < 1.0, puts
    assert not tm.log_lines("cannot resolve")
    assert set(checker.verdicts) == {"ok"}


# ---------------------------------------------------------------- --check


def test_check_says_the_chain_is_read_at_start_and_refuses_a_far_uri(
        tmp_path):
    ini = tmp_path / "t.ini"
    ini.write_text(EXAMPLE.read_text())
    rc, lines = run_check(ini, env=chain_env(tmp_path))
    assert rc == 0, lines
    assert any("[upstream s3]: sign: credentials from the chain at start"
               in ln for ln in lines), lines
    rc, lines = run_check(ini, env=chain_env(
        tmp_path,
        AWS_CONTAINER_CREDENTIALS_FULL_URI="http://10.0.0.1/creds"))
    assert rc == 1
    assert any("AWS_CONTAINER_CREDENTIALS_FULL_URI is http:// to a host "
               "other than loopback" in ln for ln in lines), lines
