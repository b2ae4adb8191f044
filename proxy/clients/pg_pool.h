/* pg_pool.h: a small pool of libpq async connections on the loop, shared
 * by the Postgres mark store and the Postgres lock backend: connect with
 * backoff, a setup query and prepared statements per connection, one
 * query in flight per connection with a deadline. */
#ifndef TM_PG_POOL_H
#define TM_PG_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include <libpq-fe.h>

struct event_base;
struct pg_pool;

enum pg_take {
    PG_TAKE_NONE = 0, /* nothing to send */
    PG_TAKE_SENT,     /* one query was sent on the connection */
    PG_TAKE_FAILED,   /* sending failed: the connection is dropped */
};

/* What the pool's owner does; every call is on the loop thread. conn is
 * the connection's number, 0 to npool - 1: the owner keeps what each
 * connection has in flight, indexed by it. */
struct pg_pool_ops {
    /* conn is idle: send one query on pg (PQsendQueryPrepared), or
     * nothing. Whatever it returns, the owner now owns what it took. */
    enum pg_take (*take)(void *owner, int conn, PGconn *pg);
    /* The query in flight on conn ended: res is its first result (NULL:
     * none), freed by the pool after this returns. */
    void (*done)(void *owner, int conn, PGresult *res);
    /* conn was dropped: answer what it had in flight with an error. */
    void (*failed)(void *owner, int conn);
    /* Every connection is down: answer what waits for one. */
    void (*all_down)(void *owner);
};

struct pg_pool_stmt {
    const char *name;
    const char *sql;
    int nparams;
    const Oid *types;
};

/* Whether dsn is set and a libpq connection string (or URI), before
 * pg_pool_new. false with a message in err that starts with who ("locks:
 * [locks]", "postgres: [store]") and never repeats libpq's, which may
 * quote a password. */
bool pg_pool_dsn_ok(const char *dsn, const char *who, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Open npool connections to dsn (libpq string or URI, already checked)
 * on base and keep them open. setup: run at each connect (several
 * statements allowed; a row returned means synchronous_commit was off,
 * and is logged); then stmts are prepared. what ("marks", "leases")
 * names the pool in log lines. Strings and stmts are static storage.
 * Unreachable now is not an error. NULL with err when out of memory. */
struct pg_pool *pg_pool_new(struct event_base *base, const char *dsn,
                            const char *what, int npool, int timeout_ms,
                            const char *setup, const struct pg_pool_stmt *stmts,
                            size_t nstmts, const struct pg_pool_ops *ops,
                            void *owner, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* The calls that wait for the pool's first connection (coldq.h). */
struct coldq *pg_pool_coldq(struct pg_pool *p);

/* Some connection is up (set up and prepared). */
bool pg_pool_any_up(const struct pg_pool *p);

/* Offer work to the idle connections now (take until it says none). */
void pg_pool_dispatch(struct pg_pool *p);

/* Offer work at the end of this loop turn (pg_pool_dispatch then), once
 * however often it is called in the turn: what the owner queues in one
 * turn can share a statement and a commit. */
void pg_pool_dispatch_soon(struct pg_pool *p);

/* Drop every connection (failed runs for those with work in flight) and
 * free. NULL is fine. */
void pg_pool_free(struct pg_pool *p);

#endif
