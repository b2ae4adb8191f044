/* http_fields.c: the framing fields of a request or response head
 * (RFC 9112 6, RFC 9110 7.6.1): Transfer-Encoding, Content-Length,
 * Connection, Host, Expect, and the hop-by-hop flags. */
#include <stdint.h>
#include <string.h>

#include "hname.h"
#include "http_int.h"

/* Header names the parser acts on. */
enum hdr_kind {
    HK_OTHER = 0,
    HK_HOP, /* hop-by-hop, no other meaning here */
    HK_CONNECTION,
    HK_CONTENT_LENGTH,
    HK_EXPECT,
    HK_HOST,
    HK_TRANSFER_ENCODING,
};

/* Whether n, a field name as the parser took it (token characters
 * only), is lit (lower-case letters, digits and '-') in any case, eight
 * bytes at a time. Setting bit 0x20 lowers a capital and leaves digits
 * and '-' as they are; of the other token characters it makes none of
 * these, so the compare is exact. */
static bool
name_is(struct tm_slice n, const char *lit, size_t len)
{
    const uint64_t low = 0x2020202020202020ULL;
    size_t i = 0;

    if (n.len != len) {
        return false;
    }
    for (; len - i >= 8; i += 8) {
        uint64_t a, b;

        memcpy(&a, n.p + i, 8);
        memcpy(&b, lit + i, 8);
        if ((a | low) != b) {
            return false;
        }
    }
    for (; i < len; i++) {
        if ((n.p[i] | 0x20) != lit[i]) {
            return false;
        }
    }
    return true;
}

#define NAME_IS(n, lit) name_is((n), (lit), sizeof(lit) - 1)

static enum hdr_kind
hdr_kind(struct tm_slice n)
{
    switch (n.len) {
    case 2:
        return NAME_IS(n, "te") ? HK_HOP : HK_OTHER;
    case 4:
        return NAME_IS(n, "host") ? HK_HOST : HK_OTHER;
    case 6:
        return NAME_IS(n, "expect") ? HK_EXPECT : HK_OTHER;
    case 7:
        return NAME_IS(n, "trailer") || NAME_IS(n, "upgrade") ? HK_HOP
                                                              : HK_OTHER;
    case 10:
        if (NAME_IS(n, "connection")) {
            return HK_CONNECTION;
        }
        return NAME_IS(n, "keep-alive") ? HK_HOP : HK_OTHER;
    case 14:
        return NAME_IS(n, "content-length") ? HK_CONTENT_LENGTH : HK_OTHER;
    case 16:
        return NAME_IS(n, "proxy-connection") ? HK_HOP : HK_OTHER;
    case 17:
        return NAME_IS(n, "transfer-encoding") ? HK_TRANSFER_ENCODING
                                               : HK_OTHER;
    case 18:
        return NAME_IS(n, "proxy-authenticate") ? HK_HOP : HK_OTHER;
    case 19:
        return NAME_IS(n, "proxy-authorization") ? HK_HOP : HK_OTHER;
    default:
        return HK_OTHER;
    }
}

/* The next element of a comma-separated list (RFC 9110 5.6.1) in
 * [*pp, end): empty elements are skipped. Returns false at the end of
 * the list; the element is [*s, *e), OWS trimmed. */
static bool
list_next(const char **pp, const char *end, const char **s, const char **e)
{
    const char *p = *pp;
    bool quoted = false;

    while (p < end && (*p == ',' || is_ows(*p))) {
        p++;
    }
    if (p == end) {
        return false;
    }
    *s = p;
    for (; p < end && (quoted || *p != ','); p++) {
        if (*p == '"') {
            quoted = !quoted;
        } else if (quoted && *p == '\\' && p + 1 < end) {
            p++;
        }
    }
    *pp = p;
    while (is_ows(p[-1])) {
        p--;
    }
    *e = p;
    return true;
}

static enum http_rc
parse_connection(struct tm_slice v, struct framing *f, const char **err)
{
    const char *p = v.p;
    const char *end = v.p + v.len;
    const char *s;
    const char *e;

    while (list_next(&p, end, &s, &e)) {
        struct tm_slice o = mkslice(s, e);

        if (scan_token(s, e) != e) {
            return fail(err, HTTP_BAD, "invalid Connection option");
        }
        if (SLICE_IS(o, "close")) {
            f->close = true;
        } else if (SLICE_IS(o, "keep-alive")) {
            f->keep_alive = true;
        } else if (SLICE_IS(o, "content-length") || SLICE_IS(o, "host")) {
            return fail(err, HTTP_BAD, "Connection names a framing field");
        }
        if (f->nopts == MAX_CONN_OPTS) {
            return fail(err, HTTP_BAD, "too many Connection options");
        }
        f->opts[f->nopts++] = o;
    }
    return HTTP_OK;
}

/* transfer-coding = token *( OWS ";" OWS transfer-parameter ). Only
 * chunked is understood, and it takes no parameters. */
static enum http_rc
parse_te(struct tm_slice v, struct framing *f, const char **err)
{
    const char *p = v.p;
    const char *end = v.p + v.len;
    const char *s;
    const char *e;

    f->te = true;
    while (list_next(&p, end, &s, &e)) {
        const char *t = scan_token(s, e);
        const char *u = t;

        while (u < e && is_ows(*u)) {
            u++;
        }
        if (t == s || (u != e && *u != ';')) {
            return fail(err, HTTP_BAD, "invalid transfer coding");
        }
        if (slice_is(mkslice(s, t), "chunked", 7)) {
            if (t != e) {
                return fail(err, HTTP_BAD, "parameters on chunked");
            }
            if (f->chunked) {
                return fail(err, HTTP_BAD, "chunked applied twice");
            }
            f->chunked = true;
            f->chunked_last = true;
        } else {
            f->te_other = true;
            f->chunked_last = false;
        }
    }
    return HTTP_OK;
}

/* Content-Length = 1*DIGIT, one field, one value, at most 2^63 - 1. */
static enum http_rc
parse_cl(struct tm_slice v, struct framing *f, const char **err)
{
    uint64_t x = 0;

    if (f->cl) {
        return fail(err, HTTP_BAD, "repeated Content-Length");
    }
    if (v.len == 0 || v.len > 19) {
        return fail(err, HTTP_BAD, "invalid Content-Length");
    }
    for (size_t i = 0; i < v.len; i++) {
        if (!is_digit(v.p[i])) {
            return fail(err, HTTP_BAD, "invalid Content-Length");
        }
        x = x * 10 + (uint64_t)(v.p[i] - '0'); /* 19 digits fit */
    }
    if (x > (uint64_t)INT64_MAX) {
        return fail(err, HTTP_BAD, "Content-Length overflows");
    }
    f->cl = true;
    f->cl_value = x;
    return HTTP_OK;
}

/* A field that is not a framing or fencing header but that some server
 * would read as one (Transfer_Encoding, Fencing.Token: hname.h): it
 * would frame or fence the message there and not here. NULL when it is
 * none; fence holds the fencing header names (NULL entries unused) and
 * fence_len their lengths. */
static const char *
variant_of(struct tm_slice name, const char *const *fence,
           const size_t *fence_len)
{
    if (hname_variant_n(name.p, name.len, "content-length", 14) ||
        hname_variant_n(name.p, name.len, "transfer-encoding", 17)) {
        return "a framing header in another spelling";
    }
    for (size_t i = 0; fence != NULL && i < 2; i++) {
        if (fence[i] != NULL &&
            hname_variant_n(name.p, name.len, fence[i], fence_len[i])) {
            return "a fencing header in another spelling";
        }
    }
    return NULL;
}

/* One pass over the fields: framing, Host, Expect, and the hop flags,
 * the Connection-named ones last since Connection may come after them. */
enum http_rc
http_read_fields(struct http_header *h, size_t n, bool request,
                 const char *const *fence, struct framing *f, const char **err)
{
    enum http_rc rc = HTTP_OK;
    size_t fence_len[2] = {0, 0};
    const char *why;

    for (size_t i = 0; fence != NULL && i < 2; i++) {
        fence_len[i] = fence[i] != NULL ? strlen(fence[i]) : 0;
    }
    memset(f, 0, offsetof(struct framing, opts));
    f->nopts = 0;
    for (size_t i = 0; i < n && rc == HTTP_OK; i++) {
        switch (hdr_kind(h[i].name)) {
        case HK_OTHER:
            if ((why = variant_of(h[i].name, fence, fence_len)) != NULL) {
                rc = fail(err, HTTP_BAD, why);
            }
            break;
        case HK_HOP:
            h[i].hop = true;
            break;
        case HK_CONNECTION:
            h[i].hop = true;
            rc = parse_connection(h[i].value, f, err);
            break;
        case HK_CONTENT_LENGTH:
            rc = parse_cl(h[i].value, f, err);
            break;
        case HK_EXPECT:
            if (SLICE_IS(h[i].value, "100-continue")) {
                f->expect_continue = true;
            }
            break;
        case HK_HOST:
            if (!request) {
                break;
            }
            if (++f->hosts > 1) {
                rc = fail(err, HTTP_BAD, "repeated Host");
            } else if (!http_host_valid(h[i].value.p, h[i].value.len)) {
                rc = fail(err, HTTP_BAD, "invalid Host");
            }
            break;
        case HK_TRANSFER_ENCODING:
            h[i].hop = true;
            rc = parse_te(h[i].value, f, err);
            break;
        }
    }
    if (rc != HTTP_OK) {
        return rc;
    }
    for (size_t o = 0; o < f->nopts; o++) {
        for (size_t i = 0; i < n; i++) {
            if (h[i].name.len == f->opts[o].len &&
                mem_ieq(h[i].name.p, f->opts[o].p, h[i].name.len)) {
                h[i].hop = true;
            }
        }
    }
    if (f->te) {
        if (f->cl) {
            return fail(err, HTTP_BAD,
                        "Content-Length with "
                        "Transfer-Encoding");
        }
        if (!f->chunked_last) {
            return fail(err, HTTP_BAD, "chunked is not the final coding");
        }
    }
    return HTTP_OK;
}
