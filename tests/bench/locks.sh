#!/bin/sh
# Lock service throughput through the HTTP API: lock and release pairs
# per second, then tries and wins per second on one hot lock. Starts its
# own tidemark in a temporary directory, and for BACKEND=redis, postgres,
# etcd or zookeeper its own server (tests/integration/servers.py; etcd: one
# member; redis-cluster: 3 masters, 3 replicas; zookeeper: one server).
# With WAITERS (counts: "0 1000 10000"), only pairs are run, once for
# each count, with that many other calls left waiting on the service
# (tests/bench/park.py: each on a name of its own, taken first), tidemark
# pinned to core 1 and the load to core 0; each line adds the count and
# tidemark's CPU time (user + system) per request: how the cost of a
# lock call grows with the calls waiting beside it.
# Env: BACKEND (lmdb | redis | redis-cluster | postgres | etcd |
# zookeeper), BENCH_DURATION (10s),
# BENCH_THREADS (2), BENCH_CONNECTIONS (32), EAGER (yes), POOL (16,
# postgres connections; etcd: connections per endpoint), TIDEMARK_BIN.
set -eu

cd "$(dirname "$0")/../.."
ROOT=$(pwd)
DURATION=${BENCH_DURATION:-10s}
THREADS=${BENCH_THREADS:-2}
CONNS=${BENCH_CONNECTIONS:-32}
EAGER=${EAGER:-yes}
BACKEND=${BACKEND:-lmdb}
POOL=${POOL:-16}
WAITERS=${WAITERS:-}
PIN_PROXY="" PIN_LOAD=""
if [ -n "$WAITERS" ] && [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
    PIN_PROXY="taskset -c 1" PIN_LOAD="taskset -c 0"
fi
TIDEMARK_BIN=${TIDEMARK_BIN:-$ROOT/tidemark}

free_port() {
    python3 -c 'import socket; s = socket.socket()
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

DIR=$(mktemp -d)
PORT=$(free_port)
ADMIN=$(free_port)
SERVER_PID=
case $BACKEND in
lmdb)
    LOCKS="path = $DIR/locks.lmdb" ;;
redis|postgres|etcd|zookeeper)
    # Prints the server's pid, then the [locks] key for it; the server
    # runs in its own session and outlives this python.
    OUT=$(/usr/bin/python3 -c 'import sys
sys.path.insert(0, "tests/integration")
import servers
s = servers.KINDS[sys.argv[1]]().start()
print(s.proc.pid)
print({"redis": lambda: "url = " + s.url,
       "postgres": lambda: "dsn = " + s.dsn,
       "etcd": lambda: "endpoints = " + s.endpoints,
       "zookeeper": lambda: "hosts = " + s.hosts}[sys.argv[1]]())
print(s.dir)' "$BACKEND")
    SERVER_PID=$(echo "$OUT" | sed -n 1p)
    LOCKS="$(echo "$OUT" | sed -n 2p)
pool_size = $POOL"
    SERVER_DIR=$(echo "$OUT" | sed -n 3p) ;;
redis-cluster)
    # Prints the nodes' pids, the [locks] keys, then their folders.
    OUT=$(/usr/bin/python3 -c 'import sys
sys.path.insert(0, "tests/integration")
import servers
c = servers.RedisCluster().start()
print(" ".join(str(n.proc.pid) for n in c.nodes))
print("url = " + c.url)
print(" ".join(n.dir for n in c.nodes))')
    SERVER_PID=$(echo "$OUT" | sed -n 1p)
    LOCKS="$(echo "$OUT" | sed -n 2p)
cluster = yes"
    SERVER_DIR=$(echo "$OUT" | sed -n 3p)
    BACKEND_KEY=redis ;;
*)
    echo "BACKEND must be lmdb, redis, redis-cluster, postgres, etcd or zookeeper" >&2
    exit 2 ;;
esac
cat > "$DIR/tidemark.ini" <<INI
[proxy]
listen = 127.0.0.1:$PORT
log_level = warn
[admin]
listen = 127.0.0.1:$ADMIN
[store]
path = $DIR/marks.lmdb
[locks]
backend = ${BACKEND_KEY:-$BACKEND}
$LOCKS
eager = $EAGER
max_wait_ms = 3600000
INI
$PIN_PROXY "$TIDEMARK_BIN" -c "$DIR/tidemark.ini" 2>"$DIR/log" &
PID=$!
cleanup() {
    kill "$PID" 2>/dev/null
    wait "$PID" 2>/dev/null
    for pid in $SERVER_PID; do
        kill -INT "$pid" 2>/dev/null
        while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    done
    # shellcheck disable=SC2086 # one folder per node
    [ -z "$SERVER_PID" ] || rm -rf $SERVER_DIR
    rm -rf "$DIR"
}
trap cleanup EXIT
# Up, and the lock backend connected: a lookup answers 404, not 503.
for _ in $(seq 200); do
    code=$(curl -s -o /dev/null -w '%{http_code}' \
        "http://127.0.0.1:$ADMIN/v1/locks/bench/probe" || true)
    [ "$code" = 404 ] && break
    sleep 0.05
done
# cpu_ticks: tidemark's user + system time so far, in clock ticks.
cpu_ticks() {
    awk '{print $14 + $15}' "/proc/$PID/stat"
}
if [ -n "$WAITERS" ]; then
    HZ=$(getconf CLK_TCK)
    for n in $WAITERS; do
        mkfifo "$DIR/park-in"
        $PIN_LOAD /usr/bin/python3 tests/bench/park.py 127.0.0.1 "$ADMIN" \
            "$n" "parked/$n/" 3000000 <"$DIR/park-in" >"$DIR/park-out" &
        PARK=$!
        exec 3>"$DIR/park-in"
        until grep -q parked "$DIR/park-out" 2>/dev/null; do
            kill -0 "$PARK" 2>/dev/null || { echo "park.py failed" >&2; exit 1; }
            sleep 0.2
        done
        t0=$(cpu_ticks)
        out=$($PIN_LOAD wrk -t "$THREADS" -c "$CONNS" -d "$DURATION" \
            -s tests/bench/locks.lua "http://127.0.0.1:$ADMIN" -- pairs 10000)
        t1=$(cpu_ticks)
        echo "$out" | sed -n "s/^LOCKS_RESULT/backend=$BACKEND mode=pairs waiters=$n eager=$EAGER/p" |
            awk -v t="$((t1 - t0))" -v hz="$HZ" '{
                for (i = 1; i <= NF; i++) if ($i ~ /^requests=/) { split($i, kv, "="); r = kv[2] }
                printf "%s cpu_us_per_request=%.1f\n", $0, t * 1e6 / hz / r }'
        exec 3>&-
        wait "$PARK" || exit 1
        rm -f "$DIR/park-in" "$DIR/park-out"
    done
    exit 0
fi
for mode in pairs hot; do
    wrk -t "$THREADS" -c "$CONNS" -d "$DURATION" \
        -s tests/bench/locks.lua "http://127.0.0.1:$ADMIN" -- "$mode" 10000 |
        sed -n "s/^LOCKS_RESULT/backend=$BACKEND mode=$mode eager=$EAGER/p"
done
