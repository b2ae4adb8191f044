/* test_uploads.c: the table of S3 upload ids bound to the resource their
 * create was fenced as: what an answer binds, per upstream, the oldest
 * replaced past UPLOADS_MAX, a binding's lifetime. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../conf/cfg.h"
#include "../../policies/screen.h"
#include "../../proxy/path/uploads.h"

#define ANSWER(k, id)                                                          \
    "<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>" k                 \
    "</Key><UploadId>" id "</UploadId></InitiateMultipartUploadResult>"

static struct cfg_upstream up_a = {
    .name = "a", .host_header = "127.0.0.1:9000", .bucket_endpoints = "aws"};
static struct cfg_upstream up_b = {
    .name = "b", .host_header = "127.0.0.1:9001", .bucket_endpoints = "aws"};

/* A create fenced as s3/b/KEY at /b/KEY. */
static void
fenced(struct screen *s, const char *key)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->resource, sizeof(s->resource), "s3/b/%s", key);
    s->rlen = strlen(s->resource);
    snprintf(s->detail_buf, sizeof(s->detail_buf), "/b/%s", key);
    s->cpath.p = s->detail_buf;
    s->cpath.len = strlen(s->detail_buf);
}

static bool
answer(struct uploads *u, const struct cfg_upstream *cu, const char *key,
       const char *body, bool chunked, int64_t now)
{
    struct screen s;
    const char *why = NULL;

    fenced(&s, key);
    return uploads_answer(u, cu, &s, body, strlen(body), chunked, now, &why);
}

static void
test_binds_what_the_answer_names(void **state)
{
    struct uploads *u = uploads_new();
    const char *res;

    assert_non_null(u);
    assert_true(answer(u, &up_a, "k", ANSWER("k", "id1"), false, 0));
    res = uploads_find(u, "a", "id1", 3, 1);
    assert_non_null(res);
    assert_string_equal(res, "s3/b/k");
    /* another upstream's id of the same spelling is another upload */
    assert_null(uploads_find(u, "b", "id1", 3, 1));
    /* an answer naming another key than the request binds nothing */
    assert_false(answer(u, &up_a, "k", ANSWER("other", "id2"), false, 0));
    assert_null(uploads_find(u, "a", "id2", 3, 1));
    /* nor does one that does not parse */
    assert_false(answer(u, &up_b, "k", "<Error/>", false, 0));
    /* chunked, split inside a tag */
    assert_true(
        answer(u, &up_b, "k",
               "10\r\n<InitiateMultipa\r\n65\r\n"
               "rtUploadResult><Bucket>b</Bucket><Key>k</Key>"
               "<UploadId>id3</UploadId></InitiateMultipartUploadResult>"
               "\r\n0\r\n\r\n",
               true, 0));
    assert_non_null(uploads_find(u, "b", "id3", 3, 1));
    assert_false(answer(u, &up_b, "k", "zz\r\n", true, 0));
    uploads_free(u);
}

static void
test_lifetime_and_room(void **state)
{
    struct uploads *u = uploads_new();
    char id[32], body[256];

    assert_non_null(u);
    assert_true(answer(u, &up_a, "k", ANSWER("k", "first"), false, 0));
    assert_non_null(uploads_find(u, "a", "first", 5, UPLOADS_TTL_MS - 1));
    assert_null(uploads_find(u, "a", "first", 5, UPLOADS_TTL_MS));
    for (int i = 0; i < UPLOADS_MAX; i++) {
        snprintf(id, sizeof(id), "id%d", i);
        snprintf(body, sizeof(body), ANSWER("k", "%s"), id);
        assert_true(answer(u, &up_a, "k", body, false, 10));
    }
    /* the oldest went first; the rest are all there */
    assert_null(uploads_find(u, "a", "first", 5, 11));
    assert_non_null(uploads_find(u, "a", "id0", 3, 11));
    assert_non_null(uploads_find(u, "a", "id8191", 6, 11));
    uploads_free(u);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binds_what_the_answer_names),
        cmocka_unit_test(test_lifetime_and_room),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
