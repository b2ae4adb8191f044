/* store_etcd.c: marks in etcd through its v3 JSON gateway (POST
 * /v3/kv/txn): the raises of a loop turn in one transaction of
 * per-resource compare-and-swaps, a few in flight at once, on the etcd
 * client the lock backend shares (../clients/etcd_http.c: endpoints,
 * failover, JSON). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "../../conf/cfg.h"
#include "../clients/coldq.h"
#include "../clients/defer.h"
#include "../clients/etcd_http.h"
#include "../clients/queue.h"
#include "../log.h"
#include "batch.h"
#include "store.h"
#include "store_etcd_reply.h"

/*
 * Keys and values. The mark of resource R is the key "tidemark/marks/R"
 * holding the token as 19 zero-padded decimal digits: etcd compares
 * values as bytes, and at a fixed width byte order is numeric order
 * (INT64_MAX has 19 digits). The gateway carries keys and values base64.
 *
 * One raise is a transaction that creates the key when it is missing
 * (create_revision == 0), else, nested, puts the token when the value is
 * below it, else reads the mark:
 *
 *   txn(compare CREATE(k) == 0, success put(k, t),
 *       failure txn(compare VALUE(k) < t, success put(k, t),
 *                   failure range(k)))
 *
 * A batch is one outer transaction with no compare whose success list
 * holds one such transaction per distinct resource (the highest token
 * the batch has for it); etcd applies it atomically, after a quorum has
 * it in its log (fsynced): accepted means durable. Each raise is then
 * answered from its resource's outcome (store_etcd_reply.c reads it): a
 * put means the mark is the batch's highest token T for it; a read gives
 * the mark M >= T. A raise with token t is accepted when t equals the
 * mark, stale otherwise, as in one serial order of the batch's raises,
 * highest token first.
 */

#define ETCD_BATCH_MAX 32    /* resources per transaction */
#define ETCD_RAISES_MAX 1024 /* raises per transaction */
#define ETCD_QUEUE_MAX 65536
#define ETCD_KEY_PREFIX "tidemark/marks/"
#define ETCD_KEY_PREFIX_LEN 15

/* One transaction in flight. */
struct etcd_slot {
    struct etcd_store *s;
    struct batch_list batch; /* in flight; empty when idle */
    bool busy;
};

struct etcd_store {
    struct event_base *base;
    const struct tm_log *log; /* the proxy's, entered by callbacks */
    struct etcd_http *h;
    int nslots;
    struct etcd_slot *slots;
    struct batch_list pending;
    struct event *kick_ev;
    bool kick_armed;
    bool closing;
    bool full_logged;
    struct defer *defer;
    struct coldq *cold;        /* calls waiting for etcd's first answer */
    struct batch_req **sorted; /* scratch: ETCD_RAISES_MAX */
};

static struct etcd_store *
to_etcd(struct store *s)
{
    return (struct etcd_store *)s;
}

/* ---- encoding -------------------------------------------------------- */

/* The mark's key of resource name, whole at any length (cut to 1,024
 * bytes, two long names would share a mark). NULL when out of memory. */
static json_t *
key_json(const char *name, size_t len)
{
    size_t klen = 0;
    char *k = etcd_key_join(ETCD_KEY_PREFIX, ETCD_KEY_PREFIX_LEN, name, len, "",
                            0, &klen);
    json_t *j = k != NULL ? etcd_b64(k, klen) : NULL;

    free(k);
    return j;
}

/* One raise of resource key k to token t (the header comment's txn). */
static json_t *
raise_txn(const char *key, size_t klen, int64_t t)
{
    json_t *k = key_json(key, klen);
    json_t *txn = json_pack(
        "{s:{s:[{s:s,s:s,s:s,s:O}],s:[{s:{s:O,s:o}}],s:[{s:{s:[{s:s,s:s,"
        "s:O,s:o}],s:[{s:{s:O,s:o}}],s:[{s:{s:O}}]}}]}}",
        "request_txn", "compare", "target", "CREATE", "result", "EQUAL",
        "create_revision", "0", "key", k, "success", "request_put", "key", k,
        "value", etcd_mark_json(t), "failure", "request_txn", "compare",
        "target", "VALUE", "result", "LESS", "key", k, "value",
        etcd_mark_json(t), "success", "request_put", "key", k, "value",
        etcd_mark_json(t), "failure", "request_range", "key", k);

    json_decref(k);
    return txn;
}

/* ---- requests -------------------------------------------------------- */

static void dispatch(struct etcd_store *s);

static void
on_response(void *arg, const struct etcd_reply *rep)
{
    struct etcd_slot *sl = arg;
    struct etcd_store *s = sl->s;
    struct batch_list done = sl->batch;
    bool ok = false;

    lib_enter(s->log);
    sl->busy = false;
    if (rep->st == ETCD_OK) {
        ok = done.head->is_get ? etcd_marks_answer_get(done.head, rep->body)
                               : etcd_marks_answer_raises(&done, rep->body);
    }
    sl->batch = (struct batch_list){0};
    if (!ok && rep->st != ETCD_NOANSWER) {
        log_error("etcd [store]: answered %d with %s: %zu %s refused: %s",
                  rep->http,
                  rep->st == ETCD_FAILED ? "an error"
                                         : "a body that is not the expected "
                                           "JSON",
                  done.n, done.head->is_get ? "read" : "raises",
                  LOG_STR(rep->message));
    }
    if (!ok) {
        batch_fail(&done);
    } else {
        batch_answer(&done);
    }
    if (!s->closing) {
        dispatch(s);
    }
}

/* The slot's batch as one call: a read, or one txn of raises. */
static bool
send_batch(struct etcd_slot *sl)
{
    struct etcd_store *s = sl->s;
    json_t *body, *list;

    if (sl->batch.head->is_get) {
        struct batch_req *r = sl->batch.head;

        return etcd_http_call(
            s->h, "/v3/kv/range",
            json_pack("{s:o}", "key", key_json(r->key, r->klen)), on_response,
            sl);
    }
    batch_sort(&sl->batch, s->sorted);
    list = json_array();
    body = json_pack("{s:o}", "success", list);
    for (struct batch_req *first = sl->batch.head; first != NULL;) {
        int64_t top;
        struct batch_req *end = batch_group(first, &top);

        json_array_append_new(list, raise_txn(first->key, first->klen, top));
        first = end;
    }
    return etcd_http_call(s->h, "/v3/kv/txn", body, on_response, sl);
}

/* Give queued requests to idle slots: a get alone, or the raises of up
 * to ETCD_BATCH_MAX distinct resources. */
static void
dispatch(struct etcd_store *s)
{
    for (int i = 0; i < s->nslots && s->pending.head != NULL; i++) {
        struct etcd_slot *sl = &s->slots[i];

        if (sl->busy) {
            continue;
        }
        batch_take(&s->pending, &sl->batch, ETCD_RAISES_MAX, ETCD_BATCH_MAX);
        sl->busy = true;
        if (!send_batch(sl)) {
            struct batch_list failed = sl->batch;

            sl->busy = false;
            sl->batch = (struct batch_list){0};
            log_error("etcd: cannot send a request: %zu refused", failed.n);
            batch_fail(&failed);
        }
    }
}

static void
on_kick(evutil_socket_t fd, short what, void *arg)
{
    struct etcd_store *s = arg;

    lib_enter(s->log);
    (void)fd;
    (void)what;
    s->kick_armed = false;
    dispatch(s);
}

static void
on_up(void *arg)
{
    struct etcd_store *s = arg;

    coldq_up(s->cold);
}

/* ---- the ops --------------------------------------------------------- */

extern const struct store_ops store_etcd_ops;

static void
enqueue(struct etcd_store *s, const char *res, size_t len, int64_t token,
        bool is_get, store_cb cb, void *arg)
{
    struct batch_req *r;

    /* Until etcd has answered once, a call waits for it (coldq.h). */
    if (!s->closing && !etcd_http_ready(s->h) &&
        store_park(s->cold, (struct store *)s, &store_etcd_ops, is_get, res,
                   len, token, cb, arg)) {
        return;
    }
    if (s->closing) {
        store_defer(s->defer, cb, arg, STORE_ERROR, 0);
        return;
    }
    if (!queue_admit(s->pending.n, ETCD_QUEUE_MAX, &s->full_logged, "etcd",
                     "requests are waiting")) {
        store_defer(s->defer, cb, arg, STORE_ERROR, 0);
        return;
    }
    r = len <= 1024 ? batch_req_new(res, len, NULL, 0, token, is_get, cb, arg)
                    : NULL;
    if (r == NULL) {
        store_defer(s->defer, cb, arg, STORE_ERROR, 0);
        return;
    }
    QUEUE_PUSH(&s->pending, r);
    if (!s->kick_armed) {
        s->kick_armed = true;
        event_active(s->kick_ev, 0, 1);
    }
}

static void
etcd_raise(struct store *st, const char *res, size_t len, int64_t token,
           store_cb cb, void *arg)
{
    enqueue(to_etcd(st), res, len, token, false, cb, arg);
}

static void
etcd_get(struct store *st, const char *res, size_t len, store_cb cb, void *arg)
{
    enqueue(to_etcd(st), res, len, 0, true, cb, arg);
}

static bool
etcd_ready(struct store *st)
{
    struct etcd_store *s = to_etcd(st);

    return !s->closing && etcd_http_ready(s->h);
}

static void
etcd_free(struct etcd_store *s)
{
    coldq_free(s->cold); /* answers the calls still waiting */
    s->cold = NULL;
    /* Answers the batches in flight (on_response: refused). */
    etcd_http_free(s->h);
    s->h = NULL;
    batch_fail(&s->pending);
    if (s->kick_ev != NULL) {
        event_free(s->kick_ev);
    }
    defer_free(s->defer);
    free(s->slots);
    free(s->sorted);
    free(s);
}

static struct store *
etcd_open(struct event_base *base, const struct cfg_store *cfg, char *err,
          size_t errlen)
{
    struct etcd_store *s;
    int timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 2000;

    if (cfg->endpoints == NULL || cfg->endpoints[0] == '\0') {
        snprintf(err, errlen, "etcd: [store] endpoints is not set");
        return NULL;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "etcd: out of memory");
        return NULL;
    }
    s->base = base;
    s->log = log_current();
    s->nslots = cfg->pool_size > 0 ? cfg->pool_size : 2;
    s->slots = calloc((size_t)s->nslots, sizeof(*s->slots));
    s->sorted = calloc(ETCD_RAISES_MAX, sizeof(*s->sorted));
    s->kick_ev = event_new(base, -1, 0, on_kick, s);
    s->defer = defer_new(base);
    s->cold = coldq_new(base, timeout_ms);
    if (s->cold == NULL || s->slots == NULL || s->sorted == NULL ||
        s->kick_ev == NULL || s->defer == NULL) {
        snprintf(err, errlen, "etcd: out of memory");
        etcd_free(s);
        return NULL;
    }
    for (int i = 0; i < s->nslots; i++) {
        s->slots[i].s = s;
    }
    /* Not ready until etcd answers: the client probes now. */
    s->h = etcd_http_new(base, cfg->endpoints, &cfg->pki, "[store]", timeout_ms,
                         s->nslots, err, errlen);
    if (s->h == NULL) {
        etcd_free(s);
        return NULL;
    }
    etcd_http_on_up(s->h, on_up, s);
    log_info("etcd: %d transactions in flight at most", s->nslots);
    return (struct store *)s;
}

static void
etcd_close(struct store *st)
{
    struct etcd_store *s = to_etcd(st);

    if (s == NULL) {
        return;
    }
    s->closing = true;
    etcd_free(s);
}

const struct store_ops store_etcd_ops = {
    .name = "etcd",
    .shared = true,
    .open = etcd_open,
    .raise = etcd_raise,
    .get = etcd_get,
    .ready = etcd_ready,
    .close = etcd_close,
};
