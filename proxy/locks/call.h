/* call.h: one HTTP call on the lock service, from its request to its
 * answer: who holds it (the client, a callback still to come), what its
 * query asks, and how it is answered (a lease, or a problem+json). */
#ifndef TM_LOCK_CALL_H
#define TM_LOCK_CALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "waiters.h"

struct cfg_locks;
struct cfg_tokens;
struct event;
struct event_base;
struct evhttp_connection;
struct evhttp_request;
struct evkeyvalq;
struct lock_service;
struct metrics;
struct problem;
struct recent;
struct tm_log;

/* The calls of one lock service, and what reading and answering them
 * needs; the service owns it and outlives every call it answers. */
struct lock_calls {
    struct event_base *base;
    const struct tm_log *log; /* the proxy's, entered by callbacks */
    const struct cfg_locks *cfg;
    const struct cfg_tokens *tokens; /* signs leases, checks tokens */
    struct lock_call *head;          /* every call alive */
    struct metrics *metrics;         /* calls by outcome */
    struct recent *recent;           /* the page's live leases */
};

/*
 * One HTTP call. It lives while someone holds it: the client (req, until
 * answered or gone) or a backend or the mark store (in_flight: the call
 * is the argument of a callback still to come). lock_call_finish frees
 * it once neither holds it.
 */
struct lock_call {
    struct lock_call *prev, *next; /* set->head */
    struct waiter w;               /* waiting for its name's lock */
    struct lock_calls *set;        /* NULL: the service is gone */
    struct lock_service *ls;       /* the service's own; NULL with set */
    struct evhttp_request *req;    /* NULL: answered, or client gone */
    struct evhttp_connection *conn;
    struct event *deadline; /* a waiting acquire gives up */
    struct event *peer;     /* waiting: the client hangs up */
    int64_t ttl_ms;
    int64_t wait_ms;
    int64_t fence;
    int64_t min_fence; /* acquire's floor, 0: none */
    bool refloored;    /* the floor retry was spent */
    bool in_flight;
    bool timed_out;  /* the deadline passed in flight */
    char holder[64]; /* the client's address and port ("-": unknown) */
    size_t len;
    char name[]; /* len bytes and a NUL */
};

/* A call on name (len bytes, canonical) for req, in set, held by its
 * client until answered. NULL when out of memory. */
struct lock_call *lock_call_new(struct lock_calls *set, struct lock_service *ls,
                                struct evhttp_request *req, const char *name,
                                size_t len) __attribute__((warn_unused_result));

/* The client will not be answered any more. */
void lock_call_detach(struct lock_call *c);

/* Free c unless its client (req) or a callback (in_flight) still holds
 * it; a waiting call leaves its queue, and the next waiter's turn comes
 * when c was the head. */
void lock_call_finish(struct lock_call *c);

/* Watch a waiting call's client for a hang-up; best effort. */
void lock_call_watch_peer(struct lock_call *c);

/* ---- answers: each answers c's client once (nothing when it is gone)
 * and detaches it; the caller then calls lock_call_finish. */

/* p about c's lock (p->resource is set to its name), logged. */
void lock_call_problem(struct lock_call *c, struct problem *p);

/* status with detail (NULL: the status's own). */
void lock_call_refuse(struct lock_call *c, int status, const char *detail);

/* 409: the lease is gone or another's. */
void lock_call_lost(struct lock_call *c);

/* The info line of a lease's life: "locks: WHAT: name= holder= fence=
 * ttl_ms=", the outside values escaped (logesc). */
void lock_log_lease(const char *what, const char *name, size_t len,
                    const char *holder, int64_t fence, int64_t ttl_ms);

/* 503: the lock backend cannot be used. */
void lock_call_down(struct lock_call *c);

/* 423: another holder's lease is live; fence > 0 adds its fence and
 * ttl_ms and a Retry-After. why NULL: the status's own detail. */
void lock_call_busy(struct lock_call *c, int64_t fence, int64_t ttl_ms,
                    const char *why);

/* 200 or 201 with {"name","token","fence","ttl_ms"} for c->fence (the
 * token signed with [tokens] key when set). false when the answer could
 * not be made (the client got a 500 or 503 instead). */
bool lock_call_lease(struct lock_call *c, int code, int64_t ttl_ms);

/* 200 with {"name","fence","ttl_ms","mark","below_mark"}: who holds the
 * lock, no token; mark is the resource's (mark < 0: it could not be read,
 * both null), below_mark whether the fence is below it: the holder's
 * writes are refused. */
void lock_call_status(struct lock_call *c, int64_t fence, int64_t ttl_ms,
                      int64_t mark);

/* 204: released. */
void lock_call_no_content(struct lock_call *c);

/* ---- the query: each sets c's field, or answers 400 (403 for a token
 * signed for something else) and returns false. */

/* ttl_ms, required: 1 to [locks] max_ttl_ms. */
bool lock_call_ttl(struct lock_call *c, const struct evkeyvalq *q);

/* wait_ms, optional (0): 0 to [locks] max_wait_ms. */
bool lock_call_wait(struct lock_call *c, const struct evkeyvalq *q);

/* token, required: the fence of a token the acquire returned (with a
 * key, only one signed for c's name). */
bool lock_call_token(struct lock_call *c, const struct evkeyvalq *q);

#endif
