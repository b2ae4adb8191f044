#!/bin/sh
# A storm of log lines at warn: every request answered 502 because the
# upstream refuses connections (an upstream down), each with its access
# line, so tidemark writes one line a request as fast as it can answer.
# Runs tidemark with log_buffer = 0 (the loop writes each line) and with
# log_buffer = 1M (a thread writes them), in turn (A, B, A, B, ...),
# BENCH_REPEAT times (3), the proxy pinned to core 1 and wrk to core 0,
# stderr to a file; prints each run and the medians: requests a second
# and tidemark's CPU us a request (/proc/PID/stat). Raw output in
# tests/bench/results/<time>-logstorm/. Env: BENCH_DURATION (5s),
# BENCH_CONNECTIONS (32), BENCH_REPEAT (3), TIDEMARK_BIN.
set -eu

cd "$(dirname "$0")/../.."
ROOT=$(pwd)
DURATION=${BENCH_DURATION:-5s}
CONNS=${BENCH_CONNECTIONS:-32}
REPEAT=${BENCH_REPEAT:-3}
TIDEMARK_BIN=${TIDEMARK_BIN:-$ROOT/tidemark}
BUFFERS="0 1M"

for cmd in wrk taskset python3; do
    command -v "$cmd" >/dev/null 2>&1 || { echo "logstorm: $cmd not found: run make deps" >&2; exit 1; }
done
[ "$(nproc)" -ge 2 ] || { echo "logstorm: needs 2 cores to pin" >&2; exit 1; }

free_port() {
    python3 -c 'import socket; s = socket.socket()
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

DIR=$(mktemp -d)
OUT=$ROOT/tests/bench/results/$(date -u +%Y%m%dT%H%M%SZ)-logstorm
mkdir -p "$OUT"
PID=
cleanup() {
    [ -z "$PID" ] || kill "$PID" 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT INT TERM

# A port nothing listens on: every dial is refused at once.
DOWN=$(free_port)

# ticks: tidemark's user + system time, in clock ticks.
ticks() {
    awk '{print $14 + $15}' "/proc/$1/stat"
}

run() { # run BUFFER N: one run; appends "BUFFER N req/s us/req" to runs.txt
    port=$(free_port)
    admin=$(free_port)
    rm -rf "$DIR/store"
    mkdir -p "$DIR/store"
    cat > "$DIR/tm.ini" <<INI
[proxy]
listen = 127.0.0.1:$port
log_level = info
log_buffer = $1
[admin]
listen = 127.0.0.1:$admin
[store]
type = lmdb
path = $DIR/store/marks.lmdb
[upstream default]
url = http://127.0.0.1:$DOWN
connect_timeout_ms = 1000
[route docs]
methods = PUT
path = /v1/documents/{doc}
resource = documents/{doc}
INI
    taskset -c 1 "$TIDEMARK_BIN" -c "$DIR/tm.ini" 2>"$DIR/tm.log" &
    PID=$!
    i=0
    until python3 -c 'import socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()' "$port" 2>/dev/null; do
        i=$((i + 1))
        [ "$i" -lt 500 ] || { echo "logstorm: tidemark did not listen" >&2; exit 1; }
        kill -0 "$PID" || { cat "$DIR/tm.log" >&2; exit 1; }
        python3 -c 'import time; time.sleep(0.01)'
    done
    t0=$(ticks "$PID")
    taskset -c 0 wrk -t2 -c"$CONNS" -d"$DURATION" \
        "http://127.0.0.1:$port/x" > "$OUT/wrk-$1-$2.txt" 2>&1
    t1=$(ticks "$PID")
    kill "$PID"
    wait "$PID" 2>/dev/null || true
    PID=
    lines=$(grep -c ' status=502 ' "$DIR/tm.log" || true)
    python3 - "$OUT/wrk-$1-$2.txt" "$1" "$2" "$t0" "$t1" "$lines" \
        >> "$OUT/runs.txt" <<'PY'
import os, re, sys
text = open(sys.argv[1]).read()
n = int(re.search(r"(\d+) requests in", text).group(1))
rate = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
tick = os.sysconf("SC_CLK_TCK")
us = (int(sys.argv[5]) - int(sys.argv[4])) / tick * 1e6 / n
print("%s %s %.0f %.1f %d %d" % (sys.argv[2], sys.argv[3], rate, us, n,
                                 int(sys.argv[6])))
PY
}

{
    echo "tidemark log storm, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "tidemark $(git describe --always --dirty 2>/dev/null || echo '?');" \
        "binary ${TIDEMARK_BIN#"$ROOT"/}"
    echo "load: wrk -t2 -c$CONNS -d$DURATION GET (a 502 and a warn access line each: the upstream refuses)"
} > "$OUT/meta.txt"
for n in $(seq "$REPEAT"); do
    for b in $BUFFERS; do
        echo "running log_buffer = $b ($n of $REPEAT) ..."
        run "$b" "$n"
    done
done
python3 - "$OUT/runs.txt" "$BUFFERS" > "$OUT/summary.txt" <<'PY'
import statistics, sys
runs = [l.split() for l in open(sys.argv[1])]
print("log_buffer  req/s (median)  CPU us/req (median)  runs (req/s)")
med = {}
for b in sys.argv[2].split():
    mine = [r for r in runs if r[0] == b]
    rate = statistics.median(float(r[2]) for r in mine)
    us = statistics.median(float(r[3]) for r in mine)
    med[b] = (rate, us)
    print("%-10s  %14.0f  %19.1f  %s" % (b, rate, us,
                                         " ".join(r[2] for r in mine)))
# wrk counts the answers it read before its end; tidemark logs those and
# the ones in flight then: a line is missing only when there are fewer.
for r in runs:
    if int(r[5]) < int(r[4]):
        print("LINES MISSING: run %s %s logged %s lines for %s requests"
              % (r[0], r[1], r[5], r[4]))
b0, b1 = sys.argv[2].split()
print("log_buffer %s against %s: %.2fx the requests a second, %.2fx the CPU a request"
      % (b1, b0, med[b1][0] / med[b0][0], med[b1][1] / med[b0][1]))
PY
cat "$OUT/meta.txt" "$OUT/summary.txt"
echo "raw output: tests/bench/results/$(basename "$OUT")/"
