#!/usr/bin/python3
"""check-links.py FILE.md...: every relative link of the given Markdown
pages resolves: its file (or folder) exists, and its #anchor is a
heading of the page it names, spelled as GitHub spells heading anchors
(lower case, punctuation dropped, spaces as '-', a repeated heading
suffixed -1, -2...). Links with a scheme (https:, mailto:) are not
followed. Exit 1, naming FILE:LINE of each link that does not resolve."""
import os
import re
import sys

LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")


def prose(text):
    """text with fenced code blocks and code spans blanked (newlines
    kept, so line numbers stay right)."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
            out.append("")
        elif fenced:
            out.append("")
        else:
            out.append(re.sub(r"`+[^`]*`+", lambda m: " " * len(m.group()),
                              line))
    return "\n".join(out)


def anchors(path):
    seen, found, fenced = {}, set(), False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                fenced = not fenced
            m = None if fenced else re.match(r"^#{1,6} (.*?)\s*$", line)
            if m:
                slug = re.sub(r"[^\w\- ]", "", m.group(1).lower())
                slug = slug.replace(" ", "-")
                n = seen.get(slug, 0)
                seen[slug] = n + 1
                found.add(slug if n == 0 else "%s-%d" % (slug, n))
    return found


def check(page):
    bad = []
    with open(page, encoding="utf-8") as f:
        text = prose(f.read())
    for m in LINK.finditer(text):
        target = m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue
        line = text.count("\n", 0, m.start(2)) + 1
        path, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) \
            if path else page
        if not os.path.exists(dest):
            bad.append("%s:%d: %s: no such file" % (page, line, target))
        elif anchor and (not dest.endswith(".md") or
                         anchor not in anchors(dest)):
            bad.append("%s:%d: %s: no heading #%s in %s" %
                       (page, line, target, anchor, dest))
    return bad


def main(pages):
    bad = [msg for page in pages for msg in check(page)]
    for msg in bad:
        print(msg, file=sys.stderr)
    if not bad:
        print("check-links: every relative link of %d pages resolves" %
              len(pages))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
