"""Credentials in the sidecar: add_header (repeatable, ${VAR} from the
environment) on an upstream adds a header to every forwarded request and
replaces a client header of that name; strip_header removes a client
header. Secrets never appear in logs or in --check output."""
from daemon import run_check

SECRET = "s3cr3t-value-do-not-log"


def test_add_header_from_environment(tidemark, upstream):
    tm = tidemark({"upstream default": {
        "add_header": "Authorization: Bearer ${API_TOKEN}"}},
        env={"API_TOKEN": SECRET})
    r = tm.put("cred1", token=4, headers=[("Authorization", "Bearer forged")])
    assert r.status == 200, r
    seen = upstream.requests[-1]
    assert seen.header_all("Authorization") == ["Bearer " + SECRET]
    assert SECRET not in tm.log()


def test_add_header_repeatable_and_strip_header(tidemark, upstream):
    tm = tidemark({"proxy": {"log_level": "debug"},
                   "upstream default": {
                       "add_header": ["X-Api-Key: ${API_KEY}",
                                      "X-Tenant: blue"],
                       "strip_header": ["Cookie", "X-Debug"]}},
                  env={"API_KEY": SECRET})
    r = tm.request("GET", "/plain", headers=[("Cookie", "a=b"),
                                              ("X-Debug", "1"),
                                              ("X-Keep", "yes")])
    assert r.status == 200, r
    seen = upstream.requests[-1]
    assert seen.header("X-Api-Key") == SECRET
    assert seen.header("X-Tenant") == "blue"
    assert seen.header("Cookie") is None
    assert seen.header("X-Debug") is None
    assert seen.header("X-Keep") == "yes"
    assert SECRET not in tm.log()


def test_client_cannot_slip_a_header_past_by_spelling(tidemark, upstream):
    """A backend behind a CGI/WSGI-style gateway reads X_Api_Key as
    X-Api-Key: the client's spelling of a header the sidecar sets or
    strips is dropped too."""
    tm = tidemark({"upstream default": {
        "add_header": "X-Api-Key: ${API_KEY}",
        "strip_header": "X-Remote-User"}},
        env={"API_KEY": SECRET})
    r = tm.request("GET", "/plain", headers=[("X_Api_Key", "forged"),
                                              ("x.api.key", "forged"),
                                              ("X_Remote_User", "admin"),
                                              ("X-Remote-Users", "kept")])
    assert r.status == 200, r
    seen = upstream.requests[-1]
    names = [k for k, _ in seen.headers]
    assert seen.header_all("X-Api-Key") == [SECRET], seen
    for gone in ("X_Api_Key", "x.api.key", "X_Remote_User"):
        assert gone not in names, seen
    assert seen.header("X-Remote-Users") == "kept"


def test_unset_variable_is_a_check_error_naming_only_the_variable(
        tidemark, tmp_path):
    tm = tidemark({"upstream default": {
        "add_header": "Authorization: Bearer ${NOT_SET_ANYWHERE}"}},
        start=False)
    rc, lines = run_check(tm.ini_path)
    assert rc == 1
    assert any("${NOT_SET_ANYWHERE} is not set" in ln for ln in lines), lines


def test_check_output_never_shows_a_secret(tidemark):
    tm = tidemark({"upstream default": {
        "add_header": "Authorization Bearer " + SECRET,
        "strip_header": "bad header"}}, start=False)
    rc, lines = run_check(tm.ini_path, env={"API_TOKEN": SECRET})
    assert rc == 1
    text = "\n".join(lines)
    assert "add_header: must be NAME: VALUE" in text
    assert "strip_header: must be a header name" in text
    assert SECRET not in text
