/* fuzz_token.c: libFuzzer target for token_parse against an independent
 * oracle: accepted exactly when the input is decimal digits whose value,
 * leading zeros dropped, is in 1..INT64_MAX; then *out prints back as
 * that text. token_check under verify = hmac accepts exactly the signed
 * token token_sign makes; under none, a bare number or that token; with
 * no key, only a bare number. Any disagreement aborts. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../policies/token.h"
#include "fuzz.h"

static const char int64_max[] = "9223372036854775807";

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

/* Under verify = hmac the input is accepted only when it is, byte for
 * byte, the token signed for its own fence; under none, a bare number
 * counts, and a signed token only when its signature is right. With no
 * key a signed token is never read (TOKEN_NO_KEY): what is accepted is
 * exactly what token_parse accepts. */
static void
check_signed(const char *s, size_t size, bool bare)
{
    static const unsigned char key[] = "fuzz-key-0123456789abcdef";
    static const char res[] = "documents/fuzz";
    char want[TOKEN_SIGNED_MAX + 1];
    int64_t v = -1, w = -1, x = -1;
    enum token_status hm = token_check(TM_VERIFY_HMAC, key, sizeof(key) - 1,
                                       res, sizeof(res) - 1, s, size, &v);
    enum token_status none = token_check(TM_VERIFY_NONE, key, sizeof(key) - 1,
                                         res, sizeof(res) - 1, s, size, &w);
    enum token_status nokey =
        token_check(TM_VERIFY_NONE, NULL, 0, res, sizeof(res) - 1, s, size, &x);

    check(hm == TOKEN_OK || hm == TOKEN_INVALID || hm == TOKEN_FORBIDDEN,
          "token_check: unknown status");
    check(none == TOKEN_OK || none == TOKEN_INVALID || none == TOKEN_FORBIDDEN,
          "verify = none: unknown status");
    check((hm == TOKEN_INVALID) == (none == TOKEN_INVALID),
          "the rules disagree on the shape");
    check((nokey == TOKEN_INVALID) == (none == TOKEN_INVALID),
          "no key disagrees on the shape");
    check((nokey == TOKEN_OK) == bare && (!bare || x == w),
          "no key: accepted other than a bare number");
    check(nokey == TOKEN_OK || nokey == TOKEN_INVALID || nokey == TOKEN_NO_KEY,
          "no key: unknown status");
    check((none == TOKEN_OK) == (bare || hm == TOKEN_OK),
          "verify = none read a signature it did not check");
    if (hm == TOKEN_OK) {
        size_t n = token_sign(key, sizeof(key) - 1, res, sizeof(res) - 1, v,
                              want, sizeof(want));

        check(n > 0 && n == size && memcmp(want, s, n) == 0,
              "a hmac token was accepted that token_sign did not make");
        check(none == TOKEN_OK && w == v, "the rules disagree on the fence");
    }
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
    check_signed(s, size, st == TOKEN_OK);
    return 0;
}
