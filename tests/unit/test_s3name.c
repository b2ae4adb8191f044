/* test_s3name.c: how an S3 server reads a bucket from the Host, the
 * bucket_endpoints list, the CreateMultipartUpload answer and the address
 * an upload lands at, each against a table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../policies/s3name.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

struct host_case {
    const char *host;
    const char *endpoints;
    enum s3_host want;
    const char *bucket; /* S3_HOST_BUCKET: the bucket; UNCLEAR: a part of
                         * the reason */
};

static const struct host_case host_cases[] = {
    /* path-style: addresses, localhost, the endpoints themselves */
    {"127.0.0.1:7070", "aws", S3_HOST_PATH, NULL},
    {"10.0.0.255", "aws", S3_HOST_PATH, NULL},
    {"[::1]:7070", "aws", S3_HOST_PATH, NULL},
    {"[2001:db8::1]", "aws", S3_HOST_PATH, NULL},
    /* brackets around a name: a server that strips them reads a bucket */
    {"[b.s3.amazonaws.com]", "aws", S3_HOST_UNCLEAR, "not an IPv6"},
    {"[::1]x", "aws", S3_HOST_UNCLEAR, "not an IPv6"},
    {"[::1]:7x", "aws", S3_HOST_UNCLEAR, "not an IPv6"},
    {"[]", "aws", S3_HOST_UNCLEAR, "not an IPv6"},
    {"[::1", "aws", S3_HOST_UNCLEAR, "not an IPv6"},
    {"localhost:9000", "aws", S3_HOST_PATH, NULL},
    {"localhost", "", S3_HOST_PATH, NULL},
    {"s3.amazonaws.com", "aws", S3_HOST_PATH, NULL},
    {"s3.eu-west-1.amazonaws.com", "aws", S3_HOST_PATH, NULL},
    {"s3-eu-west-1.amazonaws.com:443", "aws", S3_HOST_PATH, NULL},
    {"s3.dualstack.us-east-2.amazonaws.com", "aws", S3_HOST_PATH, NULL},
    {"s3-accelerate.amazonaws.com", "aws", S3_HOST_PATH, NULL},
    {"minio.example", "minio.example", S3_HOST_PATH, NULL},
    {"tidemark:7070", "aws =tidemark", S3_HOST_PATH, NULL},
    {"tidemark.ns.svc", "=tidemark.*.svc", S3_HOST_PATH, NULL},
    /* virtual-hosted */
    {"tidemark.s3.amazonaws.com", "aws", S3_HOST_BUCKET, "tidemark"},
    {"tidemark.s3.amazonaws.com:80", "aws", S3_HOST_BUCKET, "tidemark"},
    {"my.dotted.bucket.s3.amazonaws.com", "aws", S3_HOST_BUCKET,
     "my.dotted.bucket"},
    {"b.s3.eu-west-1.amazonaws.com", "aws", S3_HOST_BUCKET, "b"},
    {"b.s3-eu-west-1.amazonaws.com", "aws", S3_HOST_BUCKET, "b"},
    {"b.s3.dualstack.eu-west-1.amazonaws.com", "aws", S3_HOST_BUCKET, "b"},
    {"b.s3-accelerate.amazonaws.com", "aws", S3_HOST_BUCKET, "b"},
    {"b.s3-accelerate.dualstack.amazonaws.com", "aws", S3_HOST_BUCKET, "b"},
    {"a.s3.x.s3.amazonaws.com", "aws", S3_HOST_BUCKET, "a.s3.x"},
    {"data.minio.example", "aws minio.example", S3_HOST_BUCKET, "data"},
    {"data.s3.eu.example", "s3.*.example", S3_HOST_BUCKET, "data"},
    /* two endpoints, two buckets */
    {"a.s3.s3.amazonaws.com", "aws", S3_HOST_UNCLEAR, "two different"},
    {"s3.s3.amazonaws.com", "aws", S3_HOST_UNCLEAR, "two different"},
    {"b.s3.s3-x.amazonaws.com", "aws", S3_HOST_UNCLEAR, "two different"},
    /* could be a CNAME bucket, or read otherwise by another server */
    {"files.example.com", "aws", S3_HOST_UNCLEAR, "CNAME"},
    {"tidemark", "aws", S3_HOST_UNCLEAR, "CNAME"},
    {"b.tidemark", "aws =tidemark", S3_HOST_UNCLEAR, "CNAME"},
    {"b.s3.foo.bar.amazonaws.com", "aws", S3_HOST_UNCLEAR, "CNAME"},
    {"b.s3.cn-north-1.amazonaws.com.cn", "aws", S3_HOST_UNCLEAR, "CNAME"},
    {"tidemark.s3.amazonaws.com", "", S3_HOST_UNCLEAR, "CNAME"},
    {"1.2.3", "aws", S3_HOST_UNCLEAR, "CNAME"},
    {"01.2.3.4", "aws", S3_HOST_UNCLEAR, "CNAME"},
    {"Tidemark.s3.amazonaws.com", "aws", S3_HOST_UNCLEAR, "upper-case"},
    {"LOCALHOST", "aws", S3_HOST_UNCLEAR, "upper-case"},
    {"tide%6dark.s3.amazonaws.com", "aws", S3_HOST_UNCLEAR, "character"},
    {"tidemark.s3.amazonaws.com.", "aws", S3_HOST_UNCLEAR, "empty label"},
    {".s3.amazonaws.com", "aws", S3_HOST_UNCLEAR, "empty label"},
    {"a..s3.amazonaws.com", "aws", S3_HOST_UNCLEAR, "empty label"},
    {"", "aws", S3_HOST_UNCLEAR, "empty"},
    {":80", "aws", S3_HOST_UNCLEAR, "empty"},
};

static void
test_host_read(void **state)
{
    for (size_t i = 0; i < ARRAY_LEN(host_cases); i++) {
        const struct host_case *c = &host_cases[i];
        struct tm_slice h = {c->host, strlen(c->host)}, b = {NULL, 0};
        const char *why = NULL;
        enum s3_host got = s3_host_read(h, c->endpoints, &b, &why);

        if (got != c->want) {
            fail_msg("%s under '%s': %d, want %d (%s)", c->host, c->endpoints,
                     got, c->want, why != NULL ? why : "-");
        }
        if (got == S3_HOST_BUCKET &&
            (b.len != strlen(c->bucket) || memcmp(b.p, c->bucket, b.len))) {
            fail_msg("%s: bucket '%.*s', want '%s'", c->host, (int)b.len, b.p,
                     c->bucket);
        }
        if (got == S3_HOST_UNCLEAR && strstr(why, c->bucket) == NULL) {
            fail_msg("%s: '%s' does not say '%s'", c->host, why, c->bucket);
        }
    }
}

static void
test_endpoints_valid(void **state)
{
    static const char *const good[] = {
        "aws", "", "  aws  minio.example ", "s3.*.example", "s3-*.x", "x"};
    static const char *const bad[] = {"S3.example", "a..b", ".a",  "a.",
                                      "a.**.b",     "a/b",  "a:80"};
    const char *why = NULL;

    for (size_t i = 0; i < ARRAY_LEN(good); i++) {
        if (!s3_endpoints_valid(good[i], &why)) {
            fail_msg("'%s' refused: %s", good[i], why);
        }
    }
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        if (s3_endpoints_valid(bad[i], &why)) {
            fail_msg("'%s' taken", bad[i]);
        }
    }
}

#define ANSWER(b, k, id)                                                       \
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"                             \
    "<InitiateMultipartUploadResult "                                          \
    "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"                       \
    "<Bucket>" b "</Bucket><Key>" k "</Key><UploadId>" id "</UploadId>"        \
    "</InitiateMultipartUploadResult>"

struct answer_case {
    const char *body;
    const char *key; /* decoded; NULL: no binding */
    const char *id;
};

static const struct answer_case answer_cases[] = {
    {ANSWER("tidemark", "report", "VXBsb2FkSWQ"), "report", "VXBsb2FkSWQ"},
    {ANSWER("tidemark", "a &amp; b &lt;c&gt; &#233; &#x41;", "u-1"),
     "a & b <c> \xc3\xa9 A", "u-1"},
    {ANSWER("tidemark", "dir/with space+plus", "u"), "dir/with space+plus",
     "u"},
    /* no binding */
    {ANSWER("tidemark", "k", "u") "<Key>other</Key>", NULL, NULL},
    {ANSWER("tidemark", "k<!-- x -->", "u"), NULL, NULL},
    {ANSWER("tidemark", "<![CDATA[k]]>", "u"), NULL, NULL},
    {ANSWER("tidemark", "k", ""), NULL, NULL},
    {ANSWER("tidemark", "k", "u u"), NULL, NULL},
    {ANSWER("tidemark", "", "u"), NULL, NULL},
    {ANSWER("tidemark", "&bogus;", "u"), NULL, NULL},
    {ANSWER("tidemark", "&#0;", "u"), NULL, NULL},
    {ANSWER("tidemark", "&#xd800;", "u"), NULL, NULL},
    {ANSWER("tidemark", "&amp", "u"), NULL, NULL},
    {"<Bucket>b</Bucket><Key>k</Key><UploadId>u</UploadId>", NULL, NULL},
    {"<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key>", NULL,
     NULL},
    {"<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k", NULL, NULL},
    {"", NULL, NULL},
};

static void
test_upload_parse(void **state)
{
    struct s3_upload u;

    for (size_t i = 0; i < ARRAY_LEN(answer_cases); i++) {
        const struct answer_case *c = &answer_cases[i];
        bool ok = s3_upload_parse(c->body, strlen(c->body), &u);

        if (c->key == NULL) {
            if (ok) {
                fail_msg("bound: %s", c->body);
            }
            continue;
        }
        if (!ok) {
            fail_msg("not bound: %s", c->body);
        }
        assert_string_equal(u.key, c->key);
        assert_int_equal(u.key_len, strlen(c->key));
        assert_string_equal(u.id, c->id);
        assert_string_equal(u.bucket, "tidemark");
    }
}

static void
test_upload_bounds(void **state)
{
    static char body[S3_ANSWER_MAX + 2048];
    char key[S3_KEY_MAX + 2];
    struct s3_upload u;

    memset(key, 'k', sizeof(key) - 1);
    key[sizeof(key) - 1] = '\0';
    snprintf(body, sizeof(body), ANSWER("b", "%s", "u"), key);
    assert_false(s3_upload_parse(body, strlen(body), &u));
    key[S3_KEY_MAX] = '\0';
    snprintf(body, sizeof(body), ANSWER("b", "%s", "u"), key);
    assert_true(s3_upload_parse(body, strlen(body), &u));
    assert_int_equal(u.key_len, S3_KEY_MAX);
    /* over the answer bound, whatever it holds */
    memset(body, ' ', sizeof(body));
    assert_false(s3_upload_parse(body, S3_ANSWER_MAX + 1, &u));
}

struct addr_case {
    const char *key;
    const char *want; /* NULL: no canonical form */
};

static const struct addr_case addr_cases[] = {
    {"report", "/tidemark/report"},
    {"a b+c", "/tidemark/a b c"},
    {"dir//x/./y/", "/tidemark/dir/x/y"},
    {"100%", "/tidemark/100%"},
    {"a;b", "/tidemark/a"},
    {"q?x#y", "/tidemark/q?x#y"},
    {"caf\xc3\xa9", "/tidemark/caf\xc3\xa9"},
    {"~-._", "/tidemark/~-._"},
    {"a/../x", "/tidemark/x"},
    {"../../etc", NULL},
    {"../x", NULL}, /* below the root, but above the bucket */
    {"a/../../x", NULL},
    {"..", NULL},
    {"a\x01", NULL},
    {"a\rb", NULL},
};

/* The address of a key (the upload's goes through it): every byte but
 * unreserved ones and '/' percent-encoded as an SDK sends a DELETE of
 * it, then canonical; a bucket with no address refused. */
static void
test_key_address(void **state)
{
    struct tm_slice b = {"tidemark", 8};
    char out[4096];
    size_t n = 0;

    assert_true(s3_key_address(b, "a%2Fb", 5, out, sizeof(out), &n));
    assert_string_equal(out, "/tidemark/a%2Fb");
    assert_false(s3_key_address((struct tm_slice){"a/b", 3}, "k", 1, out,
                                sizeof(out), &n));
    assert_false(
        s3_key_address((struct tm_slice){"", 0}, "k", 1, out, sizeof(out), &n));
}

static void
test_upload_address(void **state)
{
    for (size_t i = 0; i < ARRAY_LEN(addr_cases); i++) {
        struct s3_upload u = {.bucket = "tidemark", .bucket_len = 8};
        char out[4096];
        size_t n = 0;
        bool ok;

        snprintf(u.key, sizeof(u.key), "%s", addr_cases[i].key);
        u.key_len = strlen(u.key);
        ok = s3_upload_address(&u, out, sizeof(out), &n);
        if (addr_cases[i].want == NULL) {
            if (ok) {
                fail_msg("%s: '%s', want refused", addr_cases[i].key, out);
            }
            continue;
        }
        if (!ok) {
            fail_msg("%s: refused", addr_cases[i].key);
        }
        assert_string_equal(out, addr_cases[i].want);
        assert_int_equal(n, strlen(addr_cases[i].want));
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_read),
        cmocka_unit_test(test_endpoints_valid),
        cmocka_unit_test(test_upload_parse),
        cmocka_unit_test(test_upload_bounds),
        cmocka_unit_test(test_upload_address),
        cmocka_unit_test(test_key_address),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
