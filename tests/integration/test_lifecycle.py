"""Process life: SIGTERM and SIGINT stop tidemark gracefully with exit 0,
finishing what is in flight."""

import signal
import time

from common import slow, wait_until
from daemon import HeldWrite


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
