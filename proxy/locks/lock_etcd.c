/* lock_etcd.c: leases on etcd, the seed's "leases on a consensus store",
 * by etcd's own lock recipe (clientv3/concurrency/mutex.go) over the v3
 * JSON gateway (../clients/etcd_http.c). */
#include "lock_etcd.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "../../conf/cfg.h"
#include "../log.h"
#include "../clients/coldq.h"
#include "../clients/defer.h"

static struct etcd_locks *
to_locks(struct lock_backend *b)
{
    return (struct etcd_locks *)b;
}

/* ---- request life ---------------------------------------------------- */

static void
req_free(struct el_req *r)
{
    struct etcd_locks *s = r->s;

    if (r->prev != NULL) {
        r->prev->next = r->next;
    } else {
        s->reqs = r->next;
    }
    if (r->next != NULL) {
        r->next->prev = r->prev;
    }
    if (r->keepalive != NULL) {
        event_free(r->keepalive);
    }
    if (r->deadline != NULL) {
        event_free(r->deadline);
    }
    etcd_watch_free(r->watch);
    free(r->pfx);
    free(r->mykey);
    free(r);
}

void
ell_req_done(struct el_req *r)
{
    if (r->answered && r->ncalls == 0) {
        req_free(r);
    }
}

static void
ignore_reply(void *arg, const struct etcd_reply *rep)
{
    (void)arg;
    (void)rep;
}

/* Give r's lease back (its key goes with it); answer nobody. */
static void
revoke_quietly(struct el_req *r)
{
    char id[24];

    if (!r->lease_known || r->s->closing) {
        return;
    }
    r->lease_known = false;
    snprintf(id, sizeof(id), "%" PRId64, r->lease);
    if (!etcd_http_call(r->s->h, "/v3/lease/revoke",
                        json_pack("{ss}", "ID", id), ignore_reply, NULL)) {
        log_warn("locks: etcd: %s: cannot revoke lease %" PRIx64
                 "; it ends with its TTL",
                 LOG_ESC(r->name, r->len), (uint64_t)r->lease);
    }
}

/* Answer r once; stop its wait. */
void
ell_answer(struct el_req *r, enum lock_result res, int64_t fence,
           int64_t ttl_ms)
{
    if (r->answered) {
        return;
    }
    r->answered = true;
    if (r->keepalive != NULL) {
        evtimer_del(r->keepalive);
    }
    if (r->deadline != NULL) {
        evtimer_del(r->deadline);
    }
    etcd_watch_free(r->watch);
    r->watch = NULL;
    if (r->kind == LOCK_OP_ACQUIRE && res != LOCK_OK) {
        revoke_quietly(r);
    }
    if (r->in_submit) {
        lock_defer(r->s->defer, r->cb, r->arg, res);
        return;
    }
    r->cb(r->arg, res, fence, ttl_ms);
}

/* Send path(body) for r; cb answers. false after answering LOCK_ERROR. */
bool
ell_call(struct el_req *r, const char *path, json_t *body, etcd_cb cb)
{
    if (etcd_http_call(r->s->h, path, body, cb, r)) {
        r->ncalls++;
        return true;
    }
    ell_answer(r, LOCK_ERROR, 0, 0);
    return false;
}

/* The reply's state for r: false (and r answered LOCK_ERROR when it was
 * not answered yet) when r is over or etcd gave no usable answer. */
bool
ell_reply_ok(struct el_req *r, const struct etcd_reply *rep, const char *what)
{
    r->ncalls--;
    if (r->answered) {
        return false;
    }
    if (rep->st == ETCD_OK) {
        return true;
    }
    if (rep->st == ETCD_FAILED) {
        log_error("locks: etcd: %s: %s: %d %s", LOG_ESC(r->name, r->len), what,
                  rep->http, LOG_STR(rep->message));
    } else if (rep->st == ETCD_NOANSWER && !r->s->closing) {
        log_error("locks: etcd: %s: %s: no answer from any endpoint",
                  LOG_ESC(r->name, r->len), what);
    }
    ell_answer(r, LOCK_ERROR, 0, 0);
    return false;
}

/* ---- JSON pieces ------------------------------------------------------ */

json_t *
ell_b64_str(const char *p, size_t n)
{
    return etcd_b64(p, n);
}

/* A range over r's lock: every key of it, oldest first (limit: 0 all). */
json_t *
ell_range_lock(const struct el_req *r, const char *order, int64_t limit,
               int64_t min_create, int64_t max_create)
{
    json_t *q =
        json_pack("{s:o,s:o,s:s,s:s}", "key", ell_b64_str(r->pfx, r->pfxlen),
                  "range_end", etcd_prefix_end(r->pfx, r->pfxlen),
                  "sort_target", "CREATE", "sort_order", order);
    char n[24];

    if (q != NULL && limit > 0) {
        snprintf(n, sizeof(n), "%" PRId64, limit);
        json_object_set_new(q, "limit", json_string(n));
    }
    if (q != NULL && min_create > 0) {
        snprintf(n, sizeof(n), "%" PRId64, min_create);
        json_object_set_new(q, "min_create_revision", json_string(n));
    }
    if (q != NULL && max_create > 0) {
        snprintf(n, sizeof(n), "%" PRId64, max_create);
        json_object_set_new(q, "max_create_revision", json_string(n));
    }
    return q;
}

/* The first kv of a range answer (an object with "kvs"), or NULL. */
json_t *
ell_first_kv(const json_t *range)
{
    return json_array_get(json_object_get(range, "kvs"), 0);
}

/* response i of a txn answer, of type "response_range" etc. */
json_t *
ell_txn_resp(const json_t *body, size_t i, const char *type)
{
    return json_object_get(
        json_array_get(json_object_get(body, "responses"), i), type);
}

bool
ell_kv_key_is(const json_t *kv, const char *key, size_t klen)
{
    return etcd_key_is(json_object_get(kv, "key"), key, klen);
}

/* ---- status, extend, release ------------------------------------------ */

static void
on_cleared(void *arg, const struct etcd_reply *rep)
{
    struct el_req *r = arg;

    /* Revoked now, or meanwhile by etcd or a release (not found): try
     * to take the lock. */
    if (!r->answered && rep->st == ETCD_FAILED && rep->code == 5) {
        r->ncalls--;
        ell_create_key(r);
    } else if (ell_reply_ok(r, rep, "revoke an expired lease")) {
        ell_create_key(r);
    }
    ell_req_done(r);
}

static void
on_ttl(void *arg, const struct etcd_reply *rep)
{
    struct el_req *r = arg;
    int64_t ttl = 0;

    if (ell_reply_ok(r, rep, "lease time to live")) {
        if (!etcd_ttl(rep->body, "TTL", &ttl)) {
            ell_answer(r, LOCK_ERROR, 0, 0);
        } else if (r->kind == LOCK_OP_ACQUIRE && ttl < 0 && !r->cleared) {
            char id[24];

            /* The holder's lease has ended by etcd's own clock (-1: etcd
             * no longer has it), and etcd has not yet deleted its key:
             * revoke it now, then try once more. Not on 0: etcd cuts the
             * time left to whole seconds toward zero, so 0 is a lease
             * with up to a second left (or one just ended, which etcd's
             * lessor revokes within its next tick). */
            r->cleared = true;
            snprintf(id, sizeof(id), "%" PRId64, r->hlease);
            (void)ell_call(r, "/v3/lease/revoke", json_pack("{ss}", "ID", id),
                           on_cleared);
        } else if (r->kind == LOCK_OP_ACQUIRE) {
            ell_answer(r, LOCK_BUSY, r->fence, ttl > 0 ? ttl * 1000 : 1);
        } else if (ttl >= 0) {
            /* 0: up to a second left, as for an acquire. */
            ell_answer(r, LOCK_OK, r->fence, ttl > 0 ? ttl * 1000 : 1);
        } else {
            ell_answer(r, LOCK_NONE, r->fence,
                       0); /* expired, key not yet gone */
        }
    }
    ell_req_done(r);
}

/* The holder is kv (fence and lease): its time left answers r (status,
 * or a busy acquire). */
void
ell_answer_holder(struct el_req *r, const json_t *kv)
{
    char id[24];
    int64_t lease = 0;

    /* Not into r->lease: an acquire's is ours, to give back. */
    if (!etcd_int(kv, "create_revision", &r->fence) ||
        !etcd_int(kv, "lease", &lease) || r->fence <= 0) {
        ell_answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    r->hlease = lease;
    if (lease == 0) {
        /* A key without a lease (written by hand): held, no end. */
        ell_answer(r, r->kind == LOCK_OP_ACQUIRE ? LOCK_BUSY : LOCK_OK,
                   r->fence, 1);
        return;
    }
    snprintf(id, sizeof(id), "%" PRId64, lease);
    (void)ell_call(r, "/v3/lease/timetolive", json_pack("{ss}", "ID", id),
                   on_ttl);
}

static void
on_status_range(void *arg, const struct etcd_reply *rep)
{
    struct el_req *r = arg;

    if (ell_reply_ok(r, rep, "range")) {
        json_t *kv = ell_first_kv(rep->body);

        if (kv == NULL) {
            ell_answer(r, LOCK_NONE, 0, 0);
        } else {
            ell_answer_holder(r, kv);
        }
    }
    ell_req_done(r);
}

void
ell_on_keepalive(void *arg, const struct etcd_reply *rep)
{
    struct el_req *r = arg;
    json_t *res = json_object_get(rep->body, "result");
    int64_t ttl = 0;

    if (!r->answered && rep->st == ETCD_FAILED && rep->code == 5) {
        /* etcd answers an expired lease's renewal once it has revoked
         * it: not found. */
        r->ncalls--;
        ell_answer(r, LOCK_LOST, r->fence, 0);
    } else if (ell_reply_ok(r, rep, "lease keepalive")) {
        if (!etcd_ttl(res, "TTL", &ttl)) {
            ell_answer(r, LOCK_ERROR, 0, 0);
        } else if (ttl <= 0) {
            ell_answer(r, LOCK_LOST, r->fence, 0); /* the lease is gone */
        } else {
            ell_answer(r, LOCK_OK, r->fence, ttl * 1000);
        }
    }
    ell_req_done(r);
}

static void
on_revoke(void *arg, const struct etcd_reply *rep)
{
    struct el_req *r = arg;

    r->ncalls--;
    if (!r->answered) {
        if (rep->st == ETCD_OK) {
            ell_answer(r, LOCK_OK, r->fence, 0);
        } else if (rep->st == ETCD_FAILED && rep->code == 5 &&
                   rep->tries == 1) {
            ell_answer(r, LOCK_LOST, r->fence, 0); /* expired meanwhile */
        } else {
            /* A second try that finds no lease may follow a first that
             * revoked it: not known, so not answered as lost. */
            r->ncalls++;
            (void)ell_reply_ok(r, rep, "lease revoke");
        }
    }
    ell_req_done(r);
}

static void
on_release_ttl(void *arg, const struct etcd_reply *rep)
{
    struct el_req *r = arg;
    int64_t ttl = 0;
    char id[24];

    if (ell_reply_ok(r, rep, "lease time to live")) {
        if (!etcd_ttl(rep->body, "TTL", &ttl)) {
            ell_answer(r, LOCK_ERROR, 0, 0);
        } else if (ttl <= 0) {
            ell_answer(r, LOCK_LOST, r->fence, 0);
        } else {
            snprintf(id, sizeof(id), "%" PRId64, r->lease);
            (void)ell_call(r, "/v3/lease/revoke", json_pack("{ss}", "ID", id),
                           on_revoke);
        }
    }
    ell_req_done(r);
}

/* Extend and release: find the key whose create revision is the
 * caller's fence, then act on its lease. */
static void
on_find(void *arg, const struct etcd_reply *rep)
{
    struct el_req *r = arg;
    char id[24];

    if (ell_reply_ok(r, rep, "range")) {
        json_t *kv = ell_first_kv(rep->body);
        int64_t rev = 0;

        if (kv == NULL || !etcd_int(kv, "create_revision", &rev) ||
            rev != r->fence || !etcd_int(kv, "lease", &r->lease) ||
            r->lease == 0) {
            ell_answer(r, LOCK_LOST, r->fence, 0);
        } else {
            snprintf(id, sizeof(id), "%" PRId64, r->lease);
            if (r->kind == LOCK_OP_EXTEND) {
                (void)ell_call(r, "/v3/lease/keepalive",
                               json_pack("{ss}", "ID", id), ell_on_keepalive);
            } else {
                /* An expired lease whose key etcd has not deleted yet is
                 * not the caller's any more: look before revoking. */
                (void)ell_call(r, "/v3/lease/timetolive",
                               json_pack("{ss}", "ID", id), on_release_ttl);
            }
        }
    }
    ell_req_done(r);
}

/* ---- the ops ---------------------------------------------------------- */

extern const struct lock_ops lock_etcd_ops;

static void
el_submit(struct lock_backend *b, const struct lock_op *op)
{
    struct etcd_locks *s = to_locks(b);
    struct el_req *r;
    char id[24];

    /* Before etcd's first answer, wait for it (coldq.h). */
    if (!s->closing && !etcd_http_ready(s->h) &&
        lock_park(s->cold, b, &lock_etcd_ops, op)) {
        return;
    }
    if (s->closing || op->len == 0 || op->len > EL_NAME_MAX ||
        !etcd_http_ready(s->h)) {
        lock_defer(s->defer, op->cb, op->arg, LOCK_ERROR);
        return;
    }
    r = calloc(1, sizeof(*r) + op->len + 1);
    if (r != NULL) {
        r->pfx = etcd_key_join(s->prefix, s->plen, op->name, op->len, "//", 2,
                               &r->pfxlen);
    }
    if (r == NULL || r->pfx == NULL) {
        free(r);
        lock_defer(s->defer, op->cb, op->arg, LOCK_ERROR);
        return;
    }
    r->s = s;
    r->kind = op->kind;
    r->cb = op->cb;
    r->arg = op->arg;
    r->ttl_ms = op->ttl_ms;
    r->fence = op->fence;
    r->min_fence = op->min_fence;
    r->wait_ms = op->kind == LOCK_OP_ACQUIRE ? op->wait_ms : 0;
    r->len = op->len;
    memcpy(r->name, op->name, op->len);
    r->next = s->reqs;
    if (s->reqs != NULL) {
        s->reqs->prev = r;
    }
    s->reqs = r;
    r->in_submit = true;
    switch (op->kind) {
    case LOCK_OP_ACQUIRE:
        snprintf(id, sizeof(id), "%" PRId64, (op->ttl_ms + 999) / 1000);
        (void)ell_call(r, "/v3/lease/grant", json_pack("{ss}", "TTL", id),
                       ell_on_grant);
        break;
    case LOCK_OP_EXTEND:
    case LOCK_OP_RELEASE:
        (void)ell_call(r, "/v3/kv/range",
                       ell_range_lock(r, "ASCEND", 1, op->fence, op->fence),
                       on_find);
        break;
    case LOCK_OP_STATUS:
        (void)ell_call(r, "/v3/kv/range", ell_range_lock(r, "ASCEND", 1, 0, 0),
                       on_status_range);
        break;
    }
    r->in_submit = false;
    ell_req_done(r);
}

static bool
el_ready(struct lock_backend *b)
{
    struct etcd_locks *s = to_locks(b);

    return !s->closing && etcd_http_ready(s->h);
}

static void
on_up(void *arg)
{
    struct etcd_locks *s = arg;

    coldq_up(s->cold);
}

static struct lock_backend *
el_open(struct event_base *base, const struct cfg_locks *cfg, char *err,
        size_t errlen)
{
    struct etcd_locks *s = calloc(1, sizeof(*s));
    const char *prefix = cfg->prefix != NULL ? cfg->prefix : "tidemark/locks/";

    if (s == NULL || (s->prefix = strdup(prefix)) == NULL) {
        free(s);
        snprintf(err, errlen, "locks: out of memory");
        return NULL;
    }
    s->plen = strlen(prefix);
    s->base = base;
    s->log = log_current();
    s->defer = defer_new(base);
    s->cold = coldq_new(base, cfg->timeout_ms > 0 ? cfg->timeout_ms : 2000);
    if (s->defer == NULL || s->cold == NULL) {
        snprintf(err, errlen, "locks: cannot set up events");
        defer_free(s->defer);
        coldq_free(s->cold);
        free(s->prefix);
        free(s);
        return NULL;
    }
    /* Unreachable now is an outage, not a configuration error: acquires
     * are 503 until etcd answers. */
    s->h = etcd_http_new(base, cfg->endpoints, &cfg->pki, "[locks]",
                         cfg->timeout_ms, cfg->pool_size, err, errlen);
    if (s->h == NULL) {
        defer_free(s->defer);
        coldq_free(s->cold);
        free(s->prefix);
        free(s);
        return NULL;
    }
    etcd_http_on_up(s->h, on_up, s);
    log_info("locks: etcd, keys under %s", LOG_QSTR(s->prefix));
    return (struct lock_backend *)s;
}

static void
el_close(struct lock_backend *b)
{
    struct etcd_locks *s = to_locks(b);

    if (s == NULL) {
        return;
    }
    s->closing = true;
    coldq_free(s->cold); /* answers the calls still waiting */
    s->cold = NULL;
    /* Answers every call in flight: their requests answer LOCK_ERROR. */
    etcd_http_free(s->h);
    s->h = NULL;
    /* Waiters with no call in flight (watching, or on a timer). */
    while (s->reqs != NULL) {
        struct el_req *r = s->reqs;

        r->ncalls = 0;
        r->watch = NULL; /* freed with the client */
        ell_answer(r, LOCK_ERROR, 0, 0);
        req_free(r);
    }
    defer_free(s->defer);
    free(s->prefix);
    free(s);
}

const struct lock_ops lock_etcd_ops = {
    .name = "etcd",
    .waits = true,
    .open = el_open,
    .submit = el_submit,
    .ready = el_ready,
    .close = el_close,
};
