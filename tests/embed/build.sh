#!/bin/sh
# build.sh CC CFLAGS LDFLAGS SOURCE OUT: build an embedding program the way
# a user would, with nothing but pkg-config's flags for tidemark
# (PKG_CONFIG_PATH and PKG_CONFIG_SYSROOT_DIR point at a staged install).
set -eu
cc=$1
cflags=$2
ldflags=$3
src=$4
out=$5
flags=$(pkg-config --cflags --libs tidemark)
echo "$cc $cflags -std=c11 -Wall -Wextra -Werror -o $out $src $ldflags $flags"
# shellcheck disable=SC2086
exec $cc $cflags -std=c11 -Wall -Wextra -Werror -o "$out" "$src" \
    $ldflags $flags
