/* test_sigv4.c: AWS Signature V4 against AWS's published vectors: the
 * aws-sig-v4-test-suite (service "service", 2015-08-30) and the S3
 * examples of "Authenticating Requests: Using the Authorization Header"
 * (GET object, PUT object, GET bucket lifecycle, list objects), with
 * their signatures as published; an UNSIGNED-PAYLOAD request checked
 * against botocore's S3SigV4Auth; and the shared-credentials parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../policies/sigv4.h"

#define EMPTY_SHA                                                              \
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static const struct sigv4_key suite_key = {
    "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "us-east-1",
    "service"};
static const char suite_date[] = "20150830T123600Z";

static const struct sigv4_key s3_key = {
    "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "us-east-1", "s3"};
static const char s3_date[] = "20130524T000000Z";

struct vec {
    const char *name;
    const char *method;
    const char *path;
    const char *query;
    const char *headers[8]; /* "Name:value", NULL-terminated */
    const char *hash;
    bool s3;
    const char *signed_names;
    const char *sig;
};

#define SUITE_HOST "Host:example.amazonaws.com", "X-Amz-Date:20150830T123600Z"
#define S3_HOST "Host:examplebucket.s3.amazonaws.com"

static const struct vec vecs[] = {
    /* aws-sig-v4-test-suite */
    {"get-vanilla",
     "GET",
     "/",
     "",
     {SUITE_HOST},
     EMPTY_SHA,
     false,
     "host;x-amz-date",
     "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
    {"get-vanilla-query-order-key-case",
     "GET",
     "/",
     "Param2=value2&Param1=value1",
     {SUITE_HOST},
     EMPTY_SHA,
     false,
     "host;x-amz-date",
     "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
    {"get-vanilla-query-unreserved",
     "GET",
     "/",
     "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz=-._~"
     "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
     {SUITE_HOST},
     EMPTY_SHA,
     false,
     "host;x-amz-date",
     "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197"},
    {"get-vanilla-utf8-query",
     "GET",
     "/",
     "\xe1\x88\xb4=bar",
     {SUITE_HOST},
     EMPTY_SHA,
     false,
     "host;x-amz-date",
     "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04"},
    {"get-utf8",
     "GET",
     "/\xe1\x88\xb4",
     "",
     {SUITE_HOST},
     EMPTY_SHA,
     false,
     "host;x-amz-date",
     "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"},
    {"get-unreserved",
     "GET",
     "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
     "",
     {SUITE_HOST},
     EMPTY_SHA,
     false,
     "host;x-amz-date",
     "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f"},
    {"get-header-key-duplicate",
     "GET",
     "/",
     "",
     {SUITE_HOST, "My-Header1:value2", "My-Header1:value2",
      "My-Header1:value1"},
     EMPTY_SHA,
     false,
     "host;my-header1;x-amz-date",
     "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea"},
    {"get-header-value-order",
     "GET",
     "/",
     "",
     {SUITE_HOST, "My-Header1:value4", "My-Header1:value1", "My-Header1:value3",
      "My-Header1:value2"},
     EMPTY_SHA,
     false,
     "host;my-header1;x-amz-date",
     "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01"},
    {"get-header-value-trim",
     "GET",
     "/",
     "",
     {SUITE_HOST, "My-Header1: value1 ", "My-Header2: \"a   b   c\""},
     EMPTY_SHA,
     false,
     "host;my-header1;my-header2;x-amz-date",
     "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"},
    {"post-vanilla",
     "POST",
     "/",
     "",
     {SUITE_HOST},
     EMPTY_SHA,
     false,
     "host;x-amz-date",
     "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"},
    {"post-vanilla-query",
     "POST",
     "/",
     "Param1=value1",
     {SUITE_HOST},
     EMPTY_SHA,
     false,
     "host;x-amz-date",
     "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11"},
    {"post-vanilla-query-nonunreserved",
     "POST",
     "/",
     "%40%23%24%25%5E&%2B=%2F%2C%3F%3E%3C%60%22%3B%3A%5C%7C%5D%5B%7B%7D",
     {SUITE_HOST},
     EMPTY_SHA,
     false,
     "host;x-amz-date",
     "66c82657c86e26fb25238d0e69f011edc4c6df5ae71119d7cb98ed9b87393c1e"},
    {"post-header-key-sort",
     "POST",
     "/",
     "",
     {"My-Header1:value1", SUITE_HOST},
     EMPTY_SHA,
     false,
     "host;my-header1;x-amz-date",
     "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c"},
    {"post-header-value-case",
     "POST",
     "/",
     "",
     {SUITE_HOST, "My-Header1:VALUE1"},
     EMPTY_SHA,
     false,
     "host;my-header1;x-amz-date",
     "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d"},
    {"post-x-www-form-urlencoded",
     "POST",
     "/",
     "",
     {"Content-Type:application/x-www-form-urlencoded", SUITE_HOST},
     "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
     false,
     "content-type;host;x-amz-date",
     "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"},
    {"post-sts-header-before",
     "POST",
     "/",
     "",
     {SUITE_HOST,
      "X-Amz-Security-Token:AQoDYXdzEPT//////////"
      "wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfp"
      "SPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8"
      "phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY"
      "9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9F"
      "X9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA=="},
     EMPTY_SHA,
     false,
     "host;x-amz-date;x-amz-security-token",
     "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead"},
    /* the S3 documentation's examples */
    {"s3-get-object",
     "GET",
     "/test.txt",
     "",
     {S3_HOST, "Range:bytes=0-9", "x-amz-content-sha256:" EMPTY_SHA,
      "x-amz-date:20130524T000000Z"},
     EMPTY_SHA,
     true,
     "host;range;x-amz-content-sha256;x-amz-date",
     "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"},
    {"s3-put-object",
     "PUT",
     "/test$file.text",
     "",
     {S3_HOST, "Date:Fri, 24 May 2013 00:00:00 GMT",
      "x-amz-date:20130524T000000Z", "x-amz-storage-class:REDUCED_REDUNDANCY",
      "x-amz-content-sha256:"
      "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"},
     "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
     true,
     "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
     "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"},
    {"s3-put-object-encoded",
     "PUT",
     "/test%24file.text",
     "",
     {S3_HOST, "Date:Fri, 24 May 2013 00:00:00 GMT",
      "x-amz-date:20130524T000000Z", "x-amz-storage-class:REDUCED_REDUNDANCY",
      "x-amz-content-sha256:"
      "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"},
     "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
     true,
     "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
     "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"},
    {"s3-get-bucket-lifecycle",
     "GET",
     "/",
     "lifecycle",
     {S3_HOST, "x-amz-date:20130524T000000Z",
      "x-amz-content-sha256:" EMPTY_SHA},
     EMPTY_SHA,
     true,
     "host;x-amz-content-sha256;x-amz-date",
     "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"},
    {"s3-list-objects",
     "GET",
     "/",
     "max-keys=2&prefix=J",
     {S3_HOST, "x-amz-date:20130524T000000Z",
      "x-amz-content-sha256:" EMPTY_SHA},
     EMPTY_SHA,
     true,
     "host;x-amz-content-sha256;x-amz-date",
     "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"},
    /* GET object with an unsigned payload, as tidemark signs: the
     * signature botocore's S3SigV4Auth makes for it. */
    {"s3-get-object-unsigned-payload",
     "GET",
     "/test.txt",
     "",
     {S3_HOST, "Range:bytes=0-9", "x-amz-content-sha256:UNSIGNED-PAYLOAD",
      "x-amz-date:20130524T000000Z"},
     "UNSIGNED-PAYLOAD",
     true,
     "host;range;x-amz-content-sha256;x-amz-date",
     "edacce68e5445863e1f916719fac26d3be9c1581fccd7878ade0879597fc0dc1"},
    /* An upload part with an encoded key and query (botocore too). */
    {"s3-upload-part",
     "PUT",
     "/my%20dir/a%2Bb~",
     "uploadId=x%2By&partNumber=2",
     {"Content-Type:text/plain", S3_HOST,
      "x-amz-content-sha256:UNSIGNED-PAYLOAD", "x-amz-date:20130524T000000Z"},
     "UNSIGNED-PAYLOAD",
     true,
     "content-type;host;x-amz-content-sha256;x-amz-date",
     "9534d927e205879e86c4185a6983eadbee9f53b218d89fa69938483a51434c5c"},
};

/* Build the request of v; hs has room for 8 headers. */
static void
request_of(const struct vec *v, struct sigv4_request *rq,
           struct sigv4_header *hs)
{
    size_t n = 0;

    for (; n < 8 && v->headers[n] != NULL; n++) {
        const char *h = v->headers[n];
        const char *colon = strchr(h, ':');

        hs[n].name = h;
        hs[n].nlen = (size_t)(colon - h);
        hs[n].value = colon + 1;
        hs[n].vlen = strlen(colon + 1);
    }
    memset(rq, 0, sizeof(*rq));
    rq->method = v->method;
    rq->mlen = strlen(v->method);
    rq->path = v->path;
    rq->plen = strlen(v->path);
    rq->query = v->query;
    rq->qlen = strlen(v->query);
    rq->headers = hs;
    rq->nheaders = n;
    rq->payload_hash = v->hash;
    rq->s3 = v->s3;
}

static void
test_vectors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(vecs) / sizeof(vecs[0]); i++) {
        const struct vec *v = &vecs[i];
        const struct sigv4_key *key = v->s3 ? &s3_key : &suite_key;
        const char *date = v->s3 ? s3_date : suite_date;
        struct sigv4_header hs[8];
        struct sigv4_request rq;
        char auth[512], want[512];
        size_t n;

        request_of(v, &rq, hs);
        n = sigv4_authorization(&rq, date, key, auth, sizeof(auth));
        snprintf(want, sizeof(want),
                 "AWS4-HMAC-SHA256 Credential=%s/%.8s/%s/%s/aws4_request, "
                 "SignedHeaders=%s, Signature=%s",
                 key->key_id, date, key->region, key->service, v->signed_names,
                 v->sig);
        if (n == 0 || strcmp(auth, want) != 0) {
            fail_msg("%s:\n got  %s\n want %s", v->name, auth, want);
        }
    }
}

/* The canonical request of the S3 GET object example, as the S3
 * documentation prints it. */
static void
test_canonical_request_text(void **state)
{
    struct sigv4_header hs[8];
    struct sigv4_request rq;
    char *names = NULL, *creq;

    (void)state;
    request_of(&vecs[16], &rq, hs);
    assert_string_equal(vecs[16].name, "s3-get-object");
    creq = sigv4_canonical_request(&rq, &names);
    assert_non_null(creq);
    assert_string_equal(creq, "GET\n/test.txt\n\n"
                              "host:examplebucket.s3.amazonaws.com\n"
                              "range:bytes=0-9\n"
                              "x-amz-content-sha256:" EMPTY_SHA "\n"
                              "x-amz-date:20130524T000000Z\n\n"
                              "host;range;x-amz-content-sha256;x-amz-date\n" //
                        EMPTY_SHA);
    assert_string_equal(names, "host;range;x-amz-content-sha256;x-amz-date");
    free(creq);
    free(names);
}

struct uri_case {
    const char *path;
    bool s3;
    const char *want; /* the canonical URI line */
};

static const struct uri_case uris[] = {
    {"", true, "/"},
    {"/a%20b", true, "/a%20b"},
    {"/a%2fb", true, "/a%2Fb"}, /* an encoded slash stays encoded */
    {"/a(b)$!", true, "/a%28b%29%24%21"},
    {"/%7e%41", true, "/~A"},   /* escapes of unreserved bytes read */
    {"/a%zz", true, "/a%25zz"}, /* a lone % is a byte of its own */
    {"/a%2", true, "/a%252"},
    {"/a+b", true, "/a%2Bb"},      /* + in a path is not a space */
    {"/a%20b", false, "/a%2520b"}, /* other services: encoded twice */
    {"/a~b", false, "/a~b"},
};

static void
test_canonical_uri(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(uris) / sizeof(uris[0]); i++) {
        struct sigv4_request rq = {"GET",
                                   3,
                                   uris[i].path,
                                   strlen(uris[i].path),
                                   "",
                                   0,
                                   NULL,
                                   0,
                                   "UNSIGNED-PAYLOAD",
                                   uris[i].s3};
        char *creq = sigv4_canonical_request(&rq, NULL);
        const char *line;

        assert_non_null(creq);
        line = creq + 4;
        if (strncmp(line, uris[i].want, strlen(uris[i].want)) != 0 ||
            line[strlen(uris[i].want)] != '\n') {
            fail_msg("%s: got %s", uris[i].path, line);
        }
        free(creq);
    }
}

struct query_case {
    const char *query;
    const char *want;
};

static const struct query_case queries[] = {
    {"", ""},
    {"uploads", "uploads="},
    {"b=2&a=1&a=0", "a=0&a=1&b=2"},
    {"a&&b=", "a=&b="},
    {"prefix=a+b", "prefix=a%20b"},
    {"prefix=a%2Bb", "prefix=a%2Bb"},
    {"k=%7e%2f", "k=~%2F"},
    {"x=a=b", "x=a%3Db"},
    {"a-b=1&a=2", "a=2&a-b=1"}, /* by name first, then value */
};

static void
test_canonical_query(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(queries) / sizeof(queries[0]); i++) {
        struct sigv4_request rq = {"GET",
                                   3,
                                   "/",
                                   1,
                                   queries[i].query,
                                   strlen(queries[i].query),
                                   NULL,
                                   0,
                                   "UNSIGNED-PAYLOAD",
                                   true};
        char *creq = sigv4_canonical_request(&rq, NULL);
        const char *line;

        assert_non_null(creq);
        line = creq + 6;
        if (strncmp(line, queries[i].want, strlen(queries[i].want)) != 0 ||
            line[strlen(queries[i].want)] != '\n') {
            fail_msg("%s: got %s", queries[i].query, line);
        }
        free(creq);
    }
}

/* A request that cannot be signed: a header value with a line break,
 * a malformed date. */
static void
test_refused(void **state)
{
    struct sigv4_header h = {"X-Amz-Meta-A", 12, "a\nb", 3};
    struct sigv4_request rq = {
        "GET", 3, "/", 1, "", 0, &h, 1, "UNSIGNED-PAYLOAD", true};
    char out[512];

    (void)state;
    assert_null(sigv4_canonical_request(&rq, NULL));
    h.value = "ab";
    h.vlen = 2;
    assert_int_equal(
        sigv4_authorization(&rq, "2013-05-24", &s3_key, out, sizeof(out)), 0);
    assert_int_equal(sigv4_authorization(&rq, s3_date, &s3_key, out, 40), 0);
    assert_true(sigv4_authorization(&rq, s3_date, &s3_key, out, sizeof(out)) >
                0);
}

static void
test_date(void **state)
{
    char d[SIGV4_DATE_LEN + 1];

    (void)state;
    sigv4_date(1369353600LL, d); /* 2013-05-24T00:00:00Z */
    assert_string_equal(d, s3_date);
    sigv4_date(1440938160LL, d);
    assert_string_equal(d, suite_date);
}

static void
test_credentials_file(void **state)
{
    static const char text[] = "# comment\n"
                               "[default]\n"
                               "aws_access_key_id = AKIDDEFAULT\n"
                               "aws_secret_access_key=secret/default+x\n"
                               "\n"
                               "[profile other]\r\n"
                               "  aws_access_key_id   =   AKIDOTHER  \r\n"
                               "; comment\n"
                               "aws_secret_access_key = s2\n"
                               "aws_session_token = tok==\n"
                               "region = eu-west-1\n";
    struct sigv4_creds c;

    (void)state;
    assert_null(sigv4_creds_parse(text, sizeof(text) - 1, "default", &c));
    assert_string_equal(c.key_id, "AKIDDEFAULT");
    assert_string_equal(c.secret, "secret/default+x");
    assert_null(c.session);
    sigv4_creds_free(&c);
    assert_null(sigv4_creds_parse(text, sizeof(text) - 1, "other", &c));
    assert_string_equal(c.key_id, "AKIDOTHER");
    assert_string_equal(c.secret, "s2");
    assert_string_equal(c.session, "tok==");
    sigv4_creds_free(&c);
    assert_non_null(sigv4_creds_parse(text, sizeof(text) - 1, "none", &c));
    assert_null(c.key_id);
}

static void
test_credentials_refused(void **state)
{
    static const char *const bad[] = {
        "[default]\naws_access_key_id = A\n",     /* no secret */
        "[default]\naws_secret_access_key = s\n", /* no key id */
        "[default\naws_access_key_id = A\n",      /* no ] */
        "[default]\nAKID\n",                      /* not key = value */
        "[default]\naws_access_key_id = a b\naws_secret_access_key = s\n",
        "[default]\naws_access_key_id =\naws_secret_access_key = s\n",
        "aws_access_key_id = A\naws_secret_access_key = s\n", /* no section */
    };
    struct sigv4_creds c;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *msg =
            sigv4_creds_parse(bad[i], strlen(bad[i]), "default", &c);
        if (msg == NULL) {
            fail_msg("accepted: %s", bad[i]);
        }
        assert_null(c.key_id);
        assert_null(c.secret);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_canonical_request_text),
        cmocka_unit_test(test_canonical_uri),
        cmocka_unit_test(test_canonical_query),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_date),
        cmocka_unit_test(test_credentials_file),
        cmocka_unit_test(test_credentials_refused),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
