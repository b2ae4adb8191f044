#!/bin/sh
# smoke-image.sh ARCHIVE: run the tidemark of the image in ARCHIVE (a
# docker-archive, as build-image.sh writes it) as the image's user, with
# the image's configuration, in front of the demo backend: the image's
# HEALTHCHECK command fails before tidemark runs and passes once it is
# ready, a write with token 5 passes, one with token 4 is refused (409),
# the process runs as uid 10001 and its marks land in the image's volume,
# and SIGTERM stops it with status 0, after which the HEALTHCHECK fails
# again.
#
# With a container runtime that can start containers (podman) the image
# runs as a container. Where the machine cannot (no user namespaces, no
# cgroups, no rlimits, as inside a build sandbox), the image's layers are
# unpacked into a folder and run in a chroot as its user as a stand-in,
# and the script says so: same files, same user, same entrypoint and
# command, working directory and health check, from the image's own
# configuration; the host's network. (The image has no shell.)
set -eu

archive=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tidemark-image.XXXXXX")
root="$work/rootfs"
mounted=""
pids=""

fail() {
    echo "smoke-image: FAIL: $*" >&2
    [ -f "$work/tidemark.log" ] && tail -n 30 "$work/tidemark.log" >&2
    exit 1
}
cleanup() {
    for p in $pids; do
        kill "$p" 2>/dev/null || true
    done
    for p in $pids; do
        wait "$p" 2>/dev/null || true
    done
    if [ -n "$mounted" ]; then
        umount "$root/proc" 2>/dev/null || true
        umount "$root/dev" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# The archive's manifest names the image's configuration and its layers;
# the layers, in order, are its root filesystem.
mkdir -p "$work/archive" "$root"
tar -xf "$archive" -C "$work/archive"
/usr/bin/python3 - "$work/archive" "$root" >"$work/config" <<'PY'
import json, os, sys, tarfile
d, root = sys.argv[1], sys.argv[2]
m = json.load(open(os.path.join(d, "manifest.json")))[0]
cfg = json.load(open(os.path.join(d, m["Config"])))["config"]
for layer in m["Layers"]:
    with tarfile.open(os.path.join(d, layer)) as t:
        t.extractall(root, numeric_owner=True)
print(m["RepoTags"][0])
print(cfg.get("User", ""))
print(" ".join(cfg.get("Entrypoint") or []))
print(" ".join(cfg.get("Cmd") or []))
print(cfg.get("WorkingDir", "/"))
test = (cfg.get("Healthcheck") or {}).get("Test") or ["NONE"]
assert test[0] == "CMD", "HEALTHCHECK %r is not an exec-form CMD" % test
print(" ".join(test[1:]))
PY
name=$(sed -n 1p "$work/config")
user=$(sed -n 2p "$work/config")
entry=$(sed -n 3p "$work/config")
cmd=$(sed -n 4p "$work/config")
wdir=$(sed -n 5p "$work/config")
health=$(sed -n 6p "$work/config")
[ "$user" = 10001:10001 ] || fail "the image runs as '$user', not 10001:10001"
echo "smoke-image: $name runs '$entry $cmd' as $user in $wdir"
echo "smoke-image: its HEALTHCHECK runs '$health'"

port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
up=$(port)
proxy=$(port)
admin=$(port)
python3 "$here/../tests/demo_upstream.py" --host 127.0.0.1 --port "$up" \
    >"$work/upstream.log" 2>&1 &
up_pid=$!
pids="$pids $up_pid"
# The backend answers before tidemark starts: a PUT that finds no backend
# is a 502, which says nothing about the image.
i=0
until curl -s -o /dev/null "http://127.0.0.1:$up/" 2>/dev/null; do
    kill -0 "$up_pid" 2>/dev/null ||
        fail "the demo backend exited: $(tail -n 5 "$work/upstream.log")"
    i=$((i + 1))
    [ "$i" -le 300 ] || fail "the demo backend does not answer on 127.0.0.1:$up"
    sleep 0.1
done

# in_image ARGV...: run ARGV as the image would: in its root, as its
# user, in its working directory, with the container's environment. The
# image has no shell: python3 on the host does the chroot, chdir, setgid
# and setuid, then execs ARGV. It execs: call it in a subshell (or with
# &, whose $! is then ARGV's process).
in_image() {
    if [ "$mode" = podman ]; then
        exec podman exec "$ctr_name" "$@"
    fi
    exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
        TIDEMARK_PROXY_LISTEN="127.0.0.1:$proxy" \
        TIDEMARK_ADMIN_LISTEN="127.0.0.1:$admin" \
        TIDEMARK_UPSTREAM_DEFAULT_URL="http://127.0.0.1:$up" \
        python3 -c 'import os, sys
root, wdir, ids = sys.argv[1:4]
uid, gid = (int(x) for x in ids.split(":"))
os.chroot(root)
os.chdir(wdir)
os.setgroups([])
os.setgid(gid)
os.setuid(uid)
os.execv(sys.argv[4], sys.argv[4:])' "$root" "$wdir" "$user" "$@"
}

# healthcheck WANT: the image's HEALTHCHECK command, run in the image,
# exits 0 (WANT=pass) or not (WANT=fail).
healthcheck() {
    rc=0
    # shellcheck disable=SC2086 # the image's words
    (in_image $health) >"$work/health.log" 2>&1 || rc=$?
    case "$1:$rc" in
    pass:0 | fail:[1-9]*) ;;
    *) fail "HEALTHCHECK exited $rc (want $1): $(cat "$work/health.log")" ;;
    esac
    echo "smoke-image: HEALTHCHECK exit $rc ($1, as expected):" \
        "$(cat "$work/health.log")"
}

ctr_name=tidemark-smoke-$$
if ! command -v podman >/dev/null 2>&1; then
    echo "podman is not installed" >"$work/podman.log"
    can_run=no
elif podman load -i "$archive" >"$work/podman.log" 2>&1 &&
    podman run --rm --network host "$name" --version \
        >>"$work/podman.log" 2>&1; then
    can_run=yes
else
    can_run=no
fi
if [ "$can_run" = yes ]; then
    echo "smoke-image: running the image with podman"
    podman run --rm --network host --name "$ctr_name" \
        -e TIDEMARK_PROXY_LISTEN=127.0.0.1:$proxy \
        -e TIDEMARK_ADMIN_LISTEN=127.0.0.1:$admin \
        -e TIDEMARK_UPSTREAM_DEFAULT_URL=http://127.0.0.1:$up \
        "$name" >"$work/tidemark.log" 2>&1 &
    pids="$pids $!"
    mode=podman
else
    echo "smoke-image: this machine cannot start containers" \
        "($(tail -n 1 "$work/podman.log")); running the image's root" \
        "filesystem in a chroot as $user as a stand-in"
    mount --bind /dev "$root/dev"
    mount -t proc proc "$root/proc"
    mounted=yes
    mode=chroot
    healthcheck fail
    # shellcheck disable=SC2086 # entry and cmd are the image's words
    in_image $entry $cmd >"$work/tidemark.log" 2>&1 &
    tm=$!
    pids="$pids $tm"
fi

i=0
until curl -fsS -o /dev/null "http://127.0.0.1:$admin/healthz" 2>/dev/null; do
    i=$((i + 1))
    [ "$i" -le 300 ] || fail "no /healthz on 127.0.0.1:$admin"
    sleep 0.1
done
put() {
    curl -s -o /dev/null -w '%{http_code}' -X PUT -H "Fencing-Token: $1" \
        -d "v$1" "http://127.0.0.1:$proxy/v1/documents/image-smoke"
}
[ "$(put 5)" = 200 ] || fail "PUT with token 5 was not 200"
[ "$(put 4)" = 409 ] || fail "PUT with token 4 was not refused (409)"
echo "smoke-image: token 5 accepted, token 4 refused (409)"
healthcheck pass

if [ "$mode" = chroot ]; then
    pid=$tm # env and python3 exec: the process is tidemark itself
    uid=$(awk '/^Uid:/ { print $2 }' "/proc/$pid/status")
    [ "$uid" = 10001 ] || fail "tidemark runs as uid $uid"
    owner=$(stat -c %u:%g "$root/var/lib/tidemark/marks.lmdb")
    [ "$owner" = 10001:10001 ] || fail "marks.lmdb is owned by $owner"
    echo "smoke-image: tidemark runs as uid 10001; marks.lmdb is its own"
    kill -TERM "$tm"
    rc=0
    wait "$tm" || rc=$?
    pids=$(echo "$pids" | sed "s/ $tm\$//")
    [ "$rc" = 0 ] || fail "tidemark exited $rc on SIGTERM"
    echo "smoke-image: SIGTERM: drained and exited 0"
    healthcheck fail
fi
echo "smoke-image: ok ($mode)"
