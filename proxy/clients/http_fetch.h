/* http_fetch.h: one HTTP/1.1 request to a URL (http:// or https://)
 * over evhttp, for the AWS credential endpoints: a deadline, an answer
 * bounded in size, TLS made by tls_client. */
#ifndef TM_HTTP_FETCH_H
#define TM_HTTP_FETCH_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>

struct event_base;
struct evdns_base;
struct http_fetch;

/* What came back. status 0: no answer, why says what happened (refused,
 * timed out, too long, ...); body is borrowed for the callback only and
 * NUL-terminated. */
struct http_fetch_answer {
    int status;
    const char *body;
    size_t len;
    const char *why;
};

/* Runs once, on the loop, never from inside http_fetch_start. */
typedef void (*http_fetch_cb)(void *arg, const struct http_fetch_answer *a);

struct http_fetch_req {
    const char *method; /* GET, PUT or POST */
    const char *url;
    const char *const *headers; /* name, value, name, value, ..., NULL */
    const char *body;           /* NULL: none */
    size_t blen;
    int timeout_ms;         /* the lookup, then connect, send and answer, each
                             * within what the lookup left of it */
    size_t max_answer;      /* a longer body: no answer ("too long") */
    SSL_CTX *tls;           /* https://: required */
    struct evdns_base *dns; /* looks a host name up on the loop; NULL: a
                             * blocking getaddrinfo in http_fetch_start */
    unsigned long *asked;   /* counts the lookups started through dns (the
                             * owner of dns frees them); may be NULL */
};

/* Start rq; cb(arg, answer) ends it. NULL with why in err when it cannot
 * start (a bad URL, https without tls, out of memory): then no callback
 * runs. A host name is looked up through rq->dns without blocking the
 * loop (one that does not resolve in time: an answer with status 0, why
 * "cannot resolve HOST: ..."); an IP address needs no lookup, and
 * localhost is read from /etc/hosts. The first address is taken. */
struct http_fetch *
http_fetch_start(struct event_base *base, const struct http_fetch_req *rq,
                 http_fetch_cb cb, void *arg, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Stop f, a lookup in flight included: its callback never runs. Not
 * from inside that callback (f ends by itself after it). */
void http_fetch_cancel(struct http_fetch *f);

#endif
