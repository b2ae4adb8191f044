/* http_fetch.c: one HTTP/1.1 request over evhttp, plain or TLS, with a
 * deadline and a bounded answer, for the AWS credential endpoints. */
#include "http_fetch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/util.h>

#include "dial.h"
#include "http_limit.h"
#include "tls_client.h"

#define FETCH_HEAD_MAX 16384

/* The URL's parts: host (brackets taken off), port, the path and query
 * to send and the Host header's value. */
struct target {
    char host[256];
    int port;
    bool tls;
    char hosthdr[300];
    char path[2048];
};

struct http_fetch {
    struct event_base *base;
    struct evhttp_connection *conn;
    struct evhttp_request *req; /* made, not sent yet: while looking up */
    struct dial_lookup *lookup; /* in flight */
    struct event *late;         /* the deadline: of the lookup, then of the
                                 * answer (evhttp's timeout starts again
                                 * with every byte that comes) */
    struct event *reap; /* frees f on a later pass, after its callback */
    http_fetch_cb cb;
    void *arg;
    const char *why; /* evhttp's error, when it gave one */
    bool over;       /* failed for what it held unread */
    SSL_CTX *ctx;
    enum evhttp_cmd_type method;
    int timeout_ms;
    int64_t deadline; /* of the whole fetch, ms (dial_now_ms) */
    size_t max_answer;
    struct target t;
    struct tls_client_why tls_why; /* why TLS failed, in words */
    char lookup_why[320];
};

static void
fetch_free(struct http_fetch *f)
{
    dial_lookup_cancel(f->lookup);
    if (f->req != NULL) {
        evhttp_request_free(f->req);
    }
    if (f->conn != NULL) {
        evhttp_connection_free(f->conn);
    }
    if (f->late != NULL) {
        event_free(f->late);
    }
    if (f->reap != NULL) {
        event_free(f->reap);
    }
    free(f);
}

static void
on_reap(evutil_socket_t fd, short what, void *arg)
{
    fetch_free(arg);
}

static void
on_error(enum evhttp_request_error e, void *arg)
{
    static const char *const why[] = {
        [EVREQ_HTTP_TIMEOUT] = "timed out",
        [EVREQ_HTTP_EOF] = "the connection closed before an answer",
        [EVREQ_HTTP_INVALID_HEADER] = "the answer's head is not HTTP",
        [EVREQ_HTTP_BUFFER_ERROR] = "the connection failed",
        [EVREQ_HTTP_REQUEST_CANCEL] = "canceled",
        [EVREQ_HTTP_DATA_TOO_LONG] = "the answer is too long",
    };
    struct http_fetch *f = arg;

    if (f->over) {
        f->why = "the answer is too long (a line without an end)";
    } else if ((size_t)e < sizeof(why) / sizeof(why[0]) && why[e] != NULL) {
        f->why = why[e];
    }
}

static void
on_unread(struct evbuffer *in, const struct evbuffer_cb_info *info, void *arg)
{
    struct http_fetch *f = arg;

    if (f->conn != NULL &&
        http_limit_unread(evhttp_connection_get_bufferevent(f->conn), in, info,
                          HTTP_LIMIT_UNREAD(FETCH_HEAD_MAX, f->max_answer))) {
        f->over = true;
    }
}

static void
on_done(struct evhttp_request *req, void *arg)
{
    struct http_fetch *f = arg;
    struct http_fetch_answer a = {0, "", 0, f->why};

    if (f->late != NULL) {
        event_del(f->late);
    }
    struct evbuffer *in = NULL;
    int code = req != NULL ? evhttp_request_get_response_code(req) : 0;

    if (code > 0) {
        in = evhttp_request_get_input_buffer(req);
        evbuffer_add(in, "", 1);
        a.status = code;
        a.len = evbuffer_get_length(in) - 1;
        a.body = (const char *)evbuffer_pullup(in, -1);
        a.why = NULL;
    } else if (f->tls_why.s[0] != '\0') {
        a.why = f->tls_why.s;
    }
    if (code <= 0 && a.why == NULL) {
        a.why = "no answer (refused, or the connection failed)";
    }
    if (a.body == NULL) {
        a = (struct http_fetch_answer){0, "", 0, "out of memory"};
    }
    f->cb(f->arg, &a);
    if (in != NULL) {
        OPENSSL_cleanse(evbuffer_pullup(in, -1), evbuffer_get_length(in));
    }
    event_active(f->reap, EV_TIMEOUT, 0);
}

static const char *
parse_url(const char *url, struct target *t)
{
    struct evhttp_uri *u = evhttp_uri_parse(url);
    const char *s = u != NULL ? evhttp_uri_get_scheme(u) : NULL;
    const char *h = u != NULL ? evhttp_uri_get_host(u) : NULL;
    const char *p = u != NULL ? evhttp_uri_get_path(u) : NULL;
    const char *q = u != NULL ? evhttp_uri_get_query(u) : NULL;
    const char *msg = NULL;
    size_t hl = h != NULL ? strlen(h) : 0;
    int port = u != NULL ? evhttp_uri_get_port(u) : -1;

    if (s == NULL || h == NULL || hl == 0 || hl + 1 > sizeof(t->host) ||
        (strcmp(s, "http") != 0 && strcmp(s, "https") != 0)) {
        msg = "not an http:// or https:// URL with a host";
    } else {
        t->tls = strcmp(s, "https") == 0;
        t->port = port > 0 ? port : t->tls ? 443 : 80;
        snprintf(t->host, sizeof(t->host), "%.*s",
                 (int)(h[0] == '[' ? hl - 2 : hl), h[0] == '[' ? h + 1 : h);
        snprintf(t->hosthdr, sizeof(t->hosthdr), port > 0 ? "%s:%d" : "%s", h,
                 port);
        if ((size_t)snprintf(t->path, sizeof(t->path), "%s%s%s",
                             p != NULL && p[0] != '\0' ? p : "/",
                             q != NULL ? "?" : "",
                             q != NULL ? q : "") >= sizeof(t->path)) {
            msg = "the URL is too long";
        }
    }
    if (u != NULL) {
        evhttp_uri_free(u);
    }
    return msg;
}

/* A connection to ip, t's address, plain or TLS (its failure noted in
 * why). */
static struct evhttp_connection *
connect_to(struct event_base *base, const struct target *t, const char *ip,
           SSL_CTX *tls, struct tls_client_why *why, char *err, size_t errlen)
{
    struct bufferevent *bev = NULL;

    if (!t->tls) {
        return evhttp_connection_base_new(base, NULL, ip,
                                          (unsigned short)t->port);
    }
    if (tls == NULL) {
        snprintf(err, errlen, "https: no TLS context");
        return NULL;
    }
    bev = tls_client_bev(base, tls, t->host, why);
    if (bev == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return evhttp_connection_base_bufferevent_new(base, NULL, bev, ip,
                                                  (unsigned short)t->port);
}

static enum evhttp_cmd_type
method_of(const char *m)
{
    if (strcmp(m, "PUT") == 0) {
        return EVHTTP_REQ_PUT;
    }
    return strcmp(m, "POST") == 0 ? EVHTTP_REQ_POST : EVHTTP_REQ_GET;
}

/* The request, made now (rq's strings are borrowed) and sent once
 * there is a connection. */
static struct evhttp_request *
make_req(struct http_fetch *f, const struct http_fetch_req *rq)
{
    struct evhttp_request *req = evhttp_request_new(on_done, f);
    struct evkeyvalq *hd;

    if (req == NULL) {
        return NULL;
    }
    evhttp_request_set_error_cb(req, on_error);
    hd = evhttp_request_get_output_headers(req);
    evhttp_add_header(hd, "Host", f->t.hosthdr);
    evhttp_add_header(hd, "User-Agent", "tidemark");
    for (size_t i = 0; rq->headers != NULL && rq->headers[i] != NULL; i += 2) {
        evhttp_add_header(hd, rq->headers[i], rq->headers[i + 1]);
    }
    if (rq->body != NULL && evbuffer_add(evhttp_request_get_output_buffer(req),
                                         rq->body, rq->blen) != 0) {
        evhttp_request_free(req);
        return NULL;
    }
    return req;
}

static void on_late(evutil_socket_t fd, short what, void *arg);

/* Connect to l's first address and send the request, within what is
 * left of the deadline. false with err when it cannot. */
static bool
send_to(struct http_fetch *f, const struct dial_list *l, char *err,
        size_t errlen)
{
    int64_t left = f->deadline - dial_now_ms();
    int ms = left < 1 ? 1 : left > f->timeout_ms ? f->timeout_ms : (int)left;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    struct evhttp_request *req = f->req;

    if (l->n == 0) {
        snprintf(err, errlen, "%s has no address", f->t.host);
        return false;
    }
    f->conn = connect_to(f->base, &f->t, l->a[0].ip, f->ctx, &f->tls_why, err,
                         errlen);
    if (f->conn == NULL) {
        return false;
    }
    evhttp_connection_set_retries(f->conn, 0);
    evhttp_connection_set_timeout_tv(f->conn, &tv);
    evhttp_connection_set_max_body_size(f->conn, (ev_ssize_t)f->max_answer);
    evhttp_connection_set_max_headers_size(f->conn, FETCH_HEAD_MAX);
    if (evbuffer_add_cb(
            bufferevent_get_input(evhttp_connection_get_bufferevent(f->conn)),
            on_unread, f) == NULL) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    f->req = NULL; /* the connection's now, sent or not */
    if (evhttp_make_request(f->conn, req, f->method, f->t.path) != 0) {
        snprintf(err, errlen, "cannot send the request");
        return false;
    }
    /* An answer that trickles in keeps evhttp's timeout from ever
     * firing: the fetch's own deadline ends it. */
    if ((f->late == NULL &&
         (f->late = evtimer_new(f->base, on_late, f)) == NULL) ||
        evtimer_add(f->late, &tv) != 0) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    return true;
}

/* No answer, why: the callback, then f ends (not from inside a lookup's
 * own call: dial_lookup's callbacks run on a pass of their own). */
static void
fail(struct http_fetch *f, const char *why)
{
    struct http_fetch_answer a = {0, "", 0, why};

    f->cb(f->arg, &a);
    fetch_free(f);
}

static void
on_looked_up(void *arg, const struct dial_list *list, const char *why)
{
    struct http_fetch *f = arg;
    char err[256];

    f->lookup = NULL; /* dial_lookup frees it after this returns */
    event_del(f->late);
    if (list == NULL) {
        fail(f, why);
    } else if (!send_to(f, list, err, sizeof(err))) {
        fail(f, err);
    }
}

static void
on_late(evutil_socket_t fd, short what, void *arg)
{
    struct http_fetch *f = arg;

    (void)fd;
    (void)what;
    if (f->lookup != NULL) {
        dial_lookup_cancel(f->lookup);
        f->lookup = NULL;
        snprintf(f->lookup_why, sizeof(f->lookup_why),
                 "cannot resolve %s: no answer within %d ms", f->t.host,
                 f->timeout_ms);
    } else {
        snprintf(f->lookup_why, sizeof(f->lookup_why),
                 "no whole answer within %d ms", f->timeout_ms);
    }
    fail(f, f->lookup_why);
}

/* Look f's host up through dns, the deadline covering it. */
static bool
look_up(struct http_fetch *f, const struct http_fetch_req *rq)
{
    struct timeval tv = {f->timeout_ms / 1000, (f->timeout_ms % 1000) * 1000};

    f->late = evtimer_new(f->base, on_late, f);
    f->lookup = f->late != NULL ? dial_lookup_start(f->base, rq->dns, f->t.host,
                                                    f->t.port, on_looked_up, f)
                                : NULL;
    if (f->lookup == NULL) {
        return false;
    }
    if (rq->asked != NULL) {
        (*rq->asked)++;
    }
    return evtimer_add(f->late, &tv) == 0;
}

/* f's request on its way: through a lookup on the loop, or (an address,
 * localhost, or no dns) to the address found now. localhost is the
 * system's /etc/hosts answer, never a DNS server's (which [proxy]
 * resolver's evdns would ask). false with err when it cannot. */
static bool
begin(struct http_fetch *f, const struct http_fetch_req *rq, char *err,
      size_t errlen)
{
    struct dial_list l;

    f->req = make_req(f, rq);
    if (f->req == NULL) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    if (rq->dns != NULL && !dial_is_ip(f->t.host) &&
        strcasecmp(f->t.host, "localhost") != 0) {
        if (!look_up(f, rq)) {
            snprintf(err, errlen, "out of memory");
            return false;
        }
        return true;
    }
    return dial_resolve(f->t.host, f->t.port, &l, err, errlen) &&
           send_to(f, &l, err, errlen);
}

struct http_fetch *
http_fetch_start(struct event_base *base, const struct http_fetch_req *rq,
                 http_fetch_cb cb, void *arg, char *err, size_t errlen)
{
    struct http_fetch *f = calloc(1, sizeof(*f));
    const char *msg = f == NULL ? "out of memory" : parse_url(rq->url, &f->t);

    err[0] = '\0';
    if (msg == NULL && f->t.tls && rq->tls == NULL) {
        msg = "https: no TLS context";
    }
    if (msg == NULL && (f->reap = event_new(base, -1, 0, on_reap, f)) == NULL) {
        msg = "out of memory";
    }
    if (msg != NULL) {
        snprintf(err, errlen, "%s", msg);
        free(f); /* nothing made yet */
        return NULL;
    }
    f->base = base;
    f->cb = cb;
    f->arg = arg;
    f->ctx = rq->tls;
    f->method = method_of(rq->method);
    f->timeout_ms = rq->timeout_ms > 0 ? rq->timeout_ms : 1;
    f->deadline = dial_now_ms() + f->timeout_ms;
    f->max_answer = rq->max_answer;
    if (!begin(f, rq, err, errlen)) {
        fetch_free(f);
        return NULL;
    }
    return f;
}

void
http_fetch_cancel(struct http_fetch *f)
{
    if (f != NULL) {
        fetch_free(f);
    }
}
