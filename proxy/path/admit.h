/* admit.h: whether a request goes to its upstream, and when: the
 * request checks (policies/screen.h), the token and the decision table,
 * the store's raise of the mark, and the resource's turn in the
 * ordering gate. One stage of a client connection: it answers its own
 * refusals and reports once, through done, how the request came out. */
#ifndef TM_ADMIT_H
#define TM_ADMIT_H

#include <stdbool.h>

#include "../../policies/decide.h"
#include "../metrics.h"

struct path_view;
struct carrier;
struct cio;
struct event;
struct fence_call;
struct order_slot;
struct request;
struct batch;
struct problem;

enum admit_end {
    ADMIT_GO = 0,  /* forward it to rq->pool (its order slots held) */
    ADMIT_REFUSED, /* answered locally on the client's output */
};

typedef void (*admit_done_cb)(void *arg, enum admit_end end);

/* What a request asks of the store, in this order (admit.c). A mark's
 * raise takes the subtree marks above it along (its step << 2). */
enum {
    ADMIT_STEP_SCOPE = 1u << 0,     /* a carried token: the scope mark */
    ADMIT_STEP_RES_BELOW = 1u << 1, /* the resource's subtree mark: a check */
    ADMIT_STEP_SRC_BELOW = 1u << 2, /* src's subtree mark: a check */
    ADMIT_STEP_RES = 1u << 3,       /* the resource's mark */
    ADMIT_STEP_SRC = 1u << 4,       /* src's mark */
    ADMIT_STEP_RES_ABOVE = 1u << 5, /* the subtree marks above the resource */
    ADMIT_STEP_SRC_ABOVE = 1u << 6, /* the subtree marks above src */
};

struct admit {
    struct path_view *px;
    struct cio *io; /* the client's: answers, the store timeout */
    struct request *rq;
    struct event *kick; /* deferred: the resource's turn came */
    struct fence_call *raise;
    struct order_slot *slot;     /* rq->sc.resource's turn */
    struct order_slot *src_slot; /* rq->sc.src's turn */
    /* A request on a collection takes a turn on its subtree mark too
     * (and a MOVE's on its source's); a write waits, without a turn,
     * for such requests with lower tokens on the collections above it,
     * one at a time: the one at above_len bytes of the resource, or of
     * src once above_src. */
    struct order_slot *below_slot;
    struct order_slot *src_below_slot;
    struct order_slot *above_slot;
    size_t above_len;
    bool above_src;
    bool above_done;         /* above_slot's turn came: leave it, go on */
    int order_wait;          /* slots still queued */
    bool waiting;            /* for its turn */
    unsigned todo;           /* ADMIT_STEP_* the store must still do */
    unsigned step;           /* the one it is doing */
    enum token_status ts;    /* the token's, for a refusal's detail */
    struct carrier *carrier; /* a bound route's (lease = NAME), or NULL */
    struct batch *batch;     /* an S3 multi-object delete's keys */
    bool body_wait;          /* for such a delete's whole body */
    int64_t carried;         /* the carrier's fence sent as the token */
    admit_done_cb done;
    void *arg;
};

/* Set a up for a connection; false when out of memory. */
bool admit_init(struct admit *a, struct path_view *px, struct cio *io,
                admit_done_cb done, void *arg);
/* The connection closes: forget a raise in flight, leave the order
 * slots (grace_ms: as admit_leave), free what init took. */
void admit_fini(struct admit *a, int grace_ms);

/* Screen rq (its head parsed, rq->gen held), decide on its token, ask
 * the store when the decision needs it, wait for the resource's turn.
 * done runs exactly once: maybe before this returns, maybe later from
 * the loop. */
void admit_start(struct admit *a, struct request *rq);

/* The store did not answer within store.timeout_ms (the client's timer
 * ran out while a raise was in flight), or the body of an S3
 * multi-object delete did not come within idle_timeout_ms. */
void admit_timeout(struct admit *a);

/* More of the client's input came (or its end): an S3 multi-object
 * delete waiting for its body reads its keys once it is all in. */
void admit_readable(struct admit *a);

/* The answer that refuses a write on a bound route (lease = NAME) with
 * the carrier's verdict v; p->type points into type. */
#define ADMIT_TYPE_MAX 64
void admit_carried_problem(const struct carry_verdict *v, struct problem *p,
                           char type[ADMIT_TYPE_MAX]);

/* The request's writes are over (or never started): leave its order
 * slots. grace_ms > 0 when the upstream may still apply the write. */
void admit_leave(struct admit *a, int grace_ms);

/* Whether the request holds a turn in the ordering gate. */
bool admit_in_order(const struct admit *a);

#endif
