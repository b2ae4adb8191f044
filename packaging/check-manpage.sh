#!/bin/sh
# Check the manual pages the Debian package installs:
#   - every program it installs (usr/bin and usr/sbin in
#     packaging/debian/*.install) has a page of its name in
#     packaging/debian/*.manpages, and every page listed exists;
#   - each page formats without a warning (groff -man -ww);
#   - tidemark(8) documents every configuration key of the option table
#     (conf/cfg_opts.c): each key must appear as a ".B key" entry.
#   packaging/check-manpage.sh        (from anywhere in the tree)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
deb="$top/packaging/debian"
missing=0

pages=$(cat "$deb"/*.manpages)
progs=$(sed -n 's|^usr/s\{0,1\}bin/\([^ /]*\)$|\1|p' "$deb"/*.install)
if [ -z "$progs" ]; then
    echo "check-manpage: no programs found in packaging/debian/*.install" >&2
    exit 1
fi
for prog in $progs; do
    if ! echo "$pages" | grep -qE "(^|/)$prog\.[1-8]\$"; then
        echo "check-manpage: $prog is installed but has no manual page" \
            "in packaging/debian/*.manpages" >&2
        missing=$((missing + 1))
    fi
done
for page in $pages; do
    if [ ! -f "$top/$page" ]; then
        echo "check-manpage: $page is listed but missing" >&2
        missing=$((missing + 1))
    elif command -v groff >/dev/null 2>&1; then
        warn=$(groff -man -ww -z "$top/$page" 2>&1) || true
        if [ -n "$warn" ]; then
            echo "check-manpage: $page: $warn" >&2
            missing=$((missing + 1))
        fi
    fi
done

man="$top/doc/tidemark.8"
keys=$(grep -oE '\{CFG_[A-Z]+, "[a-z_]+"' "$top/conf/cfg_opts.c" |
    sed -E 's/\{CFG_([A-Z]+), "([a-z_]+)"/\1:\2/')
if [ -z "$keys" ]; then
    echo "check-manpage: no keys found in conf/cfg_opts.c" >&2
    exit 1
fi
for sk in $keys; do
    key=${sk#*:}
    if ! grep -qx "\.B $key" "$man"; then
        echo "check-manpage: [${sk%%:*}] $key is not in tidemark.8" >&2
        missing=$((missing + 1))
    fi
done
if [ "$missing" -ne 0 ]; then
    exit 1
fi
echo "check-manpage: $(echo "$progs" | wc -w) programs with a page," \
    "$(echo "$keys" | wc -l) keys documented"
