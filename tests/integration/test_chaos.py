"""The randomized history check (tests/chaos/), short: one seed (random,
or CHAOS_SEED) runs the workload and the nemesis with fencing off, where
the checker must find stale writes applied, then on, where it must find
nothing. And the checker itself, on small made-up histories: each rule
catches the violation it names (fencing off shows only some of them),
and passes the histories that only look close to one."""

import os
import random
import sys
from pathlib import Path

import pytest

from common import REPO, slow

sys.path.insert(0, str(Path(REPO) / "tests" / "chaos"))

import checker  # noqa: E402

SHORT_SECONDS = 8


def acq(w, res, fence, t0, t1, ttl_ms=300, status=201):
    return {"f": "acquire", "w": w, "res": res, "fence": fence,
            "token": str(fence), "t0": t0, "t1": t1, "ttl_ms": ttl_ms,
            "status": status}


def write(w, op, res, fence, status=200, refusal=None, t=0.0):
    return {"f": "write", "w": w, "op": op, "res": res, "fence": fence,
            "status": status, "refusal": refusal, "t0": t, "t1": t}


def applied(seq, op, res, tok):
    return {"seq": seq, "op": op, "res": res, "tok": tok}


def kinds(history, applies):
    return sorted(v["kind"] for v in checker.check(history, applies))


def test_checker_stale_applied():
    h = [write(1, "a", "r", 5), write(2, "b", "r", 4)]
    assert kinds(h, [applied(1, "a", "r", 5), applied(2, "b", "r", 4)]) \
        == ["stale-applied"]
    # In token order, or an equal token again, or another resource: fine.
    assert kinds(h, [applied(1, "b", "r", 4), applied(2, "a", "r", 5)]) \
        == []
    h2 = [write(1, "a", "r", 5), write(1, "c", "r", 5),
          write(2, "b", "s", 4)]
    assert kinds(h2, [applied(1, "a", "r", 5), applied(2, "c", "r", 5),
                      applied(3, "b", "s", 4)]) == []


def test_checker_ack_lost_and_refused_applied():
    h = [write(1, "a", "r", 5), write(2, "b", "r", 4, status=409,
                                      refusal="stale-token")]
    assert kinds(h, []) == ["ack-lost"]
    assert kinds(h, [applied(1, "a", "r", 5), applied(2, "b", "r", 4)]) \
        == ["refused-applied", "stale-applied"]
    # A 504 (or no answer) may or may not have been applied.
    h = [write(1, "a", "r", 5, status=504, refusal="upstream-timeout"),
         write(1, "b", "r", 5, status=None)]
    assert kinds(h, [applied(1, "a", "r", 5)]) == []
    assert kinds(h, [applied(1, "b", "r", 5)]) == []


def test_checker_fences():
    assert kinds([acq(1, "r", 3, 0.0, 0.01), acq(2, "r", 3, 1.0, 1.01)],
                 []) == ["fence-reused"]
    # Granted after another was answered, with a lower fence.
    assert kinds([acq(1, "r", 4, 0.0, 0.01), acq(2, "r", 3, 1.0, 1.01)],
                 []) == ["fence-reused"]
    # Concurrent acquires may be answered in either order.
    assert kinds([acq(1, "r", 4, 0.0, 1.5), acq(2, "r", 3, 1.0, 1.01)],
                 []) == []
    # Another lock has its own counter.
    assert kinds([acq(1, "r", 3, 0.0, 0.01), acq(2, "s", 3, 0.0, 0.01)],
                 []) == []


def test_checker_two_live_leases():
    # Lease 1 is certainly live until 0.3; lease 2 from 0.21.
    h = [acq(1, "r", 1, 0.0, 0.01), acq(2, "r", 2, 0.2, 0.21)]
    assert kinds(h, []) == ["two-live-leases"]
    # Answered late: granted at some point up to 0.35, which may be
    # after lease 1 ended.
    h = [acq(1, "r", 1, 0.0, 0.01), acq(2, "r", 2, 0.2, 0.35)]
    assert kinds(h, []) == []
    # Released at 0.1 (invoked): over before lease 2 began.
    h = [acq(1, "r", 1, 0.0, 0.01),
         {"f": "release", "w": 1, "res": "r", "fence": 1, "t0": 0.1,
          "t1": 0.11, "status": 204},
         acq(2, "r", 2, 0.2, 0.21)]
    assert kinds(h, []) == []
    # Extended at 0.25: live until 0.55, over lease 3's start at 0.41.
    h = [acq(1, "r", 1, 0.0, 0.01),
         {"f": "extend", "w": 1, "res": "r", "fence": 1, "t0": 0.25,
          "t1": 0.26, "status": 200, "ttl_ms": 300},
         acq(3, "r", 3, 0.4, 0.41)]
    assert kinds(h, []) == ["two-live-leases"]
    # A refused extend proves nothing.
    h[1]["status"] = 409
    assert kinds(h, []) == []


def test_checker_lease_writes_of_uncertain_token():
    # Through a sidecar-held lease: the application believed fence 5;
    # after its write the sidecar held 7 (it lost 5 and won 7 while the
    # write was under way): tidemark may have sent 7, so the order of
    # that write is not judged. Held 5 after (or held nothing): judged.
    h = [write(1, "a", "r", 6), write(2, "b", "r", 5)]
    h[1].update(state_after="holding", fence_after=7)
    applies = [applied(1, "a", "r", 6), applied(2, "b", "r", 5)]
    assert kinds(h, applies) == []
    h[1].update(state_after="holding", fence_after=5)
    assert kinds(h, applies) == ["stale-applied"]
    h[1].update(state_after="lost", fence_after=7)
    assert kinds(h, applies) == ["stale-applied"]


@pytest.mark.skipif(not hasattr(os, "kill"), reason="needs signals")
def test_chaos_short(tmp_path):
    """Fencing off: stale writes applied, found; on: none, whatever the
    nemesis did, and the paused holders' writes refused (409). The seed
    is in the output to replay it."""
    import chaos
    seed = os.environ.get("CHAOS_SEED") or str(
        random.SystemRandom().randrange(1, 10 ** 9))
    lines = []
    ok, results = chaos.run_both(seed, SHORT_SECONDS * slow(), tmp_path,
                               say=lines.append)
    text = "\n".join(lines)
    print(text)
    off, on = results["off"][0], results["on"][0]
    assert any(v["kind"] == "stale-applied" for v in off), text
    assert on == [], text
    # The paused holders wrote with fencing on too, and were refused.
    assert results["on"][1].get("write 409", 0) >= 1, text
    assert ok, text


@pytest.mark.skipif(not hasattr(os, "kill"), reason="needs signals")
def test_chaos_lease_short(tmp_path):
    """No token in the applications: pods (a worker and its own sidecar,
    which holds the lease) on one Redis, whole pods paused past the TTL
    and sidecars killed. Unbound (mode = off): a paused pod's write is
    applied after its successor's, found; bound (lease = app): none,
    and the paused pods' writes were refused."""
    import chaos
    seed = os.environ.get("CHAOS_SEED") or str(
        random.SystemRandom().randrange(1, 10 ** 9))
    lines = []
    ok, results = chaos.run_both(seed, SHORT_SECONDS * slow(), tmp_path,
                                 say=lines.append, lease=True)
    text = "\n".join(lines)
    print(text)
    off, on = results["off"][0], results["on"][0]
    assert any(v["kind"] == "stale-applied" for v in off), text
    assert on == [], text
    s = results["on"][1]
    assert s.get("fault pause-overtaken landed", 0) >= 1, text
    assert s.get("write 503", 0) + s.get("write 409", 0) >= 1, text
    assert ok, text
