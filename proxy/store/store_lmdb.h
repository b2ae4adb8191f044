/* store_lmdb.h: the embedded LMDB store: its ops table and counters that
 * tests and the control port may read. */
#ifndef TM_STORE_LMDB_H
#define TM_STORE_LMDB_H

#include <stdbool.h>
#include <stdint.h>

#include "store.h"

/* Registered as "lmdb". One file at [store] path (not a directory; the
 * lock file is PATH-lock, the journal PATH-journal), values are 8-byte
 * big-endian int64 marks. */
extern const struct store_ops store_lmdb_ops;

/* Raises queued beyond this many are answered STORE_ERROR at once. */
#define STORE_LMDB_QUEUE_MAX 65536

struct store_lmdb_stats {
    uint64_t raises;        /* raises answered by the writer thread */
    uint64_t batches;       /* groups of requests the writer took */
    uint64_t commits;       /* ... that wrote marks to the journal and
                             * synced it */
    uint64_t checkpoints;   /* LMDB commits that retired the journal */
    uint64_t largest_batch; /* most raises answered by one transaction */
};

/* Copy the counters of s, which must have been opened by
 * store_lmdb_ops. Loop thread. */
void store_lmdb_stats(struct store *s, struct store_lmdb_stats *out);

/* Whether s, opened by store_lmdb_ops, held no mark when it was opened:
 * then no fenced write can have been forwarded through it before. */
bool store_lmdb_fresh(struct store *s);

#endif
