/* rewrite.c: the heads as the other side gets them: a request head for
 * the upstream, a response head for the client. */
#include "rewrite.h"

#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>

#include "../../conf/cfg.h"
#include "../../policies/ascii.h"
#include "../../policies/hname.h"
#include "../problem.h"
#include "request.h"
#include "sign.h"

/* Whether the slice name may be the literal lit's header (hname.h). */
#define HNAME_IS(name, lit)                                                    \
    hname_same_n((name).p, (name).len, lit, sizeof(lit) - 1)

/* A head being written: its pieces gather in buf and reach out in a few
 * evbuffer_adds, not one a piece (each add runs out's callbacks, the
 * bufferevent's write scheduling among them: some 40 a request). */
struct head_out {
    struct evbuffer *out;
    size_t n;
    char buf[2048];
};

/* What buf holds, into out. */
static struct evbuffer *
ho_flush(struct head_out *o)
{
    if (o->n > 0) {
        evbuffer_add(o->out, o->buf, o->n);
        o->n = 0;
    }
    return o->out;
}

static void
ho_add(struct head_out *o, const void *p, size_t len)
{
    if (len > sizeof(o->buf) - o->n) {
        ho_flush(o);
        if (len > sizeof(o->buf)) {
            evbuffer_add(o->out, p, len);
            return;
        }
    }
    memcpy(o->buf + o->n, p, len);
    o->n += len;
}

static void
ho_str(struct head_out *o, const char *s)
{
    ho_add(o, s, strlen(s));
}

/* A client header the upstream must not get from the client: named by
 * strip_header, or one the sidecar sets itself with add_header, in any
 * spelling the upstream may read as that name (X_Forwarded_User behind
 * a CGI gateway is X-Forwarded-User: hname.h). */
static bool
upstream_drops(const struct cfg_upstream *u, struct tm_slice name)
{
    for (size_t i = 0; i < u->nstrip; i++) {
        if (hname_same(name.p, name.len, u->strip[i])) {
            return true;
        }
    }
    for (size_t i = 0; i < u->nadd; i++) {
        if (hname_same(name.p, name.len, u->add[i].name)) {
            return true;
        }
    }
    return false;
}

/* The Destination of a fenced COPY or MOVE as the upstream gets it: its
 * path and query as the client wrote them, under the upstream's scheme
 * and the Host the upstream gets, so that a server which checks that a
 * Destination is its own (Apache mod_dav, nginx) sees its own name. */
static void
write_destination(const struct request *rq, const struct cfg_upstream *u,
                  struct head_out *out, struct tm_slice host)
{
    struct tm_slice raw = rq->sc.dest_raw;

    ho_str(out, u->tls ? "Destination: https://" : "Destination: http://");
    ho_add(out, host.p, host.len);
    if (raw.len == 0 || raw.p[0] != '/') {
        ho_add(out, "/", 1);
    }
    ho_add(out, raw.p, raw.len);
    ho_add(out, "\r\n", 2);
}

/* "name: value\r\n". Most fields of a head: when the field fits in
 * what is left of buf, it is written there in one go. */
static void
add_field(struct head_out *out, struct tm_slice name, struct tm_slice value)
{
    size_t len = name.len + value.len + 4;
    char *p = out->buf + out->n;

    if (len > sizeof(out->buf) - out->n) {
        ho_add(out, name.p, name.len);
        ho_add(out, ": ", 2);
        ho_add(out, value.p, value.len);
        ho_add(out, "\r\n", 2);
        return;
    }
    memcpy(p, name.p, name.len);
    p += name.len;
    *p++ = ':';
    *p++ = ' ';
    memcpy(p, value.p, value.len);
    p += value.len;
    *p++ = '\r';
    *p = '\n';
    out->n += len;
}

/* A client header that tidemark writes again with the client's address
 * added (forwarded = x-forwarded-for | forwarded), in any spelling the
 * upstream may read as that name. */
static bool
forwarded_name(const struct cfg_upstream *u, struct tm_slice name)
{
    if (u->forwarded == CFG_FWD_NONE) {
        return false;
    }
    return u->forwarded == CFG_FWD_XFF ? HNAME_IS(name, "X-Forwarded-For")
                                       : HNAME_IS(name, "Forwarded");
}

/* The client's header of that name with its address added: the values
 * the client sent under it (those that are not stripped), in order, then
 * the address, as "for=" (RFC 7239: an IPv6 one bracketed and quoted)
 * with forwarded, or "unknown" when there is none. A Unix socket's
 * client is "unix:" in X-Forwarded-For (as nginx writes it) and
 * "unknown" in Forwarded (RFC 7239 names no other non-IP node). */
static void
write_forwarded(struct head_out *out, const struct request *rq,
                const struct cfg_upstream *u, const char *client, int af)
{
    const struct http_request *h = &rq->h;
    bool rfc = u->forwarded == CFG_FWD_RFC7239;

    ho_str(out, rfc ? "Forwarded: " : "X-Forwarded-For: ");
    for (size_t i = 0; i < h->nheaders; i++) {
        const struct http_header *f = &h->headers[i];

        if (forwarded_name(u, f->name) && f->value.len > 0 &&
            !upstream_drops(u, f->name)) {
            ho_add(out, f->value.p, f->value.len);
            ho_add(out, ", ", 2);
        }
    }
    ho_str(out, rfc ? "for=" : "");
    ho_str(out, rfc && af == AF_INET6 ? "\"[" : "");
    ho_str(out, af != 0 && !(rfc && af == AF_UNIX) ? client : "unknown");
    ho_str(out, rfc && af == AF_INET6 ? "]\"\r\n" : "\r\n");
}

bool
rewrite_forwards(const struct request *rq, const struct cfg_upstream *u,
                 const struct http_header *f)
{
    const struct cfg_proxy *pc = rq->pc;

    return !(f->hop || slice_ieq(f->name, "Host") ||
             (rq->h.expect_continue && slice_ieq(f->name, "Expect")) ||
             slice_ieq(f->name, pc->token_header) ||
             slice_ieq(f->name, pc->resource_header) ||
             ((u->nstrip > 0 || u->nadd > 0) && upstream_drops(u, f->name)) ||
             sign_replaces(u, f->name) || forwarded_name(u, f->name) ||
             (!rq->rid_client && HNAME_IS(f->name, "X-Request-Id")));
}

void
rewrite_request(struct evbuffer *evout, const struct request *rq,
                const struct cfg_upstream *u, const char *client, int af)
{
    const struct http_request *h = &rq->h;
    const char *target = h->target.p;
    size_t tlen = h->target.len;
    struct tm_slice host = screen_upstream_host(u, h);
    struct head_out o;
    struct head_out *out = &o;

    o.out = evout;
    o.n = 0; /* buf is written before it is read: not cleared */
    if (tlen > 0 && target[0] != '/' && h->path.p != NULL) {
        /* absolute-form: send the path and query only */
        tlen -= (size_t)(h->path.p - target);
        target = h->path.p;
    }
    ho_add(out, h->method.p, h->method.len);
    ho_add(out, " ", 1);
    ho_add(out, target, tlen);
    ho_add(out, h->minor == 0 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n", 11);
    ho_add(out, "Host: ", 6);
    ho_add(out, host.p, host.len);
    ho_add(out, "\r\n", 2);
    for (size_t i = 0; i < h->nheaders; i++) {
        const struct http_header *f = &h->headers[i];
        if (rq->sc.dest_raw.p != NULL && slice_ieq(f->name, "Destination")) {
            write_destination(rq, u, out, host);
            continue;
        }
        if (rewrite_forwards(rq, u, f)) {
            add_field(out, f->name, f->value);
        }
    }
    for (size_t i = 0; i < u->nadd; i++) {
        struct tm_slice n = {u->add[i].name, strlen(u->add[i].name)};
        struct tm_slice v = {u->add[i].value, strlen(u->add[i].value)};
        if (!sign_replaces(u, n)) {
            add_field(out, n, v);
        }
    }
    if (u->forwarded != CFG_FWD_NONE) {
        write_forwarded(out, rq, u, client, af);
    }
    if (!rq->rid_client) {
        /* The client's, when sane, went through above as it was. */
        ho_add(out, "X-Request-Id: ", 14);
        ho_str(out, rq->rid);
        ho_add(out, "\r\n", 2);
    }
    if (u->sign != CFG_SIGN_NONE) {
        sign_request(ho_flush(out), rq, u, (struct tm_slice){target, tlen},
                     host, rewrite_forwards);
    }
    if (h->body == HTTP_BODY_CHUNKED) {
        ho_add(out, "Transfer-Encoding: chunked\r\n", 28);
    }
    if (h->minor == 0) {
        ho_add(out, "Connection: keep-alive\r\n", 24);
    }
    ho_add(out, "Via: 1.1 tidemark\r\n\r\n", 21);
    ho_flush(out);
}

/* Append "<prefix><v>\r\n" without printf: this runs per answer. */
static void
add_header_i64(struct head_out *out, const char *prefix, int64_t v)
{
    char buf[ASCII_DEC_MAX + 2];
    char *p = ascii_dec(buf + ASCII_DEC_MAX, v < 0 ? 0 : v);

    buf[ASCII_DEC_MAX] = '\r';
    buf[ASCII_DEC_MAX + 1] = '\n';
    ho_str(out, prefix);
    ho_add(out, p, (size_t)(buf + sizeof(buf) - p));
}

/* A header of the upstream's answer that only tidemark may set:
 * Tidemark-Error (which says tidemark answered) and Fencing-High-Water
 * (which says the fence accepted this write), in any spelling a client
 * may read as theirs. An upstream cannot fake either. */
static bool
ours_only(struct tm_slice name)
{
    return HNAME_IS(name, PROBLEM_HEADER) ||
           HNAME_IS(name, "Fencing-High-Water");
}

void
rewrite_response(struct evbuffer *evout, const struct http_response *r,
                 int64_t mark, bool close, int minor)
{
    bool final = r->status >= 200;
    char line[32] = "HTTP/1.1 ";
    struct head_out o;
    struct head_out *out = &o;

    o.out = evout;
    o.n = 0;
    /* Statuses are three digits (the parser checks). */
    line[9] = (char)('0' + r->status / 100);
    line[10] = (char)('0' + r->status / 10 % 10);
    line[11] = (char)('0' + r->status % 10);
    line[12] = ' ';
    ho_add(out, line, 13);
    ho_add(out, r->reason.p, r->reason.len);
    ho_add(out, "\r\n", 2);
    for (size_t i = 0; i < r->nheaders; i++) {
        const struct http_header *f = &r->headers[i];
        if (f->hop || ours_only(f->name)) {
            continue;
        }
        add_field(out, f->name, f->value);
    }
    if (final) {
        if (r->body == HTTP_BODY_CHUNKED) {
            ho_add(out, "Transfer-Encoding: chunked\r\n", 28);
        }
        if (mark > 0) {
            add_header_i64(out, "Fencing-High-Water: ", mark);
        }
        if (close) {
            ho_add(out, "Connection: close\r\n", 19);
        } else if (minor == 0) {
            ho_add(out, "Connection: keep-alive\r\n", 24);
        }
    }
    ho_add(out, "Via: 1.1 tidemark\r\n\r\n", 21);
    ho_flush(out);
}
