#!/usr/bin/env python3
"""Set the marks a bench workload starts from, through tidemark itself.

prime.py HOST PORT PREFIX COUNT TOKEN [CONNECTIONS [START]]: PUT
/v1/documents/<PREFIX><i> for i in START..COUNT-1 (START 0 unless given)
with Fencing-Token TOKEN,
over a few keep-alive connections at once (so the store's group commit is
used, and priming takes a second, not a thousand fsyncs in a row). A
request whose connection closed without an answer is sent again on a new
connection (safe: the same token twice sets the same mark) and counted,
so that a proxy bug is reported without stopping the bench. Exits 1
unless every resource ends with a 200.
"""

import http.client
import sys
import threading


def main():
    if len(sys.argv) not in (6, 7, 8):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    host, port, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    count, token = int(sys.argv[4]), sys.argv[5]
    nconn = int(sys.argv[6]) if len(sys.argv) >= 7 else 8
    start = int(sys.argv[7]) if len(sys.argv) == 8 else 0
    bad = []
    retried = []
    lock = threading.Lock()

    def worker(k):
        conn = http.client.HTTPConnection(host, port, timeout=30)
        for i in range(start + k, count, nconn):
            path = "/v1/documents/%s%d" % (prefix, i)
            for attempt in range(3):
                try:
                    conn.request("PUT", path, body=b'{"state":"prime"}\n',
                                 headers={"Fencing-Token": token,
                                          "Content-Type":
                                          "application/json"})
                    resp = conn.getresponse()
                    resp.read()
                    status = resp.status
                    break
                except (OSError, http.client.HTTPException) as e:
                    status = repr(e)
                    conn.close()
                    conn = http.client.HTTPConnection(host, port,
                                                      timeout=30)
                    with lock:
                        retried.append((path, status))
            if status != 200:
                with lock:
                    bad.append((path, status))
        conn.close()

    threads = [threading.Thread(target=worker, args=(k,))
               for k in range(nconn)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if retried:
        print("prime: warning: %d connections closed without an answer "
              "(request sent again), e.g. %s" % (len(retried), retried[0]),
              file=sys.stderr)
    if bad:
        print("prime: %d of %d not 200, e.g. %s" % (len(bad), count - start,
                                                    bad[:3]),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
