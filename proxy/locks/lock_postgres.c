/* lock_postgres.c: leases as the seed's lease rows in Postgres, one
 * statement per operation on the connection pool the Postgres mark store
 * uses (../clients/pg_pool.c); the database's clock decides expiry. */
#include "lock.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <libpq-fe.h>

#include "../../conf/cfg.h"
#include "../clients/coldq.h"
#include "../clients/defer.h"
#include "../clients/pg_pool.h"
#include "../clients/queue.h"
#include "../log.h"
#include "lock_postgres_reply.h"

/*
 * The table: the seed's lease row, tidemark_leases (name text PRIMARY
 * KEY, owner text, fence bigint, expires_at timestamptz), created if
 * absent at each connect. A row is never deleted: release sets
 * expires_at to -infinity and keeps fence, so the next acquire's fence
 * (fence + 1, in the same statement that takes the row) is still higher;
 * a fence is never handed out twice, across release, expiry and
 * restarts.
 *
 * One clock: every expiry test and every new expiry uses now() on the
 * server, so tidemark's clock (or many sidecars' clocks) does not
 * matter. A lease is live while expires_at > now(); acquire takes a row
 * whose expires_at <= now() (the seed writes <; <= keeps "not live" and
 * "takeable" the same set). Durable: autocommit with synchronous_commit
 * on (the setup turns it on when the server's default is off).
 *
 * owner is this process (host:pid), for people reading the table; the
 * fence alone decides who holds the lease.
 */

#define PL_QUEUE_MAX 65536

#define PL_SETUP_SQL                                                           \
    "SELECT set_config('synchronous_commit', 'on', false) "                    \
    "WHERE current_setting('synchronous_commit') = 'off';"                     \
    "CREATE TABLE IF NOT EXISTS tidemark_leases ("                             \
    "name text PRIMARY KEY, owner text NOT NULL, fence bigint NOT NULL, "      \
    "expires_at timestamptz NOT NULL)"

/* The time left on a row, in ms (0 when not live; -infinity minus now()
 * is out of range for an interval, hence the CASE). */
#define PL_LEFT                                                                \
    "CASE WHEN expires_at > now() THEN GREATEST(1, ceil(extract(epoch "        \
    "FROM expires_at - now()) * 1000))::int8 ELSE 0 END"

/* $1 name, $2 owner, $3 ttl ms, $4 floor (0: none). Taken: (1, fence,
 * ttl). Busy: (0, holder's fence, time left), or no row when the
 * holder committed after this statement's snapshot. */
#define PL_ACQUIRE_SQL                                                         \
    "WITH t AS (INSERT INTO tidemark_leases AS l "                             \
    "(name, owner, fence, expires_at) "                                        \
    "VALUES ($1, $2, GREATEST(1, $4::int8), "                                  \
    "now() + $3::int8 * interval '1 millisecond') "                            \
    "ON CONFLICT (name) DO UPDATE "                                            \
    "SET owner = EXCLUDED.owner, fence = GREATEST(l.fence + 1, $4::int8), "    \
    "expires_at = EXCLUDED.expires_at "                                        \
    "WHERE l.expires_at <= now() "                                             \
    "RETURNING fence) "                                                        \
    "SELECT 1, fence, $3::int8 FROM t "                                        \
    "UNION ALL "                                                               \
    "SELECT 0, fence, " PL_LEFT " FROM tidemark_leases "                       \
    "WHERE name = $1 AND NOT EXISTS (SELECT 1 FROM t)"

/* $1 name, $2 fence. One row changed: released. */
#define PL_RELEASE_SQL                                                         \
    "UPDATE tidemark_leases SET expires_at = '-infinity' "                     \
    "WHERE name = $1 AND fence = $2::int8 AND expires_at > now()"

/* $1 name, $2 fence, $3 ttl ms. One row changed: extended. */
#define PL_EXTEND_SQL                                                          \
    "UPDATE tidemark_leases "                                                  \
    "SET expires_at = now() + $3::int8 * interval '1 millisecond' "            \
    "WHERE name = $1 AND fence = $2::int8 AND expires_at > now()"

/* $1 name: (fence, time left), or no row. */
#define PL_GET_SQL                                                             \
    "SELECT fence, " PL_LEFT " FROM tidemark_leases WHERE name = $1"

static const char *const pl_stmt_names[] = {
    "tidemark_lease_acquire", "tidemark_lease_release", "tidemark_lease_extend",
    "tidemark_lease_get"};

static const struct pg_pool_stmt pl_stmts[] = {
    {"tidemark_lease_acquire", PL_ACQUIRE_SQL, 4, NULL},
    {"tidemark_lease_release", PL_RELEASE_SQL, 2, NULL},
    {"tidemark_lease_extend", PL_EXTEND_SQL, 3, NULL},
    {"tidemark_lease_get", PL_GET_SQL, 1, NULL},
};

struct pl_req {
    struct pl_req *next;
    enum pl_op op;
    lock_cb cb;
    void *arg;
    int64_t fence;  /* extend, release: the caller's */
    int64_t ttl_ms; /* acquire, extend */
    int64_t floor;  /* acquire: the lowest fence, 0: none */
    enum lock_result res;
    int64_t out_fence;
    int64_t out_ttl;
    size_t len;
    char name[]; /* len bytes and a NUL */
};

struct pl_list {
    QUEUE_FIELDS(struct pl_req);
};

struct pg_locks {
    struct event_base *base;
    struct pg_pool *pool;
    int npool;
    struct pl_req **inflight; /* by connection */
    struct pl_list pending;
    struct defer *defer; /* answers given without the server */
    bool closing;
    bool full_logged;
    char owner[128];
};

static struct pg_locks *
to_locks(struct lock_backend *b)
{
    return (struct pg_locks *)b;
}

static void
list_push(struct pl_list *l, struct pl_req *r)
{
    QUEUE_PUSH(l, r);
}

static struct pl_req *
list_pop(struct pl_list *l)
{
    struct pl_req *r;

    QUEUE_POP(l, r);
    return r;
}

static void
req_answer(struct pl_req *r)
{
    r->cb(r->arg, r->res, r->out_fence, r->out_ttl);
    free(r);
}

/* ---- the pool's side ------------------------------------------------- */

static enum pg_take
pool_take(void *owner, int conn, PGconn *pg)
{
    struct pg_locks *s = owner;
    struct pl_req *r = list_pop(&s->pending);
    char a[3][24];
    const char *values[4];
    int n = 0;

    if (r == NULL) {
        return PG_TAKE_NONE;
    }
    s->inflight[conn] = r;
    values[n++] = r->name;
    switch (r->op) {
    case PL_ACQUIRE:
        values[n++] = s->owner;
        snprintf(a[0], sizeof(a[0]), "%" PRId64, r->ttl_ms);
        snprintf(a[1], sizeof(a[1]), "%" PRId64, r->floor);
        values[n++] = a[0];
        values[n++] = a[1];
        break;
    case PL_RELEASE:
    case PL_EXTEND:
        snprintf(a[0], sizeof(a[0]), "%" PRId64, r->fence);
        values[n++] = a[0];
        if (r->op == PL_EXTEND) {
            snprintf(a[1], sizeof(a[1]), "%" PRId64, r->ttl_ms);
            values[n++] = a[1];
        }
        break;
    case PL_GET:
        break;
    }
    return PQsendQueryPrepared(pg, pl_stmt_names[r->op], n, values, NULL, NULL,
                               0) == 1
               ? PG_TAKE_SENT
               : PG_TAKE_FAILED;
}

static void
pool_done(void *owner, int conn, PGresult *res)
{
    struct pg_locks *s = owner;
    struct pl_req *r = s->inflight[conn];
    struct pl_answer a;

    s->inflight[conn] = NULL;
    if (r == NULL) {
        return;
    }
    if (res == NULL || !pl_answer_read(r->op, res, r->fence, r->ttl_ms, &a)) {
        log_error("locks: postgres: %s: %s", LOG_ESC(r->name, r->len),
                  res != NULL && PQresultStatus(res) == PGRES_FATAL_ERROR
                      ? LOG_STR(PQresultErrorMessage(res))
                      : "an answer that does not fit: refused");
        a = (struct pl_answer){LOCK_ERROR, 0, 0};
    }
    r->res = a.res;
    r->out_fence = a.fence;
    r->out_ttl = a.ttl_ms;
    req_answer(r);
}

static void
pool_failed(void *owner, int conn)
{
    struct pg_locks *s = owner;
    struct pl_req *r = s->inflight[conn];

    s->inflight[conn] = NULL;
    if (r != NULL) {
        r->res = LOCK_ERROR;
        r->out_fence = 0;
        r->out_ttl = 0;
        req_answer(r);
    }
}

static void
pool_all_down(void *owner)
{
    struct pg_locks *s = owner;
    struct pl_req *r;

    while ((r = list_pop(&s->pending)) != NULL) {
        r->res = LOCK_ERROR;
        r->out_fence = 0;
        r->out_ttl = 0;
        req_answer(r);
    }
}

static const struct pg_pool_ops pool_ops = {
    .take = pool_take,
    .done = pool_done,
    .failed = pool_failed,
    .all_down = pool_all_down,
};

/* ---- operations ------------------------------------------------------ */

extern const struct lock_ops lock_postgres_ops;

static void
pl_submit(struct lock_backend *b, const struct lock_op *op)
{
    struct pg_locks *s = to_locks(b);
    size_t len = op->len;
    struct pl_req *r;
    enum pl_op pop = PL_GET;

    switch (op->kind) {
    case LOCK_OP_ACQUIRE:
        pop = PL_ACQUIRE;
        break;
    case LOCK_OP_EXTEND:
        pop = PL_EXTEND;
        break;
    case LOCK_OP_RELEASE:
        pop = PL_RELEASE;
        break;
    case LOCK_OP_STATUS:
        pop = PL_GET;
        break;
    }
    if (len > 0 && !s->closing && !pg_pool_any_up(s->pool) &&
        lock_park(pg_pool_coldq(s->pool), b, &lock_postgres_ops, op)) {
        return; /* the first connection is being made */
    }
    if (len == 0 || len > 65536 || s->closing || !pg_pool_any_up(s->pool)) {
        lock_defer(s->defer, op->cb, op->arg, LOCK_ERROR);
        return;
    }
    if (!queue_admit(s->pending.n, PL_QUEUE_MAX, &s->full_logged,
                     "locks: postgres",
                     "operations are waiting for a connection")) {
        lock_defer(s->defer, op->cb, op->arg, LOCK_ERROR);
        return;
    }
    r = malloc(sizeof(*r) + len + 1);
    if (r == NULL) {
        lock_defer(s->defer, op->cb, op->arg, LOCK_ERROR);
        return;
    }
    *r = (struct pl_req){.op = pop,
                         .cb = op->cb,
                         .arg = op->arg,
                         .fence = op->fence,
                         .ttl_ms = op->ttl_ms,
                         .floor = op->min_fence > 0 ? op->min_fence : 0,
                         .res = LOCK_ERROR,
                         .len = len};
    memcpy(r->name, op->name, len);
    r->name[len] = '\0';
    list_push(&s->pending, r);
    pg_pool_dispatch_soon(s->pool);
}

static bool
pl_ready(struct lock_backend *b)
{
    struct pg_locks *s = to_locks(b);

    return !s->closing && pg_pool_any_up(s->pool);
}

/* ---- life cycle ------------------------------------------------------ */

static void
locks_free(struct pg_locks *s)
{
    /* Answers what is in flight, then what waits. */
    pg_pool_free(s->pool);
    s->pool = NULL;
    pool_all_down(s);
    defer_free(s->defer);
    free(s->inflight);
    free(s);
}

static struct lock_backend *
pl_open(struct event_base *base, const struct cfg_locks *cfg, char *err,
        size_t errlen)
{
    struct pg_locks *s;
    char host[64];

    if (!pg_pool_dsn_ok(cfg->dsn, "locks: [locks]", err, errlen)) {
        return NULL;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "locks: out of memory");
        return NULL;
    }
    s->base = base;
    s->npool = cfg->pool_size > 0 ? cfg->pool_size : 2;
    if (gethostname(host, sizeof(host)) != 0) {
        snprintf(host, sizeof(host), "unknown");
    }
    host[sizeof(host) - 1] = '\0';
    snprintf(s->owner, sizeof(s->owner), "tidemark@%s:%ld", host,
             (long)getpid());
    s->inflight = calloc((size_t)s->npool, sizeof(*s->inflight));
    s->defer = defer_new(base);
    if (s->inflight == NULL || s->defer == NULL) {
        snprintf(err, errlen, "locks: out of memory");
        locks_free(s);
        return NULL;
    }
    s->pool = pg_pool_new(base, cfg->dsn, "leases", s->npool, cfg->timeout_ms,
                          PL_SETUP_SQL, pl_stmts,
                          sizeof(pl_stmts) / sizeof(pl_stmts[0]), &pool_ops, s,
                          err, errlen);
    if (s->pool == NULL) {
        locks_free(s);
        return NULL;
    }
    log_info("locks: postgres, %d connections", s->npool);
    return (struct lock_backend *)s;
}

static void
pl_close(struct lock_backend *b)
{
    struct pg_locks *s = to_locks(b);

    if (s == NULL) {
        return;
    }
    s->closing = true;
    locks_free(s);
}

const struct lock_ops lock_postgres_ops = {
    .name = "postgres",
    .open = pl_open,
    .submit = pl_submit,
    .ready = pl_ready,
    .close = pl_close,
};
