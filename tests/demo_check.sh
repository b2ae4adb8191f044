#!/bin/sh
# demo_check.sh: the README's first command tried as a new user would:
# `make demo` in the background, the requests it suggests, then Ctrl-C.
# On a fresh machine (FRESH_DEBIAN=1, where nothing was installed before)
# it also checks that the demo installed none of the test and benchmark
# tools: they come with make test.
set -eu
cd "$(dirname "$0")/.."

log=$(mktemp)
setsid make demo >"$log" 2>&1 &
pid=$!
stop() {
    kill -INT "-$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
fail() {
    echo "demo_check: $*" >&2
    tail -n 40 "$log" >&2
    exit 1
}
trap 'stop; rm -f "$log"' EXIT

# apt and the build come first: wait for the control port, up to 15 min.
i=0
until curl -m 10 -fsS -o /dev/null http://127.0.0.1:7071/healthz 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || fail "make demo exited before serving"
    i=$((i + 1))
    [ "$i" -le 9000 ] || fail "tidemark did not answer on 127.0.0.1:7071"
    sleep 0.1
done

put() {
    curl -m 30 -s -o /dev/null -w '%{http_code}' -X PUT -H "Fencing-Token: $1" \
        -d "v$1" http://127.0.0.1:7070/v1/documents/demo-check
}
[ "$(put 5)" = 200 ] || fail "PUT with token 5 was not 200"
[ "$(put 4)" = 409 ] || fail "PUT with the older token 4 was not refused (409)"
body=$(curl -m 30 -fsS http://127.0.0.1:7070/v1/documents/demo-check)
[ "$body" = v5 ] || fail "GET gave '$body', not the accepted write v5"
echo "demo_check: make demo serves: token 5 accepted, token 4 refused (409)"

# Ready: the example follows no lock store a newcomer does not run.
i=0
until curl -m 10 -fsS -o /dev/null http://127.0.0.1:7071/readyz 2>/dev/null; do
    i=$((i + 1))
    [ "$i" -le 100 ] || fail "/readyz is not 200: $(curl -m 10 -s \
        http://127.0.0.1:7071/readyz)"
    sleep 0.1
done
echo "demo_check: /readyz is 200"

if [ -n "${FRESH_DEBIAN:-}" ]; then
    heavy=""
    for p in chromium postgresql etcd-server redis-server haproxy apache2 \
        clang debhelper wrk linux-perf nodejs python3-pytest libcmocka-dev; do
        st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
        if [ "$st" = installed ]; then
            heavy="$heavy $p"
        fi
    done
    [ -z "$heavy" ] || fail "make demo installed test tools:$heavy"
    echo "demo_check: make demo installed no test or benchmark tool"
fi
