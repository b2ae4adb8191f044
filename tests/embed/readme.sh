#!/bin/sh
# readme.sh CC CFLAGS LDFLAGS BUILDDIR: build the program of doc/embedding.md
# (its first section, "A program that runs the proxy") as a user would (tests/embed/build.sh), run it on a
# configuration with a free port, stop it with SIGTERM, expect exit 0.
set -eu
cc=$1
cflags=$2
ldflags=$3
dir=$4
here=$(dirname "$0")
src=$dir/readme_embed.c
bin=$dir/readme_embed
work=$(mktemp -d "${TMPDIR:-/tmp}/tidemark-readme.XXXXXX")
pid=""
cleanup() {
    if [ -n "$pid" ]; then
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

awk '/^## A program that runs the proxy$/ { sect = 1; next }
     /^## / { sect = 0 }
     sect && /^```c$/ { code = 1; next }
     code && /^```$/ { exit }
     code { print }' "$here/../../doc/embedding.md" > "$src"
if [ ! -s "$src" ]; then
    echo "readme: no C example in doc/embedding.md's first section" >&2
    exit 1
fi
sh "$here/build.sh" "$cc" "$cflags" "$ldflags" "$src" "$bin"

cat > "$work/app.ini" <<END
[proxy]
listen = 127.0.0.1:0
[admin]
listen =
[store]
path = $work/marks.lmdb
[upstream default]
url = http://127.0.0.1:9
END
"$bin" "$work/app.ini" 2> "$work/log" &
pid=$!
i=0
until grep -q "listening on" "$work/log"; do
    i=$((i + 1))
    if [ "$i" -gt 100 ] || ! kill -0 "$pid" 2>/dev/null; then
        echo "readme: the program of doc/embedding.md did not start:" >&2
        cat "$work/log" >&2
        exit 1
    fi
    sleep 0.1
done
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
cat "$work/log"
if [ "$rc" -ne 0 ] || ! grep -q "stopping" "$work/log"; then
    echo "readme: the program of doc/embedding.md did not drain and exit 0 ($rc)" >&2
    exit 1
fi
echo "readme: the program of doc/embedding.md started, drained on SIGTERM, exit 0"
