/* test_redis_reply.c: redis_reply_dec, the one reader of the decimal
 * fences and marks the Redis scripts answer, for the mark store and the
 * lock backend alike. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../proxy/clients/redis_reply.h"

struct dec_case {
    const char *s;
    bool ok;
    int64_t want;
};

static const struct dec_case dec_cases[] = {
    {"0", true, 0},
    {"7", true, 7},
    {"0042", true, 42},
    {"9223372036854775807", true, INT64_MAX},
    {"9223372036854775808", false, 0},  /* INT64_MAX + 1 */
    {"9999999999999999999", false, 0},  /* 19 digits, above */
    {"00000000000000000001", false, 0}, /* 20 digits */
    {"", false, 0},
    {"-1", false, 0},
    {"+1", false, 0},
    {" 1", false, 0},
    {"1 ", false, 0},
    {"12a", false, 0},
};

static void
test_parse_dec(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(dec_cases) / sizeof(dec_cases[0]); i++) {
        const struct dec_case *c = &dec_cases[i];
        int64_t v = -5;

        assert_int_equal(redis_reply_dec(c->s, strlen(c->s), &v), c->ok);
        assert_true(v == (c->ok ? c->want : -5)); /* untouched on false */
    }
}

static void
test_parse_dec_reads_len_bytes(void **state)
{
    int64_t v = 0;

    (void)state;
    assert_true(redis_reply_dec("123xyz", 3, &v));
    assert_int_equal(v, 123);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_dec),
        cmocka_unit_test(test_parse_dec_reads_len_bytes),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
