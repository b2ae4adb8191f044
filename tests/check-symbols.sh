#!/bin/sh
# check-symbols.sh ARCHIVE SYMS: the archive defines, as global symbols,
# exactly the calls listed in SYMS (those tidemark.h declares): nothing
# that could clash with an embedder's own names, and nothing missing.
set -eu
lib=$1
syms=$2
got=$(nm -g --defined-only "$lib" | awk 'NF == 3 { print $3 }' | sort -u)
bad=$(printf '%s\n' "$got" | grep -v '^tm_' || true)
if [ -n "$bad" ]; then
    echo "check-symbols: $lib exports symbols outside tm_*:" >&2
    printf '  %s\n' $bad >&2
    exit 1
fi
extra=$(printf '%s\n' "$got" | grep -vxF -f "$syms" || true)
if [ -n "$extra" ]; then
    echo "check-symbols: $lib exports tm_* symbols tidemark.h does not" \
        "declare:" $extra >&2
    exit 1
fi
missing=$(grep -vxF -f /dev/stdin "$syms" <<END || true
$got
END
)
if [ -n "$missing" ]; then
    echo "check-symbols: tidemark.h declares calls $lib lacks:" $missing >&2
    exit 1
fi
echo "check-symbols: $lib exports $(printf '%s\n' "$got" | wc -l) symbols," \
    "all declared in tidemark.h"
