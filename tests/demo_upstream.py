#!/usr/bin/env python3
"""A tiny demo backend for tidemark: stores documents in memory.

PUT/POST/PATCH /v1/documents/NAME stores the body, GET returns it, DELETE
removes it. Each request is logged with the headers that show what the
proxy did: Fencing-Token and Fencing-Resource should never arrive.
Python standard library only: python3 tests/demo_upstream.py [--port 8080]
"""

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PREFIX = "/v1/documents/"
# Headers printed for every request: the fencing ones must be absent.
SHOWN = ("Fencing-Token", "Fencing-Resource", "Via", "Authorization",
         "Content-Length", "Transfer-Encoding", "Connection")

docs = {}
docs_lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so the proxy can pool
    server_version = "demo-upstream"

    def log_message(self, fmt, *args):  # replaced by log_request below
        pass

    def log_request(self, code="-", size="-"):
        shown = []
        for name in SHOWN:
            values = self.headers.get_all(name)
            if name.startswith("Fencing-"):
                # Say so explicitly: this is what the demo is for.
                shown.append("%s=%s" % (name, ",".join(values) if values
                                        else "(absent)"))
            elif values:
                v = ",".join(values)
                if name == "Authorization":
                    v = v.split(" ")[0] + " ***"
                shown.append("%s=%s" % (name, v))
        print("%s %s %s -> %s  %s" % (time.strftime("%H:%M:%S"),
                                      self.command, self.path, code,
                                      " ".join(shown)), flush=True)

    def read_body(self):
        """The request body, de-chunked if needed; None when malformed."""
        te = self.headers.get("Transfer-Encoding", "")
        if te.lower() == "chunked":
            parts = []
            while True:
                line = self.rfile.readline(1024)
                try:
                    size = int(line.split(b";")[0].strip(), 16)
                except ValueError:
                    return None
                if size == 0:
                    # Skip trailers up to the empty line.
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n",
                                                            b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline(8)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def answer(self, status, body, ctype="application/json"):
        if isinstance(body, (dict, list)):
            body = (json.dumps(body) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def name(self):
        path = self.path.split("?", 1)[0]
        if not path.startswith(PREFIX) or len(path) == len(PREFIX):
            return None
        return path[len(PREFIX):]

    def do_write(self):
        body = self.read_body()
        if body is None:
            self.close_connection = True
            self.answer(400, {"error": "bad chunked body"})
            return
        name = self.name()
        if name is None:
            self.answer(404, {"error": "not found", "path": self.path})
            return
        ctype = self.headers.get("Content-Type", "application/octet-stream")
        with docs_lock:
            version = docs.get(name, (0, b"", ""))[0] + 1
            docs[name] = (version, body, ctype)
        self.answer(200, {"name": name, "bytes": len(body),
                          "version": version})

    do_PUT = do_POST = do_PATCH = do_write

    def do_GET(self):
        name = self.name()
        with docs_lock:
            doc = docs.get(name) if name is not None else None
        if doc is None:
            self.answer(404, {"error": "not found", "path": self.path})
        else:
            self.answer(200, doc[1], doc[2])

    do_HEAD = do_GET

    def do_DELETE(self):
        self.read_body()
        name = self.name()
        with docs_lock:
            doc = docs.pop(name, None) if name is not None else None
        if doc is None:
            self.answer(404, {"error": "not found", "path": self.path})
        else:
            self.answer(200, {"name": name, "deleted": True})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8080)
    args = ap.parse_args()
    ThreadingHTTPServer.daemon_threads = True
    srv = ThreadingHTTPServer((args.host, args.port), Handler)
    print("demo upstream on http://%s:%d%sNAME" % (args.host, args.port,
                                                  PREFIX), flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
