/* head.c: take a request head off a client's input: parse it in place,
 * copy a complete one into the connection's request space. */
#include "head.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "../problem.h"
#include "request.h"
#include "view.h"

_Static_assert(offsetof(struct request, bytes) % _Alignof(struct http_header) ==
                   0,
               "the headers after a request's text are aligned");

/* Make *rq hold text bytes (the head and the path after it) and, after
 * them, nheaders headers; 1 KiB at least. Returns where the headers go,
 * NULL when out of memory. A connection holds what its head has, not
 * room for HTTP_MAX_HEADERS. */
static struct http_header *
request_space(struct request **rq, size_t text, size_t nheaders)
{
    const size_t align = _Alignof(struct http_header);
    size_t at = (text + align - 1) / align * align;
    size_t len = at + nheaders * sizeof(struct http_header);
    struct request *n;

    if (len < 1024) {
        len = 1024;
    }
    if (*rq == NULL || (*rq)->cap < len) {
        n = realloc(*rq, sizeof(**rq) + len);
        if (n == NULL) {
            return NULL;
        }
        *rq = n;
        n->cap = len;
    }
    return (struct http_header *)(void *)((*rq)->bytes + at);
}

/* Rebase the parsed head's slices from the input buffer into copy. */
static void
rebase(struct http_request *h, const char *from, char *to)
{
#define REBASE(s)                                                              \
    do {                                                                       \
        if ((s).p != NULL) {                                                   \
            (s).p = to + ((s).p - from);                                       \
        }                                                                      \
    } while (0)
    REBASE(h->method);
    REBASE(h->target);
    REBASE(h->path);
    for (size_t i = 0; i < h->nheaders; i++) {
        REBASE(h->headers[i].name);
        REBASE(h->headers[i].value);
    }
#undef REBASE
}

/* The answer to a head the parser refused with rc. */
static void
refusal(enum http_rc rc, struct problem *p)
{
    memset(p, 0, sizeof(*p));
    p->status = 400;
    switch (rc) {
    case HTTP_HEAD_TOO_LARGE:
        p->status = 431;
        p->detail = "the request head is too large";
        break;
    case HTTP_URI_TOO_LONG:
        p->status = 414;
        p->detail = "the request target is too long";
        break;
    case HTTP_NOT_IMPL:
        p->status = 501;
        p->detail = "unsupported transfer coding";
        break;
    case HTTP_BAD_VERSION:
        p->status = 505;
        p->detail = "only HTTP/1.0 and HTTP/1.1 are served";
        break;
    default:
        p->detail = "malformed or ambiguous request";
        break;
    }
}

enum head_rc
head_take(struct path_view *px, struct evbuffer *in, struct http_scan *sc,
          bool final, struct request **rq, struct problem *p, const char **why)
{
    size_t len = evbuffer_get_length(in);
    size_t n = len < px->limits.max_head + 1 ? len : px->limits.max_head + 1;
    const char *fence[2] = {px->cfg->proxy.token_header,
                            px->cfg->proxy.resource_header};
    struct http_request *h = px->scratch;
    struct http_header *hs;
    enum http_rc rc;
    char *at;

    /* Parse into the loop's scratch space: a connection holds request
     * space only once its head is complete. */
    at = (char *)evbuffer_pullup(in, (ev_ssize_t)n);
    rc = http_parse_request_more(sc, at, n, final, &px->limits, fence, h);
    if (rc == HTTP_INCOMPLETE) {
        return HEAD_WAIT;
    }
    memset(sc, 0, sizeof(*sc)); /* the next head's */
    if (rc != HTTP_OK) {
        refusal(rc, p);
        *why = h->error;
        return HEAD_BAD;
    }
    /* Room for the head and, after it, the canonical path (and the
     * bucket an S3 server may read from the Host: screen.h), then the
     * headers it has. */
    hs = request_space(rq, h->head_len + h->path.len + SCREEN_PATH_EXTRA,
                       h->nheaders);
    if (hs == NULL) {
        return HEAD_NOMEM;
    }
    memcpy(hs, h->headers, h->nheaders * sizeof(*hs));
    (*rq)->h = *h;
    (*rq)->h.headers = hs;
    memcpy((*rq)->bytes, at, h->head_len);
    rebase(&(*rq)->h, at, (*rq)->bytes);
    evbuffer_drain(in, h->head_len);
    return HEAD_TAKEN;
}
