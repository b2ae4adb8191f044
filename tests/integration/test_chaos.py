"""The randomized history check (tests/chaos/chaos.py), short: with
fencing off its checker must find violations, through tidemark none.
make chaos runs it long."""

import re
import subprocess

from conftest import BIN, REPO


def test_chaos_short():
    p = subprocess.run(
        ["/usr/bin/python3", str(REPO / "tests" / "chaos" / "chaos.py"),
         "--seconds", "6", "--tidemark", str(BIN)],
        stdin=subprocess.DEVNULL, capture_output=True, timeout=240)
    out = p.stdout.decode(errors="replace")
    seed = re.search(r"seed (\d+)", out)
    assert seed, out
    # The seed is printed so that a failure can be replayed (--seed N).
    assert p.returncode == 0, out + p.stderr.decode(errors="replace")[-3000:]
    off = re.search(r"fencing off: .*violations: (.*)", out).group(1)
    on = re.search(r"fencing on: .*violations: (.*)", out).group(1)
    assert sum(int(n) for n in re.findall(r"\d+", off)) > 0, out
    assert all(n == "0" for n in re.findall(r"\d+", on)), out
