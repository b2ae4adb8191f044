/* test_s3delete.c: the keys of an S3 multi-object delete body, read as
 * an S3 server reads them, against a table of bodies and of key length
 * classes. (The address each key is fenced at: test_s3name.c.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../policies/s3delete.h"
#include "../../policies/s3name.h" /* S3_KEY_MAX */

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define NS "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\""

/* The keys a parse gave, joined by '|'. */
struct keys {
    char out[8192];
    size_t n;
};

static bool
collect(void *arg, const char *key, size_t len)
{
    struct keys *k = arg;

    assert_int_equal(strlen(key), len);
    if (k->n > 0) {
        k->out[k->n++] = '|';
    }
    assert_true(k->n + len < sizeof(k->out));
    memcpy(k->out + k->n, key, len);
    k->n += len;
    k->out[k->n] = '\0';
    return true;
}

struct body_case {
    const char *body;
    const char *want; /* the keys joined by '|'; NULL: refused */
    const char *why;  /* refused: a part of the reason */
};

static const struct body_case cases[] = {
    /* what boto3 and the aws CLI send */
    {"<Delete " NS "><Object><Key>a.txt</Key></Object>"
     "<Object><Key>dir/b</Key></Object><Quiet>true</Quiet></Delete>",
     "a.txt|dir/b", NULL},
    {"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Delete " NS
     ">\n  <Quiet>false</Quiet>\n  <Object>\n    <Key>k</Key>\n"
     "    <VersionId>3/L4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY</VersionId>\n"
     "  </Object>\n</Delete>\n",
     "k", NULL},
    {"\xef\xbb\xbf<Delete><Object><Key>x</Key><ETag>\"e\"</ETag><Size>3"
     "</Size><LastModifiedTime>2024-01-01T00:00:00Z</LastModifiedTime>"
     "</Object></Delete>",
     "x", NULL},
    {"<Delete><Quiet/><Object ><Key >a</Key ></Object ></Delete >", "a", NULL},
    {"<Delete a='1'  b = \"2\"><Object><Key>a</Key></Object></Delete>", "a",
     NULL},
    /* text: references decoded, spaces kept, UTF-8 */
    {"<Delete><Object><Key>a&amp;b&lt;c&gt;d&quot;e&apos;f</Key></Object>"
     "</Delete>",
     "a&b<c>d\"e'f", NULL},
    {"<Delete><Object><Key>&#x41;&#66;&#1;&#13;&#x1F600;</Key></Object>"
     "</Delete>",
     "AB\x01\r\xf0\x9f\x98\x80", NULL},
    {"<Delete><Object><Key> sp ace%20/../x </Key></Object></Delete>",
     " sp ace%20/../x ", NULL},
    {"<Delete><Object><Key>caf\xc3\xa9\tline\nnext</Key></Object></Delete>",
     "caf\xc3\xa9\tline\nnext", NULL},
    {"<Delete><Object><Key>a</Key></Object><Object><Key>a</Key></Object>"
     "</Delete>",
     "a|a", NULL},
    /* declarations, comments, CDATA, processing instructions */
    {"<?xml version=\"1.0\"?><!DOCTYPE d [<!ENTITY e \"x\">]><Delete>"
     "<Object><Key>&e;</Key></Object></Delete>",
     NULL, "DOCTYPE"},
    {"<Delete><Object><Key><![CDATA[a]]></Key></Object></Delete>", NULL,
     "CDATA"},
    {"<Delete><Object><Key>a<!-- c --></Key></Object></Delete>", NULL,
     "comments"},
    {"<Delete><!-- c --><Object><Key>a</Key></Object></Delete>", NULL,
     "comments"},
    {"<Delete><?pi x?><Object><Key>a</Key></Object></Delete>", NULL,
     "processing"},
    {"<?xml version=\"1.1\"?><Delete><Object><Key>a</Key></Object></Delete>",
     NULL, "version 1.0"},
    {"<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><Delete><Object><Key>"
     "a</Key></Object></Delete>",
     NULL, "UTF-8"},
    {" <?xml version=\"1.0\"?><Delete><Object><Key>a</Key></Object>"
     "</Delete>",
     NULL, "processing"},
    /* references */
    {"<Delete><Object><Key>&e;</Key></Object></Delete>", NULL, "reference"},
    {"<Delete><Object><Key>&#0;</Key></Object></Delete>", NULL, "reference"},
    {"<Delete><Object><Key>&#xD800;</Key></Object></Delete>", NULL,
     "reference"},
    {"<Delete><Object><Key>a&amp</Key></Object></Delete>", NULL, "reference"},
    /* raw bytes an XML reader changes or refuses */
    {"<Delete><Object><Key>a\r\nb</Key></Object></Delete>", NULL, "CR"},
    {"<Delete><Object><Key>a\x01</Key></Object></Delete>", NULL, "control"},
    {"<Delete><Object><Key>\xc3(</Key></Object></Delete>", NULL, "UTF-8"},
    {"<Delete><Object><Key>\xc0\xaf</Key></Object></Delete>", NULL, "UTF-8"},
    /* structure */
    {"", NULL, "Delete"},
    {"<Delete></Delete>", NULL, "no Object"},
    {"<Delete/>", NULL, "Delete"},
    {"<delete><Object><Key>a</Key></Object></delete>", NULL, "Delete"},
    {"<s3:Delete xmlns:s3=\"x\"><s3:Object><s3:Key>a</s3:Key></s3:Object>"
     "</s3:Delete>",
     NULL, "Delete"},
    {"<Delete><Object><Key>a</Key></Object></Delete><Delete/>", NULL,
     "follows"},
    {"<Delete><Object><Key>a</Key></Object>", NULL, "ends"},
    {"<Delete><Object><Key>a</Key>", NULL, "ends"},
    {"<Delete><Object><Key>a", NULL, "ends"},
    {"<Delete><Object><Key>a</Key></Object></Deletex>", NULL, "end tag"},
    {"<Delete><Object><Key>a</Key></Objec></Delete>", NULL, "end tag"},
    {"<Delete><Object></Object></Delete>", NULL, "no Key"},
    {"<Delete><Object/></Delete>", NULL, "Quiet"},
    {"<Delete><Object><Key></Key></Object></Delete>", NULL, "empty"},
    {"<Delete><Object><Key/></Object></Delete>", NULL, "empty one"},
    {"<Delete><Object><Key>a</Key><Key>b</Key></Object></Delete>", NULL,
     "one Key"},
    {"<Delete><Object><Key>a</Key><Other>b</Other></Object></Delete>", NULL,
     "one Key"},
    {"<Delete><Object><Key k=\"v\">a</Key></Object></Delete>", NULL,
     "attributes"},
    {"<Delete><Object x>a</Object></Delete>", NULL, "attributes"},
    {"<Delete><Object><Key>a<b/></Key></Object></Delete>", NULL, "markup"},
    {"<Delete><Object>text<Key>a</Key></Object></Delete>", NULL, "text"},
    {"<Delete>text<Object><Key>a</Key></Object></Delete>", NULL, "text"},
    {"<Delete><Quiet>true</Quiet><Quiet>true</Quiet><Object><Key>a</Key>"
     "</Object></Delete>",
     NULL, "Quiet"},
    {"<Delete x=\"<\"><Object><Key>a</Key></Object></Delete>", NULL,
     "not closed"},
    {"<Delete x=1><Object><Key>a</Key></Object></Delete>", NULL, "quoted"},
};

static void
test_bodies(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        struct keys k = {.n = 0};
        const char *why = NULL;
        size_t n = 0;
        bool ok = s3_delete_parse(cases[i].body, strlen(cases[i].body), collect,
                                  &k, &n, &why);

        if (cases[i].want == NULL) {
            if (ok) {
                fail_msg("case %zu: keys '%s', want refused", i, k.out);
            }
            if (why == NULL || strstr(why, cases[i].why) == NULL) {
                fail_msg("case %zu: why '%s', want '%s'", i,
                         why != NULL ? why : "(none)", cases[i].why);
            }
            continue;
        }
        if (!ok) {
            fail_msg("case %zu: refused: %s", i, why);
        }
        assert_string_equal(k.out, cases[i].want);
    }
}

/* A body of n objects, each key "k<i>". */
static char *
objects(size_t n, size_t *len)
{
    size_t cap = 64 + n * 48, off = 0;
    char *b = malloc(cap);

    assert_non_null(b);
    off += (size_t)snprintf(b + off, cap - off, "<Delete>");
    for (size_t i = 0; i < n; i++) {
        off += (size_t)snprintf(b + off, cap - off,
                                "<Object><Key>k%zu</Key></Object>", i);
    }
    off += (size_t)snprintf(b + off, cap - off, "</Delete>");
    *len = off;
    return b;
}

static void
test_object_count(void **state)
{
    size_t len, n = 0;
    const char *why = NULL;
    char *b = objects(S3_DELETE_MAX_OBJECTS, &len);

    (void)state;
    assert_true(s3_delete_parse(b, len, NULL, NULL, &n, &why));
    assert_int_equal(n, S3_DELETE_MAX_OBJECTS);
    free(b);
    b = objects(S3_DELETE_MAX_OBJECTS + 1, &len);
    assert_false(s3_delete_parse(b, len, NULL, NULL, &n, &why));
    assert_non_null(strstr(why, "more than 1000"));
    free(b);
}

/* A body with one key of the bytes k (klen), spelled as ref says: raw,
 * or each byte as "&#NN;" where it is no plain ASCII. */
static bool
one_key(const char *k, size_t klen, struct keys *got)
{
    char *b = malloc(64 + klen * 8);
    size_t off = 0, n = 0;
    const char *why = NULL;
    bool ok;

    assert_non_null(b);
    off += (size_t)sprintf(b, "<Delete><Object><Key>");
    memcpy(b + off, k, klen);
    off += klen;
    off += (size_t)sprintf(b + off, "</Key></Object></Delete>");
    got->n = 0;
    got->out[0] = '\0';
    ok = s3_delete_parse(b, off, collect, got, &n, &why);
    free(b);
    return ok;
}

/* Key length classes: 1 byte, tens, hundreds, S3's 1024 and 1025, the
 * same with a reference or a multi-byte character at the end. */
static void
test_key_lengths(void **state)
{
    static const size_t lens[] = {1, 17, 255, 256, 1023, 1024, 1025, 4096};
    char raw[4200];
    struct keys got;

    (void)state;
    memset(raw, 'a', sizeof(raw));
    for (size_t i = 0; i < ARRAY_LEN(lens); i++) {
        size_t n = lens[i];
        bool ok = one_key(raw, n, &got);

        assert_int_equal(ok, n <= S3_KEY_MAX);
        if (ok) {
            assert_int_equal(got.n, n);
        }
        /* the last byte spelled as &amp;: the decoded length counts */
        memcpy(raw + n - 1, "&amp;", 5);
        ok = one_key(raw, n + 4, &got);
        assert_int_equal(ok, n <= S3_KEY_MAX);
        if (ok) {
            assert_int_equal(got.n, n);
            assert_int_equal(got.out[n - 1], '&');
        }
        memset(raw, 'a', sizeof(raw));
    }
    /* 1022 bytes and a 3-byte character: 1025, one over */
    memcpy(raw + 1022, "\xe2\x82\xac", 3);
    assert_false(one_key(raw, 1025, &got));
    assert_true(one_key(raw + 1, 1024, &got));
    assert_int_equal(got.n, 1024);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bodies),
        cmocka_unit_test(test_object_count),
        cmocka_unit_test(test_key_lengths),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
