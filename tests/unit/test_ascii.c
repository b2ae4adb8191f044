/* test_ascii.c: ascii_dec, the number writer of the per-request lines
 * (access lines, problem bodies, answer headers), against snprintf:
 * every length of number, both signs, and the ends of int64_t. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../policies/ascii.h"

static void
want_dec(int64_t v)
{
    char buf[ASCII_DEC_MAX + 2], want[32];
    char *end = buf + ASCII_DEC_MAX + 1, *p;

    memset(buf, '#', sizeof(buf));
    p = ascii_dec(end, v);
    snprintf(want, sizeof(want), "%" PRId64, v);
    assert_true(p >= buf + 1); /* at most ASCII_DEC_MAX bytes */
    assert_int_equal((size_t)(end - p), strlen(want));
    assert_memory_equal(p, want, strlen(want));
    assert_int_equal(buf[0], '#'); /* nothing before it */
    assert_int_equal(*end, '#');   /* nothing after it */
}

static void
test_every_length(void **state)
{
    int64_t v = 1;

    (void)state;
    want_dec(0);
    want_dec(INT64_MAX);
    want_dec(INT64_MIN);
    want_dec(INT64_MIN + 1);
    for (int digits = 1; digits <= 18; digits++, v *= 10) {
        /* 10^k - 1, 10^k and 10^k + 7: each side of a new digit */
        want_dec(v - 1);
        want_dec(v);
        want_dec(v + 7);
        want_dec(-v);
        want_dec(-(v - 1));
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_length),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
