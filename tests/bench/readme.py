#!/usr/bin/python3
"""make bench-readme: the README's paragraph on speed, made from the
bench summaries kept in tests/bench/results (QUOTED below names them), so
that every figure it gives is one a run printed. With --check (make
check-docs), exits 1 and says so if the README's paragraph is not what
the summaries make; without, rewrites it in place.

To quote a new run: copy its summary.txt into tests/bench/results under
a name of its own, point QUOTED at it, and run make bench-readme."""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "bench" / "results"
README = ROOT / "README.md"
BEGIN = "<!-- speed: made by make bench-readme from tests/bench/results -->"
END = "<!-- speed: end -->"

# The runs the paragraph quotes: the equal path and many clients (make
# bench, BENCH_SET=clients), the equal path with an access line a
# request (BENCH_LOG=text and json), instructions a request (make
# bench-instr), durable raises beside the references (make bench,
# BENCH_SET=raises).
QUOTED = {
    "clients": "summary-pinned-clients-32-10000-af0536a.txt",
    "log_text": "summary-pinned-log-text.txt",
    "log_json": "summary-pinned-log-json.txt",
    "log_text_ngxbuf": "summary-pinned-log-text-nginx-buffered.txt",
    "instr": "summary-instr-61431b3.txt",
    "raises": "summary-pinned-raises-ef3b46f.txt",
}


class Missing(Exception):
    pass


def rows(text):
    """The main table of a make bench summary: {(case, target): fields},
    fields named as its columns."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        # case target req/s p99 "ms" vs p99-vs CPU syscalls conn RSS
        # non-2xx sock-err lost
        if len(f) == 14 and f[4] == "ms" and re.match(r"\w+-c\d+", f[0]):
            out[(f[0], f[1])] = {
                "rps": float(f[2]), "vs": f[5], "errors": int(f[11]) +
                int(f[12])}
    return out


def runs(text):
    """{(case, target): [requests/s of each run]} from the summary's
    "requests/s of each run" list."""
    out = {}
    part = text.split("requests/s of each run", 1)
    if len(part) < 2:
        return out
    for line in part[1].splitlines()[1:]:
        f = line.split()
        if len(f) < 3 or not re.match(r"\w+-c\d+", f[0]):
            break
        out[(f[0], f[1])] = [float(x) for x in f[2:]]
    return out


def cell(table, case, target, path):
    try:
        return table[(case, target)]
    except KeyError:
        raise Missing("%s: no row for %s %s" % (path, case, target))


def ratio(value):
    """"0.94x" -> 0.94."""
    return float(value.rstrip("x"))


def within(spread, case):
    """Whether tidemark's and nginx's runs of case overlap."""
    a = spread.get((case, "tidemark"))
    b = spread.get((case, "nginx"))
    return bool(a and b) and min(a) <= max(b) and min(b) <= max(a)


def read(name):
    path = RESULTS / QUOTED[name]
    try:
        return path.read_text(), "tests/bench/results/" + QUOTED[name]
    except OSError as e:
        raise Missing("%s: %s" % (path, e.strerror))


def one_figure(values, digits=1):
    """"1.5x" when the values agree to digits, else "1.49x and 1.50x"."""
    short = {"%.*fx" % (digits, v) for v in values}
    if len(short) == 1:
        return short.pop()
    return " and ".join("%.2fx" % v for v in values)


def paragraph():
    text, cpath = read("clients")
    table, spread = rows(text), runs(text)
    r1000 = cell(table, "equal-c32-r1000", "tidemark", cpath)
    r1 = cell(table, "equal-c32-r1", "tidemark", cpath)
    many = [cell(table, "equal-c10000-r%s" % r, "tidemark", cpath)
            for r in ("1000", "1")]
    errors = sum(m["errors"] for m in many)
    spread_note = ""
    if within(spread, "equal-c32-r1000") and within(spread, "equal-c32-r1"):
        spread_note = ", within the runs' spread"

    logged = {}
    for form in ("text", "json", "text_ngxbuf"):
        text, path = read("log_" + form)
        table = rows(text)
        logged[form] = (one_figure(
            [ratio(cell(table, "equal-c32-r%s" % r, "tidemark", path)["vs"])
             for r in ("1000", "1")], 2), path)

    text, ipath = read("instr")
    m = re.search(r"^tidemark\s+\d+ instructions/request \(([\d.]+x) nginx\)",
                  text, re.M)
    if m is None:
        raise Missing("%s: no tidemark line" % ipath)
    instr = m.group(1)

    text, rpath = read("raises")
    pg = {}
    for line in text.split("durable raises side by side", 1)[-1].splitlines():
        f = line.split()
        if len(f) == 8 and f[0].isdigit() and f[6].endswith("x"):
            pg[int(f[0])] = ratio(f[6])
    if not all(c in pg for c in (8, 512)):
        raise Missing("%s: no tm/pg figures at 8 and 512 clients" % rpath)
    low, high = min(pg[c] for c in pg if c >= 8), max(pg[c] for c in pg
                                                      if c >= 8)

    words = (
        "Its speed is measured, not asserted: `make bench` runs tidemark "
        "and nginx (one worker) in turn in front of the same upstream, "
        "the proxy pinned to its own core, three runs each, and keeps the "
        "raw output in `tests/bench/results/`. On a 2-core VM, equal "
        "tokens from 32 clients, neither proxy logging: %s nginx's "
        "requests a second over 1,000 resources and %s on one%s, with %s "
        "nginx's instructions a request (`make bench-instr`); each "
        "writing an access line a request to a file (tidemark's default "
        "`log_level = info`, its lines written by a thread of their own; "
        "nginx's one `write` a line, its default): %s in text, %s in "
        "JSON, and %s in text with nginx's lines buffered too "
        "(`buffer=64k`); 10,000 clients: "
        "%s, %s; every "
        "request a durable raise: %.1fx to %.1fx PostgreSQL's single-row "
        "commits from 8 to 512 clients. [How the cost "
        "grows](doc/operations.md#how-the-cost-grows) has every figure and "
        "the command that made it; this paragraph is made from `%s`, `%s`, "
        "`%s`, `%s`, `%s` and `%s` by `make bench-readme`."
        % (r1000["vs"], r1["vs"],
           spread_note, instr, logged["text"][0], logged["json"][0],
           logged["text_ngxbuf"][0],
           one_figure([ratio(m["vs"]) for m in many]),
           "no errors" if errors == 0 else "%d errors" % errors,
           low, high, cpath, logged["text"][1], logged["json"][1],
           logged["text_ngxbuf"][1], ipath, rpath))
    return wrap(words, 72)


def wrap(words, width):
    """words in lines of at most width, a code span never broken."""
    spans = re.sub(r"`[^`]*`", lambda m: m.group(0).replace(" ", "\0"),
                   words)
    lines, line = [], ""
    for w in spans.split(" "):
        if line and len(line) + 1 + len(w) > width:
            lines.append(line)
            line = w
        else:
            line = line + " " + w if line else w
    lines.append(line)
    return "\n".join(lines).replace("\0", " ")


def main():
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] not in ([], ["--check"]):
        sys.exit("usage: readme.py [--check]")
    try:
        made = paragraph()
    except Missing as e:
        sys.exit("bench-readme: %s" % e)
    text = README.read_text()
    m = re.search(re.escape(BEGIN) + r"\n(.*?)\n" + re.escape(END), text,
                  re.S)
    if m is None:
        sys.exit("bench-readme: README.md has no %s ... %s" % (BEGIN, END))
    if m.group(1) == made:
        print("bench-readme: README.md's speed paragraph is the summaries'")
        return
    if check:
        sys.exit("bench-readme: README.md's speed paragraph is not what "
                 "tests/bench/results makes of it: run make bench-readme")
    README.write_text(text[:m.start(1)] + made + text[m.end(1):])
    print("bench-readme: README.md's speed paragraph rewritten")


if __name__ == "__main__":
    main()
