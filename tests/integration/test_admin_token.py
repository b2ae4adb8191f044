"""[admin] token_file: the lock service, the marks API and the page's data
need "Authorization: Bearer <token>"; health and metrics do not."""
import http.client
import os

from daemon import run_check

TOKEN = "0123456789abcdef0123456789abcdef"


def token_file(tmp_path, mode=0o600, text=TOKEN + "\n"):
    p = tmp_path / "admin.token"
    p.write_text(text)
    os.chmod(p, mode)
    return p


def call(tm, method, path, token=None, body=None):
    c = http.client.HTTPConnection("127.0.0.1", tm.admin_port, timeout=10)
    try:
        headers = {"Authorization": "Bearer " + token} if token else {}
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        return r.status, r.getheader("WWW-Authenticate"), r.read()
    finally:
        c.close()


def test_token_required_for_marks_locks_and_recent(tidemark, tmp_path):
    tm = tidemark({"admin": {"token_file": str(token_file(tmp_path))}})
    assert tm.put("adm", token=3).status == 200
    for method, path in [("GET", "/v1/marks/documents/adm"),
                         ("GET", "/v1/recent"),
                         ("POST", "/v1/locks/documents/adm?ttl_ms=1000"),
                         ("GET", "/v1/locks/documents/adm")]:
        status, www, _ = call(tm, method, path)
        assert status == 401, (method, path)
        assert www == "Bearer"
        status, _, _ = call(tm, method, path, token="wrong" + TOKEN[5:])
        assert status == 401, (method, path)
    # Nothing was taken by the refused acquire.
    status, _, body = call(tm, "GET", "/v1/marks/documents/adm", TOKEN)
    assert status == 200 and b'"high_water":3' in body
    assert call(tm, "GET", "/v1/locks/documents/adm", TOKEN)[0] == 404
    assert call(tm, "POST", "/v1/locks/jobs/nightly?ttl_ms=1000",
                TOKEN)[0] == 201
    assert call(tm, "GET", "/healthz")[0] == 200
    assert call(tm, "GET", "/metrics")[0] == 200
    assert TOKEN not in tm.log()


def test_world_readable_token_file_is_a_check_error(tidemark, tmp_path):
    tm = tidemark({"admin": {"token_file": str(
        token_file(tmp_path, mode=0o644))}}, start=False)
    rc, lines = run_check(tm.ini_path)
    assert rc == 1
    assert any("token_file: the token file is readable or writable by "
               "others" in ln for ln in lines), lines


def test_short_token_is_refused(tidemark, tmp_path):
    tm = tidemark({"admin": {"token_file": str(
        token_file(tmp_path, text="short\n"))}}, start=False)
    rc, lines = run_check(tm.ini_path)
    assert rc == 1
    assert any("the token must be 16 to 4096 bytes" in ln for ln in lines)
    assert not any("short" in ln.split(":", 2)[-1].replace(
        "token_file", "") for ln in lines if "must be" not in ln)
