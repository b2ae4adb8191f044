#!/bin/sh
# make bench: wrk against the bare upstream, nginx proxy_pass in front of
# it, and tidemark in front of it, for three fencing workloads; each cell
# (workload x target) runs BENCH_REPEAT times with the targets in turn;
# then a table of the median requests/s and p99, the ratio of the medians
# to nginx's, and the system calls per request of nginx and tidemark,
# counted over one more run of each cell.
#
# Env: BENCH_DURATION (10s per run), BENCH_REPEAT (3 runs per cell),
# BENCH_FLUSH (on; off: tidemark runs with fsync and fdatasync made
# no-ops by tests/preload/nosync.so, so nothing it writes is durable: a
# measurement of what the flush costs the rising path, never a result),
# BENCH_SYSCALL_DURATION (5s: the run whose system calls are counted; 0
# for none), BENCH_SYSCALL_TOOL (perf, or strace: slower, see below),
# BENCH_THREADS (2), BENCH_CONNECTIONS (32), BENCH_RESOURCES (1000),
# BENCH_WARMUP (2s, 0 for none), BENCH_WORKLOADS ("equal rising stale"),
# BENCH_TARGETS ("bare nginx tidemark"; drop one only to debug), STORE
# (lmdb | postgres | redis | etcd: the bench starts its own server in its
# temporary directory), BENCH_POOL ([store] pool_size for postgres and
# etcd), BENCH_RESULTS (tests/bench/results: each run leaves its raw
# output, wrk's and the system call tables, and summary.txt in a new
# <time>-<store> folder there), TIDEMARK_BIN.
#
# Fairness on a small machine: the upstream nginx and the proxy nginx get
# one worker each, as tidemark has one network thread; all three targets
# run one after the other on the same upstream, so each proxy competes with
# the same wrk and the same upstream for the CPU. Logging is off for both
# proxies (nginx access_log off; tidemark log_level = warn, which writes no
# line per request).
set -eu

cd "$(dirname "$0")/../.."
ROOT=$(pwd)
BENCH=$ROOT/tests/bench

DURATION=${BENCH_DURATION:-10s}
REPEAT=${BENCH_REPEAT:-3}
SYSCALL_DURATION=${BENCH_SYSCALL_DURATION:-5s}
RESULTS=${BENCH_RESULTS:-$BENCH/results}
THREADS=${BENCH_THREADS:-2}
CONNS=${BENCH_CONNECTIONS:-32}
RES=${BENCH_RESOURCES:-1000}
WARMUP=${BENCH_WARMUP:-2s}
WORKLOADS=${BENCH_WORKLOADS:-equal rising stale}
TARGETS=${BENCH_TARGETS:-bare nginx tidemark}
STORE=${STORE:-lmdb}
FLUSH=${BENCH_FLUSH:-on}
TIDEMARK_BIN=${TIDEMARK_BIN:-$ROOT/tidemark}

EQUAL_TOKEN=1000
STALE_MARK=1000000000000000   # 10^15: below 2^53, exact in wrk's Lua

die() {
    echo "bench: $*" >&2
    exit 1
}

has_target() {
    case " $TARGETS " in *" $1 "*) return 0 ;; *) return 1 ;; esac
}

for t in $TARGETS; do
    case "$t" in
        bare | nginx | tidemark) ;;
        *) die "unknown target '$t' in BENCH_TARGETS (bare nginx tidemark)" ;;
    esac
done
for w in $WORKLOADS; do
    case "$w" in
        equal | rising | stale) ;;
        *) die "unknown workload '$w' in BENCH_WORKLOADS (equal rising stale)" ;;
    esac
done
case "$FLUSH" in
    on) TM_PRELOAD="" ;;
    off)
        TM_PRELOAD=$ROOT/tests/preload/nosync.so
        [ -f "$TM_PRELOAD" ] || die "$TM_PRELOAD not built: make tests/preload/nosync.so"
        ;;
    *) die "BENCH_FLUSH=$FLUSH: on or off" ;;
esac
case "$REPEAT" in
    '' | *[!0-9]* | 0) die "BENCH_REPEAT=$REPEAT: a count of runs, 1 or more" ;;
esac
# Every known store must be listed here and in store_start below.
case "$STORE" in
    lmdb | postgres | redis | etcd) ;;
    *) die "unknown STORE=$STORE (supported: lmdb postgres redis etcd)" ;;
esac
for cmd in wrk nginx curl python3; do
    command -v "$cmd" >/dev/null 2>&1 || die "$cmd not found: run make deps"
done
if has_target tidemark && [ ! -x "$TIDEMARK_BIN" ]; then
    die "$TIDEMARK_BIN not built: run make"
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/tidemark-bench.XXXXXX")
# nginx workers may run as nobody when started by root: let them in.
chmod 0755 "$dir"
pids=""
wrk_pid=""
cleanup() {
    for p in $wrk_pid $pids; do
        kill "$p" 2>/dev/null || true
    done
    for p in $wrk_pid $pids; do
        wait "$p" 2>/dev/null || true
    done
    if [ "${BENCH_KEEP:-0}" = 1 ]; then
        echo "bench: kept $dir" >&2
    else
        rm -rf "$dir"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# Free loopback ports, all bound at once so they differ; the servers bind
# them right after.
free_ports() {
    python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}
# shellcheck disable=SC2046
set -- $(free_ports 6)
UP_PORT=$1 NGX_PORT=$2 TM_PORT=$3 ADM_PORT=$4 STORE_PORT=$5 PEER_PORT=$6

# wait_http NAME PID URL LOG: until URL answers, or fail if PID died.
wait_http() {
    i=0
    until curl -s -o /dev/null "$3"; do
        if ! kill -0 "$2" 2>/dev/null; then
            echo "bench: $1 exited at start; its log:" >&2
            cat "$4" >&2 || true
            exit 1
        fi
        i=$((i + 1))
        if [ "$i" -gt 100 ]; then
            die "$1 does not answer at $3"
        fi
        sleep 0.1
    done
}

# nginx_conf PREFIX PORT BODY: a one-worker, foreground nginx whose every
# path stays inside PREFIX (no /run, /var/lib/nginx or /var/log).
nginx_conf() {
    mkdir -p "$1"
    cat > "$1/nginx.conf" <<NGX
worker_processes 1;
daemon off;
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $1/body;
    proxy_temp_path $1/proxy;
    fastcgi_temp_path $1/fastcgi;
    uwsgi_temp_path $1/uwsgi;
    scgi_temp_path $1/scgi;
    keepalive_timeout 75s;
    keepalive_requests 1000000;
$3
}
NGX
}

start_nginx() { # NAME PREFIX
    nginx -p "$2/" -c "$2/nginx.conf" -e "$2/error.log" \
        >"$2/stdout.log" 2>&1 &
    pids="$pids $!"
    wait_http "$1" "$!" "http://127.0.0.1:$3/" "$2/error.log"
}

# The upstream: as fast as a keep-alive HTTP server gets, so the
# comparison measures the proxies.
nginx_conf "$dir/up" "$UP_PORT" "    server {
        listen 127.0.0.1:$UP_PORT backlog=4096;
        location / { return 200 \"ok\\n\"; }
    }"
start_nginx upstream "$dir/up" "$UP_PORT"

if has_target nginx; then
    nginx_conf "$dir/ngx" "$NGX_PORT" "    upstream backend {
        server 127.0.0.1:$UP_PORT;
        keepalive 64;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:$NGX_PORT backlog=4096;
        location / {
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
        }
    }"
    start_nginx nginx "$dir/ngx" "$NGX_PORT"
fi

# Store sections: each sets STORE_INI (the [store] keys) and STORE_DESC,
# and starts its server (adding the pid to $pids) if it needs one.
store_start() {
    case "$STORE" in
        lmdb)
            mkdir -p "$dir/store"
            STORE_INI="type = lmdb
path = $dir/store/marks.lmdb"
            fs=$(df -T "$dir/store" | awk 'NR == 2 { print $2 }')
            STORE_DESC="lmdb $(dpkg-query -W -f='${Version}' liblmdb0 \
                2>/dev/null || echo '?'), on $fs"
            ;;
        redis)
            mkdir -p "$dir/redis"
            redis-server --port "$STORE_PORT" --bind 127.0.0.1 --save '' \
                --appendonly yes --appendfsync always --dir "$dir/redis" \
                >"$dir/redis/log" 2>&1 &
            pids="$pids $!"
            wait_cmd redis "$!" "$dir/redis/log" \
                redis-cli -p "$STORE_PORT" ping
            STORE_INI="type = redis
url = redis://127.0.0.1:$STORE_PORT"
            STORE_DESC="$(redis-server --version | awk '{ print $1, $3 }'),"
            STORE_DESC="$STORE_DESC appendfsync always"
            ;;
        postgres)
            pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
            mkdir -p "$dir/pg"
            as_pg=""
            if [ "$(id -u)" -eq 0 ]; then
                chown postgres "$dir/pg"
                as_pg="runuser -u postgres --"
            fi
            $as_pg "$pgbin/initdb" -D "$dir/pg/data" -A trust -U postgres \
                -E UTF8 >"$dir/pg/initdb.log" 2>&1 ||
                die "initdb failed: $(tail -n 5 "$dir/pg/initdb.log")"
            $as_pg "$pgbin/postgres" -D "$dir/pg/data" -k "$dir/pg" \
                -p "$STORE_PORT" -c listen_addresses=127.0.0.1 \
                >"$dir/pg/log" 2>&1 &
            pids="$pids $!"
            wait_cmd postgres "$!" "$dir/pg/log" "$pgbin/pg_isready" \
                -h 127.0.0.1 -p "$STORE_PORT" -U postgres -d postgres
            STORE_INI="type = postgres
dsn = host=127.0.0.1 port=$STORE_PORT user=postgres dbname=postgres
pool_size = ${BENCH_POOL:-2}"
            STORE_DESC="postgres $("$pgbin/postgres" --version |
                awk '{ print $3 }'), synchronous_commit on, fsync on"
            ;;
        etcd)
            mkdir -p "$dir/etcd"
            etcd --name default --data-dir "$dir/etcd/data" \
                --listen-client-urls "http://127.0.0.1:$STORE_PORT" \
                --advertise-client-urls "http://127.0.0.1:$STORE_PORT" \
                --listen-peer-urls "http://127.0.0.1:$PEER_PORT" \
                --initial-advertise-peer-urls "http://127.0.0.1:$PEER_PORT" \
                --initial-cluster "default=http://127.0.0.1:$PEER_PORT" \
                --log-level warn >"$dir/etcd/log" 2>&1 &
            pids="$pids $!"
            wait_cmd etcd "$!" "$dir/etcd/log" \
                curl -sf "http://127.0.0.1:$STORE_PORT/health"
            STORE_INI="type = etcd
endpoints = http://127.0.0.1:$STORE_PORT
pool_size = ${BENCH_POOL:-4}"
            STORE_DESC="etcd $(etcd --version | awk 'NR == 1 { print $3 }')"
            ;;
        *)
            die "no store section for STORE=$STORE"
            ;;
    esac
}

# wait_cmd NAME PID LOG CMD...: until CMD succeeds, or fail if PID died.
wait_cmd() {
    name=$1 pid=$2 log=$3
    shift 3
    i=0
    until "$@" >/dev/null 2>&1; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "bench: $name exited at start; its log:" >&2
            cat "$log" >&2 || true
            exit 1
        fi
        i=$((i + 1))
        if [ "$i" -gt 300 ]; then
            die "$name does not answer"
        fi
        sleep 0.1
    done
}

if has_target tidemark; then
    store_start
    cat > "$dir/tidemark.ini" <<INI
[proxy]
listen = 127.0.0.1:$TM_PORT
log_level = warn

[upstream default]
url = http://127.0.0.1:$UP_PORT
max_idle = 64                 ; as nginx's keepalive 64

[store]
$STORE_INI

[admin]
listen = 127.0.0.1:$ADM_PORT

[route documents]
methods = PUT
path = /v1/documents/{doc}
resource = documents/{doc}
mode = correctness
upstream = default
INI
    if [ -n "$TM_PRELOAD" ]; then
        LD_PRELOAD=$TM_PRELOAD "$TIDEMARK_BIN" -c "$dir/tidemark.ini" \
            >"$dir/tidemark.log" 2>&1 &
    else
        "$TIDEMARK_BIN" -c "$dir/tidemark.ini" >"$dir/tidemark.log" 2>&1 &
    fi
    TM_PID=$!
    pids="$pids $TM_PID"
    wait_http tidemark "$TM_PID" "http://127.0.0.1:$TM_PORT/" \
        "$dir/tidemark.log"
    # A network store connects after start: wait until it is usable.
    wait_cmd "tidemark's store" "$TM_PID" "$dir/tidemark.log" \
        curl -sf "http://127.0.0.1:$ADM_PORT/readyz"
fi

target_port() {
    case "$1" in
        bare) echo "$UP_PORT" ;;
        nginx) echo "$NGX_PORT" ;;
        tidemark) echo "$TM_PORT" ;;
    esac
}

# put_status PREFIX_AND_INDEX TOKEN: tidemark's status for one PUT.
put_status() {
    curl -s -o /dev/null -w '%{http_code}' -X PUT \
        -H "Fencing-Token: $2" -d '{"state":"check"}' \
        "http://127.0.0.1:$TM_PORT/v1/documents/$1"
}

# Marks each workload starts from, set through tidemark; then one request
# of each kind checks that tidemark answers as the workload expects.
if has_target tidemark; then
    for w in $WORKLOADS; do
        case "$w" in
            equal)
                python3 "$BENCH/prime.py" 127.0.0.1 "$TM_PORT" eq- "$RES" \
                    "$EQUAL_TOKEN" || die "priming equal marks failed"
                s=$(put_status eq-0 "$EQUAL_TOKEN")
                [ "$s" = 200 ] || die "equal token answered $s, not 200"
                ;;
            stale)
                python3 "$BENCH/prime.py" 127.0.0.1 "$TM_PORT" st- "$RES" \
                    "$STALE_MARK" || die "priming stale marks failed"
                s=$(put_status st-0 1)
                [ "$s" = 409 ] || die "stale token answered $s, not 409"
                ;;
        esac
    done
fi

# wrk_args WORKLOAD: fence.lua's arguments for one run of WORKLOAD.
wrk_args() {
    case "$1" in
        equal) echo "equal eq- $RES $THREADS $EQUAL_TOKEN $CONNS" ;;
        stale) echo "stale st- $RES $THREADS 1 $CONNS" ;;
        # A base above every earlier token on these resources: the clock
        # in microseconds' worth of seconds, far below 2^53. A run sends
        # far fewer than 10^6 requests a second, so the next run's base is
        # above every token of this one.
        rising) echo "rising up- $RES $THREADS $(date +%s)000000 $CONNS" ;;
    esac
}

# run_wrk WORKLOAD TARGET DURATION OUT [CMD...]: one wrk run, its output
# in OUT; prints "workload target rps p99_us non2xx socket_errors lost
# requests". CMD, if given, runs wrk (perf stat -p ... --).
run_wrk() {
    w=$1 t=$2 d=$3 out=$4
    shift 4
    args=$(wrk_args "$w")
    port=$(target_port "$t")
    if [ "$t" = tidemark ] && ! kill -0 "$TM_PID" 2>/dev/null; then
        tail -n 20 "$dir/tidemark.log" >&2 || true
        die "tidemark is not running any more"
    fi
    # In the background and waited for, so that a signal to this script
    # stops the bench at once (the shell runs traps only between commands).
    # shellcheck disable=SC2086
    "$@" wrk -t"$THREADS" -c"$CONNS" -d"$d" --latency \
        -s "$BENCH/fence.lua" "http://127.0.0.1:$port/" -- $args \
        >"$out" 2>&1 &
    wrk_pid=$!
    rc=0
    wait "$wrk_pid" || rc=$?
    wrk_pid=""
    if [ "$rc" -ne 0 ]; then
        cat "$out" >&2
        die "wrk failed against $t ($w)"
    fi
    line=$(grep '^WRK_RESULT' "$out") || {
        cat "$out" >&2
        die "no WRK_RESULT line from wrk against $t ($w)"
    }
    echo "$line" | awk -v w="$w" -v t="$t" '{
        for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        rps = v["duration_us"] > 0 ? v["requests"] / (v["duration_us"] / 1e6) : 0
        printf "%s %s %.0f %d %d %d %d %d\n", w, t, rps, v["p99_us"],
            v["status_errors"], v["socket_errors"], v["lost"], v["requests"]
    }'
}

# target_pids TARGET: the processes that serve TARGET, comma-separated
# (nginx: the master and its worker; tidemark: the one process, with all
# its threads).
target_pids() {
    case "$1" in
        nginx)
            m=$(cat "$dir/ngx/nginx.pid")
            echo "$m$(ps -o pid= --ppid "$m" | awk '{ printf ",%s", $1 }')"
            ;;
        tidemark) echo "$TM_PID" ;;
    esac
}

# How system calls are counted: perf's raw_syscalls tracepoint (a counter
# in the kernel; the process runs at full speed) where it works, else
# strace -c (which stops the process at every call, so the load it sees
# is lighter and batches less: the count per request comes out higher).
# BENCH_SYSCALL_TOOL=strace picks strace even where perf works.
SYSCALL_TOOL=none
if [ "$SYSCALL_DURATION" = 0 ] || [ "$SYSCALL_DURATION" = 0s ]; then
    :
elif [ "${BENCH_SYSCALL_TOOL:-perf}" = perf ] &&
    perf stat -e raw_syscalls:sys_enter -o /dev/null true >/dev/null 2>&1; then
    SYSCALL_TOOL=perf
elif command -v strace >/dev/null 2>&1; then
    SYSCALL_TOOL=strace
else
    echo "bench: neither perf nor strace works: no syscall column" >&2
fi

# cpu_ticks PIDLIST: "user system", the CPU time the processes of
# PIDLIST (comma-separated; each with all its threads) have used, in
# clock ticks.
cpu_ticks() {
    for p in $(echo "$1" | tr ',' ' '); do
        cat "/proc/$p/stat"
    done | awk '{ sub(/^.*\) /, ""); u += $12; s += $13 }
                END { print u + 0, s + 0 }'
}

# raise_stats: "seconds raises syncs", tidemark's counters of the time its
# raises waited for the store (from the request's raise to the store's
# answer), how many raises, and how many journal syncs (lmdb; 0 elsewhere).
raise_stats() {
    curl -sf "http://127.0.0.1:$ADM_PORT/metrics" | awk '
        /^tidemark_store_raise_seconds_sum/ { s += $NF }
        /^tidemark_store_raise_seconds_count/ { n += $NF }
        /^tidemark_lmdb_journal_syncs_total/ { j += $NF }
        END { printf "%.6f %d %d\n", s, n, j }'
}

# count_syscalls WORKLOAD TARGET: one wrk run of SYSCALL_DURATION while
# the target's system calls are counted; prints "workload target
# syscalls requests user_us system_us raise_seconds raises syncs" (the
# CPU time of the target's processes over the run, in microseconds, and
# for tidemark its store's raise counters over the run). The count covers
# the whole run (accepts and the first reads included) and wrk's requests
# are the answered ones, so the ratio is the calls per answered request,
# within the few requests in flight at the end.
count_syscalls() {
    w=$1 t=$2
    pidlist=$(target_pids "$t")
    cpu0=$(cpu_ticks "$pidlist")
    raise0="0 0 0"
    [ "$t" != tidemark ] || raise0=$(raise_stats)
    tab="$out_dir/syscalls-$w-$t.txt"
    case "$SYSCALL_TOOL" in
        perf)
            # perf opens its counters on the target before it starts wrk
            # and closes them when wrk exits: the window is the run.
            res=$(run_wrk "$w" "$t" "$SYSCALL_DURATION" \
                "$out_dir/wrk-$w-$t-syscalls.txt" \
                perf stat -x ';' -o "$tab" -p "$pidlist" \
                -e raw_syscalls:sys_enter -e 'syscalls:sys_enter_*' --)
            calls=$(awk -F';' '$3 == "raw_syscalls:sys_enter" { print $1 }' \
                "$tab")
            ;;
        strace)
            strace -c -f -p "$pidlist" -o "$tab" 2>"$tab.log" &
            st_pid=$!
            pids="$pids $st_pid"
            # Attached when it says so for every process (and thread).
            want=$(echo "$pidlist" | tr ',' '\n' | wc -l)
            i=0
            until [ "$(grep -c 'attached' "$tab.log")" -ge "$want" ]; do
                i=$((i + 1))
                [ "$i" -le 100 ] || die "strace does not attach to $t"
                sleep 0.1
            done
            res=$(run_wrk "$w" "$t" "$SYSCALL_DURATION" \
                "$out_dir/wrk-$w-$t-syscalls.txt")
            kill -INT "$st_pid"
            wait "$st_pid" || true
            calls=$(awk '$NF == "total" { print $4 }' "$tab")
            ;;
    esac
    reqs=$(echo "$res" | awk '{ print $8 }')
    # The calls made at least once every 20 requests, per request, most
    # first: "workload target name/per-request ...".
    awk -v w="$w" -v t="$t" -v n="$reqs" '
        /^[0-9]+;/ {                            # perf stat -x ";"
            split($0, f, ";")
            if (f[3] ~ /^syscalls:sys_enter_/) {
                name = substr(f[3], 20); c[name] = f[1]
            }
            next
        }
        $1 ~ /^[0-9.]+$/ && NF >= 5 && $NF != "total" { c[$NF] = $4 }
        END {
            line = w " " t
            while (n > 0) {
                best = ""
                for (k in c) if (best == "" || c[k] + 0 > c[best] + 0) best = k
                if (best == "" || c[best] / n < 0.05) break
                line = line sprintf(" %s/%.2f", best, c[best] / n)
                delete c[best]
            }
            print line
        }' "$tab" >>"$out_dir/syscalls-by-call.txt"
    cpu1=$(cpu_ticks "$pidlist")
    raise1="0 0 0"
    [ "$t" != tidemark ] || raise1=$(raise_stats)
    echo "$cpu0 $cpu1 $raise0 $raise1" | awk -v hz="$(getconf CLK_TCK)" \
        -v head="$w $t ${calls:-0} $reqs" '{
        printf "%s %.0f %.0f %.6f %d %d\n", head, ($3 - $1) * 1e6 / hz,
            ($4 - $2) * 1e6 / hz, $8 - $5, $9 - $6, $10 - $7 }'
}

tm_version="$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?')"
header() {
    echo "tidemark bench, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "machine: $(nproc) cores ($(awk -F': ' '/^model name/ { print $2; exit }' \
        /proc/cpuinfo)), Linux $(uname -r)"
    echo "versions: $(wrk -v 2>&1 | awk 'NR == 1 { print $1, $2 }');" \
        "$(nginx -v 2>&1 | sed 's/^nginx version: //');" \
        "tidemark $tm_version"
    if has_target tidemark; then
        echo "store: $STORE_DESC"
    fi
    if [ "$FLUSH" = off ]; then
        echo "flush: OFF (BENCH_FLUSH=off: fsync and fdatasync are no-ops in" \
            "tidemark, nothing is durable; a measurement, not a result)"
    fi
    echo "load: wrk -t$THREADS -c$CONNS -d$DURATION per run, PUT with a" \
        "Fencing-Token, $RES resources per workload"
    echo "runs: $REPEAT per cell, the targets in turn ($(echo "$TARGETS" |
        sed 's/  */, /g'), then again); medians shown"
    echo "upstream: nginx, 1 worker, return 200; proxy nginx: 1 worker," \
        "keepalive 64, HTTP/1.1; tidemark: 1 network thread"
    echo "logging: nginx access_log off, error_log warn; tidemark" \
        "log_level = warn (no access log)"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
}

out_dir=$RESULTS/$(date -u '+%Y%m%dT%H%M%SZ')-$STORE
mkdir -p "$out_dir"
header | tee "$out_dir/summary.txt"
echo

if [ "$WARMUP" != 0 ] && [ "$WARMUP" != 0s ]; then
    for t in $TARGETS; do
        run_wrk equal "$t" "$WARMUP" "$out_dir/wrk-warmup-$t.txt" >/dev/null
    done
fi

# Each cell REPEAT times, the targets in turn (nginx, tidemark, nginx,
# tidemark, ...), so that a burst of other work on the machine falls on
# both rather than on one cell.
: >"$out_dir/runs.txt"
for w in $WORKLOADS; do
    r=1
    while [ "$r" -le "$REPEAT" ]; do
        for t in $TARGETS; do
            printf 'running %-6s against %-8s (%d of %d) ...\n' \
                "$w" "$t" "$r" "$REPEAT" >&2
            run_wrk "$w" "$t" "$DURATION" "$out_dir/wrk-$w-$t-$r.txt" \
                >"$dir/run"
            awk -v r="$r" '{ print $1, $2, r, $3, $4, $5, $6, $7 }' \
                "$dir/run" >>"$out_dir/runs.txt"
        done
        r=$((r + 1))
    done
done

: >"$out_dir/syscalls.txt"
: >"$out_dir/syscalls-by-call.txt"
if [ "$SYSCALL_TOOL" != none ]; then
    for w in $WORKLOADS; do
        for t in nginx tidemark; do
            has_target "$t" || continue
            printf 'counting system calls: %-6s against %-8s ...\n' \
                "$w" "$t" >&2
            count_syscalls "$w" "$t" >"$dir/run"
            cat "$dir/run" >>"$out_dir/syscalls.txt"
        done
    done
fi
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" |
    tee -a "$out_dir/summary.txt"
echo

# The table; goals are the issue's targets for tidemark against nginx
# (rising: also p99 at most twice nginx's), and for the rising workload on
# a shared store, in fenced writes per second.
case "$STORE" in
    redis) STORE_GOAL=26000 ;;
    postgres) STORE_GOAL=10800 ;;
    *) STORE_GOAL=0 ;;
esac
awk -v store="$STORE" -v store_goal="$STORE_GOAL" -v tool="$SYSCALL_TOOL" \
    -v sdur="$SYSCALL_DURATION" -v targets="$TARGETS" -v rep="$REPEAT" '
    function median(list,    a, n, i, j, x) {
        n = split(list, a, " ")
        for (i = 2; i <= n; i++) {      # insertion sort: n is small
            x = a[i] + 0
            for (j = i - 1; j >= 1 && a[j] + 0 > x; j--) a[j + 1] = a[j]
            a[j + 1] = x
        }
        if (n == 0) return 0
        if (n % 2) return a[(n + 1) / 2] + 0
        return (a[n / 2] + a[n / 2 + 1]) / 2
    }
    BEGIN {
        goal["equal"] = 1.2; goal["rising"] = 0.9; goal["stale"] = 2.0
        p99goal["rising"] = 2.0
    }
    FILENAME ~ /syscalls.txt$/ {
        k = $1 " " $2
        if ($4 > 0) {
            sc[k] = sprintf("%.2f", $3 / $4)
            cpu[k] = sprintf("%.1f", ($5 + $6) / $4)
            cpuorder[++ncpu] = k; cu[k] = $5 / $4; cs[k] = $6 / $4
        }
        if ($8 > 0) {
            rwait[k] = $7 / $8 * 1000; rn[k] = $8
            rsync[k] = $9 > 0 ? sprintf("%.1f", $8 / $9) : "-"
        }
        next
    }
    {
        k = $1 " " $2
        if (!(k in rps)) { order[++ncell] = k; wl[k] = $1; tg[k] = $2 }
        rps[k] = rps[k] " " $4; p99[k] = p99[k] " " $5
        bad[k] += $6; sock[k] += $7; lost[k] += $8
    }
    END {
        for (c = 1; c <= ncell; c++) {
            k = order[c]; mrps[k] = median(rps[k]); mp99[k] = median(p99[k])
        }
        fmt = "%-8s %-9s %11s %10s %9s %9s %14s %9s %8s %8s %8s %6s\n"
        printf fmt, "workload", "target", "requests/s", "p99", "vs nginx",
            "p99 vs", "goal", "syscalls", "CPU us", "non-2xx", "sock err",
            "lost"
        printf fmt, "", "", "(median)", "(median)", "", "nginx", "",
            "/request", "/request", "(sum)", "(sum)", "(sum)"
        for (c = 1; c <= ncell; c++) {
            k = order[c]; n = wl[k] " nginx"
            ratio = "-"; pr = "-"; g = "-"
            if (tg[k] != "nginx" && mrps[n] > 0) {
                r = mrps[k] / mrps[n]
                ratio = sprintf("%.2fx", r)
                if (mp99[n] > 0) { pp = mp99[k] / mp99[n]; pr = sprintf("%.2fx", pp) }
                if (tg[k] == "tidemark") {
                    g = sprintf(">=%.1fx", goal[wl[k]])
                    ok = r >= goal[wl[k]]
                    if (wl[k] in p99goal) {
                        g = g sprintf(",p99<=%.0fx", p99goal[wl[k]])
                        ok = ok && mp99[n] > 0 && pp <= p99goal[wl[k]]
                    }
                    if (!ok) { g = g "!"; miss++ }
                }
            }
            printf fmt, wl[k], tg[k], sprintf("%.0f", mrps[k]),
                sprintf("%.2f ms", mp99[k] / 1000), ratio, pr, g,
                (k in sc) ? sc[k] : "-", (k in cpu) ? cpu[k] : "-", bad[k],
                sock[k], lost[k]
        }
        print ""
        print "requests/s of each run, in the order run:"
        for (c = 1; c <= ncell; c++) {
            k = order[c]
            printf "  %-8s %-9s %s\n", wl[k], tg[k], substr(rps[k], 2)
        }
        print ""
        printf "medians of %d runs; vs nginx: the ratio of the medians.\n", rep
        if (tool == "perf")
            printf "syscalls/request: all system calls of the target'"'"'s" \
                " processes (perf stat -e raw_syscalls:sys_enter -p) over\n" \
                "one more wrk run of %s at the same load, divided by the" \
                " requests wrk had answered.\n", sdur
        else if (tool == "strace")
            printf "syscalls/request: strace -c -f -p over one more wrk" \
                " run of %s, divided by the requests answered\n(strace" \
                " slows the target: fewer calls are batched than at full" \
                " speed).\n", sdur
        if (ncpu) {
            print "CPU us/request: user + system time of the same processes" \
                " over the same run, divided\nthe same way (from /proc/PID/stat):"
            for (c = 1; c <= ncpu; c++) {
                k = cpuorder[c]
                printf "  %-17s user %5.1f  system %5.1f\n", k, cu[k], cs[k]
            }
        }
        for (k in rwait) {
            printf "store wait (%s): a raise waited %.2f ms on average for" \
                " the store to answer, %s\nraises a journal sync, over the" \
                " counted run (tidemark_store_raise_seconds).\n",
                k, rwait[k], rsync[k]
        }
        print "non-2xx: answers >= 400 as wrk counts them; tidemark answers"
        print "every stale request 409 by design (nginx does not fence and"
        print "forwards them). lost: requests whose connection closed"
        print "without an answer. goal: the issue'"'"'s target for tidemark vs"
        print "nginx."
        for (c = 1; c <= ncell; c++) {
            k = order[c]
            if (store_goal > 0 && wl[k] == "rising" && tg[k] == "tidemark") {
                verdict = (mrps[k] >= store_goal) ? "met" : "MISSED"
                printf "store goal: rising through tidemark on %s >= %d/s:" \
                    " %.0f/s, %s\n", store, store_goal, mrps[k], verdict
            }
        }
        if (miss) { print "goals missed (marked !): " miss }
    }' "$out_dir/syscalls.txt" "$out_dir/runs.txt" |
    tee -a "$out_dir/summary.txt"
if [ -s "$out_dir/syscalls-by-call.txt" ]; then
    {
        echo
        echo "system calls per request, by call (those made at least once" \
            "every 20 requests):"
        awk '{ printf "  %-8s %-9s", $1, $2
               for (i = 3; i <= NF; i++) {
                   split($i, kv, "/"); printf " %s %s", kv[1], kv[2]
               }
               print "" }' "$out_dir/syscalls-by-call.txt"
    } | tee -a "$out_dir/summary.txt"
fi
echo
echo "raw output: ${out_dir#"$ROOT"/}/"
