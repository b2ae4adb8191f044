/* test_route.c: path templates (compile, match), resource templates
 * (compile, expand) and route methods, each against a table. */
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
    {"/a/", "not in canonical form: it reads as \"/a\" (see Resource "
            "names in doc/guide.md)"},
    {"/a//{b}", "not in canonical form: it reads as \"/a/{b}\" (see "
                "Resource names in doc/guide.md)"},
    {"/a/./{b}", "not in canonical form: it reads as \"/a/{b}\" (see "
                 "Resource names in doc/guide.md)"},
    {"/a%20b", "not in canonical form: it reads as \"/a b\" (see Resource "
               "names in doc/guide.md)"},
    {"/a;v=1", "not in canonical form: it reads as \"/a\" (see Resource "
               "names in doc/guide.md)"},
    {"/a b/{c}", NULL},
    {"/\xc3\xa9t\xc3\xa9/{c}", NULL},
    {"/a/..", "not in canonical form: it reads as \"/\" (see Resource "
              "names in doc/guide.md)"},
    {"/..", "'..' goes above the root"},
    {"/a%2Fb", "an encoded slash (%2F) in a path: backends read it in "
               "different ways"},
    {"/a%zz", "a '%' must be followed by two hex digits"},
    {"/b/{x}/c/{y_2}", NULL},
    {"/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}", NULL},
    {"", "a path template must start with '/'"},
    {"v1/x", "a path template must start with '/'"},
    {"/a/{b*}/c", "{b*} must be the last segment"},
    {"/a/{b}/{b}", "capture {b} appears twice"},
    {"/a/{b}/{b*}", "capture {b} appears twice"},
    {"/a/x{b}", "a capture must be a whole segment: {name}"},
    {"/a/{b}x", "a capture must be a whole segment: {name}"},
    {"/a/{b", "'{b' is missing its closing '}'"},
    {"/a/{b/c}", "'{b' is missing its closing '}'"},
    {"/a}", "'a}' is missing its opening '{'"},
    {"/a/{{b}}", "'{' is missing its closing '}'"},
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
    {"/a", "/a/", false, {NULL}},
    {"/a", "/a", true, {NULL}},
    {"/a", "/ab", false, {NULL}},
    {"/ab", "/a", false, {NULL}},
    {"/b/{x}/c/{y}", "/b/1/c/2", true, {"1", "2"}},
    {"/b/{x}/c/{y}", "/b/1/d/2", false, {NULL}},
    {"/b/{x}/c/{y}", "/b/1/c", false, {NULL}},
    {"/b/{x}/{rest*}", "/b/1/2/3", true, {"1", "2/3"}},
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
    {"/v1/x/{doc}", "x/{doc", NULL, "'{doc' is missing its closing '}'", false},
    {"/v1/x/{doc}", "x/{{doc}}", NULL, "'{' is missing its closing '}'", false},
    {"/v1/x/{doc}", "x/doc}", NULL, "'x/doc}' is missing its opening '{'",
     false},
    {"/v1/x/{doc}", "x/{}", NULL, "{} is not a capture of the path", false},
    {"/v1/x/{doc}", "x/{doc}/", NULL,
     "not in canonical form: it reads as \"x/{doc}\" (see Resource names "
     "in doc/guide.md)",
     false},
    {"/v1/x/{doc}", "/x/{doc}", NULL,
     "not in canonical form: it reads as \"x/{doc}\" (see Resource names "
     "in doc/guide.md)",
     false},
    {"/v1/x/{doc}", "x/./{doc}", NULL,
     "not in canonical form: it reads as \"x/{doc}\" (see Resource names "
     "in doc/guide.md)",
     false},
    {"/v1/x/{doc}", "x+{doc}", NULL,
     "not in canonical form: it reads as \"x {doc}\" (see Resource names "
     "in doc/guide.md)",
     false},
    {"/v1/x/{doc}", "x%{doc}", NULL, "a '%' must be followed by two hex digits",
     false},
    {"/v1/x/{doc}", "x%2F{doc}", NULL,
     "not in canonical form: it reads as \"x/{doc}\" (see Resource names "
     "in doc/guide.md)",
     false},
    {"/v1/x/{doc}", "x y/{doc}", "/v1/x/a b", "x y/a b", true},
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

struct methods_case {
    const char *src;
    const char *err; /* NULL: parses */
    const char *yes[4];
    const char *no[4];
};

static const struct methods_case methods_cases[] = {
    {"PUT DELETE MKCOL MOVE COPY PROPPATCH",
     NULL,
     {"PUT", "MKCOL", "PROPPATCH", "COPY"},
     {"PROPFIND", "GET", "put", "PUTS"}},
    {"*", NULL, {"GET", "PROPFIND", "put", "X"}, {NULL}},
    {" \tLOCK\tUNLOCK  REPORT SEARCH ",
     NULL,
     {"LOCK", "UNLOCK", "REPORT", "SEARCH"},
     {"LOC", "LOCKS", "", "Lock"}},
    {"X-1!#$%&'*+-.^_`|~", NULL, {"X-1!#$%&'*+-.^_`|~"}, {"X-1"}},
    {"", "must name methods, or * for every method", {NULL}, {NULL}},
    {"  ", "must name methods, or * for every method", {NULL}, {NULL}},
    {"* PUT", "* stands alone: it means every method", {NULL}, {NULL}},
    {"PUT *", "* stands alone: it means every method", {NULL}, {NULL}},
    {"PUT put",
     "methods are upper case: 'put' (a backend may run a lower-case method "
     "as the upper-case one)",
     {NULL},
     {NULL}},
    {"Mkcol",
     "methods are upper case: 'Mkcol' (a backend may run a lower-case "
     "method as the upper-case one)",
     {NULL},
     {NULL}},
    {"PU(T", "'PU(T' is not a method token (RFC 9110)", {NULL}, {NULL}},
    {"PUT/", "'PUT/' is not a method token (RFC 9110)", {NULL}, {NULL}},
    {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
     "a method is at most 32 characters: "
     "'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA...'",
     {NULL},
     {NULL}},
    {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
     NULL,
     {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
     {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}},
};

static void
test_methods(void **state)
{
    for (size_t i = 0; i < ARRAY_LEN(methods_cases); i++) {
        const struct methods_case *c = &methods_cases[i];
        struct tm_methods m;
        char err[160] = "";
        bool ok = methods_parse(&m, c->src, err, sizeof(err));

        if (ok != (c->err == NULL)) {
            fail_msg("methods_parse(\"%s\"): %s (%s)", c->src,
                     ok ? "parsed" : "refused", err);
        }
        if (!ok) {
            assert_string_equal(err, c->err);
            assert_null(m.v);
            assert_int_equal(m.n, 0);
            continue;
        }
        for (size_t j = 0; j < 4 && c->yes[j] != NULL; j++) {
            if (!methods_has(&m, c->yes[j], strlen(c->yes[j]))) {
                fail_msg("\"%s\" does not have %s", c->src, c->yes[j]);
            }
        }
        for (size_t j = 0; j < 4 && c->no[j] != NULL; j++) {
            if (methods_has(&m, c->no[j], strlen(c->no[j]))) {
                fail_msg("\"%s\" has %s", c->src, c->no[j]);
            }
        }
        methods_free(&m);
    }
}

/* The request method is a slice: "PUT" out of "PUTX" is PUT. */
static void
test_methods_slice(void **state)
{
    struct tm_methods m;
    char err[128];

    assert_true(methods_parse(&m, "PUT", err, sizeof(err)));
    assert_true(methods_has(&m, "PUTX", 3));
    assert_false(methods_has(&m, "PUTX", 4));
    assert_false(methods_has(&m, "PUTX", 2));
    methods_free(&m);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compile),       cmocka_unit_test(test_match),
        cmocka_unit_test(test_match_slice),   cmocka_unit_test(test_resource),
        cmocka_unit_test(test_expand_bounds), cmocka_unit_test(test_methods),
        cmocka_unit_test(test_methods_slice),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
