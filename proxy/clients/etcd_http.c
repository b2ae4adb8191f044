/* etcd_http.c: etcd's v3 JSON gateway over evhttp for the mark store and
 * the lock backend: endpoints, calls with failover, readiness probes and
 * watch streams; JSON read and written with jansson. */
#include "etcd_http.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "../log.h"
#include "dial.h"
#include "http_limit.h"
#include "tls_client.h"

#define EH_PROBE_MS 500
/* What one answer may take in memory: its headers, and its body (a
 * call's whole answer; a watch's whole stream, chunks included, after
 * which its owner watches again from where it was). Past either, evhttp
 * drops the connection as it reads, before it holds more. */
#define EH_HEAD_MAX (64u << 10)
#define EH_BODY_MAX (16u << 20)
#define EH_LINE_MAX (4u << 20)
/* Past this unread, a line without an end (a chunk's size), which evhttp
 * would wait on for ever: the connection is failed instead. */
#define EH_UNREAD_MAX HTTP_LIMIT_UNREAD(EH_HEAD_MAX, EH_BODY_MAX)
#define EH_WATCH_IDLE_S 86400

/* One address of an endpoint: evhttp connects to the first address of a
 * name only, so each address of each endpoint is a target of its own
 * (resolved at startup), tried in order. */
struct endpoint {
    char *addr; /* numeric, for evhttp; the name when it did not resolve */
    int port;
    char host[300]; /* the Host header: the endpoint as written */
    char name[256]; /* its host: what a TLS certificate must name */
    char text[64];  /* the address, for log lines: "[::1]:2379" */
};

struct etcd_call {
    struct etcd_call *prev, *next; /* h->calls */
    struct etcd_http *h;
    etcd_cb cb;
    void *arg;
    char *path;
    char *body; /* serialized, kept for a retry */
    int ep;
    int tries;
    int64_t deadline;
    /* why evhttp dropped its answer: the limits above, or not HTTP */
    enum evhttp_request_error error;
    /* The request in flight, and the deadline's timer: evhttp's timeout
     * starts again with every byte, so an answer that trickles in (or a
     * call queued behind one on its connection) would never end. */
    struct evhttp_request *req;
    struct event *late;
};

struct etcd_watch {
    struct etcd_watch *prev, *next; /* h->watches */
    struct etcd_http *h;
    struct evhttp_connection *conn;
    struct evbuffer *buf; /* a line not yet complete */
    etcd_watch_cb cb;
    void *arg;
    char *body;
    int ep;
    bool over;     /* the stream ended: no more callbacks */
    bool too_long; /* evhttp ended it for the limits above */
};

struct etcd_http {
    struct event_base *base;
    const struct tm_log *log; /* the proxy's, entered by callbacks */
    char who[32];
    struct endpoint *eps;
    int neps;
    int ep; /* where calls go now */
    int nconns;
    unsigned rr;
    int timeout_ms;
    SSL_CTX *tls;                     /* https:// endpoints; NULL: http:// */
    struct tls_client_why why;        /* the last TLS failure, not logged yet */
    char why_logged[192];             /* the last one logged */
    struct evhttp_connection **conns; /* neps * nconns, made when used */
    struct evhttp_connection **probe_conns;
    struct etcd_call *calls;
    struct etcd_watch *watches;
    /* Ended watches: freed with their connections on a later pass of
     * the loop, never inside their own callbacks (evhttp may still
     * hand the request more of the stream in this pass). */
    struct etcd_watch **dead;
    size_t ndead, capdead;
    struct event *reap_ev;
    struct event *probe_ev;
    void (*on_up)(void *arg);
    void *on_up_arg;
    int probe_ep;
    bool probing;
    bool ready;
    bool ever_ready;
    bool closing;
    unsigned failures;
};

/* ---- endpoints -------------------------------------------------------- */

/* Add one target per address of name (hostport, hplen bytes, is its
 * "host:port" as written, the Host header), in the resolver's order. A
 * name that does not resolve now is kept as one target that evhttp
 * resolves at each connect. */
static bool
add_targets(struct etcd_http *h, const char *name, int hplen,
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
        log_warn("etcd %s: %s; trying it again at each connect", h->who, why);
        l->n = 0;
    }
    n = l->n > 0 ? l->n : 1;
    for (size_t i = 0; i < n; i++) {
        struct endpoint *eps =
            realloc(h->eps, (size_t)(h->neps + 1) * sizeof(*eps));
        struct endpoint *ep;

        if (eps == NULL) {
            free(l);
            snprintf(err, errlen, "etcd: out of memory");
            return false;
        }
        h->eps = eps;
        ep = &eps[h->neps];
        memset(ep, 0, sizeof(*ep));
        ep->port = port;
        ep->addr = strdup(l->n > 0 ? l->a[i].ip : name);
        snprintf(ep->host, sizeof(ep->host), "%.*s", hplen, hostport);
        snprintf(ep->name, sizeof(ep->name), "%s", name);
        snprintf(ep->text, sizeof(ep->text), "%s",
                 l->n > 0 ? l->a[i].text : "not resolved");
        h->neps++;
        if (ep->addr == NULL) {
            free(l);
            snprintf(err, errlen, "etcd: out of memory");
            return false;
        }
    }
    free(l);
    return true;
}

/* The length of p[0..e)'s scheme "http://" (https: false) or
 * "https://" (https: true); 0 for any other. */
static size_t
scheme_len(const char *p, const char *e, bool https)
{
    const char *want = https ? "https://" : "http://";
    size_t n = strlen(want);

    return (size_t)(e - p) > n && strncmp(p, want, n) == 0 ? n : 0;
}

/* One "http://host:port" of p[0..e) (or "https://", as all of them are
 * when h->tls is set). */
static bool
parse_one(struct etcd_http *h, const char *p, const char *e, char *err,
          size_t errlen)
{
    const char *a, *colon;
    char name[256];
    size_t hl, skip = scheme_len(p, e, h->tls != NULL);

    if (skip == 0) {
        snprintf(err, errlen,
                 "etcd: %s endpoints must be all http://host:port or all "
                 "https://host:port, comma-separated",
                 h->who);
        return false;
    }
    a = p + skip;
    if (*a == '[') {
        const char *rb = memchr(a, ']', (size_t)(e - a));

        colon = rb != NULL && rb + 1 < e && rb[1] == ':' ? rb + 1 : NULL;
    } else {
        colon = memchr(a, ':', (size_t)(e - a));
    }
    if (colon == NULL) {
        snprintf(err, errlen, "etcd: %s endpoints need a port", h->who);
        return false;
    }
    hl = *a == '[' ? (size_t)(colon - a - 2) : (size_t)(colon - a);
    if (hl >= sizeof(name)) {
        snprintf(err, errlen, "etcd: %s endpoint host too long", h->who);
        return false;
    }
    memcpy(name, *a == '[' ? a + 1 : a, hl);
    name[hl] = '\0';
    return add_targets(h, name, (int)(e - a), a, atoi(colon + 1), err, errlen);
}

/* Split "http://h:p, http://h:p" (checked by the config loader). */
static bool
parse_endpoints(struct etcd_http *h, const char *v, char *err, size_t errlen)
{
    const char *p = v;

    for (;;) {
        size_t n = strcspn(p, ",");
        const char *e;

        while (n > 0 && (*p == ' ' || *p == '\t')) {
            p++;
            n--;
        }
        e = p + n;
        while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '/')) {
            e--;
        }
        if (!parse_one(h, p, e, err, errlen)) {
            return false;
        }
        if (p[n] == '\0') {
            return true;
        }
        p += n + 1;
    }
}

/* ---- connections and readiness --------------------------------------- */

/* The connection of h whose unread bytes are in, and which endpoint it
 * is to; NULL if it is none of h's. */
static struct bufferevent *
reading_into(struct etcd_http *h, const struct evbuffer *in, int *ep)
{
    struct evhttp_connection *c = NULL;

    for (int i = 0; c == NULL && i < h->neps * h->nconns; i++) {
        if (h->conns[i] != NULL &&
            bufferevent_get_input(
                evhttp_connection_get_bufferevent(h->conns[i])) == in) {
            c = h->conns[i];
            *ep = i / h->nconns;
        }
    }
    for (int i = 0; c == NULL && i < h->neps; i++) {
        if (h->probe_conns[i] != NULL &&
            bufferevent_get_input(
                evhttp_connection_get_bufferevent(h->probe_conns[i])) == in) {
            c = h->probe_conns[i];
            *ep = i;
        }
    }
    for (struct etcd_watch *w = h->watches; c == NULL && w != NULL;
         w = w->next) {
        if (bufferevent_get_input(evhttp_connection_get_bufferevent(w->conn)) ==
            in) {
            c = w->conn;
            *ep = w->ep;
        }
    }
    return c != NULL ? evhttp_connection_get_bufferevent(c) : NULL;
}

/* A connection's unread bytes grew: past EH_UNREAD_MAX, it fails. */
static void
on_unread(struct evbuffer *in, const struct evbuffer_cb_info *info, void *arg)
{
    struct etcd_http *h = arg;
    struct bufferevent *bev;
    int ep = 0;

    if (info->n_added == 0 || evbuffer_get_length(in) <= EH_UNREAD_MAX ||
        (bev = reading_into(h, in, &ep)) == NULL ||
        !http_limit_unread(bev, in, info, EH_UNREAD_MAX)) {
        return;
    }
    lib_enter(h->log);
    log_error("etcd %s: %s (%s): an answer went past %u bytes unread (a "
              "line without an end): dropping its connection",
              h->who, LOG_STR(h->eps[ep].host), h->eps[ep].text,
              (unsigned)EH_UNREAD_MAX);
}

static struct evhttp_connection *
new_conn(struct etcd_http *h, int i, int timeout_ms)
{
    const struct endpoint *ep = &h->eps[i];
    struct bufferevent *bev =
        h->tls != NULL ? tls_client_bev(h->base, h->tls, ep->name, &h->why)
                       : NULL;
    struct evhttp_connection *c =
        h->tls != NULL && bev == NULL
            ? NULL
            : evhttp_connection_base_bufferevent_new(
                  h->base, NULL, bev, ep->addr, (unsigned short)ep->port);
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};

    if (c != NULL) {
        struct bufferevent *io = evhttp_connection_get_bufferevent(c);

        evhttp_connection_set_retries(c, 0);
        evhttp_connection_set_timeout_tv(c, &tv);
        evhttp_connection_set_max_headers_size(c, EH_HEAD_MAX);
        evhttp_connection_set_max_body_size(c, EH_BODY_MAX);
        if (evbuffer_add_cb(bufferevent_get_input(io), on_unread, h) == NULL) {
            evhttp_connection_free(c);
            c = NULL;
        }
    }
    return c;
}

/* evhttp's reason, given before the request's callback gets NULL. */
static void
on_call_error(enum evhttp_request_error e, void *arg)
{
    ((struct etcd_call *)arg)->error = e;
}

static void
on_watch_error(enum evhttp_request_error e, void *arg)
{
    ((struct etcd_watch *)arg)->too_long = e == EVREQ_HTTP_DATA_TOO_LONG;
}

static void start_probe(struct etcd_http *h);

/* Log the TLS failure noted since the last one logged, if it differs:
 * a wrong CA or a refused client certificate says so once, not at every
 * probe. */
static void
log_tls_failure(struct etcd_http *h, int ep)
{
    if (h->why.s[0] == '\0') {
        return;
    }
    if (strcmp(h->why.s, h->why_logged) != 0) {
        log_error("etcd %s: %s (%s): TLS: %s", h->who, LOG_STR(h->eps[ep].host),
                  h->eps[ep].text, h->why.s);
        memcpy(h->why_logged, h->why.s, sizeof(h->why_logged));
    }
    h->why.s[0] = '\0';
}

static void
set_down(struct etcd_http *h, int ep, const char *why)
{
    if (h->ready || h->failures % 50 == 0) {
        log_error("etcd %s: %s (%s): %s", h->who, LOG_STR(h->eps[ep].host),
                  h->eps[ep].text, why);
    }
    h->failures++;
    h->ready = false;
    if (h->ep == ep) {
        h->ep = (ep + 1) % h->neps; /* the next call goes elsewhere */
    }
    if (evtimer_pending(h->probe_ev, NULL)) {
        evtimer_del(h->probe_ev); /* probe soon, not in a second */
    }
    start_probe(h);
}

static void
set_up(struct etcd_http *h)
{
    bool was = h->ready;

    if (!h->ready) {
        log_info("etcd %s: %s", h->who,
                 h->ever_ready ? "usable again" : "ready");
    }
    h->ready = true;
    h->ever_ready = true;
    h->failures = 0;
    h->why_logged[0] = '\0';
    if (!was && h->on_up != NULL) {
        h->on_up(h->on_up_arg);
    }
}

void
etcd_http_on_up(struct etcd_http *h, void (*fn)(void *arg), void *arg)
{
    h->on_up = fn;
    h->on_up_arg = arg;
}

bool
etcd_http_ready(struct etcd_http *h)
{
    return !h->closing && h->ready;
}

static void
on_probe(struct evhttp_request *req, void *arg)
{
    struct etcd_http *h = arg;
    int code = req != NULL ? evhttp_request_get_response_code(req) : 0;

    lib_enter(h->log);
    h->probing = false;
    if (h->closing) {
        return;
    }
    if (code == 200) {
        set_up(h);
        start_probe(h);
        return;
    }
    log_tls_failure(h, h->probe_ep);
    if (h->ready) {
        log_error("etcd %s: %s (%s): the status probe failed (%d)", h->who,
                  LOG_STR(h->eps[h->probe_ep].host), h->eps[h->probe_ep].text,
                  code);
        h->ready = false;
    }
    h->probe_ep = (h->probe_ep + 1) % h->neps;
    start_probe(h);
}

static void
on_probe_timer(evutil_socket_t fd, short what, void *arg)
{
    struct etcd_http *h = arg;
    const struct endpoint *ep = &h->eps[h->probe_ep];
    struct evhttp_connection **slot = &h->probe_conns[h->probe_ep];
    struct evhttp_request *req;

    lib_enter(h->log);
    (void)fd;
    (void)what;
    if (h->closing || h->probing) {
        return;
    }
    if (*slot == NULL) {
        *slot = new_conn(h, h->probe_ep, 1000);
    }
    req = *slot != NULL ? evhttp_request_new(on_probe, h) : NULL;
    if (req == NULL) {
        start_probe(h);
        return;
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "Host", ep->host);
    evbuffer_add(evhttp_request_get_output_buffer(req), "{}", 2);
    h->probing = true;
    if (evhttp_make_request(*slot, req, EVHTTP_REQ_POST,
                            "/v3/maintenance/status") != 0) {
        h->probing = false;
        start_probe(h);
    }
}

/* Probe soon, unless a probe is planned or running: every EH_PROBE_MS
 * while down, every second while up (an idle sidecar notices an outage
 * too). */
static void
start_probe(struct etcd_http *h)
{
    struct timeval tv = {0, EH_PROBE_MS * 1000};

    if (h->closing || h->probing || evtimer_pending(h->probe_ev, NULL)) {
        return;
    }
    if (h->ready) {
        tv.tv_sec = 1;
        tv.tv_usec = 0;
    }
    evtimer_add(h->probe_ev, &tv);
}

/* ---- calls ------------------------------------------------------------ */

static void
call_unlink(struct etcd_call *c)
{
    struct etcd_http *h = c->h;

    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        h->calls = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
}

static void
call_answer(struct etcd_call *c, struct etcd_reply *rep)
{
    call_unlink(c);
    rep->tries = c->tries;
    c->cb(c->arg, rep);
    if (c->late != NULL) {
        event_free(c->late);
    }
    free(c->path);
    free(c->body);
    free(c);
}

static bool send_call(struct etcd_call *c);

/* Read an answer: 200 with an object, or etcd's error object. */
static void
read_reply(struct etcd_call *c, struct evhttp_request *req, int code)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    const char *text =
        len <= EH_BODY_MAX ? (const char *)evbuffer_pullup(in, -1) : NULL;
    json_error_t jerr;
    json_t *body = text != NULL ? json_loadb(text, len, 0, &jerr) : NULL;
    struct etcd_reply rep = {.http = code, .body = body};

    if (code == 200) {
        rep.st = json_is_object(body) ? ETCD_OK : ETCD_BAD;
    } else {
        json_t *m = json_object_get(body, "message");
        json_t *k = json_object_get(body, "code");

        rep.st = ETCD_FAILED;
        rep.message = json_is_string(m) ? json_string_value(m) : "-";
        rep.code = json_is_integer(k) ? (int)json_integer_value(k) : 0;
    }
    if (rep.st == ETCD_BAD) {
        log_error("etcd %s: %s answered %s with a body that is not JSON",
                  c->h->who, c->h->eps[c->ep].text, c->path);
    }
    call_answer(c, &rep);
    json_decref(body);
}

/* c's request got no answer (why: c->error, or the deadline when late):
 * the next endpoint if time is left, else answered so. */
static void
call_failed(struct etcd_call *c, bool late)
{
    struct etcd_http *h = c->h;

    log_tls_failure(h, c->ep);
    set_down(h, c->ep,
             late ? "no whole answer within the call's timeout_ms"
             : c->error == EVREQ_HTTP_DATA_TOO_LONG
                 ? "an answer larger than 16 MiB of body: dropped as it came"
             : c->error == EVREQ_HTTP_INVALID_HEADER
                 ? "an answer that is not HTTP, or has more than 64 KiB of "
                   "headers"
                 : "no answer (connection failed or timed out)");
    c->error = EVREQ_HTTP_TIMEOUT; /* read as "no answer" */
    if (!h->closing && c->tries < h->neps && dial_now_ms() + 1 < c->deadline) {
        int next = (c->ep + 1) % h->neps;

        log_warn("etcd %s: %s (%s) gave no answer; trying %s", h->who,
                 LOG_STR(h->eps[c->ep].host), h->eps[c->ep].text,
                 h->eps[next].text);
        c->ep = next;
        if (send_call(c)) {
            return;
        }
    }
    {
        struct etcd_reply rep = {.st = ETCD_NOANSWER};

        call_answer(c, &rep);
    }
}

static void
on_response(struct evhttp_request *req, void *arg)
{
    struct etcd_call *c = arg;
    int code = req != NULL ? evhttp_request_get_response_code(req) : 0;

    lib_enter(c->h->log);
    c->req = NULL;
    evtimer_del(c->late);
    if (code != 0) {
        set_up(c->h);
        read_reply(c, req, code);
        return;
    }
    call_failed(c, false);
}

/* The deadline passed with c's answer not whole: cancel its request
 * (evhttp resets the connection if it was being answered, and calls
 * nothing back). */
static void
on_call_late(evutil_socket_t fd, short what, void *arg)
{
    struct etcd_call *c = arg;
    struct evhttp_request *req = c->req;

    (void)fd;
    (void)what;
    lib_enter(c->h->log);
    c->req = NULL;
    if (req != NULL) {
        evhttp_cancel_request(req);
    }
    call_failed(c, true);
}

static bool
send_call(struct etcd_call *c)
{
    struct etcd_http *h = c->h;
    size_t slot = (size_t)c->ep * (size_t)h->nconns + h->rr++ % h->nconns;
    struct evhttp_connection *conn = h->conns[slot];
    struct evhttp_request *req;
    int ms = dial_share_ms(c->deadline - dial_now_ms(), 1);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

    if (conn == NULL) {
        conn = h->conns[slot] = new_conn(h, c->ep, ms);
    }
    if (c->late == NULL) {
        c->late = evtimer_new(h->base, on_call_late, c);
    }
    if (conn == NULL || c->late == NULL ||
        (req = evhttp_request_new(on_response, c)) == NULL) {
        return false;
    }
    evhttp_connection_set_timeout_tv(conn, &tv);
    evhttp_request_set_error_cb(req, on_call_error);
    c->tries++;
    evhttp_add_header(evhttp_request_get_output_headers(req), "Host",
                      h->eps[c->ep].host);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/json");
    evbuffer_add(evhttp_request_get_output_buffer(req), c->body,
                 strlen(c->body));
    /* On failure libevent has freed req and does not call on_response. */
    if (evhttp_make_request(conn, req, EVHTTP_REQ_POST, c->path) != 0) {
        return false;
    }
    c->req = req;
    evtimer_add(c->late, &tv);
    return true;
}

bool
etcd_http_call(struct etcd_http *h, const char *path, json_t *body, etcd_cb cb,
               void *arg)
{
    struct etcd_call *c;

    if (h->closing || body == NULL) {
        json_decref(body);
        return false;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        json_decref(body);
        return false;
    }
    c->h = h;
    c->cb = cb;
    c->arg = arg;
    c->ep = h->ep;
    c->deadline = dial_now_ms() + h->timeout_ms;
    c->path = strdup(path);
    c->body = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (c->path == NULL || c->body == NULL || !send_call(c)) {
        if (c->late != NULL) {
            event_free(c->late);
        }
        free(c->path);
        free(c->body);
        free(c);
        return false;
    }
    c->next = h->calls;
    if (h->calls != NULL) {
        h->calls->prev = c;
    }
    h->calls = c;
    return true;
}

/* ---- watches ---------------------------------------------------------- */

static void
reap_cb(evutil_socket_t fd, short what, void *arg)
{
    struct etcd_http *h = arg;

    (void)fd;
    (void)what;
    for (size_t i = 0; i < h->ndead; i++) {
        struct etcd_watch *w = h->dead[i];

        evhttp_connection_free(w->conn);
        evbuffer_free(w->buf);
        free(w->body);
        free(w);
    }
    h->ndead = 0;
}

/* Free w on a later pass of the loop (it may be inside its own callback
 * now); until then it takes no more of its stream. */
static void
bury(struct etcd_http *h, struct etcd_watch *w)
{
    w->over = true;
    if (h->ndead == h->capdead) {
        size_t cap = h->capdead ? h->capdead * 2 : 8;
        struct etcd_watch **d = realloc(h->dead, cap * sizeof(*d));

        if (d == NULL) {
            return; /* leaked rather than freed under its own feet */
        }
        h->dead = d;
        h->capdead = cap;
    }
    h->dead[h->ndead++] = w;
    event_active(h->reap_ev, 0, 1);
}

static void
watch_over(struct etcd_watch *w)
{
    if (!w->over) {
        w->over = true;
        w->cb(w->arg, NULL);
    }
}

/* Hand each complete line of w's stream to its owner. */
static void
watch_lines(struct etcd_watch *w)
{
    char *line;
    size_t n;

    while (!w->over &&
           (line = evbuffer_readln(w->buf, &n, EVBUFFER_EOL_LF)) != NULL) {
        json_error_t jerr;
        json_t *msg = n > 0 ? json_loadb(line, n, 0, &jerr) : NULL;
        json_t *res = json_object_get(msg, "result");

        free(line);
        if (n == 0) {
            continue;
        }
        if (!json_is_object(res)) {
            log_warn("etcd %s: a watch answered something else than a "
                     "result: ended",
                     w->h->who);
            json_decref(msg);
            watch_over(w);
            return;
        }
        w->cb(w->arg, res);
        json_decref(msg);
    }
    if (evbuffer_get_length(w->buf) > EH_LINE_MAX) {
        watch_over(w);
    }
}

static void
on_watch_chunk(struct evhttp_request *req, void *arg)
{
    struct etcd_watch *w = arg;

    lib_enter(w->h->log);
    if (w->over || evhttp_request_get_response_code(req) != 200) {
        return; /* ended; or an error, whose body is read at the end */
    }
    evbuffer_add_buffer(w->buf, evhttp_request_get_input_buffer(req));
    watch_lines(w);
}

static void
on_watch_end(struct evhttp_request *req, void *arg)
{
    struct etcd_watch *w = arg;

    lib_enter(w->h->log);
    if (w->over) {
        return;
    }
    if (req != NULL && evhttp_request_get_response_code(req) == 200) {
        evbuffer_add_buffer(w->buf, evhttp_request_get_input_buffer(req));
        watch_lines(w);
    } else if (w->too_long) {
        /* Its stream reached 16 MiB, or announced more: not the
         * member's failure; its owner watches again. */
        log_info("etcd %s: %s (%s): a watch's stream went past 64 KiB of "
                 "headers or 16 MiB: ended",
                 w->h->who, LOG_STR(w->h->eps[w->ep].host),
                 w->h->eps[w->ep].text);
    } else if (!w->h->closing) {
        /* No stream, or it broke: the member is gone or not serving. The
         * next watch, like the next call, goes to another one. */
        set_down(w->h, w->ep,
                 req == NULL ? "the watch stream broke or got no answer"
                             : "the watch was refused");
    }
    watch_over(w);
}

struct etcd_watch *
etcd_http_watch(struct etcd_http *h, json_t *create_request, etcd_watch_cb cb,
                void *arg)
{
    struct etcd_watch *w = calloc(1, sizeof(*w));
    json_t *body = json_pack("{s:o}", "create_request", create_request);
    struct evhttp_request *req;

    if (w == NULL || body == NULL || h->closing) {
        free(w);
        json_decref(body);
        return NULL;
    }
    w->h = h;
    w->cb = cb;
    w->arg = arg;
    w->ep = h->ep;
    w->body = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    w->buf = evbuffer_new();
    w->conn = new_conn(h, w->ep, EH_WATCH_IDLE_S * 1000);
    req = w->conn != NULL && w->body != NULL && w->buf != NULL
              ? evhttp_request_new(on_watch_end, w)
              : NULL;
    if (req == NULL) {
        goto fail;
    }
    evhttp_request_set_chunked_cb(req, on_watch_chunk);
    evhttp_request_set_error_cb(req, on_watch_error);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Host",
                      h->eps[w->ep].host);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/json");
    evbuffer_add(evhttp_request_get_output_buffer(req), w->body,
                 strlen(w->body));
    if (evhttp_make_request(w->conn, req, EVHTTP_REQ_POST, "/v3/watch") != 0) {
        goto fail;
    }
    w->next = h->watches;
    if (h->watches != NULL) {
        h->watches->prev = w;
    }
    h->watches = w;
    return w;
fail:
    if (w->conn != NULL) {
        evhttp_connection_free(w->conn);
    }
    if (w->buf != NULL) {
        evbuffer_free(w->buf);
    }
    free(w->body);
    free(w);
    return NULL;
}

void
etcd_watch_free(struct etcd_watch *w)
{
    struct etcd_http *h;

    if (w == NULL) {
        return;
    }
    h = w->h;
    if (w->prev != NULL) {
        w->prev->next = w->next;
    } else {
        h->watches = w->next;
    }
    if (w->next != NULL) {
        w->next->prev = w->prev;
    }
    bury(h, w);
}

/* ---- life cycle ------------------------------------------------------- */

/* A TLS context when endpoints are https:// (the first says: mixing is
 * refused when they are parsed). false with err. */
static bool
tls_setup(struct etcd_http *h, const char *endpoints, const struct cfg_tls *tls,
          char *err, size_t errlen)
{
    static const struct cfg_tls none = {NULL, NULL, NULL};
    char who[48];

    endpoints += strspn(endpoints, " \t");
    if (strncmp(endpoints, "https://", 8) != 0) {
        return true;
    }
    snprintf(who, sizeof(who), "etcd %s", h->who);
    h->tls = tls_client_ctx(tls != NULL ? tls : &none, who, err, errlen);
    return h->tls != NULL;
}

struct etcd_http *
etcd_http_new(struct event_base *base, const char *endpoints,
              const struct cfg_tls *tls, const char *who, int timeout_ms,
              int nconns, char *err, size_t errlen)
{
    struct etcd_http *h = calloc(1, sizeof(*h));
    struct timeval now = {0, 0};

    if (h == NULL) {
        snprintf(err, errlen, "etcd: out of memory");
        return NULL;
    }
    h->base = base;
    h->log = log_current();
    snprintf(h->who, sizeof(h->who), "%s", who);
    h->timeout_ms = timeout_ms > 0 ? timeout_ms : 2000;
    h->nconns = nconns > 0 ? nconns : 1;
    if (endpoints == NULL || endpoints[0] == '\0') {
        snprintf(err, errlen, "etcd: %s endpoints is not set", who);
        etcd_http_free(h);
        return NULL;
    }
    if (!tls_setup(h, endpoints, tls, err, errlen) ||
        !parse_endpoints(h, endpoints, err, errlen)) {
        etcd_http_free(h);
        return NULL;
    }
    h->conns = calloc((size_t)h->neps * (size_t)h->nconns, sizeof(*h->conns));
    h->probe_conns = calloc((size_t)h->neps, sizeof(*h->probe_conns));
    h->probe_ev = evtimer_new(base, on_probe_timer, h);
    h->reap_ev = event_new(base, -1, 0, reap_cb, h);
    if (h->conns == NULL || h->probe_conns == NULL || h->probe_ev == NULL ||
        h->reap_ev == NULL) {
        snprintf(err, errlen, "etcd: out of memory");
        etcd_http_free(h);
        return NULL;
    }
    evtimer_add(h->probe_ev, &now); /* not ready until etcd answers */
    return h;
}

void
etcd_http_free(struct etcd_http *h)
{
    if (h == NULL) {
        return;
    }
    h->closing = true;
    /* Freeing a connection frees its requests without calling back:
     * answer first. */
    while (h->calls != NULL) {
        struct etcd_reply rep = {.st = ETCD_NOANSWER};

        call_answer(h->calls, &rep);
    }
    while (h->watches != NULL) {
        h->watches->over = true;
        etcd_watch_free(h->watches);
    }
    reap_cb(-1, 0, h);
    for (int i = 0; h->conns != NULL && i < h->neps * h->nconns; i++) {
        if (h->conns[i] != NULL) {
            evhttp_connection_free(h->conns[i]);
        }
    }
    for (int i = 0; h->probe_conns != NULL && i < h->neps; i++) {
        if (h->probe_conns[i] != NULL) {
            evhttp_connection_free(h->probe_conns[i]);
        }
    }
    if (h->probe_ev != NULL) {
        event_free(h->probe_ev);
    }
    if (h->reap_ev != NULL) {
        event_free(h->reap_ev);
    }
    for (int i = 0; h->eps != NULL && i < h->neps; i++) {
        free(h->eps[i].addr);
    }
    free(h->eps);
    free(h->conns);
    free(h->probe_conns);
    if (h->tls != NULL) {
        SSL_CTX_free(h->tls);
    }
    free(h->dead);
    free(h);
}
