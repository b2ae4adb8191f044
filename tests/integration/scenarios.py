"""Scenarios more than one test file runs against a real lock store.
Standard library only.
"""

import threading
import time

from common import slow, wait_until
from lockapi import Admin, assert_lease


# A process that takes a kazoo Lock and writes through tidemark with its
# node's czxid as Fencing-Token: argv HOSTS LOCK_PATH DOC PORT
# SESSION_TIMEOUT. Prints "token CZXID", then "a1 STATUS" for its first
# PUT /v1/documents/DOC, waits for a line on stdin (the test pauses it
# there with SIGSTOP, past its session), then "a2 STATUS".
KAZOO_HOLDER = r"""
import http.client, sys
from kazoo.client import KazooClient
hosts, path, doc, port, timeout = sys.argv[1], sys.argv[2], sys.argv[3], \
    int(sys.argv[4]), float(sys.argv[5])
zk = KazooClient(hosts=hosts, timeout=timeout)
zk.start()
lock = zk.Lock(path, "paused-holder")
lock.acquire()
czxid = zk.exists(lock.path + "/" + lock.node).czxid

def put(tag):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("PUT", "/v1/documents/" + doc, body=tag.encode(),
              headers={"Fencing-Token": str(czxid), "X-Test-Id": tag})
    r = c.getresponse()
    r.read()
    print(tag, r.status, flush=True)

print("token", czxid, flush=True)
put("a1")
sys.stdin.readline()               # SIGSTOP arrives while waiting here
put("a2")
"""


def leader_killed_under_acquires(tm, ensemble, grants_each, ttl_ms,
                                 refused, release, after_kill=None,
                                 join_s=60):
    """The leader of ensemble killed while 8 clients take, write under
    (tm.put of documents/hot, the fence as the body) and give back one
    lock, each waiting in line: grants_each grants before the kill and
    as many after it. refused(api, r) takes an acquire's answer other
    than 201 (it may wait on api); release(api, name, token) gives the
    lock back; after_kill(leader), when given, waits for the ensemble to
    recover. A client's exception, or a write not answered 200, fails
    the scenario. Returns the grants: (fence, granted_at,
    release_started_at) of every holder, for assert_holders_in_turn."""
    grants, errors = [], []
    lock = threading.Lock()
    stop = threading.Event()

    def client():
        api = Admin(tm, timeout=60.0)
        try:
            while not stop.is_set():
                r = api.acquire("documents/hot", ttl_ms=ttl_ms,
                                wait_ms=20000)
                got = time.monotonic()
                if r.status != 201:
                    refused(api, r)
                    continue
                doc = assert_lease(r, "documents/hot")
                w = tm.put("hot", token=doc["token"],
                           body=b"%d" % doc["fence"])
                if w.status != 200:
                    errors.append(("write", doc["fence"], w.status))
                start = time.monotonic()
                with lock:
                    grants.append((doc["fence"], got, start))
                release(api, "documents/hot", doc["token"])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))
        finally:
            api.close()

    threads = [threading.Thread(target=client) for _ in range(8)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: len(grants) >= grants_each or errors,
                   60 * slow(), "%d grants" % grants_each)
        leader = ensemble.leader()
        assert leader is not None
        before = len(grants)
        leader.kill9()
        if after_kill is not None:
            after_kill(leader)
        wait_until(lambda: len(grants) >= before + grants_each or errors,
                   90 * slow(), "%d grants after the failover" % grants_each)
    finally:
        stop.set()
        for t in threads:
            t.join(join_s * slow())
    assert errors == []
    return grants
