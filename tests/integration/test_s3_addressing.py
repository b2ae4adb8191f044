"""One S3 object, one mark, whatever the addressing; a multipart upload
lands only where it was fenced. conf/examples/s3.ini (host = preserve:
the client's Host reaches the server) in front of s3rver, which reads a
bucket from a Host below s3.amazonaws.com (virtual-hosted addressing) and
completes an upload into the key it was created for, whatever key the
completion's path names.

- A stale PUT, DELETE or multipart completion sent as `PUT /key` with
  `Host: <bucket>.s3.amazonaws.com` is fenced as the key s3rver writes
  (409), not as a bucket named after the key.
- A Host that could name a bucket (CNAME style) but whose bucket no one
  can tell is refused (400), as is a form upload through a virtual host;
  a multi-object delete through one is fenced at each key of the bucket
  the Host names.
- An upload's parts and completion are fenced by the key it was created
  for: a stale completion through another key's path is refused, and so
  is an upload id tidemark did not see created.
"""

import io
import json
import urllib.parse

import pytest
from boto3.s3.transfer import TransferConfig

from daemon import Tidemark
from test_backends import (BUCKET, EXAMPLES, Fenced, client_error,  # noqa
                           curl, s3, s3_body, s3_client, s3_setup,
                           s3_stale_upload, unique)

VHOST = "%s.s3.amazonaws.com" % BUCKET


def vhost(s3, method, path, token=None, host=VHOST, body=b"", headers=()):
    """An unsigned request to tidemark with another Host (s3rver takes
    anonymous requests): (status, headers, body)."""
    args = ["-X", method, "-H", "Host: " + host, "--data-binary", "@-"]
    if token is not None:
        args += ["-H", "Fencing-Token: %s" % token]
    for h in headers:
        args += ["-H", h]
    return curl(*args, s3.url + path, data=body)


def complete_xml(parts):
    return ("<CompleteMultipartUpload>%s</CompleteMultipartUpload>" % "".join(
        "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>" % (n, e)
        for n, e in parts)).encode()


def assert_problem(st, h, out, status, kind):
    assert st == status, (st, h, out)
    assert h["content-type"] == "application/problem+json", h
    assert h["tidemark-error"] == kind, h
    return json.loads(out)


def stale_upload(s3, prefix):
    """s3_stale_upload: (key, resource, A's token, B's token, upload id,
    [(1, part 1's ETag)])."""
    key, res, a, _, b, up, etag = s3_stale_upload(s3, prefix)
    return key, res, a, b, up, [(1, etag)]


# ------------------------------------------------------ virtual-hosted


def test_a_virtual_hosted_write_is_fenced_as_its_key(s3):
    """The premise: s3rver stores PUT /KEY with Host BUCKET.s3... as
    BUCKET/KEY. With B's token it is written; with A's it is refused."""
    key, res, a, b = s3_setup(s3, "vh-put")
    st, h, out = vhost(s3, "PUT", "/" + key, token=a, body=b"stale, vhost")
    doc = assert_problem(st, h, out, 409, "stale-token")
    assert doc["resource"] == res, doc
    assert s3_body(s3, key) == b"v2 from B"
    st, h, out = vhost(s3, "PUT", "/" + key, token=b, body=b"v3 by vhost")
    assert st == 200, (st, h, out)
    assert h["fencing-high-water"] == b, h
    assert s3_body(s3, key) == b"v3 by vhost"
    s3.unlock(res, b)


@pytest.mark.parametrize("host", [VHOST, "%s.s3.us-east-1.amazonaws.com" %
                                  BUCKET, "%s.s3-us-east-1.amazonaws.com:80" %
                                  BUCKET])
def test_a_stale_virtual_hosted_delete_is_refused(s3, host):
    key, res, a, b = s3_setup(s3, "vh-delete")
    st, h, out = vhost(s3, "DELETE", "/" + key, token=a, host=host)
    doc = assert_problem(st, h, out, 409, "stale-token")
    assert doc["resource"] == res, doc
    assert s3_body(s3, key) == b"v2 from B"


def test_a_stale_virtual_hosted_completion_is_refused(s3):
    key, res, a, b, up, parts = stale_upload(s3, "vh-complete")
    st, h, out = vhost(s3, "POST", "/%s?uploadId=%s" % (
        key, urllib.parse.quote(up)), token=a, body=complete_xml(parts))
    doc = assert_problem(st, h, out, 409, "stale-token")
    assert doc["resource"] == res, doc
    assert s3_body(s3, key) == b"v2 from B"


def test_multi_object_delete_and_form_upload_through_a_virtual_host(s3):
    """The bucket's path through a virtual host is "/": it is the bucket.
    A multi-object delete there is fenced at each key in that bucket
    (stale: 409, nothing deleted; current: deleted); a form upload,
    which names its key in the form, is refused."""
    key, res, a, b = s3_setup(s3, "vh-elsewhere")
    body = ("<Delete><Object><Key>%s</Key></Object></Delete>" % key).encode()
    st, h, out = vhost(s3, "POST", "/?delete", token=a, body=body)
    doc = assert_problem(st, h, out, 409, "stale-token")
    assert doc["resource"] == res, doc
    st, h, out = curl("-H", "Host: " + VHOST, "-H", "Fencing-Token: " + a,
                      "-F", "key=" + key, "-F", "file=@-", s3.url + "/",
                      data=b"stale, by form")
    doc = assert_problem(st, h, out, 400, "bad-request")
    assert "form upload" in doc["detail"], doc
    assert s3_body(s3, key) == b"v2 from B"
    st, h, out = vhost(s3, "POST", "/?delete", token=b, body=body)
    assert st == 200, (st, h, out)
    assert s3_body(s3, key) is None
    s3.unlock(res, b)


# ------------------------------------------------------------ CNAME


@pytest.mark.parametrize("host", ["files.example.com", "b.tidemark",
                                  "Tidemark.s3.amazonaws.com",
                                  "%s.s3.amazonaws.com." % BUCKET])
def test_a_host_that_could_name_a_bucket_is_refused(s3, host):
    """AWS reads such a Host as the bucket (CNAME style), s3rver here as
    no bucket (path-style): tidemark cannot tell which, so refuses it,
    fresh token or stale, reads too."""
    key, res, a, b = s3_setup(s3, "cname")
    for method, token in (("PUT", a), ("DELETE", a), ("PUT", b),
                          ("GET", None)):
        st, h, out = vhost(s3, method, "/%s/%s" % (BUCKET, key), token=token,
                           host=host, body=b"x" if method == "PUT" else b"")
        doc = assert_problem(st, h, out, 400, "bad-request")
        assert "Host" in doc["detail"], doc
    assert s3_body(s3, key) == b"v2 from B"


def test_a_stale_completion_through_a_cname_host_is_refused(s3):
    key, res, a, b, up, parts = stale_upload(s3, "cname-complete")
    st, h, out = vhost(s3, "POST", "/%s/%s?uploadId=%s" % (
        BUCKET, key, urllib.parse.quote(up)), token=a,
        host="files.example.com", body=complete_xml(parts))
    assert_problem(st, h, out, 400, "bad-request")
    assert s3_body(s3, key) == b"v2 from B"


def test_path_style_through_an_address_or_the_servers_name_still_works(s3):
    """s3.ini names "tidemark" as the server's own (=tidemark)."""
    key, res, a, b = s3_setup(s3, "path")
    for host in ("127.0.0.1", "localhost", "s3.amazonaws.com",
                 "tidemark:7070"):
        st, h, out = vhost(s3, "PUT", "/%s/%s" % (BUCKET, key), token=a,
                           host=host, body=b"stale")
        assert_problem(st, h, out, 409, "stale-token")
    st, h, out = vhost(s3, "PUT", "/%s/%s" % (BUCKET, key), token=b,
                       host="s3.amazonaws.com", body=b"v3 path-style")
    assert st == 200, (st, h, out)
    assert s3_body(s3, key) == b"v3 path-style"


# ----------------------------------------------------------- uploads


@pytest.mark.parametrize("param", ["uploadId", "%75ploadId"])
def test_a_stale_completion_through_another_keys_path_is_refused(s3, param):
    """s3rver completes an upload into the key it was created for: A's
    completion at /BUCKET/decoy (whose mark A's token passes) would
    overwrite B's object. It is refused as an upload of another key."""
    key, res, a, b, up, parts = stale_upload(s3, "decoy")
    decoy = key + "-decoy"
    st, h, out = curl("-X", "POST", "-H", "Fencing-Token: " + a,
                      "--data-binary", "@-", "%s/%s/%s?%s=%s" % (
                          s3.url, BUCKET, decoy, param,
                          urllib.parse.quote(up)), data=complete_xml(parts))
    doc = assert_problem(st, h, out, 409, "upload-elsewhere")
    assert doc["resource"] == res, doc
    assert s3_body(s3, key) == b"v2 from B"
    assert s3_body(s3, decoy) is None
    assert s3.tm.mark("s3/%s/%s" % (BUCKET, decoy)) is None
    # A part through the decoy's path is refused the same way.
    st, h, out = curl("-X", "PUT", "-H", "Fencing-Token: " + a,
                      "--data-binary", "@-", "%s/%s/%s?partNumber=2&"
                      "uploadId=%s" % (s3.url, BUCKET, decoy,
                                       urllib.parse.quote(up)), data=b"more")
    assert_problem(st, h, out, 409, "upload-elsewhere")


def test_an_unknown_upload_id_is_refused(s3):
    """An upload created behind tidemark's back (here straight at the
    server; or before a restart, through another sidecar) binds to
    nothing: its parts and completion are refused, and two uploadIds
    too; its abort passes (it writes no object)."""
    key = unique("unknown")
    res = "s3/%s/%s" % (BUCKET, key)
    t = s3.lock(res, ttl_ms=60000)
    up = s3_client(s3.direct).create_multipart_upload(
        Bucket=BUCKET, Key=key)["UploadId"]
    c = s3_client(s3.url, t)
    st, code, h = client_error(c.upload_part, Bucket=BUCKET, Key=key,
                               UploadId=up, PartNumber=1, Body=b"x")
    assert (st, h["tidemark-error"]) == (400, "unknown-upload"), (code, h)
    st, code, h = client_error(
        c.complete_multipart_upload, Bucket=BUCKET, Key=key, UploadId=up,
        MultipartUpload={"Parts": [{"ETag": '"x"', "PartNumber": 1}]})
    assert (st, h["tidemark-error"]) == (400, "unknown-upload"), (code, h)
    st, h, out = curl("-X", "PUT", "-H", "Fencing-Token: " + t,
                      "--data-binary", "@-", "%s/%s/%s?partNumber=1&"
                      "uploadId=a&uploadId=b" % (s3.url, BUCKET, key),
                      data=b"x")
    assert_problem(st, h, out, 400, "bad-request")
    # The abort reaches the server (s3rver has none: its own 405).
    st, code, h = client_error(c.abort_multipart_upload, Bucket=BUCKET,
                               Key=key, UploadId=up)
    assert (st, code) == (405, "MethodNotAllowed"), h
    assert "tidemark-error" not in h, h
    assert s3_body(s3, key) is None
    s3.unlock(res, t)


def part(url, path, number, upload, token=None):
    """PUT a part numbered number (percent-encoded here) through url."""
    args = ["-X", "PUT", "--data-binary", "@-"]
    if token is not None:
        args += ["-H", "Fencing-Token: " + token]
    return curl(*args, "%s%s?partNumber=%s&uploadId=%s" % (
        url, path, urllib.parse.quote(number, safe="&="), upload),
        data=b"stale!!!!")


@pytest.mark.parametrize("number", ["../../{key}._S3rver_object", "0",
                                    "10001", "1&partNumber=2", "1.0"])
def test_a_part_number_s3_would_not_take_is_refused(s3, number):
    """s3rver files a part under its number as written, a path: a part of
    A's own upload numbered ../../KEY._S3rver_object wrote over KEY, which
    A lost to B. A part number is one number from 1 to 10000."""
    key, res, a, b = s3_setup(s3, "part-number")
    mine = unique("part-number-mine")
    own = "s3/%s/%s" % (BUCKET, mine)
    t = s3.lock(own, ttl_ms=60000)
    up = s3_client(s3.url, t).create_multipart_upload(
        Bucket=BUCKET, Key=mine)["UploadId"]
    st, h, out = part(s3.url, "/%s/%s" % (BUCKET, mine),
                      number.format(key=key), up, token=t)
    doc = assert_problem(st, h, out, 400, "bad-request")
    assert "partNumber" in doc["detail"], doc
    assert s3_body(s3, key) == b"v2 from B"
    s3.unlock(own, t)


@pytest.fixture
def scratch(s3, tmp_path):
    """Another tidemark before the same s3rver, whose keys under
    /BUCKET/scratch/ are not fenced (mode = off, first)."""
    text = (EXAMPLES / "s3.ini").read_text().replace(
        "[route s3-service]", "[route scratch]\nmethods = *\npath = /%s/"
        "scratch/{key*}\nresource = scratch/{key}\nmode = off\nupstream "
        "= s3\n\n[route s3-service]" % BUCKET, 1)
    tm = Tidemark(tmp_path, ini=text)
    tm.env.update({"TIDEMARK_PROXY_LISTEN": "127.0.0.1:%d" % tm.port,
                   "TIDEMARK_ADMIN_LISTEN": "127.0.0.1:%d" % tm.admin_port,
                   "TIDEMARK_UPSTREAM_S3_URL": s3.direct})
    tm.start()
    try:
        yield Fenced(s3.server, tm)
    finally:
        tm.check_teardown()


def test_a_part_number_is_checked_on_unfenced_routes_too(s3, scratch):
    """Through a route that fences nothing, on an upstream that fenced
    routes use, a part numbered ../../KEY._S3rver_object is refused too:
    it would write KEY, whose route is fenced."""
    key, res, a, b = s3_setup(scratch, "part-scratch")
    mine = "scratch/" + unique("part")
    up = s3_client(scratch.url).create_multipart_upload(
        Bucket=BUCKET, Key=mine)["UploadId"]
    st, h, out = part(scratch.url, "/%s/%s" % (BUCKET, mine),
                      "../../%s._S3rver_object" % key, up)
    doc = assert_problem(st, h, out, 400, "bad-request")
    assert "partNumber" in doc["detail"], doc
    assert s3_body(s3, key) == b"v2 from B"
    st, h, out = part(scratch.url, "/%s/%s" % (BUCKET, mine), "1", up)
    assert st == 200, (st, h, out)


def test_a_stale_completion_through_an_unfenced_route_is_refused(scratch):
    """A fenced key's upload completed through a route that fences
    nothing would still write that key (s3rver completes into the key
    the upload was created for): refused, 409 upload-elsewhere. An upload
    created through that route completes there as before."""
    key, res, _, _, b, up, etag = s3_stale_upload(scratch, "scratch-done")
    mine = "scratch/" + unique("done")
    st, h, out = curl("-X", "POST", "--data-binary", "@-",
                      "%s/%s/%s?uploadId=%s" % (scratch.url, BUCKET, mine,
                                                urllib.parse.quote(up)),
                      data=complete_xml([(1, etag)]))
    doc = assert_problem(st, h, out, 409, "upload-elsewhere")
    assert doc["resource"] == res, doc
    assert s3_body(scratch, key) == b"v2 from B"
    c = s3_client(scratch.url)
    own = c.create_multipart_upload(Bucket=BUCKET, Key=mine)["UploadId"]
    e = c.upload_part(Bucket=BUCKET, Key=mine, UploadId=own, PartNumber=1,
                      Body=b"scratch, in parts")["ETag"]
    c.complete_multipart_upload(Bucket=BUCKET, Key=mine, UploadId=own,
                                MultipartUpload={"Parts": [
                                    {"ETag": e, "PartNumber": 1}]})
    assert s3_body(scratch, mine) == b"scratch, in parts"
    scratch.unlock(res, b)


def test_a_multipart_upload_through_tidemark_still_works(s3):
    """boto3's managed transfer: create, parts in parallel, complete."""
    key = unique("multipart-ok")
    res = "s3/%s/%s" % (BUCKET, key)
    t = s3.lock(res, ttl_ms=60000)
    data = bytes(range(256)) * (11 * 1024 * 1024 // 256)
    s3_client(s3.url, t).upload_fileobj(
        io.BytesIO(data), BUCKET, key,
        Config=TransferConfig(multipart_threshold=5 * 1024 * 1024,
                              multipart_chunksize=5 * 1024 * 1024))
    assert s3_body(s3, key) == data
    s3.unlock(res, t)
