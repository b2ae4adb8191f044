"""sign = aws-sigv4: tidemark signs what it forwards, so applications
hold no cloud credentials. conf/examples/s3-signed.ini runs as it is in
front of s3rver (which checks every signature: the Host, each signed
header, the date), with clients that send no credentials at all: curl,
Python requests, boto3 with signature_version=UNSIGNED, and awscli with
--no-sign-request where it is installed. A wrong secret gets the
server's own 403 SignatureDoesNotMatch; an Authorization the client sent
is replaced; the credentials never reach a log line or --check."""

import hashlib
import json
import os
import shutil
import subprocess
import urllib.parse
import xml.etree.ElementTree as ET

import boto3
import botocore
import pytest
import requests
from botocore.config import Config
from botocore.exceptions import ClientError

from common import BIN, REPO, slow
from daemon import Tidemark, child_env, run_check
from servers import S3rver

EXAMPLE = REPO / "conf" / "examples" / "s3-signed.ini"
BUCKET = S3rver.bucket
# Empty: unset (the harness's own AWS_* never reach tidemark).
NO_CREDS = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
            "AWS_SESSION_TOKEN": ""}
CREDS = dict(NO_CREDS, AWS_ACCESS_KEY_ID=S3rver.access_key,
             AWS_SECRET_ACCESS_KEY=S3rver.secret_key)
_n = [0]


def unique(prefix):
    _n[0] += 1
    return "%s-%d-%d" % (prefix, os.getpid(), _n[0])


def signing_tidemark(tmp, url, env=None, ini=None):
    """conf/examples/s3-signed.ini (or ini) in front of url, addresses
    and credentials from the environment."""
    tmp.mkdir(parents=True, exist_ok=True)
    tm = Tidemark(tmp, ini=ini if ini is not None else EXAMPLE.read_text())
    tm.env.update({
        "TIDEMARK_PROXY_LISTEN": "127.0.0.1:%d" % tm.port,
        "TIDEMARK_ADMIN_LISTEN": "127.0.0.1:%d" % tm.admin_port,
        "TIDEMARK_UPSTREAM_S3_URL": url,
    })
    tm.env.update(NO_CREDS)
    tm.env.update(env if env is not None else CREDS)
    tm.start()
    return tm


@pytest.fixture(scope="module")
def s3rver():
    why = S3rver.available()
    if why is not None:
        pytest.fail("s3rver: %s" % why, pytrace=False)
    s = S3rver()
    try:
        s.start()
        yield s
    finally:
        s.destroy()


@pytest.fixture(scope="module")
def signed(s3rver, tmp_path_factory):
    tm = signing_tidemark(tmp_path_factory.mktemp("tm-signed"), s3rver.url)
    try:
        yield tm
    finally:
        tm.check_teardown()


def url(tm, key=""):
    return "http://127.0.0.1:%d/%s/%s" % (tm.port, BUCKET,
                                         urllib.parse.quote(key))


def lock(tm, res):
    st, _, body = tm.admin("POST", "/v1/locks/%s?ttl_ms=60000" %
                           urllib.parse.quote(res, safe="/"))
    assert st == 201, (st, body)
    return json.loads(body)["token"]


def direct_body(s3rver, key):
    """The object as the server has it, read straight from it with the
    test's own (boto3-signed) client; None when it has none."""
    c = boto3.client("s3", endpoint_url=s3rver.url, region_name="us-east-1",
                     aws_access_key_id=S3rver.access_key,
                     aws_secret_access_key=S3rver.secret_key,
                     config=Config(signature_version="s3v4",
                                   s3={"addressing_style": "path"}))
    try:
        return c.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    except ClientError as e:
        if e.response["Error"]["Code"] == "NoSuchKey":
            return None
        raise


def s3_error_code(body):
    return ET.fromstring(body).findtext("Code")


def curl(*args, data=None):
    p = subprocess.run(["curl", "-sS", "-o", "-", "-w", "\n%{http_code}",
                        "--max-time", "20"] + list(args), input=data,
                       capture_output=True, timeout=30 * slow())
    assert p.returncode == 0, p.stderr
    body, _, code = p.stdout.rpartition(b"\n")
    return int(code), body


# ------------------------------------------------------------- clients


def test_example_passes_check_with_credentials_from_the_environment():
    rc, lines = run_check(EXAMPLE, env=CREDS)
    assert (rc, lines) == (0, ["%s: ok" % EXAMPLE])


@pytest.mark.parametrize("key", ["plain", "with space (and) $ + ~ \u00e9"])
def test_curl_without_credentials_puts_gets_deletes(signed, s3rver, key):
    key = unique("curl") + "/" + key
    token = lock(signed, "s3/%s/%s" % (BUCKET, key))
    st, body = curl("-X", "PUT", "-H", "Fencing-Token: " + token,
                    "--data-binary", "@-", url(signed, key), data=b"by curl")
    assert st == 200, body
    assert direct_body(s3rver, key) == b"by curl"
    assert curl(url(signed, key)) == (200, b"by curl")
    st, body = curl("-X", "DELETE", "-H", "Fencing-Token: " + token,
                    url(signed, key))
    assert st == 204, body
    assert direct_body(s3rver, key) is None


def test_requests_without_credentials_puts_gets_deletes(signed, s3rver):
    key = unique("requests")
    token = lock(signed, "s3/%s/%s" % (BUCKET, key))
    h = {"Fencing-Token": token, "Content-Type": "text/plain",
         "x-amz-meta-origin": "requests with spaces"}
    r = requests.put(url(signed, key), data=b"by requests", headers=h,
                     timeout=20)
    assert r.status_code == 200, r.content
    r = requests.get(url(signed, key), timeout=20)
    assert (r.status_code, r.content) == (200, b"by requests")
    assert r.headers["x-amz-meta-origin"] == "requests with spaces"
    # A listing: a query string, signed sorted.
    r = requests.get("http://127.0.0.1:%d/%s" % (signed.port, BUCKET),
                     params={"prefix": key, "list-type": "2"}, timeout=20)
    assert r.status_code == 200, r.content
    assert key in r.text
    r = requests.delete(url(signed, key), headers={"Fencing-Token": token},
                        timeout=20)
    assert r.status_code == 204, r.content
    assert direct_body(s3rver, key) is None


def unsigned_client(tm, token=None):
    """boto3 with no credentials at all (botocore.UNSIGNED); the token
    is added to each request before it is sent."""
    c = boto3.client("s3", endpoint_url="http://127.0.0.1:%d" % tm.port,
                     region_name="us-east-1",
                     config=Config(signature_version=botocore.UNSIGNED,
                                   s3={"addressing_style": "path"},
                                   retries={"max_attempts": 1}))
    if token is not None:
        def add(request, **kw):
            request.headers["Fencing-Token"] = token
        c.meta.events.register("before-send.s3", add)
    return c


def test_boto3_unsigned_client_writes_through_tidemark(signed, s3rver):
    key = unique("boto3") + "/a+b c"
    token = lock(signed, "s3/%s/%s" % (BUCKET, key))
    c = unsigned_client(signed, token)
    c.put_object(Bucket=BUCKET, Key=key, Body=b"by boto3",
                 ContentType="application/octet-stream",
                 Metadata={"k": "v"})
    assert direct_body(s3rver, key) == b"by boto3"
    got = unsigned_client(signed).get_object(Bucket=BUCKET, Key=key)
    assert got["Body"].read() == b"by boto3"
    assert got["Metadata"] == {"k": "v"}
    # Multipart: ?uploads, then ?partNumber=1&uploadId=..., then POST
    # ?uploadId=...: query strings tidemark signs.
    up = c.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    part = c.upload_part(Bucket=BUCKET, Key=key, UploadId=up, PartNumber=1,
                         Body=b"in one part")
    c.complete_multipart_upload(
        Bucket=BUCKET, Key=key, UploadId=up,
        MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]})
    assert direct_body(s3rver, key) == b"in one part"
    c.delete_object(Bucket=BUCKET, Key=key)
    assert direct_body(s3rver, key) is None


def test_boto3_unsigned_multi_object_delete(signed, s3rver):
    """delete_objects with no credentials: tidemark reads the body to
    fence each key and signs the request, s3rver takes the signature and
    deletes both keys."""
    keys = [unique("batch") + "/a+b c", unique("batch") + "/\u00e9"]
    token = lock(signed, "s3/%s/%s" % (BUCKET, keys[0]))
    c = unsigned_client(signed, token)
    for k in keys:
        c.put_object(Bucket=BUCKET, Key=k, Body=b"to go")
    r = c.delete_objects(Bucket=BUCKET,
                         Delete={"Objects": [{"Key": k} for k in keys]})
    assert not r.get("Errors") and len(r["Deleted"]) == 2, r
    assert [direct_body(s3rver, k) for k in keys] == [None, None]


def test_a_multi_object_delete_is_signed_with_its_bodys_hash(
        tidemark, upstream):
    """Whatever payload hash the client claimed: tidemark read the
    body, so it signs what it forwards."""
    tm = tidemark({"upstream default": {"sign": "aws-sigv4",
                                        "sign_region": "us-east-1"},
                   "route keys": {"path": "/bucket/{key*}",
                                  "resource": "bucket/{key*}",
                                  "profile": "s3"}}, env=CREDS)
    body = b"<Delete><Object><Key>k</Key></Object></Delete>"
    r = tm.request("POST", "/bucket?delete", token=5, body=body, headers=[
        ("X-Amz-Content-Sha256", "0" * 64)])
    assert r.status == 200, r
    got = upstream.requests[-1]
    assert got.body == body
    assert got.header_all("x-amz-content-sha256") == [
        hashlib.sha256(body).hexdigest()]
    assert "x-amz-content-sha256" in got.header("Authorization")


def test_awscli_without_credentials_reads_through_tidemark(signed, s3rver,
                                                           tmp_path):
    aws = shutil.which("aws")
    assert aws is not None, \
        "the AWS CLI is not installed (Debian package awscli; tests/deps.sh)"
    key = unique("awscli")
    token = lock(signed, "s3/%s/%s" % (BUCKET, key))
    unsigned_client(signed, token).put_object(Bucket=BUCKET, Key=key,
                                              Body=b"for awscli")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_CONFIG_FILE": os.devnull,
                "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "AWS_DEFAULT_REGION": "us-east-1"})
    out = tmp_path / "got"
    p = subprocess.run([aws, "--no-sign-request", "--endpoint-url",
                        "http://127.0.0.1:%d" % signed.port, "s3api",
                        "get-object", "--bucket", BUCKET, "--key", key,
                        str(out)], capture_output=True, env=env,
                       timeout=60 * slow())
    assert p.returncode == 0, p.stderr
    assert out.read_bytes() == b"for awscli"


def test_a_client_authorization_is_replaced(signed, s3rver):
    """A client that signs for itself (here with a key the server does
    not know) gets its Authorization replaced by tidemark's."""
    key = unique("replaced")
    token = lock(signed, "s3/%s/%s" % (BUCKET, key))
    c = boto3.client("s3", endpoint_url="http://127.0.0.1:%d" % signed.port,
                     region_name="us-east-1", aws_access_key_id="NOBODY",
                     aws_secret_access_key="not-the-secret",
                     config=Config(signature_version="s3v4",
                                   s3={"addressing_style": "path"},
                                   retries={"max_attempts": 1}))
    c.meta.events.register(
        "before-send.s3",
        lambda request, **kw: request.headers.__setitem__("Fencing-Token",
                                                          token))
    c.put_object(Bucket=BUCKET, Key=key, Body=b"replaced")
    assert direct_body(s3rver, key) == b"replaced"


# ------------------------------------------------------------- refusals


def test_wrong_secret_gets_the_servers_403(s3rver, tmp_path):
    tm = signing_tidemark(tmp_path / "tm", s3rver.url,
                          env=dict(CREDS, AWS_SECRET_ACCESS_KEY="wrong-secret"))
    try:
        key = unique("wrong")
        token = lock(tm, "s3/%s/%s" % (BUCKET, key))
        r = requests.put(url(tm, key), data=b"x",
                         headers={"Fencing-Token": token}, timeout=20)
        assert r.status_code == 403, r.content
        assert s3_error_code(r.content) == "SignatureDoesNotMatch"
        assert "tidemark-error" not in r.headers
        assert direct_body(s3rver, key) is None
        assert "wrong-secret" not in tm.log()
    finally:
        tm.check_teardown()


def test_credentials_file_and_profile(s3rver, tmp_path):
    creds = tmp_path / "aws-credentials"
    creds.write_text("[default]\naws_access_key_id = NOBODY\n"
                     "aws_secret_access_key = nothing\n\n"
                     "[s3rver]\naws_access_key_id = %s\n"
                     "aws_secret_access_key = %s\n"
                     % (S3rver.access_key, S3rver.secret_key))
    creds.chmod(0o600)
    ini = EXAMPLE.read_text().replace(
        "; sign_credentials_file = /etc/tidemark/aws-credentials   ; else "
        "AWS_* env",
        "sign_credentials_file = %s\nsign_profile = s3rver" % creds)
    assert "sign_profile = s3rver" in ini
    tm = signing_tidemark(tmp_path / "tm", s3rver.url, env={}, ini=ini)
    try:
        key = unique("file")
        token = lock(tm, "s3/%s/%s" % (BUCKET, key))
        r = requests.put(url(tm, key), data=b"from the file",
                         headers={"Fencing-Token": token}, timeout=20)
        assert r.status_code == 200, r.content
        assert direct_body(s3rver, key) == b"from the file"
        assert S3rver.secret_key not in tm.log()
    finally:
        tm.check_teardown()


def test_check_refuses_missing_or_exposed_credentials(tmp_path):
    # sign_credentials = env: the keys must be in the environment (the
    # default, chain, looks for them at start: test_sign_chain.py).
    ini = tmp_path / "t.ini"
    text = EXAMPLE.read_text().replace(
        "sign_service = s3", "sign_service = s3\nsign_credentials = env")
    ini.write_text(text)
    rc, lines = run_check(ini, env=NO_CREDS)
    assert rc == 1
    assert any("sign = aws-sigv4 needs credentials" in ln for ln in lines), \
        lines
    creds = tmp_path / "creds"
    creds.write_text("[default]\naws_access_key_id = AKID\n"
                     "aws_secret_access_key = very-secret-value\n")
    creds.chmod(0o644)
    ini.write_text(text.replace(
        "; sign_credentials_file = /etc/tidemark/aws-credentials",
        "sign_credentials_file = %s" % creds))
    rc, lines = run_check(ini, env=NO_CREDS)
    assert rc == 1
    assert any("readable or writable by others" in ln for ln in lines), lines
    creds.chmod(0o600)
    ini.write_text(ini.read_text().replace("sign_region = us-east-1",
                                           "sign_region ="))
    rc, lines = run_check(ini, env=NO_CREDS)
    assert rc == 1
    assert any("needs sign_region" in ln for ln in lines), lines
    assert not any("very-secret-value" in ln for ln in lines)


# ------------------------------------------- what the upstream receives


def test_the_upstream_gets_a_signed_head_without_fencing_headers(
        tidemark, upstream):
    tm = tidemark({"upstream default": {"sign": "aws-sigv4",
                                        "sign_region": "eu-west-1",
                                        "strip_header": "X-Drop"}},
                  env=dict(CREDS, AWS_SESSION_TOKEN="session/token=="))
    r = tm.request("PUT", "/v1/documents/s?b=2&a=1", token=5,
                   headers=[("Authorization", "Bearer client"),
                            ("X-Amz-Date", "19700101T000000Z"),
                            ("x_amz_security_token", "client"),
                            ("X-Amz-Meta-A", "1")], body=b"x")
    assert r.status == 200, r
    got = upstream.requests[-1]
    auth = got.header_all("Authorization")
    assert len(auth) == 1 and auth[0].startswith(
        "AWS4-HMAC-SHA256 Credential=%s/" % S3rver.access_key), auth
    assert "/eu-west-1/s3/aws4_request, SignedHeaders=host;x-amz-content-"\
        "sha256;x-amz-date;x-amz-meta-a;x-amz-security-token, Signature=" \
        in auth[0], auth
    assert got.header("x-amz-content-sha256") == "UNSIGNED-PAYLOAD"
    assert got.header_all("x-amz-security-token") == ["session/token=="]
    assert len(got.header_all("x-amz-date")) == 1
    assert got.header("x-amz-date") != "19700101T000000Z"
    assert got.header("x_amz_security_token") is None
    assert got.header("Fencing-Token") is None
    assert S3rver.secret_key not in tm.log()


def test_a_long_streaming_marker_is_forwarded_and_signed_whole(
        tidemark, upstream):
    # The client's STREAMING-* payload marker goes on as it came: cut to
    # 79 bytes, the upstream was told (and the signature covered) another.
    tm = tidemark({"upstream default": {"sign": "aws-sigv4",
                                        "sign_region": "eu-west-1"}},
                  env=CREDS)
    marker = "STREAMING-" + "A" * 300
    r = tm.request("PUT", "/v1/documents/long-marker", token=5,
                   headers=[("X-Amz-Content-Sha256", marker)], body=b"x")
    assert r.status == 200, r
    got = upstream.requests[-1]
    assert got.header_all("x-amz-content-sha256") == [marker]
    assert "x-amz-content-sha256" in got.header("Authorization")


def test_print_shows_the_signing_keys_and_never_the_credentials(tmp_path):
    """tidemark -T prints the configuration in effect: the sign keys,
    and neither the key id nor the secret, from the environment or a
    credentials file."""
    env = child_env(dict(CREDS, AWS_SECRET_ACCESS_KEY="env-secret-value",
                         AWS_SESSION_TOKEN="env-session-value"))
    p = subprocess.run([str(BIN), "-c", str(EXAMPLE), "-T"], env=env,
                       capture_output=True, timeout=20 * slow())
    out = p.stdout.decode() + p.stderr.decode()
    assert p.returncode == 0, out
    assert "sign = aws-sigv4" in out and "sign_region = us-east-1" in out
    for secret in ("env-secret-value", "env-session-value"):
        assert secret not in out, out
