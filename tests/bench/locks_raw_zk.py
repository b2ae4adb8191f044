"""The ZooKeeper lock recipe without tidemark, the baseline for
`make bench-locks BACKEND=zookeeper`: kazoo's Lock (an ephemeral
sequential node, the children read, the node deleted: two writes and a
read per pair, as tidemark's zookeeper backend does), lock and unlock
pairs per second, every client on a lock of its own, on a ZooKeeper
server started here (tests/integration/servers.py).

Env: BENCH_SECONDS (10), BENCH_CONNECTIONS (32 clients), BENCH_PROCS (4
processes sharing them, each with one ZooKeeper session; Python runs
one thread at a time per process).
"""

import multiprocessing
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))


def worker(hosts, proc, nthreads, secs, out):
    from kazoo.client import KazooClient
    zk = KazooClient(hosts=hosts, timeout=10.0)
    zk.start()
    counts = [0] * nthreads
    start = threading.Barrier(nthreads + 1)

    def run(i):
        lock = zk.Lock("/bench/raw/p%d-t%d" % (proc, i), "bench")
        lock.acquire()                # the parent's creation, untimed
        lock.release()
        start.wait()
        end = time.monotonic() + secs
        n = 0
        while time.monotonic() < end:
            lock.acquire()
            lock.release()
            n += 1
        counts[i] = n

    threads = [threading.Thread(target=run, args=(i,))
               for i in range(nthreads)]
    for t in threads:
        t.start()
    start.wait()
    for t in threads:
        t.join()
    zk.stop()
    zk.close()
    out.put(sum(counts))


def main():
    import servers
    secs = float(os.environ.get("BENCH_SECONDS", "10"))
    conns = int(os.environ.get("BENCH_CONNECTIONS", "32"))
    procs = max(1, min(conns, int(os.environ.get("BENCH_PROCS", "4"))))
    srv = servers.ZooKeeper().start()
    try:
        out = multiprocessing.Queue()
        per = [conns // procs + (1 if i < conns % procs else 0)
               for i in range(procs)]
        ps = [multiprocessing.Process(target=worker,
                                      args=(srv.hosts, i, per[i], secs, out))
              for i in range(procs)]
        for p in ps:
            p.start()
        total = sum(out.get() for _ in ps)
        for p in ps:
            p.join()
        print("raw=zookeeper pairs_per_s=%.0f clients=%d processes=%d "
              "(kazoo Lock)" % (total / secs, conns, procs))
    finally:
        srv.destroy()


if __name__ == "__main__":
    main()
