/* store_lmdb.c: the embedded store. Marks live in one LMDB file; a writer
 * thread groups the raises of a loop turn, makes them durable with one
 * journal write and sync, and hands the answers back to the event loop
 * through an eventfd. LMDB commits (checkpoints) retire the journal. */
#include "store_lmdb.h"

#include <errno.h>
#include <lmdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "../../conf/cfg.h"
#include "../clients/lmdb_util.h"
#include "../clients/lmdb_worker.h"
#include "../log.h"
#include "../metrics.h"
#include "../seed.h"
#include "journal.h"
#include "store_lmdb_int.h"

/*
 * Layout of the file. One unnamed database maps a key to an 8-byte
 * big-endian two's complement int64 (portable across architectures and
 * readable in mdb_dump). The key is the resource name's bytes, except for
 * names LMDB cannot store as a key or that could be mistaken for a digest
 * key: empty, longer than mdb_env_get_maxkeysize() (511 by default), or
 * starting with a NUL byte. Those are stored under "\0sha256:" followed by
 * the 32-byte SHA-256 of the name. Verbatim keys never start with NUL, so
 * the two forms cannot collide, nor collide with EPOCH_KEY, the one key
 * that is not a mark.
 *
 * Threads. The loop thread calls raise, get, peek, ready and close, and
 * runs every callback. The writer thread (lmdb_worker.c) owns the write
 * transaction and the journal. Gets never wait for it: the loop thread
 * reads the mark in a read-only transaction of its own (one reader slot,
 * reset and renewed; peek reads the same way, at once) and takes the larger of
 * that and the journaled table, the marks accepted since the last checkpoint,
 * which LMDB's committed state does not hold yet. The writer links a batch's
 * new marks into the table once the journal holds them on stable storage,
 * before their raises are answered, and empties it only after the commit that
 * holds them; a read that finds the table emptied begins its transaction after
 * that commit. So a get sees every accepted raise, and no mark that is
 * not durable. Besides the worker's queues, the threads share the log
 * queue, the counters and the journaled table, under the worker's lock. The
 * writer's side (durability, checkpoints, a full map) is described in
 * store_lmdb_writer.c.
 */

#define LMDB_MAP_SIZE_DEFAULT ((int64_t)64 << 20)

static struct lmdb_store *
to_lmdb(struct store *s)
{
    return (struct lmdb_store *)s;
}

/* Loop thread: log what the writer queued; locked: the writer may be
 * running (else it is gone, and with it the lock). */
static void
flush_logs(struct lmdb_store *s, bool locked)
{
    struct lmdb_log *logs;

    if (locked) {
        lmdb_worker_lock(s->w);
    }
    logs = s->logs;
    s->logs = NULL;
    s->logs_tail = &s->logs;
    if (locked) {
        lmdb_worker_unlock(s->w);
    }

    while (logs != NULL) {
        struct lmdb_log *next = logs->next;
        log_at(logs->level, "%s", logs->text);
        free(logs);
        logs = next;
    }
}

/* Loop thread: log what the writer queued, then run the callbacks of
 * every answered request, freeing each. Callbacks may raise or get
 * again; those are answered on a later call. */
static void
answer_requests(void *arg, struct lmdb_worker_list *answered)
{
    struct lmdb_store *s = arg;
    struct lmdb_worker_job *j;

    flush_logs(s, true);
    j = answered->head;
    while (j != NULL) {
        struct lmdb_worker_job *next = j->next;
        struct lmdb_req *r = lmdb_to_req(j);

        r->cb(r->arg, r->res, r->mark);
        free(r);
        j = next;
    }
}

static const struct lmdb_worker_ops writer_ops = {
    .run = store_lmdb_writer_run,
    .idle = store_lmdb_writer_idle,
    .stop = store_lmdb_writer_stop,
    .answer = answer_requests,
};

/* A request for res; NULL when out of memory. */
static struct lmdb_req *
req_new(const char *res, size_t len, int64_t token, store_cb cb, void *arg)
{
    struct lmdb_req *r;

    if (len > SIZE_MAX - sizeof(*r)) {
        return NULL;
    }
    r = malloc(sizeof(*r) + len);
    if (r == NULL) {
        return NULL;
    }
    r->job.next = NULL;
    r->cb = cb;
    r->arg = arg;
    r->token = token;
    r->res = STORE_ERROR;
    r->mark = 0;
    r->len = len;
    if (len > 0) {
        memcpy(r->name, res, len);
    }
    return r;
}

/* Loop thread: answer r from here, on the next pass of the loop. */
static void
answer_local(struct lmdb_store *s, struct lmdb_req *r, enum store_result res,
             int64_t mark)
{
    r->res = res;
    r->mark = mark;
    lmdb_worker_answer_local(s->w, &r->job);
}

/* Loop thread: a request that could not be allocated. Try without the
 * name; failing that, the callback is lost and the caller's own timeout
 * ([store] timeout_ms) has to answer. */
static void
answer_oom(struct lmdb_store *s, store_cb cb, void *arg)
{
    struct lmdb_req *r = req_new(NULL, 0, 0, cb, arg);

    if (r == NULL) {
        log_error("lmdb: out of memory: a store callback is lost");
        return;
    }
    answer_local(s, r, STORE_ERROR, 0);
}

/* Loop thread: hand r to the writer, to be answered after this loop
 * turn's requests share one journal write. */
static void
enqueue(struct lmdb_store *s, struct lmdb_req *r)
{
    /* After a failed write the file may not hold what LMDB shows. */
    if (!lmdb_worker_ready(s->w)) {
        answer_local(s, r, STORE_ERROR, 0);
        return;
    }
    if (!lmdb_worker_submit(s->w, &r->job, STORE_LMDB_QUEUE_MAX)) {
        if (!s->full_logged) {
            log_error("lmdb: %s: %d requests are waiting for the disk: "
                      "raise of %s refused, and more until the queue "
                      "drains",
                      LOG_STR(s->path), STORE_LMDB_QUEUE_MAX,
                      LOG_ESC(r->name, r->len));
            s->full_logged = true;
        }
        answer_local(s, r, STORE_ERROR, 0);
        return;
    }
    s->full_logged = false;
}

static void
lmdb_raise(struct store *st, const char *res, size_t len, int64_t token,
           store_cb cb, void *arg)
{
    struct lmdb_store *s = to_lmdb(st);
    struct lmdb_req *r = req_new(res, len, token, cb, arg);

    if (r == NULL) {
        answer_oom(s, cb, arg);
        return;
    }
    enqueue(s, r);
}

/* Loop thread: the mark of res, without the writer: the larger of the
 * journaled table's and the committed one, read in that order (see
 * Threads above). 0 or an LMDB error (EINVAL: not 8 bytes). */
static int
read_now(struct lmdb_store *s, const char *res, size_t len, int64_t *mark)
{
    unsigned char kbuf[LMDB_DIGEST_KEY_LEN];
    MDB_val key;
    int64_t journaled;
    int rc;

    lmdb_make_key(s->maxkey, res, len, kbuf, &key);
    lmdb_worker_lock(s->w);
    journaled = store_lmdb_jmarks_find(s, &key);
    lmdb_worker_unlock(s->w);
    if (s->rtxn != NULL) {
        rc = mdb_txn_renew(s->rtxn);
    } else {
        rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &s->rtxn);
        if (rc != 0) {
            s->rtxn = NULL;
        }
    }
    if (rc != 0) {
        return rc;
    }
    rc = store_lmdb_read_mark(s->rtxn, s->dbi, &key, mark);
    mdb_txn_reset(s->rtxn);
    if (rc == 0 && journaled > *mark) {
        *mark = journaled;
    }
    return rc;
}

/* A refusal's read: a token the cache does not know is checked here,
 * without a request, the writer or a wait. A read that fails is left to
 * raise (which reads again, and logs what failed). */
static bool
lmdb_peek(struct store *st, const char *res, size_t len, int64_t *mark)
{
    struct lmdb_store *s = to_lmdb(st);

    return lmdb_worker_ready(s->w) && read_now(s, res, len, mark) == 0;
}

/* Gets never queue behind the writer: read here, answered on the next
 * pass of the loop. */
static void
lmdb_get(struct store *st, const char *res, size_t len, store_cb cb, void *arg)
{
    struct lmdb_store *s = to_lmdb(st);
    struct lmdb_req *r = req_new(res, len, 0, cb, arg);
    int64_t mark = 0;
    int rc;

    if (r == NULL) {
        answer_oom(s, cb, arg);
        return;
    }
    /* After a failed write the file may not hold what LMDB shows. */
    if (!lmdb_worker_ready(s->w)) {
        answer_local(s, r, STORE_ERROR, 0);
        return;
    }
    rc = read_now(s, r->name, r->len, &mark);
    if (rc != 0) {
        log_error("lmdb: %s: reading the mark of %s failed: %s: read refused",
                  LOG_STR(s->path), LOG_ESC(r->name, r->len),
                  rc == EINVAL ? "not an 8-byte value" : mdb_strerror(rc));
        answer_local(s, r, STORE_ERROR, 0);
        return;
    }
    answer_local(s, r, STORE_ACCEPTED, mark);
}

static bool
lmdb_ready(struct store *st)
{
    return lmdb_worker_ready(to_lmdb(st)->w);
}

/* Stop the writer once it has answered every queued request (their
 * callbacks run here), then release what open set up. */
static void
lmdb_free(struct lmdb_store *s)
{
    lmdb_worker_close(s->w);
    flush_logs(s, false); /* what the writer said after its last answer */
    if (s->rtxn != NULL) {
        mdb_txn_abort(s->rtxn);
    }
    if (s->txn != NULL) {
        mdb_txn_abort(s->txn);
    }
    store_lmdb_jmarks_free(s); /* the writer is gone: no lock */
    journal_close(s->journal);
    if (s->env != NULL) {
        mdb_env_close(s->env);
    }
    free(s->path);
    free(s);
}

/* Whether LMDB holds no mark (the epoch key aside). Open, before the
 * writer starts: no other transaction is open. */
static bool
holds_no_mark(struct lmdb_store *s)
{
    MDB_val key = {.mv_size = EPOCH_KEY_LEN, .mv_data = (void *)EPOCH_KEY};
    MDB_val val;
    MDB_txn *txn;
    MDB_stat st;
    bool none = false;

    if (mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn) != 0) {
        return false;
    }
    if (mdb_stat(txn, s->dbi, &st) == 0) {
        none = st.ms_entries == 0 ||
               (st.ms_entries == 1 && mdb_get(txn, s->dbi, &key, &val) == 0);
    }
    mdb_txn_abort(txn);
    return none;
}

/* Open, the env just opened: learn its page size and what the file
 * uses, and size the env to the limit plus headroom. */
static bool
size_env(struct lmdb_store *s, size_t limit, char *err, size_t errlen)
{
    MDB_stat st;
    int rc;

    s->map_size = limit;
    s->maxkey = (size_t)mdb_env_get_maxkeysize(s->env);
    rc = mdb_env_stat(s->env, &st);
    if (rc != 0) {
        snprintf(err, errlen, "lmdb: %s: %s", s->path, mdb_strerror(rc));
        return false;
    }
    s->psize = st.ms_psize;
    store_lmdb_note_commit(s);
    s->env_size = store_lmdb_env_map_size(s);
    rc = mdb_env_set_mapsize(s->env, s->env_size);
    if (rc != 0) {
        snprintf(err, errlen, "lmdb: %s: cannot set the map size: %s", s->path,
                 mdb_strerror(rc));
        return false;
    }
    return true;
}

/* Open PATH-journal and bring LMDB up to it. */
static bool
open_journal(struct lmdb_store *s, size_t *replayed, char *err, size_t errlen)
{
    char why[256];
    char *jpath;
    size_t n = strlen(s->path) + sizeof("-journal");

    jpath = malloc(n);
    if (jpath == NULL) {
        snprintf(err, errlen, "lmdb: out of memory");
        return false;
    }
    snprintf(jpath, n, "%s-journal", s->path);
    s->journal = journal_open(jpath, why, sizeof(why));
    if (s->journal == NULL) {
        snprintf(err, errlen, "lmdb: journal: %s", why);
        free(jpath);
        return false;
    }
    if (store_lmdb_recover(s, replayed, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "lmdb: %s: %s", jpath, why);
        free(jpath);
        return false;
    }
    free(jpath);
    return true;
}

static struct store *
lmdb_open(struct event_base *base, const struct cfg_store *cfg, char *err,
          size_t errlen)
{
    struct lmdb_store *s;
    int64_t map_size =
        cfg->map_size > 0 ? cfg->map_size : LMDB_MAP_SIZE_DEFAULT;
    size_t replayed = 0;
    int dead = 0;

    if (cfg->path == NULL || cfg->path[0] == '\0') {
        snprintf(err, errlen, "lmdb: [store] path is not set");
        return NULL;
    }
    if ((uint64_t)map_size > SIZE_MAX) {
        snprintf(err, errlen, "lmdb: [store] map_size %lld is too large",
                 (long long)map_size);
        return NULL;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "lmdb: out of memory");
        return NULL;
    }
    s->logs_tail = &s->logs;
    s->jseed = tm_seed(s);
    /* Before the journal: a checkpoint takes the worker's lock. */
    s->w = lmdb_worker_new(base, &writer_ops, s, "lmdb", err, errlen);
    if (s->w == NULL) {
        free(s);
        return NULL;
    }
    s->path = strdup(cfg->path);
    if (s->path == NULL) {
        snprintf(err, errlen, "lmdb: out of memory");
        goto fail;
    }
    if (!lmdb_open_durable("lmdb", s->path, map_size, &s->env, &s->dbi, &dead,
                           err, errlen)) {
        goto fail;
    }
    if (!size_env(s, (size_t)map_size, err, errlen) ||
        !open_journal(s, &replayed, err, errlen)) {
        goto fail;
    }
    store_lmdb_note_commit(s);
    s->fresh = holds_no_mark(s);
    s->refusing = s->full; /* logged below */
    if (!lmdb_worker_start(s->w, err, errlen)) {
        goto fail;
    }
    if (dead > 0) {
        log_info("lmdb: %s: cleared %d stale reader slots", LOG_STR(s->path),
                 dead);
    }
    if (replayed > 0) {
        log_info("lmdb: %s: replayed %zu raises from the journal",
                 LOG_STR(s->path), replayed);
    }
    log_info("lmdb: %s open, map_size=%zu (%zu bytes used, the file may "
             "grow to %zu), max key %zu bytes",
             LOG_STR(s->path), s->map_size, s->committed, s->env_size,
             s->maxkey);
    if (s->full) {
        log_error("lmdb: %s: map full (map_size=%zu, %zu bytes used): "
                  "raises that would write a mark are refused until "
                  "[store] map_size is raised; reads and stale raises are "
                  "answered",
                  LOG_STR(s->path), s->map_size, s->committed);
    }
    return (struct store *)s;

fail:
    lmdb_free(s);
    return NULL;
}

/* Raises and gets made from now on, by callbacks too, are refused; the
 * queued ones are answered first. */
static void
lmdb_close(struct store *st)
{
    struct lmdb_store *s = to_lmdb(st);

    if (s == NULL) {
        return;
    }
    lmdb_free(s);
}

void
store_lmdb_stats(struct store *st, struct store_lmdb_stats *out)
{
    struct lmdb_store *s = to_lmdb(st);

    lmdb_worker_lock(s->w);
    *out = s->stats;
    lmdb_worker_unlock(s->w);
}

bool
store_lmdb_fresh(struct store *st)
{
    return to_lmdb(st)->fresh;
}

/* The counters, and how full the file is: the pages up to the last one
 * the newest commit uses (what the journal holds is not in it yet),
 * against [store] map_size, the limit the store enforces (the env's map
 * is larger: env_map_size). mdb_env_info reads the meta page without a
 * transaction: safe beside the writer thread. */
static void
lmdb_metrics(struct store *st, struct evbuffer *out)
{
    struct lmdb_store *s = to_lmdb(st);
    struct store_lmdb_stats ls;
    MDB_envinfo info;

    store_lmdb_stats(st, &ls);
    metrics_head(out, MID_tidemark_lmdb_journal_syncs_total);
    metrics_value(out, MID_tidemark_lmdb_journal_syncs_total,
                  (double)ls.commits);
    metrics_head(out, MID_tidemark_lmdb_checkpoints_total);
    metrics_value(out, MID_tidemark_lmdb_checkpoints_total,
                  (double)ls.checkpoints);
    if (mdb_env_info(s->env, &info) == 0) {
        metrics_head(out, MID_tidemark_lmdb_map_used_bytes);
        metrics_value(out, MID_tidemark_lmdb_map_used_bytes,
                      (double)(info.me_last_pgno + 1) * (double)s->psize);
    }
    metrics_head(out, MID_tidemark_lmdb_map_size_bytes);
    metrics_value(out, MID_tidemark_lmdb_map_size_bytes, (double)s->map_size);
}

const struct store_ops store_lmdb_ops = {
    .name = "lmdb",
    .open = lmdb_open,
    .raise = lmdb_raise,
    .get = lmdb_get,
    .peek = lmdb_peek,
    .ready = lmdb_ready,
    .metrics = lmdb_metrics,
    .fresh = store_lmdb_fresh,
    .close = lmdb_close,
};
