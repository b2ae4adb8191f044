"""The control port's page (GET /): self-contained HTML that shows the
routes, the latest marks and the latest refusals, loaded in headless
Chromium (Debian's chromium)."""
import shutil
import subprocess

import pytest

CHROMIUM = shutil.which("chromium")


def dump_dom(url, tmp_path):
    p = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--user-data-dir=%s" % (tmp_path / "chromium"),
         "--virtual-time-budget=5000", "--dump-dom", url],
        stdin=subprocess.DEVNULL, capture_output=True, timeout=90)
    assert p.returncode == 0, p.stderr.decode(errors="replace")[-2000:]
    return p.stdout.decode(errors="replace")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                    "(make deps installs it)")
def test_page_shows_routes_marks_and_refusals(tidemark, upstream,
                                              tmp_path):
    tm = tidemark()
    assert tm.put("shown", token=9).status == 200
    assert tm.put("shown", token=4).status == 409
    assert tm.put("nothing").status == 428
    status, headers, body = tm.admin("GET", "/")
    assert status == 200
    assert headers["content-type"].startswith("text/html")
    # Self-contained: nothing is loaded from anywhere else.
    assert b"src=" not in body and b"href=" not in body
    dom = dump_dom("http://127.0.0.1:%d/" % tm.admin_port, tmp_path)
    assert "updated " in dom, dom
    assert "<td>docs</td>" in dom and "/v1/documents/{doc}" in dom
    assert "<td>documents/shown</td><td class=\"n\">9</td>" in dom, dom
    assert "<td>stale</td><td>docs</td><td>documents/shown</td>" in dom, dom
    assert "<td>missing</td><td>docs</td><td>documents/nothing</td>" in dom


def test_recent_is_newest_first_and_bounded(tidemark, upstream):
    tm = tidemark()
    for i in range(40):
        assert tm.put("r%d" % i, token=1).status == 200
    import json
    status, _, body = tm.admin("GET", "/v1/recent")
    assert status == 200
    d = json.loads(body)
    assert len(d["marks"]) == 32
    assert d["marks"][0]["resource"] == "documents/r39"
    assert d["routes"][0]["name"] == "docs"
