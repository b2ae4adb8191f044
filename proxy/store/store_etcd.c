/* store_etcd.c: marks in etcd through its v3 JSON gateway (POST
 * /v3/kv/txn) on evhttp: the raises of a loop turn in one transaction of
 * per-resource compare-and-swaps, a connection pool, failover across the
 * endpoints and the addresses of their names. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/evp.h>

#include "../../conf/cfg.h"
#include "../clients/coldq.h"
#include "../clients/defer.h"
#include "../dial.h"
#include "../log.h"
#include "../queue.h"
#include "batch.h"
#include "store.h"

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
 * answered from its resource's outcome: a put means the mark is the
 * batch's highest token T for it; a read gives the mark M >= T. A raise
 * with token t is accepted when t equals the mark, stale otherwise, as in
 * one serial order of the batch's raises, highest token first.
 */

#define ETCD_BATCH_MAX 32    /* resources per transaction */
#define ETCD_RAISES_MAX 1024 /* raises per transaction */
#define ETCD_QUEUE_MAX 65536
#define ETCD_KEY_PREFIX "tidemark/marks/"
#define ETCD_KEY_PREFIX_LEN 15
#define ETCD_PROBE_MS 500
#define ETCD_JSON_TOKENS_MAX 4096

/* One address of an endpoint: evhttp connects to the first address of a
 * name only, so each address of each endpoint is a target of its own
 * (resolved at startup), tried in order. */
struct endpoint {
    char *addr; /* numeric, for evhttp; the name when it did not resolve */
    int port;
    char host[300]; /* the Host header: the endpoint as written */
    char text[64];  /* the address, for log lines: "[::1]:2379" */
};

struct etcd_slot {
    struct etcd_store *s;
    int id;
    int ep;           /* index into endpoints */
    int tries;        /* endpoints the batch in flight was sent to */
    int64_t deadline; /* of the batch in flight, across endpoints */
    /* One per endpoint, made when first used, freed at close only: a
     * connection is never freed from inside its own callback. */
    struct evhttp_connection **conns;
    struct batch_list batch; /* in flight; empty when idle */
    bool busy;
};

struct etcd_store {
    struct event_base *base;
    const struct tm_log *log; /* the proxy's, entered by callbacks */
    struct endpoint *eps;
    int neps;
    int nslots;
    int timeout_ms;
    struct etcd_slot *slots;
    struct batch_list pending;
    struct event *kick_ev;
    bool kick_armed;
    struct event *probe_ev;
    struct evhttp_connection **probe_conns; /* one per endpoint */
    int probe_ep;
    int probe_round; /* probes failed in a row, up to one per endpoint */
    bool probing;
    bool ready;
    bool ever_ready;
    bool closing;
    bool full_logged;
    unsigned failures;
    struct defer *defer;
    struct coldq *cold;        /* calls waiting for etcd's first answer */
    struct batch_req **sorted; /* scratch: ETCD_RAISES_MAX */
    struct jtok *toks;         /* scratch: ETCD_JSON_TOKENS_MAX */
};

static struct etcd_store *
to_etcd(struct store *s)
{
    return (struct etcd_store *)s;
}

/* ---- a small JSON reader --------------------------------------------- */

/* Tokens over the text, jsmn style: no copies, no allocation beyond the
 * caller's array. Strings are kept raw (escapes unprocessed): every value
 * tidemark reads is base64 or digits. */
enum jtype { J_OBJ, J_ARR, J_STR, J_PRIM };

struct jtok {
    enum jtype type;
    int start; /* strings: after the quote */
    int end;
    int size; /* objects: keys; arrays: elements */
    int next; /* index of the token after this subtree */
};

struct jparse {
    const char *p;
    int len;
    int pos;
    struct jtok *t;
    int n;
    int max;
    int depth;
};

static void
skip_ws(struct jparse *j)
{
    while (j->pos < j->len && strchr(" \t\r\n", j->p[j->pos]) != NULL &&
           j->p[j->pos] != '\0') {
        j->pos++;
    }
}

static int parse_value(struct jparse *j);

static int
new_tok(struct jparse *j, enum jtype type, int start)
{
    if (j->n >= j->max) {
        return -1;
    }
    j->t[j->n] = (struct jtok){type, start, start, 0, 0};
    return j->n++;
}

static int
parse_string(struct jparse *j)
{
    int i = new_tok(j, J_STR, j->pos + 1);

    if (i < 0) {
        return -1;
    }
    j->pos++;
    while (j->pos < j->len && j->p[j->pos] != '"') {
        if ((unsigned char)j->p[j->pos] < 0x20) {
            return -1;
        }
        if (j->p[j->pos] == '\\') {
            j->pos++;
        }
        j->pos++;
    }
    if (j->pos >= j->len) {
        return -1;
    }
    j->t[i].end = j->pos++;
    j->t[i].next = j->n;
    return i;
}

static int
parse_value(struct jparse *j)
{
    int i;
    char c;

    skip_ws(j);
    if (j->pos >= j->len || ++j->depth > 32) {
        return -1;
    }
    c = j->p[j->pos];
    if (c == '"') {
        i = parse_string(j);
    } else if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';

        i = new_tok(j, c == '{' ? J_OBJ : J_ARR, j->pos);
        if (i < 0) {
            return -1;
        }
        j->pos++;
        skip_ws(j);
        if (j->pos < j->len && j->p[j->pos] == close) {
            j->pos++;
        } else {
            for (;;) {
                if (c == '{') {
                    skip_ws(j);
                    if (j->pos >= j->len || j->p[j->pos] != '"' ||
                        parse_string(j) < 0) {
                        return -1;
                    }
                    skip_ws(j);
                    if (j->pos >= j->len || j->p[j->pos] != ':') {
                        return -1;
                    }
                    j->pos++;
                }
                if (parse_value(j) < 0) {
                    return -1;
                }
                j->t[i].size++;
                skip_ws(j);
                if (j->pos < j->len && j->p[j->pos] == ',') {
                    j->pos++;
                    continue;
                }
                if (j->pos < j->len && j->p[j->pos] == close) {
                    j->pos++;
                    break;
                }
                return -1;
            }
        }
        j->t[i].end = j->pos;
        j->t[i].next = j->n;
    } else {
        int start = j->pos;

        while (j->pos < j->len && strchr(",}] \t\r\n", j->p[j->pos]) == NULL) {
            j->pos++;
        }
        if (j->pos == start) {
            return -1;
        }
        i = new_tok(j, J_PRIM, start);
        if (i < 0) {
            return -1;
        }
        j->t[i].end = j->pos;
        j->t[i].next = j->n;
    }
    j->depth--;
    return i;
}

/* Parse text; the number of tokens, or -1 for anything not one JSON
 * value. */
static int
json_parse(const char *text, int len, struct jtok *t, int max)
{
    struct jparse j = {text, len, 0, t, 0, max, 0};

    if (parse_value(&j) != 0) {
        return -1;
    }
    skip_ws(&j);
    return j.pos == j.len ? j.n : -1;
}

static bool
tok_is(const char *text, const struct jtok *t, const char *s)
{
    size_t n = strlen(s);

    return (size_t)(t->end - t->start) == n &&
           memcmp(text + t->start, s, n) == 0;
}

/* The value of key in object o, or -1. */
static int
json_get(const char *text, const struct jtok *t, int o, const char *key)
{
    int i;

    if (o < 0 || t[o].type != J_OBJ) {
        return -1;
    }
    i = o + 1;
    for (int k = 0; k < t[o].size; k++) {
        int v = i + 1;

        if (t[i].type == J_STR && tok_is(text, &t[i], key)) {
            return v;
        }
        i = t[v].next;
    }
    return -1;
}

/* Element idx of array a, or -1. */
static int
json_at(const struct jtok *t, int a, int idx)
{
    int i;

    if (a < 0 || t[a].type != J_ARR || idx >= t[a].size) {
        return -1;
    }
    i = a + 1;
    for (int k = 0; k < idx; k++) {
        i = t[i].next;
    }
    return i;
}

static bool
json_true(const char *text, const struct jtok *t, int i)
{
    return i >= 0 && t[i].type == J_PRIM && tok_is(text, &t[i], "true");
}

/* ---- encoding -------------------------------------------------------- */

static void
b64_add(struct evbuffer *out, const void *data, size_t len)
{
    unsigned char buf[4 * ((ETCD_KEY_PREFIX_LEN + 1024) / 3 + 2)];
    size_t n;

    if (len > ETCD_KEY_PREFIX_LEN + 1024) {
        return; /* names are bounded well below this */
    }
    n = (size_t)EVP_EncodeBlock(buf, data, (int)len);
    evbuffer_add(out, buf, n);
}

static void
key_add(struct evbuffer *out, const char *name, size_t len)
{
    char raw[ETCD_KEY_PREFIX_LEN + 1024];

    memcpy(raw, ETCD_KEY_PREFIX, ETCD_KEY_PREFIX_LEN);
    if (len > sizeof(raw) - ETCD_KEY_PREFIX_LEN) {
        len = sizeof(raw) - ETCD_KEY_PREFIX_LEN;
    }
    memcpy(raw + ETCD_KEY_PREFIX_LEN, name, len);
    b64_add(out, raw, ETCD_KEY_PREFIX_LEN + len);
}

static void
value_add(struct evbuffer *out, int64_t token)
{
    char v[20];

    snprintf(v, sizeof(v), "%019" PRId64, token);
    b64_add(out, v, 19);
}

/* A stored value: base64 of exactly 19 digits. */
static bool
value_parse(const char *text, const struct jtok *t, int i, int64_t *out)
{
    unsigned char raw[32];
    uint64_t v = 0;
    int n;

    if (i < 0 || t[i].type != J_STR || t[i].end - t[i].start != 28) {
        return false;
    }
    n = EVP_DecodeBlock(raw, (const unsigned char *)text + t[i].start, 28);
    /* 19 bytes are 28 base64 characters ending "==", which
     * EVP_DecodeBlock decodes to 21 bytes, the last two zero. */
    if (n != 21 || text[t[i].end - 1] != '=' || text[t[i].end - 2] != '=') {
        return false;
    }
    for (int k = 0; k < 19; k++) {
        if (raw[k] < '0' || raw[k] > '9') {
            return false;
        }
        v = v * 10 + (uint64_t)(raw[k] - '0');
    }
    if (v > (uint64_t)INT64_MAX) {
        return false;
    }
    *out = (int64_t)v;
    return true;
}

/* ---- requests -------------------------------------------------------- */

static void start_probe(struct etcd_store *s);
static void dispatch(struct etcd_store *s);

static void
set_down(struct etcd_store *s, struct etcd_slot *sl, const char *why)
{
    const struct endpoint *ep = &s->eps[sl->ep];

    if (s->ready || s->failures % 50 == 0) {
        log_error("etcd: %s (%s): %s", ep->host, ep->text, why);
    }
    s->failures++;
    s->ready = false;
    /* The next request of this slot goes to the next endpoint. */
    sl->ep = (sl->ep + 1) % s->neps;
    start_probe(s);
}

static void
set_up(struct etcd_store *s)
{
    if (!s->ready) {
        log_info("etcd: %s", s->ever_ready ? "usable again" : "ready");
    }
    s->ready = true;
    s->ever_ready = true;
    coldq_up(s->cold);
    s->failures = 0;
}

/* The connection to endpoint i kept in *slot, made when missing. */
static struct evhttp_connection *
ep_conn(struct etcd_store *s, struct evhttp_connection **slot, int i,
        int timeout_ms)
{
    if (*slot == NULL) {
        const struct endpoint *ep = &s->eps[i];
        struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};

        *slot = evhttp_connection_base_new(s->base, NULL, ep->addr,
                                           (unsigned short)ep->port);
        if (*slot == NULL) {
            return NULL;
        }
        evhttp_connection_set_retries(*slot, 0);
        evhttp_connection_set_timeout_tv(*slot, &tv);
    }
    return *slot;
}

static struct evhttp_connection *
slot_conn(struct etcd_slot *sl)
{
    return ep_conn(sl->s, &sl->conns[sl->ep], sl->ep, sl->s->timeout_ms);
}

/* Answer the raises of the slot's batch (sorted by key: batch_sort)
 * from the txn's answer: one response per distinct name, in order. */
static bool
answer_raises(struct etcd_slot *sl, const char *text, int len)
{
    struct etcd_store *s = sl->s;
    struct jtok *t = s->toks;
    int n = json_parse(text, len, t, ETCD_JSON_TOKENS_MAX);
    int resps;
    int u = 0;

    if (n < 0) {
        return false;
    }
    resps = json_get(text, t, 0, "responses");
    if (!json_true(text, t, json_get(text, t, 0, "succeeded"))) {
        return false;
    }
    for (struct batch_req *first = sl->batch.head; first != NULL;) {
        int64_t top, mark;
        struct batch_req *end = batch_group(first, &top);
        int rt, inner;

        rt = json_get(text, t, json_at(t, resps, u), "response_txn");
        if (rt < 0) {
            return false;
        }
        if (json_true(text, t, json_get(text, t, rt, "succeeded"))) {
            mark = top; /* created */
        } else {
            inner = json_get(text, t,
                             json_at(t, json_get(text, t, rt, "responses"), 0),
                             "response_txn");
            if (inner < 0) {
                return false;
            }
            if (json_true(text, t, json_get(text, t, inner, "succeeded"))) {
                mark = top; /* raised */
            } else {
                int rr = json_get(
                    text, t,
                    json_at(t, json_get(text, t, inner, "responses"), 0),
                    "response_range");
                int kv = json_at(t, json_get(text, t, rr, "kvs"), 0);

                if (!value_parse(text, t, json_get(text, t, kv, "value"),
                                 &mark) ||
                    mark < top) {
                    return false;
                }
            }
        }
        batch_settle(first, end, mark, "etcd");
        u++;
        first = end;
    }
    return true;
}

static bool
answer_get(struct etcd_slot *sl, const char *text, int len)
{
    struct jtok *t = sl->s->toks;
    struct batch_req *r = sl->batch.head;
    int n = json_parse(text, len, t, ETCD_JSON_TOKENS_MAX);
    int kvs;

    if (n < 0 || t[0].type != J_OBJ) {
        return false;
    }
    kvs = json_get(text, t, 0, "kvs");
    if (kvs < 0 || t[kvs].size == 0) {
        r->res = STORE_ACCEPTED;
        r->mark = 0;
        return true;
    }
    if (!value_parse(text, t, json_get(text, t, json_at(t, kvs, 0), "value"),
                     &r->mark)) {
        return false;
    }
    r->res = STORE_ACCEPTED;
    return true;
}

static bool send_batch(struct etcd_slot *sl);

/* No answer from the slot's endpoint (refused, closed, timed out): send
 * the batch to the next one while its deadline allows. Sending twice is
 * safe: a raise's compare-and-swap answers the same the second time. A
 * silent endpoint takes the whole deadline (evhttp has no connect
 * timeout of its own); the slot's next batch goes elsewhere. */
static bool
try_next(struct etcd_slot *sl)
{
    struct etcd_store *s = sl->s;
    int next = (sl->ep + 1) % s->neps;

    if (s->closing || sl->tries + 1 >= s->neps ||
        dial_now_ms() + 1 >= sl->deadline) {
        return false;
    }
    log_warn("etcd [store]: %s (%s) gave no answer; trying %s",
             s->eps[sl->ep].host, s->eps[sl->ep].text, s->eps[next].text);
    sl->ep = next;
    sl->tries++;
    return send_batch(sl);
}

static void
on_response(struct evhttp_request *req, void *arg)
{
    struct etcd_slot *sl = arg;
    struct etcd_store *s = sl->s;
    struct batch_list done;
    struct evbuffer *in;
    int code = req != NULL ? evhttp_request_get_response_code(req) : 0;
    bool ok = false;

    lib_enter(s->log);
    if (!sl->busy) {
        return; /* answered already (closing) */
    }
    if (code == 0 && try_next(sl)) {
        return;
    }
    sl->busy = false;
    done = sl->batch;
    sl->batch = (struct batch_list){0};
    if (code == 0) {
        set_down(s, sl, "no answer (connection failed or timed out)");
    } else {
        size_t len;
        const char *text;

        in = evhttp_request_get_input_buffer(req);
        len = evbuffer_get_length(in);
        text = (const char *)evbuffer_pullup(in, -1);
        if (code == 200 && text != NULL && len < (1u << 24)) {
            sl->batch = done; /* the answer functions read the batch */
            ok = done.head->is_get ? answer_get(sl, text, (int)len)
                                   : answer_raises(sl, text, (int)len);
            sl->batch = (struct batch_list){0};
        }
        if (ok) {
            set_up(s);
        } else {
            /* etcd's errors are JSON with a message: quote its start. */
            int shown = text == NULL ? 0 : len > 160 ? 160 : (int)len;

            log_error("etcd: %s (%s) answered %d with %s: %zu %s refused: "
                      "%.*s",
                      s->eps[sl->ep].host, s->eps[sl->ep].text, code,
                      code == 200 ? "a body that is not the expected JSON"
                                  : "an error",
                      done.n, done.head->is_get ? "read" : "raises", shown,
                      text == NULL ? "" : text);
        }
    }
    if (!ok) {
        batch_fail(&done);
    } else {
        batch_answer(&done);
    }
    dispatch(s);
}

static bool
send_batch(struct etcd_slot *sl)
{
    struct etcd_store *s = sl->s;
    struct evhttp_connection *conn = slot_conn(sl);
    struct evhttp_request *req;
    struct evbuffer *out;
    const char *path;

    if (conn == NULL) {
        return false;
    }
    {
        int ms = dial_share_ms(sl->deadline - dial_now_ms(), 1);
        struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

        evhttp_connection_set_timeout_tv(conn, &tv);
    }
    req = evhttp_request_new(on_response, sl);
    if (req == NULL) {
        return false;
    }
    out = evhttp_request_get_output_buffer(req);
    if (sl->batch.head->is_get) {
        struct batch_req *r = sl->batch.head;

        path = "/v3/kv/range";
        evbuffer_add_printf(out, "{\"key\":\"");
        key_add(out, r->key, r->klen);
        evbuffer_add_printf(out, "\"}");
    } else {
        path = "/v3/kv/txn";
        batch_sort(&sl->batch, s->sorted);
        evbuffer_add_printf(out, "{\"success\":[");
        for (struct batch_req *first = sl->batch.head; first != NULL;) {
            int64_t top;
            struct batch_req *end = batch_group(first, &top);

#define K() key_add(out, first->key, first->klen)
#define V() value_add(out, top)
            evbuffer_add_printf(out,
                                "%s{\"request_txn\":{\"compare\":[{"
                                "\"target\":\"CREATE\",\"result\":"
                                "\"EQUAL\",\"create_revision\":\"0\","
                                "\"key\":\"",
                                first == sl->batch.head ? "" : ",");
            K();
            evbuffer_add_printf(out, "\"}],\"success\":[{\"request_put\":{"
                                     "\"key\":\"");
            K();
            evbuffer_add_printf(out, "\",\"value\":\"");
            V();
            evbuffer_add_printf(out, "\"}}],\"failure\":[{\"request_txn\":{"
                                     "\"compare\":[{\"target\":\"VALUE\","
                                     "\"result\":\"LESS\",\"key\":\"");
            K();
            evbuffer_add_printf(out, "\",\"value\":\"");
            V();
            evbuffer_add_printf(out, "\"}],\"success\":[{\"request_put\":{"
                                     "\"key\":\"");
            K();
            evbuffer_add_printf(out, "\",\"value\":\"");
            V();
            evbuffer_add_printf(out, "\"}}],\"failure\":[{\"request_range\":"
                                     "{\"key\":\"");
            K();
            evbuffer_add_printf(out, "\"}}]}}]}}");
#undef K
#undef V
            first = end;
        }
        evbuffer_add_printf(out, "]}");
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "Host",
                      s->eps[sl->ep].host);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/json");
    /* On failure libevent has freed req and does not call on_response. */
    return evhttp_make_request(conn, req, EVHTTP_REQ_POST, path) == 0;
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
        sl->tries = 0;
        sl->deadline = dial_now_ms() + s->timeout_ms;
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

/* ---- readiness probe ------------------------------------------------- */

static void
on_probe(struct evhttp_request *req, void *arg)
{
    struct etcd_store *s = arg;
    int code = req != NULL ? evhttp_request_get_response_code(req) : 0;

    lib_enter(s->log);
    s->probing = false;
    if (s->closing) {
        return;
    }
    if (code == 200) {
        s->probe_round = 0;
        set_up(s);
        start_probe(s);
        return;
    }
    if (s->ready) {
        log_error("etcd: %s (%s): the status probe failed (%d)",
                  s->eps[s->probe_ep].host, s->eps[s->probe_ep].text, code);
        s->ready = false;
    }
    s->probe_ep = (s->probe_ep + 1) % s->neps; /* try the next one */
    if (++s->probe_round < s->neps) {
        struct timeval now = {0, 0};

        evtimer_add(s->probe_ev, &now); /* at once: another address */
        return;
    }
    s->probe_round = 0;
    start_probe(s);
}

static void
on_probe_timer(evutil_socket_t fd, short what, void *arg)
{
    struct etcd_store *s = arg;
    const struct endpoint *ep = &s->eps[s->probe_ep];
    struct evhttp_connection *conn;
    struct evhttp_request *req;

    lib_enter(s->log);
    (void)fd;
    (void)what;
    if (s->closing || s->probing) {
        return;
    }
    conn = ep_conn(s, &s->probe_conns[s->probe_ep], s->probe_ep, 1000);
    if (conn == NULL) {
        start_probe(s);
        return;
    }
    req = evhttp_request_new(on_probe, s);
    if (req == NULL) {
        start_probe(s);
        return;
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "Host", ep->host);
    evbuffer_add(evhttp_request_get_output_buffer(req), "{}", 2);
    s->probing = true;
    if (evhttp_make_request(conn, req, EVHTTP_REQ_POST,
                            "/v3/maintenance/status") != 0) {
        s->probing = false;
        start_probe(s);
    }
}

/* Probe soon, unless a probe is already planned or running: every
 * ETCD_PROBE_MS while down, every second while up (an idle sidecar
 * notices an outage too). */
static void
start_probe(struct etcd_store *s)
{
    struct timeval tv = {0, ETCD_PROBE_MS * 1000};

    if (s->ready) {
        tv.tv_sec = 1;
        tv.tv_usec = 0;
    }

    if (s->closing || s->probing || evtimer_pending(s->probe_ev, NULL)) {
        return;
    }
    evtimer_add(s->probe_ev, &tv);
}

/* ---- the ops --------------------------------------------------------- */

extern const struct store_ops store_etcd_ops;

static void
enqueue(struct etcd_store *s, const char *res, size_t len, int64_t token,
        bool is_get, store_cb cb, void *arg)
{
    struct batch_req *r;

    /* Until etcd has answered once, a call waits for it (coldq.h). */
    if (!s->closing && !s->ready &&
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

    return !s->closing && s->ready;
}

static void
etcd_free(struct etcd_store *s)
{
    coldq_free(s->cold); /* answers the calls still waiting */
    s->cold = NULL;
    for (int i = 0; s->slots != NULL && i < s->nslots; i++) {
        struct etcd_slot *sl = &s->slots[i];
        struct batch_list l = sl->batch;

        /* Freeing the connection frees its request without calling
         * on_response: answer first. */
        sl->busy = false;
        sl->batch = (struct batch_list){0};
        batch_fail(&l);
        for (int e = 0; sl->conns != NULL && e < s->neps; e++) {
            if (sl->conns[e] != NULL) {
                evhttp_connection_free(sl->conns[e]);
            }
        }
        free(sl->conns);
    }
    batch_fail(&s->pending);
    for (int e = 0; s->probe_conns != NULL && e < s->neps; e++) {
        if (s->probe_conns[e] != NULL) {
            evhttp_connection_free(s->probe_conns[e]);
        }
    }
    free(s->probe_conns);
    if (s->probe_ev != NULL) {
        event_free(s->probe_ev);
    }
    if (s->kick_ev != NULL) {
        event_free(s->kick_ev);
    }
    defer_free(s->defer);
    for (int i = 0; s->eps != NULL && i < s->neps; i++) {
        free(s->eps[i].addr);
    }
    free(s->eps);
    free(s->slots);
    free(s->sorted);
    free(s->toks);
    free(s);
}

/* Add one target per address of name (the endpoint's host; hostport,
 * hplen bytes, is its "host:port" as written, the Host header), in the
 * resolver's order. A name that does not resolve now is kept as one
 * target that evhttp resolves at each connect. */
static bool
add_targets(struct etcd_store *s, const char *name, int hplen,
            const char *hostport, int port, char *err, size_t errlen)
{
    struct dial_list *l = malloc(sizeof(*l));
    char why[256];
    size_t n;

    if (l == NULL) {
        snprintf(err, errlen, "etcd: out of memory");
        return false;
    }
    if (!dial_resolve(name, port, l, why, sizeof(why))) {
        log_warn("etcd: %s; trying it again at each connect", why);
        l->n = 0;
    }
    n = l->n > 0 ? l->n : 1;
    for (size_t i = 0; i < n; i++) {
        struct endpoint *eps =
            realloc(s->eps, (size_t)(s->neps + 1) * sizeof(*eps));
        struct endpoint *ep;

        if (eps == NULL) {
            free(l);
            snprintf(err, errlen, "etcd: out of memory");
            return false;
        }
        s->eps = eps;
        ep = &eps[s->neps];
        memset(ep, 0, sizeof(*ep));
        ep->port = port;
        ep->addr = strdup(l->n > 0 ? l->a[i].ip : name);
        snprintf(ep->host, sizeof(ep->host), "%.*s", hplen, hostport);
        snprintf(ep->text, sizeof(ep->text), "%s",
                 l->n > 0 ? l->a[i].text : "not resolved");
        s->neps++;
        if (ep->addr == NULL) {
            free(l);
            snprintf(err, errlen, "etcd: out of memory");
            return false;
        }
    }
    free(l);
    return true;
}

/* Split "http://h:p, http://h:p" (checked by the config loader). */
static bool
parse_endpoints(struct etcd_store *s, const char *v, char *err, size_t errlen)
{
    const char *p = v;

    for (;;) {
        size_t n = strcspn(p, ",");
        const char *a, *e, *colon;

        while (n > 0 && (*p == ' ' || *p == '\t')) {
            p++;
            n--;
        }
        e = p + n;
        while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '/')) {
            e--;
        }
        if ((size_t)(e - p) < 8 || strncmp(p, "http://", 7) != 0) {
            snprintf(err, errlen,
                     "etcd: [store] endpoints must be "
                     "http://host:port, comma-separated");
            return false;
        }
        a = p + 7;
        if (*a == '[') {
            const char *rb = memchr(a, ']', (size_t)(e - a));

            colon = rb != NULL && rb + 1 < e && rb[1] == ':' ? rb + 1 : NULL;
        } else {
            colon = memchr(a, ':', (size_t)(e - a));
        }
        if (colon == NULL) {
            snprintf(err, errlen, "etcd: [store] endpoints need a port");
            return false;
        }
        {
            char name[256];
            size_t hl =
                *a == '[' ? (size_t)(colon - a - 2) : (size_t)(colon - a);

            if (hl >= sizeof(name)) {
                snprintf(err, errlen, "etcd: [store] endpoint host too long");
                return false;
            }
            memcpy(name, *a == '[' ? a + 1 : a, hl);
            name[hl] = '\0';
            if (!add_targets(s, name, (int)(e - a), a, atoi(colon + 1), err,
                             errlen)) {
                return false;
            }
        }
        if (p[n] == '\0') {
            return true;
        }
        p += n + 1;
    }
}

static struct store *
etcd_open(struct event_base *base, const struct cfg_store *cfg, char *err,
          size_t errlen)
{
    struct etcd_store *s;

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
    s->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 2000;
    s->nslots = cfg->pool_size > 0 ? cfg->pool_size : 2;
    if (!parse_endpoints(s, cfg->endpoints, err, errlen)) {
        etcd_free(s);
        return NULL;
    }
    s->slots = calloc((size_t)s->nslots, sizeof(*s->slots));
    s->sorted = calloc(ETCD_RAISES_MAX, sizeof(*s->sorted));
    s->toks = calloc(ETCD_JSON_TOKENS_MAX, sizeof(*s->toks));
    s->kick_ev = event_new(base, -1, 0, on_kick, s);
    s->probe_ev = evtimer_new(base, on_probe_timer, s);
    s->defer = defer_new(base);
    s->cold = coldq_new(base, s->timeout_ms);
    if (s->cold == NULL || s->slots == NULL || s->sorted == NULL ||
        s->toks == NULL || s->kick_ev == NULL || s->probe_ev == NULL ||
        s->defer == NULL) {
        snprintf(err, errlen, "etcd: out of memory");
        etcd_free(s);
        return NULL;
    }
    s->probe_conns = calloc((size_t)s->neps, sizeof(*s->probe_conns));
    if (s->probe_conns == NULL) {
        snprintf(err, errlen, "etcd: out of memory");
        etcd_free(s);
        return NULL;
    }
    for (int i = 0; i < s->nslots; i++) {
        s->slots[i].s = s;
        s->slots[i].id = i;
        s->slots[i].ep = i % s->neps;
        s->slots[i].conns = calloc((size_t)s->neps, sizeof(*s->slots[i].conns));
        if (s->slots[i].conns == NULL) {
            snprintf(err, errlen, "etcd: out of memory");
            etcd_free(s);
            return NULL;
        }
    }
    /* Not ready until etcd answers: probe now. */
    {
        struct timeval now = {0, 0};

        evtimer_add(s->probe_ev, &now);
    }
    log_info("etcd: %d endpoints, %d connections", s->neps, s->nslots);
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
