#!/bin/sh
# build-image.sh DEB OUT [NAME]: the container image, made with Debian's buildah
# from Debian's packages alone, with no registry: a Debian 12 root made by
# mmdebstrap (the Debian mirror apt uses) with the tidemark package DEB and
# what it depends on, from which image-rootfs.sh copies only what tidemark
# runs with; the same image packaging/Containerfile describes (non-root
# user 10001, the packaged configuration listening on 0.0.0.0, ports 7070
# and 7071, /var/lib/tidemark a volume, a HEALTHCHECK that runs
# `tidemark --health`, the OCI labels).
# NAME defaults to tidemark:<version>. The image is written to the file
# OUT as a docker-archive (`docker load -i OUT`, `podman load -i OUT`, or
# `skopeo copy docker-archive:OUT docker://REGISTRY/...`): committing into
# local container storage would unpack the layer again, which needs mount
# rights a build sandbox may not give. buildah works on its vfs driver,
# which needs no overlay support from the kernel.
set -eu

deb=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
here=$(cd "$(dirname "$0")" && pwd)
version=$(dpkg-deb -f "$deb" Version)
out=$2
name=${3:-tidemark:$version}
suite=bookworm
# The OCI labels: the commit built (or TIDEMARK_IMAGE_REVISION), where its
# source is (TIDEMARK_IMAGE_SOURCE, else the git remote origin), the
# license debian/copyright names, the time (SOURCE_DATE_EPOCH if set).
revision=${TIDEMARK_IMAGE_REVISION:-$(git -C "$here" rev-parse HEAD 2>/dev/null ||
    echo unknown)}
source=${TIDEMARK_IMAGE_SOURCE:-$(git -C "$here" remote get-url origin \
    2>/dev/null || echo unknown)}
licenses=$(sed -n 's/^License: *//p' "$here/debian/copyright" | head -n 1)
case $licenses in
none*) licenses=LicenseRef-$licenses ;; # no license chosen yet
esac
created=$(date -u ${SOURCE_DATE_EPOCH:+-d @$SOURCE_DATE_EPOCH} \
    +%Y-%m-%dT%H:%M:%SZ)
mirror=${TIDEMARK_IMAGE_MIRROR:-}
B="buildah --storage-driver vfs"
# The docker format: the OCI one has no HEALTHCHECK.
export BUILDAH_FORMAT=docker

for tool in buildah mmdebstrap; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "build-image: $tool is missing; as root: apt-get install" \
            "buildah mmdebstrap" >&2
        exit 1
    fi
done
# The mirror apt already uses, unless one is given.
if [ -z "$mirror" ]; then
    mirror=$(apt-get indextargets --format '$(REPO_URI)' 'Created-By: Packages' \
        2>/dev/null | grep -v security | head -n 1)
fi
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian

work=$(mktemp -d "${TMPDIR:-/tmp}/tidemark-image.XXXXXX")
ctr=$($B from scratch)
cleanup() {
    $B umount "$ctr" >/dev/null 2>&1 || true
    $B rm "$ctr" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
root=$($B mount "$ctr")

# A Debian 12 root with the package and what it depends on, in which
# image-rootfs.sh finds the files tidemark runs with; only those go into
# the image.
echo "build-image: Debian 12 root from $mirror with $(basename "$deb")"
mmdebstrap --variant=minbase --mode=root --format=directory \
    --include=ca-certificates \
    --setup-hook='mkdir -p "$1"/var/cache/apt/archives' \
    --setup-hook='sync-in /var/cache/apt/archives /var/cache/apt/archives' \
    --customize-hook="copy-in $deb /tmp" \
    --customize-hook='chroot "$1" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends /tmp/'"$(basename "$deb")" \
    "$suite" "$work/debian" "$mirror"
sh "$here/image-rootfs.sh" "$work/debian" "$root"

# buildah splits --healthcheck on blanks into the exec form's words (a
# shell line would be cut into pieces): the command is one program with
# blank-free arguments, tidemark's own probe.
$B config \
    --user 10001:10001 \
    --workingdir /var/lib/tidemark \
    --volume /var/lib/tidemark \
    --port 7070/tcp --port 7071/tcp \
    --stop-signal SIGTERM \
    --healthcheck 'CMD /usr/bin/tidemark -c /etc/tidemark/tidemark.ini --health' \
    --healthcheck-interval 10s --healthcheck-timeout 3s \
    --healthcheck-start-period 5s --healthcheck-retries 3 \
    --entrypoint '["/usr/bin/tidemark"]' \
    --cmd '-c /etc/tidemark/tidemark.ini' \
    --label org.opencontainers.image.title=tidemark \
    --label org.opencontainers.image.description="sidecar HTTP proxy that enforces fencing tokens" \
    --label org.opencontainers.image.version="$version" \
    --label org.opencontainers.image.revision="$revision" \
    --label org.opencontainers.image.source="$source" \
    --label org.opencontainers.image.licenses="$licenses" \
    --label org.opencontainers.image.created="$created" \
    "$ctr"
$B umount "$ctr" >/dev/null
rm -f "$out"
$B commit --format docker --rm "$ctr" "docker-archive:$out:$name" >/dev/null
trap - EXIT
echo "build-image: $name in $out ($(du -h "$out" | cut -f1))"
