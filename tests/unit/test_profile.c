/* test_profile.c: the WebDAV Destination parser, S3's writes named
 * outside the path, the profiles' write methods and tmpl_above, each
 * against a table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../policies/profile.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static struct tm_slice
S(const char *s) {
    struct tm_slice v = {s, s != NULL ? strlen(s) : 0};
    return v;
}

struct dest_case {
    const char *value;
    const char *authority; /* the request's Host */
    const char *want;      /* canonical path; NULL: refused */
    const char *raw;       /* forwarded path-and-query, or the reason */
};

static const struct dest_case dest_cases[] = {
    /* path-absolute and absolute-URI on the request's own host */
    {"/a/b", "h", "/a/b", "/a/b"},
    {"/", "h", "/", "/"},
    {"http://h/a/b", "h", "/a/b", "/a/b"},
    {"HTTP://H/a", "h", "/a", "/a"},
    {"https://h/a", "h", "/a", "/a"},
    {"http://h:80/a", "h", "/a", "/a"},
    {"http://h/a", "h:80", "/a", "/a"},
    {"http://h:/a", "h", "/a", "/a"},
    {"http://h:0080/a", "h:80", "/a", "/a"},
    {"https://h/a", "h:443", "/a", "/a"},
    {"http://h:7070/a", "h:7070", "/a", "/a"},
    {"http://[::1]:8080/a", "[::1]:8080", "/a", "/a"},
    {"http://[::1]/a", "[::1]:80", "/a", "/a"},
    {"http://h", "h", "/", ""},
    {"http://h?x=1", "h", "/", "?x=1"},
    {"http://h/a?x=1", "h", "/a", "/a?x=1"},
    {"/a?x", "h", "/a", "/a?x"},
    /* another host or port */
    {"http://other/a", "h", NULL, "the Destination is on another host"},
    {"http://h:8080/a", "h", NULL, "the Destination is on another host"},
    {"https://h/a", "h:80", NULL, "the Destination is on another host"},
    {"http://h/a", "h:8080", NULL, "the Destination is on another host"},
    {"http://h.example/a", "h", NULL, "the Destination is on another host"},
    {"http://h:99999/a", "h:99999", NULL, "the Destination is on another host"},
    {"http://h/a", "", NULL, "the Destination is on another host"},
    {"http://h/a", "h:x", NULL, "the Destination is on another host"},
    {"http:///a", "h", NULL, "the Destination is on another host"},
    {"http://[::1/a", "[::1]", NULL, "the Destination is on another host"},
    /* malformed */
    {"", "h", NULL, "the Destination is empty"},
    {"/a b", "h", NULL, "the Destination holds a byte a URI cannot"},
    {"/a\tb", "h", NULL, "the Destination holds a byte a URI cannot"},
    {"/a\xc3\xa9", "h", NULL, "the Destination holds a byte a URI cannot"},
    {"/a#f", "h", NULL, "the Destination has a fragment"},
    {"http://h/a#", "h", NULL, "the Destination has a fragment"},
    {"ftp://h/a", "h", NULL, "the Destination's scheme is not http or https"},
    {"c:/a", "h", NULL, "the Destination's scheme is not http or https"},
    {"http:/a", "h", NULL, "the Destination has no authority"},
    {"http:", "h", NULL, "the Destination has no authority"},
    {"http://u@h/a", "h", NULL, "the Destination has userinfo"},
    {"//h/a", "h", NULL, "the Destination is not an absolute URI or path"},
    {"a/b", "h", NULL, "the Destination is not an absolute URI or path"},
    {"?a", "h", NULL, "the Destination is not an absolute URI or path"},
    /* the path is canonicalized (raw is forwarded as written); what
     * canon_path refuses is refused */
    {"/a/%62", "h", "/a/b", "/a/%62"},
    {"http://h/a/./c/../b/", "h", "/a/b", "/a/./c/../b/"},
    {"/a//b;p=1?q", "h", "/a/b", "/a//b;p=1?q"},
    {"/a/%2Fb", "h", NULL, NULL},
    {"/a/%zz", "h", NULL, NULL},
    {"/..", "h", NULL, NULL},
    {"http://h/a/%2fb", "h", NULL, NULL},
};

static void
test_destination(void **state)
{
    for (size_t i = 0; i < ARRAY_LEN(dest_cases); i++) {
        const struct dest_case *c = &dest_cases[i];
        char out[64];
        size_t n = 0;
        struct tm_slice raw = {NULL, 0};
        const char *why = NULL;
        bool ok = dav_destination(S(c->value), S(c->authority), out,
                                  sizeof(out), &n, &raw, &why);

        if (c->want == NULL) {
            if (ok) {
                fail_msg("row %zu (%s): accepted as %s", i, c->value, out);
            }
            if (why == NULL || (c->raw != NULL && strcmp(why, c->raw) != 0)) {
                fail_msg("row %zu (%s): reason '%s', want '%s'", i, c->value,
                         why ? why : "(none)", c->raw);
            }
            continue;
        }
        if (!ok) {
            fail_msg("row %zu (%s): refused: %s", i, c->value, why);
        }
        if (n != strlen(c->want) || strcmp(out, c->want) != 0) {
            fail_msg("row %zu (%s): got '%s', want '%s'", i, c->value, out,
                     c->want);
        }
        if (raw.len != strlen(c->raw) ||
            (raw.len > 0 && memcmp(raw.p, c->raw, raw.len) != 0)) {
            fail_msg("row %zu (%s): raw '%.*s', want '%s'", i, c->value,
                     (int)raw.len, raw.p, c->raw);
        }
    }
}

/* A Destination that does not fit the caller's buffer is refused. */
static void
test_destination_too_long(void **state)
{
    char out[8];
    size_t n;
    struct tm_slice raw;
    const char *why = NULL;

    assert_false(dav_destination(S("/abcdefgh"), S("h"), out, sizeof(out), &n,
                                 &raw, &why));
    assert_string_equal(why, "the Destination is too long");
    assert_true(dav_destination(S("/abcdef"), S("h"), out, sizeof(out), &n,
                                &raw, &why));
    assert_string_equal(out, "/abcdef");
    assert_false(
        dav_destination(S("http://h"), S("h"), out, 1, &n, &raw, &why));
}

static void
test_methods(void **state)
{
    assert_int_equal(dav_method(S("MOVE")), DAV_MOVE);
    assert_int_equal(dav_method(S("COPY")), DAV_COPY);
    assert_int_equal(dav_method(S("move")), DAV_NONE);
    assert_int_equal(dav_method(S("PUT")), DAV_NONE);
    assert_true(profile_write_method(TM_PROFILE_WEBDAV, S("MOVE")));
    assert_true(profile_write_method(TM_PROFILE_WEBDAV, S("COPY")));
    assert_true(profile_write_method(TM_PROFILE_WEBDAV, S("MKCOL")));
    assert_true(profile_write_method(TM_PROFILE_WEBDAV, S("PROPPATCH")));
    assert_true(profile_write_method(TM_PROFILE_WEBDAV, S("LOCK")));
    assert_true(profile_write_method(TM_PROFILE_WEBDAV, S("DELETE")));
    assert_false(profile_write_method(TM_PROFILE_WEBDAV, S("GET")));
    assert_false(profile_write_method(TM_PROFILE_WEBDAV, S("PROPFIND")));
    assert_false(profile_write_method(TM_PROFILE_WEBDAV, S("UNLOCK")));
    assert_true(profile_write_method(TM_PROFILE_S3, S("POST")));
    assert_true(profile_write_method(TM_PROFILE_S3, S("DELETE")));
    assert_false(profile_write_method(TM_PROFILE_S3, S("MOVE")));
    assert_false(profile_write_method(TM_PROFILE_S3, S("GET")));
    assert_false(profile_write_method(TM_PROFILE_HTTP, S("PUT")));
}

struct query_case {
    const char *query;
    bool want;
};

static const struct query_case query_cases[] = {
    {"delete", true},     {"delete=", true},    {"delete=yes", true},
    {"x=1&delete", true}, {"x=1;delete", true}, {"DELETE", true},
    {"Delete=1&x", true}, {"%64elete", true},   {"del%65te=1", true},
    {"del%45te", true},   {"", false},          {"deleted", false},
    {"delet", false},     {"x=delete", false},  {"undelete", false},
    {"delete%", false},   {"%6", false},        {"uploads", false},
    {"&&", false},
};

static void
test_query(void **state)
{
    for (size_t i = 0; i < ARRAY_LEN(query_cases); i++) {
        const struct query_case *c = &query_cases[i];

        if (query_has_param(S(c->query), "delete") != c->want) {
            fail_msg("row %zu (%s): want %d", i, c->query, c->want);
        }
    }
    assert_false(query_has_param(S(NULL), "delete"));
}

struct value_case {
    const char *query;
    size_t count;
    const char *value; /* the first's, decoded; NULL: undecodable */
};

static const struct value_case value_cases[] = {
    {"partNumber=1&uploadId=abc", 1, "abc"},
    {"uploadid=abc", 1, "abc"},
    {"%75ploadId=a%2Bb+c", 1, "a+b c"},
    {"x;UPLOADID=v", 1, "v"},
    {"uploadId", 1, ""},
    {"uploadId=a&uploadId=b", 2, "a"},
    {"uploadId=%zz", 1, NULL},
    {"uploadId=%4", 1, NULL},
    {"uploadIds=a&upload=b", 0, NULL},
    {"", 0, NULL},
};

static void
test_query_value(void **state)
{
    for (size_t i = 0; i < ARRAY_LEN(value_cases); i++) {
        const struct value_case *c = &value_cases[i];
        struct tm_slice v;
        char out[16];
        size_t n = 0, count = query_param(S(c->query), "uploadId", &v);
        bool ok;

        if (count != c->count) {
            fail_msg("%s: %zu, want %zu", c->query, count, c->count);
        }
        if (count == 0) {
            assert_null(v.p);
            continue;
        }
        ok = query_value(v, out, sizeof(out), &n);
        if (c->value == NULL) {
            assert_false(ok);
            continue;
        }
        assert_true(ok);
        assert_int_equal(n, strlen(c->value));
        assert_memory_equal(out, c->value, n);
    }
}

static void
test_form(void **state)
{
    assert_true(media_is_form(S("multipart/form-data")));
    assert_true(media_is_form(S("multipart/form-data; boundary=x")));
    assert_true(media_is_form(S("Multipart/Form-Data;boundary=x")));
    assert_true(media_is_form(S("multipart/form-data \t;b=1")));
    assert_false(media_is_form(S("multipart/form-datax")));
    assert_false(media_is_form(S("multipart/mixed")));
    assert_false(media_is_form(S("application/xml")));
    assert_false(media_is_form(S("")));
}

static void
test_s3(void **state)
{
    assert_non_null(s3_elsewhere(S("POST"), S(""), true, false));
    assert_non_null(s3_elsewhere(S("PUT"), S(""), false, true));
    /* A multi-object delete is read, not refused (s3_batch_delete). */
    assert_null(s3_elsewhere(S("POST"), S("delete"), false, false));
    assert_true(s3_batch_delete(S("POST"), S("delete")));
    assert_true(s3_batch_delete(S("POST"), S("uploads&Delete=")));
    assert_true(s3_batch_delete(S("POST"), S("%64elete")));
    assert_false(s3_batch_delete(S("GET"), S("delete")));
    assert_false(s3_batch_delete(S("PUT"), S("delete")));
    assert_false(s3_batch_delete(S("POST"), S("deletes")));
    assert_null(s3_elsewhere(S("POST"), S("uploads"), false, false));
    assert_null(s3_elsewhere(S("POST"), S("uploadId=7"), false, false));
    assert_null(s3_elsewhere(S("GET"), S("delete"), false, false));
    assert_null(s3_elsewhere(S("PUT"), S("delete"), false, false));
    assert_null(
        s3_elsewhere(S("PUT"), S("partNumber=1&uploadId=2"), false, false));
}

struct above_case {
    const char *tmpl;
    const char *path;
    bool want;
};

static const struct above_case above_cases[] = {
    {"/bucket/{key*}", "/", true},
    {"/bucket/{key*}", "/bucket", true},
    {"/bucket/{key*}", "/bucket/", true},
    {"/bucket/{key*}", "/bucket/a", false},
    {"/bucket/{key*}", "/bucket/a/b", false},
    {"/bucket/{key*}", "/other", false},
    {"/bucket/{key*}", "/bucketx", false},
    {"/{bucket}/{key*}", "/b", true},
    {"/{bucket}/{key*}", "/b/k", false},
    {"/{key*}", "/", true},
    {"/{key*}", "/a", false},
    {"/s3/bucket/{key*}", "/s3", true},
    {"/s3/bucket/{key*}", "/s3/bucket", true},
    {"/s3/bucket/{key*}", "/s3/other", false},
    {"/v1/docs/{doc}", "/v1/docs", true},
    {"/v1/docs/{doc}", "/v1/docs/a", false},
    {"/v1/docs/{doc}", "/v1/docs/a/b", false},
    {"/v1/docs", "/v1", true},
    {"/v1/docs", "/v1/docs", false},
    {"/bucket/{key*}", "", false},
    {"/bucket/{key*}", "bucket", false},
    {"/bucket/{key*}", "//", false},
};

static void
test_above(void **state)
{
    for (size_t i = 0; i < ARRAY_LEN(above_cases); i++) {
        const struct above_case *c = &above_cases[i];
        struct tm_tmpl t;
        char err[128];

        assert_true(tmpl_compile(&t, c->tmpl, err, sizeof(err)));
        if (tmpl_above(&t, c->path, strlen(c->path)) != c->want) {
            fail_msg("row %zu: %s above %s: want %d", i, c->path, c->tmpl,
                     c->want);
        }
        tmpl_free(&t);
    }
}

/* ---- subtree marks ---- */

static void
test_subtree_methods(void **state)
{
    static const struct {
        const char *method, *depth;
        bool want;
    } rows[] = {
        {"DELETE", NULL, true},  {"MOVE", "0", true},
        {"COPY", "0", true},     {"COPY", NULL, true},
        {"LOCK", NULL, true},    {"LOCK", "infinity", true},
        {"LOCK", "1", true},     {"LOCK", "0", false},
        {"LOCK", "00", true},    {"PUT", NULL, false},
        {"MKCOL", NULL, false},  {"PROPPATCH", "infinity", false},
        {"delete", NULL, false}, {"UNLOCK", NULL, false},
    };

    for (size_t i = 0; i < ARRAY_LEN(rows); i++) {
        struct tm_slice depth = {rows[i].depth, 0};

        depth.len = rows[i].depth != NULL ? strlen(rows[i].depth) : 0;
        if (dav_subtree_method(S(rows[i].method), depth) != rows[i].want) {
            fail_msg("row %zu: %s Depth %s: want %d", i, rows[i].method,
                     rows[i].depth != NULL ? rows[i].depth : "-", rows[i].want);
        }
    }
}

static void
test_parents(void **state)
{
    static const struct {
        const char *res;
        const char *parents[4]; /* up to the first segment */
    } rows[] = {
        {"dav/a/b", {"dav/a", "dav", NULL}},
        {"dav/a/b/", {"dav/a", "dav", NULL}},
        {"dav", {NULL}},
        {"a b/c d", {"a b", NULL}},
        {"", {NULL}},
        {"/a", {NULL}},
        {"x//y", {"x", NULL}},
    };

    for (size_t i = 0; i < ARRAY_LEN(rows); i++) {
        const char *res = rows[i].res;
        size_t len = strlen(res), k = 0;

        while ((len = dav_parent_len(res, len)) > 0) {
            assert_non_null(rows[i].parents[k]);
            assert_int_equal(len, strlen(rows[i].parents[k]));
            assert_memory_equal(res, rows[i].parents[k], len);
            k++;
        }
        assert_null(rows[i].parents[k]);
    }
}

static void
test_below_name(void **state)
{
    char out[16];

    assert_int_equal(dav_below_name("dav/a/b", 5, out, sizeof(out)), 11);
    assert_string_equal(out, "dav/a;below");
    /* Room for the name, the suffix and the NUL, or nothing. */
    assert_int_equal(dav_below_name("123456789", 9, out, sizeof(out)), 15);
    assert_int_equal(dav_below_name("1234567890", 10, out, sizeof(out)), 0);
    assert_int_equal(dav_below_name("a", 1, out, 6), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_destination),
        cmocka_unit_test(test_destination_too_long),
        cmocka_unit_test(test_methods),
        cmocka_unit_test(test_query),
        cmocka_unit_test(test_query_value),
        cmocka_unit_test(test_form),
        cmocka_unit_test(test_s3),
        cmocka_unit_test(test_above),
        cmocka_unit_test(test_subtree_methods),
        cmocka_unit_test(test_parents),
        cmocka_unit_test(test_below_name),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
