/* test_logesc.c: outside values as log text: every byte, the length
 * classes around the room given, bytes that are not UTF-8, and reading
 * a quoted value back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../policies/logesc.h"

/* s[0..n) escaped in form with room for any value of 300 bytes. */
static const char *
esc(const char *s, size_t n, enum logesc_form form)
{
    static char out[LOGESC_SIZE(300)];
    size_t len = logesc(out, sizeof(out), s, n, form);

    assert_int_equal(len, strlen(out));
    return out;
}

/* What one byte alone must be written as, in LOGESC_WORD. */
static void
want_byte(unsigned c, char *want, size_t cap)
{
    static const char *const named[256] = {
        ['\t'] = "\"\\t\"", ['\n'] = "\"\\n\"",  ['\r'] = "\"\\r\"",
        ['"'] = "\"\\\"\"", ['\\'] = "\"\\\\\"", [' '] = "\" \"",
        ['='] = "\"=\"",
    };

    if (named[c] != NULL) {
        snprintf(want, cap, "%s", named[c]);
    } else if (c < 0x20 || c >= 0x7f) { /* >= 0x80: never UTF-8 alone */
        snprintf(want, cap, "\"\\x%02x\"", c);
    } else {
        snprintf(want, cap, "%c", (char)c);
    }
}

static void
test_every_byte(void **state)
{
    (void)state;
    for (unsigned c = 0; c < 256; c++) {
        char in = (char)c, want[16], back[4];
        const char *got = esc(&in, 1, LOGESC_WORD);
        size_t used, n;

        want_byte(c, want, sizeof(want));
        if (strcmp(got, want) != 0) {
            fail_msg("byte 0x%02x: %s, want %s", c, got, want);
        }
        for (const char *p = got; *p != '\0'; p++) {
            assert_true((unsigned char)*p >= 0x20 && *p != 0x7f);
        }
        if (got[0] == '"') {
            n = logesc_decode(got + 1, strlen(got) - 1, back, &used);
            assert_int_equal(n, 1);
            assert_int_equal((unsigned char)back[0], c);
            assert_int_equal(used, strlen(got) - 2); /* up to the quote */
        }
    }
}

static void
test_forms(void **state)
{
    (void)state;
    assert_string_equal(esc("a=b", 3, LOGESC_WORD), "\"a=b\"");
    assert_string_equal(esc("a=b", 3, LOGESC_VALUE), "a=b");
    assert_string_equal(esc("docs/a", 6, LOGESC_QUOTED), "\"docs/a\"");
    assert_string_equal(esc("", 0, LOGESC_WORD), "\"\"");
    assert_string_equal(esc("", 0, LOGESC_VALUE), "\"\"");
    assert_string_equal(esc("a b", 3, LOGESC_VALUE), "\"a b\"");
    assert_string_equal(
        esc("x\n2026-12-01T00:00:00.000Z error forged", 39, LOGESC_WORD),
        "\"x\\n2026-12-01T00:00:00.000Z error forged\"");
    assert_string_equal(esc("\x1b[31mred", 8, LOGESC_WORD), "\"\\x1b[31mred\"");
    assert_string_equal(esc("a\0b", 3, LOGESC_WORD), "\"a\\x00b\"");
    assert_string_equal(esc("say \"hi\" \\o/", 12, LOGESC_WORD),
                        "\"say \\\"hi\\\" \\\\o/\"");
}

struct utf8_case {
    const char *in;
    size_t len;
    const char *want;
};

#define U(lit, want)                                                           \
    {                                                                          \
        lit, sizeof(lit) - 1, want                                             \
    }

static const struct utf8_case utf8_cases[] = {
    U("caf\xc3\xa9", "caf\xc3\xa9"),           /* well-formed: itself */
    U("\xe2\x82\xac", "\xe2\x82\xac"),         /* the euro sign */
    U("\xf0\x9f\x94\x92", "\xf0\x9f\x94\x92"), /* four bytes */
    U("a\xff", "\"a\\xff\""),                  /* never UTF-8 */
    U("\xc3", "\"\\xc3\""),                    /* cut short */
    U("\xe2\x82x", "\"\\xe2\\x82x\""),         /* cut short, then ASCII */
    U("\xc0\x80", "\"\\xc0\\x80\""),           /* overlong NUL */
    U("\xed\xa0\x80", "\"\\xed\\xa0\\x80\""),  /* a surrogate */
    U("\xf4\x90\x80\x80", "\"\\xf4\\x90\\x80\\x80\""), /* past U+10FFFF */
    U("\x80z", "\"\\x80z\""),                 /* a continuation alone */
    U("\xc2\x85", "\"\\xc2\\x85\""),          /* NEL, a C1 control */
    U("\xc2\x9b", "\"\\xc2\\x9b\""),          /* CSI, a C1 control */
    U("\xc2\xa0", "\xc2\xa0"),                /* no-break space: itself */
    U("\xe2\x80\xa8", "\"\\xe2\\x80\\xa8\""), /* line separator */
    U("\xe2\x80\xa9", "\"\\xe2\\x80\\xa9\""), /* paragraph separator */
};

static void
test_utf8(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(utf8_cases) / sizeof(utf8_cases[0]); i++) {
        const struct utf8_case *c = &utf8_cases[i];
        const char *got = esc(c->in, c->len, LOGESC_WORD);

        if (strcmp(got, c->want) != 0) {
            fail_msg("case %zu: %s, want %s", i, got, c->want);
        }
    }
}

/* Plain letters into 64 bytes of room: up to 63 fit (and the NUL); from
 * 64 on the value is cut to 58, quoted and marked. */
#define ROOM 64

static void
test_length_classes(void **state)
{
    static const struct {
        size_t n;
        size_t want_len;
        const char *tail; /* how the output ends */
    } cases[] = {
        {1, 1, "a"},
        {40, 40, "aaaa"},
        {ROOM - 1, ROOM - 1, "aaa"},
        {ROOM, ROOM - 1, "aa\"..."},
        {300, ROOM - 1, "aa\"..."},
    };
    char in[300], out[ROOM];

    (void)state;
    memset(in, 'a', sizeof(in));
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t len = logesc(out, sizeof(out), in, cases[i].n, LOGESC_WORD);
        size_t tl = strlen(cases[i].tail);

        assert_int_equal(len, cases[i].want_len);
        assert_int_equal(strlen(out), len);
        assert_memory_equal(out + len - tl, cases[i].tail, tl);
        assert_true(cases[i].n < ROOM ||
                    (out[0] == '"' && strspn(out + 1, "a") == ROOM - 6));
    }
}

static void
test_a_cut_never_splits_an_escape(void **state)
{
    char nl[100], out[20], utf[30];

    (void)state;
    memset(nl, '\n', sizeof(nl));
    /* 1 + 7 * 2 + 4 = 19: an eighth \n would leave no room for "... */
    assert_int_equal(logesc(out, sizeof(out), nl, sizeof(nl), LOGESC_WORD), 19);
    assert_string_equal(out, "\"\\n\\n\\n\\n\\n\\n\\n\"...");
    for (size_t i = 0; i < sizeof(utf); i += 3) {
        memcpy(utf + i, "\xe2\x82\xac", 3);
    }
    logesc(out, sizeof(out), utf, sizeof(utf), LOGESC_WORD);
    assert_string_equal(out, "\"\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac"
                             "\xe2\x82\xac\"...");
    /* The least room: 5 bytes and the NUL fit; 6 leave only the mark. */
    assert_int_equal(logesc(out, LOGESC_MIN, "abcde", 5, LOGESC_WORD), 5);
    assert_string_equal(out, "abcde");
    assert_int_equal(logesc(out, LOGESC_MIN, "abcdef", 6, LOGESC_WORD), 5);
    assert_string_equal(out, "\"\"...");
}

static void
test_decode(void **state)
{
    char out[32];
    size_t used, n;

    (void)state;
    n = logesc_decode("a\\x0a\\\"b\" rest", 14, out, &used);
    assert_int_equal(n, 4);
    assert_memory_equal(out, "a\n\"b", 4);
    assert_int_equal(used, 8);
    /* A backslash that starts no escape is itself. */
    n = logesc_decode("\\q\\x4", 5, out, &used);
    assert_int_equal(n, 5);
    assert_memory_equal(out, "\\q\\x4", 5);
    assert_int_equal(used, 5);
    n = logesc_decode("\\t\\r\\n\\\\", 8, out, &used);
    assert_int_equal(n, 4);
    assert_memory_equal(out, "\t\r\n\\", 4);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_byte),
        cmocka_unit_test(test_forms),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_length_classes),
        cmocka_unit_test(test_a_cut_never_splits_an_escape),
        cmocka_unit_test(test_decode),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
