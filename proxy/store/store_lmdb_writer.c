/* store_lmdb_writer.c: the LMDB store's writer thread: applies a batch
 * of raises to the open write transaction, makes the new marks durable
 * with one journal write and sync, and checkpoints them into LMDB. */
#include <errno.h>
#include <inttypes.h>
#include <lmdb.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../policies/htab.h"
#include "../clients/lmdb_util.h"
#include "../clients/lmdb_worker.h"
#include "../log.h"
#include "journal.h"
#include "store_lmdb_int.h"

/*
 * Durability. A batch of raises is applied to a write transaction that
 * stays open across batches, and its new marks are written to the
 * journal (PATH-journal) and fdatasync()ed: one flush, where committing
 * LMDB takes two ordered ones (data pages, then the meta page through an
 * O_DSYNC descriptor). Only then are the raises answered accepted. Every
 * CHECKPOINT_PUTS marks, when the journal is full, and when the writer has
 * been idle for CHECKPOINT_IDLE_MS, the transaction is committed (synced:
 * the env is opened without MDB_NOSYNC) together with EPOCH_KEY moved one
 * on; that retires every journal record, which carries the epoch it was
 * written under. Opening the store replays the records of the stored
 * epoch into LMDB (a raise only moves a mark up, so replaying is
 * idempotent) and checkpoints, so kill -9 at any moment loses no
 * accepted raise.
 *
 * A failed journal write or sync, or a failed checkpoint, leaves what is
 * on disk unknown (a failed fsync may have dropped dirty pages, and
 * retrying it can report success for data that was lost): the store then
 * refuses everything until the process restarts and replays. A batch that
 * fails inside LMDB aborts the transaction; the raises accepted before it
 * are in the journal, and are replayed into a new one.
 *
 * A full map. [store] map_size is a limit the store enforces itself, so
 * that LMDB never fails a put: a put that fails dooms the whole open
 * transaction, and replaying the journal into a new one needs room too.
 * The writer keeps a conservative estimate of the bytes the open
 * transaction adds to the file (put_cost, commit_cost) on top of the
 * committed high-water mark, and checkpoints before the two could pass
 * map_size. When even a fresh transaction would not leave room for one
 * more put, the store is full: raises that would write a mark are
 * refused without touching LMDB, while reads and raises that write
 * nothing (equal or stale) are answered as before. Nothing ever frees
 * space (a mark only grows), so full lasts until a restart with a larger
 * map_size; a file already past the limit at open is full from the start.
 * The env is opened larger than the limit (env_map_size), so that a
 * misestimate, or a journal replayed into a file that a smaller map_size
 * finds full, still fits; LMDB's own MDB_MAP_FULL stays handled (abort,
 * replay, full) as a last resort.
 */

/* Checkpoint after this many marks written since the last one: bounds
 * the transaction's dirty pages (a few MiB at worst) and the replay. */
#define CHECKPOINT_PUTS 4096
/* ... and once the writer has had nothing to do for this long. */
#define CHECKPOINT_IDLE_MS 100
/* Bytes of a leaf or branch node besides its key and value (LMDB's node
 * header and the page's index slot, rounded up). */
#define NODE_OVERHEAD 16
/* The headroom is rounded up to a multiple of this. */
#define HEADROOM_ROUND ((size_t)1 << 20)

static void
list_answer_all(struct lmdb_worker_list *l, enum store_result res)
{
    for (struct lmdb_worker_job *j = l->head; j != NULL; j = j->next) {
        struct lmdb_req *r = lmdb_to_req(j);

        r->res = res;
        r->mark = 0;
    }
}

/* Writer thread: queue a log line for the loop thread. Formats even when
 * the level is off; it only happens on errors. */
static void wlog(struct lmdb_store *s, enum tm_log_level level, const char *fmt,
                 ...) __attribute__((format(printf, 3, 4)));

static void
wlog(struct lmdb_store *s, enum tm_log_level level, const char *fmt, ...)
{
    char buf[512];
    struct lmdb_log *l;
    size_t n;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    n = strlen(buf) + 1;
    l = malloc(sizeof(*l) + n);
    if (l == NULL) {
        return;
    }
    l->next = NULL;
    l->level = level;
    memcpy(l->text, buf, n);
    lmdb_worker_lock(s->w);
    *s->logs_tail = l;
    s->logs_tail = &l->next;
    lmdb_worker_unlock(s->w);
}

int
store_lmdb_read_mark(MDB_txn *txn, MDB_dbi dbi, MDB_val *key, int64_t *mark)
{
    MDB_val val;
    int rc = mdb_get(txn, dbi, key, &val);

    if (rc == MDB_NOTFOUND) {
        *mark = 0;
        return 0;
    }
    if (rc != 0) {
        return rc;
    }
    if (val.mv_size != 8) {
        return EINVAL;
    }
    *mark = lmdb_get_be64(val.mv_data);
    return 0;
}

static int
write_mark(struct lmdb_store *s, MDB_val *key, int64_t mark)
{
    unsigned char vbuf[8];
    MDB_val val = {.mv_size = sizeof(vbuf), .mv_data = vbuf};

    lmdb_put_be64(vbuf, mark);
    return mdb_put(s->txn, s->dbi, key, &val, 0);
}

/* The chain of an LMDB key in the journaled table; seeded, so that no
 * client aims its names at one chain. */
static size_t
jmarks_bucket(const struct lmdb_store *s, const void *key, size_t len)
{
    return (size_t)(htab_hash(s->jseed, key, len) % JMARKS_BUCKETS);
}

static void
jmarks_free_list(struct lmdb_jmark *f)
{
    while (f != NULL) {
        struct lmdb_jmark *next = f->next;
        free(f);
        f = next;
    }
}

int64_t
store_lmdb_jmarks_find(struct lmdb_store *s, const MDB_val *key)
{
    struct lmdb_jmark *f;

    if (s->jcount == 0) {
        return 0;
    }
    f = s->ftab[jmarks_bucket(s, key->mv_data, key->mv_size)];
    for (; f != NULL; f = f->next) {
        if (f->len == key->mv_size &&
            memcmp(f->key, key->mv_data, f->len) == 0) {
            return f->mark;
        }
    }
    return 0;
}

/* Writer: the batch's marks are on stable storage; reads see them from
 * now on, before any of its raises is answered. */
static void
jmarks_publish(struct lmdb_store *s)
{
    struct lmdb_jmark *dup = NULL;

    lmdb_worker_lock(s->w);
    while (s->staged != NULL) {
        struct lmdb_jmark *f = s->staged;
        struct lmdb_jmark **head = &s->ftab[jmarks_bucket(s, f->key, f->len)];
        struct lmdb_jmark *old = *head;

        s->staged = f->next;
        while (old != NULL &&
               (old->len != f->len || memcmp(old->key, f->key, f->len) != 0)) {
            old = old->next;
        }
        if (old != NULL) {
            /* A mark only rises (staged holds the batch newest first). */
            if (f->mark > old->mark) {
                old->mark = f->mark;
            }
            f->next = dup;
            dup = f;
        } else {
            f->next = *head;
            *head = f;
            s->jcount++;
        }
    }
    lmdb_worker_unlock(s->w);
    jmarks_free_list(dup);
}

/* Empty the journaled table: its marks, as one list. */
static struct lmdb_jmark *
jmarks_take(struct lmdb_store *s)
{
    struct lmdb_jmark *all = NULL;

    for (size_t i = 0; i < JMARKS_BUCKETS; i++) {
        struct lmdb_jmark *f = s->ftab[i];

        while (f != NULL) {
            struct lmdb_jmark *next = f->next;
            f->next = all;
            all = f;
            f = next;
        }
        s->ftab[i] = NULL;
    }
    s->jcount = 0;
    return all;
}

/* Writer: LMDB's committed state holds every journaled mark now. */
static void
jmarks_clear(struct lmdb_store *s)
{
    struct lmdb_jmark *all;

    lmdb_worker_lock(s->w);
    all = jmarks_take(s);
    lmdb_worker_unlock(s->w);
    jmarks_free_list(all);
}

/* Writer: the batch's new marks will never be answered accepted. */
static void
jmarks_drop_staged(struct lmdb_store *s)
{
    jmarks_free_list(s->staged);
    s->staged = NULL;
}

/* At most the bytes the file grows by when one put of a key of len bytes
 * goes into a transaction: its path from the root COW-copied (depth
 * pages, one more should the tree grow a level) and a page split off,
 * plus the node at half fill in its leaf and again as the key a split
 * adds to a branch. Paths are shared and most puts land on pages already
 * copied, so real puts cost a fraction of this. */
static size_t
put_cost(const struct lmdb_store *s, size_t len)
{
    return (s->depth + 2) * s->psize + 4 * (NODE_OVERHEAD + len + 8);
}

/* At most what committing a transaction that added `added` bytes adds
 * on top: the epoch key, and LMDB's record of the pages it freed (8
 * bytes a page, in a tree of its own). */
static size_t
commit_cost(const struct lmdb_store *s, size_t added)
{
    return put_cost(s, EPOCH_KEY_LEN) + 4 * s->psize + added / (s->psize / 16);
}

/* Whether one more put of a key of len bytes, and the commit, keep the
 * file within map_size. */
static bool
fits(const struct lmdb_store *s, size_t len)
{
    size_t add = s->added + put_cost(s, len);

    return s->committed + add + commit_cost(s, add) <= s->map_size;
}

/* The env's size: the limit or the file if larger, plus room for the
 * replay of a full journal (CHECKPOINT_PUTS puts of the longest key,
 * each copying a page and adding its node at half fill) and the commit. */
size_t
store_lmdb_env_map_size(const struct lmdb_store *s)
{
    size_t node = NODE_OVERHEAD + s->maxkey + 8;
    size_t room = CHECKPOINT_PUTS * (s->psize + 2 * node) + 64 * s->psize;
    size_t base = s->committed > s->map_size ? s->committed : s->map_size;

    room = (room + HEADROOM_ROUND - 1) / HEADROOM_ROUND * HEADROOM_ROUND;
    return base + room;
}

static void
log_map_full(struct lmdb_store *s, const struct lmdb_req *r)
{
    wlog(s, TM_LOG_ERROR,
         "lmdb: %s: map full (map_size=%zu, %zu bytes used): raise of %s "
         "refused, and every raise that would write a mark until [store] "
         "map_size is raised and tidemark restarted; reads and stale "
         "raises are answered",
         LOG_STR(s->path), s->map_size, s->committed, LOG_ESC(r->name, r->len));
}

/* Writer and open: what the last commit left. The store becomes full
 * when a fresh transaction has no room for a put of the longest key. */
void
store_lmdb_note_commit(struct lmdb_store *s)
{
    MDB_envinfo info;
    MDB_stat st;

    s->added = 0;
    if (mdb_env_info(s->env, &info) == 0) {
        s->committed = (info.me_last_pgno + 1) * s->psize;
    }
    if (mdb_env_stat(s->env, &st) == 0) {
        s->depth = st.ms_depth;
    }
    if (!fits(s, s->maxkey)) {
        s->full = true;
    }
}

/* Writer: begin the write transaction unless one is open. 0 or an LMDB
 * error. */
static int
txn_open(struct lmdb_store *s)
{
    int rc;

    if (s->txn != NULL) {
        return 0;
    }
    rc = mdb_txn_begin(s->env, NULL, 0, &s->txn);
    if (rc != 0) {
        s->txn = NULL;
    }
    return rc;
}

/* Writer: commit the transaction with the epoch moved on, so that LMDB
 * holds every mark the journal does and the journal starts over. 0 or
 * an LMDB error; the transaction is gone either way. */
static int
checkpoint(struct lmdb_store *s)
{
    MDB_val key = {.mv_size = EPOCH_KEY_LEN, .mv_data = (void *)EPOCH_KEY};
    int rc;

    if (s->puts == 0) {
        /* Nothing to commit, and no record of this epoch written: a
         * full map still opens and closes. */
        if (s->txn != NULL) {
            mdb_txn_abort(s->txn);
            s->txn = NULL;
        }
        s->added = 0;
        journal_restart(s->journal, s->epoch);
        return 0;
    }
    rc = txn_open(s);
    if (rc != 0) {
        return rc;
    }
    rc = write_mark(s, &key, (int64_t)(s->epoch + 1));
    if (rc == 0) {
        rc = mdb_txn_commit(s->txn);
    } else {
        mdb_txn_abort(s->txn);
    }
    s->txn = NULL;
    if (rc != 0) {
        return rc;
    }
    s->epoch++;
    s->puts = 0;
    jmarks_clear(s);
    store_lmdb_note_commit(s);
    journal_restart(s->journal, s->epoch);
    lmdb_worker_lock(s->w);
    s->stats.checkpoints++;
    lmdb_worker_unlock(s->w);
    return 0;
}

/* journal_replay's callback: raise key to token in the transaction. */
static int
replay_one(void *arg, const unsigned char *k, size_t len, int64_t token)
{
    struct lmdb_store *s = arg;
    MDB_val key = {.mv_size = len, .mv_data = (void *)k};
    int64_t cur;
    int rc;

    if (len > s->maxkey) {
        return EBADMSG; /* a key the store digests: not its record */
    }
    rc = store_lmdb_read_mark(s->txn, s->dbi, &key, &cur);
    if (rc == 0 && token > cur) {
        rc = write_mark(s, &key, token);
        s->puts++;
        s->added += put_cost(s, len);
    }
    return rc;
}

/* Bring LMDB up to the journal: in a new transaction, read the epoch,
 * replay that epoch's records and checkpoint. Run at open and after a
 * batch aborted the transaction. 0 with *n raises replayed, or an LMDB
 * error or errno with what failed in err. */
int
store_lmdb_recover(struct lmdb_store *s, size_t *n, char *err, size_t errlen)
{
    MDB_val key = {.mv_size = EPOCH_KEY_LEN, .mv_data = (void *)EPOCH_KEY};
    int64_t epoch;
    int rc;

    *n = 0;
    if (s->txn != NULL) {
        mdb_txn_abort(s->txn);
        s->txn = NULL;
    }
    s->puts = 0;
    s->added = 0;
    journal_drop(s->journal);
    rc = txn_open(s);
    if (rc != 0) {
        snprintf(err, errlen, "cannot begin a write transaction: %s",
                 mdb_strerror(rc));
        return rc;
    }
    rc = store_lmdb_read_mark(s->txn, s->dbi, &key, &epoch);
    if (rc != 0) {
        snprintf(err, errlen, "cannot read the journal epoch: %s",
                 rc == EINVAL ? "not an 8-byte value" : mdb_strerror(rc));
        goto abort;
    }
    s->epoch = (uint64_t)epoch;
    rc = journal_replay(s->journal, s->epoch, replay_one, s, n);
    if (rc == EBADMSG) {
        snprintf(err, errlen,
                 "%s-journal holds a record whose checksum passes but whose "
                 "entries this store cannot have written; tidemark does not "
                 "start on a journal it cannot read (move the file aside only "
                 "if losing the raises it holds is acceptable)",
                 s->path);
        goto abort;
    }
    if (rc != 0) {
        snprintf(err, errlen, "replaying the journal failed: %s%s",
                 mdb_strerror(rc),
                 rc == MDB_MAP_FULL ? " (raise [store] map_size)" : "");
        goto abort;
    }
    rc = checkpoint(s);
    if (rc != 0) {
        snprintf(err, errlen, "cannot commit the replayed journal: %s%s",
                 mdb_strerror(rc),
                 rc == MDB_MAP_FULL ? " (raise [store] map_size)" : "");
    }
    return rc;

abort:
    mdb_txn_abort(s->txn);
    s->txn = NULL;
    return rc;
}

/* Writer: the store can no longer vouch for what is on disk. */
static void
fail_store(struct lmdb_store *s, const char *what, int rc, size_t n)
{
    lmdb_worker_fail(s->w);
    wlog(s, TM_LOG_ERROR,
         "lmdb: %s: %s: %s: %zu raises refused; the store is failed and "
         "refuses every raise until tidemark is restarted (accepted marks "
         "are in the journal or the file)",
         LOG_STR(s->path), what, mdb_strerror(rc), n);
}

/* Writer: answer r, a raise that would write a mark, with an error for
 * a full map; logged once a burst. */
static void
refuse_full(struct lmdb_store *s, struct lmdb_req *r)
{
    if (!s->refusing && s->refused == 0) {
        log_map_full(s, r);
    }
    s->refused++;
    r->res = STORE_ERROR;
    r->mark = 0;
}

/* Writer: make sure a put of a key of len bytes fits in the map,
 * checkpointing first when the open transaction might not leave room.
 * 0 when it fits, 1 when the map is full, -1 when the store failed. */
static int
make_room(struct lmdb_store *s, size_t len, size_t n)
{
    int rc;

    if (!s->full && !fits(s, len)) {
        rc = checkpoint(s);
        if (rc != 0) {
            fail_store(s, "checkpoint (map nearly full) failed", rc, n);
            return -1;
        }
        if (!fits(s, len)) {
            s->full = true;
        }
    }
    return s->full ? 1 : 0;
}

/* Writer: one raise of a batch, in the open transaction. 0, or
 * an LMDB error that dooms the transaction (r is answered), or -1 when
 * the store failed. */
static int
apply_one(struct lmdb_store *s, struct lmdb_req *r, size_t n, size_t *nput)
{
    unsigned char kbuf[LMDB_DIGEST_KEY_LEN];
    struct lmdb_jmark *fr;
    MDB_val key;
    int64_t cur;
    int rc;

    lmdb_make_key(s->maxkey, r->name, r->len, kbuf, &key);
    if (!journal_fits(s->journal, key.mv_size)) {
        /* Everything so far goes into LMDB; the journal starts over. */
        rc = checkpoint(s);
        if (rc != 0) {
            fail_store(s, "checkpoint (journal full) failed", rc, n);
            return -1;
        }
    }
    rc = txn_open(s);
    if (rc != 0) {
        fail_store(s, "cannot begin a write transaction", rc, n);
        return -1;
    }
    rc = store_lmdb_read_mark(s->txn, s->dbi, &key, &cur);
    if (rc == EINVAL) {
        wlog(s, TM_LOG_ERROR,
             "lmdb: %s: the mark of %s is not an 8-byte value: raise refused",
             LOG_STR(s->path), LOG_ESC(r->name, r->len));
        r->res = STORE_ERROR;
        r->mark = 0;
        return 0;
    }
    if (rc != 0) {
        wlog(s, TM_LOG_ERROR,
             "lmdb: %s: reading the mark of %s failed: %s: %zu requests "
             "refused",
             LOG_STR(s->path), LOG_ESC(r->name, r->len), mdb_strerror(rc), n);
        return rc;
    }
    if (r->token <= cur) {
        /* Equal: the mark is already durable, nothing to write. */
        r->res = r->token == cur ? STORE_ACCEPTED : STORE_STALE;
        r->mark = cur;
        return 0;
    }
    rc = make_room(s, key.mv_size, n);
    if (rc != 0) {
        if (rc > 0) {
            refuse_full(s, r);
            return 0;
        }
        return -1;
    }
    rc = txn_open(s); /* make_room may have checkpointed */
    if (rc != 0) {
        fail_store(s, "cannot begin a write transaction", rc, n);
        return -1;
    }
    fr = malloc(sizeof(*fr) + key.mv_size);
    if (fr == NULL) {
        wlog(s, TM_LOG_ERROR, "lmdb: %s: out of memory: raise of %s refused",
             LOG_STR(s->path), LOG_ESC(r->name, r->len));
        r->res = STORE_ERROR;
        r->mark = 0;
        return 0;
    }
    fr->mark = r->token;
    fr->len = key.mv_size;
    memcpy(fr->key, key.mv_data, key.mv_size);
    fr->next = s->staged;
    s->staged = fr;
    rc = write_mark(s, &key, r->token);
    if (rc == MDB_MAP_FULL) {
        /* Past the headroom too: the estimate was wrong. The journal
         * is replayed with what room is left, and the store is full. */
        s->full = true;
        log_map_full(s, r);
        return rc;
    }
    if (rc != 0) {
        wlog(s, TM_LOG_ERROR,
             "lmdb: %s: writing the mark of %s failed: %s: %zu raises "
             "refused",
             LOG_STR(s->path), LOG_ESC(r->name, r->len), mdb_strerror(rc), n);
        return rc;
    }
    s->puts++;
    s->added += put_cost(s, key.mv_size);
    rc = journal_add(s->journal, key.mv_data, key.mv_size, r->token);
    if (rc != 0) {
        fail_store(s, "writing the journal failed", rc, n);
        return -1;
    }
    (*nput)++;
    r->res = STORE_ACCEPTED;
    r->mark = r->token;
    return 0;
}

/* Writer thread: answer every request of b in the open transaction.
 * Raises of one resource see each other in queue order, since a
 * transaction reads its own writes. The answers become final only once
 * the journal holds the new marks on stable storage. */
static void
run_batch(struct lmdb_store *s, struct lmdb_worker_list *b)
{
    char err[256];
    size_t nput = 0;
    size_t replayed;
    int rc = 0;

    if (lmdb_worker_failed(s->w)) {
        list_answer_all(b, STORE_ERROR);
        return;
    }
    for (struct lmdb_worker_job *j = b->head; j != NULL && rc == 0;
         j = j->next) {
        rc = apply_one(s, lmdb_to_req(j), b->n, &nput);
    }
    if (rc != 0) {
        list_answer_all(b, STORE_ERROR);
        jmarks_drop_staged(s);
        if (rc == -1) {
            return;
        }
        /* The transaction is doomed; what the journal holds is not. */
        rc = store_lmdb_recover(s, &replayed, err, sizeof(err));
        if (rc != 0) {
            fail_store(s, err, rc, b->n);
        }
        return;
    }
    rc = journal_sync(s->journal);
    if (rc != 0) {
        /* Never retry: after a failed fsync the kernel may have dropped
         * the dirty pages and a second fsync can succeed anyway. */
        list_answer_all(b, STORE_ERROR);
        jmarks_drop_staged(s);
        fail_store(s, "commit failed: journal sync", rc, b->n);
        return;
    }
    jmarks_publish(s);
    if (nput == 0) {
        return;
    }
    lmdb_worker_lock(s->w);
    s->stats.commits++;
    lmdb_worker_unlock(s->w);
    if (s->puts >= CHECKPOINT_PUTS) {
        rc = checkpoint(s);
        if (rc != 0) {
            fail_store(s, "checkpoint failed", rc, 0);
        }
    }
}

/* How long the writer may wait for a batch before writer_idle: with
 * marks not yet in LMDB, CHECKPOINT_IDLE_MS; else as long as it takes. */
static int
idle_wait(const struct lmdb_store *s)
{
    return s->puts > 0 ? CHECKPOINT_IDLE_MS : 0;
}

/* Writer thread: run a loop turn's requests, and count them. */
int
store_lmdb_writer_run(void *arg, struct lmdb_worker_list *batch)
{
    struct lmdb_store *s = arg;

    run_batch(s, batch);
    s->refusing = s->refused > 0;
    s->refused = 0;
    lmdb_worker_lock(s->w);
    s->stats.batches++;
    s->stats.raises += batch->n;
    if (batch->n > s->stats.largest_batch) {
        s->stats.largest_batch = batch->n;
    }
    lmdb_worker_unlock(s->w);
    return idle_wait(s);
}

/* Writer thread: idle for CHECKPOINT_IDLE_MS with marks not in LMDB. */
int
store_lmdb_writer_idle(void *arg)
{
    struct lmdb_store *s = arg;
    int rc;

    if (lmdb_worker_failed(s->w)) {
        s->puts = 0; /* nothing will be committed: stop waking */
    } else if ((rc = checkpoint(s)) != 0) {
        fail_store(s, "checkpoint failed", rc, 0);
    }
    return idle_wait(s);
}

/* Writer thread, every queued request answered: leave LMDB complete, so
 * the next open has nothing to replay. */
void
store_lmdb_writer_stop(void *arg)
{
    struct lmdb_store *s = arg;
    int rc;

    if (s->txn != NULL && !lmdb_worker_failed(s->w) &&
        (rc = checkpoint(s)) != 0) {
        fail_store(s, "checkpoint at close failed", rc, 0);
    }
    if (s->txn != NULL) {
        mdb_txn_abort(s->txn);
        s->txn = NULL;
    }
}

void
store_lmdb_jmarks_free(struct lmdb_store *s)
{
    jmarks_drop_staged(s);
    jmarks_free_list(jmarks_take(s));
}
