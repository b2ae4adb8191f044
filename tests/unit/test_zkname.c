/* test_zkname.c: lock names as znode names (one spelling each, no '/',
 * never "." or ".."), the lock recipe's holder among children, and the
 * TTL a lock's node holds as its data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../policies/zkname.h"
#include "../../proxy/locks/lock_zookeeper.h"

struct esc_case {
    const char *name;
    size_t len; /* 0: strlen(name) */
    const char *want;
};

static const struct esc_case esc_cases[] = {
    {"documents/a", 0, "documents%2Fa"},
    {"files/x y/z%.bin", 0, "files%2Fx%20y%2Fz%25%2Ebin"},
    {".", 0, "%2E"},
    {"..", 0, "%2E%2E"},
    {"A-z_09", 0, "A-z_09"},
    {"\xc3\xa9t\xc3\xa9", 0, "%C3%A9t%C3%A9"},
    {"a\0b", 3, "a%00b"},
    {"\xff", 0, "%FF"},
    {"", 0, ""},
};

static void
test_escape_round_trip(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(esc_cases) / sizeof(esc_cases[0]); i++) {
        const struct esc_case *c = &esc_cases[i];
        size_t len = c->len ? c->len : strlen(c->name);
        char out[64], back[64];
        size_t n = zkname_escape(c->name, len, out), m = 0;

        assert_true(n <= ZKNAME_MAX(len));
        assert_int_equal(n, strlen(c->want));
        assert_memory_equal(out, c->want, n);
        assert_null(memchr(out, '/', n));
        assert_true(zkname_unescape(out, n, back, &m));
        assert_int_equal(m, len);
        assert_memory_equal(back, c->name, len);
    }
}

/* One name, one spelling: anything zkname_escape would not write. */
static void
test_unescape_refuses(void **state)
{
    static const char *const bad[] = {
        "a%2",      /* cut short */
        "a%",       /* cut short */
        "%2f",      /* lower-case hex */
        "%41",      /* 'A' escaped: written as it is */
        "%5F",      /* '_' escaped */
        "a.b",      /* '.' not escaped */
        "a/b",      /* '/' */
        "a b",      /* space */
        "%G0",      /* not hex */
        "%%20",     /* '%' not followed by hex */
        "\xc3\xa9", /* a byte it escapes */
    };
    char out[16];
    size_t n;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_false(zkname_unescape(bad[i], strlen(bad[i]), out, &n));
    }
    assert_true(zkname_unescape("", 0, out, &n));
    assert_int_equal(n, 0);
}

static void
test_seq(void **state)
{
    (void)state;
    assert_int_equal(zkname_seq("0123-1-lock-0000000042"), 42);
    assert_int_equal(zkname_seq("0000000000"), 0);
    assert_int_equal(zkname_seq("_c_abc-__lock__2147483647"), 2147483647);
    assert_int_equal(zkname_seq("lock-000000004x"), -1);
    assert_int_equal(zkname_seq("000000001"), -1);
    assert_int_equal(zkname_seq(""), -1);
}

static void
test_first(void **state)
{
    char *kids[] = {"s-2-lock-0000000007", "config", "s-1-lock-0000000003",
                    "x__lock__0000000005"};
    char *none[] = {"config", "lock-"};

    (void)state;
    assert_int_equal(zkname_first(kids, 4), 2);
    assert_int_equal(zkname_first(kids, 2), 0);
    assert_int_equal(zkname_first(none, 2), -1);
    assert_int_equal(zkname_first(kids, 0), -1);
}

/* The recipes' names: kazoo's Lock (<uuid hex>__lock__<seq>) and
 * Curator's InterProcessMutex (_c_<uuid>-lock-<seq>): the holder is the
 * lowest sequence number, whatever comes before it. */
static void
test_first_recipes(void **state)
{
    char *kazoo[] = {"9f1c2a4be0d14a5c8f6f1e2d3c4b5a69__lock__0000000012",
                     "0a1c2a4be0d14a5c8f6f1e2d3c4b5a69__lock__0000000010",
                     "ff1c2a4be0d14a5c8f6f1e2d3c4b5a69__lock__0000000011"};
    char *curator[] = {
        "_c_f2b8e6a0-5d7e-4c1a-9f39-1b2c3d4e5f60-lock-0000000004",
        "_c_a2b8e6a0-5d7e-4c1a-9f39-1b2c3d4e5f60-lock-0000000005",
        "_c_02b8e6a0-5d7e-4c1a-9f39-1b2c3d4e5f60-lock-0000000003"};

    (void)state;
    assert_int_equal(zkname_first(kazoo, 3), 1);
    assert_int_equal(zkname_first(curator, 3), 2);
    assert_int_equal(zkname_seq(kazoo[2]), 11);
    assert_int_equal(zkname_seq(curator[0]), 4);
}

struct below_case {
    const char *dir, *path, *want; /* want NULL: not below */
};

static const struct below_case below_cases[] = {
    {"/locks", "/locks/doc1", "doc1"},
    {"/locks", "/locks/doc1/x__lock__0000000001", "doc1"},
    {"/a/b", "/a/b/c", "c"},
    {"/locks", "/locks", NULL},
    {"/locks", "/locks/", NULL},
    {"/locks", "/locksmith/doc1", NULL},
    {"/locks", "/lock/doc1", NULL},
    {"/locks", "/locks//doc1", NULL},
    {"/locks", "/other/locks/doc1", NULL},
};

static void
test_below(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(below_cases) / sizeof(below_cases[0]); i++) {
        const struct below_case *c = &below_cases[i];
        size_t len = 0;
        const char *got = zkname_below(c->dir, c->path, &len);

        if (c->want == NULL) {
            assert_null(got);
            continue;
        }
        assert_non_null(got);
        assert_int_equal(len, strlen(c->want));
        assert_memory_equal(got, c->want, len);
    }
}

/* The create's answer is the peer's: a path that is not exactly one
 * child of the lock's node is no turn (it crashed the acquire when it
 * had no '/'). */
static void
test_turn(void **state)
{
    char *kids[] = {"a-lock-0000000007", "b-lock-0000000003", "nolock"};
    char *none[] = {"nolock"};
    int first = 0;

    (void)state;
    assert_int_equal(
        zkname_turn("/l/d", "/l/d/b-lock-0000000003", kids, 3, &first),
        ZKNAME_HELD);
    assert_int_equal(first, 1);
    assert_int_equal(
        zkname_turn("/l/d", "/l/d/a-lock-0000000007", kids, 3, &first),
        ZKNAME_BEHIND);
    assert_int_equal(first, 1);
    assert_int_equal(zkname_turn("/l/d", "/l/d/nolock", none, 1, &first),
                     ZKNAME_NO_HOLDER);
    assert_int_equal(first, -1);
    static const char *const foreign[] = {"b-lock-0000000003",
                                          "",
                                          "/l/d",
                                          "/l/d/",
                                          "/l/e/b-lock-0000000003",
                                          "/l/d/b-lock-0000000003/x",
                                          "/l/db-lock-0000000003"};
    for (size_t i = 0; i < sizeof(foreign) / sizeof(foreign[0]); i++) {
        assert_int_equal(zkname_turn("/l/d", foreign[i], kids, 3, &first),
                         ZKNAME_FOREIGN);
        assert_int_equal(first, -1);
    }
}

/* A lease's time left from the peer's mtime: 0 to ttl, whatever mtime
 * is (INT64_MIN overflowed now - mtime). */
static void
test_left(void **state)
{
    (void)state;
    assert_int_equal(zkname_left(5000, 1000000, 1002000), 3000);
    assert_int_equal(zkname_left(5000, 1000000, 1000000), 5000);
    assert_int_equal(zkname_left(5000, 1000000, 1005000), 0);
    assert_int_equal(zkname_left(5000, 1000000, 1009000), 0);
    assert_int_equal(zkname_left(5000, 2000000, 1000000), 5000);
    assert_int_equal(zkname_left(5000, INT64_MIN, 1000000), 0);
    assert_int_equal(zkname_left(5000, INT64_MAX, 1000000), 5000);
    assert_int_equal(zkname_left(0, 1000000, 1000000), 0);
}

/* A node's data is ZooKeeper's answer: up to 1 MB of any bytes. Only
 * 1 to 18 digits are a TTL; everything else reads -1. */
static void
test_data_ttl(void **state)
{
    static const struct {
        const char *d;
        int n;
        int64_t want;
    } cases[] = {
        {"0", 1, 0},
        {"7", 1, 7},
        {"30000", 5, 30000},
        {"999999999999999999", 18, 999999999999999999},
        {"1000000000000000000", 19, -1},
        {"", 0, -1},
        {"5", -1, -1},
        {"-1", 2, -1},
        {"+1", 2, -1},
        {" 1", 2, -1},
        {"1\n", 2, -1},
        {"3\0003", 3, -1},
        {"\xff", 1, -1},
    };
    char big[300];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_true(zkl_data_dec(cases[i].d, cases[i].n) == cases[i].want);
    }
    assert_true(zkl_data_dec(NULL, 5) == -1);
    memset(big, '1', sizeof(big));
    assert_true(zkl_data_dec(big, (int)sizeof(big)) == -1);
    assert_true(zkl_data_dec(big, 18) == 111111111111111111);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape_round_trip),
        cmocka_unit_test(test_unescape_refuses),
        cmocka_unit_test(test_seq),
        cmocka_unit_test(test_first),
        cmocka_unit_test(test_first_recipes),
        cmocka_unit_test(test_below),
        cmocka_unit_test(test_turn),
        cmocka_unit_test(test_left),
        cmocka_unit_test(test_data_ttl),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
