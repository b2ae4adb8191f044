/* token.c: parsing a fencing token from a header value. Pure: no I/O, no
 * allocation, no globals. */
#include "token.h"

enum token_status
token_parse(const char *s, size_t len, int64_t *out)
{
    int64_t v = 0;

    if (s == NULL || len == 0) {
        return TOKEN_INVALID;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return TOKEN_INVALID;
        }
        int d = s[i] - '0';
        /* v * 10 + d must stay within INT64_MAX. */
        if (v > (INT64_MAX - d) / 10) {
            return TOKEN_INVALID;
        }
        v = v * 10 + d;
    }
    if (v == 0) {
        return TOKEN_INVALID;
    }
    *out = v;
    return TOKEN_OK;
}
