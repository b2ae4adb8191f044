#!/bin/sh
# make bench: wrk against the bare upstream, nginx proxy_pass in front of
# it, and tidemark in front of it, for the cases of the chosen sets; each
# cell (case x target) runs BENCH_REPEAT times with the targets in turn;
# then a table of the medians of requests/s, p99, CPU us per request,
# upstream accepts per request and RSS per connection, the ratio of the
# medians to nginx's, and the system calls per request of nginx and
# tidemark, counted over one more run of each cell.
#
# A case is a workload (equal, rising, stale; carried, named in
# BENCH_WORKLOADS: equal writes with no token on a route bound to a
# [lease] that tidemark holds on lmdb, so each carries its fence and is
# checked against the scope mark too), a number of clients (wrk
# connections), of resources, and a body size. BENCH_SET picks the cases:
#   quick (default): equal, rising and stale, 32 clients, 1000 resources;
#   clients: equal tokens at BENCH_CLIENTS clients ("1 32 1000 4000
#     10000"; a count over half the open files limit, raised to its hard
#     limit first, is skipped), over 1000 resources and all on one
#     resource; and the hot lock handed on at every write (handover: all
#     on one resource, each request with the next token, one wrk thread),
#     where every client's write waits in tidemark's order gate;
#   bodies: equal tokens, bodies of BENCH_BODIES bytes ("1024 65536
#     1048576"), 32 clients or as many as hold 1 GiB of bodies between
#     them (wrk keeps each connection's request whole in memory); wrk
#     waits 60 s for an answer instead of 2 s;
#   marks: stale tokens over 1000 and then 100000 marks (BENCH_MARKS),
#     each case primed through tidemark before it runs;
#   raises: rising tokens (every request a durable raise) at 1, 8, 32,
#     128, 512 clients.
# Several sets may be named ("clients bodies"); "all" is every set.
#
# Pinning (BENCH_PIN, on where there are 2 or more cores): the proxy
# under test (nginx's proxy and tidemark) runs on core 1, wrk, the upstream
# and a store server on core 0 (taskset), so that the proxies do not
# compete with the load for a core and runs are steadier.
#
# Env: BENCH_DURATION (10s per run), BENCH_REPEAT (3 runs per cell),
# BENCH_FLUSH (on; off: tidemark runs with fsync and fdatasync made
# no-ops by tests/preload/nosync.so, so nothing it writes is durable: a
# measurement of what the flush costs the rising path, never a result),
# BENCH_SYSCALL_DURATION (5s: the run whose system calls are counted; 0
# for none), BENCH_SYSCALL_TOOL (perf, or strace: slower, see below),
# BENCH_THREADS (2; 1 for one client), BENCH_CONNECTIONS (32) and
# BENCH_RESOURCES (1000) for the quick set, BENCH_WARMUP (2s a target
# before each case, 0 for none), BENCH_WORKLOADS ("equal rising stale":
# the quick set's),
# BENCH_MAP_SIZE (lmdb: the map_size, in bytes, for premark and
# tidemark; unset: premark's 1 GiB and tidemark's default, the same),
# BENCH_KEEPALIVE (64: idle upstream connections each proxy keeps, nginx's
# keepalive and tidemark's [upstream] max_idle; below the clients, a
# burst of answers, such as a batch of durable raises, closes the
# surplus and the next burst dials it again),
# BENCH_REFS (the raises set's references, "raw postgres redis etcd" or
# none: see refs_start), FSYNCLOOP (tests/bench/fsyncloop.c, built),
# BENCH_TARGETS ("bare nginx tidemark"; drop one only to debug),
# BENCH_CASES (shell patterns: only the sets' cases whose name matches
# one, as "handover-*"),
# BENCH_NAMES (a file of resource names, one a line: the equal workload
# writes those instead of eq-0, eq-1, ...; tests/bench/aimed.py writes
# names aimed at one chain of an unseeded table),
# BENCH_UPSTREAM (nginx, or sink: tests/bench/sink.py, which reads every
# body whole before it answers; the default is sink when BENCH_SET is
# bodies alone, else nginx, whose "return 200" answers before the body
# and drops it: a proxy that sees the answer stops sending, and a body
# bench in front of it measures no body), BENCH_UPSTREAM_DELAY_MS (sink
# only: each answer leaves that many ms after its request, a slow
# backend, so that a proxy holds that many more requests at once), STORE
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
# line per request), unless BENCH_LOG is text or json: then each proxy
# writes a line per request to a file, nginx its access_log ("combined"
# in $dir/ngx/access.log) and tidemark its access lines (log_level = info,
# log_format = BENCH_LOG, stderr to $dir/tidemark.log; tidemark's lines
# go through its log_buffer, written by a thread of their own). With
# BENCH_NGINX_LOG_BUFFER (a size: 64k), nginx buffers its lines too
# (access_log ... buffer=SIZE flush=10ms), as tidemark does.
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
LOG=${BENCH_LOG:-off}
case "$LOG" in
    off) TM_LOG_INI="log_level = warn" ;;
    text | json) TM_LOG_INI="log_level = info
log_format = $LOG" ;;
    *) echo "bench: BENCH_LOG is off, text or json, not $LOG" >&2; exit 2 ;;
esac
WARMUP=${BENCH_WARMUP:-2s}
WORKLOADS=${BENCH_WORKLOADS:-equal rising stale}
SETS=${BENCH_SET:-quick}
NAMES=${BENCH_NAMES:-}
if [ -n "$NAMES" ]; then
    [ -s "$NAMES" ] || { echo "bench: BENCH_NAMES=$NAMES: no such file, or empty" >&2; exit 2; }
    NAMES=$(realpath "$NAMES")
fi
BODIES=${BENCH_BODIES:-1024 65536 1048576}
MARKS=${BENCH_MARKS:-1000 100000}
CLIENTS=${BENCH_CLIENTS:-1 32 1000 4000 10000}
# shellcheck disable=SC3045 # dash, bash and busybox have ulimit -n, -Hn
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
# shellcheck disable=SC3045
NOFILE=$(ulimit -n)
[ "$NOFILE" != unlimited ] || NOFILE=1048576
# Every listener asks for a backlog of 65535; the kernel gives each
# net.core.somaxconn at most. Fewer than the clients dialing at once and
# the first burst's SYNs are dropped (retried a second later).
SOMAXCONN=$(cat /proc/sys/net/core/somaxconn 2>/dev/null || echo '?')
TARGETS=${BENCH_TARGETS:-bare nginx tidemark}
UPSTREAM=nginx
[ "${BENCH_SET:-quick}" != bodies ] || UPSTREAM=sink
UPSTREAM=${BENCH_UPSTREAM:-$UPSTREAM}
UPSTREAM_DELAY_MS=${BENCH_UPSTREAM_DELAY_MS:-0}
STORE=${STORE:-lmdb}
FLUSH=${BENCH_FLUSH:-on}
KEEPALIVE=${BENCH_KEEPALIVE:-64}
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

has_workload() {
    case " $WORKLOADS " in *" $1 "*) return 0 ;; *) return 1 ;; esac
}

case "$UPSTREAM" in
    nginx | sink) ;;
    *) die "BENCH_UPSTREAM=$UPSTREAM: nginx or sink" ;;
esac
case "$UPSTREAM_DELAY_MS" in
    '' | *[!0-9]*) die "BENCH_UPSTREAM_DELAY_MS=$UPSTREAM_DELAY_MS: milliseconds, 0 or more" ;;
esac
[ "$UPSTREAM_DELAY_MS" = 0 ] || [ "$UPSTREAM" = sink ] ||
    die "BENCH_UPSTREAM_DELAY_MS needs BENCH_UPSTREAM=sink"
for t in $TARGETS; do
    case "$t" in
        bare | nginx | tidemark) ;;
        *) die "unknown target '$t' in BENCH_TARGETS (bare nginx tidemark)" ;;
    esac
done
for w in $WORKLOADS; do
    case "$w" in
        equal | rising | stale | carried | handover) ;;
        *) die "unknown workload '$w' in BENCH_WORKLOADS (equal rising stale carried handover)" ;;
    esac
done
[ "$SETS" != all ] || SETS="quick clients bodies marks raises"
for set in $SETS; do
    case "$set" in
        quick | clients | bodies | marks | raises) ;;
        *) die "unknown BENCH_SET '$set' (quick clients bodies marks raises all)" ;;
    esac
done

# cases: one line a case, "name workload clients resources body" (body 0:
# fence.lua's 18-byte JSON body).
cases() {
    for set in $SETS; do
        case "$set" in
            quick)
                for w in $WORKLOADS; do
                    echo "$w-c$CONNS-r$RES $w $CONNS $RES 0"
                done
                ;;
            clients)
                # Each client costs tidemark and nginx a descriptor, and
                # one more while its request holds an upstream connection.
                for c in $CLIENTS; do
                    if [ "$c" -gt $((NOFILE / 2)) ]; then
                        echo "bench: $c clients skipped: open files limit $NOFILE" >&2
                        continue
                    fi
                    echo "equal-c$c-r1000 equal $c 1000 0"
                    echo "equal-c$c-r1 equal $c 1 0"
                    echo "handover-c$c-r1 handover $c 1 0"
                done
                ;;
            bodies)
                for b in $BODIES; do
                    c=$((1073741824 / b))
                    [ "$c" -le 32 ] || c=32
                    [ "$c" -ge 1 ] || c=1
                    echo "equal-c$c-b$b equal $c 1000 $b"
                done
                ;;
            marks)
                for m in $MARKS; do
                    echo "stale-c32-m$m stale 32 $m 0"
                done
                ;;
            raises)
                for c in 1 8 32 128 512; do
                    echo "rising-c$c rising $c 1000 0"
                done
                ;;
        esac
    done
}

PIN=${BENCH_PIN:-on}
PIN_PROXY="" PIN_LOAD="" PROXY_CORE=""
if [ "$PIN" = on ] && [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
    PIN_PROXY="taskset -c 1" PIN_LOAD="taskset -c 0" PROXY_CORE=1
elif [ "$PIN" = on ]; then
    echo "bench: fewer than 2 cores or no taskset: not pinned" >&2
    PIN=off
fi

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
REFS=${BENCH_REFS:-raw postgres redis etcd}
case " $SETS $REFS " in
    *" raises "*" raw "*)
        [ -x "${FSYNCLOOP:-}" ] ||
            die "FSYNCLOOP (tests/bench/fsyncloop.c, built) is not set: make bench builds it"
        ;;
esac
case "$KEEPALIVE" in
    '' | *[!0-9]* | 0) die "BENCH_KEEPALIVE=$KEEPALIVE: a count of connections, 1 or more" ;;
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
NGX_ACCESS_LOG=off # nginx access_log: a file when BENCH_LOG is on
[ "$LOG" = off ] || NGX_ACCESS_LOG=$dir/ngx/access.log
NGX_LOG_BUFFER=${BENCH_NGINX_LOG_BUFFER:-}
[ "$LOG" = off ] || [ -z "$NGX_LOG_BUFFER" ] ||
    NGX_ACCESS_LOG="$NGX_ACCESS_LOG combined buffer=$NGX_LOG_BUFFER flush=10ms"
# nginx workers may run as nobody when started by root: let them in.
chmod 0755 "$dir"
pids=""
wrk_pid=""
rss_pid=""
cleanup() {
    for p in $rss_pid $wrk_pid $pids; do
        kill "$p" 2>/dev/null || true
    done
    for p in $rss_pid $wrk_pid $pids; do
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

# The cases to run, before any server starts or a results folder is
# made. only_cases: the lines of cases whose name matches a pattern of
# BENCH_CASES (every line when it is unset).
only_cases() {
    while read -r name rest; do
        [ -n "${BENCH_CASES:-}" ] || { echo "$name $rest"; continue; }
        for pat in $BENCH_CASES; do
            # shellcheck disable=SC2254 # a pattern, on purpose
            case "$name" in $pat) echo "$name $rest"; break ;; esac
        done
    done
}

set -f # BENCH_CASES' patterns are matched against names, not files
cases | only_cases >"$dir/cases"
set +f
[ -s "$dir/cases" ] || die "no case of BENCH_SET=$SETS matches BENCH_CASES=$BENCH_CASES"

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

# nginx_conf PREFIX PORT BODY [ACCESS_LOG]: a one-worker, foreground nginx whose every
# path stays inside PREFIX (no /run, /var/lib/nginx or /var/log).
nginx_conf() {
    mkdir -p "$1"
    cat > "$1/nginx.conf" <<NGX
worker_processes 1;
daemon off;
pid $1/nginx.pid;
error_log $1/error.log warn;
worker_rlimit_nofile $NOFILE;
events { worker_connections $NOFILE; }
http {
    access_log ${4:-off};
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

start_nginx() { # NAME PREFIX PORT PIN
    $4 nginx -p "$2/" -c "$2/nginx.conf" -e "$2/error.log" \
        >"$2/stdout.log" 2>&1 &
    pids="$pids $!"
    wait_http "$1" "$!" "http://127.0.0.1:$3/" "$2/error.log"
}

# The upstream: as fast as a keep-alive HTTP server gets, so the
# comparison measures the proxies. Its stub_status counts the connections
# it accepted: the proxies' new upstream connections.
nginx_conf "$dir/up" "$UP_PORT" "    server {
        listen 127.0.0.1:$UP_PORT backlog=65535;
        client_max_body_size 0;
        location / { return 200 \"ok\\n\"; }
        location = /_accepts { stub_status; }
    }"
if [ "$UPSTREAM" = sink ]; then
    mkdir -p "$dir/up"
    # shellcheck disable=SC2086
    $PIN_LOAD python3 "$BENCH/sink.py" "$UP_PORT" "$UPSTREAM_DELAY_MS" >"$dir/up/error.log" 2>&1 &
    pids="$pids $!"
    echo "$!" >"$dir/up/sink.pid"
    wait_http sink "$!" "http://127.0.0.1:$UP_PORT/_accepts" "$dir/up/error.log"
else
    start_nginx upstream "$dir/up" "$UP_PORT" "$PIN_LOAD"
fi

if has_target nginx; then
    nginx_conf "$dir/ngx" "$NGX_PORT" "    upstream backend {
        server 127.0.0.1:$UP_PORT;
        keepalive $KEEPALIVE;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:$NGX_PORT backlog=65535;
        client_max_body_size 0;
        location / {
            proxy_request_buffering off;
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
        }
    }" "$NGX_ACCESS_LOG"
    start_nginx nginx "$dir/ngx" "$NGX_PORT" "$PIN_PROXY"
fi

# Servers on the disk of $dir, for the store under test and the raises
# set's references: start_X PIN PORT [PEER_PORT] DIR [ARGS...] starts one
# (pinned by PIN, a taskset prefix or empty), adds its pid to $pids and
# waits until it answers.
start_redis() {
    mkdir -p "$3"
    $1 redis-server --port "$2" --bind 127.0.0.1 --save '' \
        --appendonly yes --appendfsync always --dir "$3" >"$3/log" 2>&1 &
    pids="$pids $!"
    wait_cmd redis "$!" "$3/log" redis-cli -p "$2" ping
}

pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
start_postgres() {
    _pin=$1 _port=$2 _dir=$3
    shift 3
    mkdir -p "$_dir"
    as_pg=""
    if [ "$(id -u)" -eq 0 ]; then
        chown postgres "$_dir"
        as_pg="runuser -u postgres --"
    fi
    $as_pg "$pgbin/initdb" -D "$_dir/data" -A trust -U postgres \
        -E UTF8 >"$_dir/initdb.log" 2>&1 ||
        die "initdb failed: $(tail -n 5 "$_dir/initdb.log")"
    $_pin $as_pg "$pgbin/postgres" -D "$_dir/data" -k "$_dir" \
        -p "$_port" -c listen_addresses=127.0.0.1 "$@" >"$_dir/log" 2>&1 &
    pids="$pids $!"
    wait_cmd postgres "$!" "$_dir/log" "$pgbin/pg_isready" \
        -h 127.0.0.1 -p "$_port" -U postgres -d postgres
}

start_etcd() {
    mkdir -p "$4"
    $1 etcd --name default --data-dir "$4/data" \
        --listen-client-urls "http://127.0.0.1:$2" \
        --advertise-client-urls "http://127.0.0.1:$2" \
        --listen-peer-urls "http://127.0.0.1:$3" \
        --initial-advertise-peer-urls "http://127.0.0.1:$3" \
        --initial-cluster "default=http://127.0.0.1:$3" \
        --log-level warn >"$4/log" 2>&1 &
    pids="$pids $!"
    wait_cmd etcd "$!" "$4/log" curl -sf "http://127.0.0.1:$2/health"
}

# Store sections: each sets STORE_INI (the [store] keys) and STORE_DESC,
# and starts its server (adding the pid to $pids) if it needs one.
store_start() {
    case "$STORE" in
        lmdb)
            mkdir -p "$dir/store"
            STORE_INI="type = lmdb
path = $dir/store/marks.lmdb"
            [ -z "${BENCH_MAP_SIZE:-}" ] ||
                STORE_INI="$STORE_INI
map_size = $BENCH_MAP_SIZE"
            fs=$(df -T "$dir/store" | awk 'NR == 2 { print $2 }')
            STORE_DESC="lmdb $(dpkg-query -W -f='${Version}' liblmdb0 \
                2>/dev/null || echo '?'), on $fs"
            ;;
        redis)
            start_redis "$PIN_LOAD" "$STORE_PORT" "$dir/redis"
            STORE_INI="type = redis
url = redis://127.0.0.1:$STORE_PORT"
            STORE_DESC="$(redis-server --version | awk '{ print $1, $3 }'),"
            STORE_DESC="$STORE_DESC appendfsync always"
            ;;
        postgres)
            start_postgres "$PIN_LOAD" "$STORE_PORT" "$dir/pg"
            STORE_INI="type = postgres
dsn = host=127.0.0.1 port=$STORE_PORT user=postgres dbname=postgres
pool_size = ${BENCH_POOL:-2}"
            STORE_DESC="postgres $("$pgbin/postgres" --version |
                awk '{ print $3 }'), synchronous_commit on, fsync on"
            ;;
        etcd)
            start_etcd "$PIN_LOAD" "$STORE_PORT" "$PEER_PORT" "$dir/etcd"
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

# The marks set on the lmdb store: the stale marks are written into the
# file before tidemark opens it, by PREMARK (tests/bench/premark.c, the
# store's own code; make bench builds it), as many as the largest case
# needs; each case then cycles over its first m of them. Elsewhere they
# are set through tidemark, case by case.
ST_PRIMED=0
premark() {
    case " $SETS " in *" marks "*) ;; *) return 0 ;; esac
    [ "$STORE" = lmdb ] && [ -x "${PREMARK:-}" ] || return 0
    most=0
    for m in $MARKS; do
        [ "$m" -le "$most" ] || most=$m
    done
    echo "bench: writing $most marks into the store ..." >&2
    "$PREMARK" "$dir/store/marks.lmdb" documents/st- "$most" "$STALE_MARK" \
        ${BENCH_MAP_SIZE:-} || die "premark failed"
    ST_PRIMED=$most
}

if has_target tidemark; then
    store_start
    premark
    cat > "$dir/tidemark.ini" <<INI
[proxy]
listen = 127.0.0.1:$TM_PORT
$TM_LOG_INI
max_connections = $((NOFILE / 2 + 100))

[upstream default]
url = http://127.0.0.1:$UP_PORT
max_idle = $KEEPALIVE                 ; as nginx's keepalive

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
    if has_workload carried; then
        cat >> "$dir/tidemark.ini" <<INI

[locks]
backend = lmdb
path = $dir/locks.lmdb

[lease bench]
name = bench/leader

[route carried]
methods = PUT
path = /v1/carried/{doc}
resource = carried/{doc}
mode = correctness
upstream = default
lease = bench
INI
    fi
    if [ -n "$TM_PRELOAD" ]; then
        LD_PRELOAD=$TM_PRELOAD $PIN_PROXY "$TIDEMARK_BIN" \
            -c "$dir/tidemark.ini" >"$dir/tidemark.log" 2>&1 &
    else
        $PIN_PROXY "$TIDEMARK_BIN" -c "$dir/tidemark.ini" \
            >"$dir/tidemark.log" 2>&1 &
    fi
    TM_PID=$!
    pids="$pids $TM_PID"
    wait_http tidemark "$TM_PID" "http://127.0.0.1:$TM_PORT/" \
        "$dir/tidemark.log"
    # A network store connects after start: wait until it is usable.
    wait_cmd "tidemark's store" "$TM_PID" "$dir/tidemark.log" \
        curl -sf "http://127.0.0.1:$ADM_PORT/readyz"
    if has_workload carried; then
        wait_cmd "tidemark's lease" "$TM_PID" "$dir/tidemark.log" \
            sh -c "curl -sf http://127.0.0.1:$ADM_PORT/v1/leases/bench |
                grep -q '\"state\":\"holding\"'"
    fi
fi

target_port() {
    case "$1" in
        bare) echo "$UP_PORT" ;;
        nginx) echo "$NGX_PORT" ;;
        tidemark) echo "$TM_PORT" ;;
    esac
}

# put_code PATH [CURL_ARG...]: tidemark's status for one PUT on PATH.
put_code() {
    path=$1
    shift
    curl -s -o /dev/null -w '%{http_code}' -X PUT "$@" \
        -d '{"state":"check"}' "http://127.0.0.1:$TM_PORT$path"
}

# put_status PREFIX_AND_INDEX TOKEN: the same for a document, with TOKEN.
put_status() {
    put_code "/v1/documents/$1" -H "Fencing-Token: $2"
}

# prime CASE_WORKLOAD RESOURCES: the marks a case starts from, set through
# tidemark (only those an earlier case has not set); then one request
# checks that tidemark answers as the workload expects.
EQ_PRIMED=0
prime() {
    case "$1" in
        equal)
            [ "$2" -gt "$EQ_PRIMED" ] || return 0
            python3 "$BENCH/prime.py" 127.0.0.1 "$TM_PORT" eq- "$2" \
                "$EQUAL_TOKEN" 32 "$EQ_PRIMED" || die "priming equal marks failed"
            EQ_PRIMED=$2
            s=$(put_status eq-0 "$EQUAL_TOKEN")
            [ "$s" = 200 ] || die "equal token answered $s, not 200"
            ;;
        stale)
            if [ "$2" -gt "$ST_PRIMED" ]; then
                python3 "$BENCH/prime.py" 127.0.0.1 "$TM_PORT" st- "$2" \
                    "$STALE_MARK" 32 "$ST_PRIMED" ||
                    die "priming stale marks failed"
                ST_PRIMED=$2
            fi
            # The last of them: a key the store must have under
            # tidemark's own name for it.
            s=$(put_status "st-$(($2 - 1))" 1)
            [ "$s" = 409 ] || die "stale token answered $s, not 409"
            ;;
        carried)
            # Each resource's first write raises its mark to the fence
            # (the warmup's), every later one is an equal write.
            s=$(put_code /v1/carried/ca-0)
            [ "$s" = 200 ] || die "a carried write answered $s, not 200"
            ;;
    esac
}

# The case being run: set_case NAME WORKLOAD CLIENTS RESOURCES BODY.
set_case() {
    C_W=$2 C_CONNS=$3 C_RES=$4 C_BODY=$5
    C_THREADS=$THREADS
    [ "$C_CONNS" -ge "$C_THREADS" ] || C_THREADS=$C_CONNS
    [ "$C_W" != handover ] || C_THREADS=1
    C_BODYARG="" C_TIMEOUT=2s
    [ "$C_BODY" = 0 ] || C_BODYARG=$C_BODY C_TIMEOUT=60s
}

# wrk_args: fence.lua's arguments for one run of the current case.
wrk_args() {
    case "$C_W" in
        equal) echo "equal ${NAMES:+@}${NAMES:-eq-} $C_RES $C_THREADS $EQUAL_TOKEN $C_CONNS $C_BODYARG" ;;
        stale) echo "stale st- $C_RES $C_THREADS 1 $C_CONNS $C_BODYARG" ;;
        carried) echo "carried ca- $C_RES $C_THREADS 0 $C_CONNS $C_BODYARG" ;;
        # A base above every earlier token on these resources: the clock
        # in microseconds' worth of seconds, far below 2^53. A run sends
        # far fewer than 10^6 requests a second, so the next run's base is
        # above every token of this one.
        rising) echo "rising up- $C_RES $C_THREADS $(date +%s)000000 $C_CONNS $C_BODYARG" ;;
        handover) echo "handover hot- 1 1 $(date +%s)000000 $C_CONNS $C_BODYARG" ;;
    esac
}

# target_pids TARGET: the processes that serve TARGET, comma-separated
# (nginx and the bare upstream: the master and its worker; tidemark: the
# one process, with all its threads).
target_pids() {
    case "$1" in
        bare | nginx)
            pf=$dir/up
            [ "$1" = bare ] || pf=$dir/ngx
            if [ "$1" = bare ] && [ -f "$pf/sink.pid" ]; then
                cat "$pf/sink.pid"
                return
            fi
            m=$(cat "$pf/nginx.pid")
            echo "$m$(ps -o pid= --ppid "$m" | awk '{ printf ",%s", $1 }')"
            ;;
        tidemark) echo "$TM_PID" ;;
    esac
}

# cpu_ticks PIDLIST: "user system", the CPU time the processes of
# PIDLIST (comma-separated; each with all its threads) have used, in
# clock ticks.
cpu_ticks() {
    for p in $(echo "$1" | tr ',' ' '); do
        cat "/proc/$p/stat"
    done | awk '{ sub(/^.*\) /, ""); u += $12; s += $13 }
                END { print u + 0, s + 0 }'
}

# thread_ticks PIDLIST: "name=ticks ...", the CPU time (user + system)
# the threads of PIDLIST have used, summed by thread name.
thread_ticks() {
    for p in $(echo "$1" | tr ',' ' '); do
        cat "/proc/$p"/task/*/stat 2>/dev/null
    done | awk '{ name = $0; sub(/^[^(]*\(/, "", name); sub(/\) .*$/, "", name)
                 gsub(/[ =]/, "_", name); sub(/^.*\) /, "")
                 t[name] += $12 + $13 }
                END { for (k in t) printf "%s=%d\n", k, t[k] }' |
        sort | paste -sd ' ' -
}

# rss_kb PIDLIST: the resident memory of the processes, summed, in KiB.
rss_kb() {
    for p in $(echo "$1" | tr ',' ' '); do
        cat "/proc/$p/status"
    done | awk '/^VmRSS:/ { k += $2 } END { print k + 0 }'
}

# rss_peak PIDLIST FILE: until killed, the highest rss_kb seen (every
# 0.2 s) written to FILE.
rss_peak() {
    peak=0
    while :; do
        v=$(rss_kb "$1")
        if [ "$v" -gt "$peak" ]; then
            peak=$v
            echo "$peak" >"$2"
        fi
        sleep 0.2
    done
}

# steal_ticks: "steal total", the machine's CPU time so far that the
# hypervisor gave to other guests, and all of its CPU time (/proc/stat,
# in clock ticks; guest time is already inside user).
steal_ticks() {
    awk '/^cpu / { for (i = 2; i <= 9; i++) t += $i; print $9, t; exit }' \
        /proc/stat
}

# core_ticks: "busy ran", the proxy's core's CPU time so far (/proc/stat,
# in clock ticks): busy, spent on anything but idle (user, system and
# interrupts: the disk's completions land on a core too), and ran, busy
# plus idle, the time the hypervisor let the core run (steal left out).
# "0 0" when not pinned: the proxy has no core of its own.
core_ticks() {
    [ -n "$PROXY_CORE" ] || { echo 0 0; return; }
    awk -v c="cpu$PROXY_CORE" '$1 == c {
        b = $2 + $3 + $4 + $7 + $8; print b, b + $5 + $6; exit }' /proc/stat
}

# core_busy BEFORE AFTER: the share of the time the proxy's core ran that
# it was busy between two core_ticks, in percent; - when not pinned.
core_busy() {
    echo "$1 $2" | awk '{ r = $4 - $2
        if (r > 0) printf "%.1f\n", ($3 - $1) * 100 / r; else print "-" }'
}

# up_accepts: the connections the upstream has accepted so far, less the
# one that asks.
up_accepts() {
    curl -sf "http://127.0.0.1:$UP_PORT/_accepts" |
        awk 'NR == 3 { print $1 - 1 }'
}

# run_wrk CASE TARGET DURATION OUT [CMD...]: one wrk run of the current
# case, its output in OUT; prints "case target rps p99_us non2xx
# socket_errors lost requests cpu_us_per_request accepts_per_request
# rss_kib_per_client mean_us steal_pct core_busy_pct": the target's CPU
# time (/proc/PID/stat), the upstream's new connections, the rise of the
# target's RSS from before the run to its peak during it, the share of
# the machine's CPU time stolen by the hypervisor over the run, and how
# busy the proxy's core was (core_busy). CMD, if given, runs wrk (perf
# stat -p ... --).
run_wrk() {
    w=$1 t=$2 d=$3 out=$4
    shift 4
    args=$(wrk_args "$w")
    port=$(target_port "$t")
    if [ "$t" = tidemark ] && ! kill -0 "$TM_PID" 2>/dev/null; then
        tail -n 20 "$dir/tidemark.log" >&2 || true
        die "tidemark is not running any more"
    fi
    tpids=$(target_pids "$t")
    cpu0=$(cpu_ticks "$tpids")
    acc0=$(up_accepts)
    rss0=$(rss_kb "$tpids")
    steal0=$(steal_ticks)
    core0=$(core_ticks)
    echo "$rss0" >"$dir/rss"
    rss_peak "$tpids" "$dir/rss" &
    rss_pid=$!
    # In the background and waited for, so that a signal to this script
    # stops the bench at once (the shell runs traps only between commands).
    # shellcheck disable=SC2086
    "$@" $PIN_LOAD wrk -t"$C_THREADS" -c"$C_CONNS" -d"$d" --timeout "$C_TIMEOUT" --latency \
        -s "$BENCH/fence.lua" "http://127.0.0.1:$port/" -- $args \
        >"$out" 2>&1 &
    wrk_pid=$!
    rc=0
    wait "$wrk_pid" || rc=$?
    wrk_pid=""
    kill "$rss_pid" 2>/dev/null || true
    wait "$rss_pid" 2>/dev/null || true
    rss_pid=""
    extra="$(cpu_ticks "$tpids") $cpu0 $(up_accepts) $acc0 $(cat "$dir/rss") $rss0"
    extra="$extra $(steal_ticks) $steal0 $(core_busy "$core0" "$(core_ticks)")"
    if [ "$rc" -ne 0 ]; then
        cat "$out" >&2
        die "wrk failed against $t ($w)"
    fi
    line=$(grep '^WRK_RESULT' "$out") || {
        cat "$out" >&2
        die "no WRK_RESULT line from wrk against $t ($w)"
    }
    echo "$line" | awk -v w="$w" -v t="$t" -v x="$extra" -v c="$C_CONNS" \
        -v hz="$(getconf CLK_TCK)" '{
        for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        rps = v["duration_us"] > 0 ? v["requests"] / (v["duration_us"] / 1e6) : 0
        split(x, e, " "); n = v["requests"] > 0 ? v["requests"] : 1
        st = e[10] > e[12] ? (e[9] - e[11]) * 100 / (e[10] - e[12]) : 0
        printf "%s %s %.2f %d %d %d %d %d %.1f %.4f %.1f %d %.1f %s\n", w, t,
            rps, v["p99_us"], v["status_errors"], v["socket_errors"],
            v["lost"], v["requests"],
            (e[1] + e[2] - e[3] - e[4]) * 1e6 / hz / n, (e[5] - e[6]) / n,
            (e[7] - e[8]) / c, v["mean_us"], st, e[13]
    }'
}

# How system calls are counted: perf records the raw_syscalls tracepoint
# (the process runs a few percent slower) where it works, else
# strace -c (which stops the process at every call, so the load it sees
# is lighter and batches less: the count per request comes out higher).
# BENCH_SYSCALL_TOOL=strace picks strace even where perf works.
SYSCALL_TOOL=none
if [ "$SYSCALL_DURATION" = 0 ] || [ "$SYSCALL_DURATION" = 0s ]; then
    :
elif [ "${BENCH_SYSCALL_TOOL:-perf}" = perf ] &&
    perf record -q -c 1 -e raw_syscalls:sys_enter -o "$dir/syscalls.data" \
        true >/dev/null 2>&1; then
    SYSCALL_TOOL=perf
    rm -f "$dir/syscalls.data"
    # The calls' names, by number (linux-libc-dev); a number without one
    # is listed as nrN.
    SYSCALL_NAMES=/dev/null
    for f in /usr/include/*/asm/unistd_64.h /usr/include/asm/unistd_64.h; do
        [ ! -r "$f" ] || { SYSCALL_NAMES=$f; break; }
    done
elif command -v strace >/dev/null 2>&1; then
    SYSCALL_TOOL=strace
else
    echo "bench: neither perf nor strace works: no syscall column" >&2
fi

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
    threads0=$(thread_ticks "$pidlist")
    raise0="0 0 0"
    [ "$t" != tidemark ] || raise0=$(raise_stats)
    tab="$out_dir/syscalls-$w-$t.txt"
    case "$SYSCALL_TOOL" in
        perf)
            # perf records the entry of every system call of the target's
            # processes (one tracepoint event a thread), from before it
            # starts wrk until wrk exits: the window is the run. Counting
            # each call by name instead (perf stat -e 'syscalls:sys_enter_*',
            # some 350 counters a thread, switched in and out with every
            # thread) slowed the run it counted: tidemark's durable raises
            # at 8 clients to 0.36x their rate, one client through either
            # proxy to 0.3x; recording costs a few percent.
            res=$(run_wrk "$w" "$t" "$SYSCALL_DURATION" \
                "$out_dir/wrk-$w-$t-syscalls.txt" \
                perf record -q -c 1 -e raw_syscalls:sys_enter \
                -o "$dir/syscalls.data" -p "$pidlist" --)
            # The calls by number, as "count;;syscalls:sys_enter_NAME"
            # lines, with their total, as perf stat -x ';' writes them.
            perf script -i "$dir/syscalls.data" -F trace 2>/dev/null |
                awk -v names="$SYSCALL_NAMES" '
                    BEGIN {
                        while ((getline l < names) > 0)
                            if (split(l, f, " ") == 3 && f[1] == "#define" &&
                                f[2] ~ /^__NR_/)
                                name[f[3]] = substr(f[2], 6)
                    }
                    $1 == "NR" { n[$2]++; total++ }
                    END {
                        printf "%d;;raw_syscalls:sys_enter\n", total
                        for (k in n)
                            printf "%d;;syscalls:sys_enter_%s\n", n[k],
                                (k in name) ? name[k] : "nr" k
                    }' >"$tab"
            rm -f "$dir/syscalls.data"
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
    # The CPU time by thread name, per request: "workload target
    # name=us ...".
    printf '%s\n%s\n' "$threads0" "$(thread_ticks "$pidlist")" |
        awk -v head="$w $t" -v n="$reqs" -v hz="$(getconf CLK_TCK)" '
            NR == 1 { for (i = 1; i <= NF; i++) { split($i, kv, "=")
                                                  t0[kv[1]] = kv[2] } }
            NR == 2 { line = head
                      for (i = 1; i <= NF; i++) {
                          split($i, kv, "=")
                          line = line sprintf(" %s=%.1f", kv[1],
                              (kv[2] - t0[kv[1]]) * 1e6 / hz / (n > 0 ? n : 1))
                      }
                      print line }' >>"$out_dir/threads.txt"
    raise1="0 0 0"
    [ "$t" != tidemark ] || raise1=$(raise_stats)
    echo "$cpu0 $cpu1 $raise0 $raise1" | awk -v hz="$(getconf CLK_TCK)" \
        -v head="$w $t ${calls:-0} $reqs" '{
        printf "%s %.0f %.0f %.6f %d %d\n", head, ($3 - $1) * 1e6 / hz,
            ($4 - $2) * 1e6 / hz, $8 - $5, $9 - $6, $10 - $7 }'
}

tm_version="$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?')"
# A TIDEMARK_BIN of another build: the tree's commit does not name it.
[ "$TIDEMARK_BIN" = "$ROOT/tidemark" ] ||
    tm_version="TIDEMARK_BIN (not the build of $tm_version)"
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
    echo "sets: $SETS; load: wrk -t$THREADS (-t1 for one client) -d$DURATION" \
        "per run, PUT with a Fencing-Token; each case names its workload," \
        "clients (c), resources (r), marks (m) or body bytes (b)"
    if [ -n "$NAMES" ]; then
        echo "names: the equal workload writes the $(wc -l <"$NAMES") names of" \
            "BENCH_NAMES ($(basename "$NAMES"): $(head -n 1 "$NAMES"), ...)"
    fi
    if [ "$PIN" = on ]; then
        echo "pinned: the proxy under test on core 1; wrk, the upstream" \
            "and the store server on core 0 (taskset)"
    else
        echo "pinned: no (BENCH_PIN=off or fewer than 2 cores)"
    fi
    echo "runs: $REPEAT per cell, the targets in turn ($(echo "$TARGETS" |
        sed 's/  */, /g'), then again); medians shown"
    up="nginx, 1 worker, return 200"
    [ "$UPSTREAM" != sink ] || up="sink.py (reads every body whole, then 200)"
    [ "$UPSTREAM_DELAY_MS" = 0 ] || up="$up, each answer held $UPSTREAM_DELAY_MS ms"
    echo "upstream: $up; proxy nginx: 1 worker," \
        "keepalive $KEEPALIVE, HTTP/1.1, proxy_request_buffering off;" \
        "tidemark: 1 network thread, max_idle $KEEPALIVE"
    if [ "$LOG" = off ]; then
        echo "logging: nginx access_log off, error_log warn; tidemark" \
            "log_level = warn (no access log)"
    else
        echo "logging: a line per request to a file: nginx access_log" \
            "(combined${NGX_LOG_BUFFER:+, buffer=$NGX_LOG_BUFFER flush=10ms});" \
            "tidemark log_level = info, log_format = $LOG (log_buffer 1M)"
    fi
    echo "listen backlogs: 65535 asked, net.core.somaxconn $SOMAXCONN;" \
        "open files: $NOFILE a process"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
}

out_dir=$RESULTS/$(date -u '+%Y%m%dT%H%M%SZ')-$STORE
mkdir -p "$out_dir"
header | tee "$out_dir/summary.txt"
echo

# The raises set's references, on the disk of $dir: the same durable
# single writes at the same clients, run in turn with the proxies (after
# each round of a rising-cN case's targets, every reference once at c=N),
# each server on the proxy's core and its client on the load's. raw:
# fsyncloop (one append and fdatasync at a time: the disk's pace, c=1
# only); postgres: pgbench, a single-row UPSERT raising a mark in its own
# transaction (synchronous_commit on); redis: redis-benchmark INCR,
# appendfsync always, no pipelining; etcd: wrk posting one put a request
# to etcd's JSON gateway (etcdput.lua; Debian ships no etcd benchmark
# tool). Each run adds "ref clients run rate core_busy_pct" to refs.txt
# (core_busy: how busy the proxy's core, where the server runs, was over
# the reference's run).
ref_secs=${DURATION%s}
case "$ref_secs" in
    '' | *[!0-9]*) ref_secs=10 ;; # BENCH_DURATION not in seconds
esac

ref_raw() { # C: the loop is one writer, so c=1 only
    [ "$1" = 1 ] || return 0
    $PIN_PROXY "$FSYNCLOOP" "$dir/ref/raw.dat" "$ref_secs" 64 |
        awk '{ print $2 }'
}

ref_postgres() { # C: pgbench's rate leaves out its connecting (10 ms a
    # client on a loaded machine), which its -T includes
    "$pgbin/pgbench" -n -M prepared -h 127.0.0.1 -p "$REF_PG" \
        -U postgres -c "$1" -j "$(($1 < 2 ? 1 : 2))" \
        -T "$((ref_secs + $1 / 40))" -f "$dir/ref/upsert.sql" postgres \
        2>>"$out_dir/pgbench.err" |
        sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}

ref_redis() { # C: about ref_secs at 400 writes/s a client
    n=$((2000 * $1))
    [ "$n" -le 100000 ] || n=100000
    $PIN_LOAD redis-benchmark -p "$REF_REDIS" -c "$1" -n "$n" -r 1000 \
        --csv INCR 'mark:__rand_int__' | tail -n 1 | cut -d, -f2 | tr -d '"'
}

ref_etcd() { # C
    t=2
    [ "$1" -ge 2 ] || t=1
    $PIN_LOAD wrk -t"$t" -c"$1" -d"$ref_secs" -s "$BENCH/etcdput.lua" \
        "http://127.0.0.1:$REF_ETCD" | awk '/^Requests\/sec:/ { print $2 }'
}

# Start the references' servers, once for the whole run.
refs_start() {
    mkdir -p "$dir/ref"
    cat >"$dir/ref/upsert.sql" <<'SQL'
\set r random(1, 1000)
INSERT INTO marks (name, mark) VALUES ('r' || :r, 1)
ON CONFLICT (name) DO UPDATE SET mark = marks.mark + 1;
SQL
    # shellcheck disable=SC2046
    set -- $(free_ports 4)
    REF_PG=$1 REF_REDIS=$2 REF_ETCD=$3 REF_PEER=$4
    for ref in $REFS; do
        case "$ref" in
            raw) ;;
            postgres)
                start_postgres "$PIN_PROXY" "$REF_PG" "$dir/ref/pg" \
                    -c max_connections=600 -c synchronous_commit=on
                "$pgbin/psql" -q -h 127.0.0.1 -p "$REF_PG" -U postgres \
                    -d postgres -c "CREATE TABLE marks (name text PRIMARY KEY,
                    mark bigint NOT NULL)" ;;
            redis) start_redis "$PIN_PROXY" "$REF_REDIS" "$dir/ref/redis" ;;
            etcd)
                start_etcd "$PIN_PROXY" "$REF_ETCD" "$REF_PEER" \
                    "$dir/ref/etcd" ;;
            *) die "unknown reference '$ref' in BENCH_REFS" ;;
        esac
    done
}

# refs_run NAME C R: after round R of case NAME, each reference once at
# C clients, if NAME is one of the raises set's.
refs_run() {
    case "$1" in
        rising-c | rising-c*[!0-9]*) return 0 ;; # not the raises set's
        rising-c*) ;;
        *) return 0 ;;
    esac
    [ "$REFS" != none ] || return 0
    for ref in $REFS; do
        [ "$ref" != raw ] || [ "$2" = 1 ] || continue
        printf 'running reference %-8s at c=%-4s (%d of %d) ...\n' \
            "$ref" "$2" "$3" "$REPEAT" >&2
        core0=$(core_ticks)
        rate=$("ref_$ref" "$2")
        busy=$(core_busy "$core0" "$(core_ticks)")
        [ -z "$rate" ] || echo "$ref $2 $3 $rate $busy" >>"$out_dir/refs.txt"
    done
}

case " $SETS " in
    *" raises "*) [ "$REFS" = none ] || refs_start ;;
esac

# Each case: its marks primed, a warm-up run per target, then each cell
# REPEAT times with the targets in turn (nginx, tidemark, nginx, ...), so
# that a burst of other work on the machine falls on all rather than on
# one cell; then the counted run of each proxy.
: >"$out_dir/runs.txt"
: >"$out_dir/syscalls.txt"
: >"$out_dir/syscalls-by-call.txt"
: >"$out_dir/threads.txt"
while read -r name w c nres body <&3; do
    set_case "$name" "$w" "$c" "$nres" "$body"
    ! has_target tidemark || prime "$w" "$nres"
    if [ "$WARMUP" != 0 ] && [ "$WARMUP" != 0s ]; then
        for t in $TARGETS; do
            run_wrk "$name" "$t" "$WARMUP" \
                "$out_dir/wrk-$name-$t-warmup.txt" >/dev/null
        done
    fi
    r=1
    while [ "$r" -le "$REPEAT" ]; do
        for t in $TARGETS; do
            printf 'running %-18s against %-8s (%d of %d) ...\n' \
                "$name" "$t" "$r" "$REPEAT" >&2
            run_wrk "$name" "$t" "$DURATION" "$out_dir/wrk-$name-$t-$r.txt" \
                >"$dir/run"
            awk -v r="$r" -v c="$c" '{ print $1, $2, r, $3, $4, $5, $6, $7,
                $9, $10, $11, c, $12, $13, $14 }' "$dir/run" >>"$out_dir/runs.txt"
        done
        refs_run "$name" "$c" "$r"
        r=$((r + 1))
    done
    if [ "$SYSCALL_TOOL" != none ]; then
        for t in nginx tidemark; do
            has_target "$t" || continue
            printf 'counting system calls: %-18s against %-8s ...\n' \
                "$name" "$t" >&2
            count_syscalls "$name" "$t" >"$dir/run"
            cat "$dir/run" >>"$out_dir/syscalls.txt"
        done
    fi
done 3<"$dir/cases"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" |
    tee -a "$out_dir/summary.txt"
echo
echo "$REPEAT $SYSCALL_TOOL $SYSCALL_DURATION" >"$out_dir/meta.txt"
sh "$BENCH/summary.sh" "$out_dir" | tee -a "$out_dir/summary.txt"
echo
echo "raw output: ${out_dir#"$ROOT"/}/"
