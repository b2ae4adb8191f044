/* test_token.c: token_parse against a table of header values, valid and
 * not: digits only, 1 to INT64_MAX; signed tokens against vectors made
 * with Python's hmac module. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../policies/token.h"

struct token_case {
    const char *in;
    enum token_status want;
    int64_t value;
};

static const struct token_case cases[] = {
    {"1", TOKEN_OK, 1},
    {"42", TOKEN_OK, 42},
    {"007", TOKEN_OK, 7},
    {"9223372036854775807", TOKEN_OK, INT64_MAX},
    {"9223372036854775806", TOKEN_OK, INT64_MAX - 1},
    {"0009223372036854775807", TOKEN_OK, INT64_MAX},
    {"", TOKEN_INVALID, 0},
    {"0", TOKEN_INVALID, 0},
    {"000", TOKEN_INVALID, 0},
    {"9223372036854775808", TOKEN_INVALID, 0},
    {"18446744073709551616", TOKEN_INVALID, 0},
    {"99999999999999999999999", TOKEN_INVALID, 0},
    {"-1", TOKEN_INVALID, 0},
    {"+1", TOKEN_INVALID, 0},
    {" 1", TOKEN_INVALID, 0},
    {"1 ", TOKEN_INVALID, 0},
    {"1 2", TOKEN_INVALID, 0},
    {"0x10", TOKEN_INVALID, 0},
    {"1e3", TOKEN_INVALID, 0},
    {"1.5", TOKEN_INVALID, 0},
    {"12a", TOKEN_INVALID, 0},
    {"\t7", TOKEN_INVALID, 0},
};

static void
test_table(void **state)
{
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t v = -5;
        enum token_status got =
            token_parse(cases[i].in, strlen(cases[i].in), &v);

        if (got != cases[i].want) {
            fail_msg("token_parse(\"%s\") = %d, want %d", cases[i].in, (int)got,
                     (int)cases[i].want);
        }
        if (got == TOKEN_OK) {
            assert_int_equal(v, cases[i].value);
        } else {
            /* A refused token leaves the output alone. */
            assert_int_equal(v, -5);
        }
    }
}

/* Only len bytes are read: the header value is a slice, not a string. */
static void
test_slice_not_terminated(void **state)
{
    const char buf[] = "12345xyz";
    int64_t v = 0;

    assert_int_equal(token_parse(buf, 5, &v), TOKEN_OK);
    assert_int_equal(v, 12345);
    assert_int_equal(token_parse(buf, 6, &v), TOKEN_INVALID);
    assert_int_equal(token_parse(NULL, 0, &v), TOKEN_INVALID);
}

#define KEY "0123456789abcdef0123456789abcdef"
#define SIG_A7 "Ffr2RCdVp09guZ98xWo5GQILnoebOg3LPaKYWoAHzdg"
#define SIG_B7 "zQ2zRy7YpIz1qgXh3LdGHj9FGbI0CLVUuNPG-uXnBn0"

static const unsigned char key[] = KEY;
#define KEYLEN (sizeof(key) - 1)

/* HMAC-SHA256 over resource "\n" fence, base64url without padding. */
static void
test_sign_vector(void **state)
{
    char out[TOKEN_SIGNED_MAX + 1];
    size_t n = token_sign(key, KEYLEN, "documents/a", 11, 7, out, sizeof(out));

    assert_int_equal(n, strlen("7." SIG_A7));
    assert_string_equal(out, "7." SIG_A7);
    n = token_sign(key, KEYLEN, "documents/b", 11, 7, out, sizeof(out));
    assert_string_equal(out, "7." SIG_B7);
    assert_int_equal(token_sign(key, KEYLEN, "x", 1, 0, out, sizeof(out)), 0);
    assert_int_equal(token_sign(key, KEYLEN, "x", 1, 1, out, 10), 0);
    n = token_sign(key, KEYLEN, "x", 1, INT64_MAX, out, sizeof(out));
    assert_int_equal(n, TOKEN_SIGNED_MAX);
}

struct check_case {
    enum tm_verify verify;
    const char *res;
    const char *in;
    enum token_status want;
    int64_t fence;
};

static const struct check_case checks[] = {
    {TM_VERIFY_HMAC, "documents/a", "7." SIG_A7, TOKEN_OK, 7},
    /* unsigned, borrowed (another resource), replayed on another fence,
     * forged (one character changed) */
    {TM_VERIFY_HMAC, "documents/a", "7", TOKEN_FORBIDDEN, 0},
    {TM_VERIFY_HMAC, "documents/a", "7." SIG_B7, TOKEN_FORBIDDEN, 0},
    {TM_VERIFY_HMAC, "documents/a", "8." SIG_A7, TOKEN_FORBIDDEN, 0},
    {TM_VERIFY_HMAC, "documents/a",
     "7.Ffr2RCdVp09guZ98xWo5GQILnoebOg3LPaKYWoAHzdh", TOKEN_FORBIDDEN, 0},
    {TM_VERIFY_HMAC, "documents/a", "9223372036854775807." SIG_A7,
     TOKEN_FORBIDDEN, 0},
    /* malformed whatever the rule */
    {TM_VERIFY_HMAC, "documents/a", "7.", TOKEN_INVALID, 0},
    {TM_VERIFY_HMAC, "documents/a", "." SIG_A7, TOKEN_INVALID, 0},
    {TM_VERIFY_HMAC, "documents/a", "7." SIG_A7 "A", TOKEN_INVALID, 0},
    {TM_VERIFY_HMAC, "documents/a",
     "7.Ffr2RCdVp09guZ98xWo5GQILnoebOg3LPaKYWoAHzd=", TOKEN_INVALID, 0},
    {TM_VERIFY_HMAC, "documents/a", "0." SIG_A7, TOKEN_INVALID, 0},
    {TM_VERIFY_HMAC, "documents/a", "07." SIG_A7, TOKEN_INVALID, 0},
    {TM_VERIFY_NONE, "documents/a", "07." SIG_A7, TOKEN_INVALID, 0},
    {TM_VERIFY_HMAC, "documents/a", "", TOKEN_INVALID, 0},
    {TM_VERIFY_NONE, "documents/a", "1.5", TOKEN_INVALID, 0},
    /* verify = none: a bare number counts; a signature, when there is
     * one, is checked all the same (never read as its bare fence) */
    {TM_VERIFY_NONE, "documents/a", "12", TOKEN_OK, 12},
    {TM_VERIFY_NONE, "documents/a", "7." SIG_A7, TOKEN_OK, 7},
    {TM_VERIFY_NONE, "documents/a", "7." SIG_B7, TOKEN_FORBIDDEN, 0},
    {TM_VERIFY_NONE, "documents/a", "1." SIG_A7, TOKEN_FORBIDDEN, 0},
};

static void
test_check_table(void **state)
{
    for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
        const struct check_case *c = &checks[i];
        int64_t v = -5;
        enum token_status got =
            token_check(c->verify, key, KEYLEN, c->res, strlen(c->res), c->in,
                        strlen(c->in), &v);

        if (got != c->want) {
            fail_msg("token_check(%d, \"%s\") = %d, want %d", c->verify, c->in,
                     (int)got, (int)c->want);
        }
        assert_int_equal(v, got == TOKEN_OK ? c->fence : -5);
    }
}

struct no_key_case {
    enum tm_verify verify;
    const char *in;
    enum token_status want;
    int64_t fence;
};

/* Without a key nothing verifies: a hmac route refuses everything, and
 * a signed token is refused everywhere (TOKEN_NO_KEY), whatever its
 * signature: "1.<junk>" is not the bare 1. */
static const struct no_key_case no_key[] = {
    {TM_VERIFY_HMAC, "7." SIG_A7, TOKEN_FORBIDDEN, 0},
    {TM_VERIFY_HMAC, "7", TOKEN_FORBIDDEN, 0},
    {TM_VERIFY_NONE, "7." SIG_A7, TOKEN_NO_KEY, 0},
    {TM_VERIFY_NONE, "1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
     TOKEN_NO_KEY, 0},
    {TM_VERIFY_NONE, "1.x", TOKEN_INVALID, 0},
    {TM_VERIFY_NONE, "07." SIG_A7, TOKEN_INVALID, 0},
    {TM_VERIFY_NONE, "7", TOKEN_OK, 7},
};

static void
test_check_no_key(void **state)
{
    for (size_t i = 0; i < sizeof(no_key) / sizeof(no_key[0]); i++) {
        const struct no_key_case *c = &no_key[i];
        int64_t v = -5;
        enum token_status got = token_check(c->verify, NULL, 0, "documents/a",
                                            11, c->in, strlen(c->in), &v);

        if (got != c->want) {
            fail_msg("no key: token_check(%d, \"%s\") = %d, want %d", c->verify,
                     c->in, (int)got, (int)c->want);
        }
        assert_int_equal(v, got == TOKEN_OK ? c->fence : -5);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_slice_not_terminated),
        cmocka_unit_test(test_sign_vector),
        cmocka_unit_test(test_check_table),
        cmocka_unit_test(test_check_no_key),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
