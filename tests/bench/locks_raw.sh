#!/bin/sh
# The seed's lock and release pair without tidemark, the baseline for
# bench-locks: the Redis acquire and release scripts (redis-benchmark,
# EVALSHA), the same without a token (SET NX PX, compare-and-delete), the
# hot lock (tries and wins on one lock), and the Postgres lease-row SQL
# pair and advisory lock (pgbench, custom scripts), 32 clients each, on
# servers started here.
# Env: BENCH_SECONDS (10), BENCH_CONNECTIONS (32), BENCH_REQUESTS (200000,
# redis-benchmark requests per script).
set -eu

cd "$(dirname "$0")/../.."
SECS=${BENCH_SECONDS:-10}
CONNS=${BENCH_CONNECTIONS:-32}
REQS=${BENCH_REQUESTS:-200000}
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)

start() {
    python3 -c 'import sys
sys.path.insert(0, "tests/integration")
import servers
s = servers.KINDS[sys.argv[1]]().start()
print(s.proc.pid)
print(s.port)
print(s.dir)' "$1"
}

stop() {
    kill -INT "$1" 2>/dev/null || true
    while kill -0 "$1" 2>/dev/null; do sleep 0.1; done
    rm -rf "$2"
}

# ---- Redis: the seed's scripts, verbatim.
ACQUIRE="if redis.call('EXISTS', KEYS[1]) == 1 then
  return false
end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], token, 'PX', ARGV[1])
return token"
RELEASE="if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0"

OUT=$(start redis)
RPID=$(echo "$OUT" | sed -n 1p)
RPORT=$(echo "$OUT" | sed -n 2p)
RDIR=$(echo "$OUT" | sed -n 3p)
trap 'stop "$RPID" "$RDIR"' EXIT
A=$(redis-cli -p "$RPORT" SCRIPT LOAD "$ACQUIRE")
R=$(redis-cli -p "$RPORT" SCRIPT LOAD "$RELEASE")
# Each pair is one acquire and one release: time per pair is the sum.
a=$(redis-benchmark -p "$RPORT" -c "$CONNS" -n "$REQS" -r 1000000000 --csv \
    EVALSHA "$A" 2 'lock:{__rand_int__}' 'fence:{__rand_int__}' 10000 |
    tail -n 1 | cut -d, -f2 | tr -d '"')
r=$(redis-benchmark -p "$RPORT" -c "$CONNS" -n "$REQS" -r 1000000000 --csv \
    EVALSHA "$R" 1 'lock:{__rand_int__}' 1 |
    tail -n 1 | cut -d, -f2 | tr -d '"')
echo "raw=redis acquire_per_s=$a release_per_s=$r" \
     "pairs_per_s=$(echo "$a $r" | awk '{printf "%.0f", 1 / (1 / $1 + 1 / $2)}')"
# Without a token: SET NX PX with a value, released by comparing it.
a=$(redis-benchmark -p "$RPORT" -c "$CONNS" -n "$REQS" -r 1000000000 --csv \
    SET 'nt:{__rand_int__}' v NX PX 10000 | tail -n 1 | cut -d, -f2 | tr -d '"')
r=$(redis-benchmark -p "$RPORT" -c "$CONNS" -n "$REQS" -r 1000000000 --csv \
    EVALSHA "$R" 1 'nt:{__rand_int__}' v | tail -n 1 | cut -d, -f2 | tr -d '"')
echo "raw=redis-notoken acquire_per_s=$a release_per_s=$r" \
     "pairs_per_s=$(echo "$a $r" | awk '{printf "%.0f", 1 / (1 / $1 + 1 / $2)}')"
# The hot lock: every client tries one lock. A win's lease is 1 ms, so a
# winner gives it back by expiry; wins are the fence counter's growth.
f0=$(redis-cli -p "$RPORT" GET 'fence:{hot}')
t0=$(date +%s.%N)
h=$(redis-benchmark -p "$RPORT" -c "$CONNS" -n "$REQS" --csv \
    EVALSHA "$A" 2 'lock:{hot}' 'fence:{hot}' 1 | tail -n 1 | cut -d, -f2 |
    tr -d '"')
t1=$(date +%s.%N)
f1=$(redis-cli -p "$RPORT" GET 'fence:{hot}')
echo "raw=redis-hot tries_per_s=$h wins_per_s=$(echo "${f0:-0} $f1 $t0 $t1" |
    awk '{printf "%.0f", ($2 - $1) / ($4 - $3)}')"
stop "$RPID" "$RDIR"

# ---- Postgres: the seed's lease-row SQL, acquire then release.
OUT=$(start postgres)
PPID_=$(echo "$OUT" | sed -n 1p)
PPORT=$(echo "$OUT" | sed -n 2p)
PDIR=$(echo "$OUT" | sed -n 3p)
trap 'stop "$PPID_" "$PDIR"' EXIT
"$PGBIN/psql" -q -h 127.0.0.1 -p "$PPORT" -U postgres -d postgres -c "
CREATE TABLE leases (
  name       text        PRIMARY KEY,
  owner      text        NOT NULL,
  fence      bigint      NOT NULL,
  expires_at timestamptz NOT NULL
)"
SCRIPT=$(mktemp)
# A client's names are its own, so an acquire never meets a live lease
# (\gset needs its row).
cat > "$SCRIPT" <<'SQL'
\set n random(1, 1000000)
INSERT INTO leases (name, owner, fence, expires_at)
VALUES (:client_id || '/' || :n, 'bench', 1, now() + make_interval(secs => 10))
ON CONFLICT (name) DO UPDATE
SET owner = EXCLUDED.owner,
    fence = leases.fence + 1,
    expires_at = EXCLUDED.expires_at
WHERE leases.expires_at < now()
RETURNING fence \gset
UPDATE leases SET expires_at = '-infinity'
WHERE name = :client_id || '/' || :n AND fence = :fence;
SQL
tps=$("$PGBIN/pgbench" -n -M prepared -h 127.0.0.1 -p "$PPORT" -U postgres \
      -c "$CONNS" -j 2 -T "$SECS" -f "$SCRIPT" postgres 2>/dev/null |
      sed -n 's/^tps = \([0-9.]*\).*/\1/p')
rm -f "$SCRIPT"
echo "raw=postgres pairs_per_s=$tps"

# The advisory lock in its own transaction: lock, commit (which releases).
cat > "$SCRIPT" <<'SQL'
\set k :client_id * 1000000 + random(1, 1000000)
BEGIN;
SELECT pg_try_advisory_xact_lock(:k);
COMMIT;
SQL
tps=$("$PGBIN/pgbench" -n -M prepared -h 127.0.0.1 -p "$PPORT" -U postgres \
      -c "$CONNS" -j 2 -T "$SECS" -f "$SCRIPT" postgres 2>/dev/null |
      sed -n 's/^tps = \([0-9.]*\).*/\1/p')
rm -f "$SCRIPT"
echo "raw=postgres-advisory pairs_per_s=$tps"
