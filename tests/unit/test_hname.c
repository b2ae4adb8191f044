/* test_hname.c: which header names a server may read as the same name:
 * case, '_' or any other punctuation for '-', nothing else. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../policies/hname.h"

struct hname_case {
    const char *a;
    const char *b;
    bool same;
    bool variant;
};

static const struct hname_case cases[] = {
    {"Transfer-Encoding", "transfer-encoding", true, false},
    {"TRANSFER-ENCODING", "Transfer-Encoding", true, false},
    {"Transfer_Encoding", "Transfer-Encoding", true, true},
    {"transfer_encoding", "Transfer-Encoding", true, true},
    {"Transfer.Encoding", "Transfer-Encoding", true, true},
    {"Transfer~Encoding", "Transfer-Encoding", true, true},
    {"Transfer!Encoding", "Transfer-Encoding", true, true},
    {"Content_Length", "Content-Length", true, true},
    {"Fencing_Token", "Fencing-Token", true, true},
    {"FENCING_TOKEN", "Fencing-Token", true, true},
    {"fencing-token", "Fencing-Token", true, false},
    {"Host", "host", true, false},
    {"HOST", "Host", true, false},
    /* A letter or digit is never a separator, nor the other way round. */
    {"TransferXEncoding", "Transfer-Encoding", false, false},
    {"Transfer-Encodinx", "Transfer-Encoding", false, false},
    {"X-1", "X-a", false, false},
    {"Fencing-Token1", "Fencing-Token", false, false},
    /* Lengths must agree: nothing is dropped or added. */
    {"Transfer-Encodin", "Transfer-Encoding", false, false},
    {"Transfer-Encoding-", "Transfer-Encoding", false, false},
    {"Transfer--Encoding", "Transfer-Encoding", false, false},
    {"TransferEncoding", "Transfer-Encoding", false, false},
    {"Transfer-%45ncoding", "Transfer-Encoding", false, false},
    {"", "Host", false, false},
    {"", "", true, false},
    /* Only ASCII letters fold; every other byte is a separator (the
     * parser lets only token characters into a name). */
    {"Hos\xd4", "Host", false, false},
    {"X\xc3", "X-", true, true},
};

static void
test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct hname_case *c = &cases[i];
        size_t n = strlen(c->a);

        if (hname_same(c->a, n, c->b) != c->same) {
            fail_msg("hname_same(\"%s\", \"%s\") != %d", c->a, c->b, c->same);
        }
        if (hname_variant(c->a, n, c->b) != c->variant) {
            fail_msg("hname_variant(\"%s\", \"%s\") != %d", c->a, c->b,
                     c->variant);
        }
    }
}

/* The length given is the name: bytes after it are not read. */
static void
test_length_bounds(void **state)
{
    (void)state;
    assert_true(hname_same("Host: x", 4, "Host"));
    assert_false(hname_same("Host", 3, "Host"));
    assert_true(hname_variant("Content_Length and more", 14, "Content-Length"));
}

static void
test_byte(void **state)
{
    (void)state;
    assert_true(hname_byte_same('-', '_'));
    assert_true(hname_byte_same('.', '~'));
    assert_true(hname_byte_same('a', 'A'));
    assert_true(hname_byte_same('7', '7'));
    assert_false(hname_byte_same('a', '-'));
    assert_false(hname_byte_same('-', '0'));
    assert_false(hname_byte_same('a', 'b'));
    assert_true(hname_byte_same('[', '{')); /* separators, not a case pair */
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_length_bounds),
        cmocka_unit_test(test_byte),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
