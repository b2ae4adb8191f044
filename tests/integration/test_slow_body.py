"""A minimum body rate: a client that trickles its request body is cut
off with 408, while a slow upstream (back-pressure) is not its fault."""
import time

from wire import build_request


def test_trickled_body_is_cut_off(tidemark, upstream):
    tm = tidemark({"proxy": {"min_body_rate": "1000",
                             "body_rate_window_ms": "300"}})
    with tm.conn() as c:
        c.send(build_request("PUT", "/v1/documents/slow",
                             [("Fencing-Token", "1"),
                              ("Content-Length", "100000")],
                             content_length=False))
        t0 = time.monotonic()
        r = None
        for _ in range(40):
            try:
                c.send(b"x")
            except OSError:
                break
            if c.reader.buf or c.closed(timeout=0.1):
                break
        r = c.read_response(timeout=5)
        assert r.status == 408, r
        assert time.monotonic() - t0 < 4
    tm.wait_log("under min_body_rate")


def test_steady_body_and_keep_alive_are_fine(tidemark, upstream):
    tm = tidemark({"proxy": {"min_body_rate": "1000",
                             "body_rate_window_ms": "300"}})
    with tm.conn() as c:
        for i in range(3):
            r = c.request("PUT", "/v1/documents/k%d" % i,
                          [("Fencing-Token", "1")], b"y" * 5000)
            assert r.status == 200, r
        # Longer than a window between requests: the connection stays.
        time.sleep(0.7)
        r = c.request("PUT", "/v1/documents/k9", [("Fencing-Token", "1")],
                      b"z")
        assert r.status == 200, r
