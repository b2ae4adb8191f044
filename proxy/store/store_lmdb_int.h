/* store_lmdb_int.h: what the two halves of the LMDB store share: the
 * loop side (store_lmdb.c: open, reads, the ops table) and the writer
 * thread (store_lmdb_writer.c: batches, the journal, checkpoints). */
#ifndef TM_STORE_LMDB_INT_H
#define TM_STORE_LMDB_INT_H

#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../clients/lmdb_worker.h"
#include "../log.h"
#include "journal.h"
#include "store_lmdb.h"

/* The journal epoch: the records LMDB does not hold yet carry it. */
#define EPOCH_KEY "\0journal-epoch"
#define EPOCH_KEY_LEN (sizeof(EPOCH_KEY) - 1)

struct lmdb_req {
    struct lmdb_worker_job job; /* first: the worker's queue link */
    store_cb cb;
    void *arg;
    int64_t token;         /* raise: the token; get: unused */
    enum store_result res; /* the answer, set before the callback runs */
    int64_t mark;
    size_t len;
    char name[]; /* len bytes, not NUL-terminated */
};

/* A mark accepted since the last checkpoint, under its LMDB key. */
struct lmdb_jmark {
    struct lmdb_jmark *next;
    int64_t mark;
    size_t len;
    unsigned char key[];
};

/* Chains of the journaled table. It holds at most the distinct marks of one
 * checkpoint (CHECKPOINT_PUTS and the batch that passes it). */
#define JMARKS_BUCKETS 4096

/* A line the writer thread wants logged: the embedding program's sink
 * is only ever called on the loop thread. */
struct lmdb_log {
    struct lmdb_log *next;
    enum tm_log_level level;
    char text[];
};

struct lmdb_store {
    MDB_env *env;
    MDB_dbi dbi;
    size_t maxkey;
    size_t map_size; /* the limit: [store] map_size */
    size_t env_size; /* LMDB's map: the limit and a headroom */
    size_t psize;    /* LMDB's page size */
    char *path;
    struct lmdb_worker *w;

    /* Loop thread only. */
    bool full_logged;
    MDB_txn *rtxn; /* the reads' transaction, reset between reads */
    bool fresh;    /* no mark at open */

    /* The writer thread's (open's, before it starts). */
    struct journal *journal;
    MDB_txn *txn; /* marks written since the last checkpoint */
    uint64_t epoch;
    size_t puts;      /* marks written since the last checkpoint */
    size_t committed; /* bytes of the file the last commit uses */
    size_t depth;     /* of the B-tree at the last commit */
    size_t added;     /* at most what txn adds to committed */
    bool full;        /* no room for a mark: raises that write refused */
    bool refusing;    /* the last batch refused a raise: full is logged */
    size_t refused;   /* raises this batch refused for a full map */
    struct lmdb_jmark *staged; /* this batch's new marks, not synced */

    /* Shared: under the worker's lock. */
    struct lmdb_log *logs;
    struct lmdb_log **logs_tail;
    struct store_lmdb_stats stats;
    struct lmdb_jmark *ftab[JMARKS_BUCKETS]; /* the journaled table */
    uint64_t jseed;                          /* its hash's seed, set at open */
    size_t jcount; /* marks in it: 0 spares a read the key's hash */
};

static inline struct lmdb_req *
lmdb_to_req(struct lmdb_worker_job *j)
{
    return (struct lmdb_req *)j;
}

/* The mark stored under key in txn: 0 with *mark set (0 when absent),
 * EINVAL for a value that is not 8 bytes, or an LMDB error. */
int store_lmdb_read_mark(MDB_txn *txn, MDB_dbi dbi, MDB_val *key,
                         int64_t *mark);

/* Any thread, the worker's lock held: the journaled mark of key, 0 when
 * it has none. */
int64_t store_lmdb_jmarks_find(struct lmdb_store *s, const MDB_val *key);

/* The writer stopped: free the journaled table and the staged marks. */
void store_lmdb_jmarks_free(struct lmdb_store *s);

/* Open, before the writer starts: what the last commit left (the store
 * is full when a fresh transaction has no room for the longest key). */
void store_lmdb_note_commit(struct lmdb_store *s);

/* The env's size: the limit or the file if larger, plus room for the
 * replay of a full journal and its commit. */
size_t store_lmdb_env_map_size(const struct lmdb_store *s);

/* Bring LMDB up to the journal: in a new transaction, read the epoch,
 * replay that epoch's records and checkpoint. 0 with *n raises replayed,
 * or an LMDB error or errno with what failed in err. */
int store_lmdb_recover(struct lmdb_store *s, size_t *n, char *err,
                       size_t errlen);

/* The writer thread's side of the worker's ops (lmdb_worker.h). */
int store_lmdb_writer_run(void *arg, struct lmdb_worker_list *batch);
int store_lmdb_writer_idle(void *arg);
void store_lmdb_writer_stop(void *arg);

#endif
