/* lock_lmdb.c: leases in their own LMDB file. A writer thread runs the
 * operations of a loop turn in one write transaction, synced before any
 * answer, and hands the answers back to the loop through an eventfd. */
#include "lock.h"

#include <errno.h>
#include <lmdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "../../conf/cfg.h"
#include "../../policies/htab.h"
#include "../clients/lmdb_util.h"
#include "../clients/lmdb_worker.h"
#include "../log.h"
#include "../metrics.h"
#include "../seed.h"

/*
 * Layout. One unnamed database maps a lock name (keyed as the mark store
 * keys resources, lmdb_make_key) to a 16-byte record: the fence and the
 * expiry, both big-endian int64; the expiry is CLOCK_REALTIME in
 * milliseconds, so it means the same after a restart, and 0 once
 * released. The record is never deleted: its fence is the counter the
 * next acquire adds one to, so a fence never repeats, also across
 * release, expiry, crashes and restarts.
 *
 * Threads and durability are those of store_lmdb.c: the loop thread
 * queues, the writer thread (lmdb_worker.c) commits (fdatasync, then the
 * meta page through O_DSYNC) and only then are the answers handed back.
 * After a failed commit the state on disk is unknown: every later
 * operation is LOCK_ERROR until a restart. Reads (get) go through the writer
 * too, so they see every answer given before them.
 *
 * Live leases. The loop thread remembers the leases the answers showed
 * live (a bounded table): an acquire of a name whose lease is known to
 * be live is answered busy without the writer. It can only answer busy
 * too early (never grant), and only if another process changed the
 * file: one tidemark owns a lease file.
 *
 * Clock: expiry follows the wall clock. A step of the clock moves every
 * lease's end with it; fencing, not the TTL, keeps data right then.
 */

#define LOCK_REC_LEN 16
#define LOCK_QUEUE_MAX 65536
#define LIVE_MAX 65536 /* leases remembered at most */

struct ljob {
    struct lmdb_worker_job job; /* first: the worker's queue link */
    enum lock_kind op;
    lock_cb cb;
    void *arg;
    int64_t fence;        /* extend, release: the caller's */
    int64_t min_fence;    /* acquire: the floor (0: none) */
    int64_t ttl_ms;       /* acquire, extend */
    enum lock_result res; /* the answer, set before the callback */
    int64_t out_fence;
    int64_t out_ttl;
    size_t len;
    char name[]; /* len bytes, not NUL-terminated */
};

/* A lease known to be live until expires (wall clock, ms). */
struct live {
    struct hnode node; /* in the table, by name */
    int64_t fence;
    int64_t expires;
    size_t len;
    char name[];
};

struct lmdb_locks {
    MDB_env *env;
    MDB_dbi dbi;
    size_t maxkey;
    size_t psize; /* LMDB's page size */
    char *path;
    struct lmdb_worker *w;

    /* Loop thread only. */
    struct htab live; /* seeded: no caller aims names at one chain */

    /* Shared: under the worker's lock. */
    char err[320]; /* the writer's last error, for the loop */
};

static struct lmdb_locks *
to_locks(struct lock_backend *b)
{
    return (struct lmdb_locks *)b;
}

static struct ljob *
to_job(struct lmdb_worker_job *j)
{
    return (struct ljob *)j;
}

static void
answer_all(struct lmdb_worker_list *l, enum lock_result res)
{
    for (struct lmdb_worker_job *j = l->head; j != NULL; j = j->next) {
        struct ljob *lj = to_job(j);

        lj->res = res;
        lj->out_fence = 0;
        lj->out_ttl = 0;
    }
}

static int64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Writer thread: keep the first error of a batch for the loop to log. */
static void
werr(struct lmdb_locks *s, const char *what, int rc, size_t n)
{
    lmdb_worker_lock(s->w);
    snprintf(s->err, sizeof(s->err),
             "locks: lmdb: %s: %s: %s: %zu lock operations refused",
             LOG_STR(s->path), what, mdb_strerror(rc), n);
    lmdb_worker_unlock(s->w);
}

/* Apply one job inside txn at time now. Returns an LMDB error, or 0 with
 * *wrote set when the record changed. */
static int
apply(struct lmdb_locks *s, MDB_txn *txn, struct ljob *j, int64_t now,
      bool *wrote)
{
    unsigned char kbuf[LMDB_DIGEST_KEY_LEN], rec[LOCK_REC_LEN];
    int64_t fence = 0, expires = 0;
    MDB_val key, val;
    bool live;
    int rc;

    lmdb_make_key(s->maxkey, j->name, j->len, kbuf, &key);
    rc = mdb_get(txn, s->dbi, &key, &val);
    if (rc == 0 && val.mv_size == LOCK_REC_LEN) {
        fence = lmdb_get_be64(val.mv_data);
        expires = lmdb_get_be64((const unsigned char *)val.mv_data + 8);
    } else if (rc == 0) {
        return EINVAL;
    } else if (rc != MDB_NOTFOUND) {
        return rc;
    }
    live = expires > now;
    j->out_fence = fence;
    j->out_ttl = live ? expires - now : 0;
    switch (j->op) {
    case LOCK_OP_ACQUIRE:
        if (live) {
            j->res = LOCK_BUSY;
            return 0;
        }
        if (fence == INT64_MAX) {
            return EOVERFLOW;
        }
        fence++;
        if (fence < j->min_fence) {
            fence = j->min_fence;
        }
        expires = now + j->ttl_ms;
        j->res = LOCK_OK;
        j->out_fence = fence;
        j->out_ttl = j->ttl_ms;
        break;
    case LOCK_OP_EXTEND:
        if (!live || fence != j->fence) {
            j->res = LOCK_LOST;
            return 0;
        }
        expires = now + j->ttl_ms;
        j->res = LOCK_OK;
        j->out_ttl = j->ttl_ms;
        break;
    case LOCK_OP_RELEASE:
        if (!live || fence != j->fence) {
            j->res = LOCK_LOST;
            return 0;
        }
        expires = 0;
        j->res = LOCK_OK;
        j->out_ttl = 0;
        break;
    case LOCK_OP_STATUS:
        j->res = live ? LOCK_OK : LOCK_NONE;
        return 0;
    }
    lmdb_put_be64(rec, fence);
    lmdb_put_be64(rec + 8, expires);
    val.mv_data = rec;
    val.mv_size = sizeof(rec);
    rc = mdb_put(txn, s->dbi, &key, &val, 0);
    *wrote = rc == 0;
    return rc;
}

/* Writer thread: every job of b in one write transaction; the answers
 * stand only if the commit (and its sync) succeeds. Returns 0: no wait
 * for idle work. */
static int
run_batch(void *arg, struct lmdb_worker_list *b)
{
    struct lmdb_locks *s = arg;
    MDB_txn *txn;
    bool dirty = false;
    int rc;

    if (lmdb_worker_failed(s->w)) {
        answer_all(b, LOCK_ERROR);
        return 0;
    }
    rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    if (rc != 0) {
        werr(s, "cannot begin a write transaction", rc, b->n);
        if (rc == MDB_PANIC) {
            lmdb_worker_fail(s->w);
        }
        answer_all(b, LOCK_ERROR);
        return 0;
    }
    for (struct lmdb_worker_job *j = b->head; j != NULL; j = j->next) {
        bool wrote = false;

        rc = apply(s, txn, to_job(j), now_ms(), &wrote);
        if (rc == EINVAL || rc == EOVERFLOW) {
            /* This record only: not 16 bytes, or the counter is spent. */
            werr(s,
                 rc == EINVAL ? "a lease record is not 16 bytes"
                              : "a fence counter is at its maximum",
                 rc, 1);
            to_job(j)->res = LOCK_ERROR;
            continue;
        }
        if (rc != 0) {
            werr(s, "reading or writing a lease failed", rc, b->n);
            mdb_txn_abort(txn);
            answer_all(b, LOCK_ERROR);
            return 0;
        }
        dirty |= wrote;
    }
    if (!dirty) {
        mdb_txn_abort(txn);
        return 0;
    }
    rc = mdb_txn_commit(txn);
    if (rc == MDB_MAP_FULL) {
        werr(s, "map full: raise [locks] map_size", rc, b->n);
        answer_all(b, LOCK_ERROR);
        return 0;
    }
    if (rc != 0) {
        /* Never retry a failed sync: see store_lmdb.c. */
        lmdb_worker_fail(s->w);
        werr(s, "commit failed, leases refused until a restart", rc, b->n);
        answer_all(b, LOCK_ERROR);
    }
    return 0;
}

/* name's entry, or NULL. */
static struct live *
live_find(struct lmdb_locks *s, const char *name, size_t len, uint64_t h)
{
    struct hnode *n = htab_find(&s->live, name, len, h);

    return n != NULL ? HTAB_ENTRY(n, struct live, node) : NULL;
}

static void
live_drop(struct lmdb_locks *s, struct live *e)
{
    htab_del(&s->live, &e->node);
    free(e);
}

static void
live_forget(struct lmdb_locks *s, const char *name, size_t len)
{
    struct live *e = live_find(s, name, len, htab_key(&s->live, name, len));

    if (e != NULL) {
        live_drop(s, e);
    }
}

/* Remember name's lease as live until expires; best effort. */
static void
live_note(struct lmdb_locks *s, const char *name, size_t len, int64_t fence,
          int64_t expires)
{
    uint64_t h = htab_key(&s->live, name, len);
    struct live *e = live_find(s, name, len, h);

    if (e == NULL) {
        if (s->live.n >= LIVE_MAX) {
            return;
        }
        e = malloc(sizeof(*e) + len);
        if (e == NULL) {
            return;
        }
        e->len = len;
        memcpy(e->name, name, len);
        htab_add(&s->live, &e->node, e->name, len, h);
    }
    e->fence = fence;
    e->expires = expires;
}

/* Loop thread: what an answer says about the name's lease. */
static void
live_learn(struct lmdb_locks *s, const struct ljob *j, int64_t now)
{
    bool live =
        (j->res == LOCK_OK && j->op != LOCK_OP_RELEASE) || j->res == LOCK_BUSY;

    if (j->len == 0 || j->res == LOCK_ERROR) {
        return;
    }
    if (live && j->out_ttl > 0) {
        live_note(s, j->name, j->len, j->out_fence, now + j->out_ttl);
    } else {
        live_forget(s, j->name, j->len);
    }
}

static void
live_free_one(struct hnode *n, void *arg)
{
    (void)arg;
    free(HTAB_ENTRY(n, struct live, node));
}

static void
live_free(struct lmdb_locks *s)
{
    htab_drain(&s->live, live_free_one, NULL);
    htab_fini(&s->live);
}

/* Loop thread: log the writer's error, run the callbacks of every
 * answered job, freeing each. */
static void
answer_jobs(void *arg, struct lmdb_worker_list *answered)
{
    struct lmdb_locks *s = arg;
    char err[sizeof(s->err)];
    struct lmdb_worker_job *j;
    int64_t now;

    lmdb_worker_lock(s->w);
    memcpy(err, s->err, sizeof(err));
    s->err[0] = '\0';
    lmdb_worker_unlock(s->w);
    if (err[0] != '\0') {
        log_error("%s", err);
    }
    /* The answers' times left were computed a moment ago by the writer:
     * reckoning them from now only shortens what is remembered. */
    now = answered->head != NULL ? now_ms() : 0;
    j = answered->head;
    while (j != NULL) {
        struct lmdb_worker_job *next = j->next;
        struct ljob *lj = to_job(j);

        live_learn(s, lj, now);
        lj->cb(lj->arg, lj->res, lj->out_fence, lj->out_ttl);
        free(lj);
        j = next;
    }
}

static const struct lmdb_worker_ops writer_ops = {
    .run = run_batch,
    .answer = answer_jobs,
};

/* Queue an operation. Refused ones (closing, failed, out of memory, too
 * many queued) are answered LOCK_ERROR on the next loop pass; only when
 * not even that can be allocated is the callback lost (logged). */
static void
lmdb_submit(struct lock_backend *b, const struct lock_op *op)
{
    struct lmdb_locks *s = to_locks(b);
    size_t len = op->len;
    struct ljob *j = len <= 65536 ? malloc(sizeof(*j) + len) : NULL;
    bool refuse = false;

    if (j == NULL) {
        j = malloc(sizeof(*j));
        if (j == NULL) {
            log_error("locks: out of memory: a lock callback is lost");
            return;
        }
        len = 0;
        refuse = true;
    }
    *j = (struct ljob){.op = op->kind,
                       .cb = op->cb,
                       .arg = op->arg,
                       .fence = op->fence,
                       .min_fence = op->min_fence,
                       .ttl_ms = op->ttl_ms,
                       .res = LOCK_ERROR,
                       .len = len};
    if (len > 0) {
        memcpy(j->name, op->name, len);
    }
    refuse |= !lmdb_worker_ready(s->w);
    if (!refuse && op->kind == LOCK_OP_ACQUIRE) {
        struct live *e =
            live_find(s, j->name, len, htab_key(&s->live, j->name, len));
        int64_t now = e != NULL ? now_ms() : 0;

        if (e != NULL && e->expires > now) {
            j->res = LOCK_BUSY;
            j->out_fence = e->fence;
            j->out_ttl = e->expires - now;
            lmdb_worker_answer_local(s->w, &j->job);
            return;
        }
        if (e != NULL) {
            live_drop(s, e);
        }
    }
    if (refuse || !lmdb_worker_submit(s->w, &j->job, LOCK_QUEUE_MAX)) {
        lmdb_worker_answer_local(s->w, &j->job);
    }
}

static bool
lmdb_ready(struct lock_backend *b)
{
    return lmdb_worker_ready(to_locks(b)->w);
}

/* Stop the writer once it has answered every queued job (their
 * callbacks run here), then release what open set up. */
static void
locks_free(struct lmdb_locks *s)
{
    lmdb_worker_close(s->w);
    if (s->env != NULL) {
        mdb_env_close(s->env);
    }
    live_free(s);
    free(s->path);
    free(s);
}

/* Open (creating) the file and its database. false with err. */
static bool
open_env(struct lmdb_locks *s, int64_t map_size, char *err, size_t errlen)
{
    int dead;
    MDB_stat st;

    if (!lmdb_open_durable("locks", s->path, map_size, &s->env, &s->dbi, &dead,
                           err, errlen)) {
        return false;
    }
    s->maxkey = (size_t)mdb_env_get_maxkeysize(s->env);
    if (mdb_env_stat(s->env, &st) != 0) {
        snprintf(err, errlen, "locks: lmdb: %s: cannot read its page size",
                 s->path);
        return false;
    }
    s->psize = st.ms_psize;
    return true;
}

static struct lock_backend *
lmdb_open(struct event_base *base, const struct cfg_locks *cfg, char *err,
          size_t errlen)
{
    struct lmdb_locks *s;

    if (cfg->path == NULL || cfg->path[0] == '\0') {
        snprintf(err, errlen, "locks: [locks] path is not set");
        return NULL;
    }
    if (cfg->map_size <= 0 || (uint64_t)cfg->map_size > SIZE_MAX) {
        snprintf(err, errlen, "locks: [locks] map_size is out of range");
        return NULL;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "locks: out of memory");
        return NULL;
    }
    s->path = strdup(cfg->path);
    if (s->path == NULL || !htab_init(&s->live, 256, tm_seed(s))) {
        snprintf(err, errlen, "locks: out of memory");
        goto fail;
    }
    if (!open_env(s, cfg->map_size, err, errlen)) {
        goto fail;
    }
    s->w = lmdb_worker_new(base, &writer_ops, s, "locks", err, errlen);
    if (s->w == NULL || !lmdb_worker_start(s->w, err, errlen)) {
        goto fail;
    }
    log_info("locks: lmdb %s open", LOG_STR(s->path));
    return (struct lock_backend *)s;
fail:
    locks_free(s);
    return NULL;
}

/* Operations made from now on, by callbacks too, are refused; the
 * queued ones are answered first. */
static void
lmdb_close(struct lock_backend *b)
{
    struct lmdb_locks *s = to_locks(b);

    if (s == NULL) {
        return;
    }
    locks_free(s);
}

/* How full the file is: the pages up to the last one the newest commit
 * uses, against the map ([locks] map_size). mdb_env_info reads the meta
 * page without a transaction: safe beside the writer thread. */
static void
lmdb_metrics(struct lock_backend *b, struct evbuffer *out)
{
    struct lmdb_locks *s = to_locks(b);
    MDB_envinfo info;

    if (mdb_env_info(s->env, &info) != 0) {
        return;
    }
    metrics_head(out, MID_tidemark_lock_lmdb_map_used_bytes);
    metrics_value(out, MID_tidemark_lock_lmdb_map_used_bytes,
                  (double)(info.me_last_pgno + 1) * (double)s->psize);
    metrics_head(out, MID_tidemark_lock_lmdb_map_size_bytes);
    metrics_value(out, MID_tidemark_lock_lmdb_map_size_bytes,
                  (double)info.me_mapsize);
}

const struct lock_ops lock_lmdb_ops = {
    .name = "lmdb",
    .open = lmdb_open,
    .submit = lmdb_submit,
    .ready = lmdb_ready,
    .metrics = lmdb_metrics,
    .close = lmdb_close,
};
