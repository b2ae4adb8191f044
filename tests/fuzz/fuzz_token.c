/* fuzz_token.c: libFuzzer target for token_parse against an independent
 * oracle: accepted exactly when the input is decimal digits whose value,
 * leading zeros dropped, is in 1..INT64_MAX; then *out prints back as
 * that text. Any disagreement aborts. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../policies/token.h"

static const char int64_max[] = "9223372036854775807";

static void
check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "invariant violated: %s\n", what);
        abort();
    }
}

/* What token_parse should answer, from the text alone. */
static bool
oracle_accepts(const char *s, size_t len)
{
    size_t z = 0;

    if (len == 0) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return false;
        }
    }
    while (z < len && s[z] == '0') {
        z++;
    }
    len -= z;
    if (len == 0) {
        return false; /* zero */
    }
    if (len != sizeof(int64_max) - 1) {
        return len < sizeof(int64_max) - 1;
    }
    return memcmp(s + z, int64_max, len) <= 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    int64_t v = -1;
    enum token_status st = token_parse(s, size, &v);
    bool want = oracle_accepts(s, size);

    check(st == TOKEN_OK || st == TOKEN_INVALID, "unknown status");
    check((st == TOKEN_OK) == want, "token_parse disagrees with the oracle");
    if (st == TOKEN_OK) {
        char text[32];
        size_t z = 0;
        int n;

        check(v >= 1 && v <= INT64_MAX, "accepted token out of range");
        while (z < size && s[z] == '0') {
            z++;
        }
        n = snprintf(text, sizeof(text), "%lld", (long long)v);
        check(n > 0 && (size_t)n == size - z &&
                  memcmp(text, s + z, (size_t)n) == 0,
              "accepted token does not print back as its input");
    }
    return 0;
}
