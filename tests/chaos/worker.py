"""One chaos worker: a client that takes locks from tidemark's lock
service and writes through tidemark with the lock's token, the way the
seed's client does, and records every call on stdout as one JSON line
(invoke and completion times, the answer, the fence).

A session: acquire (waiting up to wait_ms), then 2 to 4 writes, each
after some "work" (the time a client spends computing what to write);
before a write, if half the TTL has passed since the lease was last
confirmed, extend it and stop on a refusal; stop on a 409 from a write;
release. Like a real client, it believes in its lease between the
check and the write: a pause there (the nemesis' SIGSTOP) makes it
write with a token that is no longer the holder's.

Usage: worker.py [--lease] ID SEED PROXY_PORT ADMIN_PORT TTL_MS WAIT_MS RES...
Stops after the current call on SIGTERM. Standard library only.
"""

import http.client
import json
import random
import signal
import sys
import time
import urllib.parse

stopping = False


def on_term(signum, frame):
    global stopping
    stopping = True


class Worker:
    def __init__(self, wid, seed, proxy_port, admin_port, ttl_ms, wait_ms,
                 resources):
        self.wid = wid
        self.rng = random.Random("%s:worker:%d" % (seed, wid))
        self.proxy_port = proxy_port
        self.admin_port = admin_port
        self.ttl_ms = ttl_ms
        self.wait_ms = wait_ms
        self.resources = resources
        self.nop = 0

    def emit(self, ev):
        ev["w"] = self.wid
        sys.stdout.write(json.dumps(ev, sort_keys=True) + "\n")
        sys.stdout.flush()

    def call(self, port, method, path, headers=None, body=None,
             timeout=5.0):
        """(status, headers dict lower-cased, body, error kind). error:
        None, "refused" (never sent: the request cannot have had an
        effect) or "indeterminate" (sent, no answer)."""
        sent = False
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        try:
            c.connect()
            sent = True
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            data = r.read()
            return (r.status, {k.lower(): v for k, v in r.getheaders()},
                    data, None)
        except OSError as e:
            if not sent and isinstance(e, ConnectionRefusedError):
                return None, {}, b"", "refused"
            return None, {}, b"", "indeterminate"
        except http.client.HTTPException:
            return None, {}, b"", "indeterminate"
        finally:
            c.close()

    def lock_path(self, res, **q):
        return "/v1/locks/%s?%s" % (urllib.parse.quote(res, safe="/"),
                                    urllib.parse.urlencode(q))

    def acquire(self, res):
        t0 = time.time()
        st, _, body, err = self.call(
            self.admin_port, "POST",
            self.lock_path(res, ttl_ms=self.ttl_ms, wait_ms=self.wait_ms),
            timeout=5.0 + self.wait_ms / 1e3)
        ev = {"f": "acquire", "res": res, "t0": t0, "t1": time.time(),
              "status": st, "err": err, "ttl_ms": self.ttl_ms}
        if st == 201:
            doc = json.loads(body)
            ev["fence"] = doc["fence"]
            ev["token"] = doc["token"]
        self.emit(ev)
        return ev

    def extend(self, res, lease):
        t0 = time.time()
        st, _, _, err = self.call(
            self.admin_port, "PATCH",
            self.lock_path(res, token=lease["token"], ttl_ms=self.ttl_ms))
        self.emit({"f": "extend", "res": res, "t0": t0, "t1": time.time(),
                   "status": st, "err": err, "fence": lease["fence"],
                   "ttl_ms": self.ttl_ms})
        return st

    def release(self, res, lease):
        t0 = time.time()
        st, _, _, err = self.call(
            self.admin_port, "DELETE",
            self.lock_path(res, token=lease["token"]))
        self.emit({"f": "release", "res": res, "t0": t0, "t1": time.time(),
                   "status": st, "err": err, "fence": lease["fence"]})

    def write(self, res, lease):
        self.nop += 1
        op = "w%d-%d" % (self.wid, self.nop)
        doc = res.split("/", 1)[1]
        # The token travels in the body too: tidemark strips the header,
        # and the backend's record must say which holder wrote.
        body = json.dumps({"op": op, "res": res, "tok": lease["fence"],
                           "w": self.wid}).encode()
        headers = {"Content-Type": "application/json"}
        headers.update(self.token_header(lease))
        t0 = time.time()
        st, hdrs, _, err = self.call(
            self.proxy_port, "PUT", "/v1/documents/%s" % doc,
            headers=headers, body=body)
        ev = {"f": "write", "res": res, "t0": t0, "t1": time.time(),
              "status": st, "err": err, "fence": lease["fence"],
              "op": op, "refusal": hdrs.get("tidemark-error")}
        ev.update(self.after_write())
        self.emit(ev)
        return st

    def token_header(self, lease):
        return {"Fencing-Token": lease["token"]}

    def after_write(self):
        return {}

    def session(self):
        res = self.rng.choice(self.resources)
        got = self.acquire(res)
        if got["status"] != 201:
            # Busy, down or unreachable: come back after a short pause.
            time.sleep(self.rng.uniform(0.01, 0.05))
            return
        confirmed = time.monotonic()
        for i in range(self.rng.randint(2, 4)):
            if stopping:
                break
            if time.monotonic() - confirmed > self.ttl_ms / 2e3:
                if self.extend(res, got) != 200:
                    break       # the lease is gone: stop the work
                confirmed = time.monotonic()
            # Work between the check and the write: the window in which
            # a pause makes the token stale.
            time.sleep(self.rng.uniform(0.02, 0.06))
            if self.write(res, got) == 409:
                break           # a newer holder wrote: stop the work
        self.release(res, got)

    def run(self):
        while not stopping:
            self.session()


class LeaseWorker(Worker):
    """An application with no token of its own behind a sidecar that
    holds the lease (--lease): it asks its sidecar whether it is the
    active one (GET /v1/leases/app on the control port: the "check"
    event), and while it is, does some work and writes 2 to 4 times
    without a Fencing-Token. Like the application of a leader-elected
    service, it believes what the check said until its next check: a
    pause after the check makes it write as a holder it no longer is.
    The body names the fence it believes it writes under; after each
    write it asks again (fence_after in the event), so the checker can
    tell a write whose sidecar won a newer fence while it was under way
    (then the write's token is uncertain)."""

    def lease(self):
        st, _, body, _ = self.call(self.admin_port, "GET", "/v1/leases/app")
        if st != 200:
            return {"state": None, "fence": None}
        doc = json.loads(body)
        return {"state": doc.get("state"), "fence": doc.get("fence")}

    def check(self):
        t0 = time.time()
        got = self.lease()
        self.emit({"f": "check", "t0": t0, "t1": time.time(),
                   "state": got["state"], "fence": got["fence"]})
        return got

    def token_header(self, lease):
        return {}

    def after_write(self):
        after = self.lease()
        return {"state_after": after["state"], "fence_after": after["fence"]}

    def session(self):
        got = self.check()
        if got["state"] != "holding":
            time.sleep(self.rng.uniform(0.02, 0.08))
            return
        for i in range(self.rng.randint(2, 4)):
            if stopping:
                break
            res = self.rng.choice(self.resources)
            time.sleep(self.rng.uniform(0.02, 0.06))
            st = self.write(res, got)
            if st is None or not 200 <= st < 300:
                break


def main(argv):
    signal.signal(signal.SIGTERM, on_term)
    cls = Worker
    if argv[1] == "--lease":
        cls = LeaseWorker
        argv = argv[1:]
    wid, seed, proxy_port, admin_port, ttl_ms, wait_ms = argv[1:7]
    cls(int(wid), seed, int(proxy_port), int(admin_port), int(ttl_ms),
        int(wait_ms), argv[7:]).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
