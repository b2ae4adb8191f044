/* http_parse.c: the strict HTTP/1.1 parser (RFC 9112): request and
 * response heads in one pass over the caller's buffer (the framing fields
 * are read in http_fields.c, chunked bodies decoded in http_chunked.c).
 * No I/O, no allocation. */
#include "http_parse.h"

#include <string.h>

#include "http_int.h"

#define MAX_LEADING_CRLF 4 /* empty lines tolerated before a request */

/* clang-format off */
const uint8_t http_char_class[256] = {
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
        while (p < stop && (http_char_class[(unsigned char)*p] & CC_TARGET)) {
            p++;
        }
        if (p < stop || p == end) {
            return p;
        }
    }
}

/* Parse "HTTP/D.D" at *pp. Only the form: the caller judges the number
 * once the whole line is in, so that a malformed line stays a 400. */
static enum http_rc
parse_version(const char **pp, const char *end, int *major, int *minor,
              const char **err)
{
    static const char form[] = "HTTP/D.D";
    const char *p = *pp;

    /* The common case whole, in one compare; the loop says what is
     * missing or wrong otherwise. */
    if (end - p >= 8 && memcmp(p, "HTTP/", 5) == 0 && is_digit(p[5]) &&
        p[6] == '.' && is_digit(p[7])) {
        p += 8;
    }
    for (size_t i = (size_t)(p - *pp); i < sizeof(form) - 1; i++, p++) {
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
bool
http_host_valid(const char *p, size_t n)
{
    size_t i = 0;

    if (n == 0) {
        return true;
    }
    if (p[0] == '[') {
        for (i = 1; i < n && p[i] != ']'; i++) {
            if (!(http_char_class[(unsigned char)p[i]] & CC_HOST) &&
                p[i] != ':') {
                return false;
            }
        }
        if (i == n || i == 1) {
            return false;
        }
        i++;
    } else {
        for (; i < n && (http_char_class[(unsigned char)p[i]] & CC_HOST); i++) {
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
        if (path == auth || !http_host_valid(auth, (size_t)(path - auth))) {
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

static size_t
min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

struct http_request *
http_request_space_init(struct http_request_space *s)
{
    s->r.headers = s->headers;
    return &s->r;
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

    rc = http_read_fields(req->headers, req->nheaders, true, fence, &f,
                          &req->error);
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

    rc = http_read_fields(resp->headers, resp->nheaders, false, NULL, &f,
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
