#!/bin/sh
# Build the tidemark Debian package with dpkg-buildpackage in a temporary
# tree and put the .deb into OUTDIR (default: the current directory).
#   packaging/build-deb.sh [OUTDIR]
# The tree holds the project's sources (what git tracks, plus new files
# it does not ignore), packaging/debian as debian/ and the systemd unit as
# debian/tidemark.service. Nothing is fetched: the build dependencies are
# Debian packages that must already be installed (the script names them).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
out=${1:-.}
mkdir -p "$out"
out=$(cd "$out" && pwd)

for tool in dpkg-buildpackage dpkg-parsechangelog dpkg-checkbuilddeps dh; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "build-deb: $tool is missing; as root:" \
            "apt-get install debhelper dpkg-dev" >&2
        exit 1
    fi
done

version=$(dpkg-parsechangelog -l "$here/debian/changelog" -S Version)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tidemark-deb.XXXXXX")
cleanup() {
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

src="$tmp/tidemark-$version"
mkdir -p "$src"

# The sources, without build outputs, data or an old debian/.
cd "$top"
if command -v git >/dev/null 2>&1 &&
    git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard |
        tar --null -T - -cf - | tar -C "$src" -xf -
else
    tar -cf - --exclude=./.git --exclude=./build --exclude=./build-asan \
        --exclude=./tidemark --exclude=./libtidemark.a --exclude=./data \
        --exclude='*.so' --exclude=./debian . | tar -C "$src" -xf -
fi
rm -rf "$src/debian"
cp -R "$here/debian" "$src/debian"
cp "$here/tidemark.service" "$src/debian/tidemark.service"

cd "$src"
if ! dpkg-checkbuilddeps; then
    echo "build-deb: install the build dependencies above (apt-get install)" \
        >&2
    exit 1
fi
# The package builds as a fresh checkout does: the variables of a make
# that runs this script (make BUILD=build-asan test-asan, whose image
# tests build the package) must not reach debian/rules' make, through
# MAKEFLAGS or through the environment, where make puts the variables of
# its command line: its build would land in build-asan/ and its tests
# miss it. Debian's build flags come from dpkg-buildflags, not from here.
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES BUILD CFLAGS LDFLAGS CPPFLAGS
dpkg-buildpackage -b -us -uc -jauto

found=0
for f in "$tmp"/tidemark_"$version"_*.deb \
    "$tmp"/libtidemark-dev_"$version"_*.deb; do
    [ -e "$f" ] || continue
    cp "$f" "$out/"
    echo "build-deb: $out/$(basename "$f")"
    found=1
done
if [ "$found" -eq 0 ]; then
    echo "build-deb: dpkg-buildpackage made no .deb" >&2
    exit 1
fi
