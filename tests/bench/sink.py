"""The bodies set's upstream: reads every request body whole before it
answers 200, so a proxy in front of it must carry every byte (nginx's
"return 200" answers before the body and discards it, and a proxy that
sees the answer early stops sending). Keep-alive, Content-Length bodies
only (what fence.lua sends); GET /_accepts answers the connections it
accepted in the stub_status layout run.sh reads (line 3, first field).

Usage: python3 sink.py PORT [DELAY_MS]

DELAY_MS: each answer leaves that long after its request came whole (a
slow backend: the proxy in front holds that many more requests in
flight at once).
"""

import heapq
import selectors
import socket
import sys
import time

READ = 1 << 20
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n"


class Conn:
    def __init__(self, sock):
        self.sock = sock
        self.head = b""
        self.left = -1  # body bytes still to read; -1: reading a head


def answer_accepts(accepted):
    body = ("Active connections: 1\nserver accepts handled requests\n"
            " %d %d 0\n" % (accepted, accepted)).encode()
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body),
                                                                 body)


def body_length(head):
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0


def feed(c, data, accepted):
    """Consume data; return the answers to send."""
    out = []
    while data:
        if c.left > 0:
            take = min(c.left, len(data))
            c.left -= take
            data = data[take:]
            if c.left == 0:
                out.append(OK)
                c.left = -1
            continue
        c.head += data
        data = b""
        end = c.head.find(b"\r\n\r\n")
        if end < 0:
            return out
        head, data = c.head[:end], c.head[end + 4:]
        c.head = b""
        if head.startswith(b"GET /_accepts"):
            out.append(answer_accepts(accepted))
            continue
        c.left = body_length(head)
        if c.left == 0:
            out.append(OK)
            c.left = -1
    return out


def send(sock, a):
    try:
        sock.settimeout(5)
        sock.sendall(a)
        sock.settimeout(0)
    except OSError:
        pass  # the proxy hung up while its answer waited


def main():
    port = int(sys.argv[1])
    delay = (int(sys.argv[2]) if len(sys.argv) > 2 else 0) / 1000.0
    due = []  # (time, seq, sock, answer): answers held for delay
    seq = 0
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", port))
    lsock.listen(4096)
    lsock.setblocking(False)
    sel = selectors.EpollSelector()
    sel.register(lsock, selectors.EVENT_READ, None)
    buf = bytearray(READ)
    view = memoryview(buf)
    accepted = 0
    while True:
        now = time.monotonic()
        while due and due[0][0] <= now:
            _, _, sock, a = heapq.heappop(due)
            if sock.fileno() >= 0:
                send(sock, a)
        wait = max(0.0, due[0][0] - now) if due else None
        for key, _ in sel.select(wait):
            if key.data is None:
                try:
                    s, _ = lsock.accept()
                except BlockingIOError:
                    continue
                accepted += 1
                s.setblocking(True)
                s.settimeout(0)
                sel.register(s, selectors.EVENT_READ, Conn(s))
                continue
            c = key.data
            try:
                n = c.sock.recv_into(buf)
            except BlockingIOError:
                continue
            except OSError:
                n = 0
            if n == 0:
                sel.unregister(c.sock)
                c.sock.close()
                continue
            if c.left > n:  # the common case: the middle of a body
                c.left -= n
                continue
            for a in feed(c, bytes(view[:n]), accepted):
                if delay > 0 and a is OK:
                    seq += 1
                    heapq.heappush(due, (time.monotonic() + delay, seq,
                                         c.sock, a))
                else:
                    send(c.sock, a)


if __name__ == "__main__":
    main()
