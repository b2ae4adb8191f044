/* http_int.h: what the HTTP parser's files share (http_parse.c, the heads;
 * http_fields.c, the framing fields; http_chunked.c, the chunked body):
 * character classes, byte helpers, limits, and the framing the fields
 * reading hands back to the head parsers. Internal to policies/. */
#ifndef TM_HTTP_INT_H
#define TM_HTTP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ascii.h"
#include "http_parse.h"
#include "slice.h"

/* Character classes, one bit each, looked up in http_char_class[]. */
enum {
    CC_TCHAR = 1,  /* token: methods, field names, codings */
    CC_TARGET = 2, /* request-target: visible ASCII but '#' */
    CC_TEXT = 4,   /* field value, reason: HT, SP, visible ASCII, obs-text */
    CC_HOST = 8,   /* reg-name: unreserved, sub-delims, '%' */
};

extern const uint8_t http_char_class[256];

#define MAX_CONN_OPTS 32    /* Connection options per message */
#define CHUNK_LINE_MAX 4096 /* chunk-size line with extensions, no CRLF */
#define TRAILER_MAX 8192    /* whole trailer section, final CRLF included */

static inline bool
is_tchar(char c)
{
    return (http_char_class[(unsigned char)c] & CC_TCHAR) != 0;
}

static inline bool
is_text(char c)
{
    return (http_char_class[(unsigned char)c] & CC_TEXT) != 0;
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
static inline bool
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

static inline enum http_rc
fail(const char **err, enum http_rc rc, const char *why)
{
    *err = why;
    return rc;
}

static inline const char *
scan_token(const char *p, const char *end)
{
    while (p < end && is_tchar(*p)) {
        p++;
    }
    return p;
}

/* Why the byte c, which is not the expected one, is refused. */
static inline const char *
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

bool http_host_valid(const char *p, size_t n);
enum http_rc http_read_fields(struct http_header *h, size_t n, bool request,
                              const char *const *fence, struct framing *f,
                              const char **err);

#endif
