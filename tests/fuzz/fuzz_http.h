/* fuzz_http.h: what the targets of the request and the response head
 * parsers share: their limits, and the invariants of a slice and of a
 * result other than HTTP_OK. */
#ifndef TM_FUZZ_HTTP_H
#define TM_FUZZ_HTTP_H

#include <stddef.h>

#include "../../policies/http_parse.h"
#include "fuzz.h"

#define MAX_HEAD 16384
#define MAX_HEADERS 100
#define MAX_URI 16384

/* The limits of the brief, and tight ones that the refusals for size are
 * reachable with small inputs too. */
static const struct http_limits lim_std = {MAX_HEAD, MAX_HEADERS, MAX_URI};
static const struct http_limits lim_tight = {1024, 8, 256};

/* A slice must lie within buf[0..len). */
static inline void
check_in(struct tm_slice s, const char *buf, size_t len, const char *what)
{
    check(s.p != NULL || s.len == 0, what);
    if (s.len > 0) {
        check(s.p >= buf && s.p + s.len <= buf + len, what);
    }
}

/* rc, not HTTP_OK, of the head parser who ("request", "response") that
 * read size bytes under lim, error its reason: incomplete only below
 * max_head and without a reason, refused only with one. */
static inline void
check_not_ok(const char *who, enum http_rc rc, const char *error, size_t size,
             const struct http_limits *lim)
{
    const char *what = NULL;

    switch (rc) {
    case HTTP_OK:
        break;
    case HTTP_INCOMPLETE:
        if (error != NULL) {
            what = "incomplete with an error";
        } else if (size >= lim->max_head) {
            what = "incomplete at max_head";
        }
        break;
    case HTTP_BAD:
    case HTTP_HEAD_TOO_LARGE:
    case HTTP_URI_TOO_LONG:
    case HTTP_NOT_IMPL:
    case HTTP_BAD_VERSION:
        if (error == NULL) {
            what = "refused without a reason";
        }
        break;
    default:
        what = "unknown result";
    }
    if (what != NULL) {
        fprintf(stderr, "invariant violated: %s: %s\n", who, what);
        abort();
    }
}

#endif
