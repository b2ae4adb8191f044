/* test_json.c: JSON string content: what tidemark writes into problem
 * documents, lock answers and JSON logs is valid JSON whatever bytes a
 * resource or lock name carries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "../../policies/json.h"
#include "../../policies/utf8.h"
#include "../../proxy/json.h"

#define S(lit, want)                                                           \
    {                                                                          \
        lit, sizeof(lit) - 1, want                                             \
    }

/* One piece: how many bytes it takes, and its escape (NULL: itself). */
static void
test_json_piece(void **state)
{
    static const struct {
        const char *in;
        size_t len;
        size_t take;
        const char *esc;
    } cases[] = {
        {"a", 1, 1, NULL},
        {"\"x", 2, 1, "\\\""},
        {"\\", 1, 1, "\\\\"},
        {"\n", 1, 1, "\\u000a"},
        {"\0", 1, 1, "\\u0000"},
        {"\x1f", 1, 1, "\\u001f"},
        {"\x7f", 1, 1, "\\u007f"},
        {"/", 1, 1, NULL},
        {"\xc3\xa9x", 3, 2, NULL},
        {"\xf0\x9f\x94\x92", 4, 4, NULL},
        {"\xff", 1, 1, "\\ufffd"},
        {"\xc0\x80", 2, 1, "\\ufffd"},
        {"\xe2\x82", 2, 1, "\\ufffd"},     /* cut short */
        {"\xed\xa0\x80", 3, 1, "\\ufffd"}, /* a surrogate */
        {"\xc2\x85", 2, 2, "\\u0085"},     /* NEL, a C1 control */
        {"\xc2\x9b", 2, 2, "\\u009b"},     /* CSI, a C1 control */
        {"\xc2\xa0", 2, 2, NULL},          /* no-break space */
        {"\xe2\x80\xa8", 3, 3, "\\u2028"}, /* line separator */
        {"\xe2\x80\xa9", 3, 3, "\\u2029"}, /* paragraph separator */
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char esc[8];
        size_t take = 0;
        const char *e = json_piece(cases[i].in, cases[i].len, &take, esc);

        if (take != cases[i].take) {
            fail_msg("case %zu: takes %zu, want %zu", i, take, cases[i].take);
        }
        if (cases[i].esc == NULL ? e != NULL
                                 : e == NULL || strcmp(e, cases[i].esc) != 0) {
            fail_msg("case %zu: escape '%s', want '%s'", i,
                     e != NULL ? e : "(none)",
                     cases[i].esc != NULL ? cases[i].esc : "(none)");
        }
    }
}

/* Into a fixed buffer: a piece that does not fit is left out whole, so
 * the content stays valid whatever the room. */
static void
test_json_escape_into(void **state)
{
    char buf[32];
    size_t n;

    (void)state;
    n = 0;
    json_escape_into(buf, sizeof(buf), &n, "q\"\xc3\xa9\xff");
    assert_int_equal(n, 11);
    assert_memory_equal(buf, "q\\\"\xc3\xa9\\ufffd", n);
    for (size_t cap = 1; cap < 12; cap++) {
        n = 0;
        json_escape_into(buf, cap, &n, "\xc3\xa9\xc3\xa9\\\xc3\xa9");
        size_t fit = (cap - 1) / 2 * 2; /* four pieces of two bytes */

        assert_int_equal(n, fit < 8 ? fit : 8);
        assert_true(utf8_valid(buf, n));
    }
    for (size_t cap = 1; cap < 12; cap++) { /* plain bytes: one a piece */
        n = 0;
        json_escape_into(buf, cap, &n, "plain text\"x");
        assert_int_equal(n, cap - 1 < 10 ? cap - 1 : 10);
        assert_memory_equal(buf, "plain text", n);
    }
    n = 3;
    memcpy(buf, "ab:", 3);
    json_escape_into(buf, sizeof(buf), &n, "c");
    assert_int_equal(n, 4);
    assert_memory_equal(buf, "ab:c", 4);
}

/* json_escape's output for len bytes of in, NUL-terminated, malloc'd. */
static char *
escaped(const char *in, size_t len)
{
    struct evbuffer *b = evbuffer_new();
    size_t n;
    char *out;

    assert_non_null(b);
    json_escape(b, in, len);
    n = evbuffer_get_length(b);
    out = malloc(n + 1);
    assert_non_null(out);
    evbuffer_remove(b, out, n);
    out[n] = '\0';
    evbuffer_free(b);
    return out;
}

static void
test_json_escape(void **state)
{
    static const struct {
        const char *in;
        size_t len;
        const char *want;
    } cases[] = {
        S("plain/ascii", "plain/ascii"),
        S("q\"b\\s", "q\\\"b\\\\s"),
        S("nl\ntab\tnul\0end", "nl\\u000atab\\u0009nul\\u0000end"),
        S("\xc3\xa9t\xc3\xa9", "\xc3\xa9t\xc3\xa9"),
        S("\xf0\x9f\x94\x92", "\xf0\x9f\x94\x92"),
        S("a\xff"
          "b",
          "a\\ufffdb"),
        S("\xc0\x80", "\\ufffd\\ufffd"),
        S("\xe2\x82", "\\ufffd\\ufffd"),
        S("\xed\xa0\x80x", "\\ufffd\\ufffd\\ufffdx"),
        S("\x7f", "\\u007f"),
        S("a\xe2\x80\xa8"
          "b\xc2\x9b",
          "a\\u2028b\\u009b"),
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *got = escaped(cases[i].in, cases[i].len);

        if (strcmp(got, cases[i].want) != 0) {
            fail_msg("case %zu: '%s', want '%s'", i, got, cases[i].want);
        }
        free(got);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_piece),
        cmocka_unit_test(test_json_escape_into),
        cmocka_unit_test(test_json_escape),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
