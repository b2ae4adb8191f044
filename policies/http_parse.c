/* http_parse.c: the strict HTTP/1.1 parser (RFC 9112): request and
 * response heads in one pass over the caller's buffer, and an incremental
 * chunked body decoder. No I/O, no allocation. */
#include "http_parse.h"

#include "ascii.h"

#include <string.h>

#include "hname.h"

/* Character classes, one bit each, looked up in char_class[]. */
enum {
    CC_TCHAR = 1,  /* token: methods, field names, codings */
    CC_TARGET = 2, /* request-target: visible ASCII but '#' */
    CC_TEXT = 4,   /* field value, reason: HT, SP, visible ASCII, obs-text */
    CC_HOST = 8,   /* reg-name: unreserved, sub-delims, '%' */
};

/* clang-format off */
static const uint8_t char_class[256] = {
    /* 0x00: control characters; only HT (0x09) is field text */
     0,  0,  0,  0,  0,  0,  0,  0,  0,  4,  0,  0,  0,  0,  0,  0,
     0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,
    /* 0x20: SP ! " # $ % & ' ( ) * + , - . / */
     4, 15,  6,  5, 15, 15, 15, 15, 14, 14, 15, 15, 14, 15, 15,  6,
    /* 0x30: 0 1 2 3 4 5 6 7 8 9 : ; < = > ? */
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15,  6, 14,  6, 14,  6,  6,
    /* 0x40: @ A B C D E F G H I J K L M N O */
     6, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
    /* 0x50: P Q R S T U V W X Y Z [ \ ] ^ _ */
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,  6,  6,  6,  7, 15,
    /* 0x60: ` a b c d e f g h i j k l m n o */
     7, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
    /* 0x70: p q r s t u v w x y z { | } ~ . */
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,  6,  7,  6, 15,  0,
    /* 0x80-0xff: obs-text, field text only */
     4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,
     4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,
     4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,
     4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,
     4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,
     4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,
     4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,
     4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,
};
/* clang-format on */

#define MAX_LEADING_CRLF 4  /* empty lines tolerated before a request */
#define MAX_CONN_OPTS 32    /* Connection options per message */
#define CHUNK_LINE_MAX 4096 /* chunk-size line with extensions, no CRLF */
#define TRAILER_MAX 8192    /* whole trailer section, final CRLF included */

static inline bool
is_tchar(char c)
{
    return (char_class[(unsigned char)c] & CC_TCHAR) != 0;
}

static inline bool
is_text(char c)
{
    return (char_class[(unsigned char)c] & CC_TEXT) != 0;
}

static inline bool
is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static inline bool
is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* a[0..n) equals b[0..n), ignoring ASCII case. Locale-free, unlike
 * strncasecmp. */
static bool
mem_ieq(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (ascii_lower(a[i]) != ascii_lower(b[i])) {
            return false;
        }
    }
    return true;
}

static inline bool
slice_is(struct tm_slice s, const char *lit, size_t n)
{
    return s.len == n && mem_ieq(s.p, lit, n);
}

#define SLICE_IS(s, lit) slice_is((s), (lit), sizeof(lit) - 1)

static inline struct tm_slice
mkslice(const char *p, const char *end)
{
    struct tm_slice s = {p, (size_t)(end - p)};
    return s;
}

static enum http_rc
fail(const char **err, enum http_rc rc, const char *why)
{
    *err = why;
    return rc;
}

/* Eight bytes at a time: the scans below test a word for "every byte is
 * ordinary" and drop to a byte loop only on the word that is not. Each
 * test is exact as to whether some byte matches. */
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

static inline uint64_t
load8(const char *p)
{
    uint64_t x;
    memcpy(&x, p, sizeof(x));
    return x;
}

/* Some byte of x is below n (n <= 128). */
static inline uint64_t
has_less(uint64_t x, unsigned n)
{
    return (x - ONES * n) & ~x & HIGHS;
}

/* Some byte of x is above 0x7e. */
static inline uint64_t
has_above_7e(uint64_t x)
{
    return ((x + ONES) | x) & HIGHS;
}

/* Some byte of x equals c. */
static inline uint64_t
has_byte(uint64_t x, unsigned char c)
{
    return has_less(x ^ (ONES * c), 1);
}

/* The end of the field text (CC_TEXT) starting at p, at most end. A word
 * with a control character, DEL or HT goes the slow way: HT is text, the
 * others end the scan. */
static const char *
scan_text(const char *p, const char *end)
{
    for (;;) {
        const char *stop;

        while (end - p >= 8) {
            uint64_t x = load8(p);
            if (has_less(x, 0x20) | has_byte(x, 0x7f)) {
                break;
            }
            p += 8;
        }
        stop = end - p >= 8 ? p + 8 : end;
        while (p < stop && is_text(*p)) {
            p++;
        }
        if (p < stop || p == end) {
            return p;
        }
    }
}

/* The end of the request-target (CC_TARGET) starting at p. */
static const char *
scan_target(const char *p, const char *end)
{
    for (;;) {
        const char *stop;

        while (end - p >= 8) {
            uint64_t x = load8(p);
            if (has_less(x, 0x21) | has_above_7e(x) | has_byte(x, '#')) {
                break;
            }
            p += 8;
        }
        stop = end - p >= 8 ? p + 8 : end;
        while (p < stop && (char_class[(unsigned char)*p] & CC_TARGET)) {
            p++;
        }
        if (p < stop || p == end) {
            return p;
        }
    }
}

static const char *
scan_token(const char *p, const char *end)
{
    while (p < end && is_tchar(*p)) {
        p++;
    }
    return p;
}

/* Why the byte c, which is not the expected one, is refused. */
static const char *
bad_byte(char c, const char *otherwise)
{
    if (c == '\n') {
        return "bare LF";
    }
    if (c == '\0') {
        return "NUL byte";
    }
    return otherwise;
}

/* Parse "HTTP/D.D" at *pp. Only the form: the caller judges the number
 * once the whole line is in, so that a malformed line stays a 400. */
static enum http_rc
parse_version(const char **pp, const char *end, int *major, int *minor,
              const char **err)
{
    static const char form[] = "HTTP/D.D";
    const char *p = *pp;

    for (size_t i = 0; i < sizeof(form) - 1; i++, p++) {
        if (p == end) {
            return HTTP_INCOMPLETE;
        }
        if (form[i] == 'D' ? !is_digit(*p) : *p != form[i]) {
            return fail(err, HTTP_BAD, "malformed version");
        }
    }
    *major = p[-3] - '0';
    *minor = p[-1] - '0';
    *pp = p;
    return HTTP_OK;
}

/* Expect CRLF at *pp. */
static enum http_rc
parse_crlf(const char **pp, const char *end, const char *what, const char **err)
{
    const char *p = *pp;

    if (p == end) {
        return HTTP_INCOMPLETE;
    }
    if (*p != '\r') {
        return fail(err, HTTP_BAD, bad_byte(*p, what));
    }
    if (end - p < 2) {
        return HTTP_INCOMPLETE;
    }
    if (p[1] != '\n') {
        return fail(err, HTTP_BAD, "bare CR");
    }
    *pp = p + 2;
    return HTTP_OK;
}

/* host [ ":" port ] as in Host and in an absolute-form target: a
 * reg-name (with valid %XX escapes) or an IP literal in brackets; no
 * userinfo, no path. Empty is valid (RFC 9112 3.2). */
static bool
host_valid(const char *p, size_t n)
{
    size_t i = 0;

    if (n == 0) {
        return true;
    }
    if (p[0] == '[') {
        for (i = 1; i < n && p[i] != ']'; i++) {
            if (!(char_class[(unsigned char)p[i]] & CC_HOST) && p[i] != ':') {
                return false;
            }
        }
        if (i == n || i == 1) {
            return false;
        }
        i++;
    } else {
        for (; i < n && (char_class[(unsigned char)p[i]] & CC_HOST); i++) {
            if (p[i] == '%' && (n - i < 3 || ascii_hexval(p[i + 1]) < 0 ||
                                ascii_hexval(p[i + 2]) < 0)) {
                return false;
            }
        }
        if (i == 0) {
            return false; /* ":80" */
        }
    }
    if (i == n) {
        return true;
    }
    if (p[i] != ':') {
        return false;
    }
    for (i++; i < n; i++) {
        if (!is_digit(p[i])) {
            return false;
        }
    }
    return true;
}

/* Classify the request-target once it is whole: origin-form, "*" for
 * OPTIONS, or absolute-form with an http(s) scheme and a path. Sets
 * path. Authority-form and everything else is refused. */
static enum http_rc
check_target(struct http_request *req, const char **err)
{
    const char *t = req->target.p;
    const char *end = t + req->target.len;
    const char *path;
    const char *q;

    if (t[0] == '/') {
        path = t;
    } else if (req->target.len == 1 && t[0] == '*') {
        if (!SLICE_IS(req->method, "options")) {
            return fail(err, HTTP_BAD, "'*' target without OPTIONS");
        }
        req->path = req->target;
        return HTTP_OK;
    } else {
        const char *auth;

        if (req->target.len >= 7 && mem_ieq(t, "http://", 7)) {
            auth = t + 7;
        } else if (req->target.len >= 8 && mem_ieq(t, "https://", 8)) {
            auth = t + 8;
        } else {
            return fail(err, HTTP_BAD, "unsupported request-target form");
        }
        path = auth;
        while (path < end && *path != '/' && *path != '?') {
            path++;
        }
        if (path == end || *path != '/') {
            return fail(err, HTTP_BAD, "absolute-form target without path");
        }
        if (path == auth || !host_valid(auth, (size_t)(path - auth))) {
            return fail(err, HTTP_BAD, "invalid authority in target");
        }
    }
    q = memchr(path, '?', (size_t)(end - path));
    req->path = mkslice(path, q != NULL ? q : end);
    return HTTP_OK;
}

/* request-line = method SP request-target SP HTTP-version CRLF, after at
 * most MAX_LEADING_CRLF empty lines. */
static enum http_rc
parse_request_line(const char **pp, const char *end,
                   const struct http_limits *lim, struct http_request *req)
{
    const char *p = *pp;
    const char *start;
    int major;
    enum http_rc rc;

    for (int i = 0;; i++) {
        if (p == end) {
            return HTTP_INCOMPLETE;
        }
        if (*p != '\r') {
            break;
        }
        rc = parse_crlf(&p, end, NULL, &req->error);
        if (rc != HTTP_OK) {
            return rc;
        }
        if (i == MAX_LEADING_CRLF) {
            return fail(&req->error, HTTP_BAD, "too many empty lines");
        }
    }

    start = p;
    p = scan_token(p, end);
    if (p == end) {
        return HTTP_INCOMPLETE;
    }
    if (p == start || *p != ' ') {
        return fail(&req->error, HTTP_BAD, bad_byte(*p, "invalid method"));
    }
    req->method = mkslice(start, p);
    if (slice_eq(req->method, "CONNECT")) {
        return fail(&req->error, HTTP_BAD, "CONNECT is not supported");
    }

    start = ++p;
    p = scan_target(p, end);
    if ((size_t)(p - start) > lim->max_uri) {
        return fail(&req->error, HTTP_URI_TOO_LONG, "request-target too long");
    }
    if (p == end) {
        return HTTP_INCOMPLETE;
    }
    if (*p != ' ') {
        return fail(&req->error, HTTP_BAD,
                    bad_byte(*p, *p == '#' ? "fragment in request-target"
                                           : "invalid request-target"));
    }
    if (p == start) {
        return fail(&req->error, HTTP_BAD, "empty request-target");
    }
    req->target = mkslice(start, p);
    rc = check_target(req, &req->error);
    if (rc != HTTP_OK) {
        return rc;
    }

    p++;
    rc = parse_version(&p, end, &major, &req->minor, &req->error);
    if (rc == HTTP_OK) {
        rc = parse_crlf(&p, end, "malformed request line", &req->error);
    }
    if (rc != HTTP_OK) {
        return rc;
    }
    if (major != 1 || req->minor > 1) {
        return fail(&req->error, HTTP_BAD_VERSION, "unsupported version");
    }
    *pp = p;
    return HTTP_OK;
}

/* status-line = HTTP-version SP 3DIGIT [ SP reason-phrase ] CRLF. The
 * reason may be empty, with or without its SP. */
static enum http_rc
parse_status_line(const char **pp, const char *end, struct http_response *resp)
{
    const char *p = *pp;
    const char *start;
    int major;
    enum http_rc rc;

    rc = parse_version(&p, end, &major, &resp->minor, &resp->error);
    if (rc != HTTP_OK) {
        return rc;
    }
    if (p == end) {
        return HTTP_INCOMPLETE;
    }
    if (*p != ' ') {
        return fail(&resp->error, HTTP_BAD,
                    bad_byte(*p, "malformed status line"));
    }
    p++;
    resp->status = 0;
    for (int i = 0; i < 3; i++, p++) {
        if (p == end) {
            return HTTP_INCOMPLETE;
        }
        if (!is_digit(*p)) {
            return fail(&resp->error, HTTP_BAD,
                        bad_byte(*p, "malformed status code"));
        }
        resp->status = resp->status * 10 + (*p - '0');
    }
    if (p == end) {
        return HTTP_INCOMPLETE;
    }
    start = p;
    if (*p == ' ') {
        start = ++p;
        p = scan_text(p, end);
    }
    resp->reason = mkslice(start, p);
    rc = parse_crlf(&p, end, "malformed status line", &resp->error);
    if (rc != HTTP_OK) {
        return rc;
    }
    if (major != 1 || resp->minor > 1) {
        return fail(&resp->error, HTTP_BAD_VERSION, "unsupported version");
    }
    if (resp->status < 100 || resp->status > 599) {
        return fail(&resp->error, HTTP_BAD, "status code out of range");
    }
    *pp = p;
    return HTTP_OK;
}

/* The header fields and the empty line that ends the head. Every field
 * line is name ":" OWS value OWS CRLF with a token name and text value;
 * *n counts the fields stored so far, whatever the result. */
static enum http_rc
parse_fields(const char **pp, const char *end, struct http_header *h,
             size_t max, size_t *n, const char **err)
{
    const char *p = *pp;

    *n = 0;
    for (;;) {
        const char *name;
        const char *value;
        const char *vend;
        enum http_rc rc;

        if (p == end) {
            return HTTP_INCOMPLETE;
        }
        if (*p == '\r') {
            rc = parse_crlf(&p, end, NULL, err);
            if (rc == HTTP_OK) {
                *pp = p;
            }
            return rc;
        }
        if (!is_tchar(*p)) {
            return fail(err, HTTP_BAD,
                        is_ows(*p)  ? "obs-fold"
                        : *p == ':' ? "empty field name"
                                    : bad_byte(*p, "invalid field name"));
        }
        if (*n == max) {
            return fail(err, HTTP_HEAD_TOO_LARGE, "too many header fields");
        }
        name = p;
        p = scan_token(p, end);
        if (p == end) {
            return HTTP_INCOMPLETE;
        }
        if (*p != ':') {
            return fail(err, HTTP_BAD,
                        is_ows(*p) ? "whitespace before colon"
                                   : bad_byte(*p, "invalid field name"));
        }
        h[*n].name = mkslice(name, p);
        p++;
        while (p < end && is_ows(*p)) {
            p++;
        }
        value = p;
        p = scan_text(p, end);
        if (p == end) {
            return HTTP_INCOMPLETE;
        }
        if (*p != '\r') {
            return fail(err, HTTP_BAD,
                        bad_byte(*p, "control character in field value"));
        }
        vend = p;
        rc = parse_crlf(&p, end, NULL, err);
        if (rc != HTTP_OK) {
            return rc;
        }
        while (vend > value && is_ows(vend[-1])) {
            vend--;
        }
        h[*n].value = mkslice(value, vend);
        h[*n].hop = false;
        (*n)++;
    }
}

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

static enum hdr_kind
hdr_kind(struct tm_slice n)
{
    switch (n.len) {
    case 2:
        return SLICE_IS(n, "te") ? HK_HOP : HK_OTHER;
    case 4:
        return SLICE_IS(n, "host") ? HK_HOST : HK_OTHER;
    case 6:
        return SLICE_IS(n, "expect") ? HK_EXPECT : HK_OTHER;
    case 7:
        return SLICE_IS(n, "trailer") || SLICE_IS(n, "upgrade") ? HK_HOP
                                                                : HK_OTHER;
    case 10:
        if (SLICE_IS(n, "connection")) {
            return HK_CONNECTION;
        }
        return SLICE_IS(n, "keep-alive") ? HK_HOP : HK_OTHER;
    case 14:
        return SLICE_IS(n, "content-length") ? HK_CONTENT_LENGTH : HK_OTHER;
    case 16:
        return SLICE_IS(n, "proxy-connection") ? HK_HOP : HK_OTHER;
    case 17:
        return SLICE_IS(n, "transfer-encoding") ? HK_TRANSFER_ENCODING
                                                : HK_OTHER;
    case 18:
        return SLICE_IS(n, "proxy-authenticate") ? HK_HOP : HK_OTHER;
    case 19:
        return SLICE_IS(n, "proxy-authorization") ? HK_HOP : HK_OTHER;
    default:
        return HK_OTHER;
    }
}

/* What the header fields say about framing and the connection. */
struct framing {
    bool te;           /* Transfer-Encoding present */
    bool chunked;      /* chunked seen (at most once) */
    bool chunked_last; /* ... and the last coding so far */
    bool te_other;     /* a coding other than chunked */
    bool cl;           /* Content-Length present (at most once) */
    uint64_t cl_value;
    bool close;      /* Connection: close */
    bool keep_alive; /* Connection: keep-alive */
    size_t hosts;
    bool expect_continue;
    struct tm_slice opts[MAX_CONN_OPTS]; /* Connection options */
    size_t nopts;
};

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
 * none; fence holds the fencing header names (NULL entries unused). */
static const char *
variant_of(struct tm_slice name, const char *const *fence)
{
    if (hname_variant(name.p, name.len, "content-length") ||
        hname_variant(name.p, name.len, "transfer-encoding")) {
        return "a framing header in another spelling";
    }
    for (size_t i = 0; fence != NULL && i < 2; i++) {
        if (fence[i] != NULL && hname_variant(name.p, name.len, fence[i])) {
            return "a fencing header in another spelling";
        }
    }
    return NULL;
}

/* One pass over the fields: framing, Host, Expect, and the hop flags,
 * the Connection-named ones last since Connection may come after them. */
static enum http_rc
read_fields(struct http_header *h, size_t n, bool request,
            const char *const *fence, struct framing *f, const char **err)
{
    enum http_rc rc = HTTP_OK;
    const char *why;

    memset(f, 0, offsetof(struct framing, opts));
    f->nopts = 0;
    for (size_t i = 0; i < n && rc == HTTP_OK; i++) {
        switch (hdr_kind(h[i].name)) {
        case HK_OTHER:
            if ((why = variant_of(h[i].name, fence)) != NULL) {
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
            } else if (!host_valid(h[i].value.p, h[i].value.len)) {
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

static size_t
min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

enum http_rc
http_parse_request(const char *buf, size_t len, const struct http_limits *lim,
                   const char *const *fence, struct http_request *req)
{
    static const struct tm_slice empty = {"", 0};
    const char *p = buf;
    struct framing f;
    enum http_rc rc = HTTP_INCOMPLETE;

    req->head_len = 0;
    req->method = empty;
    req->target = empty;
    req->path = empty;
    req->minor = 1;
    req->nheaders = 0;
    req->body = HTTP_BODY_NONE;
    req->content_length = 0;
    req->keep_alive = false;
    req->expect_continue = false;
    req->error = NULL;
    if (len > 0) {
        const char *end = buf + min_size(len, lim->max_head);

        rc = parse_request_line(&p, end, lim, req);
        if (rc == HTTP_OK) {
            rc = parse_fields(&p, end, req->headers,
                              min_size(lim->max_headers, HTTP_MAX_HEADERS),
                              &req->nheaders, &req->error);
        }
    }
    if (rc == HTTP_INCOMPLETE && len >= lim->max_head) {
        rc = fail(&req->error, HTTP_HEAD_TOO_LARGE, "head over max_head");
    }
    if (rc != HTTP_OK) {
        return rc;
    }
    req->head_len = (size_t)(p - buf);

    rc = read_fields(req->headers, req->nheaders, true, fence, &f, &req->error);
    if (rc != HTTP_OK) {
        return rc;
    }
    if (f.te && req->minor == 0) {
        return fail(&req->error, HTTP_BAD, "Transfer-Encoding in HTTP/1.0");
    }
    if (f.hosts == 0 && req->minor == 1) {
        return fail(&req->error, HTTP_BAD, "missing Host");
    }
    if (f.te_other) {
        return fail(&req->error, HTTP_NOT_IMPL, "unknown transfer coding");
    }
    if (f.te) {
        req->body = HTTP_BODY_CHUNKED;
    } else if (f.cl_value > 0) {
        req->body = HTTP_BODY_LENGTH;
        req->content_length = f.cl_value;
    }
    if (req->minor == 1) {
        req->keep_alive = !f.close;
        req->expect_continue = f.expect_continue;
    } else {
        req->keep_alive = f.keep_alive && !f.close;
    }
    return HTTP_OK;
}

enum http_rc
http_parse_response(const char *buf, size_t len, const struct http_limits *lim,
                    bool head_request, struct http_response *resp)
{
    static const struct tm_slice empty = {"", 0};
    const char *p = buf;
    struct framing f;
    enum http_rc rc = HTTP_INCOMPLETE;

    resp->head_len = 0;
    resp->status = 0;
    resp->minor = 1;
    resp->reason = empty;
    resp->nheaders = 0;
    resp->body = HTTP_BODY_NONE;
    resp->content_length = 0;
    resp->keep_alive = false;
    resp->error = NULL;
    if (len > 0) {
        const char *end = buf + min_size(len, lim->max_head);

        rc = parse_status_line(&p, end, resp);
        if (rc == HTTP_OK) {
            rc = parse_fields(&p, end, resp->headers,
                              min_size(lim->max_headers, HTTP_MAX_HEADERS),
                              &resp->nheaders, &resp->error);
        }
    }
    if (rc == HTTP_INCOMPLETE && len >= lim->max_head) {
        rc = fail(&resp->error, HTTP_HEAD_TOO_LARGE, "head over max_head");
    }
    if (rc != HTTP_OK) {
        return rc;
    }
    resp->head_len = (size_t)(p - buf);

    rc = read_fields(resp->headers, resp->nheaders, false, NULL, &f,
                     &resp->error);
    if (rc != HTTP_OK) {
        return rc;
    }
    if (f.te && resp->minor == 0) {
        return fail(&resp->error, HTTP_BAD, "Transfer-Encoding in HTTP/1.0");
    }
    if (f.te_other) {
        return fail(&resp->error, HTTP_BAD, "unknown transfer coding");
    }
    if (head_request || resp->status < 200 || resp->status == 204 ||
        resp->status == 304) {
        resp->body = HTTP_BODY_NONE;
    } else if (f.te) {
        resp->body = HTTP_BODY_CHUNKED;
    } else if (f.cl_value > 0) {
        resp->body = HTTP_BODY_LENGTH;
        resp->content_length = f.cl_value;
    } else if (!f.cl) {
        resp->body = HTTP_BODY_CLOSE;
    }
    if (resp->minor == 1) {
        resp->keep_alive = !f.close;
    } else {
        resp->keep_alive = f.keep_alive && !f.close;
    }
    if (resp->body == HTTP_BODY_CLOSE) {
        resp->keep_alive = false;
    }
    return HTTP_OK;
}

/* Search buf[sc->scanned..len) for an empty line: a LF followed by LF or
 * by CRLF (whether a bare LF is allowed is the parser's to say). true
 * when one is there; sc->scanned then is its last LF, which may begin
 * the next one. false: sc->scanned is where the bytes still to come may
 * complete one. */
static bool
head_end_seen(struct http_scan *sc, const char *buf, size_t len)
{
    size_t i = sc->scanned;

    while (i < len) {
        const char *lf = memchr(buf + i, '\n', len - i);
        size_t at;

        if (lf == NULL) {
            sc->looked += len - i;
            i = len;
            break;
        }
        at = (size_t)(lf - buf);
        sc->looked += at + 1 - i;
        if (at + 1 == len || (buf[at + 1] == '\r' && at + 2 == len)) {
            i = at; /* what follows the LF is still to come */
            break;
        }
        if (buf[at + 1] == '\n') {
            sc->scanned = at + 1;
            return true;
        }
        if (buf[at + 1] == '\r' && buf[at + 2] == '\n') {
            sc->scanned = at + 2;
            return true;
        }
        i = at + 1;
    }
    sc->scanned = i;
    return false;
}

/* Whether the head in buf[0..len) is worth a whole parse now. */
static bool
parse_due(struct http_scan *sc, const char *buf, size_t len, bool final,
          size_t max_head)
{
    if (final || len >= max_head || head_end_seen(sc, buf, len)) {
        sc->parses++;
        return true;
    }
    return false;
}

enum http_rc
http_parse_request_more(struct http_scan *sc, const char *buf, size_t len,
                        bool final, const struct http_limits *lim,
                        const char *const *fence, struct http_request *req)
{
    if (!parse_due(sc, buf, len, final, lim->max_head)) {
        return HTTP_INCOMPLETE;
    }
    return http_parse_request(buf, len, lim, fence, req);
}

enum http_rc
http_parse_response_more(struct http_scan *sc, const char *buf, size_t len,
                         bool final, const struct http_limits *lim,
                         bool head_request, struct http_response *resp)
{
    if (!parse_due(sc, buf, len, final, lim->max_head)) {
        return HTTP_INCOMPLETE;
    }
    return http_parse_response(buf, len, lim, head_request, resp);
}

int
http_find_header(const struct http_header *h, size_t n, size_t start,
                 const char *name)
{
    size_t len = strlen(name);

    for (size_t i = start; i < n; i++) {
        if (h[i].name.len == len && mem_ieq(h[i].name.p, name, len)) {
            return (int)i;
        }
    }
    return -1;
}

/* The chunked decoder's states (RFC 9112 7.1). */
enum chunk_state {
    CH_SIZE = 0,  /* first hex digit of a chunk-size */
    CH_SIZE_MORE, /* more hex digits, ';' or CR */
    CH_EXT,       /* chunk extensions, skipped up to CR */
    CH_SIZE_LF,   /* LF ending the size line */
    CH_DATA,      /* remaining bytes of chunk data */
    CH_DATA_CR,   /* CRLF after the data */
    CH_DATA_LF,
    CH_TRAILER,       /* start of a trailer field or of the final CRLF */
    CH_TRAILER_NAME,  /* field name up to ':' */
    CH_TRAILER_VALUE, /* field value up to CR */
    CH_TRAILER_LF,
    CH_END_LF, /* LF ending the body */
    CH_DONE,
    CH_ERROR,
};

void
http_chunked_init(struct http_chunked *c)
{
    memset(c, 0, sizeof(*c));
    c->state = CH_SIZE;
}

/* The names a trailer field may not have: framing, routing, then the
 * fencing headers (forbid[]). Bit i of tmatch stands for name i. */
#define TRAILER_FRAMING 3

static const char *
refused_name(const struct http_chunked *c, size_t i)
{
    static const char *const framing[TRAILER_FRAMING] = {
        "content-length", "transfer-encoding", "host"};

    return i < TRAILER_FRAMING ? framing[i] : c->forbid[i - TRAILER_FRAMING];
}

/* A new trailer field name begins: it may still be any refused name. */
static void
trailer_name_start(struct http_chunked *c)
{
    c->tmatch = 0;
    for (size_t i = 0; i < TRAILER_FRAMING + 2; i++) {
        if (refused_name(c, i) != NULL) {
            c->tmatch |= 1u << i;
        }
    }
    c->tname_len = 0;
}

/* ch is the next byte of the trailer field name: drop the refused names
 * it no longer may be. Compares one byte per name, so a name of any
 * length is checked without being kept. */
static void
trailer_name_byte(struct http_chunked *c, char ch)
{
    for (size_t i = 0; c->tmatch != 0 && i < TRAILER_FRAMING + 2; i++) {
        const char *n = refused_name(c, i);

        if ((c->tmatch & (1u << i)) &&
            (n[c->tname_len] == '\0' ||
             !hname_byte_same(ch, n[c->tname_len]))) {
            c->tmatch &= ~(1u << i);
        }
    }
    c->tname_len++;
}

/* At the colon: whether the whole name is one of the refused ones. */
static const char *
trailer_name_check(const struct http_chunked *c)
{
    for (size_t i = 0; i < TRAILER_FRAMING + 2; i++) {
        if ((c->tmatch & (1u << i)) &&
            refused_name(c, i)[c->tname_len] == '\0') {
            return i < TRAILER_FRAMING ? "framing field in trailer"
                                       : "fencing header in trailer";
        }
    }
    return NULL;
}

static size_t
chunk_fail(struct http_chunked *c, const char *why)
{
    c->state = CH_ERROR;
    c->error = why;
    return (size_t)-1;
}

/* One byte of everything but chunk data. Returns NULL, or why the body
 * is refused. */
static const char *
chunk_byte(struct http_chunked *c, char ch)
{
    int hv;

    switch (c->state) {
    case CH_SIZE:
        if ((hv = ascii_hexval(ch)) < 0) {
            return ch == '\r' ? "empty chunk size"
                              : bad_byte(ch, "invalid chunk size");
        }
        c->remaining = (uint64_t)hv;
        c->line_len = 1;
        c->state = CH_SIZE_MORE;
        return NULL;
    case CH_SIZE_MORE:
        if ((hv = ascii_hexval(ch)) >= 0) {
            if (c->line_len == 16 || c->remaining > (uint64_t)INT64_MAX >> 4) {
                return "chunk size overflows";
            }
            c->remaining = c->remaining << 4 | (uint64_t)hv;
            c->line_len++;
        } else if (ch == ';') {
            c->line_len++;
            c->state = CH_EXT;
        } else if (ch == '\r') {
            c->state = CH_SIZE_LF;
        } else {
            return bad_byte(ch, "invalid chunk size");
        }
        return NULL;
    case CH_EXT:
        if (ch == '\r') {
            c->state = CH_SIZE_LF;
        } else if (!is_text(ch)) {
            return bad_byte(ch, "invalid chunk extension");
        } else if (++c->line_len > CHUNK_LINE_MAX) {
            return "chunk size line too long";
        }
        return NULL;
    case CH_SIZE_LF:
        if (ch != '\n') {
            return "bare CR";
        }
        c->state = c->remaining == 0 ? CH_TRAILER : CH_DATA;
        return NULL;
    case CH_DATA_CR:
        if (ch != '\r') {
            return "no CRLF after chunk data";
        }
        c->state = CH_DATA_LF;
        return NULL;
    case CH_DATA_LF:
        if (ch != '\n') {
            return "bare CR";
        }
        c->state = CH_SIZE;
        return NULL;
    case CH_TRAILER:
        if (ch == '\r') {
            c->state = CH_END_LF;
        } else if (is_tchar(ch)) {
            c->state = CH_TRAILER_NAME;
            trailer_name_start(c);
            trailer_name_byte(c, ch);
        } else {
            return is_ows(ch) ? "obs-fold in trailer"
                              : bad_byte(ch, "invalid trailer field name");
        }
        return NULL;
    case CH_TRAILER_NAME:
        if (ch == ':') {
            c->state = CH_TRAILER_VALUE;
            return trailer_name_check(c);
        } else if (is_tchar(ch)) {
            trailer_name_byte(c, ch);
        } else {
            return is_ows(ch) ? "whitespace before colon in trailer"
                              : bad_byte(ch, "invalid trailer field name");
        }
        return NULL;
    case CH_TRAILER_VALUE:
        if (ch == '\r') {
            c->state = CH_TRAILER_LF;
        } else if (!is_text(ch)) {
            return bad_byte(ch, "control character in trailer");
        }
        return NULL;
    case CH_TRAILER_LF:
        if (ch != '\n') {
            return "bare CR";
        }
        c->state = CH_TRAILER;
        return NULL;
    case CH_END_LF:
        if (ch != '\n') {
            return "bare CR";
        }
        c->state = CH_DONE;
        c->done = true;
        return NULL;
    default:
        return "decoder misused";
    }
}

size_t
http_chunked_feed(struct http_chunked *c, const char *p, size_t n)
{
    size_t i = 0;

    if (c->state == CH_ERROR) {
        return (size_t)-1;
    }
    while (i < n && c->state != CH_DONE) {
        const char *why;

        if (c->state == CH_DATA) {
            size_t take = n - i;

            if (take > c->remaining) {
                take = (size_t)c->remaining;
            }
            i += take;
            c->remaining -= take;
            if (c->remaining == 0) {
                c->state = CH_DATA_CR;
            }
            continue;
        }
        if (c->state >= CH_TRAILER && ++c->trailer_bytes > TRAILER_MAX) {
            return chunk_fail(c, "trailer section over 8 KiB");
        }
        why = chunk_byte(c, p[i]);
        if (why != NULL) {
            return chunk_fail(c, why);
        }
        i++;
    }
    return i;
}

bool
http_chunked_body(const char *p, size_t n, char *out, size_t cap,
                  size_t *outlen)
{
    struct http_chunked c;
    size_t i = 0, o = 0;

    http_chunked_init(&c);
    while (i < n && !c.done) {
        size_t step = 1, used;

        if (c.state == CH_DATA) {
            step = n - i < c.remaining ? n - i : (size_t)c.remaining;
            if (step > cap - o) {
                return false;
            }
            memcpy(out + o, p + i, step);
            o += step;
        }
        used = http_chunked_feed(&c, p + i, step);
        if (used == (size_t)-1) {
            return false;
        }
        i += used;
    }
    *outlen = o;
    return c.done;
}
