"""Scenarios more than one test file runs against a real lock store.
Standard library only.
"""


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
