"""--numbers: the seed's lock rates measured on this machine, printed
beside the seed's figures. The measuring is tests/bench/locks_raw.sh
(redis-benchmark and pgbench, 32 clients, on servers it starts), so it
needs the source tree."""

import os
import subprocess

# (label, the seed's figure, locks_raw.sh line, field)
ROWS = [
    ("Redis lock+release pairs/s, no token", 23000, "redis-notoken",
     "pairs_per_s"),
    ("Redis lock+release pairs/s, with a token", 19000, "redis",
     "pairs_per_s"),
    ("hot lock: tries/s on one lock", 54000, "redis-hot", "tries_per_s"),
    ("hot lock: wins/s", 1700, "redis-hot", "wins_per_s"),
    ("Postgres advisory lock pairs/s", 36000, "postgres-advisory",
     "pairs_per_s"),
    ("Postgres lease-row pairs/s", 27000, "postgres", "pairs_per_s"),
]


def measure(entry, seconds=3):
    script = os.path.join(os.path.dirname(entry), "..", "tests", "bench",
                          "locks_raw.sh")
    if not os.path.exists(script):
        return {"error": "--numbers needs the source tree "
                "(tests/bench/locks_raw.sh)"}
    # pgbench runs for the given seconds; redis-benchmark runs a count
    # (60,000 requests: about 3 s at the seed's rates).
    env = dict(os.environ, BENCH_SECONDS=str(seconds),
               BENCH_REQUESTS="60000")
    p = subprocess.run(["sh", script], capture_output=True, env=env,
                       stdin=subprocess.DEVNULL, timeout=1800)
    raw = {}
    for line in p.stdout.decode(errors="replace").splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if "raw" in fields:
            raw[fields.pop("raw")] = fields
    rows = []
    for label, seed, key, field in ROWS:
        v = raw.get(key, {}).get(field)
        try:
            v = round(float(v))
        except (TypeError, ValueError):
            v = None
        rows.append({"what": label, "seed": seed, "here": v})
    out = {"rows": rows, "seconds": seconds, "cpus": os.cpu_count(),
           "load": open("/proc/loadavg").read().split()[:3]}
    if p.returncode != 0:
        out["error"] = p.stderr.decode(errors="replace")[-500:]
    return out


def table(n):
    if "rows" not in n:
        return n.get("error", "")
    lines = ["%-44s %10s %10s" % ("the seed's numbers", "seed", "here")]
    for r in n["rows"]:
        lines.append("%-44s %10s %10s" % (
            r["what"], "{:,}".format(r["seed"]),
            "-" if r["here"] is None else "{:,}".format(r["here"])))
    lines.append("here: %d CPUs, load %s, %d s a pgbench case, 60,000 "
                 "requests a redis-benchmark case, 32 clients; the "
                 "seed: Redis 8 and Postgres 16 on an 8-core laptop"
                 % (n["cpus"], " ".join(n["load"]), n["seconds"]))
    return "\n".join(lines)
