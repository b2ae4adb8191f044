#!/bin/sh
# Smoke test of the tidemark .deb, as root on a Debian 12 machine:
#   packaging/smoke-deb.sh path/to/tidemark_VERSION_ARCH.deb
# Installs the package, verifies the installed systemd unit, checks the
# installed configuration, runs the daemon as the tidemark user in front
# of a small upstream (python3 -m http.server), asks /healthz, /readyz and
# the proxy, stops it with SIGTERM (exit 0 expected), then purges the
# package. Everything it started is stopped, also on failure.
set -eu

deb=${1:-}
if [ -z "$deb" ] || [ ! -f "$deb" ]; then
    echo "usage: $0 path/to/tidemark_VERSION_ARCH.deb" >&2
    exit 2
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "smoke: run as root (it installs and purges a package)" >&2
    exit 1
fi
deb=$(cd "$(dirname "$deb")" && pwd)/$(basename "$deb")

st=$(dpkg-query -W -f='${db:Status-Status}' tidemark 2>/dev/null || true)
if [ -n "$st" ] && [ "$st" != not-installed ]; then
    echo "smoke: tidemark is already installed ($st); this test would" \
        "purge it: remove it first" >&2
    exit 1
fi

here=$(cd "$(dirname "$0")" && pwd)
POLICY=/usr/sbin/policy-rc.d
CONF=/etc/tidemark/tidemark.ini
UNIT=/lib/systemd/system/tidemark.service
work=$(mktemp -d "${TMPDIR:-/tmp}/tidemark-smoke.XXXXXX")
chmod 0755 "$work"
created_policy=""
user_before=""
if getent passwd tidemark >/dev/null; then
    user_before=1
fi
installed=""
up_pid=""
run_pid=""

fail() {
    echo "smoke: FAIL: $*" >&2
    for f in "$work"/tidemark.log "$work"/upstream.log; do
        if [ -s "$f" ]; then
            echo "--- $f" >&2
            tail -n 20 "$f" >&2
        fi
    done
    exit 1
}

cleanup() {
    # Only the processes this script started, by their ids.
    if [ -n "$run_pid" ] && kill -0 "$run_pid" 2>/dev/null; then
        for c in $(ps -o pid= --ppid "$run_pid"); do
            kill -TERM "$c" 2>/dev/null || true
        done
        kill -TERM "$run_pid" 2>/dev/null || true
        wait "$run_pid" 2>/dev/null || true
    fi
    if [ -n "$up_pid" ]; then
        kill -TERM "$up_pid" 2>/dev/null || true
        wait "$up_pid" 2>/dev/null || true
    fi
    if [ -n "$installed" ]; then
        env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q tidemark \
            >/dev/null 2>&1 || true
    fi
    if [ -z "$user_before" ] && getent passwd tidemark >/dev/null; then
        deluser --quiet --system tidemark >/dev/null 2>&1 || true
    fi
    if [ -n "$created_policy" ]; then
        rm -f "$POLICY"
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# Under a running systemd the postinst would start the packaged service;
# policy-rc.d exiting 101 tells deb-systemd-invoke to start nothing.
if [ ! -e "$POLICY" ]; then
    created_policy=1
    printf '#!/bin/sh\n# tidemark smoke-deb.sh: start no service\nexit 101\n' \
        >"$POLICY"
    chmod 0755 "$POLICY"
fi

need=""
command -v systemd-analyze >/dev/null 2>&1 || need="$need systemd"
command -v curl >/dev/null 2>&1 || need="$need curl"
command -v python3 >/dev/null 2>&1 || need="$need python3"
if [ -n "$need" ]; then
    echo "smoke: installing$need"
    # shellcheck disable=SC2086
    env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        --no-install-recommends $need >/dev/null
fi

echo "== install $(basename "$deb")"
installed=1
env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends "$deb" >"$work/apt.log" 2>&1 ||
    { cat "$work/apt.log" >&2; fail "apt-get install"; }
[ -x /usr/bin/tidemark ] || fail "/usr/bin/tidemark is missing"
[ -f "$CONF" ] || fail "$CONF is missing"
dpkg-query -W -f='${Conffiles}\n' tidemark | grep -q " $CONF " ||
    fail "$CONF is not a conffile"
getent passwd tidemark >/dev/null || fail "no tidemark user"
[ "$(stat -c %U /var/lib/tidemark)" = tidemark ] ||
    fail "/var/lib/tidemark is not owned by tidemark"

echo "== systemd-analyze verify $UNIT"
# Documentation=man:tidemark(8) is looked up with man(1); where man-db is
# not installed that lookup fails (and verify exits 1) although the unit
# is fine: that one line is allowed, any other is a failure.
rc=0
systemd-analyze verify "$UNIT" >"$work/verify.log" 2>&1 || rc=$?
if grep -v "Command 'man tidemark(8)' failed" "$work/verify.log" |
    grep -q .; then
    cat "$work/verify.log" >&2
    fail "systemd-analyze verify (exit $rc)"
fi
if [ "$rc" -ne 0 ] && command -v man >/dev/null 2>&1 &&
    ! man -w tidemark >/dev/null 2>&1; then
    fail "the man page tidemark(8) is not installed"
fi
echo "verify: exit $rc$( [ "$rc" -eq 0 ] || echo ' (man(1) missing)')"

echo "== tidemark-lab (the failure lab) is installed and starts"
/usr/bin/tidemark-lab --help >/dev/null || fail "tidemark-lab --help"
test -f /usr/lib/tidemark/lab/clockjump.so || fail "no clockjump.so"

echo "== a manual page for every program, the example configurations"
dpkg -L tidemark >"$work/files"
for prog in $(grep -E '^/usr/s?bin/[^/]+$' "$work/files"); do
    name=$(basename "$prog")
    grep -qE "^/usr/share/man/man[1-8]/$name\.[1-8]\.gz\$" "$work/files" ||
        fail "$prog has no manual page"
    if command -v man >/dev/null 2>&1; then
        man -w "$name" >/dev/null 2>&1 || fail "man -w $name finds nothing"
    fi
    echo "$name: $(grep -E "/man[1-8]/$name\." "$work/files")"
done
for ini in "$here"/../conf/examples/*.ini; do
    f=/usr/share/doc/tidemark/examples/$(basename "$ini")
    cmp -s "$ini" "$f" || fail "$f is not conf/examples/$(basename "$ini")"
done
echo "examples: $(ls /usr/share/doc/tidemark/examples | tr '\n' ' ')"

echo "== tidemark --check as the tidemark user"
runuser -u tidemark -- /usr/bin/tidemark -c "$CONF" --check ||
    fail "--check of $CONF"

# Three free loopback ports: proxy, control port, upstream (split on
# purpose).
# shellcheck disable=SC2046
set -- $(python3 -c '
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
')
p_proxy=$1 p_admin=$2 p_up=$3

echo "== upstream on 127.0.0.1:$p_up"
mkdir "$work/www"
echo "hello from upstream" >"$work/www/hello.txt"
python3 -m http.server --bind 127.0.0.1 --directory "$work/www" "$p_up" \
    >"$work/upstream.log" 2>&1 &
up_pid=$!
i=0
until curl -fsS -o /dev/null "http://127.0.0.1:$p_up/hello.txt" 2>/dev/null
do
    kill -0 "$up_pid" 2>/dev/null || fail "the upstream exited at start"
    i=$((i + 1))
    [ "$i" -le 100 ] || fail "the upstream did not answer in 10 s"
    sleep 0.1
done

echo "== tidemark as the tidemark user (ports $p_proxy, $p_admin)"
# The installed configuration; only the ports and the upstream differ,
# through TIDEMARK_ overrides, so a running tidemark cannot collide.
runuser -u tidemark -- env \
    TIDEMARK_PROXY_LISTEN="127.0.0.1:$p_proxy" \
    TIDEMARK_ADMIN_LISTEN="127.0.0.1:$p_admin" \
    TIDEMARK_UPSTREAM_DEFAULT_URL="http://127.0.0.1:$p_up" \
    /usr/bin/tidemark -c "$CONF" >"$work/tidemark.log" 2>&1 &
run_pid=$!

i=0
until curl -fsS -o /dev/null "http://127.0.0.1:$p_admin/healthz" 2>/dev/null
do
    kill -0 "$run_pid" 2>/dev/null || fail "tidemark exited at start"
    i=$((i + 1))
    [ "$i" -le 100 ] || fail "/healthz did not answer in 10 s"
    sleep 0.1
done
# runuser forks: the daemon is its child.
tm_pid=$(ps -o pid= --ppid "$run_pid" | tr -d ' ')
[ -n "$tm_pid" ] || fail "no tidemark process under runuser"
[ "$(ps -o user= -p "$tm_pid" | tr -d ' ')" = tidemark ] ||
    fail "tidemark does not run as the tidemark user"

body=$(curl -fsS "http://127.0.0.1:$p_admin/healthz")
echo "healthz: $body"
code=$(curl -s -o /dev/null -w '%{http_code}' \
    "http://127.0.0.1:$p_admin/readyz")
[ "$code" = 200 ] || fail "/readyz answered $code"
echo "readyz: $code"

# A GET passes through to the upstream.
got=$(curl -fsS "http://127.0.0.1:$p_proxy/hello.txt") ||
    fail "GET through the proxy"
[ "$got" = "hello from upstream" ] || fail "GET through the proxy: $got"
echo "proxied GET: $got"

# A fenced write raises the mark in /var/lib/tidemark (http.server answers
# PUT with 501, after the mark is stored); a lower token is refused.
curl -s -o /dev/null -X PUT -H 'Fencing-Token: 5' -d v5 \
    "http://127.0.0.1:$p_proxy/v1/documents/a"
code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT \
    -H 'Fencing-Token: 4' -d v4 "http://127.0.0.1:$p_proxy/v1/documents/a")
[ "$code" = 409 ] || fail "stale token answered $code, not 409"
echo "stale token: $code"
[ "$(stat -c %U /var/lib/tidemark/marks.lmdb)" = tidemark ] ||
    fail "marks.lmdb is not in /var/lib/tidemark or not the user's"

echo "== SIGTERM"
kill -TERM "$tm_pid"
rc=0
wait "$run_pid" || rc=$?
run_pid=""
[ "$rc" -eq 0 ] || fail "tidemark exited $rc after SIGTERM"
echo "tidemark exited 0"
if curl -s -o /dev/null "http://127.0.0.1:$p_admin/healthz"; then
    fail "the control port still answers after the stop"
fi

kill -TERM "$up_pid"
wait "$up_pid" 2>/dev/null || true
up_pid=""

echo "== purge"
env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q tidemark \
    >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; fail "purge"; }
installed=""
for p in /usr/bin/tidemark /etc/tidemark /var/lib/tidemark "$UNIT"; do
    [ ! -e "$p" ] || fail "$p is still there after purge"
done
st=$(dpkg-query -W -f='${db:Status-Status}' tidemark 2>/dev/null || true)
[ -z "$st" ] || [ "$st" = not-installed ] || fail "dpkg status: $st"

echo "smoke: ok"
