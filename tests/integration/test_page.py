"""The control port's page (GET /): a self-contained operator's dashboard
(readiness, version, uptime, counts, refusals, current marks, held locks,
routes), loaded and photographed in headless Chromium (Debian's
chromium) after real writes, refusals and locks."""
import json
import os
import re
import shutil
import struct
import subprocess
import zlib

import pytest

from common import BIN, free_port, slow, wait_until
from daemon import HeldWrite

CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (make deps "
    "installs it)")

WHEN = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
REFUSAL_BG = (253, 236, 234)  # tr.refusal td: #fdecea
REFUSAL_MARK = (180, 35, 24)  # a refusal on the timeline: #b42318


def chromium(tmp_path, *args):
    p = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-quic", "--no-first-run", "--hide-scrollbars",
         "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--user-data-dir=%s" % (tmp_path / "chromium"),
         "--window-size=1280,900", "--virtual-time-budget=5000"]
        + list(args),
        stdin=subprocess.DEVNULL, capture_output=True, timeout=90 * slow())
    assert p.returncode == 0, p.stderr.decode(errors="replace")[-2000:]
    return p.stdout.decode(errors="replace")


def dump_dom(url, tmp_path):
    return chromium(tmp_path, "--dump-dom", url)


def png_pixels(data):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB(A),
    non-interlaced PNG: what Chromium's screenshots are."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(
                ">IIBBBBB", chunk)
            assert depth == 8 and ctype in (2, 6) and interlace == 0
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + n
    bpp = 4 if ctype == 6 else 3
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                pr = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pr) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return w, h, rows


def refusal_bands(shot):
    """((width, height), pixels, the first y of each band of rows whose
    refusal colour fills more than half the width) of a screenshot."""
    w, h, pixels = png_pixels(shot.read_bytes())
    rows = [y for y in range(h)
            if sum(1 for p in pixels[y] if p == REFUSAL_BG) > w // 2]
    bands = [y for i, y in enumerate(rows) if i == 0 or rows[i - 1] != y - 1]
    return (w, h), pixels, bands


def rows_of(dom, table_id):
    """The cells of each body row of the table with id table_id."""
    m = re.search(r'<table id="%s">.*?<tbody>(.*?)</tbody>' % table_id, dom,
                  re.S)
    assert m, table_id
    return [re.findall(r"<td[^>]*>(.*?)</td>", tr)
            for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", m.group(1), re.S)]


@needs_chromium
def test_dashboard_shows_what_happened(tidemark, upstream, tmp_path):
    # a [watch] on an etcd address nobody serves: shown, not required
    tm = tidemark(config={"watch w": {
        "endpoints": "http://127.0.0.1:%d" % free_port(),
        "prefix": "locks/", "required": "no"}})
    tm.wait_log("watch w: cannot follow its locks")
    assert tm.put("a", token=5).status == 200
    assert tm.put("b", token=3).status == 200
    assert tm.put("a", token=7).status == 200
    assert tm.put("a", token=4).status == 409
    assert tm.put("c").status == 428
    status, _, body = tm.admin("POST", "/v1/locks/jobs/nightly?ttl_ms=600000")
    assert status == 201
    fence = json.loads(body)["fence"]
    status, headers, page = tm.admin("GET", "/")
    assert status == 200
    assert headers["content-type"].startswith("text/html")
    # Self-contained: nothing is loaded from anywhere else.
    assert b"src=" not in page and b"href=" not in page

    dom = dump_dom("http://127.0.0.1:%d/" % tm.admin_port, tmp_path)
    version = subprocess.run([str(tm_bin()), "--version"],
                             capture_output=True).stdout.decode().split()[1]
    assert '<span id="version">%s</span>' % version in dom
    assert '<span id="store" class="pill ok">ready</span>' in dom
    assert '<span id="locks" class="pill ok">ready</span>' in dom
    assert '<span id="watches" class="pill bad">unavailable</span>' in dom
    assert '<b id="accepted">3</b>' in dom
    assert '<b id="refused">2</b>' in dom
    assert re.search(r'<span id="started">%s</span>' % WHEN, dom)
    assert re.search(r'<span id="state">updated %s</span>' % WHEN, dom)
    # One row per resource, its current mark, the latest written first.
    marks = rows_of(dom, "marks")
    assert [r[:2] for r in marks] == [["documents/a", "7"],
                                      ["documents/b", "3"]]
    assert all(re.fullmatch(WHEN, r[2]) for r in marks)
    held = rows_of(dom, "locks-held")
    assert [r[:2] for r in held] == [["jobs/nightly", str(fence)]]
    assert 0 < float(held[0][2].split()[0]) <= 600
    refusals = rows_of(dom, "refusals")
    assert [r[1:] for r in refusals] == [
        ["428", "missing", "docs", "documents/c", "\u2014", "0"],
        ["409", "stale", "docs", "documents/a", "4", "7"]]
    assert all(re.fullmatch(WHEN, r[0]) for r in refusals)
    # Every write and refusal, with who sent it, newest first; the
    # timeline draws each of them.
    events = rows_of(dom, "events")
    assert [r[1:6] for r in events] == [
        ["428", "missing", "documents/c", "\u2014", "0"],
        ["409", "stale", "documents/a", "4", "7"],
        ["200", "accepted", "documents/a", "7", "7"],
        ["200", "accepted", "documents/b", "3", "3"],
        ["200", "accepted", "documents/a", "5", "5"]]
    assert all(re.fullmatch(r"127\.0\.0\.1:\d+", r[6]) for r in events)
    assert all(re.fullmatch(r"[0-9a-f]{32}", r[7]) for r in events)
    assert dom.count('<g class="tl-mark">') == 3
    assert dom.count('<g class="tl-refused">') == 2
    routes = rows_of(dom, "routes")
    assert routes[0][:4] == ["docs", "PUT POST PATCH DELETE",
                             "/v1/documents/{doc}", "documents/{doc}"]

    # At 1280x900, the refusals are on screen without scrolling: their
    # rows' colour fills two rows' width in the screenshot, in the
    # refusals table and again in the history.
    shot = tmp_path / "dashboard.png"
    chromium(tmp_path, "--screenshot=%s" % shot,
             "http://127.0.0.1:%d/" % tm.admin_port)
    (w, h), pixels, bands = refusal_bands(shot)
    assert (w, h) == (1280, 900)
    assert len(bands) == 4, bands


def tm_bin():
    return BIN


def test_released_lock_leaves_the_page(tidemark, upstream):
    tm = tidemark()
    status, _, body = tm.admin("POST", "/v1/locks/jobs/x?ttl_ms=60000")
    assert status == 201
    token = json.loads(body)["token"]
    d = json.loads(tm.admin("GET", "/v1/recent")[2])
    assert [lk["name"] for lk in d["locks"]] == ["jobs/x"]
    assert tm.admin("DELETE", "/v1/locks/jobs/x?token=%s" % token)[0] == 204
    d = json.loads(tm.admin("GET", "/v1/recent")[2])
    assert d["locks"] == []


def test_marks_are_one_per_resource_newest_first_and_bounded(tidemark,
                                                             upstream):
    tm = tidemark()
    for i in range(40):
        assert tm.put("r%d" % i, token=1).status == 200
    assert tm.put("r5", token=2).status == 200
    status, _, body = tm.admin("GET", "/v1/recent")
    assert status == 200
    d = json.loads(body)
    assert len(d["marks"]) == 32
    assert [m["resource"] for m in d["marks"][:2]] == ["documents/r5",
                                                       "documents/r39"]
    assert d["marks"][0]["mark"] == 2
    names = [m["resource"] for m in d["marks"]]
    assert len(set(names)) == len(names)
    assert d["accepted"] == 41
    assert d["routes"][0]["name"] == "docs"


def test_history_holds_every_write_and_refusal_in_order(tidemark, upstream):
    """A burst on three resources: /v1/recent lists every accepted write and
    every refusal, newest first, with its client and request id and the
    answer the client got, the last 128 of them; a refusal without a
    token shows the known mark."""
    tm = tidemark()
    marks, expected = {}, []
    for i in range(150):
        res = "documents/r%d" % (i % 3)
        token, status, reason = i + 10, None, "accepted"
        if i % 4 == 3:
            token, status, reason = None, 428, "missing"
        elif i % 4 == 2 and marks.get(res, 0) > 1:
            token, status, reason = 1, 409, "stale"
        r = tm.put(res.split("/")[1], token=token,
                   headers={"X-Request-Id": "burst-%d" % i})
        assert r.status == (status or 200)
        if status is None:
            marks[res] = token
        expected.append({"resource": res, "status": status or 200,
                         "accepted": status is None, "reason": reason,
                         "token": token, "mark": marks.get(res, 0),
                         "request_id": "burst-%d" % i, "seq": i + 1})
    d = json.loads(tm.admin("GET", "/v1/recent")[2])
    assert d["events_total"] == 150
    got = [{k: e[k] for k in expected[0]} for e in d["events"]]
    assert got == expected[::-1][:128]
    assert all(re.fullmatch(r"127\.0\.0\.1:\d+", e["client"])
               for e in d["events"])


def test_an_accepted_write_shows_the_answer_it_got(tidemark, upstream):
    """An accepted write's event is in flight (status null) until the
    upstream answers; then it shows the upstream's status, or tidemark's
    502 or 504 with the reason when the upstream failed."""
    tm = tidemark({"upstream default": {"timeout_ms": "300"}})

    def event(resource):
        d = json.loads(tm.admin("GET", "/v1/recent")[2])
        return next(e for e in d["events"] if e["resource"] == resource)

    held = HeldWrite(tm, "held", 5)
    got = event("documents/held")
    assert (got["accepted"], got["status"], got["reason"]) == (
        True, None, "accepted")
    upstream.release("held")
    held.thread.join(10 * slow())
    assert held.answer.status == 200
    got = event("documents/held")
    assert (got["status"], got["reason"]) == (200, "accepted")
    cases = [("X-Test-Status", "500", 500, 500, "accepted"),
             ("X-Test-Drop", "1", 502, 502, "upstream failed"),
             ("X-Test-Delay-Ms", "2000", 504, 504, "upstream timeout")]
    for i, (h, v, answer, status, reason) in enumerate(cases):
        r = tm.put("w%d" % i, token=6 + i,
                   headers={h: v})
        assert r.status == answer, r
        got = event("documents/w%d" % i)
        assert (got["accepted"], got["status"], got["reason"], got["mark"]) \
            == (True, status, reason, 6 + i), got


def test_a_refusal_without_a_token_shows_the_stored_mark(tidemark,
                                                         upstream):
    """After a restart the page's tables are empty and so is the cache: a
    428's event shows the mark read from the store, not 0."""
    tm = tidemark()
    assert tm.put("kept", token=9).status == 200
    assert tm.stop() == 0
    tm.start()
    assert tm.put("kept").status == 428

    def shown():
        d = json.loads(tm.admin("GET", "/v1/recent")[2])
        return d["events"][0]["mark"], d["refusals"][0]["mark"]
    wait_until(lambda: shown() == (9, 9), 5 * slow(), "the stored mark")


def fenced_out_lease(tm):
    """A lease of documents/a, then a write with a token above its fence
    (issued elsewhere): the lease's holder is fenced out. Its fence."""
    status, _, body = tm.admin("POST", "/v1/locks/documents/a?ttl_ms=600000")
    assert status == 201
    fence = json.loads(body)["fence"]
    got = json.loads(tm.admin("GET", "/v1/locks/documents/a")[2])
    assert (got["mark"], got["below_mark"]) == (fence, False)
    assert tm.put("a", token=fence + 5).status == 200
    return fence


def test_lease_below_its_mark_is_flagged_in_json(tidemark, upstream):
    tm = tidemark()
    fence = fenced_out_lease(tm)
    got = json.loads(tm.admin("GET", "/v1/locks/documents/a")[2])
    assert (got["fence"], got["mark"], got["below_mark"]) == (
        fence, fence + 5, True)
    d = json.loads(tm.admin("GET", "/v1/recent")[2])
    [lease] = d["locks"]
    assert (lease["name"], lease["fence"], lease["mark"],
            lease["below_mark"]) == ("documents/a", fence, fence + 5, True)
    assert re.fullmatch(r"127\.0\.0\.1:\d+", lease["holder"])


@needs_chromium
def test_lease_below_its_mark_is_flagged_on_the_page(tidemark, upstream,
                                                     tmp_path):
    tm = tidemark()
    fence = fenced_out_lease(tm)
    dom = dump_dom("http://127.0.0.1:%d/" % tm.admin_port, tmp_path)
    assert '<tr class="fenced-out">' in dom
    [row] = rows_of(dom, "locks-held")
    assert row[0:2] == ["documents/a", str(fence)]
    assert row[4] == "%d \u2014 fence below the mark: fenced out" % (
        fence + 5)


@needs_chromium
def test_burst_is_readable_on_the_page(tidemark, upstream, tmp_path):
    """What an operator looks at after a burst on a few resources: the
    history's newest rows are on the first screen, each refusal in its
    own colour band. TIDEMARK_SCREENSHOTS=DIR keeps the picture."""
    tm = tidemark()
    refused = 0
    for i in range(24):
        doc, token = "r%d" % (i % 3), 10 + i
        if i % 5 == 4:
            token = 1
        elif i % 7 == 6:
            token = None
        r = tm.put(doc, token=token, headers={"X-Request-Id": "b-%d" % i})
        refused += r.status != 200
    assert refused == 7
    shot = tmp_path / "burst.png"
    chromium(tmp_path, "--window-size=1280,1800", "--screenshot=%s" % shot,
             "http://127.0.0.1:%d/" % tm.admin_port)
    keep = os.environ.get("TIDEMARK_SCREENSHOTS")
    if keep:
        shutil.copy(shot, os.path.join(keep, "burst.png"))
    (w, h), pixels, bands = refusal_bands(shot)
    assert (w, h) == (1280, 1800)
    # Each refusal row is its own band (the rows' borders part them): the
    # refusals table's 7 and the history's 7.
    assert len(bands) == 14, bands
    # The burst took under a second: on the timeline each resource's
    # refusals sit on its writes, and are drawn over them.
    assert any(p == REFUSAL_MARK for line in pixels[bands[-1]:]
               for p in line)
