/* adm_locks.c: the lock service on the control port: acquire (with an
 * optional wait, waiters served in arrival order), extend, release and
 * look up leases; eager fencing and signed tokens on the way out. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>

/* proxy_int.h before event2/http.h, which defines HTTP_OK as a macro. */
#include "../conf/cfg.h"
#include "../policies/canon.h"
#include "../policies/token.h"
#include "fence.h"
#include "locks/lock.h"
#include "log.h"
#include "metrics.h"
#include "problem.h"
#include "proxy_int.h"
#include "adm_int.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

struct lock_queue;

/*
 * One HTTP call. It lives while someone holds it: the client (req, until
 * answered or gone) or a backend or the mark store (in_flight: the call
 * is the argument of a callback still to come). call_finish frees it
 * once neither holds it.
 */
struct lock_call {
    struct lock_call *prev, *next; /* al->calls */
    struct lock_call *qnext;       /* in q, arrival order */
    struct lock_queue *q;          /* the queue it waits in, or NULL */
    struct adm_locks *al;          /* NULL: the service is gone */
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
    bool timed_out; /* the deadline passed in flight */
    size_t len;
    char name[]; /* len bytes and a NUL */
};

/* The acquires waiting for one name; only the head ever asks the
 * backend, so the lock goes to waiters in arrival order. */
struct lock_queue {
    struct lock_queue *prev, *next; /* al->queues */
    struct adm_locks *al;
    struct lock_call *head, *tail;
    struct event *retry; /* the holder's lease ends */
    bool trying;         /* the head's acquire is in flight */
    size_t len;
    char name[];
};

struct adm_locks {
    struct tm_proxy *px;
    const struct cfg_locks *cfg;
    const struct cfg_tokens *tokens;
    const struct lock_ops *ops;
    struct lock_backend *b;
    struct lock_call *calls;
    struct lock_queue *queues;
    bool closing;
};

static void queue_try(struct lock_queue *q);

/* Ask the backend for kind on c's lock; cb(c, ...) answers. c is in
 * flight until then. */
static void
submit(struct lock_call *c, enum lock_kind kind, lock_cb cb)
{
    struct adm_locks *al = c->al;
    struct lock_op op = {.kind = kind,
                         .name = c->name,
                         .len = c->len,
                         .ttl_ms = c->ttl_ms,
                         .fence = c->fence,
                         .min_fence = c->min_fence,
                         .cb = cb,
                         .arg = c};

    c->in_flight = true;
    al->ops->submit(al->b, &op);
}

/* ---- calls and queues ------------------------------------------------ */

static void conn_closed(struct evhttp_connection *conn, void *arg);

static struct lock_call *
call_new(struct adm_locks *al, struct evhttp_request *req, const char *name,
         size_t len)
{
    struct lock_call *c = calloc(1, sizeof(*c) + len + 1);

    if (c == NULL) {
        return NULL;
    }
    c->al = al;
    c->req = req;
    c->conn = evhttp_request_get_connection(req);
    c->len = len;
    memcpy(c->name, name, len);
    c->next = al->calls;
    if (al->calls != NULL) {
        al->calls->prev = c;
    }
    al->calls = c;
    evhttp_connection_set_closecb(c->conn, conn_closed, c);
    return c;
}

/* The client will not be answered any more. */
static void
call_detach(struct lock_call *c)
{
    if (c->req != NULL) {
        evhttp_connection_set_closecb(c->conn, NULL, NULL);
        c->req = NULL;
    }
}

static void
queue_free(struct lock_queue *q)
{
    struct adm_locks *al = q->al;

    if (q->prev != NULL) {
        q->prev->next = q->next;
    } else {
        al->queues = q->next;
    }
    if (q->next != NULL) {
        q->next->prev = q->prev;
    }
    event_free(q->retry);
    free(q);
}

/* Take c out of its queue; a queue left empty goes. try_next: when c
 * was the head, the next waiter asks at once (c gave up its turn). */
static void
queue_remove(struct lock_call *c, bool try_next)
{
    struct lock_queue *q = c->q;
    struct lock_call **pp;
    struct lock_call *prev = NULL;
    bool was_head = q != NULL && q->head == c;

    if (q == NULL) {
        return;
    }
    for (pp = &q->head; *pp != NULL; pp = &(*pp)->qnext) {
        if (*pp == c) {
            *pp = c->qnext;
            if (q->tail == c) {
                q->tail = prev;
            }
            break;
        }
        prev = *pp;
    }
    c->q = NULL;
    c->qnext = NULL;
    if (q->head == NULL) {
        queue_free(q);
    } else if (try_next && was_head && !q->trying) {
        queue_try(q);
    }
}

/* Free c unless its client (req) or a callback (in_flight) still holds
 * it. */
static void
call_finish(struct lock_call *c)
{
    if (c->in_flight || c->req != NULL) {
        return;
    }
    if (c->q != NULL) {
        queue_remove(c, true);
    }
    if (c->deadline != NULL) {
        event_free(c->deadline);
    }
    if (c->peer != NULL) {
        event_free(c->peer);
    }
    if (c->al != NULL) {
        if (c->prev != NULL) {
            c->prev->next = c->next;
        } else {
            c->al->calls = c->next;
        }
        if (c->next != NULL) {
            c->next->prev = c->prev;
        }
    }
    free(c);
}

static void
conn_closed(struct evhttp_connection *conn, void *arg)
{
    struct lock_call *c = arg;

    lib_enter(&c->al->px->log);
    (void)conn;
    c->req = NULL;
    call_finish(c);
}

static struct lock_queue *
queue_find(struct adm_locks *al, const char *name, size_t len)
{
    for (struct lock_queue *q = al->queues; q != NULL; q = q->next) {
        if (q->len == len && memcmp(q->name, name, len) == 0) {
            return q;
        }
    }
    return NULL;
}

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
    lib_enter(&((struct lock_queue *)arg)->al->px->log);
    (void)fd;
    (void)what;
    queue_try(arg);
}

/* The queue of c's name, made when missing; NULL when out of memory. */
static struct lock_queue *
queue_get(struct adm_locks *al, const char *name, size_t len)
{
    struct lock_queue *q = queue_find(al, name, len);

    if (q != NULL) {
        return q;
    }
    q = calloc(1, sizeof(*q) + len + 1);
    if (q == NULL) {
        return NULL;
    }
    q->retry = evtimer_new(al->px->base, retry_cb, q);
    if (q->retry == NULL) {
        free(q);
        return NULL;
    }
    q->al = al;
    q->len = len;
    memcpy(q->name, name, len);
    q->next = al->queues;
    if (al->queues != NULL) {
        al->queues->prev = q;
    }
    al->queues = q;
    return q;
}

/* The waiting client's socket became readable. evhttp does not watch a
 * connection while its request waits for an answer, so a waiter that
 * hangs up would otherwise get the lock and hold it for its whole TTL:
 * on EOF, close the connection (conn_closed drops the call). */
static void
peer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct lock_call *c = arg;
    char byte;
    ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);

    lib_enter(&c->al->px->log);
    (void)what;
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) {
        return; /* bytes of a next request: evhttp reads them later */
    }
    if (c->req != NULL) {
        evhttp_connection_free(c->conn);
    }
}

/* Watch a waiting call's client for a hang-up; best effort. */
static void
watch_peer(struct lock_call *c)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(c->conn);
    evutil_socket_t fd = bev != NULL ? bufferevent_getfd(bev) : -1;

    if (c->peer != NULL || fd < 0) {
        return;
    }
    c->peer = event_new(c->al->px->base, fd, EV_READ, peer_cb, c);
    if (c->peer != NULL) {
        event_add(c->peer, NULL);
    }
}

static void
queue_push(struct lock_queue *q, struct lock_call *c)
{
    log_debug("locks: waiting: name=%s wait_ms=%" PRId64, c->name, c->wait_ms);
    watch_peer(c);
    c->q = q;
    c->qnext = NULL;
    if (q->tail == NULL) {
        q->head = c;
    } else {
        q->tail->qnext = c;
    }
    q->tail = c;
}

/* Try the head again when the lease that blocks it ends (ttl_ms from
 * now), unless a release wakes the queue first. */
static void
queue_arm(struct lock_queue *q, int64_t ttl_ms)
{
    struct timeval tv;

    ttl_ms += 1;
    tv.tv_sec = (time_t)(ttl_ms / 1000);
    tv.tv_usec = (suseconds_t)(ttl_ms % 1000) * 1000;
    evtimer_add(q->retry, &tv);
}

/* A lease of name ended here: its first waiter tries now. */
static void
queue_kick(struct adm_locks *al, const char *name, size_t len)
{
    struct lock_queue *q = queue_find(al, name, len);

    if (q != NULL && !q->trying) {
        evtimer_del(q->retry);
        queue_try(q);
    }
}

/* ---- answers --------------------------------------------------------- */

static void
problem_out(struct lock_call *c, struct problem *p)
{
    if (c->req == NULL) {
        return;
    }
    p->resource = c->name;
    log_at(p->status == 423 || p->status == 404 ? TM_LOG_DEBUG
           : p->status >= 500                   ? TM_LOG_WARN
                                                : TM_LOG_INFO,
           "locks: refused %d: name=%s fence=%" PRId64 ": %s", p->status,
           c->name, c->fence, p->detail != NULL ? p->detail : "-");
    adm_reply_problem(c->req, p);
    call_detach(c);
}

static void
refuse(struct lock_call *c, int status, const char *detail)
{
    struct problem p = {.status = status, .detail = detail};

    problem_out(c, &p);
}

static void
lost(struct lock_call *c)
{
    struct problem p = {
        .status = 409,
        .type = "urn:tidemark:lock-lost",
        .title = "Lock lost",
        .detail = "the lease is gone or belongs to another holder: stop "
                  "the work",
    };

    metrics_lock_call(c->al->px->metrics, LOCK_OUT_LOST);
    recent_lease_gone(&c->al->px->recent, c->name, c->len, c->fence);
    problem_out(c, &p);
}

static void
backend_down(struct lock_call *c)
{
    struct problem p = {
        .status = 503,
        .type = "urn:tidemark:lock-backend-unavailable",
        .title = "Lock backend unavailable",
        .detail = "the lock backend cannot be used; no new work starts",
        .retry_after = 1,
    };

    metrics_lock_call(c->al->px->metrics, LOCK_OUT_ERROR);
    problem_out(c, &p);
}

static void
busy(struct lock_call *c, int64_t fence, int64_t ttl_ms, const char *why)
{
    char extra[64];
    struct problem p = {.status = 423, .detail = why};

    if (fence > 0) {
        snprintf(extra, sizeof(extra),
                 "\"fence\":%" PRId64 ",\"ttl_ms\":%" PRId64, fence, ttl_ms);
        p.extra = extra;
        p.retry_after = (int)((ttl_ms + 999) / 1000);
    }
    metrics_lock_call(c->al->px->metrics, LOCK_OUT_BUSY);
    problem_out(c, &p);
}

/* 200 or 201 with {"name","token","fence","ttl_ms"}. false when the
 * answer could not be made (the client got a 500 or 503 instead). */
static bool
lease_out(struct lock_call *c, int code, int64_t ttl_ms)
{
    const struct cfg_tokens *tk = c->al->tokens;
    struct evbuffer *b;
    char token[TOKEN_SIGNED_MAX + 1];

    if (c->req == NULL) {
        return false;
    }
    if (tk->key != NULL) {
        if (token_sign(tk->key, tk->key_len, c->name, c->len, c->fence, token,
                       sizeof(token)) == 0) {
            backend_down(c);
            return false;
        }
    } else {
        snprintf(token, sizeof(token), "%" PRId64, c->fence);
    }
    b = evbuffer_new();
    if (b == NULL) {
        evhttp_send_error(c->req, 500, NULL);
        call_detach(c);
        return false;
    }
    recent_lease(&c->al->px->recent, c->name, c->len, c->fence, ttl_ms);
    evbuffer_add(b, "{\"name\":\"", 9);
    json_escape(b, c->name, c->len);
    evbuffer_add_printf(b,
                        "\",\"token\":\"%s\",\"fence\":%" PRId64
                        ",\"ttl_ms\":%" PRId64 "}\n",
                        token, c->fence, ttl_ms);
    adm_reply(c->req, code, code == 201 ? "Created" : "OK", "application/json",
              b);
    evbuffer_free(b);
    call_detach(c);
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
    if (c->al != NULL && !c->al->closing && res == LOCK_OK) {
        queue_kick(c->al, c->name, c->len);
    }
    call_finish(c);
}

/* A lease was taken for c, but c cannot use it (its client left, or the
 * mark could not be raised): give it back at once. */
static void
give_back(struct lock_call *c)
{
    struct adm_locks *al = c->al;

    call_detach(c);
    if (al->closing) {
        call_detach(c);
        call_finish(c);
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
    c->in_flight = false;
    if (c->al == NULL || c->al->closing) {
        call_detach(c);
        call_finish(c);
        return;
    }
    if (res == LOCK_ERROR) {
        backend_down(c);
        call_finish(c);
        return;
    }
    if (c->req == NULL) {
        call_finish(c);
        return;
    }
    start_acquire(c);
    call_finish(c);
}

static void
raised(void *arg, enum store_result res, int64_t mark)
{
    struct lock_call *c = arg;
    struct adm_locks *al = c->al;

    c->in_flight = false;
    if (al == NULL || al->closing) {
        call_detach(c);
        call_finish(c);
        return;
    }
    if (res == STORE_ACCEPTED && c->req != NULL &&
        lease_out(c, 201, c->ttl_ms)) {
        metrics_lock_call(al->px->metrics, LOCK_OUT_ACQUIRED);
        call_finish(c);
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
                 c->name, mark, c->fence);
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
        log_error("locks: %s: %s", c->name, why);
        refuse(c, 503, why);
    } else if (res == STORE_ERROR) {
        refuse(c, 503,
               "the mark store cannot raise the resource's mark "
               "(eager fencing); no new work starts");
    }
    give_back(c);
}

static void
acquired(void *arg, enum lock_result res, int64_t fence, int64_t ttl_ms)
{
    struct lock_call *c = arg;
    struct adm_locks *al = c->al;
    struct lock_queue *q = c->q;

    c->in_flight = false;
    if (q != NULL && q->head == c) {
        q->trying = false;
    }
    if (al->closing) {
        call_detach(c);
        call_finish(c);
        return;
    }
    if (res == LOCK_OK) {
        c->fence = fence;
        if (q != NULL) {
            /* The next waiter's turn comes at this lease's end, or at
             * its release. */
            queue_remove(c, false);
            q = queue_find(al, c->name, c->len);
            if (q != NULL) {
                queue_arm(q, ttl_ms);
            }
        }
        if (c->req == NULL) {
            give_back(c);
            return;
        }
        if (al->cfg->eager) {
            if (fence_raise(al->px->fence, c->name, c->len, fence, raised, c) ==
                NULL) {
                refuse(c, 503, "out of memory");
                give_back(c);
                return;
            }
            c->in_flight = true;
            return;
        }
        if (!lease_out(c, 201, ttl_ms)) {
            give_back(c);
            return;
        }
        metrics_lock_call(al->px->metrics, LOCK_OUT_ACQUIRED);
        call_finish(c);
        return;
    }
    if (res == LOCK_BUSY && c->req != NULL && c->wait_ms > 0 && !c->timed_out) {
        if (q == NULL) {
            q = queue_get(al, c->name, c->len);
            if (q == NULL) {
                backend_down(c);
                call_finish(c);
                return;
            }
            queue_push(q, c);
        }
        if (q->head == c) {
            queue_arm(q, ttl_ms);
        }
        return;
    }
    if (res == LOCK_BUSY) {
        busy(c, fence, ttl_ms,
             c->timed_out ? "waited wait_ms; another holder's lease is "
                            "still live"
                          : NULL);
    } else {
        backend_down(c);
    }
    call_finish(c);
}

/* The store's mark of c's resource is read: ask the backend for a lease
 * whose fence is above it. */
static void
floor_read(void *arg, enum store_result res, int64_t mark)
{
    struct lock_call *c = arg;
    struct adm_locks *al = c->al;
    struct lock_queue *q = c->q;

    c->in_flight = false;
    if (al == NULL || al->closing) {
        call_detach(c);
        call_finish(c);
        return;
    }
    /* fence_get lifted the mark to the cached one: a store that lost
     * marks (Redis on a failover) does not lower the floor. */
    if (res != STORE_ACCEPTED || mark == INT64_MAX || c->req == NULL) {
        if (q != NULL && q->head == c) {
            q->trying = false;
        }
        if (res != STORE_ACCEPTED) {
            refuse(c, 503,
                   "the mark store cannot be read: a fence must be above "
                   "the resource's mark; no new work starts");
        } else if (mark == INT64_MAX) {
            refuse(c, 503,
                   "the resource's mark is at the largest token: "
                   "no fence is above it");
        }
        call_finish(c);
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
 * least mark + 1, eager or not. The caller then calls call_finish (c
 * goes when it could not be asked: answered 503). */
static void
start_acquire(struct lock_call *c)
{
    struct lock_queue *q = c->q;

    if (!fence_get(c->al->px->fence, c->name, c->len, floor_read, c)) {
        if (q != NULL && q->head == c) {
            q->trying = false;
        }
        refuse(c, 503, "out of memory");
        return;
    }
    c->in_flight = true;
}

static void
queue_try(struct lock_queue *q)
{
    struct lock_call *c = q->head;

    if (c == NULL || q->trying) {
        return;
    }
    q->trying = true;
    start_acquire(c);
    call_finish(c);
}

static void
deadline_cb(evutil_socket_t fd, short what, void *arg)
{
    struct lock_call *c = arg;

    lib_enter(&c->al->px->log);
    (void)fd;
    (void)what;
    if (c->in_flight) {
        /* The answer in flight decides: a lease won now is kept. */
        c->timed_out = true;
        return;
    }
    busy(c, 0, 0, "waited wait_ms; the lock did not come free");
    call_finish(c);
}

/* ---- parsing --------------------------------------------------------- */

/* A decimal integer in [lo, hi]: 1 with *out set, 0 when absent, -1 when
 * malformed or out of range. */
static int
query_int(const struct evkeyvalq *q, const char *key, int64_t lo, int64_t hi,
          int64_t *out)
{
    const char *v = evhttp_find_header(q, key);
    int64_t n = 0;

    if (v == NULL) {
        return 0;
    }
    if (*v == '\0' || strlen(v) > 18) {
        return -1;
    }
    for (const char *p = v; *p != '\0'; p++) {
        if (*p < '0' || *p > '9') {
            return -1;
        }
        n = n * 10 + (*p - '0');
    }
    if (n < lo || n > hi) {
        return -1;
    }
    *out = n;
    return 1;
}

/* The ttl_ms of an acquire or extend; false after answering 400. */
static bool
parse_ttl(struct lock_call *c, const struct evkeyvalq *q)
{
    char why[128];
    int rc = query_int(q, "ttl_ms", 1, c->al->cfg->max_ttl_ms, &c->ttl_ms);

    if (rc == 1) {
        return true;
    }
    snprintf(why, sizeof(why),
             "ttl_ms is %s: milliseconds, 1 to %d ([locks] max_ttl_ms)",
             rc == 0 ? "required" : "malformed or out of range",
             c->al->cfg->max_ttl_ms);
    refuse(c, 400, why);
    return false;
}

/* The token of an extend or release; false after answering 400 or 403.
 * With a key, only a token signed for this name is taken. */
static bool
parse_token(struct lock_call *c, const struct evkeyvalq *q)
{
    const struct cfg_tokens *tk = c->al->tokens;
    const char *v = evhttp_find_header(q, "token");
    enum token_status ts;

    if (v == NULL || *v == '\0') {
        refuse(c, 400, "token is required: the token the acquire returned");
        return false;
    }
    ts = token_check(tk->key != NULL ? TM_VERIFY_HMAC : TM_VERIFY_NONE, tk->key,
                     tk->key_len, c->name, c->len, v, strlen(v), &c->fence);
    if (ts == TOKEN_FORBIDDEN) {
        refuse(c, 403,
               "the token is unsigned, forged or issued for another "
               "lock");
        return false;
    }
    if (ts != TOKEN_OK) {
        refuse(c, 400, "the token is malformed");
        return false;
    }
    return true;
}

/* ---- the other calls ------------------------------------------------- */

static void
extended(void *arg, enum lock_result res, int64_t fence, int64_t ttl_ms)
{
    struct lock_call *c = arg;

    c->in_flight = false;
    if (c->al->closing) {
        call_detach(c);
        call_finish(c);
        return;
    }
    if (res == LOCK_OK) {
        metrics_lock_call(c->al->px->metrics, LOCK_OUT_EXTENDED);
        (void)lease_out(c, 200, ttl_ms);
    } else if (res == LOCK_LOST) {
        lost(c);
    } else {
        backend_down(c);
    }
    call_finish(c);
}

static void
released(void *arg, enum lock_result res, int64_t fence, int64_t ttl_ms)
{
    struct lock_call *c = arg;
    struct adm_locks *al = c->al;

    c->in_flight = false;
    if (al->closing) {
        call_detach(c);
        call_finish(c);
        return;
    }
    if (res == LOCK_OK) {
        metrics_lock_call(al->px->metrics, LOCK_OUT_RELEASED);
        recent_lease_gone(&al->px->recent, c->name, c->len, c->fence);
        if (c->req != NULL) {
            evhttp_send_reply(c->req, 204, "No Content", NULL);
            call_detach(c);
        }
        queue_kick(al, c->name, c->len);
    } else if (res == LOCK_LOST) {
        lost(c);
    } else {
        backend_down(c);
    }
    call_finish(c);
}

static void
looked_up(void *arg, enum lock_result res, int64_t fence, int64_t ttl_ms)
{
    struct lock_call *c = arg;
    struct evbuffer *b;

    c->in_flight = false;
    if (c->al->closing || c->req == NULL) {
        call_detach(c);
        call_finish(c);
        return;
    }
    if (res == LOCK_NONE) {
        struct problem p = {.status = 404,
                            .type = "urn:tidemark:no-lock",
                            .title = "No lease",
                            .detail = "nobody holds this lock"};
        problem_out(c, &p);
    } else if (res != LOCK_OK || (b = evbuffer_new()) == NULL) {
        backend_down(c);
    } else {
        evbuffer_add(b, "{\"name\":\"", 9);
        json_escape(b, c->name, c->len);
        evbuffer_add_printf(
            b, "\",\"fence\":%" PRId64 ",\"ttl_ms\":%" PRId64 "}\n", fence,
            ttl_ms);
        adm_reply(c->req, 200, "OK", "application/json", b);
        evbuffer_free(b);
        call_detach(c);
    }
    call_finish(c);
}

/* POST: take the lock now, or queue behind earlier waiters. */
static void
serve_acquire(struct lock_call *c, const struct evkeyvalq *q)
{
    struct adm_locks *al = c->al;
    struct lock_queue *wq;
    char why[96];
    int rc;

    if (!parse_ttl(c, q)) {
        return;
    }
    rc = query_int(q, "wait_ms", 0, al->cfg->max_wait_ms, &c->wait_ms);
    if (rc < 0) {
        snprintf(why, sizeof(why),
                 "wait_ms is malformed or out of range: 0 to %d ([locks] "
                 "max_wait_ms)",
                 al->cfg->max_wait_ms);
        refuse(c, 400, why);
        return;
    }
    if (c->wait_ms > 0) {
        struct timeval tv = {(time_t)(c->wait_ms / 1000),
                             (suseconds_t)(c->wait_ms % 1000) * 1000};

        c->deadline = evtimer_new(al->px->base, deadline_cb, c);
        if (c->deadline == NULL || evtimer_add(c->deadline, &tv) != 0) {
            backend_down(c);
            return;
        }
    }
    wq = queue_find(al, c->name, c->len);
    if (wq != NULL) {
        /* Earlier callers wait for this lock: their turn comes first. */
        if (c->wait_ms == 0) {
            busy(c, 0, 0, "other callers are waiting for this lock");
            return;
        }
        queue_push(wq, c);
        return;
    }
    start_acquire(c);
}

void
adm_locks_serve(struct adm_locks *al, struct evhttp_request *req,
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
    c = call_new(al, req, name, len);
    if (c == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    if (query != NULL && evhttp_parse_query_str(query, &q) != 0) {
        refuse(c, 400, "the query string is malformed");
        goto out;
    }
    switch (cmd) {
    case EVHTTP_REQ_POST:
        serve_acquire(c, &q);
        break;
    case EVHTTP_REQ_PATCH:
        if (parse_token(c, &q) && parse_ttl(c, &q)) {
            submit(c, LOCK_OP_EXTEND, extended);
        }
        break;
    case EVHTTP_REQ_DELETE:
        if (parse_token(c, &q)) {
            submit(c, LOCK_OP_RELEASE, released);
        }
        break;
    case EVHTTP_REQ_GET:
    case EVHTTP_REQ_HEAD:
        submit(c, LOCK_OP_STATUS, looked_up);
        break;
    default:
        refuse(c, 400, "locks take POST, PATCH, DELETE and GET");
        break;
    }
out:
    evhttp_clear_headers(&q);
    call_finish(c);
}

bool
adm_locks_ready(struct adm_locks *al)
{
    return al->ops->ready(al->b);
}

void
adm_locks_metrics(struct adm_locks *al, struct evbuffer *b)
{
    metrics_head(b, MID_tidemark_lock_backend_up);
    metrics_value(b, MID_tidemark_lock_backend_up, adm_locks_ready(al));
    if (al->ops->metrics != NULL) {
        al->ops->metrics(al->b, b);
    }
}

struct adm_locks *
adm_locks_new(struct tm_proxy *px, char *err, size_t errlen)
{
    const struct tm_config *cfg = px->cfg;
    struct adm_locks *al = calloc(1, sizeof(*al));

    if (al == NULL) {
        snprintf(err, errlen, "locks: out of memory");
        return NULL;
    }
    al->px = px;
    al->cfg = &cfg->locks;
    al->tokens = &cfg->tokens;
    al->ops = lock_find(cfg->locks.backend);
    if (al->ops == NULL) {
        snprintf(err, errlen, "locks: backend %s is not available",
                 cfg->locks.backend != NULL ? cfg->locks.backend : "-");
        free(al);
        return NULL;
    }
    al->b = al->ops->open(px->base, &cfg->locks, err, errlen);
    if (al->b == NULL) {
        free(al);
        return NULL;
    }
    return al;
}

void
adm_locks_free(struct adm_locks *al)
{
    struct lock_call *c, *next;

    if (al == NULL) {
        return;
    }
    al->closing = true;
    while (al->queues != NULL) {
        for (c = al->queues->head; c != NULL; c = c->qnext) {
            c->q = NULL;
        }
        queue_free(al->queues);
    }
    /* Calls not in flight go now: nobody can be answered any more. */
    for (c = al->calls; c != NULL; c = next) {
        next = c->next;
        if (!c->in_flight) {
            call_detach(c);
            call_finish(c);
        }
    }
    /* Runs the callbacks of queued operations: they only finish. */
    al->ops->close(al->b);
    /* What is left waits for the mark store, closed after us: it frees
     * itself when its raise is answered. */
    for (c = al->calls; c != NULL; c = next) {
        next = c->next;
        call_detach(c);
        if (c->deadline != NULL) {
            event_free(c->deadline);
            c->deadline = NULL;
        }
        if (c->peer != NULL) {
            event_free(c->peer);
            c->peer = NULL;
        }
        c->al = NULL;
        c->prev = NULL;
        c->next = NULL;
    }
    free(al);
}
