/* test_token.c: token_parse against a table of header values, valid and
 * not: digits only, 1 to INT64_MAX. */
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
            fail_msg("token_parse(\"%s\") = %d, want %d", cases[i].in,
                     (int)got, (int)cases[i].want);
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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_slice_not_terminated),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
