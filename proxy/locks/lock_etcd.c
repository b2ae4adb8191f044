/* lock_etcd.c: leases on etcd, the seed's "leases on a consensus store",
 * by etcd's own lock recipe (clientv3/concurrency/mutex.go) over the v3
 * JSON gateway (../clients/etcd_http.c). */
#include "lock.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "../../conf/cfg.h"
#include "../clients/etcd_http.h"
#include "../log.h"
#include "../clients/coldq.h"
#include "../clients/defer.h"

/*
 * Keys. A lock named N is the set of keys under "<prefix>N//" (a
 * canonical name has no empty segment, so no other name's keys start
 * so); each acquire grants a lease with the lock's TTL and creates
 * "<prefix>N//<lease in hex>" under it. The holder is the key with the
 * lowest create revision; waiters queue behind it in create-revision
 * order and each watches the key just before its own for a delete, as
 * etcd's mutex does: a release wakes one waiter, nothing polls.
 *
 * The fence is the key's create revision. etcd assigns revisions from
 * the Raft log: one per committed write, in log order, the same on every
 * member, and a new leader continues the log it was elected with (it has
 * every committed entry), so a revision is never handed out twice and
 * the next key's is higher, across leader changes and restarts.
 * Compaction drops old revisions' history; it never renumbers a live key
 * or the counter. Create-revision order is the queue's order, so each
 * holder's fence is above every earlier holder's.
 *
 * Extend is a keepalive of the holder's lease (etcd keeps the TTL it
 * granted: ttl_ms on extend cannot change it, and the answer says the
 * TTL kept); release revokes it, which deletes the key. A lease etcd no
 * longer has is LOCK_LOST: stop the work. Any call without an answer
 * (no quorum, no endpoint) is LOCK_ERROR: the service answers 503, and
 * nothing is guessed.
 */

#define EL_NAME_MAX 1024

struct etcd_locks {
    struct event_base *base;
    const struct tm_log *log;
    struct etcd_http *h;
    struct defer *defer;
    struct coldq *cold;  /* calls waiting for etcd's first answer */
    struct el_req *reqs; /* every operation not yet freed */
    char *prefix;
    size_t plen;
    bool closing;
};

struct el_req {
    struct el_req *prev, *next;
    struct etcd_locks *s;
    enum lock_kind kind;
    lock_cb cb;
    void *arg;
    int64_t ttl_ms, fence, min_fence, wait_ms;
    int64_t lease;    /* acquire: ours; extend, release, status: found */
    int64_t ttl_s;    /* granted */
    int64_t rev;      /* acquire: our key's create revision */
    int ncalls;       /* etcd calls in flight with this request as arg */
    bool answered;    /* cb has run: free once ncalls is 0 */
    bool waited;      /* queued behind another key */
    bool lease_known; /* acquire: lease holds a granted lease */
    bool in_submit;   /* answers now go through the loop (lock.h) */
    bool cleared;     /* acquire: an expired holder's lease was revoked */
    int64_t hlease;   /* acquire: the holder's lease */
    struct event *keepalive, *deadline;
    struct etcd_watch *watch;
    char *pfx; /* "<prefix>N//", plen bytes */
    size_t pfxlen;
    char *mykey; /* pfx and our lease in hex */
    size_t len;
    char name[]; /* len bytes and a NUL */
};

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

static void
req_done(struct el_req *r)
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
static void
answer(struct el_req *r, enum lock_result res, int64_t fence, int64_t ttl_ms)
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
static bool
call(struct el_req *r, const char *path, json_t *body, etcd_cb cb)
{
    if (etcd_http_call(r->s->h, path, body, cb, r)) {
        r->ncalls++;
        return true;
    }
    answer(r, LOCK_ERROR, 0, 0);
    return false;
}

/* The reply's state for r: false (and r answered LOCK_ERROR when it was
 * not answered yet) when r is over or etcd gave no usable answer. */
static bool
reply_ok(struct el_req *r, const struct etcd_reply *rep, const char *what)
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
    answer(r, LOCK_ERROR, 0, 0);
    return false;
}

/* ---- JSON pieces ------------------------------------------------------ */

static json_t *
b64_str(const char *p, size_t n)
{
    return etcd_b64(p, n);
}

/* A range over r's lock: every key of it, oldest first (limit: 0 all). */
static json_t *
range_lock(const struct el_req *r, const char *order, int64_t limit,
           int64_t min_create, int64_t max_create)
{
    json_t *q =
        json_pack("{s:o,s:o,s:s,s:s}", "key", b64_str(r->pfx, r->pfxlen),
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
static json_t *
first_kv(const json_t *range)
{
    return json_array_get(json_object_get(range, "kvs"), 0);
}

/* response i of a txn answer, of type "response_range" etc. */
static json_t *
txn_resp(const json_t *body, size_t i, const char *type)
{
    return json_object_get(
        json_array_get(json_object_get(body, "responses"), i), type);
}

static bool
kv_key_is(const json_t *kv, const char *key, size_t klen)
{
    return etcd_key_is(json_object_get(kv, "key"), key, klen);
}

/* ---- status, extend, release ------------------------------------------ */

static void create_key(struct el_req *r);

static void
on_cleared(void *arg, const struct etcd_reply *rep)
{
    struct el_req *r = arg;

    /* Revoked now, or meanwhile by etcd or a release (not found): try
     * to take the lock. */
    if (!r->answered && rep->st == ETCD_FAILED && rep->code == 5) {
        r->ncalls--;
        create_key(r);
    } else if (reply_ok(r, rep, "revoke an expired lease")) {
        create_key(r);
    }
    req_done(r);
}

static void
on_ttl(void *arg, const struct etcd_reply *rep)
{
    struct el_req *r = arg;
    int64_t ttl = 0;

    if (reply_ok(r, rep, "lease time to live")) {
        if (!etcd_ttl(rep->body, "TTL", &ttl)) {
            answer(r, LOCK_ERROR, 0, 0);
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
            (void)call(r, "/v3/lease/revoke", json_pack("{ss}", "ID", id),
                       on_cleared);
        } else if (r->kind == LOCK_OP_ACQUIRE) {
            answer(r, LOCK_BUSY, r->fence, ttl > 0 ? ttl * 1000 : 1);
        } else if (ttl >= 0) {
            /* 0: up to a second left, as for an acquire. */
            answer(r, LOCK_OK, r->fence, ttl > 0 ? ttl * 1000 : 1);
        } else {
            answer(r, LOCK_NONE, r->fence, 0); /* expired, key not yet gone */
        }
    }
    req_done(r);
}

/* The holder is kv (fence and lease): its time left answers r (status,
 * or a busy acquire). */
static void
answer_holder(struct el_req *r, const json_t *kv)
{
    char id[24];
    int64_t lease = 0;

    /* Not into r->lease: an acquire's is ours, to give back. */
    if (!etcd_int(kv, "create_revision", &r->fence) ||
        !etcd_int(kv, "lease", &lease) || r->fence <= 0) {
        answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    r->hlease = lease;
    if (lease == 0) {
        /* A key without a lease (written by hand): held, no end. */
        answer(r, r->kind == LOCK_OP_ACQUIRE ? LOCK_BUSY : LOCK_OK, r->fence,
               1);
        return;
    }
    snprintf(id, sizeof(id), "%" PRId64, lease);
    (void)call(r, "/v3/lease/timetolive", json_pack("{ss}", "ID", id), on_ttl);
}

static void
on_status_range(void *arg, const struct etcd_reply *rep)
{
    struct el_req *r = arg;

    if (reply_ok(r, rep, "range")) {
        json_t *kv = first_kv(rep->body);

        if (kv == NULL) {
            answer(r, LOCK_NONE, 0, 0);
        } else {
            answer_holder(r, kv);
        }
    }
    req_done(r);
}

static void
on_keepalive(void *arg, const struct etcd_reply *rep)
{
    struct el_req *r = arg;
    json_t *res = json_object_get(rep->body, "result");
    int64_t ttl = 0;

    if (!r->answered && rep->st == ETCD_FAILED && rep->code == 5) {
        /* etcd answers an expired lease's renewal once it has revoked
         * it: not found. */
        r->ncalls--;
        answer(r, LOCK_LOST, r->fence, 0);
    } else if (reply_ok(r, rep, "lease keepalive")) {
        if (!etcd_ttl(res, "TTL", &ttl)) {
            answer(r, LOCK_ERROR, 0, 0);
        } else if (ttl <= 0) {
            answer(r, LOCK_LOST, r->fence, 0); /* the lease is gone */
        } else {
            answer(r, LOCK_OK, r->fence, ttl * 1000);
        }
    }
    req_done(r);
}

static void
on_revoke(void *arg, const struct etcd_reply *rep)
{
    struct el_req *r = arg;

    r->ncalls--;
    if (!r->answered) {
        if (rep->st == ETCD_OK) {
            answer(r, LOCK_OK, r->fence, 0);
        } else if (rep->st == ETCD_FAILED && rep->code == 5 &&
                   rep->tries == 1) {
            answer(r, LOCK_LOST, r->fence, 0); /* expired meanwhile */
        } else {
            /* A second try that finds no lease may follow a first that
             * revoked it: not known, so not answered as lost. */
            r->ncalls++;
            (void)reply_ok(r, rep, "lease revoke");
        }
    }
    req_done(r);
}

static void
on_release_ttl(void *arg, const struct etcd_reply *rep)
{
    struct el_req *r = arg;
    int64_t ttl = 0;
    char id[24];

    if (reply_ok(r, rep, "lease time to live")) {
        if (!etcd_ttl(rep->body, "TTL", &ttl)) {
            answer(r, LOCK_ERROR, 0, 0);
        } else if (ttl <= 0) {
            answer(r, LOCK_LOST, r->fence, 0);
        } else {
            snprintf(id, sizeof(id), "%" PRId64, r->lease);
            (void)call(r, "/v3/lease/revoke", json_pack("{ss}", "ID", id),
                       on_revoke);
        }
    }
    req_done(r);
}

/* Extend and release: find the key whose create revision is the
 * caller's fence, then act on its lease. */
static void
on_find(void *arg, const struct etcd_reply *rep)
{
    struct el_req *r = arg;
    char id[24];

    if (reply_ok(r, rep, "range")) {
        json_t *kv = first_kv(rep->body);
        int64_t rev = 0;

        if (kv == NULL || !etcd_int(kv, "create_revision", &rev) ||
            rev != r->fence || !etcd_int(kv, "lease", &r->lease) ||
            r->lease == 0) {
            answer(r, LOCK_LOST, r->fence, 0);
        } else {
            snprintf(id, sizeof(id), "%" PRId64, r->lease);
            if (r->kind == LOCK_OP_EXTEND) {
                (void)call(r, "/v3/lease/keepalive",
                           json_pack("{ss}", "ID", id), on_keepalive);
            } else {
                /* An expired lease whose key etcd has not deleted yet is
                 * not the caller's any more: look before revoking. */
                (void)call(r, "/v3/lease/timetolive",
                           json_pack("{ss}", "ID", id), on_release_ttl);
            }
        }
    }
    req_done(r);
}

/* ---- acquire ---------------------------------------------------------- */

static void find_pred(struct el_req *r);

/* r's key is the lowest: r holds the lock. */
static void
owned(struct el_req *r)
{
    if (r->min_fence > 0 && r->rev < r->min_fence) {
        log_error("locks: etcd: %s: the new key's revision %" PRId64
                  " is not above the resource's mark %" PRId64
                  " (tokens issued elsewhere): refused",
                  LOG_ESC(r->name, r->len), r->rev, r->min_fence - 1);
        answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    r->fence = r->rev;
    if (r->waited) {
        char id[24];

        /* The lease ticked while waiting: renew it to its full TTL. */
        snprintf(id, sizeof(id), "%" PRId64, r->lease);
        (void)call(r, "/v3/lease/keepalive", json_pack("{ss}", "ID", id),
                   on_keepalive);
        return;
    }
    answer(r, LOCK_OK, r->fence, r->ttl_s * 1000);
}

static void
on_watch(void *arg, json_t *result)
{
    struct el_req *r = arg;
    json_t *ev;
    size_t i;
    bool again =
        result == NULL || json_is_true(json_object_get(result, "canceled"));
    int64_t compact = 0;

    if (r->answered) {
        return;
    }
    if (result != NULL && etcd_int(result, "compact_revision", &compact) &&
        compact > 0) {
        again = true;
    }
    json_array_foreach(json_object_get(result, "events"), i, ev)
    {
        json_t *t = json_object_get(ev, "type");

        if (json_is_string(t) && strcmp(json_string_value(t), "DELETE") == 0) {
            again = true;
        }
    }
    if (again) {
        /* The predecessor is gone (or the stream ended): look again. The
         * watch is freed on the way (safe from inside its callback). */
        etcd_watch_free(r->watch);
        r->watch = NULL;
        find_pred(r);
    }
}

static void
on_pred(void *arg, const struct etcd_reply *rep)
{
    struct el_req *r = arg;

    if (reply_ok(r, rep, "predecessor")) {
        json_t *kv = first_kv(txn_resp(rep->body, 0, "response_range"));
        int64_t rev = 0;

        if (!json_is_true(json_object_get(rep->body, "succeeded"))) {
            log_warn("locks: etcd: %s: the waiter's lease ended while "
                     "it waited",
                     LOG_ESC(r->name, r->len));
            r->lease_known = false;
            answer(r, LOCK_ERROR, 0, 0);
        } else if (kv == NULL) {
            owned(r);
        } else if (!etcd_rev(json_object_get(rep->body, "header"), "revision",
                             &rev)) {
            answer(r, LOCK_ERROR, 0, 0);
        } else {
            char from[24];
            json_t *w;

            /* Every change after this answer: a delete in between is
             * seen. */
            snprintf(from, sizeof(from), "%" PRId64, rev + 1);
            w = json_pack("{s:O,s:s,s:[s]}", "key", json_object_get(kv, "key"),
                          "start_revision", from, "filters", "NOPUT");
            r->watch = etcd_http_watch(r->s->h, w, on_watch, r);
            if (r->watch == NULL) {
                answer(r, LOCK_ERROR, 0, 0);
            }
        }
    }
    req_done(r);
}

/* Find the key just before ours (if ours still exists) and watch it. */
static void
find_pred(struct el_req *r)
{
    char rev[24];
    json_t *t;

    snprintf(rev, sizeof(rev), "%" PRId64, r->rev);
    t = json_pack("{s:[{s:s,s:s,s:s,s:o}],s:[{s:o}]}", "compare", "target",
                  "CREATE", "result", "EQUAL", "create_revision", rev, "key",
                  b64_str(r->mykey, strlen(r->mykey)), "success",
                  "request_range", range_lock(r, "DESCEND", 1, 0, r->rev - 1));
    (void)call(r, "/v3/kv/txn", t, on_pred);
}

static void
on_wait_keepalive(void *arg, const struct etcd_reply *rep)
{
    struct el_req *r = arg;
    json_t *res = json_object_get(rep->body, "result");
    int64_t ttl = 0;

    r->ncalls--;
    if (!r->answered && rep->st == ETCD_OK && etcd_ttl(res, "TTL", &ttl) &&
        ttl <= 0) {
        log_warn("locks: etcd: %s: the waiter's lease ended",
                 LOG_ESC(r->name, r->len));
        r->lease_known = false;
        answer(r, LOCK_ERROR, 0, 0);
    }
    req_done(r);
}

/* While it waits, a waiter keeps its own lease alive (its key is its
 * place in the queue): every third of the TTL. */
static void
keepalive_cb(evutil_socket_t fd, short what, void *arg)
{
    struct el_req *r = arg;
    struct timeval tv = {0, 0};
    int64_t ms = r->ttl_s * 1000 / 3;
    char id[24];

    lib_enter(r->s->log);
    (void)fd;
    (void)what;
    if (r->answered) {
        return;
    }
    snprintf(id, sizeof(id), "%" PRId64, r->lease);
    if (etcd_http_call(r->s->h, "/v3/lease/keepalive",
                       json_pack("{ss}", "ID", id), on_wait_keepalive, r)) {
        r->ncalls++;
    }
    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
    evtimer_add(r->keepalive, &tv);
}

static void
deadline_cb(evutil_socket_t fd, short what, void *arg)
{
    struct el_req *r = arg;

    lib_enter(r->s->log);
    (void)fd;
    (void)what;
    answer(r, LOCK_BUSY, 0, 0); /* revokes the lease: the key goes */
    req_done(r);
}

/* r queues behind another key until wait_ms passes. */
static void
start_wait(struct el_req *r)
{
    struct timeval dl = {(time_t)(r->wait_ms / 1000),
                         (suseconds_t)(r->wait_ms % 1000) * 1000};

    log_debug("locks: waiting: name=%s wait_ms=%" PRId64 " fence=%" PRId64,
              LOG_ESC(r->name, r->len), r->wait_ms, r->rev);
    r->waited = true;
    r->keepalive = evtimer_new(r->s->base, keepalive_cb, r);
    r->deadline = evtimer_new(r->s->base, deadline_cb, r);
    if (r->keepalive == NULL || r->deadline == NULL ||
        evtimer_add(r->deadline, &dl) != 0) {
        answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    {
        int64_t ms = r->ttl_s * 1000 / 3;
        struct timeval tv = {(time_t)(ms / 1000),
                             (suseconds_t)(ms % 1000) * 1000};

        evtimer_add(r->keepalive, &tv);
    }
    find_pred(r);
}

static void
on_create(void *arg, const struct etcd_reply *rep)
{
    struct el_req *r = arg;

    if (!reply_ok(r, rep, "create the lock key")) {
        req_done(r);
        return;
    }
    {
        bool ok = json_is_true(json_object_get(rep->body, "succeeded"));
        json_t *holder;
        int64_t hrev = 0;
        size_t klen = strlen(r->mykey);

        if (r->wait_ms > 0) {
            /* success: put, range(holder); failure: range(mine),
             * range(holder). */
            holder = first_kv(txn_resp(rep->body, 1, "response_range"));
            if (ok) {
                ok = etcd_int(json_object_get(rep->body, "header"), "revision",
                              &r->rev);
            } else {
                ok =
                    etcd_int(first_kv(txn_resp(rep->body, 0, "response_range")),
                             "create_revision", &r->rev);
            }
            if (!ok || r->rev <= 0 || holder == NULL ||
                !etcd_int(holder, "create_revision", &hrev)) {
                answer(r, LOCK_ERROR, 0, 0);
            } else if (hrev == r->rev) {
                owned(r);
            } else {
                start_wait(r);
            }
        } else if (ok) {
            /* success: put into an empty lock. */
            if (!etcd_int(json_object_get(rep->body, "header"), "revision",
                          &r->rev) ||
                r->rev <= 0) {
                answer(r, LOCK_ERROR, 0, 0);
            } else {
                owned(r);
            }
        } else {
            /* failure: range(holder). Our own key when an earlier try
             * created it without an answer reaching us. */
            holder = first_kv(txn_resp(rep->body, 0, "response_range"));
            if (holder != NULL && kv_key_is(holder, r->mykey, klen) &&
                etcd_int(holder, "create_revision", &r->rev)) {
                owned(r);
            } else if (holder == NULL) {
                answer(r, LOCK_BUSY, 0, 1); /* went meanwhile: try again */
            } else {
                answer_holder(r, holder);
            }
        }
    }
    req_done(r);
}

/* One transaction creates our key under our lease. Without a wait, only
 * into an empty lock (a compare over the whole range); with one, always
 * (the recipe's compare on our own key), queueing behind older keys. */
static void
create_key(struct el_req *r)
{
    char id[24];
    json_t *put, *t;
    size_t klen;

    snprintf(id, sizeof(id), "%" PRIx64, (uint64_t)r->lease);
    free(r->mykey); /* a second try after clearing an expired holder */
    r->mykey = etcd_key_join(r->pfx, r->pfxlen, id, strlen(id), "", 0, &klen);
    if (r->mykey == NULL) {
        answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    snprintf(id, sizeof(id), "%" PRId64, r->lease);
    put = json_pack("{s:{s:o,s:s,s:s}}", "request_put", "key",
                    b64_str(r->mykey, klen), "value", "", "lease", id);
    if (r->wait_ms > 0) {
        t = json_pack(
            "{s:[{s:s,s:s,s:s,s:o}],s:[o,{s:o}],s:[{s:o},{s:o}]}", "compare",
            "target", "CREATE", "result", "EQUAL", "create_revision", "0",
            "key", b64_str(r->mykey, klen), "success", put, "request_range",
            range_lock(r, "ASCEND", 1, 0, 0), "failure", "request_range",
            json_pack("{s:o}", "key", b64_str(r->mykey, klen)), "request_range",
            range_lock(r, "ASCEND", 1, 0, 0));
    } else {
        t = json_pack("{s:[{s:s,s:s,s:s,s:o,s:o}],s:[o],s:[{s:o}]}", "compare",
                      "target", "CREATE", "result", "EQUAL", "create_revision",
                      "0", "key", b64_str(r->pfx, r->pfxlen), "range_end",
                      etcd_prefix_end(r->pfx, r->pfxlen), "success", put,
                      "failure", "request_range",
                      range_lock(r, "ASCEND", 1, 0, 0));
    }
    (void)call(r, "/v3/kv/txn", t, on_create);
}

static void
on_grant(void *arg, const struct etcd_reply *rep)
{
    struct el_req *r = arg;

    if (reply_ok(r, rep, "lease grant")) {
        if (!etcd_int(rep->body, "ID", &r->lease) ||
            !etcd_ttl(rep->body, "TTL", &r->ttl_s) || r->lease == 0 ||
            r->ttl_s <= 0) {
            answer(r, LOCK_ERROR, 0, 0);
        } else {
            r->lease_known = true;
            create_key(r);
        }
    }
    req_done(r);
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
        (void)call(r, "/v3/lease/grant", json_pack("{ss}", "TTL", id),
                   on_grant);
        break;
    case LOCK_OP_EXTEND:
    case LOCK_OP_RELEASE:
        (void)call(r, "/v3/kv/range",
                   range_lock(r, "ASCEND", 1, op->fence, op->fence), on_find);
        break;
    case LOCK_OP_STATUS:
        (void)call(r, "/v3/kv/range", range_lock(r, "ASCEND", 1, 0, 0),
                   on_status_range);
        break;
    }
    r->in_submit = false;
    req_done(r);
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
    s->h = etcd_http_new(base, cfg->endpoints, "[locks]", cfg->timeout_ms,
                         cfg->pool_size, err, errlen);
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
        answer(r, LOCK_ERROR, 0, 0);
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
