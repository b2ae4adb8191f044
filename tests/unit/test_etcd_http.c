/* test_etcd_http.c: the pure helpers of the etcd client and of [watch]:
 * base64 both ways, a prefix's range end, the gateway's int64 strings,
 * and a watched lock's resource. Tables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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
        cmocka_unit_test(test_prefix_end),
        cmocka_unit_test(test_int),
        cmocka_unit_test(test_watch_resource),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
