#!/usr/bin/env python3
"""aimed.py: resource names a client can aim at one chain of a hash table
with no seed, for BENCH_NAMES.

    aimed.py COUNT [BUCKETS]

Prints COUNT names eq-aimed-K whose resources (documents/eq-aimed-K, as
the bench's route names them) have a 64-bit FNV-1a hash of 0 modulo
BUCKETS (1024): the chain the order gates' table (1,024 chains, FNV-1a,
no seed) put them all in before it was seeded. About one name in BUCKETS
qualifies, so this tries BUCKETS x COUNT names."""
import sys


def fnv1a64(data):
    h = 1469598103934665603
    for b in data:
        h ^= b
        h = (h * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def main():
    count = int(sys.argv[1])
    buckets = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
    k = found = 0
    while found < count:
        name = f"eq-aimed-{k}"
        k += 1
        if fnv1a64(b"documents/" + name.encode()) % buckets == 0:
            print(name)
            found += 1


if __name__ == "__main__":
    main()
