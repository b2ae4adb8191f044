/* store_lmdb.c: the embedded store. Marks live in one LMDB file; a writer
 * thread groups the raises of a loop turn, makes them durable with one
 * journal write and sync, and hands the answers back to the event loop
 * through an eventfd. LMDB commits (checkpoints) retire the journal. */
#include "store_lmdb.h"

#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "../../conf/cfg.h"
#include "../log.h"
#include "../queue.h"
#include "journal.h"
#include "lmdb_util.h"

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
 * Threads. The loop thread calls raise, get, ready and close, and runs
 * every callback. The writer thread owns the write transaction and the
 * journal, and answers gets too, so a get sees every accepted raise. The
 * threads share the pending queue (loop -> writer), the done queue
 * (writer -> loop) and the log queue under mu; the writer wakes the loop
 * through an eventfd watched by done_ev, so libevent needs no thread
 * support.
 *
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
 * fails inside LMDB (a full map) aborts the transaction; the raises
 * accepted before it are in the journal, and are replayed into a new one.
 */

#define LMDB_MAP_SIZE_DEFAULT ((int64_t)64 << 20)
/* Bytes of a resource name quoted in a log line. */
#define LMDB_LOG_NAME_MAX 200
/* Checkpoint after this many marks written since the last one: bounds
 * the transaction's dirty pages (a few MiB at worst) and the replay. */
#define CHECKPOINT_PUTS 4096
/* ... and once the writer has had nothing to do for this long. */
#define CHECKPOINT_IDLE_MS 100

/* The journal epoch: the records LMDB does not hold yet carry it. */
static const char EPOCH_KEY[] = "\0journal-epoch";
#define EPOCH_KEY_LEN (sizeof(EPOCH_KEY) - 1)

struct lmdb_req {
    struct lmdb_req *next;
    store_cb cb;
    void *arg;
    bool get;              /* a get, else a raise */
    int64_t token;         /* raise: the token; get: unused */
    enum store_result res; /* the answer, set before the callback runs */
    int64_t mark;
    size_t len;
    char name[]; /* len bytes, not NUL-terminated */
};

struct req_list {
    QUEUE_FIELDS(struct lmdb_req);
};

/* A line the writer thread wants logged: the embedding program's sink
 * is only ever called on the loop thread. */
struct lmdb_log {
    struct lmdb_log *next;
    enum log_level level;
    char text[];
};

struct lmdb_store {
    struct event_base *base;
    MDB_env *env;
    MDB_dbi dbi;
    size_t maxkey;
    size_t map_size; /* as LMDB reports it after open */
    char *path;

    /* Loop thread only. */
    struct event *done_ev; /* efd readable, or activated for local */
    struct event *kick_ev; /* end of turn: wake the writer */
    struct req_list local; /* answered without the writer */
    bool kick_armed;
    bool closing;
    bool full_logged;
    int efd;

    /* The writer thread's (open's, before it starts). */
    struct journal *journal;
    MDB_txn *txn; /* marks written since the last checkpoint */
    uint64_t epoch;
    size_t puts; /* marks written since the last checkpoint */

    /* Shared: under mu. */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* go or stopping was set */
    struct req_list pending;
    bool go; /* a loop turn ended: take pending */
    struct req_list done;
    struct lmdb_log *logs;
    struct lmdb_log **logs_tail;
    bool stopping;
    struct store_lmdb_stats stats;

    /* Set once by the writer, never cleared. */
    atomic_bool failed;
};

static struct lmdb_store *
to_lmdb(struct store *s)
{
    return (struct lmdb_store *)s;
}

static void
list_push(struct req_list *l, struct lmdb_req *r)
{
    QUEUE_PUSH(l, r);
}

static void
list_splice(struct req_list *to, struct req_list *from)
{
    QUEUE_SPLICE(to, from);
}

static void
list_answer_all(struct req_list *l, enum store_result res)
{
    for (struct lmdb_req *r = l->head; r != NULL; r = r->next) {
        r->res = res;
        r->mark = 0;
    }
}

/* Writer thread: queue a log line for the loop thread. Formats even when
 * the level is off; it only happens on errors. */
static void wlog(struct lmdb_store *s, enum log_level level, const char *fmt,
                 ...) __attribute__((format(printf, 3, 4)));

static void
wlog(struct lmdb_store *s, enum log_level level, const char *fmt, ...)
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
    pthread_mutex_lock(&s->mu);
    *s->logs_tail = l;
    s->logs_tail = &l->next;
    pthread_mutex_unlock(&s->mu);
}

/* The mark stored under key in txn: 0 with *mark set (0 when absent),
 * EINVAL for a value that is not 8 bytes, or an LMDB error. */
static int
read_mark(MDB_txn *txn, MDB_dbi dbi, MDB_val *key, int64_t *mark)
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

static int
log_name_len(size_t len)
{
    return len > LMDB_LOG_NAME_MAX ? LMDB_LOG_NAME_MAX : (int)len;
}

static void
log_map_full(struct lmdb_store *s, const struct lmdb_req *r, size_t n)
{
    wlog(s, LOG_ERROR,
         "lmdb: map full (map_size=%zu): raise of %.*s refused; raise "
         "[store] map_size (%zu raises in this commit refused)",
         s->map_size, log_name_len(r->len), r->name, n);
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
    journal_restart(s->journal, s->epoch);
    pthread_mutex_lock(&s->mu);
    s->stats.checkpoints++;
    pthread_mutex_unlock(&s->mu);
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
        return EINVAL;
    }
    rc = read_mark(s->txn, s->dbi, &key, &cur);
    if (rc == 0 && token > cur) {
        rc = write_mark(s, &key, token);
        s->puts++;
    }
    return rc;
}

/* Bring LMDB up to the journal: in a new transaction, read the epoch,
 * replay that epoch's records and checkpoint. Run at open and after a
 * batch aborted the transaction. 0 with *n raises replayed, or an LMDB
 * error or errno with what failed in err. */
static int
recover(struct lmdb_store *s, size_t *n, char *err, size_t errlen)
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
    journal_drop(s->journal);
    rc = txn_open(s);
    if (rc != 0) {
        snprintf(err, errlen, "cannot begin a write transaction: %s",
                 mdb_strerror(rc));
        return rc;
    }
    rc = read_mark(s->txn, s->dbi, &key, &epoch);
    if (rc != 0) {
        snprintf(err, errlen, "cannot read the journal epoch: %s",
                 rc == EINVAL ? "not an 8-byte value" : mdb_strerror(rc));
        goto abort;
    }
    s->epoch = (uint64_t)epoch;
    rc = journal_replay(s->journal, s->epoch, replay_one, s, n);
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
    atomic_store(&s->failed, true);
    wlog(s, LOG_ERROR,
         "lmdb: %s: %s: %s: %zu raises refused; the store is failed and "
         "refuses every raise until tidemark is restarted (accepted marks "
         "are in the journal or the file)",
         s->path, what, mdb_strerror(rc), n);
}

/* Writer: one raise or get of a batch, in the open transaction. 0, or
 * an LMDB error that dooms the transaction (r is answered), or -1 when
 * the store failed. */
static int
apply_one(struct lmdb_store *s, struct lmdb_req *r, size_t n, size_t *nput)
{
    unsigned char kbuf[LMDB_DIGEST_KEY_LEN];
    MDB_val key;
    int64_t cur;
    int rc;

    lmdb_make_key(s->maxkey, r->name, r->len, kbuf, &key);
    if (!r->get && !journal_fits(s->journal, key.mv_size)) {
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
    rc = read_mark(s->txn, s->dbi, &key, &cur);
    if (rc == EINVAL) {
        wlog(s, LOG_ERROR,
             "lmdb: %s: the mark of %.*s is not an 8-byte value: %s refused",
             s->path, log_name_len(r->len), r->name, r->get ? "read" : "raise");
        r->res = STORE_ERROR;
        r->mark = 0;
        return 0;
    }
    if (rc != 0) {
        wlog(s, LOG_ERROR,
             "lmdb: %s: reading the mark of %.*s failed: %s: %zu requests "
             "refused",
             s->path, log_name_len(r->len), r->name, mdb_strerror(rc), n);
        return rc;
    }
    if (r->get || r->token <= cur) {
        /* Equal: the mark is already durable, nothing to write. */
        r->res = r->get || r->token == cur ? STORE_ACCEPTED : STORE_STALE;
        r->mark = cur;
        return 0;
    }
    rc = write_mark(s, &key, r->token);
    if (rc == MDB_MAP_FULL) {
        log_map_full(s, r, n);
        return rc;
    }
    if (rc != 0) {
        wlog(s, LOG_ERROR,
             "lmdb: %s: writing the mark of %.*s failed: %s: %zu raises "
             "refused",
             s->path, log_name_len(r->len), r->name, mdb_strerror(rc), n);
        return rc;
    }
    s->puts++;
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
run_batch(struct lmdb_store *s, struct req_list *b)
{
    char err[256];
    size_t nput = 0;
    size_t replayed;
    int rc = 0;

    if (atomic_load(&s->failed)) {
        list_answer_all(b, STORE_ERROR);
        return;
    }
    for (struct lmdb_req *r = b->head; r != NULL && rc == 0; r = r->next) {
        rc = apply_one(s, r, b->n, &nput);
    }
    if (rc != 0) {
        list_answer_all(b, STORE_ERROR);
        if (rc == -1) {
            return;
        }
        /* The transaction is doomed; what the journal holds is not. */
        rc = recover(s, &replayed, err, sizeof(err));
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
        fail_store(s, "commit failed: journal sync", rc, b->n);
        return;
    }
    if (nput == 0) {
        return;
    }
    pthread_mutex_lock(&s->mu);
    s->stats.commits++;
    pthread_mutex_unlock(&s->mu);
    if (s->puts >= CHECKPOINT_PUTS) {
        rc = checkpoint(s);
        if (rc != 0) {
            fail_store(s, "checkpoint failed", rc, 0);
        }
    }
}

/* Wake the loop thread: done_ev becomes readable. */
static void
notify_loop(struct lmdb_store *s)
{
    uint64_t one = 1;

    /* EAGAIN means the counter is saturated: the loop will wake anyway. */
    if (write(s->efd, &one, sizeof(one)) < 0) {
        return;
    }
}

/* Under mu: wait for a batch or stopping. With marks not yet in LMDB,
 * wait CHECKPOINT_IDLE_MS at most; false when that time passed idle. */
static bool
wait_for_work(struct lmdb_store *s)
{
    struct timespec until;

    if (s->puts == 0) {
        while (!(s->go && s->pending.head != NULL) && !s->stopping) {
            pthread_cond_wait(&s->cv, &s->mu);
        }
        return true;
    }
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += CHECKPOINT_IDLE_MS * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (!(s->go && s->pending.head != NULL) && !s->stopping) {
        if (pthread_cond_timedwait(&s->cv, &s->mu, &until) == ETIMEDOUT) {
            return s->go && s->pending.head != NULL;
        }
    }
    return true;
}

static void *
writer_main(void *arg)
{
    struct lmdb_store *s = arg;
    int rc;

    pthread_mutex_lock(&s->mu);
    for (;;) {
        struct req_list batch;
        bool was_empty;

        /* Raises queued in a loop turn wait for its end (go), so that
         * they share one journal write; stopping takes whatever is
         * left. */
        if (!wait_for_work(s)) {
            pthread_mutex_unlock(&s->mu);
            if (atomic_load(&s->failed)) {
                s->puts = 0; /* nothing will be committed: stop waking */
            } else if ((rc = checkpoint(s)) != 0) {
                fail_store(s, "checkpoint failed", rc, 0);
            }
            pthread_mutex_lock(&s->mu);
            continue;
        }
        if (s->pending.head == NULL) {
            break; /* stopping, and every queued raise is answered */
        }
        batch = s->pending;
        s->pending = (struct req_list){0};
        s->go = false;
        pthread_mutex_unlock(&s->mu);

        run_batch(s, &batch);

        pthread_mutex_lock(&s->mu);
        s->stats.batches++;
        s->stats.raises += batch.n;
        if (batch.n > s->stats.largest_batch) {
            s->stats.largest_batch = batch.n;
        }
        was_empty = s->done.head == NULL;
        list_splice(&s->done, &batch);
        pthread_mutex_unlock(&s->mu);
        if (was_empty) {
            notify_loop(s);
        }
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    /* Leave LMDB complete, so the next open has nothing to replay. */
    if (s->txn != NULL && !atomic_load(&s->failed) &&
        (rc = checkpoint(s)) != 0) {
        fail_store(s, "checkpoint at close failed", rc, 0);
    }
    if (s->txn != NULL) {
        mdb_txn_abort(s->txn);
        s->txn = NULL;
    }
    return NULL;
}

/* Loop thread: log what the writer queued, then run the callbacks of
 * every answered request, freeing each. Callbacks may raise or get
 * again; those are answered on a later call. */
static void
drain(struct lmdb_store *s)
{
    struct req_list todo = s->local;
    struct lmdb_log *logs;
    struct lmdb_req *r;

    s->local = (struct req_list){0};
    pthread_mutex_lock(&s->mu);
    list_splice(&todo, &s->done);
    logs = s->logs;
    s->logs = NULL;
    s->logs_tail = &s->logs;
    pthread_mutex_unlock(&s->mu);

    while (logs != NULL) {
        struct lmdb_log *next = logs->next;
        log_at(logs->level, "%s", logs->text);
        free(logs);
        logs = next;
    }
    r = todo.head;
    while (r != NULL) {
        struct lmdb_req *next = r->next;
        r->cb(r->arg, r->res, r->mark);
        free(r);
        r = next;
    }
}

static void
on_done(evutil_socket_t fd, short what, void *arg)
{
    uint64_t n;

    ssize_t got;

    (void)what;
    /* Reset the counter before taking the queue, so that a wake-up sent
     * after the take is not lost. EAGAIN: activated for local answers. */
    got = read(fd, &n, sizeof(n));
    (void)got;
    drain(arg);
}

static void
on_kick(evutil_socket_t fd, short what, void *arg)
{
    struct lmdb_store *s = arg;

    (void)fd;
    (void)what;
    s->kick_armed = false;
    pthread_mutex_lock(&s->mu);
    if (s->pending.head != NULL) {
        s->go = true;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
}

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
    r->next = NULL;
    r->cb = cb;
    r->arg = arg;
    r->get = false;
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
    list_push(&s->local, r);
    event_active(s->done_ev, EV_READ, 1);
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
    bool full = false;

    /* After a failed write the file may not hold what LMDB shows. */
    if (s->closing || atomic_load(&s->failed)) {
        answer_local(s, r, STORE_ERROR, 0);
        return;
    }
    pthread_mutex_lock(&s->mu);
    if (s->pending.n >= STORE_LMDB_QUEUE_MAX) {
        full = true;
    } else {
        list_push(&s->pending, r);
    }
    pthread_mutex_unlock(&s->mu);
    if (full) {
        if (!s->full_logged) {
            log_error("lmdb: %s: %d requests are waiting for the disk: "
                      "%s of %.*s refused, and more until the queue "
                      "drains",
                      s->path, STORE_LMDB_QUEUE_MAX, r->get ? "read" : "raise",
                      log_name_len(r->len), r->name);
            s->full_logged = true;
        }
        answer_local(s, r, STORE_ERROR, 0);
        return;
    }
    s->full_logged = false;
    /* Wake the writer once the current loop turn has run its callbacks,
     * so the raises of one turn share one journal write. */
    if (!s->kick_armed) {
        s->kick_armed = true;
        event_active(s->kick_ev, 0, 1);
    }
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

/* Gets go through the writer too: its transaction holds every accepted
 * raise, some of which LMDB has not committed yet. */
static void
lmdb_get(struct store *st, const char *res, size_t len, store_cb cb, void *arg)
{
    struct lmdb_store *s = to_lmdb(st);
    struct lmdb_req *r = req_new(res, len, 0, cb, arg);

    if (r == NULL) {
        answer_oom(s, cb, arg);
        return;
    }
    r->get = true;
    enqueue(s, r);
}

static bool
lmdb_ready(struct store *st)
{
    struct lmdb_store *s = to_lmdb(st);

    return !s->closing && !atomic_load(&s->failed);
}

/* Release what open set up; the writer must not be running. */
static void
lmdb_free(struct lmdb_store *s)
{
    if (s->done_ev != NULL) {
        event_free(s->done_ev);
    }
    if (s->kick_ev != NULL) {
        event_free(s->kick_ev);
    }
    if (s->efd >= 0) {
        close(s->efd);
    }
    if (s->txn != NULL) {
        mdb_txn_abort(s->txn);
    }
    journal_close(s->journal);
    if (s->env != NULL) {
        mdb_env_close(s->env);
    }
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->path);
    free(s);
}

/* The mutex, and a condition variable timed on CLOCK_MONOTONIC. */
static bool
sync_init(struct lmdb_store *s)
{
    pthread_condattr_t ca;
    bool ok;

    if (pthread_condattr_init(&ca) != 0) {
        return false;
    }
    ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
         pthread_cond_init(&s->cv, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (ok && pthread_mutex_init(&s->mu, NULL) != 0) {
        pthread_cond_destroy(&s->cv);
        ok = false;
    }
    return ok;
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
    if (recover(s, replayed, why, sizeof(why)) != 0) {
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
    MDB_envinfo info;
    sigset_t all, old;
    size_t replayed = 0;
    int dead = 0;
    int rc;

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
    s->base = base;
    s->efd = -1;
    s->logs_tail = &s->logs;
    atomic_init(&s->failed, false);
    if (!sync_init(s)) {
        snprintf(err, errlen, "lmdb: cannot set up a mutex");
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
    s->maxkey = (size_t)mdb_env_get_maxkeysize(s->env);
    s->map_size =
        mdb_env_info(s->env, &info) == 0 ? info.me_mapsize : (size_t)map_size;
    if (!open_journal(s, &replayed, err, errlen)) {
        goto fail;
    }

    s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->efd < 0) {
        snprintf(err, errlen, "lmdb: eventfd: %s", strerror(errno));
        goto fail;
    }
    s->done_ev = event_new(base, s->efd, EV_READ | EV_PERSIST, on_done, s);
    s->kick_ev = event_new(base, -1, 0, on_kick, s);
    if (s->done_ev == NULL || s->kick_ev == NULL ||
        event_add(s->done_ev, NULL) != 0) {
        snprintf(err, errlen, "lmdb: cannot set up events");
        goto fail;
    }

    /* Signals stay with the embedding program's threads. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&s->thread, NULL, writer_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        snprintf(err, errlen, "lmdb: cannot start the writer thread: %s",
                 strerror(rc));
        goto fail;
    }
    if (dead > 0) {
        log_info("lmdb: %s: cleared %d stale reader slots", s->path, dead);
    }
    if (replayed > 0) {
        log_info("lmdb: %s: replayed %zu raises from the journal", s->path,
                 replayed);
    }
    log_info("lmdb: %s open, map_size=%zu, max key %zu bytes", s->path,
             s->map_size, s->maxkey);
    return (struct store *)s;

fail:
    lmdb_free(s);
    return NULL;
}

static void
lmdb_close(struct store *st)
{
    struct lmdb_store *s = to_lmdb(st);

    if (s == NULL) {
        return;
    }
    /* Raises and gets made from now on, by callbacks too, are refused. */
    s->closing = true;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    /* The writer leaves only once every queued raise is answered. */
    pthread_join(s->thread, NULL);
    for (;;) {
        bool empty;

        pthread_mutex_lock(&s->mu);
        empty = s->done.head == NULL && s->logs == NULL;
        pthread_mutex_unlock(&s->mu);
        if (empty && s->local.head == NULL) {
            break;
        }
        drain(s);
    }
    lmdb_free(s);
}

void
store_lmdb_stats(struct store *st, struct store_lmdb_stats *out)
{
    struct lmdb_store *s = to_lmdb(st);

    pthread_mutex_lock(&s->mu);
    *out = s->stats;
    pthread_mutex_unlock(&s->mu);
}

const struct store_ops store_lmdb_ops = {
    .name = "lmdb",
    .open = lmdb_open,
    .raise = lmdb_raise,
    .get = lmdb_get,
    .ready = lmdb_ready,
    .close = lmdb_close,
};
