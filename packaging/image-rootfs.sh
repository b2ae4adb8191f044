#!/bin/sh
# image-rootfs.sh FROM TO: the container image's root filesystem, made in
# TO from FROM, a Debian 12 root with the tidemark package installed
# (FROM may be /). Only what tidemark runs with is copied, each file from
# its Debian package: /usr/bin/tidemark and the shared libraries it links
# (ldd in FROM), the CA bundle and OpenSSL's configuration, the packaged
# configuration changed to listen on 0.0.0.0, the os-release, passwd and
# group files (root and tidemark, uid and gid 10001) and
# /var/lib/tidemark owned by tidemark. No shell, no package manager, no
# tidemark-lab (it needs python3). The packages the files came from are
# described in /var/lib/dpkg/status.d/, where image scanners look for
# them. Run as root (chroot). Used by build-image.sh and the
# Containerfile.
set -eu

from=$(cd "$1" && pwd -P)
from=${from%/}
to=$2
mkdir -p "$to"
to=$(cd "$to" && pwd -P)
in_from() {
    chroot "${from:-/}" "$@"
}

# The usr-merged layout of FROM: /lib -> usr/lib and the like.
for d in bin sbin lib lib64; do
    if [ -L "$from/$d" ]; then
        ln -sfn "$(readlink "$from/$d")" "$to/$d"
    fi
done

# copy PATH: FROM's file at PATH (symbolic links followed) to the same
# place in TO, its directories resolved as FROM resolves them.
copy() {
    dir=$(cd "$from$(dirname "$1")" && pwd -P)
    dir=${dir#"$from"}
    mkdir -p "$to$dir"
    cp -L "$from$1" "$to$dir/$(basename "$1")"
    echo "$1" >>"$to.files"
}

: >"$to.files"
copy /usr/bin/tidemark
libs=$(in_from ldd /usr/bin/tidemark |
    sed -n -e 's/.*=> \(\/[^ ]*\) .*/\1/p' -e 's/^[[:space:]]*\(\/[^ ]*\) .*/\1/p')
[ -n "$libs" ] || {
    echo "image-rootfs: ldd found no libraries of /usr/bin/tidemark" >&2
    exit 1
}
for lib in $libs; do
    copy "$lib"
done
copy /etc/ssl/certs/ca-certificates.crt
copy /etc/ssl/openssl.cnf
copy /usr/lib/os-release
copy /etc/nsswitch.conf
copy /etc/tidemark/tidemark.ini
mkdir -p "$to/usr/lib/ssl" "$to/etc/ssl/private"
ln -sfn /etc/ssl/certs "$to/usr/lib/ssl/certs"
ln -sfn /etc/ssl/certs/ca-certificates.crt "$to/usr/lib/ssl/cert.pem"
ln -sfn /etc/ssl/openssl.cnf "$to/usr/lib/ssl/openssl.cnf"
ln -sfn ../usr/lib/os-release "$to/etc/os-release"

# The user: a fixed numeric id, so that Kubernetes' runAsNonRoot can
# check it and a mounted volume can be given to it.
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\n%s\n' \
    'tidemark:x:10001:10001:tidemark:/var/lib/tidemark:/usr/sbin/nologin' \
    >"$to/etc/passwd"
printf 'root:x:0:\ntidemark:x:10001:\n' >"$to/etc/group"
mkdir -p "$to/var/lib/tidemark" "$to/tmp" "$to/dev" "$to/proc" \
    "$to/root" "$to/var/lib/dpkg/status.d"
chown 10001:10001 "$to/var/lib/tidemark"
chmod 0750 "$to/var/lib/tidemark"
chmod 1777 "$to/tmp"
chmod 0700 "$to/root"

# In a container tidemark must listen beyond loopback: the packaged
# configuration is changed to 0.0.0.0 for both ports, in the file rather
# than through ENV, so a mounted file keeps its own listen addresses.
conf="$to/etc/tidemark/tidemark.ini"
sed -i 's/^listen = 127\.0\.0\.1:\(707[01]\)/listen = 0.0.0.0:\1/' "$conf"
if [ "$(grep -c '^listen = 0\.0\.0\.0:707[01]' "$conf")" -ne 2 ]; then
    echo "image-rootfs: $conf: the two listen lines were not changed" >&2
    exit 1
fi

# The packages the files came from, as dpkg describes them.
pkgs=$( (while read -r f; do
    in_from dpkg-query -S "*/$(basename "$f")" 2>/dev/null |
        sed -n '1s/: .*//p' | tr ',' '\n'
done <"$to.files" | sed 's/^ *//; s/:.*//'
    echo ca-certificates # the bundle is made from its files
) | sort -u)
rm -f "$to.files"
for p in $pkgs; do
    in_from dpkg-query -s "$p" >"$to/var/lib/dpkg/status.d/$p"
done

# The copy runs: every library is there, the configuration is valid (on
# its own: the builder's TIDEMARK_ variables are no overrides of it).
env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    chroot "$to" /usr/bin/tidemark -c /etc/tidemark/tidemark.ini --check
echo "image-rootfs: $(du -sh "$to" | cut -f1) in $to, from" \
    "$(echo "$pkgs" | wc -w) packages"
