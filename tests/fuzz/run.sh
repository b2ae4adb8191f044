#!/bin/sh
# run.sh: build the libFuzzer targets with clang (ASan + UBSan) and run
# each for FUZZ_SECONDS (default 60) on a copy of its seed corpus. Fails
# if any target crashes, leaks, times out or breaks an invariant.
#
#   sh tests/fuzz/run.sh                 every target
#   sh tests/fuzz/run.sh token route     only these
#   FUZZ_SECONDS=0 sh tests/fuzz/run.sh  replay the seed corpora only
#
# A target is tests/fuzz/fuzz_<name>.c, listed in ALL with the sources it
# needs (below); it checks its invariants with fuzz.h's check and fail.
#
# Output goes under build-fuzz/: binaries, fuzz logs (<target>.log), the
# working corpora (corpus/<target>, grown there, never in the tree) and
# crashing inputs (artifacts/<target>/).
set -eu

cd "$(dirname "$0")/../.."

CLANG=${FUZZ_CC:-clang}
SECONDS_EACH=${FUZZ_SECONDS:-60}
OUT=build-fuzz
CFLAGS="-std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined
-fno-sanitize-recover=undefined -fno-omit-frame-pointer
-Wall -Wextra -Wno-unused-parameter
$(pkg-config --cflags libpq)"
ALL="http_request http_response token route config origin canon destination
procstat json redis_slot sigv4 zkname etcd_keys
redis_reply pg_reply s3name s3delete logesc logline logbuffer awscreds
journal pg_marks etcd_marks lenframe"

# The project sources and libraries each target needs.
sources() {
    case $1 in
    http_request | http_response) echo policies/http_parse.c \
        policies/http_fields.c policies/http_chunked.c policies/hname.c ;;
    token) echo policies/token.c ;;
    route) echo policies/route.c policies/canon.c policies/utf8.c ;;
    origin) echo policies/origin.c ;;
    config) echo conf/cfg.c conf/cfg_read.c conf/cfg_env.c conf/cfg_build.c conf/cfg_probe.c conf/cfg_tls.c \
        conf/cfg_opts.c conf/cfg_value.c conf/cfg_custom.c conf/cfg_check.c \
        conf/cfg_sect.c policies/route.c policies/origin.c policies/canon.c policies/utf8.c policies/sigv4.c policies/s3name.c policies/awscreds.c ;;
    sigv4) echo policies/sigv4.c ;;
    canon) echo policies/canon.c policies/utf8.c ;;
    destination) echo policies/profile.c policies/canon.c policies/utf8.c ;;
    procstat) echo policies/procstat.c ;;
    json) echo policies/json.c policies/utf8.c ;;
    redis_slot) echo policies/redis_slot.c ;;
    zkname) echo policies/zkname.c ;;
    lenframe) echo policies/lenframe.c ;;
    etcd_keys) echo proxy/locks/etcd_keys.c proxy/clients/etcd_json.c ;;
    redis_reply) echo proxy/locks/lock_redis_reply.c proxy/clients/redis_reply.c \
        policies/redis_slot.c ;;
    pg_reply) echo proxy/locks/lock_postgres_reply.c ;;
    s3name) echo policies/s3name.c policies/canon.c policies/utf8.c \
        policies/http_parse.c policies/http_fields.c policies/http_chunked.c \
        policies/hname.c ;;
    s3delete) echo policies/s3delete.c policies/s3name.c policies/canon.c \
        policies/utf8.c ;;
    logesc) echo policies/logesc.c policies/utf8.c ;;
    logline | logbuffer) echo proxy/log.c policies/json.c policies/logesc.c \
        policies/utf8.c ;;
    awscreds) echo policies/awscreds.c policies/sigv4.c ;;
    journal) echo proxy/store/journal.c proxy/clients/lmdb_util.c ;;
    pg_marks) echo proxy/store/store_postgres_reply.c proxy/store/batch.c \
        proxy/log.c policies/json.c policies/logesc.c policies/utf8.c ;;
    etcd_marks) echo proxy/store/store_etcd_reply.c proxy/store/batch.c \
        proxy/clients/etcd_json.c proxy/log.c policies/json.c \
        policies/logesc.c policies/utf8.c ;;
    *) echo "run.sh: unknown target $1" >&2; return 1 ;;
    esac
}

libs() {
    case $1 in
    config) echo -linih -lpq -lcrypto -ljansson ;;
    token | sigv4) echo -lcrypto ;;
    etcd_keys | awscreds) echo -ljansson -lcrypto ;;
    logline | logbuffer) echo -ljansson ;;
    redis_reply) echo -lhiredis ;;
    pg_reply) echo -lpq ;;
    journal) echo -llmdb -lcrypto ;;
    pg_marks) echo -lpq -ljansson ;;
    etcd_marks) echo -ljansson -lcrypto ;;
    esac
}

# Inputs up to this size; the HTTP limits are 16 KiB, so go past them.
max_len() {
    case $1 in
    http_request | http_response | s3name) echo 20000 ;;
    s3delete) echo 65536 ;;
    etcd_keys | etcd_marks) echo 16384 ;;
    sigv4) echo 32768 ;;
    awscreds) echo 20000 ;;
    logline) echo 8192 ;;
    logbuffer) echo 65536 ;;
    journal) echo 140000 ;;
    *) echo 4096 ;;
    esac
}

# A dictionary of the format's words, where there is one.
dict() {
    case $1 in
    http_request | http_response) echo tests/fuzz/http.dict ;;
    config) echo tests/fuzz/config.dict ;;
    etcd_keys | etcd_marks) echo tests/fuzz/etcd.dict ;;
    redis_reply) echo tests/fuzz/resp.dict ;;
    s3delete) echo tests/fuzz/s3delete.dict ;;
    esac
}

targets=${*:-$ALL}
mkdir -p "$OUT"

for t in $targets; do
    src=$(sources "$t")
    echo "== build fuzz_$t"
    # shellcheck disable=SC2086,SC2046 # the flag lists are split on purpose
    "$CLANG" $CFLAGS -o "$OUT/fuzz_$t" "tests/fuzz/fuzz_$t.c" $src $(libs "$t")
done

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

failed=""
for t in $targets; do
    work="$OUT/corpus/$t"
    arts="$OUT/artifacts/$t"
    log="$OUT/$t.log"
    rm -rf "$work" "$arts"
    mkdir -p "$work" "$arts"
    cp tests/fuzz/corpus/"$t"/* "$work"/
    if [ "$SECONDS_EACH" -gt 0 ]; then
        echo "== fuzz_$t for ${SECONDS_EACH}s (log: $log)"
        set -- "-max_total_time=$SECONDS_EACH" "-max_len=$(max_len "$t")" \
            -timeout=25 -print_final_stats=1 "$work"
        d=$(dict "$t")
        if [ -n "$d" ]; then
            set -- "-dict=$d" "$@"
        fi
    else
        echo "== fuzz_$t: replay the seed corpus (log: $log)"
        set -- -runs=0 "$work"
    fi
    if "$OUT/fuzz_$t" -artifact_prefix="$arts/" "$@" >"$log" 2>&1; then
        grep -E '^#[0-9]+[[:space:]]+DONE|^Done|executed_units' "$log" || true
    else
        echo "!! fuzz_$t failed; the end of $log:"
        tail -n 40 "$log"
        ls "$arts"
        failed="$failed $t"
    fi
done

if [ -n "$failed" ]; then
    echo "fuzz: FAILED:$failed"
    exit 1
fi
echo "fuzz: all passed"
