/* store_postgres.c: marks in a Postgres table on the shared connection
 * pool (pg_pool.c: libpq async on the proxy's loop, reconnect with
 * backoff): the raises of a loop turn in one upsert (one round trip, one
 * commit). */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <libpq-fe.h>
#include <openssl/sha.h>

#include "../../conf/cfg.h"
#include "../../policies/ascii.h"
#include "../clients/coldq.h"
#include "../clients/defer.h"
#include "../clients/pg_pool.h"
#include "../clients/queue.h"
#include "../log.h"
#include "batch.h"
#include "store.h"
#include "store_postgres_reply.h"

/*
 * The table: tidemark_marks (resource text PRIMARY KEY, fence bigint NOT
 * NULL), created if absent at each connect.
 *
 * One batch is one statement: the distinct resources of the batch, sorted
 * by their bytes, each with the highest token the batch has for it:
 *
 *   INSERT ... SELECT FROM unnest($1::text[], $2::bigint[]) ... ORDER BY
 *   ON CONFLICT (resource) DO UPDATE SET fence = GREATEST(m.fence,
 *   EXCLUDED.fence) RETURNING resource, fence
 *
 * ON CONFLICT DO UPDATE works on the latest committed row and locks it,
 * so under READ COMMITTED the returned fence is max(mark, highest token)
 * whatever runs concurrently; and every statement locks its rows in one
 * byte order, so two batches (or two sidecars) cannot deadlock. Each raise
 * of the batch is then answered from the returned fence F
 * (store_postgres_reply.c): accepted when its token equals F, stale with F
 * otherwise (F is never below a token).
 * That is the answer of one serial order of the batch's raises, all of
 * which were in flight together: the highest token first, the rest after
 * it. Accepted means committed: autocommit, and synchronous_commit is set
 * back to on for the session when the server's default is off.
 *
 * Names the table cannot hold as text (a NUL byte, invalid UTF-8) are
 * stored as "\x01sha256:" and the hex SHA-256 of the name; valid names
 * never start with \x01 in practice, and the prefix keeps them apart.
 */

#define PG_BATCH_MAX 512
#define PG_QUEUE_MAX 65536
#define PG_DIGEST_PREFIX "\x01sha256:"
#define PG_DIGEST_PREFIX_LEN 8
#define PG_DIGEST_KEY_LEN (PG_DIGEST_PREFIX_LEN + 2 * SHA256_DIGEST_LENGTH)
#define OID_TEXT 25
#define OID_INT8 20
#define OID_TEXT_ARRAY 1009
#define OID_INT8_ARRAY 1016

#define PG_SETUP_SQL                                                           \
    "SELECT set_config('synchronous_commit', 'on', false) "                    \
    "WHERE current_setting('synchronous_commit') = 'off';"                     \
    "CREATE TABLE IF NOT EXISTS tidemark_marks ("                              \
    "resource text PRIMARY KEY, fence bigint NOT NULL)"

#define PG_RAISE_SQL                                                           \
    "INSERT INTO tidemark_marks AS m (resource, fence) "                       \
    "SELECT r, t FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY "       \
    "AS x(r, t, i) ORDER BY i "                                                \
    "ON CONFLICT (resource) DO UPDATE "                                        \
    "SET fence = GREATEST(m.fence, EXCLUDED.fence) "                           \
    "RETURNING resource, fence"

#define PG_GET_SQL "SELECT fence FROM tidemark_marks WHERE resource = $1"
#define PG_RAISE_STMT "tidemark_raise"
#define PG_GET_STMT "tidemark_get"

struct pg_store {
    struct event_base *base;
    int npool;
    struct pg_pool *pool;
    struct batch_list *batches; /* in flight, by connection */
    struct batch_list pending;
    struct defer *defer;
    bool closing;
    bool full_logged;
    /* Scratch for one batch's parameters. */
    char *buf;
    size_t bufcap;
    struct batch_req **sorted;
};

static struct pg_store *
to_pg(struct store *s)
{
    return (struct pg_store *)s;
}

/* A name is stored verbatim when it is valid UTF-8 without NUL bytes. */
static bool
text_ok(const unsigned char *p, size_t n)
{
    size_t i = 0;

    while (i < n) {
        unsigned char c = p[i];
        size_t k;
        uint32_t cp;

        if (c == 0) {
            return false;
        }
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf) {
            k = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            k = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            k = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (i + k >= n) {
            return false;
        }
        for (size_t j = 1; j <= k; j++) {
            if ((p[i + j] & 0xc0) != 0x80) {
                return false;
            }
            cp = (cp << 6) | (p[i + j] & 0x3f);
        }
        if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
            return false;
        }
        i += k + 1;
    }
    return true;
}

/* A call for res: its key is res itself when the table can hold it as
 * text, else the digest form. NULL when out of memory. */
static struct batch_req *
req_new(const char *res, size_t len, int64_t token, bool is_get, store_cb cb,
        void *arg)
{
    char key[PG_DIGEST_KEY_LEN];
    unsigned char d[SHA256_DIGEST_LENGTH];

    if (text_ok((const unsigned char *)res, len)) {
        return batch_req_new(res, len, NULL, 0, token, is_get, cb, arg);
    }
    SHA256((const unsigned char *)res, len, d);
    memcpy(key, PG_DIGEST_PREFIX, PG_DIGEST_PREFIX_LEN);
    ascii_hex(d, sizeof(d), key + PG_DIGEST_PREFIX_LEN);
    return batch_req_new(res, len, key, sizeof(key), token, is_get, cb, arg);
}

/* ---- batches --------------------------------------------------------- */

static bool
buf_reserve(struct pg_store *s, size_t n)
{
    char *nb;

    if (n <= s->bufcap) {
        return true;
    }
    nb = realloc(s->buf, n);
    if (nb == NULL) {
        return false;
    }
    s->buf = nb;
    s->bufcap = n;
    return true;
}

static char *
put32(char *p, uint32_t v)
{
    p[0] = (char)(v >> 24);
    p[1] = (char)(v >> 16);
    p[2] = (char)(v >> 8);
    p[3] = (char)v;
    return p + 4;
}

static char *
array_head(char *p, uint32_t elem_oid, uint32_t n)
{
    p = put32(p, 1); /* dimensions */
    p = put32(p, 0); /* no NULLs */
    p = put32(p, elem_oid);
    p = put32(p, n);
    return put32(p, 1); /* lower bound */
}

/* Send the raises of batch as one upsert: its distinct keys in byte
 * order, each with its highest token. */
static bool
send_raises(struct pg_store *s, struct batch_list *batch, PGconn *pg)
{
    size_t n = batch->n, uniq, tbytes = 20, ibytes;
    const char *values[2];
    int lengths[2];
    const int formats[2] = {1, 1};
    char *p, *ints;
    int64_t top;

    uniq = batch_sort(batch, s->sorted);
    for (struct batch_req *r = batch->head; r != NULL;
         r = batch_group(r, &top)) {
        tbytes += 4 + r->klen;
    }
    ibytes = 20 + uniq * 12;
    if (!buf_reserve(s, tbytes + ibytes)) {
        log_error("postgres: out of memory: %zu raises refused", n);
        return false;
    }
    p = array_head(s->buf, OID_TEXT, (uint32_t)uniq);
    ints = array_head(s->buf + tbytes, OID_INT8, (uint32_t)uniq);
    for (struct batch_req *first = batch->head, *end; first != NULL;
         first = end) {
        end = batch_group(first, &top);
        p = put32(p, (uint32_t)first->klen);
        memcpy(p, first->key, first->klen);
        p += first->klen;
        ints = put32(ints, 8);
        ints = put32(ints, (uint32_t)((uint64_t)top >> 32));
        ints = put32(ints, (uint32_t)top);
    }
    values[0] = s->buf;
    lengths[0] = (int)tbytes;
    values[1] = s->buf + tbytes;
    lengths[1] = (int)ibytes;
    return PQsendQueryPrepared(pg, PG_RAISE_STMT, 2, values, lengths, formats,
                               0) == 1;
}

static bool
send_get(struct batch_list *batch, PGconn *pg)
{
    struct batch_req *r = batch->head;
    const char *values[1] = {r->key};
    int lengths[1] = {(int)r->klen};
    const int formats[1] = {1};

    return PQsendQueryPrepared(pg, PG_GET_STMT, 1, values, lengths, formats,
                               0) == 1;
}

/* The pool offers idle connection conn: a get alone, or up to
 * PG_BATCH_MAX raises. */
static enum pg_take
pool_take(void *owner, int conn, PGconn *pg)
{
    struct pg_store *s = owner;
    struct batch_list *batch = &s->batches[conn];
    bool ok;

    if (batch_take(&s->pending, batch, PG_BATCH_MAX, SIZE_MAX) == 0) {
        return PG_TAKE_NONE;
    }
    ok = batch->head->is_get ? send_get(batch, pg) : send_raises(s, batch, pg);
    return ok ? PG_TAKE_SENT : PG_TAKE_FAILED;
}

/* The query of conn's batch ended; res NULL: no result (refused). */
static void
pool_done(void *owner, int conn, PGresult *res)
{
    struct pg_store *s = owner;
    struct batch_list done = s->batches[conn];

    s->batches[conn] = (struct batch_list){0};
    if (res != NULL && done.head != NULL && done.head->is_get) {
        pg_marks_answer_get(done.head, res);
    } else if (res != NULL) {
        pg_marks_answer_raises(&done, res);
    }
    batch_answer(&done);
}

static void
pool_failed(void *owner, int conn)
{
    struct pg_store *s = owner;

    batch_fail(&s->batches[conn]);
}

static void
pool_all_down(void *owner)
{
    struct pg_store *s = owner;

    batch_fail(&s->pending);
}

static const struct pg_pool_ops pool_ops = {
    .take = pool_take,
    .done = pool_done,
    .failed = pool_failed,
    .all_down = pool_all_down,
};

extern const struct store_ops store_postgres_ops;

static void
enqueue(struct pg_store *s, const char *res, size_t len, int64_t token,
        bool is_get, store_cb cb, void *arg)
{
    struct batch_req *r;

    if (!s->closing && !pg_pool_any_up(s->pool) &&
        store_park(pg_pool_coldq(s->pool), (struct store *)s,
                   &store_postgres_ops, is_get, res, len, token, cb, arg)) {
        return; /* the first connection is being made */
    }
    if (s->closing || !pg_pool_any_up(s->pool)) {
        store_defer(s->defer, cb, arg, STORE_ERROR, 0);
        return;
    }
    if (!queue_admit(s->pending.n, PG_QUEUE_MAX, &s->full_logged, "postgres",
                     "requests are waiting for a connection")) {
        store_defer(s->defer, cb, arg, STORE_ERROR, 0);
        return;
    }
    r = req_new(res, len, token, is_get, cb, arg);
    if (r == NULL) {
        store_defer(s->defer, cb, arg, STORE_ERROR, 0);
        return;
    }
    QUEUE_PUSH(&s->pending, r);
    /* Dispatch at the end of the loop turn, so that the raises of one
     * turn share a statement and a commit. */
    pg_pool_dispatch_soon(s->pool);
}

static void
pg_raise(struct store *st, const char *res, size_t len, int64_t token,
         store_cb cb, void *arg)
{
    enqueue(to_pg(st), res, len, token, false, cb, arg);
}

static void
pg_get(struct store *st, const char *res, size_t len, store_cb cb, void *arg)
{
    enqueue(to_pg(st), res, len, 0, true, cb, arg);
}

static bool
pg_ready(struct store *st)
{
    struct pg_store *s = to_pg(st);

    return !s->closing && pg_pool_any_up(s->pool);
}

/* ---- life cycle ------------------------------------------------------ */

static const Oid raise_types[2] = {OID_TEXT_ARRAY, OID_INT8_ARRAY};
static const Oid get_types[1] = {OID_TEXT};
static const struct pg_pool_stmt pg_stmts[] = {
    {PG_RAISE_STMT, PG_RAISE_SQL, 2, raise_types},
    {PG_GET_STMT, PG_GET_SQL, 1, get_types},
};

static void
pg_free(struct pg_store *s)
{
    /* Answers every batch in flight. */
    pg_pool_free(s->pool);
    s->pool = NULL;
    batch_fail(&s->pending);
    defer_free(s->defer);
    free(s->batches);
    free(s->sorted);
    free(s->buf);
    free(s);
}

static struct store *
pg_open(struct event_base *base, const struct cfg_store *cfg, char *err,
        size_t errlen)
{
    struct pg_store *s;

    if (!pg_pool_dsn_ok(cfg->dsn, "postgres: [store]", err, errlen)) {
        return NULL;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "postgres: out of memory");
        return NULL;
    }
    s->base = base;
    s->npool = cfg->pool_size > 0 ? cfg->pool_size : 2;
    s->batches = calloc((size_t)s->npool, sizeof(*s->batches));
    s->sorted = calloc(PG_BATCH_MAX, sizeof(*s->sorted));
    s->defer = defer_new(base);
    if (s->batches == NULL || s->sorted == NULL || s->defer == NULL) {
        snprintf(err, errlen, "postgres: out of memory");
        pg_free(s);
        return NULL;
    }
    s->pool = pg_pool_new(base, cfg->dsn, "marks", s->npool, cfg->timeout_ms,
                          PG_SETUP_SQL, pg_stmts,
                          sizeof(pg_stmts) / sizeof(pg_stmts[0]), &pool_ops, s,
                          err, errlen);
    if (s->pool == NULL) {
        pg_free(s);
        return NULL;
    }
    log_info("postgres: %d connections, batches of up to %d raises", s->npool,
             PG_BATCH_MAX);
    return (struct store *)s;
}

static void
pg_close(struct store *st)
{
    struct pg_store *s = to_pg(st);

    if (s == NULL) {
        return;
    }
    s->closing = true;
    pg_free(s);
}

const struct store_ops store_postgres_ops = {
    .name = "postgres",
    .shared = true,
    .open = pg_open,
    .raise = pg_raise,
    .get = pg_get,
    .ready = pg_ready,
    .close = pg_close,
};
