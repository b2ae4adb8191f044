#!/bin/sh
# Install the Debian 12 packages that building, testing and benchmarking
# tidemark need. When they are all present this only asks dpkg and exits.
#
#   sh tests/deps.sh        everything make test and make bench use
#   sh tests/deps.sh demo   only what building tidemark and running the
#                           demo need (make demo): the toolchain, the
#                           libraries, python3 for the demo backend, curl
set -eu

# Build: toolchain and libraries (libzookeeper-mt-dev: ZooKeeper's C
# client, for the zookeeper lock backend). Tests: cmocka, pytest (and
# pytest-xdist, which runs the integration tests in parallel; pytest-timeout,
# which fails a test that hangs), the servers the
# integration tests start themselves (nginx and HAProxy also for the
# differential test; Apache with mod_dav and nginx's DAV modules as WebDAV
# backends; node for the S3 server installed from npm below) and the
# clients they drive (curl, requests, boto3, the AWS CLI, rclone, cadaver; ZooKeeper's server,
# and kazoo and Curator, run from Java source with the JDK, for the locks
# applications already take). Bench: wrk and
# nginx, and linux-perf (strace where perf cannot count) for the system
# calls per request. Fuzz: clang, and its sanitizer and libFuzzer runtimes
# (libclang-rt-14-dev, which clang only recommends). Format:
# clang-format (make format-check). Package:
# debhelper, build-essential, systemd (systemd-analyze verify). The
# daemon's sd_notify: libsystemd-dev. Page:
# chromium (headless). The Kubernetes example's test: python3-yaml.
# Metrics: prometheus, for promtool (check metrics on /metrics).
# Image: buildah and mmdebstrap (make image), docker-compose (compose.yaml).
DEMO_PKGS="make gcc libc6-dev pkg-config
libevent-dev libssl-dev libinih-dev liblmdb-dev libhiredis-dev libpq-dev
libsystemd-dev libjansson-dev libzookeeper-mt-dev python3 curl ca-certificates"
PKGS="$DEMO_PKGS libcmocka-dev python3-pytest python3-pytest-xdist
python3-pytest-timeout procps openssl
wrk linux-perf strace nginx-light haproxy redis-server postgresql etcd-server etcd-client clang
libclang-rt-14-dev clang-format lmdb-utils debhelper build-essential systemd chromium
python3-yaml apache2 libnginx-mod-http-dav-ext nodejs python3-requests
python3-boto3 awscli rclone cadaver prometheus buildah mmdebstrap docker-compose
zookeeperd python3-kazoo libcurator-recipes-java default-jdk-headless"

# The S3 server of the integration tests (s3rver, pinned with its
# dependencies in tests/s3/package-lock.json) comes from npm.
S3DIR="$(cd "$(dirname "$0")" && pwd)/s3"

s3_install() {
    if [ -f "$S3DIR/node_modules/@20minutes/s3rver/package.json" ]; then
        return 0
    fi
    echo "deps: npm ci in $S3DIR (the S3 server for the tests)"
    (cd "$S3DIR" && npm ci --no-audit --no-fund --loglevel=error)
}

POLICY=/usr/sbin/policy-rc.d

case "${1:-all}" in
demo)
    PKGS=$DEMO_PKGS
    s3_install() { :; }
    ;;
all) ;;
*)
    echo "usage: sh tests/deps.sh [demo]" >&2
    exit 2
    ;;
esac

missing=""
for p in $PKGS; do
    st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    if [ "$st" != installed ]; then
        missing="$missing $p"
    fi
done
# npm: Debian's package, unless the nodejs installed brings its own (a
# nodejs from elsewhere conflicts with Debian's npm).
if [ "${1:-all}" = all ] && ! command -v npm >/dev/null 2>&1; then
    missing="$missing npm"
fi
if [ -z "$missing" ]; then
    echo "deps: all packages present"
    s3_install
    exit 0
fi
echo "deps: missing:$missing"

if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    echo "deps: not root and no sudo; install as root:$missing" >&2
    exit 1
fi

# The tests start their own nginx, Apache, HAProxy, Redis, Postgres and
# etcd on loopback ports; the packaged services must not start (and hold the
# default ports) just because they were installed. policy-rc.d exiting 101 tells
# invoke-rc.d and deb-systemd-invoke not to start anything. Only a file we
# created is removed afterwards.
created_policy=""
cleanup() {
    if [ -n "$created_policy" ]; then
        $SUDO rm -f "$POLICY"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

$SUDO apt-get update

# A clear message for a wrong or unavailable name, before apt-get install.
unknown=""
for p in $missing; do
    cand=$(apt-cache policy "$p" | awk '/Candidate:/ { print $2 }')
    if [ -z "$cand" ] || [ "$cand" = "(none)" ]; then
        unknown="$unknown $p"
    fi
done
if [ -n "$unknown" ]; then
    echo "deps: no installable candidate for:$unknown" >&2
    exit 1
fi

if [ ! -e "$POLICY" ]; then
    created_policy=1
    $SUDO sh -c 'printf "#!/bin/sh\n# tidemark tests/deps.sh: start no service during install\nexit 101\n" > "$1" && chmod 0755 "$1"' sh "$POLICY"
fi

# $missing is a list of names: split on purpose.
# shellcheck disable=SC2086
$SUDO env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends $missing

# Under systemd, postinst scripts also enable units at boot; undo that for
# the services this run installed (never for ones that were already there).
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    for p in $missing; do
        case "$p" in
            nginx-light) unit=nginx ;;
            apache2) unit=apache2 ;;
            haproxy) unit=haproxy ;;
            redis-server) unit=redis-server ;;
            postgresql) unit=postgresql ;;
            etcd-server) unit=etcd ;;
            zookeeperd) unit=zookeeper ;;
            prometheus) unit=prometheus ;;
            *) continue ;;
        esac
        $SUDO systemctl disable "$unit" >/dev/null 2>&1 || true
    done
fi

echo "deps: installed:$missing"
s3_install
