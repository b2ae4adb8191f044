/* service.c: the lock service on the control port: acquire (with an
 * optional wait, waiters served in arrival order), extend, release and
 * look up leases; eager fencing and signed tokens on the way out. */
#include "service.h"

#include <inttypes.h>
#include <stdio.h>
#include <sys/queue.h>
#include <stdlib.h>
#include <string.h>

#include "../../conf/cfg.h"
#include "../../policies/canon.h"
#include "../adm_reply.h"
#include "../log.h"
#include "../metrics.h"
#include "../problem.h"
#include "../recent.h"
#include "../store/fence.h"
#include "call.h"
#include "lock.h"
#include "waiters.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

struct lock_service {
    struct event_base *base;
    const struct tm_log *log; /* the proxy's, entered by callbacks */
    struct fence *fence;      /* eager fencing and the acquire's floor */
    const struct cfg_locks *cfg;
    const struct lock_ops *ops;
    struct lock_backend *b;
    struct lock_calls calls; /* every call alive, and their counters */
    struct waiters *waiters;
    struct event *sweep; /* each second: the leases that expired */
    bool closing;
};

static void try_head(void *arg);

/* Ask the backend for kind on c's lock; cb(c, ...) answers. c is in
 * flight until then. */
static void
submit(struct lock_call *c, enum lock_kind kind, lock_cb cb)
{
    struct lock_service *ls = c->ls;
    struct lock_op op = {.kind = kind,
                         .name = c->name,
                         .len = c->len,
                         .ttl_ms = c->ttl_ms,
                         .fence = c->fence,
                         .min_fence = c->min_fence,
                         .wait_ms = c->wait_ms,
                         .cb = cb,
                         .arg = c};

    c->in_flight = true;
    ls->ops->submit(ls->b, &op);
}

/* c waits at the end of q. */
static void
wait_in(struct waitq *q, struct lock_call *c)
{
    log_debug("locks: waiting: name=%s wait_ms=%" PRId64, LOG_STR(c->name),
              c->wait_ms);
    lock_call_watch_peer(c);
    waitq_push(q, &c->w, c);
}

/* c goes unless a callback still holds it; its client is not answered. */
static void
drop(struct lock_call *c)
{
    lock_call_detach(c);
    lock_call_finish(c);
}

/* The answer c was in flight for has come. false when the service is gone
 * or closing: c was dropped, and the caller returns at once. */
static bool
landed(struct lock_call *c)
{
    c->in_flight = false;
    if (c->ls == NULL || c->ls->closing) {
        drop(c);
        return false;
    }
    return true;
}

/* ---- acquire --------------------------------------------------------- */

static void
orphan_released(void *arg, enum lock_result res, int64_t fence, int64_t ttl_ms)
{
    struct lock_call *c = arg;

    (void)fence;
    (void)ttl_ms;
    c->in_flight = false;
    if (c->ls != NULL && !c->ls->closing && res == LOCK_OK) {
        waiters_kick(c->ls->waiters, c->name, c->len);
    }
    lock_call_finish(c);
}

/* A lease was taken for c, but c cannot use it (its client left, or the
 * mark could not be raised): give it back at once. */
static void
give_back(struct lock_call *c)
{
    struct lock_service *ls = c->ls;

    lock_call_detach(c);
    if (ls->closing) {
        lock_call_finish(c);
        return;
    }
    submit(c, LOCK_OP_RELEASE, orphan_released);
}

static void start_acquire(struct lock_call *c);

/* The lease taken below the mark is given back: take it again above the
 * mark. LOCK_LOST is fine too (it expired meanwhile): either way it is
 * not live under c's fence any more. */
static void
refloor_released(void *arg, enum lock_result res, int64_t fence, int64_t ttl_ms)
{
    struct lock_call *c = arg;

    (void)fence;
    (void)ttl_ms;
    if (!landed(c)) {
        return;
    }
    if (res == LOCK_ERROR) {
        lock_call_down(c);
        lock_call_finish(c);
        return;
    }
    if (c->req == NULL) {
        lock_call_finish(c);
        return;
    }
    start_acquire(c);
    lock_call_finish(c);
}

/* Answer c's client with its lease (201, ttl_ms left); a lease nobody
 * can be answered with is given back. */
static void
hand_out(struct lock_call *c, int64_t ttl_ms)
{
    if (c->req == NULL || !lock_call_lease(c, 201, ttl_ms)) {
        give_back(c);
        return;
    }
    metrics_lock_call(c->ls->calls.metrics, LOCK_OUT_ACQUIRED);
    lock_log_lease("acquired", c->name, c->len, c->holder, c->fence, ttl_ms);
    lock_call_finish(c);
}

static void
raised(void *arg, enum store_result res, int64_t mark)
{
    struct lock_call *c = arg;

    if (!landed(c)) {
        return;
    }
    if (res == STORE_ACCEPTED) {
        hand_out(c, c->ttl_ms);
        return;
    }
    if (res == STORE_STALE && !c->refloored && mark < INT64_MAX &&
        c->req != NULL) {
        /* The mark passed the fence after floor_read read it (a token
         * issued elsewhere, another sidecar). Refusing could refuse
         * every acquire while that goes on; instead give this lease
         * back and take it again with a fence above the mark, once. */
        log_warn("locks: %s: the resource's mark %" PRId64 " is above the "
                 "new fence %" PRId64 ": taking the lock again above it",
                 LOG_STR(c->name), mark, c->fence);
        c->refloored = true;
        c->min_fence = mark + 1;
        submit(c, LOCK_OP_RELEASE, refloor_released);
        return;
    }
    if (res == STORE_STALE) {
        char why[160];

        snprintf(why, sizeof(why),
                 "the resource's mark %" PRId64 " is above the new fence; "
                 "the lock backend's counter is behind the mark store",
                 mark);
        log_error("locks: %s: %s", LOG_STR(c->name), why);
        lock_call_refuse(c, 503, why);
    } else if (res == STORE_ERROR) {
        lock_call_refuse(c, 503,
                         "the mark store cannot raise the resource's mark "
                         "(eager fencing); no new work starts");
    }
    give_back(c);
}

static void
acquired(void *arg, enum lock_result res, int64_t fence, int64_t ttl_ms)
{
    struct lock_call *c = arg;
    struct lock_service *ls = c->ls;

    waiter_tried(&c->w);
    if (!landed(c)) {
        return;
    }
    if (res == LOCK_OK) {
        c->fence = fence;
        if (c->w.q != NULL) {
            /* The next waiter's turn comes at this lease's end, or at
             * its release. */
            struct waitq *q;

            waiter_leave(&c->w, false);
            q = waiters_find(ls->waiters, c->name, c->len);
            if (q != NULL) {
                waitq_arm(q, ttl_ms);
            }
        }
        if (c->req == NULL) {
            give_back(c);
            return;
        }
        if (ls->cfg->eager) {
            if (fence_raise_holder(ls->fence, c->name, c->len, fence, raised,
                                   c) == NULL) {
                lock_call_refuse(c, 503, "out of memory");
                give_back(c);
                return;
            }
            c->in_flight = true;
            return;
        }
        hand_out(c, ttl_ms);
        return;
    }
    if (res == LOCK_BUSY && c->req != NULL && c->wait_ms > 0 && !c->timed_out &&
        !ls->ops->waits) {
        if (c->w.q == NULL) {
            struct waitq *q = waiters_get(ls->waiters, c->name, c->len);

            if (q == NULL) {
                lock_call_down(c);
                lock_call_finish(c);
                return;
            }
            wait_in(q, c);
        }
        if (waiter_is_head(&c->w)) {
            waitq_arm(c->w.q, ttl_ms);
        }
        return;
    }
    if (res == LOCK_BUSY) {
        lock_call_busy(c, fence, ttl_ms,
                       c->timed_out
                           ? "waited wait_ms; another holder's lease is "
                             "still live"
                           : NULL);
    } else {
        lock_call_down(c);
    }
    lock_call_finish(c);
}

/* The store's mark of c's resource is read: ask the backend for a lease
 * whose fence is above it. */
static void
floor_read(void *arg, enum store_result res, int64_t mark)
{
    struct lock_call *c = arg;

    if (!landed(c)) {
        return;
    }
    /* fence_get lifted the mark to the cached one: a store that lost
     * marks (Redis on a failover) does not lower the floor. */
    if (res != STORE_ACCEPTED || mark == INT64_MAX || c->req == NULL) {
        waiter_tried(&c->w);
        if (res != STORE_ACCEPTED) {
            lock_call_refuse(
                c, 503,
                "the mark store cannot be read: a fence must be above "
                "the resource's mark; no new work starts");
        } else if (mark == INT64_MAX) {
            lock_call_refuse(c, 503,
                             "the resource's mark is at the largest token: "
                             "no fence is above it");
        }
        lock_call_finish(c);
        return;
    }
    if (c->min_fence <= mark) {
        c->min_fence = mark + 1;
    }
    submit(c, LOCK_OP_ACQUIRE, acquired);
}

/* Every try at the lease first reads the resource's mark from the store,
 * not only the cache: a fence equal to the mark is a token that a holder
 * may be writing with already (the counter behind the mark: a restored
 * lease file, a lost Redis increment, tokens issued elsewhere, another
 * sidecar), and both would pass the fence. The backend then hands out at
 * least mark + 1, eager or not. While routes keep subtree marks the
 * floor is the subtree mark too, if higher: a collection's new holder
 * must pass the marks of its members (doc/guide.md, "WebDAV collections"). The
 * caller then calls lock_call_finish (c goes when it could not be asked:
 * answered 503). */
static void
start_acquire(struct lock_call *c)
{
    if (!fence_get_floor(c->ls->fence, c->name, c->len, floor_read, c)) {
        waiter_tried(&c->w);
        lock_call_refuse(c, 503, "out of memory");
        return;
    }
    c->in_flight = true;
}

/* The turn of the head of a queue of waiters (waiters.h). */
static void
try_head(void *arg)
{
    struct lock_call *c = arg;

    start_acquire(c);
    lock_call_finish(c);
}

static void
deadline_cb(evutil_socket_t fd, short what, void *arg)
{
    struct lock_call *c = arg;

    lib_enter(c->ls->log);
    (void)fd;
    (void)what;
    if (c->in_flight) {
        /* The answer in flight decides: a lease won now is kept. */
        c->timed_out = true;
        return;
    }
    lock_call_busy(c, 0, 0, "waited wait_ms; the lock did not come free");
    lock_call_finish(c);
}

/* ---- the other calls ------------------------------------------------- */

/* An extend or release that failed: 409 when the lease is gone or
 * another's (LOCK_LOST), else 503. */
static void
not_changed(struct lock_call *c, enum lock_result res)
{
    if (res == LOCK_LOST) {
        lock_call_lost(c);
    } else {
        lock_call_down(c);
    }
}

static void
extended(void *arg, enum lock_result res, int64_t fence, int64_t ttl_ms)
{
    struct lock_call *c = arg;

    if (!landed(c)) {
        return;
    }
    if (res == LOCK_OK) {
        metrics_lock_call(c->ls->calls.metrics, LOCK_OUT_EXTENDED);
        lock_log_lease("extended", c->name, c->len, c->holder, c->fence,
                       ttl_ms);
        (void)lock_call_lease(c, 200, ttl_ms);
    } else {
        not_changed(c, res);
    }
    lock_call_finish(c);
}

static void
released(void *arg, enum lock_result res, int64_t fence, int64_t ttl_ms)
{
    struct lock_call *c = arg;
    struct lock_service *ls = c->ls;

    if (!landed(c)) {
        return;
    }
    if (res == LOCK_OK) {
        metrics_lock_call(ls->calls.metrics, LOCK_OUT_RELEASED);
        lock_log_lease("released", c->name, c->len, c->holder, c->fence, 0);
        recent_lease_gone(ls->calls.recent, c->name, c->len, c->fence);
        if (c->req != NULL) {
            lock_call_no_content(c);
        }
        waiters_kick(ls->waiters, c->name, c->len);
    } else {
        not_changed(c, res);
    }
    lock_call_finish(c);
}

/* The lease is answered with its resource's mark (unknown when the
 * store cannot be read). */
static void
mark_read(void *arg, enum store_result res, int64_t mark)
{
    struct lock_call *c = arg;

    if (!landed(c)) {
        return;
    }
    lock_call_status(c, c->fence, c->ttl_ms, res == STORE_ACCEPTED ? mark : -1);
    lock_call_finish(c);
}

static void
looked_up(void *arg, enum lock_result res, int64_t fence, int64_t ttl_ms)
{
    struct lock_call *c = arg;

    if (!landed(c)) {
        return;
    }
    if (c->req == NULL) {
        lock_call_finish(c);
        return;
    }
    if (res == LOCK_NONE) {
        struct problem p = {.status = 404,
                            .type = "urn:tidemark:no-lock",
                            .title = "No lease",
                            .detail = "nobody holds this lock"};
        lock_call_problem(c, &p);
    } else if (res != LOCK_OK) {
        lock_call_down(c);
    } else {
        c->fence = fence;
        c->ttl_ms = ttl_ms;
        if (fence_get(c->ls->fence, c->name, c->len, mark_read, c)) {
            c->in_flight = true;
            return;
        }
        lock_call_status(c, fence, ttl_ms, -1);
    }
    lock_call_finish(c);
}

/* POST: take the lock now, or queue behind earlier waiters. */
static void
serve_acquire(struct lock_call *c, const struct evkeyvalq *q)
{
    struct lock_service *ls = c->ls;
    struct waitq *wq;

    if (!lock_call_ttl(c, q) || !lock_call_wait(c, q)) {
        return;
    }
    if (c->wait_ms > 0) {
        struct timeval tv = {(time_t)(c->wait_ms / 1000),
                             (suseconds_t)(c->wait_ms % 1000) * 1000};

        c->deadline = evtimer_new(ls->base, deadline_cb, c);
        if (c->deadline == NULL || evtimer_add(c->deadline, &tv) != 0) {
            lock_call_down(c);
            return;
        }
    }
    /* A backend that queues waiters itself (lock.h) gets every one;
     * a waiter that hangs up is noticed all the same. */
    if (ls->ops->waits && c->wait_ms > 0) {
        lock_call_watch_peer(c);
    }
    wq = ls->ops->waits ? NULL : waiters_find(ls->waiters, c->name, c->len);
    if (wq != NULL) {
        /* Earlier callers wait for this lock: their turn comes first. */
        if (c->wait_ms == 0) {
            lock_call_busy(c, 0, 0, "other callers are waiting for this lock");
            return;
        }
        wait_in(wq, c);
        return;
    }
    start_acquire(c);
}

/* Why the query (raw, and q parsed from it) reads more than one way,
 * or NULL: a key given twice (which one counts?), a NUL in a value (the
 * value ends there: "ttl_ms=1%00x" would read as 1). */
static const char *
query_ambiguous(const char *raw, const struct evkeyvalq *q)
{
    const struct evkeyval *a, *b;

    if (strstr(raw, "%00") != NULL) {
        return "a NUL (%00) in the query string";
    }
    TAILQ_FOREACH(a, q, next)
    {
        for (b = TAILQ_NEXT(a, next); b != NULL; b = TAILQ_NEXT(b, next)) {
            if (strcmp(a->key, b->key) == 0) {
                return "a query key is repeated (given twice)";
            }
        }
    }
    return NULL;
}

void
lock_service_serve(struct lock_service *ls, struct evhttp_request *req,
                   const char *path, const char *query)
{
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    struct evkeyvalq q = {0};
    struct lock_call *c;
    size_t len = 0;
    char name[TM_RESOURCE_MAX + 1];
    const char *why;

    TAILQ_INIT(&q);
    /* The one canonical name (UTF-8 on every backend: Postgres keeps
     * names as text, and the name comes back in JSON). */
    if (!canon_name(path, strlen(path), name, sizeof(name), &len, &why)) {
        char detail[200];
        struct problem p = {.status = 400, .detail = detail};

        snprintf(detail, sizeof(detail),
                 "bad lock name: %s (1 to 512 bytes of UTF-8 in canonical "
                 "form)",
                 why);
        adm_reply_problem(req, &p);
        return;
    }
    c = lock_call_new(&ls->calls, ls, req, name, len);
    if (c == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    if (query != NULL && evhttp_parse_query_str(query, &q) != 0) {
        lock_call_refuse(c, 400, "the query string is malformed");
        goto out;
    }
    if (query != NULL && (why = query_ambiguous(query, &q)) != NULL) {
        lock_call_refuse(c, 400, why);
        goto out;
    }
    switch (cmd) {
    case EVHTTP_REQ_POST:
        serve_acquire(c, &q);
        break;
    case EVHTTP_REQ_PATCH:
        if (lock_call_token(c, &q) && lock_call_ttl(c, &q)) {
            submit(c, LOCK_OP_EXTEND, extended);
        }
        break;
    case EVHTTP_REQ_DELETE:
        if (lock_call_token(c, &q)) {
            submit(c, LOCK_OP_RELEASE, released);
        }
        break;
    case EVHTTP_REQ_GET:
    case EVHTTP_REQ_HEAD:
        submit(c, LOCK_OP_STATUS, looked_up);
        break;
    default:
        lock_call_refuse(c, 400, "locks take POST, PATCH, DELETE and GET");
        break;
    }
out:
    evhttp_clear_headers(&q);
    lock_call_finish(c);
}

/* The backend saw a lease of name end elsewhere (lock.h): the first
 * waiter tries now instead of at the holder's lease end. */
static void
lease_freed(void *arg, const char *name, size_t len)
{
    struct lock_service *ls = arg;

    if (!ls->closing) {
        waiters_kick(ls->waiters, name, len);
    }
}

static void
lease_expired(const struct recent_lock *l)
{
    lock_log_lease("expired", l->name, strlen(l->name), l->holder, l->fence, 0);
}

/* Each second: the leases handed out here whose time ran out, neither
 * extended nor released through this sidecar. */
static void
sweep_cb(evutil_socket_t fd, short what, void *arg)
{
    struct lock_service *ls = arg;

    (void)fd;
    (void)what;
    lib_enter(ls->log);
    recent_leases_end(ls->calls.recent, recent_now_ms(), lease_expired);
}

void
lock_service_submit(struct lock_service *ls, const struct lock_op *op)
{
    ls->ops->submit(ls->b, op);
}

bool
lock_service_ready(struct lock_service *ls)
{
    return ls->ops->ready(ls->b);
}

void
lock_service_metrics(struct lock_service *ls, struct evbuffer *b)
{
    metrics_head(b, MID_tidemark_lock_backend_up);
    metrics_value(b, MID_tidemark_lock_backend_up, lock_service_ready(ls));
    metrics_head(b, MID_tidemark_lock_waiting);
    metrics_value(b, MID_tidemark_lock_waiting,
                  (double)waiters_count(ls->waiters));
    if (ls->ops->metrics != NULL) {
        ls->ops->metrics(ls->b, b);
    }
}

struct lock_service *
lock_service_new(struct event_base *base, const struct tm_log *log,
                 struct fence *fence, struct metrics *metrics,
                 struct recent *recent, const struct tm_config *cfg, char *err,
                 size_t errlen)
{
    struct lock_service *ls = calloc(1, sizeof(*ls));

    if (ls == NULL) {
        snprintf(err, errlen, "locks: out of memory");
        return NULL;
    }
    ls->base = base;
    ls->log = log;
    ls->fence = fence;
    ls->cfg = &cfg->locks;
    ls->calls.base = base;
    ls->calls.log = log;
    ls->calls.cfg = &cfg->locks;
    ls->calls.tokens = &cfg->tokens;
    ls->calls.metrics = metrics;
    ls->calls.recent = recent;
    ls->ops = lock_find(cfg->locks.backend);
    if (ls->ops == NULL) {
        snprintf(err, errlen, "locks: backend %s is not available",
                 cfg->locks.backend != NULL ? cfg->locks.backend : "-");
        free(ls);
        return NULL;
    }
    ls->waiters = waiters_new(base, log, try_head);
    ls->sweep = event_new(base, -1, EV_PERSIST, sweep_cb, ls);
    if (ls->waiters == NULL || ls->sweep == NULL ||
        event_add(ls->sweep, &(struct timeval){1, 0}) != 0) {
        if (ls->sweep != NULL) {
            event_free(ls->sweep);
        }
        waiters_free(ls->waiters);
        snprintf(err, errlen, "locks: out of memory");
        free(ls);
        return NULL;
    }
    ls->b = ls->ops->open(base, &cfg->locks, err, errlen);
    if (ls->b == NULL) {
        event_free(ls->sweep);
        waiters_free(ls->waiters);
        free(ls);
        return NULL;
    }
    if (ls->ops->watch_freed != NULL) {
        ls->ops->watch_freed(ls->b, lease_freed, ls);
    }
    return ls;
}

void
lock_service_free(struct lock_service *ls)
{
    struct lock_call *c, *next;

    if (ls == NULL) {
        return;
    }
    ls->closing = true;
    event_free(ls->sweep);
    waiters_free(ls->waiters);
    ls->waiters = NULL;
    /* Calls not in flight go now: nobody can be answered any more. */
    for (c = ls->calls.head; c != NULL; c = next) {
        next = c->next;
        if (!c->in_flight) {
            drop(c);
        }
    }
    /* Runs the callbacks of queued operations: they only finish. */
    ls->ops->close(ls->b);
    /* What is left waits for the mark store, closed after us: it frees
     * itself when its raise is answered. */
    for (c = ls->calls.head; c != NULL; c = next) {
        next = c->next;
        lock_call_detach(c);
        if (c->deadline != NULL) {
            event_free(c->deadline);
            c->deadline = NULL;
        }
        if (c->peer != NULL) {
            event_free(c->peer);
            c->peer = NULL;
        }
        c->set = NULL;
        c->ls = NULL;
        c->prev = NULL;
        c->next = NULL;
    }
    free(ls);
}
