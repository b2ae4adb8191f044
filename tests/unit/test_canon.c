/* test_canon.c: canonical paths and names. Tables for each rule and each
 * refusal, and a property: random names, written in every legal way,
 * always read as the plain name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../policies/canon.h"
#include "../../policies/route.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

struct canon_case {
    const char *raw;
    const char *want; /* NULL: refused */
};

static const struct canon_case path_cases[] = {
    {"/", "/"},
    {"/a", "/a"},
    {"/a/b", "/a/b"},
    {"/a/", "/a"},
    {"//a//b//", "/a/b"},
    {"/./a/./b/.", "/a/b"},
    {"/a/../b", "/b"},
    {"/a/b/..", "/a"},
    {"/a/b/../..", "/"},
    {"/a/%2e%2E/b", "/b"},
    {"/a/%2e/b", "/a/b"},
    {"/a/.%2e", "/"},
    {"/a/...", "/a/..."},
    {"/a/.b", "/a/.b"},
    {"/%61%62", "/ab"},
    {"/%C3%A9t%c3%a9", "/\xc3\xa9t\xc3\xa9"},
    {"/a%20b", "/a b"},
    {"/a+b", "/a b"},
    {"/a%2Bb", "/a b"},
    {"/a%2bb", "/a b"},
    {"/a;jsessionid=x/b", "/a/b"},
    {"/a;x=1;y=2", "/a"},
    {"/a%3Bx/b", "/a/b"},
    {"/a/..;x/b", "/b"},
    {"/a/;x/b", "/a/b"},
    {"/a%25b", "/a%b"},
    {"/a%2541", "/a%41"},
    {"/a?b", "/a?b"}, /* a query is cut before: '?' here is data */
    {"/a%3Fb", "/a?b"},
    {"/A", "/A"},
    {"/a\\b", "/a\\b"},
    {"/v1/documents/a%20b", "/v1/documents/a b"},
    {"/v1/documents/%61%20b", "/v1/documents/a b"},
    {"/v1/documents/./a%20b", "/v1/documents/a b"},
    {"/v1/documents/x/../a%20b", "/v1/documents/a b"},
    {"/v1/documents//a%20b", "/v1/documents/a b"},
    {"/v1/documents/a%20b/", "/v1/documents/a b"},
    {"/v1/documents/a%20b;x=1", "/v1/documents/a b"},
    /* refused */
    {"", NULL},
    {"a", NULL},
    {"*", NULL},
    {"/..", NULL},
    {"/a/../..", NULL},
    {"/%2e%2e", NULL},
    {"/a/%2e%2e/%2e%2e/b", NULL},
    {"/a%2Fb", NULL},
    {"/a%2fb", NULL},
    {"/a;x%2Fy", NULL}, /* in a dropped parameter too */
    {"/a%", NULL},
    {"/a%4", NULL},
    {"/a%zz", NULL},
    {"/a%u0041", NULL},
    {"/a%00", NULL},
    {"/a%0A", NULL},
    {"/a%1f", NULL},
    {"/a%7F", NULL},
    {"/a%FF", NULL},
    {"/a%C3", NULL},
    {"/a%C3/", NULL},
    {"/a%C0%80", NULL},       /* overlong NUL */
    {"/a%E0%80%AF", NULL},    /* overlong '/' */
    {"/a%ED%A0%80", NULL},    /* a surrogate */
    {"/a%F4%90%80%80", NULL}, /* past U+10FFFF */
    {"/a%80", NULL},
    {"/a\x01", NULL},
    {"/a\xff", NULL},
};

static const struct canon_case name_cases[] = {
    {"a", "a"},
    {"documents/a", "documents/a"},
    {"/documents/a/", "documents/a"},
    {"documents%2Fa", "documents/a"},
    {"documents%2fa%2F", "documents/a"},
    {"documents/a b", "documents/a b"},
    {"documents/a%20b", "documents/a b"},
    {"documents/a+b", "documents/a b"},
    {"documents/x/../a", "documents/a"},
    {"documents%2Fx%2F..%2Fa", "documents/a"},
    {"a;x%2Fb", "a/b"}, /* %2F ends the parameter as '/' does */
    {"files/x y/z%25.bin", "files/x y/z%.bin"},
    {"files/\xc3\xa9t\xc3\xa9", "files/\xc3\xa9t\xc3\xa9"},
    {"x/..", NULL},
    {"", NULL},
    {"/", NULL},
    {"%2F", NULL},
    {".", NULL},
    {";x", NULL},
    {"..", NULL},
    {"a%", NULL},
    {"a%00b", NULL},
    {"a%FFb", NULL},
    {"%C0%80", NULL},
    {"%ED%A0%80", NULL},
    {"bin-\xff\xfe", NULL},
};

static void
run_cases(const struct canon_case *cases, size_t n, bool name)
{
    for (size_t i = 0; i < n; i++) {
        const struct canon_case *c = &cases[i];
        char out[256];
        size_t olen = 99;
        const char *why = NULL;
        bool ok = name ? canon_name(c->raw, strlen(c->raw), out, sizeof(out),
                                    &olen, &why)
                       : canon_path(c->raw, strlen(c->raw), out, sizeof(out),
                                    &olen, &why);

        if (ok != (c->want != NULL)) {
            fail_msg("canon_%s(\"%s\"): %s (%s)", name ? "name" : "path",
                     c->raw, ok ? out : "refused", ok ? "" : why);
        }
        if (ok) {
            if (strcmp(out, c->want) != 0 || olen != strlen(c->want)) {
                fail_msg("canon_%s(\"%s\") = \"%s\", want \"%s\"",
                         name ? "name" : "path", c->raw, out, c->want);
            }
        } else {
            assert_non_null(why);
            assert_int_equal(olen, 0);
        }
    }
}

static void
test_path(void **state)
{
    run_cases(path_cases, ARRAY_LEN(path_cases), false);
}

static void
test_name(void **state)
{
    run_cases(name_cases, ARRAY_LEN(name_cases), true);
}

static void
test_bounds(void **state)
{
    char out[8];
    char big[TM_RESOURCE_MAX + 2];
    char res[TM_RESOURCE_MAX + 1];
    size_t olen;
    const char *why;

    /* The result fits exactly, or not at all. */
    assert_true(canon_name("abcdefg", 7, out, sizeof(out), &olen, &why));
    assert_int_equal(olen, 7);
    assert_false(canon_name("abcdefgh", 8, out, sizeof(out), &olen, &why));
    assert_string_equal(why, "the canonical form is too long");
    /* Encoded, the input may be longer than the result. */
    assert_true(
        canon_name("%61%62%63%64%65%66%67", 21, out, sizeof(out), &olen, &why));
    assert_string_equal(out, "abcdefg");
    assert_false(canon_path("/a", 2, out, 1, &olen, &why));
    /* A resource name fits TM_RESOURCE_MAX bytes. */
    memset(big, 'x', sizeof(big));
    assert_true(
        canon_name(big, TM_RESOURCE_MAX, res, sizeof(res), &olen, &why));
    assert_int_equal(olen, TM_RESOURCE_MAX);
    assert_false(
        canon_name(big, TM_RESOURCE_MAX + 1, res, sizeof(res), &olen, &why));
}

/* ---- the property ----------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t
rnd(uint32_t n)
{
    /* xorshift64*: reproducible without libc's rand(). */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 2685821657736338717ull) >> 32) % n;
}

/* Characters a canonical segment may hold: printable ASCII but '/', ';'
 * and '+', a space, and multibyte UTF-8 of every length. */
static const char *const pieces[] = {
    "a",
    "b",
    "Z",
    "0",
    "9",
    "-",
    ".",
    "_",
    "~",
    "!",
    "$",
    "&",
    "'",
    "(",
    ")",
    "*",
    ",",
    "=",
    ":",
    "@",
    "%",
    "?",
    "#",
    "[",
    "]",
    "\"",
    "<",
    ">",
    "\\",
    "^",
    "`",
    "{",
    "|",
    "}",
    " ",
    "\xc3\xa9",
    "\xc2\x80",
    "\xdf\xbf",
    "\xe2\x82\xac",
    "\xef\xbf\xbf",
    "\xf0\x9f\x94\x92",
    "\xf4\x8f\xbf\xbf",
};

/* A random canonical name: 1 to 5 segments, none "." or "..". */
static size_t
random_name(char *buf, size_t cap)
{
    size_t n = 0;
    uint32_t nseg = 1 + rnd(5);

    for (uint32_t s = 0; s < nseg; s++) {
        size_t start;
        uint32_t len = 1 + rnd(8);

        if (s > 0) {
            buf[n++] = '/';
        }
        start = n;
        for (uint32_t k = 0; k < len; k++) {
            const char *p = pieces[rnd(ARRAY_LEN(pieces))];
            size_t pl = strlen(p);

            assert_true(n + pl < cap);
            memcpy(buf + n, p, pl);
            n += pl;
        }
        if ((n - start == 1 && buf[start] == '.') ||
            (n - start == 2 && buf[start] == '.' && buf[start + 1] == '.')) {
            buf[n++] = 'x';
        }
    }
    buf[n] = '\0';
    return n;
}

struct sink {
    char *p;
    size_t cap;
    size_t len;
};

static void
emit(struct sink *s, const char *p, size_t n)
{
    assert_true(s->len + n < s->cap);
    memcpy(s->p + s->len, p, n);
    s->len += n;
}

static void
emit_escape(struct sink *s, unsigned char b)
{
    const char *hex = rnd(2) ? "0123456789ABCDEF" : "0123456789abcdef";
    char e[3] = {'%', hex[b >> 4], hex[b & 15]};

    /* Mixed case too: "%c3%A9" and "%e2%82%Ac". */
    if (rnd(4) == 0) {
        e[2] = "0123456789abcdef"[b & 15];
    }
    emit(s, e, 3);
}

/* One segment, every byte raw or escaped at random; the bytes a path
 * cannot carry raw ('%', and outside printable ASCII) always escaped, a
 * space sometimes as '+'. */
static void
emit_segment(struct sink *s, const char *seg, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)seg[i];

        if (b == ' ' && rnd(3) == 0) {
            emit(s, "+", 1);
        } else if (b == '%' || b == ' ' || b == '?' || b == '#' || b >= 0x80 ||
                   rnd(2) == 0) {
            emit_escape(s, b);
        } else {
            emit(s, (const char *)&b, 1);
        }
    }
}

/* Noise that reads as nothing at a segment boundary: "./", "//",
 * "x/../", their escaped forms, or nothing. */
static void
emit_noise(struct sink *s, bool name)
{
    static const char *const noise[] = {
        "./",    "%2e/",      "%2E/",         "/",
        "x/../", "x/%2e%2E/", "%C3%A9/./../", "a;b/../",
    };

    while (rnd(4) == 0) {
        const char *n = noise[rnd(ARRAY_LEN(noise))];

        emit(s, n, strlen(n));
    }
    (void)name;
}

/* name (canonical) written in one random legal way. */
static size_t
random_spelling(const char *name, size_t len, bool path, char *buf, size_t cap)
{
    struct sink s = {buf, cap, 0};
    size_t i = 0;

    if (path || rnd(3) == 0) {
        emit(&s, "/", 1);
    }
    emit_noise(&s, !path);
    while (i <= len) {
        const char *slash = memchr(name + i, '/', len - i);
        size_t end = slash != NULL ? (size_t)(slash - name) : len;

        emit_segment(&s, name + i, end - i);
        if (rnd(3) == 0) {
            static const char *const params[] = {";", ";jsessionid=0AF",
                                                 ";a=b;c", ";%20x", "%3Bv"};
            const char *p = params[rnd(ARRAY_LEN(params))];

            emit(&s, p, strlen(p));
        }
        if (slash == NULL) {
            break;
        }
        if (!path && rnd(3) == 0) {
            emit(&s, rnd(2) ? "%2F" : "%2f", 3);
        } else {
            emit(&s, "/", 1);
        }
        emit_noise(&s, !path);
        i = end + 1;
    }
    if (rnd(3) == 0) {
        emit(&s, "/", 1);
        emit_noise(&s, !path);
    }
    buf[s.len] = '\0';
    return s.len;
}

static void
test_property(void **state)
{
    for (int iter = 0; iter < 20000; iter++) {
        char name[256], spelled[4096], out[4096], want[260];
        size_t nlen = random_name(name, sizeof(name));
        bool path = iter % 2 == 0;
        size_t slen =
            random_spelling(name, nlen, path, spelled, sizeof(spelled));
        size_t olen;
        const char *why = NULL;
        bool ok;

        if (path) {
            want[0] = '/';
            memcpy(want + 1, name, nlen + 1);
            ok = canon_path(spelled, slen, out, sizeof(out), &olen, &why);
        } else {
            memcpy(want, name, nlen + 1);
            ok = canon_name(spelled, slen, out, sizeof(out), &olen, &why);
        }
        if (!ok || strcmp(out, want) != 0) {
            fail_msg("iteration %d: \"%s\" read as %s\"%s\", want \"%s\"", iter,
                     spelled, ok ? "" : "refused: ", ok ? out : why, want);
        }
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path),
        cmocka_unit_test(test_name),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_property),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
