#!/bin/sh
# Check that tidemark(8) documents every configuration key of the option
# table (conf/cfg_opts.c): each key must appear as a ".B key" entry.
#   packaging/check-manpage.sh        (from anywhere in the tree)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
man="$top/doc/tidemark.8"
keys=$(grep -oE '\{CFG_[A-Z]+, "[a-z_]+"' "$top/conf/cfg_opts.c" |
    sed -E 's/\{CFG_([A-Z]+), "([a-z_]+)"/\1:\2/')
if [ -z "$keys" ]; then
    echo "check-manpage: no keys found in conf/cfg_opts.c" >&2
    exit 1
fi
missing=0
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
echo "check-manpage: $(echo "$keys" | wc -l) keys documented"
