/* test_route.c: path templates (compile, match), resource templates
 * (compile, expand) and method bits, each against a table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../policies/route.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

struct compile_case {
    const char *src;
    const char *err; /* NULL: compiles */
};

static const struct compile_case compile_cases[] = {
    {"/v1/documents/{doc}", NULL},
    {"/files/{key*}", NULL},
    {"/", NULL},
    {"/a/", NULL},
    {"/b/{x}/c/{y_2}", NULL},
    {"/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}", NULL},
    {"", "a path template must start with '/'"},
    {"v1/x", "a path template must start with '/'"},
    {"/a/{b*}/c", "{b*} must be the last segment"},
    {"/a/{b}/{b}", "capture {b} appears twice"},
    {"/a/{b}/{b*}", "capture {b} appears twice"},
    {"/a/x{b}", "a capture must be a whole segment: {name}"},
    {"/a/{b}x", "a capture must be a whole segment: {name}"},
    {"/a/{b", "a capture must be a whole segment: {name}"},
    {"/a}", "a capture must be a whole segment: {name}"},
    {"/a/{}", "empty capture name"},
    {"/a/{*}", "empty capture name"},
    {"/a/{b-c}", "capture names are letters, digits and '_': {b-c}"},
    {"/a?x=1", "a path template has no query or fragment"},
    {"/a#top", "a path template has no query or fragment"},
    {"/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/{i}", "more than 8 captures"},
};

static void
test_compile(void **state)
{
    for (size_t i = 0; i < ARRAY_LEN(compile_cases); i++) {
        const struct compile_case *c = &compile_cases[i];
        struct tm_tmpl t;
        char err[128] = "";
        bool ok = tmpl_compile(&t, c->src, err, sizeof(err));

        if (ok != (c->err == NULL)) {
            fail_msg("tmpl_compile(\"%s\"): %s (%s)", c->src,
                     ok ? "compiled" : "refused", err);
        }
        if (!ok) {
            assert_string_equal(err, c->err);
            /* A refused template holds nothing to free. */
            assert_null(t.segs);
            assert_int_equal(t.nnames, 0);
        }
        tmpl_free(&t);
    }
}

struct match_case {
    const char *tmpl;
    const char *path;
    bool match;
    const char *caps[3]; /* by capture index */
};

static const struct match_case match_cases[] = {
    {"/v1/documents/{doc}", "/v1/documents/42", true, {"42"}},
    {"/v1/documents/{doc}", "/v1/documents/a%2Fb", true, {"a%2Fb"}},
    {"/v1/documents/{doc}", "/v1/documents/42/", false, {NULL}},
    {"/v1/documents/{doc}", "/v1/documents/", false, {NULL}},
    {"/v1/documents/{doc}", "/v1/documents", false, {NULL}},
    {"/v1/documents/{doc}", "/v1/documents/42/x", false, {NULL}},
    {"/v1/documents/{doc}", "/v1/Documents/42", false, {NULL}},
    {"/v1/documents/{doc}", "v1/documents/42", false, {NULL}},
    {"/v1/documents/{doc}", "", false, {NULL}},
    {"/v1/documents/{doc}", "/v1/documents//42", false, {NULL}},
    {"/files/{key*}", "/files/a", true, {"a"}},
    {"/files/{key*}", "/files/a/b/c", true, {"a/b/c"}},
    {"/files/{key*}", "/files/a/", true, {"a/"}},
    {"/files/{key*}", "/files//", true, {"/"}},
    {"/files/{key*}", "/files/", false, {NULL}},
    {"/files/{key*}", "/files", false, {NULL}},
    {"/files/{key*}", "/filesx/a", false, {NULL}},
    {"/{all*}", "/x/y", true, {"x/y"}},
    {"/{all*}", "/", false, {NULL}},
    {"/", "/", true, {NULL}},
    {"/", "/a", false, {NULL}},
    {"/a/", "/a/", true, {NULL}},
    {"/a/", "/a", false, {NULL}},
    {"/a", "/a/", false, {NULL}},
    {"/a", "/a", true, {NULL}},
    {"/a", "/ab", false, {NULL}},
    {"/ab", "/a", false, {NULL}},
    {"/b/{x}/c/{y}", "/b/1/c/2", true, {"1", "2"}},
    {"/b/{x}/c/{y}", "/b/1/d/2", false, {NULL}},
    {"/b/{x}/c/{y}", "/b/1/c", false, {NULL}},
    {"/b/{x}/{rest*}", "/b/1/2/3", true, {"1", "2/3"}},
    {"/a//{x}", "/a//1", true, {"1"}},
    {"/a/{x}", "/a//1", false, {NULL}},
};

static void
test_match(void **state)
{
    for (size_t i = 0; i < ARRAY_LEN(match_cases); i++) {
        const struct match_case *c = &match_cases[i];
        struct tm_slice caps[TM_MAX_CAPTURES];
        struct tm_tmpl t;
        char err[128];
        bool got;

        assert_true(tmpl_compile(&t, c->tmpl, err, sizeof(err)));
        got = tmpl_match(&t, c->path, strlen(c->path), caps);
        if (got != c->match) {
            fail_msg("\"%s\" against \"%s\": %s", c->path, c->tmpl,
                     got ? "matched" : "did not match");
        }
        for (size_t j = 0; got && j < TM_MAX_CAPTURES; j++) {
            const char *want = j < ARRAY_LEN(c->caps) ? c->caps[j] : NULL;

            if (want == NULL) {
                assert_null(caps[j].p);
            } else if (!slice_eq(caps[j], want)) {
                fail_msg("\"%s\" against \"%s\": capture %zu is \"%.*s\", "
                         "want \"%s\"",
                         c->path, c->tmpl, j, (int)caps[j].len, caps[j].p,
                         want);
            }
        }
        tmpl_free(&t);
    }
}

/* The path is a slice into a request buffer: nothing past len is read. */
static void
test_match_slice(void **state)
{
    const char buf[] = "/v1/documents/42?x=1";
    struct tm_slice caps[TM_MAX_CAPTURES];
    struct tm_tmpl t;
    char err[128];

    assert_true(tmpl_compile(&t, "/v1/documents/{doc}", err, sizeof(err)));
    assert_true(tmpl_match(&t, buf, 16, caps));
    assert_true(slice_eq(caps[0], "42"));
    assert_true(tmpl_match(&t, buf, 15, caps));
    assert_true(slice_eq(caps[0], "4"));
    tmpl_free(&t);
}

struct resource_case {
    const char *tmpl;
    const char *res;
    const char *path;
    const char *want; /* expanded name, or the compile error */
    bool ok;
};

static const struct resource_case resource_cases[] = {
    {"/v1/documents/{doc}", "documents/{doc}", "/v1/documents/42",
     "documents/42", true},
    {"/b/{x}/c/{y}", "{y}-{x}", "/b/1/c/2", "2-1", true},
    {"/b/{x}/c/{y}", "{x}{x}", "/b/ab/c/2", "abab", true},
    {"/files/{key*}", "files/{key}", "/files/a/b", "files/a/b", true},
    {"/files/{key*}", "files/{key*}", "/files/a/b", "files/a/b", true},
    {"/v1/x/{doc}", "all-x", "/v1/x/1", "all-x", true},
    {"/v1/x/{doc}", "", NULL, "empty resource template", false},
    {"/v1/x/{doc}", "x/{nope}", NULL, "{nope} is not a capture of the path",
     false},
    {"/v1/x", "x/{doc}", NULL, "{doc} is not a capture of the path", false},
    {"/v1/x/{doc}", "x/{doc", NULL, "unbalanced '{'", false},
    {"/v1/x/{doc}", "x/{{doc}}", NULL, "unbalanced '{'", false},
    {"/v1/x/{doc}", "x/doc}", NULL, "unbalanced '}'", false},
    {"/v1/x/{doc}", "x/{}", NULL, "{} is not a capture of the path", false},
};

static void
test_resource(void **state)
{
    for (size_t i = 0; i < ARRAY_LEN(resource_cases); i++) {
        const struct resource_case *c = &resource_cases[i];
        struct tm_slice caps[TM_MAX_CAPTURES];
        char out[TM_RESOURCE_MAX];
        struct tm_rtmpl r;
        struct tm_tmpl t;
        char err[128] = "";
        bool ok;

        assert_true(tmpl_compile(&t, c->tmpl, err, sizeof(err)));
        ok = rtmpl_compile(&r, c->res, &t, err, sizeof(err));
        if (ok != c->ok) {
            fail_msg("rtmpl_compile(\"%s\") against \"%s\": %s (%s)", c->res,
                     c->tmpl, ok ? "compiled" : "refused", err);
        }
        if (!ok) {
            assert_string_equal(err, c->want);
            assert_null(r.segs);
        } else {
            assert_true(tmpl_match(&t, c->path, strlen(c->path), caps));
            assert_int_equal(rtmpl_expand(&r, caps, out, sizeof(out)),
                             strlen(c->want));
            assert_string_equal(out, c->want);
        }
        rtmpl_free(&r);
        tmpl_free(&t);
    }
}

/* A name that does not fit, NUL included, is refused, never cut. */
static void
test_expand_bounds(void **state)
{
    struct tm_slice caps[TM_MAX_CAPTURES];
    struct tm_rtmpl r;
    struct tm_tmpl t;
    char out[32];
    char err[128];

    assert_true(tmpl_compile(&t, "/d/{doc}", err, sizeof(err)));
    assert_true(rtmpl_compile(&r, "documents/{doc}", &t, err, sizeof(err)));
    assert_true(tmpl_match(&t, "/d/42", 5, caps));
    assert_int_equal(rtmpl_expand(&r, caps, out, 13), 12);
    assert_string_equal(out, "documents/42");
    assert_int_equal(rtmpl_expand(&r, caps, out, 12), 0);
    assert_int_equal(rtmpl_expand(&r, caps, out, 10), 0);
    assert_int_equal(rtmpl_expand(&r, caps, out, 0), 0);
    rtmpl_free(&r);
    tmpl_free(&t);
}

struct method_case {
    const char *name;
    unsigned bit;
};

static const struct method_case method_cases[] = {
    {"GET", TM_M_GET},
    {"HEAD", TM_M_HEAD},
    {"POST", TM_M_POST},
    {"PUT", TM_M_PUT},
    {"PATCH", TM_M_PATCH},
    {"DELETE", TM_M_DELETE},
    {"OPTIONS", TM_M_OPTIONS},
    {"put", 0},
    {"Put", 0},
    {"PUTS", 0},
    {"PU", 0},
    {"", 0},
    {"CONNECT", 0},
    {"TRACE", 0},
};

static void
test_method_bit(void **state)
{
    for (size_t i = 0; i < ARRAY_LEN(method_cases); i++) {
        const struct method_case *c = &method_cases[i];

        if (method_bit(c->name, strlen(c->name)) != c->bit) {
            fail_msg("method_bit(\"%s\") = %u, want %u", c->name,
                     method_bit(c->name, strlen(c->name)), c->bit);
        }
    }
    /* A slice: "PUT" out of "PUTX". */
    assert_int_equal(method_bit("PUTX", 3), TM_M_PUT);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compile),       cmocka_unit_test(test_match),
        cmocka_unit_test(test_match_slice),   cmocka_unit_test(test_resource),
        cmocka_unit_test(test_expand_bounds), cmocka_unit_test(test_method_bit),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
