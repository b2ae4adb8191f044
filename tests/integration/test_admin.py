"""The control port: /healthz, /readyz, GET /v1/marks/{resource}."""

import json
import os
import socket

from common import free_port, slow

ROUTES = {
    "route docs": {"path": "/v1/documents/{doc}",
                   "resource": "documents/{doc}"},
    "route files": {"path": "/v1/files/{key*}", "resource": "files/{key}"},
}


def test_healthz_and_readyz(tidemark):
    tm = tidemark()
    assert tm.admin("GET", "/healthz")[0] == 200
    assert tm.admin("GET", "/readyz")[0] == 200


def test_readyz_names_each_part(tidemark):
    """/readyz follows the data path; the lock backend is named in the
    body and in /metrics, and does not take the proxy out of rotation."""
    tm = tidemark()
    st, _, body = tm.admin("GET", "/readyz")
    assert st == 200
    assert body.decode().splitlines() == ["ready", "store: ready",
                                          "locks: ready"]
    assert b"\ntidemark_lock_backend_up 1\n" in tm.admin("GET",
                                                          "/metrics")[2]
    # A Redis lock backend with nothing listening: the locks are down,
    # fenced writes are not.
    dead = tidemark(config={"locks": {
        "backend": "redis", "path": None,
        "url": "redis://127.0.0.1:%d" % free_port()}})
    st, _, body = dead.admin("GET", "/readyz")
    assert st == 200
    assert body.decode().splitlines() == ["ready", "store: ready",
                                          "locks: unavailable"]
    assert b"\ntidemark_lock_backend_up 0\n" in dead.admin("GET",
                                                            "/metrics")[2]
    assert dead.put("x", token=1).status == 200


def test_mark_unknown_is_404(tidemark):
    tm = tidemark()
    st, _, _ = tm.admin("GET", "/v1/marks/documents/never")
    assert st == 404


def test_mark_after_writes(tidemark, upstream):
    tm = tidemark(config=ROUTES)
    assert tm.put("a", token=12).status == 200
    st, headers, body = tm.admin("GET", "/v1/marks/documents/a")
    assert st == 200
    assert headers.get("content-type", "").startswith("application/json")
    assert json.loads(body) == {"resource": "documents/a", "high_water": 12}
    assert tm.put("a", token=3).status == 409
    assert tm.mark("documents/a") == 12
    assert tm.put("a", token=40).status == 200
    assert tm.mark("documents/a") == 40


def test_mark_of_resource_with_slashes(tidemark, upstream):
    tm = tidemark(config=ROUTES)
    r = tm.request("PUT", "/v1/files/x/y/z.bin", token=6, body=b"z")
    assert r.status == 200, r
    assert tm.mark("files/x/y/z.bin") == 6
    assert tm.mark("files/x/y") is None
    assert tm.mark("files/x/y/z.bin/more") is None


def test_unknown_paths_and_methods(tidemark, upstream):
    tm = tidemark()
    assert tm.put("m", token=5).status == 200
    for method, path in (("GET", "/nope"), ("GET", "/v1/documents/m"),
                         ("GET", "/v1/marks")):
        st, _, _ = tm.admin(method, path)
        assert st == 404, (method, path, st)
    # an empty resource name is a bad request
    assert tm.admin("GET", "/v1/marks/")[0] == 400
    for method in ("POST", "PUT", "DELETE"):
        st, _, _ = tm.admin(method, "/v1/marks/documents/m")
        assert st == 400, (method, st)
    assert tm.mark("documents/m") == 5
    assert upstream.count() == 1  # the control port never proxies


def test_control_port_survives_garbage(tidemark):
    tm = tidemark()
    for junk in (os.urandom(2000), b"GET /healthz HTTP/9.9\r\n\r\n",
                 b"\r\n\r\n\r\n", b"GET " + b"a" * 100000 + b"\r\n\r\n"):
        s = socket.create_connection(("127.0.0.1", tm.admin_port),
                                     timeout=5 * slow())
        try:
            s.sendall(junk)
            s.shutdown(socket.SHUT_WR)
            s.recv(65536)
        except OSError:
            pass
        finally:
            s.close()
    assert tm.admin("GET", "/healthz")[0] == 200
    assert tm.alive()
