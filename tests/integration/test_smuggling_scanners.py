"""The mutations of public request-smuggling scanners, each sent through
tidemark: every one is refused (400, the connection closed, nothing
forwarded) or framed one way only (forwarded with tidemark's framing, no
header left that any server reads as Transfer-Encoding or
Content-Length, the connection still in step).

The rows follow defparam/smuggler (configs/default.py, exhaustive.py,
doubles.py: the Transfer-Encoding gadget beside a Content-Length, as
that scanner sends it) and PortSwigger's HTTP Request Smuggler
(DesyncBox.applyDesync: its techniques on Transfer-Encoding and on
Content-Length), plus the classic cases: chunKed, xchunked, two
Transfer-Encodings, Transfer-Encoding in HTTP/1.0."""
import re

import pytest

from wire import Closed

# What a row must come back as.
REFUSED = "400"  # 400 bad-request, closed, not forwarded
BY_LENGTH = "cl"  # forwarded, framed by Content-Length alone
CHUNKED = "chunked"  # forwarded, framed as chunked
NOT_IMPL = "501"  # 501 not-implemented, closed, not forwarded

# The body smuggler sends with its TE.CL probe: chunked, it ends after
# "0\r\n\r\n" and leaves "X" as the start of another request; by length
# it is six bytes.
BODY = b"0\r\n\r\nX"


def smuggler_request(row, gadget, version="HTTP/1.1", length=True,
                     body=BODY):
    """The request smuggler's render_template builds around a gadget (a
    header line, or lines, without the final CRLF)."""
    if isinstance(gadget, str):
        gadget = gadget.encode("latin-1")
    head = b"POST /smug/%d?cb=%d %s\r\n" % (row, row, version.encode())
    head += gadget + b"\r\n"
    head += b"Host: client.test\r\nX-Row: %d\r\n" % row
    head += b"User-Agent: smuggler\r\n"
    head += b"Content-type: application/x-www-form-urlencoded\r\n"
    if length:
        head += b"Content-Length: %d\r\n" % len(body)
    return head + b"\r\n" + body


def portswigger(technique, header="Transfer-Encoding", value="chunked"):
    """The header line(s) DesyncBox.applyDesync makes of header: value
    (only the techniques that change the header line in HTTP/1.1)."""
    h = header + ": "
    line = h + value
    simple = {
        "vanilla": line,
        "underjoin1": h.replace("-", "_") + value,
        "spacejoin1": h.replace("-", " ") + value,
        "space1": h.replace(":", " :") + value,
        "nameprefix1": "Foo: bar\r\n " + line,
        "nameprefix2": "Foo: bar\r\n\t" + line,
        "valueprefix1": h + " " + value,
        "nospace1": h.replace(" ", "") + value,
        "linewrapped1": h.replace(" ", "\n ") + value,
        "gareth1": h.replace(":", "\n :") + value,
        "badsetupCR": "Foo: bar\r" + line,
        "badsetupLF": "Foo: bar\n" + line,
        "vertwrap": h + "\n\x0b" + value,
        "tabwrap": h + "\r\n\t" + value,
        "multiCase": h[0].lower() + h[1:].upper() + value,
        "UPPERCASE": h.upper() + value,
        "0dwrap": "Foo: bar\r\n\r" + line,
        "0dspam": h[:3] + "\r" + h[3:] + value,
        "connection": "Connection: " + header + "\r\n" + line,
        "spjunk": h.replace(":", " x:") + value,
        "backslash": h.replace("-", "\\") + value,
        "spaceFF": h[:-1] + "\xff" + value,
        "unispace": h[:-1] + "\xa0" + value,
        "badwrap": "X-Blah-Ignore: " + value + "\r\n " + line,
    }
    return simple[technique]


PS_TE_ONLY = {
    "commaCow": "Transfer-Encoding: chunked, identity",
    "cowComma": "Transfer-Encoding: identity, chunked",
    "contentEnc": "Content-Encoding: chunked",
    "quoted": "Transfer-Encoding: \"chunked\"",
    "aposed": "Transfer-Encoding: 'chunked'",
    "dualchunk": "Transfer-Encoding: chunked\r\nTransfer-encoding: identity",
    "lazygrep": "Transfer-Encoding: chunk",
    "0dsuffix": "Transfer-Encoding: chunked\r",
    "tabsuffix": "Transfer-Encoding: chunked\t",
    "revdualchunk":
        "Transfer-Encoding: identity\r\nTransfer-Encoding: chunked",
    "bodysplit": "X: y\r\nFoo: barn\n\nTransfer-Encoding: chunked",
    "nested": "Transfer-Encoding: identity, chunked, identity",
    "http2hide": "Foo: b^~Transfer-Encoding: chunked^~x: x",
    "encode": "Transfer-%45ncoding: chunked",
    "h2colon": "Transfer-Encoding`chunked : chunked",
    "h2auth": ":authority: client.test:443^~Transfer-Encoding: chunked^~x: x",
    "h2path": ":path: /smug HTTP/1.1^~Transfer-Encoding: chunked^~x: x",
    "http2case": "x-reject: 1\r\ntransfer-Encoding: chunked",
    "h2scheme": ":scheme: https://client.test/smug HTTP/1.1^~"
                "Transfer-Encoding: chunked^~x: x",
    "h2name": "Transfer-Encoding`chunked^~xz: x",
    "h2method": ":method: POST /smug HTTP/1.1^~Transfer-Encoding: chunked"
                "^~x: x",
    "h2space": "Transfer-Encoding chunked : chunked",
    "accentTE": "Transf\x82r-Encoding: chunked",
    "accentCH": "Transfer-Encoding: ch\x96nked",
}

# The only PortSwigger rows that reach the upstream: the gadget is no
# Transfer-Encoding for any server (another header, or a name nobody
# decodes), so Content-Length alone frames the body.
PS_FORWARDED = {"contentEnc", "http2hide", "encode", "h2name"}

PS_SPECIAL = [0, 9, 11, 12, 13, 127]  # DesyncBox.getSpecialChars


def portswigger_rows():
    rows = []
    for t in ("vanilla", "underjoin1", "spacejoin1", "space1", "nameprefix1",
              "nameprefix2", "valueprefix1", "nospace1", "linewrapped1",
              "gareth1", "badsetupCR", "badsetupLF", "vertwrap", "tabwrap",
              "multiCase", "UPPERCASE", "0dwrap", "0dspam", "connection",
              "spjunk", "backslash", "spaceFF", "unispace", "badwrap"):
        rows.append(("ps-te-" + t, portswigger(t), REFUSED))
    for t, line in PS_TE_ONLY.items():
        rows.append(("ps-te-" + t, line,
                     BY_LENGTH if t in PS_FORWARDED else REFUSED))
    for i in PS_SPECIAL:
        rows.append(("ps-spacefix1-%d" % i,
                     "Transfer-Encoding:%cchunked" % i, REFUSED))
        rows.append(("ps-prefix1-%d" % i,
                     "Transfer-Encoding: %cchunked" % i, REFUSED))
        rows.append(("ps-suffix1-%d" % i,
                     "Transfer-Encoding: chunked%c" % i, REFUSED))
    return rows


# smuggler's exhaustive.py, by name.
SMUGGLER_NAMED = [
    ("nameprefix1", " Transfer-Encoding: chunked", REFUSED),
    ("tabprefix1", "Transfer-Encoding:\tchunked", REFUSED),
    ("tabprefix2", "Transfer-Encoding\t:\tchunked", REFUSED),
    ("spacejoin1", "Transfer Encoding: chunked", REFUSED),
    ("underjoin1", "Transfer_Encoding: chunked", REFUSED),
    ("smashed", "Transfer Encoding:chunked", REFUSED),
    ("space1", "Transfer-Encoding : chunked", REFUSED),
    ("valueprefix1", "Transfer-Encoding:  chunked", REFUSED),
    ("vertprefix1", "Transfer-Encoding:\x0bchunked", REFUSED),
    ("commaCow", "Transfer-Encoding: chunked, cow", REFUSED),
    ("cowComma", "Transfer-Encoding: cow, chunked", REFUSED),
    ("contentEnc", "Content-Encoding: chunked", BY_LENGTH),
    ("linewrapped1", "Transfer-Encoding:\n chunked", REFUSED),
    ("quoted", "Transfer-Encoding: \"chunked\"", REFUSED),
    ("aposed", "Transfer-Encoding: 'chunked'", REFUSED),
    ("lazygrep", "Transfer-Encoding: chunk", REFUSED),
    ("sarcasm", "TrAnSFer-EnCODinG: cHuNkeD", REFUSED),
    ("yelling", "TRANSFER-ENCODING: CHUNKED", REFUSED),
    ("0dsuffix", "Transfer-Encoding: chunked\r", REFUSED),
    ("tabsuffix", "Transfer-Encoding: chunked\t", REFUSED),
    ("revdualchunk", "Transfer-Encoding: cow\r\nTransfer-Encoding: chunked",
     REFUSED),
    ("0dspam", "Transfer\r-Encoding: chunked", REFUSED),
    ("nested", "Transfer-Encoding: cow chunked bar", REFUSED),
    ("spaceFF", "Transfer-Encoding:\xffchunked", REFUSED),
    ("accentCH", "Transfer-Encoding: ch\x96nked", REFUSED),
    ("accentTE", "Transf\x82r-Encoding: chunked", REFUSED),
    ("x-rout", "X:X\rTransfer-Encoding: chunked", REFUSED),
    ("x-nout", "X:X\nTransfer-Encoding: chunked", REFUSED),
]

EXHAUSTIVE_BYTES = list(range(0x01, 0x20)) + list(range(0x7f, 0x100))
DEFAULT_BYTES = [0x1, 0x4, 0x8, 0x9, 0xa, 0xb, 0xc, 0xd, 0x1f, 0x20, 0x7f,
                 0xa0, 0xff]
# Bytes a header value may hold as they are (HT, SP, obs-text): in
# "X: X<b>Transfer-Encoding: chunked" the gadget is X's value there.
VALUE_BYTES = {0x09, 0x20} | set(range(0x80, 0x100))


# doubles.py: one byte twice, around the name, the colon or the value.
DOUBLES = [("%02x-%02x-XX-XX", "%cTransfer-Encoding%c: chunked"),
           ("%02x-XX-%02x-XX", "%cTransfer-Encoding:%cchunked"),
           ("%02x-XX-XX-%02x", "%cTransfer-Encoding: chunked%c"),
           ("XX-%02x-%02x-XX", "Transfer-Encoding%c:%cchunked"),
           ("XX-%02x-XX-%02x", "Transfer-Encoding%c: chunked%c"),
           ("XX-XX-%02x-%02x", "Transfer-Encoding:%cchunked%c")]


def smuggler_rows():
    rows = list(SMUGGLER_NAMED)
    # exhaustive.py, and default.py's bytes (0x20 too): all refused
    for i in sorted(set(EXHAUSTIVE_BYTES) | set(DEFAULT_BYTES)):
        rows.append(("midspace-%02x" % i, "Transfer-Encoding:%cchunked" % i,
                     REFUSED))
        rows.append(("postspace-%02x" % i, "Transfer-Encoding%c: chunked" % i,
                     REFUSED))
        rows.append(("prespace-%02x" % i, "%cTransfer-Encoding: chunked" % i,
                     REFUSED))
        rows.append(("endspace-%02x" % i, "Transfer-Encoding: chunked%c" % i,
                     REFUSED))
    for i in DEFAULT_BYTES:  # default.py's other families
        rows.append(("xprespace-%02x" % i,
                     "X: X%cTransfer-Encoding: chunked" % i,
                     BY_LENGTH if i in VALUE_BYTES else REFUSED))
        rows.append(("endspacex-%02x" % i,
                     "Transfer-Encoding: chunked%cX: X" % i, REFUSED))
        rows.append(("rxprespace-%02x" % i,
                     "X: X\r%cTransfer-Encoding: chunked" % i, REFUSED))
        rows.append(("xnprespace-%02x" % i,
                     "X: X%c\nTransfer-Encoding: chunked" % i, REFUSED))
        rows.append(("endspacerx-%02x" % i,
                     "Transfer-Encoding: chunked\r%cX: X" % i, REFUSED))
        rows.append(("endspacexn-%02x" % i,
                     "Transfer-Encoding: chunked%c\nX: X" % i, REFUSED))
    for i in list(range(0x01, 0x21)) + list(range(0x7f, 0x100)):
        # doubles.py: every one holds a Transfer-Encoding or a broken line
        for name, form in DOUBLES:
            rows.append(("dbl-" + name % (i, i), form % (i, i), REFUSED))
    return rows


CLASSIC = [
    ("chunKed", "Transfer-Encoding: chunKed", REFUSED),
    ("xchunked", "Transfer-Encoding: xchunked", REFUSED),
    ("double-te", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked",
     REFUSED),
    ("te-cl-underscore", "Transfer-Encoding: chunked\r\nContent_Length: 6",
     REFUSED),
]


def cl_rows():
    """PortSwigger's techniques on Content-Length, beside the
    Content-Length the template sends: every spelling is refused."""
    rows = []
    for t in ("vanilla", "underjoin1", "spacejoin1", "space1", "nameprefix1",
              "nameprefix2", "valueprefix1", "nospace1", "linewrapped1",
              "gareth1", "badsetupCR", "badsetupLF", "vertwrap", "tabwrap",
              "multiCase", "UPPERCASE", "0dwrap", "0dspam", "connection",
              "spjunk", "backslash", "spaceFF", "unispace", "badwrap"):
        rows.append(("ps-cl-" + t,
                     portswigger(t, "Content-Length", "%d" % len(BODY)),
                     REFUSED))
    return rows


# Without a Content-Length of the template's: the gadget alone frames
# the body, or is refused. (request options, gadget, expected)
ALONE = [
    ("te-alone", {}, "Transfer-Encoding: chunked", CHUNKED),
    ("te-underscore-alone", {}, "Transfer_Encoding: chunked", REFUSED),
    ("te-dot-alone", {}, "transfer.encoding: chunked", REFUSED),
    ("cl-underscore-alone", {}, "Content_Length: 6", REFUSED),
    # A coding tidemark does not know, under a final chunked: 501; with
    # no final chunked the body has no framing at all: 400.
    ("gzip-chunked-alone", {}, "Transfer-Encoding: gzip, chunked", NOT_IMPL),
    ("xchunked-alone", {}, "Transfer-Encoding: xchunked", REFUSED),
    ("te-in-http10", {"version": "HTTP/1.0"}, "Transfer-Encoding: chunked",
     REFUSED),
    ("te-cl-in-http10", {"version": "HTTP/1.0", "length": True},
     "Transfer-Encoding: chunked", REFUSED),
]

FAMILIES = {
    "smuggler": smuggler_rows,
    "portswigger-te": portswigger_rows,
    "portswigger-cl": cl_rows,
    "classic": lambda: CLASSIC,
}


def server_name(name):
    """A header name as the most forgiving server reads it (hname.h)."""
    return re.sub(r"[^a-z0-9]", "-", name.lower())


def read_answer(c):
    try:
        return c.read_response()
    except Closed:
        return None


def check_row(tm, upstream, row, name, data, want):
    """Send one mutation; None when it came back as want, else why not."""
    with tm.conn(timeout=5.0) as c:
        c.send(data)
        r = read_answer(c)
        if want in (REFUSED, NOT_IMPL):
            status = int(want)
            if r is None or r.status != status:
                return "%s: got %r, want %d" % (name, r, status)
            if r.header("Tidemark-Error") != \
                    ("bad-request" if status == 400 else "not-implemented"):
                return "%s: %r is not tidemark's own" % (name, r)
            if not c.closed():
                return "%s: connection left open after %d" % (name, status)
            if upstream.find("X-Row", str(row)):
                return "%s: forwarded though refused" % name
            return None
        if r is None or r.status != 200:
            return "%s: got %r, want 200 (forwarded)" % (name, r)
        seen = upstream.find("X-Row", str(row))
        if len(seen) != 1:
            return "%s: upstream saw %d requests" % (name, len(seen))
        got = seen[0]
        framing = [k for k, _ in got.headers
                   if server_name(k) in ("transfer-encoding",
                                         "content-length")]
        if want == BY_LENGTH:
            if got.body != BODY or framing != ["Content-Length"] or \
                    got.header("Content-Length") != str(len(BODY)):
                return "%s: upstream got %r, framing %r" % (name, got.body,
                                                            framing)
        elif got.body != b"Z" or framing != ["Transfer-Encoding"]:
            return "%s: upstream got %r, framing %r" % (name, got.body,
                                                        framing)
        # The next request on the connection is read where tidemark
        # said the body ended.
        c.send(b"GET /after/%d HTTP/1.1\r\nHost: client.test\r\n\r\n" % row)
        r = read_answer(c)
        if r is None or r.status != 200 or \
                not r.body.startswith(b"ok GET /after/%d" % row):
            return "%s: out of step after it: %r" % (name, r)
    return None


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_scanner_mutations(tidemark, upstream, family):
    tm = tidemark()
    rows = FAMILIES[family]()
    assert len({r[0] for r in rows}) == len(rows), "duplicate row names"
    failures = []
    for i, (name, gadget, want) in enumerate(rows):
        why = check_row(tm, upstream, i, name, smuggler_request(i, gadget),
                        want)
        if why is not None:
            failures.append(why)
    assert failures == [], "%d of %d rows:\n%s" % (
        len(failures), len(rows), "\n".join(failures))


@pytest.mark.parametrize("name,opts,gadget,want", ALONE,
                         ids=[a[0] for a in ALONE])
def test_gadget_alone(tidemark, upstream, name, opts, gadget, want):
    tm = tidemark()
    opts = dict(opts)
    length = opts.pop("length", False)
    body = BODY if length else b"1\r\nZ\r\n0\r\n\r\n"
    data = smuggler_request(0, gadget, length=length, body=body, **opts)
    assert check_row(tm, upstream, 0, name, data, want) is None
