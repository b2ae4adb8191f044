/* http_test.h: what the HTTP parser's unit tests share: exact-size
 * copies for ASan, the default limits and fencing names, and one-call
 * request and response parses that return the result. */
#ifndef TM_HTTP_TEST_H
#define TM_HTTP_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../policies/http_parse.h"

#define S(lit) lit, sizeof(lit) - 1
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static const struct http_limits lim_std = {8192, 100, 4096};
/* The fencing header names, as the proxy passes them by default. */
static const char *const fence[2] = {"Fencing-Token", "Fencing-Resource"};

/* Every parse in these tests reads an exact-size heap copy, so that ASan
 * sees any read past len. */
static inline char *
dup_exact(const char *p, size_t n)
{
    char *b = malloc(n > 0 ? n : 1);

    assert_non_null(b);
    memcpy(b, p, n);
    return b;
}

static inline void
assert_in(struct tm_slice s, const char *b, size_t len)
{
    assert_true(s.p >= b && s.p + s.len <= b + len);
}

static inline enum http_rc
req_rc(const char *p, size_t n, const struct http_limits *lim)
{
    static struct http_header req_headers[HTTP_MAX_HEADERS];
    static struct http_request req = {.headers = req_headers};
    char *b = dup_exact(p, n);
    enum http_rc rc = http_parse_request(b, n, lim, fence, &req);

    if (rc == HTTP_INCOMPLETE || rc == HTTP_OK) {
        assert_null(req.error);
    } else {
        assert_non_null(req.error);
    }
    free(b);
    return rc;
}

static inline enum http_rc
resp_rc(const char *p, size_t n, bool head)
{
    static struct http_response resp;
    char *b = dup_exact(p, n);
    enum http_rc rc = http_parse_response(b, n, &lim_std, head, &resp);

    free(b);
    return rc;
}

#endif
