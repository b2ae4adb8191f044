/* test_etcd_http.c: the pure helpers of the etcd client and of [watch]:
 * base64 both ways, a prefix's range end, the gateway's int64 strings,
 * and a watched lock's resource. Tables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../proxy/clients/etcd_http.h"
#include "../../proxy/locks/watch.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static void
test_b64_round_trip(void **state)
{
    static const char *const cases[] = {
        "", "a", "ab", "abc", "abcd", "tidemark/locks/documents/a//1f"};
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        unsigned char out[64];
        json_t *s = etcd_b64(cases[i], strlen(cases[i]));
        int n = etcd_unb64(s, out, sizeof(out));

        assert_non_null(s);
        assert_int_equal(n, (int)strlen(cases[i]));
        assert_memory_equal(out, cases[i], (size_t)n);
        json_decref(s);
    }
}

static void
test_unb64_refuses(void **state)
{
    static const char *const bad[] = {"abc", "a===", "!!!!"};
    unsigned char out[8];
    json_t *n = json_integer(3);

    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        json_t *s = json_string(bad[i]);

        assert_int_equal(etcd_unb64(s, out, sizeof(out)), -1);
        json_decref(s);
    }
    assert_int_equal(etcd_unb64(n, out, sizeof(out)), -1);
    json_decref(n);
    /* longer than the room */
    n = json_string("YWJjZGVmZ2hpamts");
    assert_int_equal(etcd_unb64(n, out, 4), -1);
    json_decref(n);
}

/* kv's "value" as the raw bytes given, base64. */
static json_t *
kv_of(const char *raw, size_t len)
{
    json_t *kv = json_object();

    json_object_set_new(kv, "value", etcd_b64(raw, len));
    return kv;
}

/* The etcd store's marks: 19 zero-padded digits, written and read back;
 * any other value from etcd (shorter, longer, not digits, past
 * INT64_MAX, not base64, absent) is refused, at every length class up
 * to values far past the 24 bytes it is decoded into. */
static void
test_mark_value(void **state)
{
    static const int64_t marks[] = {0, 1, 42, 1000000007, INT64_MAX};
    static const struct {
        const char *raw;
        size_t len;
    } bad[] = {
        {"", 0},
        {"1", 1},
        {"000000000000000001", 18},
        {"00000000000000000001", 20},
        {"000000000000000000x", 19},   /* not a digit */
        {" 00000000000000001", 19},    /* a space */
        {"-000000000000000001", 19},   /* a sign */
        {"9223372036854775808", 19},   /* INT64_MAX + 1 */
        {"9999999999999999999", 19},   /* the largest 19 digits */
        {"0000000000000000001\0", 20}, /* a NUL after 19 digits */
    };
    /* Far past the 24 bytes a value is decoded into. */
    static const size_t big_lens[] = {25, 100, 1000, 4096};
    char big[4096];
    int64_t got;
    json_t *kv;

    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(marks); i++) {
        kv = json_object();
        json_object_set_new(kv, "value", etcd_mark_json(marks[i]));
        got = -1;
        assert_true(etcd_mark_read(kv, &got));
        assert_int_equal(got, marks[i]);
        json_decref(kv);
    }
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        kv = kv_of(bad[i].raw, bad[i].len);
        assert_false(etcd_mark_read(kv, &got));
        json_decref(kv);
    }
    memset(big, '1', sizeof(big));
    for (size_t i = 0; i < ARRAY_LEN(big_lens); i++) {
        kv = kv_of(big, big_lens[i]);
        assert_false(etcd_mark_read(kv, &got));
        json_decref(kv);
    }
    /* Not base64, not a string, absent. */
    kv = json_pack("{s:s}", "value", "MDAwMDAwMDAwMDAwMDAwMDAwMQ=!");
    assert_false(etcd_mark_read(kv, &got));
    json_decref(kv);
    kv = json_pack("{s:i}", "value", 5);
    assert_false(etcd_mark_read(kv, &got));
    json_decref(kv);
    kv = json_object();
    assert_false(etcd_mark_read(kv, &got));
    json_decref(kv);
}

/* A key is compared at any length: a lock key under a long prefix and
 * a long name (1,100 bytes here) is still its own (it read as another's
 * when decoded into a fixed 1,088 bytes). */
static void
test_key_is(void **state)
{
    static const size_t lens[] = {0, 1, 2, 3, 1087, 1088, 1089, 1100, 5000};
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(lens); i++) {
        size_t n = lens[i];
        char *k = malloc(n + 1);
        json_t *s;

        assert_non_null(k);
        memset(k, 'k', n);
        s = etcd_b64(k, n);
        assert_non_null(s);
        assert_true(etcd_key_is(s, k, n));
        if (n > 0) {
            assert_false(etcd_key_is(s, k, n - 1)); /* shorter */
            k[n - 1] = 'x';
            assert_false(etcd_key_is(s, k, n)); /* another last byte */
        }
        json_decref(s);
        free(k);
    }
}

/* A key is the prefix, the whole name and the suffix, at any length: a
 * mark key cut at 1,024 bytes of name gave two long names one mark. */
static void
test_key_join(void **state)
{
    static const size_t lens[] = {0, 1, 1023, 1024, 1025, 3000};
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(lens); i++) {
        size_t n = lens[i], klen = 0, back = 0;
        char *name = malloc(n + 1);
        char *k;
        json_t *s;
        unsigned char *d;

        assert_non_null(name);
        memset(name, 'n', n);
        k = etcd_key_join("tidemark/marks/", 15, name, n, "//", 2, &klen);
        assert_non_null(k);
        assert_int_equal(klen, 15 + n + 2);
        assert_memory_equal(k, "tidemark/marks/", 15);
        assert_memory_equal(k + 15, name, n);
        assert_string_equal(k + 15 + n, "//");
        s = etcd_b64(k, klen);
        d = etcd_unb64_dup(s, &back);
        assert_non_null(d);
        assert_int_equal(back, klen);
        assert_memory_equal(d, k, klen);
        if (n > 0) { /* the last byte of the name counts */
            char *other;

            name[n - 1] = 'm';
            other =
                etcd_key_join("tidemark/marks/", 15, name, n, "//", 2, &klen);
            assert_non_null(other);
            assert_false(etcd_key_is(s, other, klen));
            free(other);
        }
        free(d);
        json_decref(s);
        free(k);
        free(name);
    }
}

/* A lease's TTL is read within etcd's own maximum: a hostile answer of
 * INT64_MAX seconds overflowed ttl * 1000 in the lock backend. */
static void
test_ttl(void **state)
{
    static const struct {
        const char *json;
        bool ok;
        int64_t want;
    } cases[] = {
        {"{\"TTL\":\"60\"}", true, 60},
        {"{\"TTL\":\"-1\"}", true, -1},
        {"{}", true, 0},
        {"{\"TTL\":\"9000000000\"}", true, 9000000000},
        {"{\"TTL\":\"9000000001\"}", false, 0},
        {"{\"TTL\":\"9223372036854775807\"}", false, 0},
        {"{\"TTL\":9223372036854775807}", false, 0},
        {"{\"TTL\":\"-9000000001\"}", false, 0},
    };
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        json_t *o = json_loads(cases[i].json, 0, NULL);
        int64_t v = 7;

        assert_non_null(o);
        assert_int_equal(etcd_ttl(o, "TTL", &v), cases[i].ok);
        if (cases[i].ok) {
            assert_int_equal(v, cases[i].want);
        }
        json_decref(o);
    }
}

/* A revision has one after it: INT64_MAX, a peer's, overflowed the
 * watch's next revision (mod + 1). */
static void
test_rev(void **state)
{
    json_t *o = json_loads("{\"a\":\"9223372036854775806\","
                           "\"b\":\"9223372036854775807\",\"c\":\"x\"}",
                           0, NULL);
    int64_t v = 0;

    (void)state;
    assert_non_null(o);
    assert_true(etcd_rev(o, "a", &v));
    assert_true(v == INT64_MAX - 1);
    assert_false(etcd_rev(o, "b", &v));
    assert_false(etcd_rev(o, "c", &v));
    assert_true(etcd_rev(o, "absent", &v));
    assert_int_equal(v, 0);
    json_decref(o);
}

static void
test_prefix_end(void **state)
{
    static const struct {
        const char *prefix;
        size_t len;
        const char *want; /* base64 */
    } cases[] = {
        {"a/", 2, "YTA="},        /* "a0" */
        {"l/x//", 5, "bC94LzA="}, /* "l/x/0" */
        {"a\xff", 2, "Yg=="},     /* "b" */
        {"\xff\xff", 2, "AA=="},  /* to the end of the keys */
    };

    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        json_t *s = etcd_prefix_end(cases[i].prefix, cases[i].len);

        assert_non_null(s);
        assert_string_equal(json_string_value(s), cases[i].want);
        json_decref(s);
    }
    assert_null(etcd_prefix_end("", 0));
}

static void
test_int(void **state)
{
    json_t *o = json_pack("{s:s,s:s,s:i,s:s,s:s,s:s,s:s}", "a", "42", "b", "-1",
                          "c", 7, "d", "9223372036854775807", "e",
                          "9223372036854775808", "f", "4x", "g", "");
    int64_t v = -5;

    (void)state;
    assert_true(etcd_int(o, "a", &v));
    assert_int_equal(v, 42);
    assert_true(etcd_int(o, "b", &v));
    assert_int_equal(v, -1);
    assert_true(etcd_int(o, "c", &v));
    assert_int_equal(v, 7);
    assert_true(etcd_int(o, "d", &v));
    assert_true(v == INT64_MAX);
    assert_true(etcd_int(o, "missing", &v)); /* proto3: zero left out */
    assert_int_equal(v, 0);
    assert_false(etcd_int(o, "e", &v));
    assert_false(etcd_int(o, "f", &v));
    assert_false(etcd_int(o, "g", &v));
    json_decref(o);
}

/* Signs, spaces, a NUL inside, and the lengths around 19 digits: only
 * an optional '-' and 1 to 19 digits up to INT64_MAX are a number. */
static void
test_int_odd_strings(void **state)
{
    static const struct {
        const char *s;
        size_t len;
        bool ok;
        int64_t want;
    } cases[] = {
        {"0", 1, true, 0},
        {"-0", 2, true, 0},
        {"5", 1, true, 5},
        {"-9223372036854775807", 20, true, -INT64_MAX},
        {"0000000000000000042", 19, true, 42},
        {"-", 1, false, 0},
        {"--1", 3, false, 0},
        {"+1", 2, false, 0},
        {" 1", 2, false, 0},
        {"1 ", 2, false, 0},
        {"4\0002", 3, false, 0},
        {"00000000000000000042", 20, false, 0},
        {"-9223372036854775808", 20, false, 0},
        {"\xff", 1, false, 0},
    };

    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        json_t *o = json_object();
        int64_t v = 77;

        assert_int_equal(
            json_object_set_new(o, "n",
                                json_stringn_nocheck(cases[i].s, cases[i].len)),
            0);
        assert_int_equal(etcd_int(o, "n", &v), cases[i].ok);
        assert_true(v == (cases[i].ok ? cases[i].want : 77));
        json_decref(o);
    }
}

static void
test_watch_resource(void **state)
{
    static const struct {
        const char *tmpl;
        const char *name;
        const char *want; /* NULL: no resource */
    } cases[] = {
        {"{name}", "docs", "docs"},
        {"documents/{name}", "a", "documents/a"},
        {"documents/{name}", "x/y", "documents/x/y"},
        {"d/{name}/v", "a", "d/a/v"},
        {"documents/{name}", "a%20b", "documents/a b"},
        {"one", "ignored", "one"},
        {"documents/{name}", "..", NULL},
        {"{name}", "", NULL},
        {"documents/{name}", "a\x01", NULL},
        /* a name never climbs out of its place in the template */
        {"documents/{name}", "../x", NULL},
        {"documents/{name}", "a/../../x", NULL},
        {"documents/{name}", "%2E%2E%2Fx", NULL},
        {"d/{name}/v", "..", NULL},
        {"documents/{name}", "x/..", NULL},
        {"documents/{name}", "a/../b", "documents/b"},
    };

    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        char out[600];
        size_t len = 0;
        bool ok = watch_resource(cases[i].tmpl, cases[i].name,
                                 strlen(cases[i].name), out, sizeof(out), &len);

        if (cases[i].want == NULL) {
            assert_false(ok);
            continue;
        }
        assert_true(ok);
        assert_int_equal(len, strlen(cases[i].want));
        assert_memory_equal(out, cases[i].want, len);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_b64_round_trip),
        cmocka_unit_test(test_unb64_refuses),
        cmocka_unit_test(test_mark_value),
        cmocka_unit_test(test_key_is),
        cmocka_unit_test(test_key_join),
        cmocka_unit_test(test_ttl),
        cmocka_unit_test(test_rev),
        cmocka_unit_test(test_prefix_end),
        cmocka_unit_test(test_int),
        cmocka_unit_test(test_int_odd_strings),
        cmocka_unit_test(test_watch_resource),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
