"""SIGHUP: routes, upstreams, limits and log settings change without
dropping connections; a bad file is refused whole and the old
configuration stays; keys that need a restart say so."""
import signal
import threading

from conftest import build_request, render_ini


def rewrite(tm, sections):
    tm.ini_path.write_text(render_ini(sections))


def base_sections(tm, upstream, **route):
    r = {"methods": "PUT POST PATCH DELETE", "path": "/v1/documents/{doc}",
         "resource": "documents/{doc}", "mode": "correctness"}
    r.update(route)
    return {
        "proxy": {"listen": "127.0.0.1:%d" % tm.port, "log_level": "info"},
        "admin": {"listen": "127.0.0.1:%d" % tm.admin_port},
        "store": {"type": "lmdb", "path": tm.store_path},
        "upstream default": {"url": upstream.url},
        "route docs": r,
    }


def hup(tm, needle, count):
    tm.proc.send_signal(signal.SIGHUP)
    tm.wait_log(needle, count=count)


def test_reload_changes_routes_and_upstreams_without_dropping(
        tidemark, upstream, upstream_factory):
    tm = tidemark()
    rewrite(tm, base_sections(tm, upstream))
    other = upstream_factory()
    with tm.conn() as keep:
        r = keep.request("PUT", "/v1/documents/a",
                         [("Fencing-Token", "1")], b"x")
        assert r.status == 200, r
        # A write in flight on the old upstream while the reload happens.
        done = {}

        def slow():
            done["r"] = tm.put("held", token=2,
                               headers=[("X-Test-Hold", "h")])

        t = threading.Thread(target=slow)
        t.start()
        upstream.wait_request("X-Test-Hold", "h")
        rewrite(tm, base_sections(tm, other, mode="off"))
        hup(tm, "reloaded", 1)
        # New requests: the new upstream, the new mode (no token needed).
        r = keep.request("PUT", "/v1/documents/a", [], b"y")
        assert r.status == 200, r
        assert other.requests[-1].target == "/v1/documents/a"
        upstream.release("h")
        t.join(10)
        assert done["r"].status == 200, done["r"]
    assert tm.alive()


def test_bad_file_is_refused_whole(tidemark, upstream):
    tm = tidemark()
    good = tm.ini_path.read_text()
    tm.ini_path.write_text(good + "\n[route broken]\npath = nope\n"
                           "resource = x\nbogus = 1\n")
    hup(tm, "reload refused", 1)
    lines = tm.log_lines("reload:")
    assert any("tidemark.ini:" in ln and "bogus" in ln for ln in lines), \
        lines
    # The old configuration still fences.
    assert tm.put("b", token=5).status == 200
    assert tm.put("b").status == 428


def test_restart_only_keys_say_so(tidemark, upstream):
    tm = tidemark()
    sections = base_sections(tm, upstream)
    sections["store"]["cache_entries"] = "5000"
    rewrite(tm, sections)
    hup(tm, "reloaded", 1)
    assert tm.log_lines("[store] changed; it takes effect after a restart")
    assert tm.put("c", token=1).status == 200


def test_reload_changes_limits(tidemark, upstream):
    tm = tidemark()
    sections = base_sections(tm, upstream)
    sections["route docs"]["max_body"] = "10"
    rewrite(tm, sections)
    hup(tm, "reloaded", 1)
    with tm.conn() as c:
        c.send(build_request("PUT", "/v1/documents/l",
                             [("Fencing-Token", "1")], b"x" * 100))
        assert c.read_response().status == 413
