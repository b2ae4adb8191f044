"""Process life: SIGTERM and SIGINT stop tidemark gracefully with exit 0,
finishing what is in flight; at drain_timeout_ms a request not forwarded
yet gets a 503, one forwarded is closed without an answer."""

import os
import signal
import threading
import time

import pytest

from common import slow, wait_until
from daemon import HeldWrite
from test_descriptors import assert_stopping
from wire import Closed, build_request


def test_sigint_exits_0(tidemark):
    tm = tidemark()
    tm.proc.send_signal(signal.SIGINT)
    assert tm.proc.wait(10 * slow()) == 0
    tm.runs[-1][1] = "stopped"


def test_sigterm_with_idle_keepalive_clients_is_prompt(tidemark, upstream):
    tm = tidemark()
    conns = [tm.conn() for _ in range(5)]
    try:
        for c in conns:
            assert c.request("GET", "/idle").status == 200
        t0 = time.monotonic()
        assert tm.stop() == 0
        assert time.monotonic() - t0 < 5 * slow()
    finally:
        for c in conns:
            c.close()


def test_sigterm_finishes_in_flight_request(tidemark, upstream):
    tm = tidemark()
    held = HeldWrite(tm, "inflight", 3)
    tm.proc.send_signal(signal.SIGTERM)
    # it stops listening, but lives on while the request is in flight
    wait_until(lambda: not tm._listening(), 5 * slow(),
               "the listener to close after SIGTERM")
    held.release_and_exit_0()
    tm.start()
    assert tm.mark("documents/inflight") == 3


def test_sigusr1_and_sigusr2_are_logged_and_it_keeps_serving(tidemark,
                                                               upstream):
    tm = tidemark()
    tm.proc.send_signal(signal.SIGUSR1)
    tm.wait_log("SIGUSR1: nothing to reopen")
    tm.proc.send_signal(signal.SIGUSR2)
    tm.wait_log("SIGUSR2: ignored")
    assert tm.put("usr", token=4).status == 200
    assert tm.mark("documents/usr") == 4


# ---- what the drain's timeout does to the requests still open ---------

DRAIN_MS = 1000


def drain_line(tm, open_, refused, cut):
    return tm.log_lines(
        "drain timeout: closed %d connections still open: %d requests not "
        "forwarded answered 503, %d closed mid-exchange"
        % (open_, refused, cut))


def drained_in_time(took):
    """Whether took (s, measured from before the drain was asked) is
    drain_timeout_ms: the loop's timer was seen to run out up to a few
    ms early by this clock."""
    return DRAIN_MS / 1000 - 0.02 <= took < DRAIN_MS / 1000 + 2 * slow()


def stalled_store(tidemark, failsync, tmp_path):
    """A tidemark whose store's writer will be held in its sync while the
    file stall exists (held exists while it is), with the store's timeout
    far off: (tm, stall, held)."""
    shim, _ = failsync
    stall = tmp_path / "stall"
    tm = tidemark(config={"store": {"timeout_ms": "60000"},
                          "proxy": {"drain_timeout_ms": str(DRAIN_MS)}},
                  env={"LD_PRELOAD": str(shim), "FAILSYNC_STALL": str(stall)})
    return tm, stall, tmp_path / "stall.held"


def assert_one_refused_and_exited(tm, upstream, test_id):
    """tidemark exits 0 after a drain that refused one write (test_id)
    and closed nothing mid-exchange; the upstream saw nothing."""
    rc = tm.proc.wait(10 * slow())
    tm.runs[-1][1] = "stopped"
    assert rc == 0
    assert upstream.find("X-Test-Id", test_id) == []
    assert upstream.count() == 0
    assert len(drain_line(tm, 1, 1, 0)) == 1
    assert len(tm.log_lines("event=refused", "status=503",
                            "reason=stopping")) == 1


def test_a_write_waiting_for_the_store_at_drain_timeout_gets_503(
        tidemark, upstream, failsync, tmp_path):
    """SIGTERM while a write waits for the store's raise (the store's
    writer held in a sync that does not return, its timeout far off): at
    drain_timeout_ms the write gets a 503 saying the proxy is stopping
    and the write was not forwarded, the connection closes, and nothing
    reaches the upstream; once the sync returns, tidemark exits 0."""
    tm, stall, held = stalled_store(tidemark, failsync, tmp_path)
    c = tm.conn()
    try:
        stall.write_text("")
        c.send(build_request("PUT", "/v1/documents/stalled",
                             [("Fencing-Token", "7"),
                              ("X-Test-Id", "stalled")], b"data"))
        wait_until(held.exists, 10 * slow(), "the writer held in its sync")
        began = time.monotonic()
        tm.proc.send_signal(signal.SIGTERM)
        r = c.read_response(timeout=10 * slow())
        took = time.monotonic() - began
        # Still held: the answer did not wait for the store.
        assert held.exists()
        assert c.closed(timeout=5 * slow())
    finally:
        stall.unlink(missing_ok=True)
        c.close()
    assert_one_refused_and_exited(tm, upstream, "stalled")
    assert_stopping(r)
    assert drained_in_time(took)


# What the client sent and tidemark never read, which the drain reads
# and drops before it closes (at most 1 MiB, so that the close ends with
# a FIN): 1 byte, hundreds, one read's worth, the most it drops, and one
# past it.
UNREAD = [1, 300, 65536, 1 << 20, (1 << 20) + 1]


@pytest.mark.parametrize("size", UNREAD)
def test_the_drain_drops_what_a_refused_write_sent_and_exits(
        tidemark, upstream, failsync, tmp_path, size):
    """A write waiting for the store (its sync held) whose body of size
    bytes tidemark never read: at drain_timeout_ms the write is refused
    and its connection closed, nothing reaches the upstream, and
    tidemark exits 0. Up to 64 KiB the body lies in the sockets' buffers
    whole, and the client reads the 503; past that it is still sending
    when the drain closes, and may see a reset instead (the drain waits
    for no client)."""
    tm, stall, held = stalled_store(tidemark, failsync, tmp_path)
    c = tm.conn()
    body = bytes(range(256)) * (size // 256) + b"\xff" * (size % 256)
    req = build_request("PUT", "/v1/documents/unread",
                        [("Fencing-Token", "7"), ("X-Test-Id", "unread")],
                        body)
    failed = []

    def send():
        try:
            c.send(req)
        except OSError as e:  # closed by the drain mid-body
            failed.append(e)

    sender = threading.Thread(target=send)
    r = None
    try:
        stall.write_text("")
        sender.start()
        wait_until(held.exists, 10 * slow(), "the writer held in its sync")
        tm.proc.send_signal(signal.SIGTERM)
        if size <= 65536:
            sender.join(10 * slow())
            assert not sender.is_alive() and failed == []
            r = c.read_response(timeout=10 * slow())
        else:
            try:
                r = c.read_response(timeout=10 * slow())
            except (Closed, OSError):
                pass  # reset while still sending: no answer to check
        assert c.closed(timeout=10 * slow())
        sender.join(10 * slow())
        assert not sender.is_alive()
    finally:
        stall.unlink(missing_ok=True)
        c.close()
    assert_one_refused_and_exited(tm, upstream, "unread")
    if r is not None:
        assert_stopping(r)


@pytest.mark.parametrize("sent", ["whole", "part"])
def test_a_forwarded_write_unanswered_at_drain_timeout_is_closed_silently(
        tidemark, upstream, sent):
    """SIGTERM while a write is at the upstream, which read it (whole, or
    its head and part of its body) and stays silent: at drain_timeout_ms
    its connection is closed without an answer, as the write may or may
    not have been applied (a 503 would say it was not), and tidemark
    exits 0."""
    tm = tidemark({"proxy": {"drain_timeout_ms": str(DRAIN_MS)}})
    body = b"data" if sent == "whole" else b"da"
    c = tm.conn()
    try:
        c.send(build_request("PUT", "/v1/documents/silent",
                             [("Fencing-Token", "3"),
                              ("X-Test-Hold", "never"),
                              ("X-Test-Id", "silent"),
                              ("Content-Length", "4")],
                             content_length=False) + body)
        if sent == "whole":
            upstream.wait_request("X-Test-Id", "silent")
        else:
            upstream.wait_for(lambda: sum(
                u.partial for u in list(upstream.conns.values())) == 1,
                what="the write's head and part of its body upstream")
        began = time.monotonic()
        tm.proc.send_signal(signal.SIGTERM)
        assert c.closed(timeout=10 * slow())
        took = time.monotonic() - began
        assert c.reader.buf == b""
    finally:
        c.close()
    rc = tm.proc.wait(10 * slow())
    tm.runs[-1][1] = "stopped"
    assert rc == 0
    assert drained_in_time(took)
    assert len(drain_line(tm, 1, 0, 1)) == 1
    assert tm.log_lines("reason=stopping") == []


def test_a_write_waiting_for_its_turn_at_drain_timeout_gets_503(
        tidemark, upstream):
    """SIGTERM while a write (token 8) waits for its resource's turn
    behind a lower token's write (7) that the upstream holds: at
    drain_timeout_ms the waiting write gets the 503 and never reaches the
    upstream; the held one is closed without an answer."""
    tm = tidemark({"proxy": {"drain_timeout_ms": str(DRAIN_MS)}})
    first, second = tm.conn(), tm.conn()
    try:
        first.send(build_request("PUT", "/v1/documents/turn",
                                 [("Fencing-Token", "7"),
                                  ("X-Test-Hold", "never"),
                                  ("X-Test-Id", "t7")], b"data"))
        upstream.wait_request("X-Test-Id", "t7")
        second.send(build_request("PUT", "/v1/documents/turn",
                                  [("Fencing-Token", "8"),
                                   ("X-Test-Id", "t8")], b"data"))
        # Its mark raised, it waits for the first to finish.
        wait_until(lambda: tm.mark("documents/turn") == 8, 10 * slow(),
                   "the second write's mark raised")
        tm.proc.send_signal(signal.SIGTERM)
        r = second.read_response(timeout=10 * slow())
        assert first.closed(timeout=10 * slow())
        assert first.reader.buf == b""
        assert second.closed(timeout=5 * slow())
    finally:
        first.close()
        second.close()
    rc = tm.proc.wait(10 * slow())
    tm.runs[-1][1] = "stopped"
    assert rc == 0
    assert_stopping(r)
    assert upstream.find("X-Test-Id", "t8") == []
    assert len(drain_line(tm, 2, 1, 1)) == 1


def close_stdio():
    """In the child before exec: no descriptor 0, 1 or 2, as a supervisor
    that closes them (or `2>&-`) starts a process."""
    for fd in (0, 1, 2):
        os.close(fd)


def test_started_without_descriptors_0_1_2_logs_to_dev_null(tidemark,
                                                             upstream):
    """Started with descriptors 0, 1 and 2 closed, tidemark puts
    /dev/null on them before it opens anything: else its marks file, its
    journal or a client's socket would take number 2 and get the log
    lines. It serves, and the mark it raised is there after a restart
    (a stale write 409)."""
    tm = tidemark(start=False)
    tm.start(preexec=close_stdio)
    fds = {fd: os.readlink("/proc/%d/fd/%d" % (tm.proc.pid, fd))
           for fd in (0, 1, 2)}
    assert fds == {0: "/dev/null", 1: "/dev/null", 2: "/dev/null"}
    assert tm.put("nostdio", token=7).status == 200
    assert tm.stop() == 0
    tm.start()
    assert tm.mark("documents/nostdio") == 7
    assert tm.put("nostdio", token=6).status == 409
    assert len(upstream.requests) == 1


def test_threads_are_named_for_top(tidemark, upstream):
    """top -H and ps -L tell tidemark's threads apart: the network loop
    keeps the process's name; the LMDB store's writer, the LMDB lock
    backend's writer and the log's writer have one each."""
    tm = tidemark(config={"locks": {}})
    assert tm.put("named", token=1).status == 200
    task = "/proc/%d/task" % tm.proc.pid
    names = sorted(open("%s/%s/comm" % (task, t)).read().strip()
                   for t in os.listdir(task) if int(t) != tm.proc.pid)
    assert names == ["tidemark-lmdb", "tidemark-locks", "tidemark-log"]
