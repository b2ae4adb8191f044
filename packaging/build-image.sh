#!/bin/sh
# build-image.sh DEB OUT [NAME]: the container image, made with Debian's buildah
# from Debian's packages alone, with no registry: a Debian 12 root made by
# mmdebstrap (the Debian mirror apt uses) with the tidemark package DEB and
# what it depends on, the same image packaging/Containerfile describes
# (non-root user 10001, the packaged configuration listening on 0.0.0.0,
# ports 7070 and 7071, /var/lib/tidemark a volume, /healthz checked).
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
mirror=${TIDEMARK_IMAGE_MIRROR:-}
B="buildah --storage-driver vfs"

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

ctr=$($B from scratch)
cleanup() {
    $B umount "$ctr" >/dev/null 2>&1 || true
    $B rm "$ctr" >/dev/null 2>&1 || true
}
trap cleanup EXIT
root=$($B mount "$ctr")

# The user first, with the fixed id Kubernetes' runAsNonRoot checks; the
# package's postinst keeps it. Then the package, and the configuration
# changed to listen beyond loopback, as the Containerfile does.
echo "build-image: Debian 12 root from $mirror with $(basename "$deb")"
mmdebstrap --variant=minbase --mode=root --format=directory \
    --include=ca-certificates,curl,adduser,passwd \
    --setup-hook='mkdir -p "$1"/var/cache/apt/archives' \
    --setup-hook='sync-in /var/cache/apt/archives /var/cache/apt/archives' \
    --customize-hook='chroot "$1" groupadd --gid 10001 tidemark' \
    --customize-hook='chroot "$1" useradd --uid 10001 --gid tidemark --no-create-home --home-dir /var/lib/tidemark --shell /usr/sbin/nologin tidemark' \
    --customize-hook="copy-in $deb /tmp" \
    --customize-hook='chroot "$1" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends /tmp/'"$(basename "$deb")" \
    --customize-hook='rm -f "$1"/tmp/*.deb' \
    --customize-hook='sed -i "s/^listen = 127\.0\.0\.1:\(707[01]\)/listen = 0.0.0.0:\1/" "$1"/etc/tidemark/tidemark.ini' \
    --customize-hook='test "$(grep -c "^listen = 0\.0\.0\.0:707[01]" "$1"/etc/tidemark/tidemark.ini)" -eq 2' \
    --customize-hook='chroot "$1" tidemark -c /etc/tidemark/tidemark.ini --check' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/usr/share/doc/* "$1"/usr/share/man/*' \
    "$suite" "$root" "$mirror"

$B config \
    --user 10001:10001 \
    --workingdir /var/lib/tidemark \
    --volume /var/lib/tidemark \
    --port 7070 --port 7071 \
    --stop-signal SIGTERM \
    --healthcheck 'CMD-SHELL a="${TIDEMARK_ADMIN_LISTEN:-0.0.0.0:7071}"; curl -fsS -o /dev/null "http://127.0.0.1:${a##*:}/healthz" || exit 1' \
    --healthcheck-interval 10s --healthcheck-timeout 3s \
    --healthcheck-start-period 5s --healthcheck-retries 3 \
    --entrypoint '["/usr/bin/tidemark"]' \
    --cmd '-c /etc/tidemark/tidemark.ini' \
    --label org.opencontainers.image.title=tidemark \
    --label org.opencontainers.image.version="$version" \
    "$ctr"
$B umount "$ctr" >/dev/null
rm -f "$out"
$B commit --format docker --rm "$ctr" "docker-archive:$out:$name" >/dev/null
trap - EXIT
echo "build-image: $name in $out ($(du -h "$out" | cut -f1))"
