/* lock_etcd_acquire.c: an acquire on etcd: grant a lease with the lock's
 * TTL, create the key under it, and with a wait, queue behind the older
 * keys, watching the predecessor's and keeping the lease alive, until the
 * key is the oldest or the wait's deadline. */
#include "lock_etcd.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "../log.h"

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
        ell_answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    r->fence = r->rev;
    if (r->waited) {
        char id[24];

        /* The lease ticked while waiting: renew it to its full TTL. */
        snprintf(id, sizeof(id), "%" PRId64, r->lease);
        (void)ell_call(r, "/v3/lease/keepalive", json_pack("{ss}", "ID", id),
                       ell_on_keepalive);
        return;
    }
    ell_answer(r, LOCK_OK, r->fence, r->ttl_s * 1000);
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

    if (ell_reply_ok(r, rep, "predecessor")) {
        json_t *kv = ell_first_kv(ell_txn_resp(rep->body, 0, "response_range"));
        int64_t rev = 0;

        if (!json_is_true(json_object_get(rep->body, "succeeded"))) {
            log_warn("locks: etcd: %s: the waiter's lease ended while "
                     "it waited",
                     LOG_ESC(r->name, r->len));
            r->lease_known = false;
            ell_answer(r, LOCK_ERROR, 0, 0);
        } else if (kv == NULL) {
            owned(r);
        } else if (!etcd_rev(json_object_get(rep->body, "header"), "revision",
                             &rev)) {
            ell_answer(r, LOCK_ERROR, 0, 0);
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
                ell_answer(r, LOCK_ERROR, 0, 0);
            }
        }
    }
    ell_req_done(r);
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
                  ell_b64_str(r->mykey, strlen(r->mykey)), "success",
                  "request_range",
                  ell_range_lock(r, "DESCEND", 1, 0, r->rev - 1));
    (void)ell_call(r, "/v3/kv/txn", t, on_pred);
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
        ell_answer(r, LOCK_ERROR, 0, 0);
    }
    ell_req_done(r);
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
    ell_answer(r, LOCK_BUSY, 0, 0); /* revokes the lease: the key goes */
    ell_req_done(r);
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
        ell_answer(r, LOCK_ERROR, 0, 0);
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

    if (!ell_reply_ok(r, rep, "create the lock key")) {
        ell_req_done(r);
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
            holder = ell_first_kv(ell_txn_resp(rep->body, 1, "response_range"));
            if (ok) {
                ok = etcd_int(json_object_get(rep->body, "header"), "revision",
                              &r->rev);
            } else {
                ok = etcd_int(
                    ell_first_kv(ell_txn_resp(rep->body, 0, "response_range")),
                    "create_revision", &r->rev);
            }
            if (!ok || r->rev <= 0 || holder == NULL ||
                !etcd_int(holder, "create_revision", &hrev)) {
                ell_answer(r, LOCK_ERROR, 0, 0);
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
                ell_answer(r, LOCK_ERROR, 0, 0);
            } else {
                owned(r);
            }
        } else {
            /* failure: range(holder). Our own key when an earlier try
             * created it without an answer reaching us. */
            holder = ell_first_kv(ell_txn_resp(rep->body, 0, "response_range"));
            if (holder != NULL && ell_kv_key_is(holder, r->mykey, klen) &&
                etcd_int(holder, "create_revision", &r->rev)) {
                owned(r);
            } else if (holder == NULL) {
                ell_answer(r, LOCK_BUSY, 0, 1); /* went meanwhile: try again */
            } else {
                ell_answer_holder(r, holder);
            }
        }
    }
    ell_req_done(r);
}

/* One transaction creates our key under our lease. Without a wait, only
 * into an empty lock (a compare over the whole range); with one, always
 * (the recipe's compare on our own key), queueing behind older keys. */
void
ell_create_key(struct el_req *r)
{
    char id[24];
    json_t *put, *t;
    size_t klen;

    snprintf(id, sizeof(id), "%" PRIx64, (uint64_t)r->lease);
    free(r->mykey); /* a second try after clearing an expired holder */
    r->mykey = etcd_key_join(r->pfx, r->pfxlen, id, strlen(id), "", 0, &klen);
    if (r->mykey == NULL) {
        ell_answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    snprintf(id, sizeof(id), "%" PRId64, r->lease);
    put = json_pack("{s:{s:o,s:s,s:s}}", "request_put", "key",
                    ell_b64_str(r->mykey, klen), "value", "", "lease", id);
    if (r->wait_ms > 0) {
        t = json_pack(
            "{s:[{s:s,s:s,s:s,s:o}],s:[o,{s:o}],s:[{s:o},{s:o}]}", "compare",
            "target", "CREATE", "result", "EQUAL", "create_revision", "0",
            "key", ell_b64_str(r->mykey, klen), "success", put, "request_range",
            ell_range_lock(r, "ASCEND", 1, 0, 0), "failure", "request_range",
            json_pack("{s:o}", "key", ell_b64_str(r->mykey, klen)),
            "request_range", ell_range_lock(r, "ASCEND", 1, 0, 0));
    } else {
        t = json_pack("{s:[{s:s,s:s,s:s,s:o,s:o}],s:[o],s:[{s:o}]}", "compare",
                      "target", "CREATE", "result", "EQUAL", "create_revision",
                      "0", "key", ell_b64_str(r->pfx, r->pfxlen), "range_end",
                      etcd_prefix_end(r->pfx, r->pfxlen), "success", put,
                      "failure", "request_range",
                      ell_range_lock(r, "ASCEND", 1, 0, 0));
    }
    (void)ell_call(r, "/v3/kv/txn", t, on_create);
}

void
ell_on_grant(void *arg, const struct etcd_reply *rep)
{
    struct el_req *r = arg;

    if (ell_reply_ok(r, rep, "lease grant")) {
        if (!etcd_int(rep->body, "ID", &r->lease) ||
            !etcd_ttl(rep->body, "TTL", &r->ttl_s) || r->lease == 0 ||
            r->ttl_s <= 0) {
            ell_answer(r, LOCK_ERROR, 0, 0);
        } else {
            r->lease_known = true;
            ell_create_key(r);
        }
    }
    ell_req_done(r);
}
