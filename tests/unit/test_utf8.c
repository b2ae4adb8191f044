/* test_utf8.c: well-formed UTF-8 (RFC 3629): the one checker behind
 * problem bodies, JSON logs, lock names and canonical resource names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../policies/utf8.h"

struct seq_case {
    const char *bytes;
    size_t len;
    size_t want;
};

#define S(lit, want)                                                           \
    {                                                                          \
        lit, sizeof(lit) - 1, want                                             \
    }

static const struct seq_case seq_cases[] = {
    S("a", 1),
    S("\x7f", 1),
    S("\xc2\x80", 2),         /* U+0080, the first two-byte */
    S("\xdf\xbf", 2),         /* U+07FF */
    S("\xe0\xa0\x80", 3),     /* U+0800 */
    S("\xe2\x82\xac", 3),     /* the euro sign */
    S("\xed\x9f\xbf", 3),     /* U+D7FF, just below the surrogates */
    S("\xee\x80\x80", 3),     /* U+E000, just above them */
    S("\xef\xbf\xbf", 3),     /* U+FFFF */
    S("\xf0\x90\x80\x80", 4), /* U+10000 */
    S("\xf4\x8f\xbf\xbf", 4), /* U+10FFFF, the last code point */
    S("\xc3\xa9tail", 2),     /* only the first sequence counts */
    S("\x80", 0),             /* a continuation byte alone */
    S("\xbf", 0),
    S("\xc0\x80", 0),         /* overlong NUL */
    S("\xc1\xbf", 0),         /* overlong U+007F */
    S("\xe0\x9f\xbf", 0),     /* overlong U+07FF */
    S("\xf0\x8f\xbf\xbf", 0), /* overlong U+FFFF */
    S("\xed\xa0\x80", 0),     /* U+D800, a surrogate */
    S("\xed\xbf\xbf", 0),     /* U+DFFF */
    S("\xf4\x90\x80\x80", 0), /* U+110000, past the last */
    S("\xf5\x80\x80\x80", 0),
    S("\xff", 0),
    S("\xfe", 0),
    S("\xe2\x82", 0), /* cut short */
    S("\xf0\x90\x80", 0),
    S("\xc3", 0),
    S("\xe2\x28\xa1", 0), /* second byte not a continuation */
    S("\xc3\xc3", 0),
    {"", 0, 0},
};

static void
test_utf8_seq(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(seq_cases) / sizeof(seq_cases[0]); i++) {
        const struct seq_case *c = &seq_cases[i];
        size_t got = utf8_seq(c->bytes, c->len);

        if (got != c->want) {
            fail_msg("case %zu: %zu, want %zu", i, got, c->want);
        }
    }
}

static void
test_utf8_valid(void **state)
{
    (void)state;
    assert_true(utf8_valid("", 0));
    assert_true(utf8_valid("files/\xc3\xa9t\xc3\xa9", 11));
    assert_false(utf8_valid("files/\xc3\xa9t\xc3\xa9", 10));
    assert_true(utf8_valid("\xf0\x9f\x94\x92 lock", 9));
    assert_false(utf8_valid("files/\xff", 7));
    assert_false(utf8_valid("\xc3\xa9\xc3", 3)); /* cut at the end */
    assert_false(utf8_valid("a\xed\xa0\x80z", 5));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_seq),
        cmocka_unit_test(test_utf8_valid),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
