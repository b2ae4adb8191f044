"""SIGHUP: routes, upstreams, limits and log settings change without
dropping connections; a bad file is refused whole and the old
configuration stays; keys that need a restart say so."""
import signal
import threading

from common import slow, wait_until
from daemon import render_ini
from wire import build_request


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
    sections["store"].update({"cache_entries": "5000", "timeout_ms": "7",
                              "pool_size": "5", "map_size": "2G",
                              "dsn": "host=db password=hush"})
    sections["locks"] = {"timeout_ms": "9", "pool_size": "4",
                         "max_ttl_ms": "5"}
    sections["proxy"]["max_uri"] = "300"  # reloadable: applies at once
    rewrite(tm, sections)
    hup(tm, "reloaded", 1)
    for key, kept in (("[store] map_size", "1073741824"),
                      ("[store] dsn", "(none)"),
                      ("[store] pool_size", "2"),
                      ("[store] cache_entries", "100000"),
                      ("[store] timeout_ms", "2000"),
                      ("[locks] pool_size", "2"),
                      ("[locks] timeout_ms", "2000"),
                      ("[locks] max_ttl_ms", "3600000")):
        line = "reload: %s changed: needs a restart; keeping %s" % (key, kept)
        assert len(tm.log_lines(line)) == 1, (line, tm.log()[-3000:])
    assert len(tm.log_lines("needs a restart")) == 8
    assert tm.log_lines("reloaded: 1 routes, 1 upstreams; 8 changed keys "
                        "wait for a restart")
    assert "hush" not in tm.log()
    # The lock service still runs with the old max_ttl_ms (5 would refuse).
    st, _, body = tm.admin("POST", "/v1/locks/documents/k?ttl_ms=60000")
    assert st == 201, body
    # The reloadable key took effect.
    with tm.conn() as c:
        c.send(build_request("GET", "/" + "x" * 300))
        assert c.read_response().status == 414
    assert tm.put("c", token=1).status == 200
    # A second reload of the same file changes nothing more.
    hup(tm, "reloaded", 2)
    assert len(tm.log_lines("needs a restart")) == 16


def test_request_under_way_keeps_its_generation(tidemark, upstream):
    """A write parsed before a reload and forwarded after it is stripped
    of the token header of its own generation, not of the new one."""
    tm = tidemark()
    rewrite(tm, base_sections(tm, upstream))
    done = {}

    def put(name, token, headers):
        done[name] = tm.put("g", token=token, headers=headers)

    first = threading.Thread(target=put,
                             args=("first", 1, [("X-Test-Hold", "g1")]))
    first.start()
    upstream.wait_request("X-Test-Hold", "g1")
    # The second write is accepted (mark 2) and waits for its turn behind
    # the first one, which the upstream holds.
    second = threading.Thread(target=put,
                              args=("second", 2, [("X-Test-Id", "g2")]))
    second.start()
    wait_until(lambda: tm.mark("documents/g") == 2, 5 * slow(),
               "the second write accepted")
    sections = base_sections(tm, upstream)
    sections["proxy"]["token_header"] = "X-Other-Token"
    rewrite(tm, sections)
    hup(tm, "reloaded", 1)
    upstream.release("g1")
    first.join(10)
    second.join(10)
    assert done["first"].status == 200, done["first"]
    assert done["second"].status == 200, done["second"]
    seen = upstream.find("X-Test-Id", "g2")
    assert len(seen) == 1
    assert seen[0].header("Fencing-Token") is None, seen[0]
    # New requests read the new header.
    r = tm.request("PUT", "/v1/documents/g", headers=[("X-Other-Token", "3")],
                   body=b"z")
    assert r.status == 200, r
    assert tm.mark("documents/g") == 3


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


def test_watch_sections_wait_for_a_restart(tidemark, upstream):
    """[watch] sections are read at start: a reload that adds, changes or
    drops one keeps the running ones and says so; a reload that leaves
    them alone says nothing about them."""
    tm = tidemark(config={"watch w": {"endpoints": "http://127.0.0.1:9",
                                      "prefix": "locks/"}})
    sections = base_sections(tm, upstream)
    sections["watch w"] = {"endpoints": "http://127.0.0.1:9",
                           "prefix": "locks/"}
    rewrite(tm, sections)
    hup(tm, "reloaded", 1)
    assert tm.log_lines("needs a restart") == []
    sections["watch w"]["prefix"] = "other/"
    sections["watch v"] = {"endpoints": "http://127.0.0.1:9",
                           "prefix": "v/"}
    rewrite(tm, sections)
    hup(tm, "reloaded", 2)
    assert len(tm.log_lines("reload: [watch] sections changed: needs a "
                            "restart; keeping the ones read at start")) == 1
    del sections["watch w"], sections["watch v"]
    rewrite(tm, sections)
    hup(tm, "reloaded", 3)
    assert len(tm.log_lines("reload: [watch] sections changed")) == 2
    assert tm.put("r", token=1).status == 200
