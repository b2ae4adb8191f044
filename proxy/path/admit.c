/* admit.c: a request's way to its upstream: screen it, read its token,
 * decide, have the store raise the mark, wait for the resource's turn.
 * Refusals are answered here and counted; the connection hears of the
 * outcome once, through a->done. */
#include "admit.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <openssl/sha.h>

#include "../../policies/profile.h"
#include "../../policies/s3name.h"
#include "../../policies/screen.h"
#include "../../policies/token.h"
#include "../carry/carry.h"
#include "../clients/dial.h"
#include "../log.h"
#include "../problem.h"
#include "../store/fence.h"
#include "access.h"
#include "client_io.h"
#include "gen.h"
#include "order.h"
#include "request.h"
#include "s3batch.h"
#include "sign.h"
#include "uploads.h"
#include "view.h"

static void kick_cb(evutil_socket_t fd, short what, void *arg);
static void batch_end(struct admit *a, int grace_ms);

bool
admit_init(struct admit *a, struct path_view *px, struct cio *io,
           admit_done_cb done, void *arg)
{
    memset(a, 0, sizeof(*a));
    a->px = px;
    a->io = io;
    a->done = done;
    a->arg = arg;
    a->kick = event_new(px->base, -1, 0, kick_cb, a);
    return a->kick != NULL;
}

void
admit_fini(struct admit *a, int grace_ms)
{
    fence_cancel(a->raise);
    a->raise = NULL;
    admit_leave(a, grace_ms);
    batch_end(a, 0);
    if (a->kick != NULL) {
        event_free(a->kick);
        a->kick = NULL;
    }
}

/* Leave *slot, when held. */
static void
leave_slot(struct admit *a, struct order_slot **slot, int grace_ms)
{
    if (*slot != NULL) {
        order_leave(a->px->order, *slot, grace_ms);
        *slot = NULL;
    }
}

void
admit_leave(struct admit *a, int grace_ms)
{
    leave_slot(a, &a->slot, grace_ms);
    leave_slot(a, &a->src_slot, grace_ms);
    leave_slot(a, &a->below_slot, grace_ms);
    leave_slot(a, &a->src_below_slot, grace_ms);
    leave_slot(a, &a->above_slot, 0); /* a wait, not a write */
    batch_end(a, grace_ms);
    a->above_done = false;
    a->order_wait = 0;
    a->waiting = false;
}

bool
admit_in_order(const struct admit *a)
{
    return a->slot != NULL;
}

/* Count a decision for the request's route. */
static void
count(struct admit *a, enum outcome o)
{
    metrics_decision(a->px->metrics, a->rq->sc.route_name, o);
}

/* ---- the two ends ------------------------------------------------------ */

static void
go(struct admit *a)
{
    a->done(a->arg, ADMIT_GO);
}

static void
refuse(struct admit *a, struct problem *p, const char *reason)
{
    cio_refuse(a->io, a->rq, p, reason);
    batch_end(a, 0);
    a->done(a->arg, ADMIT_REFUSED);
}

static void
refuse_status(struct admit *a, int status, const char *reason,
              const char *detail)
{
    struct problem p = {.status = status, .detail = detail};

    refuse(a, &p, reason);
}

static void
unavailable(struct admit *a, const char *why)
{
    struct problem p = {.status = 503, .detail = why, .retry_after = 1};

    count(a, OUT_STORE_ERROR);
    refuse(a, &p, "unavailable");
}

/* 409: the token is below res's mark. */
static void
stale_on(struct admit *a, const char *res, int64_t mark)
{
    struct problem p = {
        .status = 409, .token = a->rq->token, .mark = mark, .resource = res};

    a->rq->mark = mark;
    count(a, OUT_STALE);
    refuse(a, &p, "stale");
}

/* ---- the ordering gate ------------------------------------------------- */

/* One of the request's queued slots may go; it forwards once none is
 * queued. */
static void
order_go(void *arg)
{
    struct admit *a = arg;

    if (--a->order_wait == 0) {
        event_active(a->kick, EV_TIMEOUT, 1);
    }
}

/* The collection request above_slot waited for is done; the slot is
 * left on the kick, outside the gate's wake-up. */
static void
above_go(void *arg)
{
    struct admit *a = arg;

    a->above_done = true;
    event_active(a->kick, EV_TIMEOUT, 1);
}

static bool wait_above(struct admit *a);

static void
kick_cb(evutil_socket_t fd, short what, void *arg)
{
    struct admit *a = arg;

    lib_enter(&a->px->log);
    (void)fd;
    (void)what;
    if (a->above_done) {
        a->above_done = false;
        leave_slot(a, &a->above_slot, 0);
        if (!wait_above(a)) {
            return;
        }
    }
    if (a->waiting && a->order_wait == 0 && a->above_slot == NULL) {
        a->waiting = false;
        go(a);
    }
}

/* What the cache knows of res's subtree mark, as fence_check gives it
 * for the request's token (0: nothing). */
static int64_t
below_check(struct admit *a, const char *res, size_t len)
{
    char name[TM_RESOURCE_MAX + DAV_BELOW_LEN + 1];
    size_t n = dav_below_name(res, len, name, sizeof(name));

    return n > 0 ? fence_check(a->px->fence, name, n, a->rq->token) : 0;
}

/* Whether a higher token was accepted on one of the request's marks
 * while the store was asked (a MOVE raises two, a write on a webdav
 * route the subtree marks above it after its own): forwarding now would
 * reach the backend after that newer write. Stale then. (The cached
 * bound fence_check gives is the cached mark itself whenever that is
 * above the token.) */
static bool
overtaken(struct admit *a)
{
    const struct screen *s = &a->rq->sc;
    struct fence *f = a->px->fence;
    int64_t token = a->rq->token;
    int64_t m = fence_check(f, s->resource, s->rlen, token);

    if (m <= token && s->subtree && s->tree) {
        m = below_check(a, s->resource, s->rlen);
    }
    if (m > token) {
        stale_on(a, s->resource, m);
        return true;
    }
    m = s->src_len > 0 ? fence_check(f, s->src, s->src_len, token) : 0;
    if (m <= token && s->src_len > 0 && s->subtree && s->src_tree) {
        m = below_check(a, s->src, s->src_len);
    }
    if (m > token) {
        stale_on(a, s->src, m);
        return true;
    }
    return false;
}

/* Take the resource's turn in the ordering gate: one more slot queued
 * when it must wait. false when out of memory. */
static bool enter_order(struct admit *a, const char *res, size_t len,
                        struct order_slot **slot);

static void batch_forward(struct admit *a);
static bool batch_cancel(struct admit *a);

static bool
enter_order(struct admit *a, const char *res, size_t len,
            struct order_slot **slot)
{
    bool now = false;

    *slot =
        order_enter(a->px->order, res, len, a->rq->token, order_go, a, &now);
    if (*slot != NULL && !now) {
        a->order_wait++;
    }
    return *slot != NULL;
}

/* Out of memory while taking turns: leave them all, 503. */
static void
order_failed(struct admit *a)
{
    admit_leave(a, 0);
    a->waiting = false;
    refuse_status(a, 503, "out of memory", "try again");
}

/* A request on a collection (webdav, subtree = yes) also takes a turn on
 * the subtree mark of each collection it writes, so that a member's
 * write with a higher token waits for it (wait_above). false when out of
 * memory. */
static bool
enter_below(struct admit *a)
{
    const struct screen *s = &a->rq->sc;
    char name[TM_RESOURCE_MAX + DAV_BELOW_LEN + 1];
    size_t n;

    if (!s->subtree) {
        return true;
    }
    if (s->tree) {
        n = dav_below_name(s->resource, s->rlen, name, sizeof(name));
        if (!enter_order(a, name, n, &a->below_slot)) {
            return false;
        }
    }
    if (s->src_len > 0 && s->src_tree) {
        n = dav_below_name(s->src, s->src_len, name, sizeof(name));
        if (!enter_order(a, name, n, &a->src_below_slot)) {
            return false;
        }
    }
    return true;
}

/* Wait for the requests with lower tokens on the collections above what
 * the request writes (their turns on the subtree marks), one collection
 * at a time from above_len: none can come after the check, which raised
 * the subtree marks to the token. true when none is left to wait for;
 * false when waiting (above_go) or refused (out of memory). */
static bool
wait_above(struct admit *a)
{
    const struct screen *s = &a->rq->sc;
    char name[TM_RESOURCE_MAX + DAV_BELOW_LEN + 1];

    for (;;) {
        const char *res = a->above_src ? s->src : s->resource;
        size_t n;
        bool now;

        if (a->above_len == 0) {
            if (a->above_src || s->src_len == 0 || !s->src_tree) {
                return true;
            }
            a->above_src = true;
            a->above_len = dav_parent_len(s->src, s->src_len);
            continue;
        }
        n = dav_below_name(res, a->above_len, name, sizeof(name));
        a->above_slot = order_wait_below(a->px->order, name, n, a->rq->token,
                                         above_go, a, &now);
        if (!now) {
            if (a->above_slot == NULL) {
                order_failed(a);
            }
            return false;
        }
        a->above_len = dav_parent_len(res, a->above_len);
    }
}

/* The write is accepted on every resource it writes: wait for the turn
 * of each, then go. */
static void
forward_fenced(struct admit *a)
{
    const struct screen *s = &a->rq->sc;
    struct recent_who who;

    if (a->batch != NULL) {
        batch_forward(a);
        return;
    }
    if (overtaken(a)) {
        return;
    }
    count(a, OUT_ACCEPTED);
    access_who(a->io, a->rq, s->route_name, &who);
    a->rq->recent_seq = recent_accept(
        &a->px->recent, &who, s->resource, a->rq->token, a->rq->mark,
        s->src_len > 0 ? s->src : NULL, a->rq->src_mark);
    a->order_wait = 0;
    if (!enter_order(a, s->resource, s->rlen, &a->slot) ||
        (s->src_len > 0 && !enter_order(a, s->src, s->src_len, &a->src_slot)) ||
        !enter_below(a)) {
        order_failed(a);
        return;
    }
    a->waiting = true;
    a->above_src = false;
    a->above_len = s->tree ? dav_parent_len(s->resource, s->rlen) : 0;
    if (!wait_above(a)) {
        return;
    }
    if (a->order_wait == 0) {
        a->waiting = false;
        go(a);
    }
}

/* ---- the store --------------------------------------------------------- */

static bool start_step(struct admit *a, unsigned step);

/* Ask the store for the next step the request needs (admit.h lists them
 * in order); forward once none is left. */
static void
next_raise(struct admit *a)
{
    while (a->todo != 0) {
        unsigned step = a->todo & -a->todo;

        a->step = step;
        if (start_step(a, step)) {
            return;
        }
        a->todo &= ~step; /* nothing to ask */
    }
    forward_fenced(a);
}

/* The resource a step is about (len bytes): the request's, src, or the
 * carrier's scope mark. */
static const char *
step_resource(const struct admit *a, unsigned step, size_t *len)
{
    const unsigned src =
        ADMIT_STEP_SRC_BELOW | ADMIT_STEP_SRC | ADMIT_STEP_SRC_ABOVE;

    if (step == ADMIT_STEP_SCOPE) {
        return carry_scope(a->carrier, len);
    }
    *len = (step & src) != 0 ? a->rq->sc.src_len : a->rq->sc.rlen;
    return (step & src) != 0 ? a->rq->sc.src : a->rq->sc.resource;
}

static void
raise_done(void *arg, enum store_result res, int64_t mark)
{
    struct admit *a = arg;
    enum decision d;

    a->raise = NULL;
    cio_timer_stop(a->io);
    d = decide_store(a->rq->sc.mode, res != STORE_ERROR, res == STORE_STALE);
    switch (d) {
    case DECIDE_ACCEPT:
        if (a->step == ADMIT_STEP_RES) {
            a->rq->mark = mark;
        } else if (a->step == ADMIT_STEP_SRC) {
            a->rq->src_mark = mark;
        }
        a->todo &= ~a->step;
        next_raise(a);
        break;
    case DECIDE_STALE: {
        size_t len;

        /* A subtree mark's stale answer names its collection; the scope
         * mark's, the carrier's scope. */
        stale_on(a, step_resource(a, a->step, &len), mark);
        break;
    }
    case DECIDE_FORWARD:
        log_warn("conn=%" PRIu64 " store unavailable: route=%s resource=%s "
                 "token=%" PRId64 " forwarded unfenced (efficiency)",
                 a->io->id, a->rq->sc.route_name, LOG_STR(a->rq->sc.resource),
                 a->rq->token);
        count(a, OUT_BYPASSED);
        go(a);
        break;
    default:
        unavailable(a, "the mark store cannot be used; try again");
        break;
    }
}

/* Start one step: true when the store was asked or the request was
 * answered (out of memory), false when the step needs nothing. */
static bool
start_step(struct admit *a, unsigned step)
{
    struct path_view *px = a->px;
    const struct screen *s = &a->rq->sc;
    size_t len;
    const char *res = step_resource(a, step, &len);
    char name[TM_RESOURCE_MAX + DAV_BELOW_LEN + 1];
    bool asked = true;

    if (step == ADMIT_STEP_RES_ABOVE || step == ADMIT_STEP_SRC_ABOVE) {
        a->raise = fence_raise_above(px->fence, res, len, a->rq->token, &asked,
                                     raise_done, a);
    } else if ((step == ADMIT_STEP_RES && s->tree) ||
               (step == ADMIT_STEP_SRC && s->src_tree)) {
        /* The subtree marks above it go with it: one store round trip. */
        a->todo &= ~(step << 2);
        a->raise =
            fence_raise_tree(px->fence, res, len, a->rq->token, raise_done, a);
    } else {
        if (step == ADMIT_STEP_RES_BELOW || step == ADMIT_STEP_SRC_BELOW) {
            len = dav_below_name(res, len, name, sizeof(name));
            res = name;
        }
        a->raise =
            fence_raise(px->fence, res, len, a->rq->token, raise_done, a);
    }
    if (!asked) {
        return false;
    }
    if (a->raise == NULL) {
        unavailable(a, "out of memory");
        return true;
    }
    cio_timer_arm(a->io, px->cfg->store.timeout_ms);
    return true;
}

void
admit_timeout(struct admit *a)
{
    if (a->body_wait) {
        a->body_wait = false;
        a->io->close_after = true;
        refuse_status(a, 408, "timeout",
                      "the body of the multi-object delete did not arrive "
                      "in time");
        return;
    }
    if (!batch_cancel(a) && a->raise == NULL) {
        return;
    }
    fence_cancel(a->raise);
    a->raise = NULL;
    log_error("conn=%" PRIu64 " store did not answer in %d ms", a->io->id,
              a->px->cfg->store.timeout_ms);
    if (a->rq->sc.mode == TM_MODE_EFFICIENCY) {
        count(a, OUT_BYPASSED);
        go(a);
    } else {
        unavailable(a, "the mark store did not answer in time");
    }
}

/* ---- the decision ------------------------------------------------------ */

/* The token's status for res under verify v. Sets rq->token. */
static enum token_status
check_token(struct admit *a, enum tm_verify v, const char *res, size_t len)
{
    const struct cfg_tokens *tk = a->px->tokens;
    const struct http_request *h = &a->rq->h;
    int ti = a->rq->sc.token_idx;

    if (a->carried > 0) {
        a->rq->token = a->carried;
        a->rq->carrier = a->carrier;
        return a->ts = TOKEN_OK;
    }
    if (ti < 0) {
        return a->ts = TOKEN_MISSING;
    }
    a->ts =
        token_check(v, tk->key, tk->key_len, res, len, h->headers[ti].value.p,
                    h->headers[ti].value.len, &a->rq->token);
    return a->ts;
}

/* Whether a carried write must ask the store for its carrier's scope
 * mark: unless the cache holds it at the fence already on a store no
 * other sidecar writes (as a resource's equal token, decide_request), so
 * that the equal path of a lease on lmdb does not queue behind the
 * writer thread. Above the fence, or on a shared store, it is asked. */
static bool
scope_asked(struct admit *a)
{
    size_t len;
    const char *scope;

    if (a->carried <= 0) {
        return false;
    }
    scope = carry_scope(a->carrier, &len);
    return fence_check(a->px->fence, scope, len, a->carried) != a->carried;
}

/* The decision for one resource before the store, on the cache's bound,
 * or on a cache miss the store's own read where it has one (on a shared
 * store, a token equal to the cached mark is asked). */
static enum decision
decide_one(struct admit *a, enum tm_verify v, const char *res, size_t len)
{
    enum token_status ts = check_token(a, v, res, len);
    struct fence *f = a->px->fence;
    int64_t token = a->rq->token;
    bool asks = ts == TOKEN_OK && a->rq->sc.mode != TM_MODE_OFF;

    return decide_request(a->rq->sc.mode, ts, token,
                          asks ? fence_bound(f, res, len, token)
                               : fence_check(f, res, len, token));
}

/* Do what the decision before the store says. */
static void
act(struct admit *a, enum decision d)
{
    struct request *rq = a->rq;

    switch (d) {
    case DECIDE_FORWARD:
        count(a, OUT_BYPASSED);
        go(a);
        break;
    case DECIDE_ACCEPT:
        rq->mark = rq->token;
        rq->src_mark = rq->token;
        next_raise(a);
        break;
    case DECIDE_RAISE:
        next_raise(a);
        break;
    case DECIDE_STALE:
        /* The token is below the cached (or just read) mark, which
         * fence_bound gives as is (it lowers only a mark equal to the
         * token). */
        rq->mark =
            fence_bound(a->px->fence, rq->sc.resource, rq->sc.rlen, rq->token);
        stale_on(a, rq->sc.resource, rq->mark);
        break;
    case DECIDE_MISSING: {
        struct problem p = {.status = 428};
        count(a, OUT_MISSING);
        refuse(a, &p, "missing");
        break;
    }
    case DECIDE_FORBIDDEN:
        count(a, OUT_FORBIDDEN);
        refuse_status(a, 403, "forbidden",
                      "the token is unsigned, forged or issued for another "
                      "resource");
        break;
    case DECIDE_INVALID:
        count(a, OUT_INVALID);
        refuse_status(a, 400, "invalid",
                      a->ts == TOKEN_NO_KEY
                          ? "the token is signed, but no [tokens] key_file "
                            "is set to check its signature"
                          : "the token must be decimal digits, 1 to "
                            "9223372036854775807");
        break;
    default:
        unavailable(a, "the mark store cannot be used; try again");
        break;
    }
}

/* The subtree steps of an accepted request (on webdav routes with
 * subtree = yes): a request that writes every member below its resource
 * is checked against that resource's subtree mark (stale on the cached
 * one: refused here, naming the collection), and every write raises the
 * subtree marks above what it writes. false when refused. */
static bool
plan_subtree(struct admit *a)
{
    const struct screen *s = &a->rq->sc;
    bool src = s->src_len > 0 && s->src_tree;
    int64_t m;

    if (s->subtree && s->tree) {
        m = below_check(a, s->resource, s->rlen);
        if (m > a->rq->token) {
            stale_on(a, s->resource, m);
            return false;
        }
        a->todo |= m < a->rq->token ? ADMIT_STEP_RES_BELOW : 0;
    }
    if (s->subtree && src) {
        m = below_check(a, s->src, s->src_len);
        if (m > a->rq->token) {
            stale_on(a, s->src, m);
            return false;
        }
        a->todo |= m < a->rq->token ? ADMIT_STEP_SRC_BELOW : 0;
    }
    a->todo |=
        (s->tree ? ADMIT_STEP_RES_ABOVE : 0) | (src ? ADMIT_STEP_SRC_ABOVE : 0);
    return true;
}

/* Decide on the token for each resource the request writes (both with
 * the same token), the Destination's first. */
static void
decide(struct admit *a)
{
    struct request *rq = a->rq;
    struct screen *s = &rq->sc;
    enum decision d1, d2, d;

    d1 = decide_one(a, s->verify, s->resource, s->rlen);
    d2 =
        s->src_len == 0 ? d1 : decide_one(a, s->src_verify, s->src, s->src_len);
    a->todo = (d1 == DECIDE_RAISE ? ADMIT_STEP_RES : 0) |
              (s->src_len > 0 && d2 == DECIDE_RAISE ? ADMIT_STEP_SRC : 0) |
              (scope_asked(a) ? ADMIT_STEP_SCOPE : 0);
    if (d1 == DECIDE_ACCEPT) {
        rq->mark = rq->token;
    }
    if (d2 == DECIDE_ACCEPT) {
        rq->src_mark = rq->token;
    }
    d = decide_pair(d1, d2);
    if (d != d1 && (d == DECIDE_STALE || d == DECIDE_FORBIDDEN)) {
        /* Refused for the source: the answer names it. */
        memcpy(s->resource, s->src, s->src_len + 1);
        s->rlen = s->src_len;
    }
    if ((d == DECIDE_ACCEPT || d == DECIDE_RAISE) && !plan_subtree(a)) {
        return;
    }
    act(a, d);
}

/* ---- carried tokens ---------------------------------------------------- */

void
admit_carried_problem(const struct carry_verdict *v, struct problem *p,
                      char type[ADMIT_TYPE_MAX])
{
    snprintf(type, ADMIT_TYPE_MAX, "urn:tidemark:%s", v->kind);
    *p = (struct problem){.status = v->status,
                          .type = type,
                          .title = v->status == 400 ? "Token on a carried route"
                                                    : "Not the lease holder",
                          .detail = v->detail,
                          .retry_after = v->status == 503 ? 1 : 0};
}

/* Answer a write on a bound route with the carrier's refusal v. */
static void
refuse_carried(struct admit *a, const struct carry_verdict *v)
{
    char type[ADMIT_TYPE_MAX];
    struct problem p;

    admit_carried_problem(v, &p, type);
    count(a, v->status == 400 ? OUT_INVALID : OUT_NOT_HOLDER);
    refuse(a, &p, v->kind);
}

/* A write on a route bound to a carrier (lease = NAME) is sent with the
 * carrier's fence as its token, and that fence is checked against the
 * carrier's scope mark too (ADMIT_STEP_SCOPE): refused while the carrier
 * does not hold, and when it brings a token of its own
 * (decide_carried). false when refused. */
static bool
carry(struct admit *a)
{
    const struct screen *s = &a->rq->sc;
    const char *name = s->route != NULL ? s->route->lease : NULL;
    enum carry_state st = CARRY_STARTING;
    struct carry_verdict v;
    int64_t fence = 0;

    if (name == NULL) {
        return true;
    }
    a->carrier = carry_find(a->px->carriers, name);
    if (a->carrier != NULL) {
        st = carry_now(a->carrier, &fence);
    } else {
        log_warn("conn=%" PRIu64 " route=%s: lease %s was added by a "
                 "reload: it runs only after a restart; refused",
                 a->io->id, s->route_name, name);
    }
    v = decide_carried(st, s->token_idx >= 0);
    if (v.status == 0) {
        a->carried = fence;
        return true;
    }
    refuse_carried(a, &v);
    return false;
}

/* ---- S3 multipart uploads --------------------------------------------- */

/* Refuse a part, completion or abort of an S3 upload with status, its
 * problem type and detail. */
static void
refuse_upload(struct admit *a, int status, const char *type, const char *title,
              const char *detail, const char *res)
{
    struct problem p = {.status = status,
                        .type = type,
                        .title = title,
                        .detail = detail,
                        .resource = res};

    count(a, OUT_INVALID);
    refuse(a, &p, "upload");
}

/* The resource the request's upload is bound to, in *res (NULL: none,
 * an upload tidemark did not see created). false when its uploadId is
 * empty, malformed or too long. */
static bool
upload_resource(struct admit *a, const char **res)
{
    const struct screen *s = &a->rq->sc;
    const char *up = a->rq->gen->cfg->upstreams[s->upstream].name;
    char id[S3_UPLOAD_ID_MAX];
    size_t n = 0;

    if (!query_value(s->upload_id, id, sizeof(id), &n) || n == 0) {
        return false;
    }
    *res = uploads_find(a->px->uploads, up, id, n, dial_now_ms());
    return true;
}

/* Refuse an upload bound to res, not to the request's resource: 409. */
static void
refuse_elsewhere(struct admit *a, const char *res)
{
    refuse_upload(a, 409, "urn:tidemark:upload-elsewhere",
                  "Upload of another key",
                  "this upload was created for another key, named in "
                  "resource: send its parts and completion to that key",
                  res);
}

/* A part, completion or abort of an S3 upload (an uploadId on a fenced
 * s3 route) writes the key the upload was created for, whatever key its
 * path names: it goes on to the fence only when its path names the
 * resource the upload is bound to (uploads.h). An upload tidemark did
 * not see created (before a restart, through another sidecar, evicted
 * or expired) is refused, except its abort, which writes no object.
 * false when refused. */
static bool
upload_bound(struct admit *a)
{
    const char *res = NULL;

    if (!upload_resource(a, &res)) {
        refuse_upload(a, 400, NULL, NULL,
                      "the uploadId is empty, malformed or too long", NULL);
        return false;
    }
    if (res == NULL && slice_eq(a->rq->h.method, "DELETE")) {
        return true;
    }
    if (res == NULL) {
        refuse_upload(a, 400, "urn:tidemark:unknown-upload", "Unknown upload",
                      "this upload was not created through this tidemark "
                      "since it started (or is older than 7 days): abort it "
                      "and upload again",
                      NULL);
        return false;
    }
    if (strcmp(res, a->rq->sc.resource) != 0) {
        refuse_elsewhere(a, res);
        return false;
    }
    return true;
}

/* The same on a route that does not fence it as an s3 key (off, another
 * profile, or none): refused when the upload is bound to a fenced key
 * other than the request's resource, which the server would write
 * whatever the path. false when refused. */
static bool
upload_not_fenced(struct admit *a)
{
    const char *res = NULL;

    if (!upload_resource(a, &res) || res == NULL ||
        strcmp(res, a->rq->sc.resource) == 0) {
        return true;
    }
    refuse_elsewhere(a, res);
    return false;
}

/* ---- S3 multi-object deletes ------------------------------------------ */

/* Cancel the batch's raises in flight; false when none was in flight
 * (a read of a mark cannot be cancelled: it is forgotten). */
static bool
batch_cancel(struct admit *a)
{
    struct batch *b = a->batch;

    if (b == NULL || (b->pending == 0 && b->gets == 0)) {
        return false;
    }
    for (size_t i = 0; i < b->n; i++) {
        fence_cancel(b->keys[i].raise);
        b->keys[i].raise = NULL;
    }
    b->pending = 0;
    b->checking = false;
    return true;
}

/* Cancel the batch's raises, leave its turns and free it (or leave it
 * to the last read of a mark still in flight). */
static void
batch_end(struct admit *a, int grace_ms)
{
    struct batch *b = a->batch;

    a->body_wait = false;
    if (b == NULL) {
        return;
    }
    batch_cancel(a);
    for (size_t i = 0; i < b->n; i++) {
        leave_slot(a, &b->keys[i].slot, grace_ms);
    }
    a->batch = NULL;
    b->a = NULL;
    if (b->gets == 0) {
        batch_free(b);
    }
}

/* Note what the store said of key k (after a read or a raise). */
static void
batch_note(struct batch *b, struct batch_key *k, enum store_result res,
           int64_t mark, bool stale)
{
    switch (decide_store(b->a->rq->sc.mode, res != STORE_ERROR, stale)) {
    case DECIDE_ACCEPT:
        break;
    case DECIDE_STALE:
        if (b->stale == NULL) {
            b->stale = k;
            b->stale_mark = mark;
        }
        break;
    case DECIDE_FORWARD:
        b->bypass = true;
        break;
    default:
        b->down = true;
        break;
    }
}

/* Every read or raise of a round answered: refuse on the first stale
 * key, on a store failure, or go on with then. */
static void
batch_settled(struct admit *a, void (*then)(struct admit *a))
{
    struct batch *b = a->batch;
    struct screen *s = &a->rq->sc;

    cio_timer_stop(a->io);
    if (b->stale != NULL) {
        memcpy(s->resource, b->stale->res, b->stale->len + 1);
        s->rlen = b->stale->len;
        stale_on(a, s->resource, b->stale_mark);
    } else if (b->down) {
        unavailable(a, "the mark store cannot be used; try again");
    } else if (b->bypass) {
        log_warn("conn=%" PRIu64 " store unavailable: route=%s multi-object "
                 "delete of %zu resources token=%" PRId64
                 " forwarded unfenced (efficiency)",
                 a->io->id, s->route_name, b->n, a->rq->token);
        count(a, OUT_BYPASSED);
        go(a);
    } else {
        then(a);
    }
}

static void
batch_raise_done(void *arg, enum store_result res, int64_t mark)
{
    struct batch_key *k = arg;
    struct batch *b = k->b;

    k->raise = NULL;
    batch_note(b, k, res, mark, res == STORE_STALE);
    if (--b->pending == 0) {
        batch_settled(b->a, next_raise);
    }
}

/* Ask the store to raise every key that needs it, all at once: the
 * marks were read, none is above the token. */
static void
batch_raise(struct admit *a)
{
    struct batch *b = a->batch;

    a->todo = scope_asked(a) ? ADMIT_STEP_SCOPE : 0;
    a->rq->mark = a->rq->token;
    for (size_t i = 0; i < b->n && !b->down; i++) {
        struct batch_key *k = &b->keys[i];
        if (k->d != DECIDE_RAISE) {
            continue;
        }
        k->raise = fence_raise(a->px->fence, k->res, k->len, a->rq->token,
                               batch_raise_done, k);
        b->pending += k->raise != NULL;
        b->down = k->raise == NULL;
    }
    if (b->pending > 0) {
        cio_timer_arm(a->io, a->px->cfg->store.timeout_ms);
    } else if (b->down) {
        unavailable(a, "out of memory");
    } else {
        next_raise(a);
    }
}

static void
batch_got(void *arg, enum store_result res, int64_t mark)
{
    struct batch_key *k = arg;
    struct batch *b = k->b;

    b->gets--;
    if (b->a == NULL || !b->checking) {
        if (b->a == NULL && b->gets == 0) {
            batch_free(b); /* orphaned: nobody waits */
        }
        return;
    }
    batch_note(b, k, res, mark, mark > b->a->rq->token);
    if (b->gets == 0) {
        b->checking = false;
        batch_settled(b->a, batch_raise);
    }
}

/* Read the mark of every key the cache cannot clear, all at once, so
 * that a key whose mark is above the token refuses the request before
 * any mark is raised. */
static void
batch_check(struct admit *a)
{
    struct batch *b = a->batch;

    b->a = a;
    b->checking = true;
    for (size_t i = 0; i < b->n && !b->down; i++) {
        struct batch_key *k = &b->keys[i];
        if (k->d != DECIDE_RAISE) {
            continue;
        }
        b->down = !fence_get(a->px->fence, k->res, k->len, batch_got, k);
        b->gets += !b->down;
    }
    if (b->gets > 0) {
        cio_timer_arm(a->io, a->px->cfg->store.timeout_ms);
        return;
    }
    b->checking = false;
    if (b->down) {
        unavailable(a, "out of memory");
    } else {
        batch_raise(a);
    }
}

/* Decide on the token for each key's resource (with its route's
 * verify); a refusal names the first key it is about. */
static void
batch_decide(struct admit *a)
{
    struct batch *b = a->batch;
    struct screen *s = &a->rq->sc;
    enum decision d = DECIDE_FORWARD;

    for (size_t i = 0; i < b->n; i++) {
        struct batch_key *k = &b->keys[i];
        enum decision was = d;

        k->b = b;
        k->d = decide_one(a, k->verify, k->res, k->len);
        d = i == 0 ? k->d : decide_pair(d, k->d);
        if (i == 0 || d != was) {
            memcpy(s->resource, k->res, k->len + 1);
            s->rlen = k->len;
        }
    }
    if (d == DECIDE_ACCEPT || d == DECIDE_RAISE) {
        batch_check(a);
        return;
    }
    act(a, d);
}

/* Every key is accepted: take each resource's turn, then go. */
static void
batch_forward(struct admit *a)
{
    struct batch *b = a->batch;
    const struct screen *s = &a->rq->sc;
    struct recent_who who;

    for (size_t i = 0; i < b->n; i++) {
        int64_t m = fence_check(a->px->fence, b->keys[i].res, b->keys[i].len,
                                a->rq->token);
        if (m > a->rq->token) {
            memcpy(a->rq->sc.resource, b->keys[i].res, b->keys[i].len + 1);
            a->rq->sc.rlen = b->keys[i].len;
            stale_on(a, a->rq->sc.resource, m);
            return;
        }
    }
    count(a, OUT_ACCEPTED);
    access_who(a->io, a->rq, s->route_name, &who);
    recent_accept(&a->px->recent, &who, b->keys[0].res, a->rq->token,
                  a->rq->mark, NULL, 0);
    a->order_wait = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (!enter_order(a, b->keys[i].res, b->keys[i].len, &b->keys[i].slot)) {
            order_failed(a);
            return;
        }
    }
    a->waiting = true;
    if (a->order_wait == 0) {
        a->waiting = false;
        go(a);
    }
}

/* The whole body is in: read its keys, then decide on them. */
static void
batch_keys(struct admit *a, const char *body, size_t len)
{
    struct request *rq = a->rq;
    struct screen *s = &rq->sc;
    unsigned char md[SHA256_DIGEST_LENGTH];
    const char *why = NULL;

    SHA256((const unsigned char *)body, len, md);
    for (size_t i = 0; i < sizeof(md); i++) {
        snprintf(rq->body_sha256 + 2 * i, 3, "%02x", md[i]);
    }
    a->batch = batch_read(rq->gen->cfg, &rq->h, s, body, len, &why);
    if (a->batch == NULL) {
        if (why == NULL) {
            refuse_status(a, 503, "out of memory", "try again");
            return;
        }
        count(a, OUT_INVALID);
        refuse_status(a, 400, "invalid", why);
        return;
    }
    if (a->batch->route == NULL) {
        /* No key is fenced: as a DELETE of each would be, unfenced. */
        count(a, OUT_BYPASSED);
        go(a);
        return;
    }
    s->route = a->batch->route;
    s->route_name = s->route->name;
    s->mode = s->route->mode;
    if (carry(a)) {
        batch_decide(a);
    }
}

void
admit_readable(struct admit *a)
{
    struct evbuffer *in = cio_in(a->io);
    size_t need = (size_t)a->rq->h.content_length;

    if (!a->body_wait) {
        return;
    }
    if (evbuffer_get_length(in) < need) {
        if (a->io->client_eof) {
            a->body_wait = false;
            refuse_status(a, 400, "invalid",
                          "the body ended before its Content-Length");
        }
        return;
    }
    a->body_wait = false;
    cio_timer_stop(a->io);
    batch_keys(a, (const char *)evbuffer_pullup(in, (ssize_t)need), need);
}

/* An S3 multi-object delete: its keys are in its body, read whole
 * (screen.c bounded it by multi_delete_max) before anything is decided;
 * the body then goes to the upstream as it came. */
static void
batch_wait(struct admit *a)
{
    struct cio *io = a->io;
    size_t need = (size_t)a->rq->h.content_length;

    a->body_wait = true;
    if (evbuffer_get_length(cio_in(io)) < need) {
        sock_read_limit(&io->sk, need + 1);
        io->read_raised = true;
        sock_read(&io->sk, true);
        if (a->rq->h.expect_continue) {
            cio_continue(io);
        }
        cio_timer_arm(io, a->rq->pc->idle_timeout_ms);
    }
    admit_readable(a);
}

/* A signing upstream without usable credentials: 503 before any mark
 * is raised. false when refused. */
static bool
signable(struct admit *a)
{
    const char *why;
    struct problem p;

    if (sign_ready(a->rq->pool, &why)) {
        return true;
    }
    sign_problem(&p, why);
    refuse(a, &p, "no signing credentials");
    return false;
}

void
admit_start(struct admit *a, struct request *rq)
{
    struct screen *s = &rq->sc;

    batch_end(a, 0);
    access_begin(rq);
    a->rq = rq;
    a->todo = a->step = 0;
    a->carrier = NULL;
    a->carried = 0;
    a->waiting = false;
    switch (
        screen_request(rq->gen->cfg, &rq->h, rq->bytes + rq->h.head_len, s)) {
    case SCREEN_REFUSE: {
        struct problem p = {.status = s->status, .detail = s->detail};
        if (s->invalid) {
            count(a, OUT_INVALID);
        }
        if (s->close) {
            a->io->close_after = true;
        }
        refuse(a, &p, s->reason);
        return;
    }
    case SCREEN_PASS:
        rq->pool = rq->gen->pools[s->upstream];
        if (!signable(a)) {
            return;
        }
        if (s->upload == SCREEN_UPLOAD_UNFENCED && !upload_not_fenced(a)) {
            return;
        }
        count(a, OUT_BYPASSED);
        go(a);
        return;
    default:
        rq->pool = rq->gen->pools[s->upstream];
        if (!signable(a)) {
            return;
        }
        if (s->batch) {
            batch_wait(a);
            return;
        }
        if (!carry(a) ||
            (s->upload == SCREEN_UPLOAD_PART && !upload_bound(a)) ||
            (s->upload == SCREEN_UPLOAD_UNFENCED && !upload_not_fenced(a))) {
            return;
        }
        decide(a);
        return;
    }
}
