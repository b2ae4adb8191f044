#!/bin/sh
# The seed's lock and release pair without tidemark, the baseline for
# bench-locks: the Redis acquire and release scripts (redis-benchmark,
# EVALSHA), the same without a token (SET NX PX, compare-and-delete), the
# hot lock (tries and wins on one lock), and the Postgres lease-row SQL
# pair and advisory lock (pgbench, custom scripts), 32 clients each, on
# servers started here; and etcd's own lock
# (etcdctl lock NAME true: a session lease, the recipe's txn, release),
# BENCH_CONNECTIONS loops of etcdctl, since Debian packages no etcd
# benchmark tool (each pair also pays an etcdctl process start); and
# ZooKeeper's lock recipe (kazoo's Lock, locks_raw_zk.py).
# Env: BENCH_SECONDS (10), BENCH_CONNECTIONS (32), BENCH_REQUESTS (200000,
# redis-benchmark requests per script), RAW (redis postgres etcd
# redis-cluster zookeeper: which). The Redis scripts also run on a Redis
# Cluster of 3 masters and 3 replicas (redis-benchmark --cluster, each
# client's keys tagged to one master).
set -eu

cd "$(dirname "$0")/../.."
SECS=${BENCH_SECONDS:-10}
CONNS=${BENCH_CONNECTIONS:-32}
REQS=${BENCH_REQUESTS:-200000}
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
RAW=${RAW:-redis postgres etcd redis-cluster zookeeper}

want() {
    case " $RAW " in *" $1 "*) return 0 ;; esac
    return 1
}

start() {
    /usr/bin/python3 -c 'import sys
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

if want redis; then
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
fi

# ---- Postgres: the seed's lease-row SQL, acquire then release.
if want postgres; then
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
stop "$PPID_" "$PDIR"
fi

# ---- etcd: etcdctl lock, the recipe etcd ships, in CONNS loops.
if want etcd; then
OUT=$(start etcd)
EPID=$(echo "$OUT" | sed -n 1p)
EPORT=$(echo "$OUT" | sed -n 2p)
EDIR=$(echo "$OUT" | sed -n 3p)
trap 'stop "$EPID" "$EDIR"' EXIT
COUNT=$(mktemp -d)
end=$(( $(date +%s) + SECS ))
for c in $(seq "$CONNS"); do
    (
        n=0
        while [ "$(date +%s)" -lt "$end" ]; do
            ETCDCTL_API=3 etcdctl --endpoints "http://127.0.0.1:$EPORT" \
                lock "bench/$c" true >/dev/null 2>&1 && n=$((n + 1))
        done
        echo "$n" > "$COUNT/$c"
    ) &
done
wait
pairs=$(cat "$COUNT"/* | awk '{s += $1} END {print s}')
rm -rf "$COUNT"
echo "raw=etcd tool=etcdctl-lock pairs=$pairs" \
     "pairs_per_s=$(echo "$pairs $SECS" | awk '{printf "%.0f", $1 / $2}')"
stop "$EPID" "$EDIR"
fi

# ---- Redis Cluster: the same scripts, loaded on every master; the
# {tag} of each key is replaced by redis-benchmark with a tag of the
# master its client talks to, so the load spreads over the three.
if want redis-cluster; then
    OUT=$(/usr/bin/python3 -c 'import sys
sys.path.insert(0, "tests/integration")
import servers
c = servers.RedisCluster().start()
print(" ".join(str(n.proc.pid) for n in c.nodes))
print(" ".join(str(m.port) for m in c.masters()))
print(" ".join(n.dir for n in c.nodes))')
    CPIDS=$(echo "$OUT" | sed -n 1p)
    CPORTS=$(echo "$OUT" | sed -n 2p)
    CDIRS=$(echo "$OUT" | sed -n 3p)
    stop_cluster() {
        for pid in $CPIDS; do
            kill -INT "$pid" 2>/dev/null || true
            while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
        done
        # shellcheck disable=SC2086 # one folder per node
        rm -rf $CDIRS
    }
    trap stop_cluster EXIT
    for p in $CPORTS; do
        A=$(redis-cli -p "$p" SCRIPT LOAD "$ACQUIRE")
        R=$(redis-cli -p "$p" SCRIPT LOAD "$RELEASE")
    done
    P=${CPORTS%% *}
    a=$(redis-benchmark --cluster -p "$P" -c "$CONNS" -n "$REQS" \
        -r 1000000000 --csv EVALSHA "$A" 2 'lock:{tag}:__rand_int__' \
        'fence:{tag}:__rand_int__' 10000 |
        tail -n 1 | cut -d, -f2 | tr -d '"')
    r=$(redis-benchmark --cluster -p "$P" -c "$CONNS" -n "$REQS" \
        -r 1000000000 --csv EVALSHA "$R" 1 'lock:{tag}:__rand_int__' 1 |
        tail -n 1 | cut -d, -f2 | tr -d '"')
    echo "raw=redis-cluster masters=3 acquire_per_s=$a release_per_s=$r" \
         "pairs_per_s=$(echo "$a $r" | awk '{printf "%.0f", 1 / (1 / $1 + 1 / $2)}')"
    stop_cluster
    trap - EXIT
fi

# ---- ZooKeeper: the lock recipe through kazoo (its own server).
if want zookeeper; then
    BENCH_SECONDS=$SECS BENCH_CONNECTIONS=$CONNS /usr/bin/python3 \
        tests/bench/locks_raw_zk.py
fi
