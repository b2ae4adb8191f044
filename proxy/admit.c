/* admit.c: a request's way to its upstream: screen it, read its token,
 * decide, have the store raise the mark, wait for the resource's turn.
 * Refusals are answered here and counted; the connection hears of the
 * outcome once, through a->done. */
#include "admit.h"

#include <inttypes.h>
#include <string.h>

#include <event2/event.h>

#include "../policies/profile.h"
#include "../policies/s3name.h"
#include "../policies/screen.h"
#include "../policies/token.h"
#include "access.h"
#include "client_io.h"
#include "dial.h"
#include "fence.h"
#include "log.h"
#include "order.h"
#include "problem.h"
#include "proxy_int.h"
#include "request.h"
#include "uploads.h"

static void kick_cb(evutil_socket_t fd, short what, void *arg);

bool
admit_init(struct admit *a, struct tm_proxy *px, struct cio *io,
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
    if (a->kick != NULL) {
        event_free(a->kick);
        a->kick = NULL;
    }
}

void
admit_leave(struct admit *a, int grace_ms)
{
    if (a->slot != NULL) {
        order_leave(a->px->order, a->slot, grace_ms);
        a->slot = NULL;
    }
    if (a->src_slot != NULL) {
        order_leave(a->px->order, a->src_slot, grace_ms);
        a->src_slot = NULL;
    }
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

static void
kick_cb(evutil_socket_t fd, short what, void *arg)
{
    struct admit *a = arg;

    lib_enter(&a->px->log);
    (void)fd;
    (void)what;
    if (a->waiting) {
        a->waiting = false;
        go(a);
    }
}

/* A MOVE's second raise took a store round trip: a higher token may have
 * been accepted on its first resource meanwhile, and forwarding now
 * would reach the backend after that newer write. Stale then. (The
 * cached bound fence_check gives is the cached mark itself whenever that
 * is above the token.) */
static bool
overtaken(struct admit *a)
{
    const struct screen *s = &a->rq->sc;
    struct fence *f = a->px->fence;
    int64_t token = a->rq->token;
    int64_t m = fence_check(f, s->resource, s->rlen, token);

    if (m > token) {
        stale_on(a, s->resource, m);
        return true;
    }
    m = s->src_len > 0 ? fence_check(f, s->src, s->src_len, token) : 0;
    if (m > token) {
        stale_on(a, s->src, m);
        return true;
    }
    return false;
}

/* Take the resource's turn in the ordering gate: one more slot queued
 * when it must wait. false when out of memory. */
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

/* The write is accepted on every resource it writes: wait for the turn
 * of each, then go. */
static void
forward_fenced(struct admit *a)
{
    const struct screen *s = &a->rq->sc;

    if (s->src_len > 0 && overtaken(a)) {
        return;
    }
    count(a, OUT_ACCEPTED);
    recent_accept(&a->px->recent, s->resource, a->rq->mark,
                  s->src_len > 0 ? s->src : NULL, a->rq->src_mark);
    a->order_wait = 0;
    if (!enter_order(a, s->resource, s->rlen, &a->slot) ||
        (s->src_len > 0 && !enter_order(a, s->src, s->src_len, &a->src_slot))) {
        admit_leave(a, 0);
        refuse_status(a, 503, "out of memory", "try again");
        return;
    }
    if (a->order_wait == 0) {
        go(a);
    } else {
        a->waiting = true;
    }
}

/* ---- the store --------------------------------------------------------- */

static void start_raise(struct admit *a, bool src);

/* Ask the store for the next mark that needs it (the Destination's
 * first, then a MOVE's source); forward once none does. */
static void
next_raise(struct admit *a)
{
    if (a->raise_res) {
        start_raise(a, false);
    } else if (a->raise_src) {
        start_raise(a, true);
    } else {
        forward_fenced(a);
    }
}

static void
raise_done(void *arg, enum store_result res, int64_t mark)
{
    struct admit *a = arg;
    /* The Destination's raise comes first; raise_res is cleared when it
     * is accepted, so a raise answered after that is the source's. */
    bool src = !a->raise_res;
    enum decision d;

    a->raise = NULL;
    cio_timer_stop(a->io);
    if (res == STORE_ERROR) {
    }
    d = decide_store(a->rq->sc.mode, res != STORE_ERROR, res == STORE_STALE);
    switch (d) {
    case DECIDE_ACCEPT:
        if (src) {
            a->rq->src_mark = mark;
            a->raise_src = false;
        } else {
            a->rq->mark = mark;
            a->raise_res = false;
        }
        next_raise(a);
        break;
    case DECIDE_STALE:
        stale_on(a, src ? a->rq->sc.src : a->rq->sc.resource, mark);
        break;
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

/* Ask the store to raise the mark of the resource, or of src. */
static void
start_raise(struct admit *a, bool src)
{
    struct tm_proxy *px = a->px;
    const struct screen *s = &a->rq->sc;
    const char *res = src ? s->src : s->resource;
    size_t len = src ? s->src_len : s->rlen;

    a->raise = fence_raise(px->fence, res, len, a->rq->token, raise_done, a);
    if (a->raise == NULL) {
        unavailable(a, "out of memory");
        return;
    }
    cio_timer_arm(a->io, px->cfg->store.timeout_ms);
}

void
admit_timeout(struct admit *a)
{
    if (a->raise == NULL) {
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

    if (ti < 0) {
        return a->ts = TOKEN_MISSING;
    }
    a->ts =
        token_check(v, tk->key, tk->key_len, res, len, h->headers[ti].value.p,
                    h->headers[ti].value.len, &a->rq->token);
    return a->ts;
}

/* The decision for one resource before the store, on the cache's bound
 * (on a shared store, a token equal to the cached mark is asked). */
static enum decision
decide_one(struct admit *a, enum tm_verify v, const char *res, size_t len)
{
    enum token_status ts = check_token(a, v, res, len);

    return decide_request(a->rq->sc.mode, ts, a->rq->token,
                          fence_check(a->px->fence, res, len, a->rq->token));
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
        forward_fenced(a);
        break;
    case DECIDE_RAISE:
        next_raise(a);
        break;
    case DECIDE_STALE:
        /* The token is below the cached mark, which fence_check gives as
         * is (it lowers only a mark equal to the token). */
        rq->mark =
            fence_check(a->px->fence, rq->sc.resource, rq->sc.rlen, rq->token);
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
    a->raise_res = d1 == DECIDE_RAISE;
    a->raise_src = s->src_len > 0 && d2 == DECIDE_RAISE;
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
    act(a, d);
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

void
admit_start(struct admit *a, struct request *rq)
{
    struct screen *s = &rq->sc;

    access_begin(rq);
    a->rq = rq;
    a->raise_res = a->raise_src = false;
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
        if (s->upload == SCREEN_UPLOAD_UNFENCED && !upload_not_fenced(a)) {
            return;
        }
        count(a, OUT_BYPASSED);
        go(a);
        return;
    default:
        rq->pool = rq->gen->pools[s->upstream];
        if ((s->upload == SCREEN_UPLOAD_PART && !upload_bound(a)) ||
            (s->upload == SCREEN_UPLOAD_UNFENCED && !upload_not_fenced(a))) {
            return;
        }
        decide(a);
        return;
    }
}
