/* sign.c: the signature an upstream with sign = aws-sigv4 gets on every
 * forwarded request: which headers are signed, the date, the payload
 * hash, and the headers written (policies/sigv4.c computes). */
#include "sign.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <event2/buffer.h>

#include "../../conf/cfg.h"
#include "../../policies/hname.h"
#include "../../policies/sigv4.h"
#include "../log.h"
#include "../problem.h"
#include "creds.h"
#include "request.h"
#include "up.h"

static const char *const replaced[] = {"Authorization", "X-Amz-Date",
                                       "X-Amz-Content-Sha256",
                                       "X-Amz-Security-Token"};

bool
sign_replaces(const struct cfg_upstream *u, struct tm_slice name)
{
    if (u->sign == CFG_SIGN_NONE) {
        return false;
    }
    for (size_t i = 0; i < sizeof(replaced) / sizeof(replaced[0]); i++) {
        if (hname_same(name.p, name.len, replaced[i])) {
            return true;
        }
    }
    return false;
}

/* A header the signature covers besides Host and the signer's own. */
static bool
signed_name(struct tm_slice n)
{
    return (n.len > 6 && strncasecmp(n.p, "x-amz-", 6) == 0) ||
           slice_ieq(n, "Content-Type") || slice_ieq(n, "Content-MD5");
}

struct hlist {
    struct sigv4_header h[SIGV4_MAX_HEADERS];
    size_t n;
    bool full;
};

static void
add(struct hlist *l, const char *name, size_t nlen, const char *v, size_t vlen)
{
    if (l->n == SIGV4_MAX_HEADERS) {
        l->full = true;
        return;
    }
    l->h[l->n++] = (struct sigv4_header){name, nlen, v, vlen};
}

static bool
is_hex64(struct tm_slice v)
{
    if (v.len != 64) {
        return false;
    }
    for (size_t i = 0; i < 64; i++) {
        if (strchr("0123456789abcdefABCDEF", v.p[i]) == NULL) {
            return false;
        }
    }
    return true;
}

/* The payload hash: the body's own when it was read whole before
 * forwarding; else the client's, when it gave a real one or a
 * STREAMING-* marker (an aws-chunked body must keep saying so); else
 * UNSIGNED-PAYLOAD, as the body streams through unread. */
static struct tm_slice
payload_hash(const struct request *rq)
{
    const struct http_request *h = &rq->h;
    int i =
        http_find_header(h->headers, h->nheaders, 0, "X-Amz-Content-Sha256");

    if (rq->body_sha256[0] != '\0') {
        return (struct tm_slice){rq->body_sha256, 64};
    }
    if (i >= 0 && (is_hex64(h->headers[i].value) ||
                   (h->headers[i].value.len > 10 &&
                    strncmp(h->headers[i].value.p, "STREAMING-", 10) == 0))) {
        return h->headers[i].value;
    }
    return (struct tm_slice){"UNSIGNED-PAYLOAD", 16};
}

static void
put_field(struct evbuffer *out, const char *name, const char *v, size_t vlen)
{
    evbuffer_add(out, name, strlen(name));
    evbuffer_add(out, v, vlen);
    evbuffer_add(out, "\r\n", 2);
}

/* The headers to sign: Host, the forwarded ones signed_name picks, the
 * added ones it picks, then the signer's own. */
static void
collect(struct hlist *l, const struct request *rq, const struct cfg_upstream *u,
        struct tm_slice host, sign_forwards_fn forwards)
{
    const struct http_request *h = &rq->h;

    add(l, "Host", 4, host.p, host.len);
    for (size_t i = 0; i < h->nheaders; i++) {
        const struct http_header *f = &h->headers[i];

        if (signed_name(f->name) && forwards(rq, u, f)) {
            add(l, f->name.p, f->name.len, f->value.p, f->value.len);
        }
    }
    for (size_t i = 0; i < u->nadd; i++) {
        struct tm_slice n = {u->add[i].name, strlen(u->add[i].name)};

        if (signed_name(n) && !sign_replaces(u, n)) {
            add(l, n.p, n.len, u->add[i].value, strlen(u->add[i].value));
        }
    }
}

bool
sign_ready(const struct up_pool *pool, const char **why)
{
    struct creds *c = up_creds(pool);

    return c == NULL || creds_now(c, why) != NULL;
}

void
sign_problem(struct problem *p, const char *why)
{
    *p = (struct problem){.status = 503,
                          .detail = why,
                          .retry_after = 1,
                          .type = "urn:tidemark:credentials-unavailable",
                          .title = "Signing credentials unavailable"};
}

void
sign_request(struct evbuffer *out, const struct request *rq,
             const struct cfg_upstream *u, struct tm_slice target,
             struct tm_slice host, sign_forwards_fn forwards)
{
    const char *why;
    const struct sigv4_creds *cr = creds_now(up_creds(rq->pool), &why);
    struct sigv4_key key = {cr != NULL ? cr->key_id : "",
                            cr != NULL ? cr->secret : "", u->sign_region,
                            u->sign_service};
    struct tm_slice hash = payload_hash(rq);
    const char *q = memchr(target.p, '?', target.len);
    size_t plen = q != NULL ? (size_t)(q - target.p) : target.len;
    char date[SIGV4_DATE_LEN + 1], auth[8192];
    /* The client's STREAMING-* marker whole (cut, it would be signed
     * and forwarded as another). */
    char *hashz = strndup(hash.p, hash.len);
    struct sigv4_request sr;
    struct timespec now;
    struct hlist *l = malloc(sizeof(*l)); /* 4 KiB: off the stack */

    clock_gettime(CLOCK_REALTIME, &now);
    sigv4_date((long long)now.tv_sec, date);
    put_field(out, "x-amz-date: ", date, SIGV4_DATE_LEN);
    if (hashz != NULL) {
        put_field(out, "x-amz-content-sha256: ", hashz, strlen(hashz));
    }
    if (cr != NULL && cr->session != NULL) {
        put_field(out, "x-amz-security-token: ", cr->session,
                  strlen(cr->session));
    }
    if (l == NULL || hashz == NULL) {
        log_warn("upstream %s: cannot sign a request: out of memory", u->name);
        free(l);
        free(hashz);
        return;
    }
    l->n = 0;
    l->full = false;
    collect(l, rq, u, host, forwards);
    add(l, "x-amz-date", 10, date, SIGV4_DATE_LEN);
    add(l, "x-amz-content-sha256", 20, hashz, strlen(hashz));
    if (cr != NULL && cr->session != NULL) {
        add(l, "x-amz-security-token", 20, cr->session, strlen(cr->session));
    }
    sr = (struct sigv4_request){rq->h.method.p,
                                rq->h.method.len,
                                target.p,
                                plen,
                                q != NULL ? q + 1 : "",
                                q != NULL ? target.len - plen - 1 : 0,
                                l->h,
                                l->n,
                                hashz,
                                strcmp(u->sign_service, "s3") == 0};
    if (cr == NULL) {
        /* sign_ready said yes in this same pass: cannot happen. */
        log_error("upstream %s: %s: forwarded without Authorization", u->name,
                  why);
    } else if (l->full ||
               sigv4_authorization(&sr, date, &key, auth, sizeof(auth)) == 0) {
        log_warn("upstream %s: cannot sign a request (too many headers or "
                 "query parameters): forwarded without Authorization",
                 u->name);
    } else {
        put_field(out, "Authorization: ", auth, strlen(auth));
    }
    free(l);
    free(hashz);
}
