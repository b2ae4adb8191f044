"""The lock service's API on tidemark's control port, as a client calls
it: one keep-alive connection (acquire, extend, release, lookup), the
check of a lease document, and polls for the service to be ready and for
a lease to expire. Standard library only.
"""

import http.client
import json
import urllib.parse

from common import slow, wait_until


def wait_locks_ready(tm, timeout=10.0):
    """A network lock backend connects after tidemark starts: poll a
    lookup until it is not 503."""
    wait_until(lambda: Admin(tm).get("probe/ready").status != 503,
               timeout * slow(), "the lock backend to connect")


class Resp:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name):
        return self.headers.get(name.lower())

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "<Resp %d %r>" % (self.status, self.body[:300])


class Admin:
    """One keep-alive connection to the control port."""

    def __init__(self, tm, timeout=10.0):
        self.tm = tm
        self.c = http.client.HTTPConnection("127.0.0.1", tm.admin_port,
                                            timeout=timeout * slow())

    def call(self, method, name, **query):
        path = "/v1/locks/" + urllib.parse.quote(name, safe="/")
        if query:
            path += "?" + urllib.parse.urlencode(query)
        self.c.request(method, path)
        r = self.c.getresponse()
        body = r.read()
        return Resp(r.status, dict((k.lower(), v) for k, v in
                                   r.getheaders()), body)

    def acquire(self, name, ttl_ms=10000, **kw):
        return self.call("POST", name, ttl_ms=ttl_ms, **kw)

    def extend(self, name, token, ttl_ms=10000):
        return self.call("PATCH", name, token=token, ttl_ms=ttl_ms)

    def release(self, name, token):
        return self.call("DELETE", name, token=token)

    def get(self, name):
        return self.call("GET", name)

    def close(self):
        self.c.close()


def lock_api(tm):
    return Admin(tm)


def assert_lease(r, name, fence=None, ttl_ms=None, code=201):
    assert r.status == code, r
    assert r.header("content-type").startswith("application/json"), r
    doc = r.json()
    assert set(doc) == {"name", "token", "fence", "ttl_ms"}, doc
    assert doc["name"] == name
    if fence is not None:
        assert doc["fence"] == fence, doc
    if ttl_ms is not None:
        assert doc["ttl_ms"] == ttl_ms, doc
    return doc


def wait_gone(api, name, timeout=5.0):
    """Poll GET until the lease has expired (404)."""
    wait_until(lambda: api.get(name).status == 404, timeout * slow(),
               "lease %s to expire" % name)
