"""A DNS server for the tests: it stands in for the DNS a deployment
has, because a test cannot change the machine's own. It speaks RFC 1035
over UDP on loopback, answers A queries from a table the test changes
(set), answers AAAA with no record for a name it knows, and NXDOMAIN for
any other name; while silent, it reads each query and answers none (a
dead resolver)."""

import socket
import struct
import threading


class DnsStub:
    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.addr = "127.0.0.1:%d" % self.port
        self.lock = threading.Lock()
        self.table = {}
        self.queries = 0
        self.silent = False
        self.stopping = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def set(self, name, addrs):
        """name now resolves to addrs (IPv4 texts); [] or None: unknown."""
        with self.lock:
            if addrs:
                self.table[name.lower()] = list(addrs)
            else:
                self.table.pop(name.lower(), None)

    def stop(self):
        self.stopping = True
        self.sock.close()
        self.thread.join(5)

    def _serve(self):
        while not self.stopping:
            try:
                data, peer = self.sock.recvfrom(512)
            except OSError:
                return
            answer = self._answer(data)
            if answer is not None and not self.silent:
                try:
                    self.sock.sendto(answer, peer)
                except OSError:
                    return

    def _answer(self, data):
        """The reply to one query, or None for bytes that are not one."""
        if len(data) < 12:
            return None
        qid, _flags, qd = struct.unpack("!HHH", data[:6])
        if qd != 1:
            return None
        i, labels = 12, []
        while i < len(data) and data[i] != 0:
            n = data[i]
            labels.append(data[i + 1:i + 1 + n].decode("ascii", "replace"))
            i += 1 + n
        if i + 5 > len(data):
            return None
        question = data[12:i + 5]       # echoed as sent (0x20 case mix)
        qtype = struct.unpack("!H", data[i + 1:i + 3])[0]
        with self.lock:
            self.queries += 1
            addrs = self.table.get(".".join(labels).lower())
        records = []
        if addrs is not None and qtype == 1:
            for a in addrs:
                records.append(struct.pack("!HHHIH", 0xC00C, 1, 1, 1, 4) +
                               socket.inet_aton(a))
        rcode = 3 if addrs is None else 0
        head = struct.pack("!HHHHHH", qid, 0x8180 | rcode, 1, len(records),
                           0, 0)
        return head + question + b"".join(records)
