#!/bin/sh
# marks.sh: what a refusal costs as the number of marks grows. For each
# count in MARKS_COUNTS, an LMDB store holding that many marks (resources
# documents/m0 .. documents/m<count-1>, mark 1000) is written once by
# PREMARK (tests/bench/premark.c: the store's own code, so the file is
# what tidemark writes);
# then every binary of MARKS_BINS serves it in turn, pinned to CPU
# MARKS_PROXY_CPU, while wrk, pinned to MARKS_WRK_CPU, sends token 1 to
# random resources (every answer a 409, decided on the mark the store
# holds: beyond [store] cache_entries most are cache misses). Each cell
# (count x binary) runs MARKS_REPEAT times, the binaries alternating; the
# table gives the medians of requests/s, p99 and the proxy's CPU per
# refusal (user + system time from /proc, over the run).
#
# Env: MARKS_COUNTS ("1000 10000000"), MARKS_BINS (the tidemark binaries
# to compare, "NAME=PATH ..."; default "tidemark=./tidemark"),
# MARKS_REPEAT (3), MARKS_DURATION (10s), MARKS_WARMUP (2s: refusals sent
# before each measured run, not counted, so that the run measures a
# filled cache and a mapped store, not their filling; 0s: none),
# MARKS_CONNECTIONS (32),
# MARKS_WRITERS (0: with N > 0, a second wrk, also on MARKS_WRK_CPU,
# raises 1000 other resources to rising tokens over N connections during
# each run, so that the store's writer is busy with journal syncs; the
# CPU column then counts those raises too), MARKS_PROXY_CPU (0),
# MARKS_WRK_CPU (1), MARKS_RESULTS
# (tests/bench/results: raw output and the table in a new
# <time>-marks folder).
set -eu

cd "$(dirname "$0")/../.."
ROOT=$(pwd)
COUNTS=${MARKS_COUNTS:-1000 10000000}
BINS=${MARKS_BINS:-tidemark=$ROOT/tidemark}
REPEAT=${MARKS_REPEAT:-3}
DURATION=${MARKS_DURATION:-10s}
WARMUP=${MARKS_WARMUP:-2s}
CONNS=${MARKS_CONNECTIONS:-32}
WRITERS=${MARKS_WRITERS:-0}
PCPU=${MARKS_PROXY_CPU:-0}
WCPU=${MARKS_WRK_CPU:-1}
OUT=${MARKS_RESULTS:-$ROOT/tests/bench/results}/$(date -u +%Y%m%dT%H%M%SZ)-marks
MARK=1000

die() {
    echo "marks: $*" >&2
    exit 1
}

PREMARK=${PREMARK:-$ROOT/build/tools/premark}
for cmd in wrk taskset curl python3 "$PREMARK"; do
    command -v "$cmd" >/dev/null 2>&1 || die "$cmd not found"
done
for b in $BINS; do
    [ -x "${b#*=}" ] || die "${b#*=} is not an executable (MARKS_BINS)"
done

dir=$(mktemp -d "${TMPDIR:-/tmp}/tidemark-marks.XXXXXX")
tm_pid=""
cleanup() {
    if [ -n "$tm_pid" ]; then
        kill "$tm_pid" 2>/dev/null || true
        wait "$tm_pid" 2>/dev/null || true
    fi
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$OUT"

# load COUNT FILE: the store, written through the store's own code by
# PREMARK (tests/bench/premark.c), as make bench's marks set does.
load() {
    "$PREMARK" "$2" documents/m "$1" "$MARK" $((2 << 30)) >/dev/null
}

port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

cpu_ticks() { # PID: user + system clock ticks
    awk '{ print $14 + $15 }' "/proc/$1/stat"
}

# run NAME BIN COUNT: one measured run; appends a line to $OUT/runs.txt.
run() {
    tm_port=$(port)
    adm_port=$(port)
    cat > "$dir/tidemark.ini" <<INI
[proxy]
listen = 127.0.0.1:$tm_port
log_level = warn

[admin]
listen = 127.0.0.1:$adm_port

[upstream default]
url = http://127.0.0.1:9

[store]
type = lmdb
path = $dir/store-$3/marks.lmdb
map_size = 2G

[route documents]
methods = PUT
path = /v1/documents/{doc}
resource = documents/{doc}
mode = correctness
upstream = default
INI
    taskset -c "$PCPU" "$2" -c "$dir/tidemark.ini" >"$dir/tidemark.log" 2>&1 &
    tm_pid=$!
    i=0
    until curl -s -o /dev/null "http://127.0.0.1:$tm_port/"; do
        kill -0 "$tm_pid" 2>/dev/null || die "$1 exited: $(cat "$dir/tidemark.log")"
        i=$((i + 1))
        [ "$i" -le 100 ] || die "$1 does not answer"
        sleep 0.1
    done
    s=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H 'Fencing-Token: 1' \
        -d '{}' "http://127.0.0.1:$tm_port/v1/documents/m0")
    [ "$s" = 409 ] || die "$1: a stale PUT answered $s, not 409"
    if [ "$WARMUP" != 0s ] && [ "$WARMUP" != 0 ]; then
        taskset -c "$WCPU" wrk -t1 -c"$CONNS" -d"$WARMUP" \
            -s "$ROOT/tests/bench/marks.lua" "http://127.0.0.1:$tm_port" \
            -- "$3" >"$dir/warmup.out" 2>&1 ||
            die "wrk failed: $(cat "$dir/warmup.out")"
    fi
    w_pid=""
    if [ "$WRITERS" -gt 0 ]; then
        base=$(python3 -c 'import time; print(int(time.time() * 1e6))')
        taskset -c "$WCPU" wrk -t1 -c"$WRITERS" -d"$DURATION" \
            -s "$ROOT/tests/bench/fence.lua" "http://127.0.0.1:$tm_port" \
            -- rising w 1000 1 "$base" "$WRITERS" >"$dir/writers.out" 2>&1 &
        w_pid=$!
    fi
    t0=$(cpu_ticks "$tm_pid")
    taskset -c "$WCPU" wrk -t1 -c"$CONNS" -d"$DURATION" --latency \
        -s "$ROOT/tests/bench/marks.lua" "http://127.0.0.1:$tm_port" \
        -- "$3" >"$dir/wrk.out" 2>&1 || die "wrk failed: $(cat "$dir/wrk.out")"
    t1=$(cpu_ticks "$tm_pid")
    if [ -n "$w_pid" ]; then
        wait "$w_pid" || die "the writers' wrk failed: $(cat "$dir/writers.out")"
        cat "$dir/writers.out" >>"$OUT/writers-$1-$3.txt"
    fi
    kill "$tm_pid"
    wait "$tm_pid" 2>/dev/null || true
    tm_pid=""
    cat "$dir/wrk.out" >>"$OUT/wrk-$1-$3.txt"
    line=$(grep '^MARKS_RESULT' "$dir/wrk.out") || die "no result from wrk"
    echo "$line" | awk -v name="$1" -v count="$3" -v ticks=$((t1 - t0)) \
        -v hz="$(getconf CLK_TCK)" '{
            for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
            if (v["status_errors"] != v["requests"] || v["socket_errors"] > 0)
                printf "marks: %s: %d of %d answers were not 409, %d socket errors\n",
                    name, v["requests"] - v["status_errors"], v["requests"],
                    v["socket_errors"] > "/dev/stderr"
            printf "%s %s %.0f %d %.2f\n", name, count,
                v["requests"] / (v["duration_us"] / 1e6), v["p99_us"],
                ticks / hz * 1e6 / v["requests"]
        }' >>"$OUT/runs.txt"
    tail -n 1 "$OUT/runs.txt"
}

for c in $COUNTS; do
    mkdir -p "$dir/store-$c"
    echo "marks: loading $c marks" >&2
    load "$c" "$dir/store-$c/marks.lmdb"
done
echo "# name count req/s p99_us cpu_us_per_refusal" >"$OUT/runs.txt"
r=1
while [ "$r" -le "$REPEAT" ]; do
    for c in $COUNTS; do
        for b in $BINS; do
            run "${b%%=*}" "${b#*=}" "$c"
        done
    done
    r=$((r + 1))
done
{
    echo "# medians of $REPEAT runs of $DURATION after $WARMUP of warm-up," \
        "$CONNS connections," \
        "$WRITERS raising other resources meanwhile;" \
        "proxy on CPU $PCPU, wrk on CPU $WCPU"
    echo "# name count req/s p99_us cpu_us_per_refusal"
    python3 - "$OUT/runs.txt" <<'PY'
import statistics, sys
cells = {}
for line in open(sys.argv[1]):
    if not line.startswith("#"):
        f = line.split()
        cells.setdefault((f[0], int(f[1])), []).append([float(x) for x in f[2:]])
for (name, count), runs in cells.items():
    med = [statistics.median(col) for col in zip(*runs)]
    print("%s %d %.0f %.0f %.2f" % (name, count, *med))
PY
} | tee "$OUT/summary.txt"
