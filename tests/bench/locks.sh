#!/bin/sh
# Lock service throughput through the HTTP API (lmdb backend): lock and
# release pairs per second, then tries and wins per second on one hot
# lock. Starts its own tidemark in a temporary directory.
# Env: BENCH_DURATION (10s), BENCH_THREADS (2), BENCH_CONNECTIONS (32),
# EAGER (yes), TIDEMARK_BIN.
set -eu

cd "$(dirname "$0")/../.."
ROOT=$(pwd)
DURATION=${BENCH_DURATION:-10s}
THREADS=${BENCH_THREADS:-2}
CONNS=${BENCH_CONNECTIONS:-32}
EAGER=${EAGER:-yes}
TIDEMARK_BIN=${TIDEMARK_BIN:-$ROOT/tidemark}

free_port() {
    python3 -c 'import socket; s = socket.socket()
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

DIR=$(mktemp -d)
PORT=$(free_port)
ADMIN=$(free_port)
cat > "$DIR/tidemark.ini" <<INI
[proxy]
listen = 127.0.0.1:$PORT
log_level = warn
[admin]
listen = 127.0.0.1:$ADMIN
[store]
path = $DIR/marks.lmdb
[locks]
path = $DIR/locks.lmdb
eager = $EAGER
INI
"$TIDEMARK_BIN" -c "$DIR/tidemark.ini" 2>"$DIR/log" &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$DIR"' EXIT
for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$ADMIN/healthz" >/dev/null && break
    sleep 0.05
done
for mode in pairs hot; do
    wrk -t "$THREADS" -c "$CONNS" -d "$DURATION" \
        -s tests/bench/locks.lua "http://127.0.0.1:$ADMIN" -- "$mode" 10000 |
        sed -n "s/^LOCKS_RESULT/mode=$mode eager=$EAGER/p"
done
