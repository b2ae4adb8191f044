"""The proxies the Python benches start (busy.py, instr.py): a tidemark
config and a one-worker nginx config, every path inside one folder, and
a wait for a port to listen."""
import os
import re
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" /
                       "integration"))

from common import free_port, wait_until  # noqa: E402


def wait_port(port, proc, what):
    """Poll until port takes connections; fail if proc exits first."""
    def up():
        if proc.poll() is not None:
            raise RuntimeError("%s exited: %d" % (what, proc.returncode))
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return True
        except OSError:
            return False
    wait_until(up, 120, what + " listening", interval=0.1)


def tidemark_ini(d, port, upstream_url, proxy="", upstream="", store=""):
    """Write d/tidemark.ini: one PUT route fenced on documents/{doc}, an
    LMDB store (in d, unless store names its path and more lines),
    log_level warn; proxy and upstream: more lines for those sections.
    Returns its path."""
    store = store or "path = %s/marks.lmdb\n" % d
    ini = os.path.join(d, "tidemark.ini")
    with open(ini, "w") as f:
        f.write("""[proxy]
listen = 127.0.0.1:%d
log_level = warn
%s
[admin]
listen = 127.0.0.1:%d
[store]
type = lmdb
%s
[upstream default]
url = %s
%s
[route docs]
methods = PUT
path = /v1/documents/{doc}
resource = documents/{doc}
mode = correctness
upstream = default
""" % (port, proxy, free_port(), store, upstream_url, upstream))
    return ini


def nginx_conf(d, http, conns=1024, single=False):
    """Write d/nginx.conf: one worker (single: no master either), no
    access log, http's lines inside http { }. Returns its path."""
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write("""worker_processes 1;
%(single)s
daemon off;
pid %(d)s/nginx.pid;
error_log %(d)s/error.log warn;
worker_rlimit_nofile %(nofile)d;
events { worker_connections %(conns)d; }
http {
    access_log off;
    client_body_temp_path %(d)s/body;
    proxy_temp_path %(d)s/proxy;
    fastcgi_temp_path %(d)s/fastcgi;
    uwsgi_temp_path %(d)s/uwsgi;
    scgi_temp_path %(d)s/scgi;
    keepalive_requests 1000000;
%(http)s
}
""" % {"d": d, "single": "master_process off;" if single else "",
            "conns": conns, "nofile": conns + 100, "http": http})
    return conf


def nginx_argv(d, conf):
    return ["nginx", "-p", d + "/", "-c", conf, "-e", d + "/error.log"]


PROXY_PASS = """    upstream backend {
        server 127.0.0.1:%(up)d;
        keepalive 64;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:%(port)d backlog=65535;
        client_max_body_size 0;
        location / {
            proxy_request_buffering off;
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_read_timeout 600s;
        }
    }"""


def read_answer(s):
    """One HTTP/1.1 answer with a Content-Length from socket s, whole:
    its bytes."""
    data = b""
    while True:
        end = data.find(b"\r\n\r\n")
        if end >= 0:
            m = re.search(rb"(?i)content-length: *(\d+)", data[:end])
            if len(data) >= end + 4 + int(m.group(1)):
                return data
        chunk = s.recv(65536)
        if not chunk:
            raise RuntimeError("closed")
        data += chunk
