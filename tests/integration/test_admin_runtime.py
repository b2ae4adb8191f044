"""The control port changes two things at runtime, behind [admin]
token_file: the log level (PUT /v1/log/level, until a reload) and
readiness (PUT /v1/ready fail: /readyz answers 503 while the data path
keeps serving, until PUT ok); and it drains on PUT /v1/drain as on
SIGTERM."""
import signal

import pytest

from common import slow, wait_until
from daemon import HeldWrite
from test_admin_token import TOKEN, call, token_file


@pytest.fixture
def tm(tidemark, upstream, tmp_path):
    return tidemark({"admin": {"token_file": str(token_file(tmp_path))},
                     "proxy": {"log_level": "warn"}})


def test_the_log_level_changes_at_runtime(tm):
    assert call(tm, "GET", "/v1/log/level", TOKEN)[2] == b"warn\n"
    assert tm.request("GET", "/before").status == 200
    assert call(tm, "PUT", "/v1/log/level", TOKEN, b"info\n")[::2] == \
        (200, b"info\n")
    assert tm.request("GET", "/after").status == 200
    tm.wait_log("event=request", "path=/after")
    assert tm.log_lines("path=/before") == []
    assert tm.log_lines("level=warn admin: log level info, until a reload")
    assert call(tm, "PUT", "/v1/log/level", TOKEN, b"error")[0] == 200
    assert tm.request("GET", "/quiet").status == 200
    tm.proc.send_signal(signal.SIGHUP)
    # The reload sets [proxy] log_level again.
    wait_until(lambda: call(tm, "GET", "/v1/log/level", TOKEN)[2] ==
               b"warn\n", 5 * slow(), "the level back to warn")
    assert tm.log_lines("path=/quiet") == []


@pytest.mark.parametrize("body", [b"verbose", b"", b"info info",
                                  b"x" * 100])
def test_a_bad_level_is_refused_and_changes_nothing(tm, body):
    assert call(tm, "PUT", "/v1/log/level", TOKEN, body)[0] == 400
    assert call(tm, "GET", "/v1/log/level", TOKEN)[2] == b"warn\n"


def test_readiness_fails_and_comes_back(tm):
    assert call(tm, "GET", "/readyz")[0] == 200
    status, _, body = call(tm, "PUT", "/v1/ready", TOKEN, b"fail")
    assert status == 200, body
    status, _, body = call(tm, "GET", "/readyz")
    assert status == 503 and b"failed on the control port" in body, body
    assert tm.put("still", token=2).status == 200
    assert call(tm, "PUT", "/v1/ready", TOKEN, b"maybe")[0] == 400
    assert call(tm, "GET", "/readyz")[0] == 503
    assert call(tm, "PUT", "/v1/ready", TOKEN, b"ok\n")[0] == 200
    assert call(tm, "GET", "/readyz")[0] == 200


@pytest.mark.parametrize("path,body", [("/v1/log/level", b"debug"),
                                       ("/v1/ready", b"fail")])
def test_changes_need_the_token(tm, path, body):
    status, www, _ = call(tm, "PUT", path, None, body)
    assert (status, www) == (401, "Bearer")
    assert call(tm, "GET", "/v1/log/level", TOKEN)[2] == b"warn\n"
    assert call(tm, "GET", "/readyz")[0] == 200


def test_drain_on_the_control_port_then_sigterm(tm):
    """PUT /v1/drain stops as SIGTERM does; asking again, on the port or
    with SIGTERM, joins that one drain: the process still exits 0 once
    the write in flight is answered (no caller loses its end)."""
    assert call(tm, "PUT", "/v1/log/level", TOKEN, b"info")[0] == 200
    held = HeldWrite(tm, "drain", 3)
    assert call(tm, "PUT", "/v1/drain", TOKEN) == (202, None, b"draining\n")
    wait_until(lambda: not tm._listening(), 5 * slow(),
               "the listener to close")
    status, _, body = call(tm, "GET", "/readyz")
    assert status == 503 and body.endswith(b"\ndraining\n"), body
    assert call(tm, "PUT", "/v1/drain", TOKEN) == (200, None, b"draining\n")
    tm.proc.send_signal(signal.SIGTERM)
    tm.wait_log("signal 15: draining")
    held.release_and_exit_0()
    assert len(tm.log_lines("admin: drain asked on the control port")) == 1
    assert len(tm.log_lines("stopping: 1 connections open")) == 1


def test_drain_alone_exits_when_the_last_request_ends(tm):
    held = HeldWrite(tm, "alone", 3)
    assert call(tm, "PUT", "/v1/drain", TOKEN)[0] == 202
    wait_until(lambda: not tm._listening(), 5 * slow(),
               "the listener to close")
    held.release_and_exit_0()


@pytest.mark.parametrize("method,token", [("PUT", None), ("GET", TOKEN),
                                          ("POST", TOKEN)])
def test_drain_needs_a_put_with_the_token(tm, method, token):
    assert call(tm, method, "/v1/drain", token)[0] == (401 if token is None
                                                       else 400)
    assert tm._listening() and call(tm, "GET", "/readyz")[0] == 200
