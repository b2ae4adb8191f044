/* http_fetch.c: one HTTP/1.1 request over evhttp, plain or TLS, with a
 * deadline and a bounded answer, for the AWS credential endpoints. */
#include "http_fetch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>

#include "dial.h"
#include "tls_client.h"

#define FETCH_HEAD_MAX 16384

struct http_fetch {
    struct evhttp_connection *conn;
    struct event *reap; /* frees f on a later pass, after its callback */
    http_fetch_cb cb;
    void *arg;
    const char *why; /* evhttp's error, when it gave one */
    bool tls;
    char tls_why[200]; /* why the TLS connection failed, in words */
};

static void
fetch_free(struct http_fetch *f)
{
    if (f->conn != NULL) {
        evhttp_connection_free(f->conn);
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

    if ((size_t)e < sizeof(why) / sizeof(why[0]) && why[e] != NULL) {
        f->why = why[e];
    }
}

static void
on_done(struct evhttp_request *req, void *arg)
{
    struct http_fetch *f = arg;
    struct http_fetch_answer a = {0, "", 0, f->why};
    struct evbuffer *in = NULL;
    int code = req != NULL ? evhttp_request_get_response_code(req) : 0;

    if (code > 0) {
        in = evhttp_request_get_input_buffer(req);
        evbuffer_add(in, "", 1);
        a.status = code;
        a.len = evbuffer_get_length(in) - 1;
        a.body = (const char *)evbuffer_pullup(in, -1);
        a.why = NULL;
    } else if (f->tls && f->conn != NULL) {
        tls_client_why(evhttp_connection_get_bufferevent(f->conn), f->tls_why,
                       sizeof(f->tls_why));
        if (f->tls_why[0] != '\0') {
            a.why = f->tls_why;
        }
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

/* The URL's parts: host (brackets taken off), port, the path and query
 * to send and the Host header's value. */
struct target {
    char host[256];
    int port;
    bool tls;
    char hosthdr[300];
    char path[2048];
};

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

/* A connection to t's first address, plain or TLS. */
static struct evhttp_connection *
connect_to(struct event_base *base, const struct target *t, SSL_CTX *tls,
           char *err, size_t errlen)
{
    struct dial_list l;
    struct bufferevent *bev = NULL;
    SSL *ssl;

    if (!dial_resolve(t->host, t->port, &l, err, errlen)) {
        return NULL;
    }
    if (l.n == 0) {
        snprintf(err, errlen, "%s has no address", t->host);
        return NULL;
    }
    if (!t->tls) {
        return evhttp_connection_base_new(base, NULL, l.a[0].ip,
                                          (unsigned short)t->port);
    }
    if (tls == NULL || (ssl = tls_client_ssl(tls, t->host, NULL)) == NULL) {
        snprintf(err, errlen, "https: no TLS context");
        return NULL;
    }
    bev = bufferevent_openssl_socket_new(
        base, -1, ssl, BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
    if (bev == NULL) {
        SSL_free(ssl);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return evhttp_connection_base_bufferevent_new(base, NULL, bev, l.a[0].ip,
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

static bool
send_req(struct http_fetch *f, const struct http_fetch_req *rq,
         const struct target *t)
{
    struct evhttp_request *req = evhttp_request_new(on_done, f);
    struct evkeyvalq *hd;

    if (req == NULL) {
        return false;
    }
    evhttp_request_set_error_cb(req, on_error);
    hd = evhttp_request_get_output_headers(req);
    evhttp_add_header(hd, "Host", t->hosthdr);
    evhttp_add_header(hd, "User-Agent", "tidemark");
    for (size_t i = 0; rq->headers != NULL && rq->headers[i] != NULL; i += 2) {
        evhttp_add_header(hd, rq->headers[i], rq->headers[i + 1]);
    }
    if (rq->body != NULL) {
        evbuffer_add(evhttp_request_get_output_buffer(req), rq->body, rq->blen);
    }
    return evhttp_make_request(f->conn, req, method_of(rq->method), t->path) ==
           0;
}

struct http_fetch *
http_fetch_start(struct event_base *base, const struct http_fetch_req *rq,
                 http_fetch_cb cb, void *arg, char *err, size_t errlen)
{
    struct target t;
    const char *msg = parse_url(rq->url, &t);
    struct http_fetch *f;
    struct timeval tv = {rq->timeout_ms / 1000, (rq->timeout_ms % 1000) * 1000};

    err[0] = '\0';
    if (msg != NULL) {
        snprintf(err, errlen, "%s", msg);
        return NULL;
    }
    f = calloc(1, sizeof(*f));
    if (f == NULL || (f->reap = event_new(base, -1, 0, on_reap, f)) == NULL ||
        (f->conn = connect_to(base, &t, rq->tls, err, errlen)) == NULL) {
        if (f != NULL && f->reap != NULL && f->conn == NULL && err[0] == '\0') {
            snprintf(err, errlen, "out of memory");
        }
        if (f != NULL) {
            fetch_free(f);
        }
        return NULL;
    }
    f->cb = cb;
    f->arg = arg;
    f->tls = rq->url != NULL && strncmp(rq->url, "https:", 6) == 0;
    evhttp_connection_set_retries(f->conn, 0);
    evhttp_connection_set_timeout_tv(f->conn, &tv);
    evhttp_connection_set_max_body_size(f->conn, (ev_ssize_t)rq->max_answer);
    evhttp_connection_set_max_headers_size(f->conn, FETCH_HEAD_MAX);
    if (!send_req(f, rq, &t)) {
        snprintf(err, errlen, "cannot send the request");
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
