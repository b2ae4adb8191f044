#!/usr/bin/env python3
"""park.py: COUNT lock calls left waiting on the lock service, each on a
name of its own, for the lock bench to run beside them.

    park.py HOST PORT COUNT PREFIX WAIT_MS

Takes PREFIX0 .. PREFIX{COUNT-1} (a lease of WAIT_MS + 60 s each), then
opens one connection per name with an acquire that waits WAIT_MS for it.
It prints "parked COUNT" once every one of them is seen queued (an
acquire that does not wait is refused with "other callers are waiting
for this lock"), and holds the connections until its standard input
closes. Exit 1 with the reason when a call is answered otherwise."""
import asyncio
import resource
import sys

HOST = ""  # the Host header: the control port checks it


async def call(reader, writer, method, path):
    writer.write((f"{method} {path} HTTP/1.1\r\nHost: {HOST}\r\n"
                  "Content-Length: 0\r\n\r\n").encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    body = await reader.readexactly(length)
    return status, body


async def main(host, port, count, prefix, wait_ms):
    global HOST
    HOST = f"{host}:{port}"
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    r, w = await asyncio.open_connection(host, port)
    for i in range(count):
        status, body = await call(r, w, "POST", f"/v1/locks/{prefix}{i}"
                                  f"?ttl_ms={wait_ms + 60000}")
        if status != 201:
            sys.exit(f"park.py: taking {prefix}{i}: {status} {body[:200]!r}")
    conns = []
    for i in range(count):
        cr, cw = await asyncio.open_connection(host, port)
        cw.write((f"POST /v1/locks/{prefix}{i}?ttl_ms=10000"
                  f"&wait_ms={wait_ms} HTTP/1.1\r\nHost: {HOST}\r\n"
                  "Content-Length: 0\r\n\r\n").encode())
        conns.append((cr, cw))
    await asyncio.gather(*(cw.drain() for _, cw in conns))
    for i in range(count):
        while True:
            status, body = await call(r, w, "POST", f"/v1/locks/{prefix}{i}"
                                      "?ttl_ms=10000")
            if status == 423 and b"other callers are waiting" in body:
                break
            if status != 423:
                sys.exit(f"park.py: probing {prefix}{i}: {status} "
                         f"{body[:200]!r}")
            await asyncio.sleep(0.01)  # its call is still on its way in
    reads = [asyncio.ensure_future(cr.read(1)) for cr, _ in conns]
    print(f"parked {count}", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)
    answered = sum(1 for t in reads if t.done())
    for t in reads:
        t.cancel()
    for _, cw in conns:
        cw.close()
    if answered:
        sys.exit(f"park.py: {answered} parked calls were answered while "
                 "the bench ran")


if __name__ == "__main__":
    h, p, n, pre, wms = sys.argv[1:6]
    asyncio.run(main(h, int(p), int(n), pre, int(wms)))
