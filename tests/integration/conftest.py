"""Fixtures and hooks of tidemark's black-box integration tests; the
helpers live in modules by concern: common.py (the binary, ports,
polling), wire.py (the HTTP client on raw sockets), upstream.py (the
recording upstream), daemon.py (tidemark, its config and log, pods),
servers.py (the real stores and backends), lockapi.py (the lock
service's client), scenarios.py (scenarios several files run); tiers.py
tells a test's tier (cluster, backend, packaging, or the fast tier).
"""

import os
import re
import signal
import subprocess

import pytest

import tiers
from common import BIN, REPO, free_port
from daemon import FAILSYNC, Pod, Tidemark
from upstream import Upstream


@pytest.fixture
def port():
    return free_port()


@pytest.fixture
def upstream():
    u = Upstream()
    yield u
    u.stop()
    assert not u.errors, "upstream saw malformed traffic: %r" % u.errors


@pytest.fixture
def upstream_factory():
    made = []

    def make():
        u = Upstream()
        made.append(u)
        return u

    yield make
    for u in made:
        u.stop()


@pytest.fixture
def tidemark(tmp_path, upstream):
    """Factory: tidemark(config=dict, env=dict, ini=str, start=True).

    config maps section names to key dicts merged over a default config
    (proxy/admin on free ports, an lmdb store in tmp_path, upstream
    default = the recording upstream, route docs for
    /v1/documents/{doc}); a None value drops a key or section; giving any
    "route ..." section replaces the default route."""
    made = []

    def make(config=None, env=None, ini=None, start=True, up=upstream,
             name=None):
        d = tmp_path / (name or "tm%d" % len(made))
        tm = Tidemark(d, upstream=up, config=config, env=env, ini=ini)
        made.append(tm)
        if start:
            tm.start()
        return tm

    yield make
    upstream.release_all()
    errors = []
    for tm in made:
        try:
            tm.check_teardown()
        except AssertionError as e:
            errors.append(str(e))
    if errors:
        pytest.fail("\n\n".join(errors), pytrace=False)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "lengths: names and values from outside in each length "
        "class and with odd bytes (make test-sanitize runs them)")
    for name, what in tiers.TIERS.items():
        config.addinivalue_line("markers", "%s: %s" % (name, what))


def _fixture_defs(item):
    """The definitions of every fixture item uses."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    return [d for name in item.fixturenames
            for d in info.name2fixturedefs.get(name, ())]


def _shares_a_server(defs):
    """True when one of defs lives longer than one test and is a test
    file's own (not conftest's, pytest's or xdist's): a server a file
    starts once for its tests."""
    return any(d.scope != "function" and
               getattr(d.func, "__module__", "").startswith("test_")
               for d in defs)


@pytest.hookimpl(tryfirst=True)   # before xdist reads xdist_group
def pytest_collection_modifyitems(config, items):
    """Marks each test with its tier (tiers.py), from the code it and its
    fixtures run; and keeps on one xdist worker (--dist loadgroup) the
    tests of a file that share a server its fixtures start once."""
    for item in items:
        defs = _fixture_defs(item)
        if item.get_closest_marker("packaging") is None:
            tier = tiers.tier_of([item.function] + [d.func for d in defs])
            if tier is not None:
                item.add_marker(getattr(pytest.mark, tier))
        if _shares_a_server(defs):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


@pytest.fixture(scope="session", autouse=True)
def _binary():
    if not BIN.exists():
        pytest.exit("TIDEMARK_BIN %s does not exist: run make" % BIN,
                    returncode=1)


@pytest.fixture(scope="session")
def store_servers():
    """get(kind): the session's server of that kind, running."""
    import servers
    made = {}

    def get(kind):
        s = made.get(kind)
        if s is None:
            s = servers.KINDS[kind]()
            made[kind] = s
        if not s.running():
            s.start()
        return s

    yield get
    for s in made.values():
        s.destroy()


@pytest.fixture
def pods(tidemark):
    """Factory: pods(name, config) -> Pod with its sidecar started (not
    its application: pod.start_app()). Every application is killed and
    every paused process resumed at the end, before the sidecars'
    teardown checks."""
    made = []

    def make(name, config, path="/v1/documents/d", interval_ms=50):
        tm = tidemark(config=config, name=name)
        pod = Pod(tm, name, path, interval_ms)
        made.append(pod)
        return pod

    yield make
    for pod in made:
        pod.stop_app()
        if pod.tm.alive():
            os.kill(pod.tm.proc.pid, signal.SIGCONT)


@pytest.fixture(scope="session")
def failsync():
    """The shim that fails fsync on demand: (its path, the variable that
    names its trigger file)."""
    if not FAILSYNC.exists():
        p = subprocess.run(["make", "-C", str(REPO),
                            "tests/preload/failsync.so"],
                           capture_output=True, timeout=120)
        assert p.returncode == 0 and FAILSYNC.exists(), (
            "cannot build %s:\n%s" % (FAILSYNC, p.stderr.decode()[-2000:]))
    # The variable naming the trigger file, as the shim reads it
    # (FAILSYNC_TRIGGER when this was written).
    m = re.search(rb"[A-Z0-9_]*FAILSYNC_TRIGGER", FAILSYNC.read_bytes())
    assert m, "the shim names no *FAILSYNC_TRIGGER variable"
    return FAILSYNC, m.group(0).decode()
