/* test_screen.c: the request checks before any token is read, on parsed
 * heads under one configuration: each refusal with its status and
 * whether it counts as invalid, the route and resources of what passes,
 * WebDAV's Destination and S3's writes elsewhere. No sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../conf/cfg.h"
#include "../../policies/screen.h"
#include "../../policies/http_parse.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static const char ini[] = "[proxy]\n"
                          "listen = 127.0.0.1:0\n"
                          "[upstream default]\n"
                          "url = http://127.0.0.1:1\n"
                          "[upstream other]\n"
                          "url = http://127.0.0.1:2\n"
                          "[store]\n"
                          "path = /nonexistent/marks.lmdb\n"
                          "[route docs]\n"
                          "methods = PUT POST DELETE\n"
                          "path = /v1/docs/{doc}\n"
                          "resource = docs/{doc}\n"
                          "max_body = 100\n"
                          "[route byheader]\n"
                          "methods = PUT\n"
                          "path = /h/{x*}\n"
                          "resource = header\n"
                          "[route offheader]\n"
                          "methods = PUT\n"
                          "path = /oh/{x*}\n"
                          "resource = header\n"
                          "mode = off\n"
                          "[route files]\n"
                          "methods = PUT DELETE\n"
                          "path = /dav/{key*}\n"
                          "resource = files/{key*}\n"
                          "profile = webdav\n"
                          "[route bucket]\n"
                          "methods = PUT\n"
                          "path = /bucket/{key*}\n"
                          "resource = bucket/{key*}\n"
                          "profile = s3\n"
                          "[route elsewhere]\n"
                          "methods = PUT\n"
                          "path = /else/{x}\n"
                          "resource = else/{x}\n"
                          "upstream = other\n";

struct fixture {
    struct tm_config cfg;
    struct http_header headers[HTTP_MAX_HEADERS];
    struct http_request h;
    char head[2048];
    char path[1024];
    struct screen s;
};

/* An S3 server that gets the client's Host, path-style routes. */
static const char s3_ini[] = "[proxy]\n"
                             "listen = 127.0.0.1:0\n"
                             "[upstream default]\n"
                             "url = http://127.0.0.1:1\n"
                             "host = preserve\n"
                             "bucket_endpoints = aws minio.example\n"
                             "[upstream plain]\n"
                             "url = http://127.0.0.1:2\n"
                             "[store]\n"
                             "path = /nonexistent/marks.lmdb\n"
                             "[route plain]\n"
                             "path = /plain/{x}\n"
                             "resource = plain/{x}\n"
                             "upstream = plain\n"
                             "[route bucket]\n"
                             "methods = *\n"
                             "path = /{bucket}\n"
                             "resource = s3/{bucket}\n"
                             "profile = s3\n"
                             "[route key]\n"
                             "methods = *\n"
                             "path = /{bucket}/{key*}\n"
                             "resource = s3/{bucket}/{key}\n"
                             "profile = s3\n";

static int
setup_with(void **state, const char *text)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct cfg_errors errs = {0};

    assert_non_null(f);
    f->h.headers = f->headers;
    if (!cfg_load_string(&f->cfg, "test.ini", text, NULL, &errs)) {
        for (size_t i = 0; i < errs.n; i++) {
            fprintf(stderr, "%s\n", errs.msgs[i]);
        }
        fail();
    }
    cfg_errors_free(&errs);
    *state = f;
    return 0;
}

static int
setup(void **state)
{
    return setup_with(state, ini);
}

static int
setup_s3(void **state)
{
    return setup_with(state, s3_ini);
}

static int
teardown(void **state)
{
    struct fixture *f = *state;

    cfg_free(&f->cfg);
    free(f);
    return 0;
}

/* Screen the request line and headers (CRLF-separated, without the
 * final empty line) under the fixture's configuration. */
static enum screen_verdict
screen(struct fixture *f, const char *head)
{
    struct http_limits lim = {8192, 64, 4096};
    const char *fence[2] = {f->cfg.proxy.token_header,
                            f->cfg.proxy.resource_header};
    int n = snprintf(f->head, sizeof(f->head), "%s\r\n\r\n", head);

    assert_true(n > 0 && (size_t)n < sizeof(f->head));
    assert_int_equal(http_parse_request(f->head, (size_t)n, &lim, fence, &f->h),
                     HTTP_OK);
    assert_true(f->h.path.len + SCREEN_PATH_EXTRA <= sizeof(f->path));
    return screen_request(&f->cfg, &f->h, f->path, &f->s);
}

struct refusal {
    const char *head;
    int status;
    bool invalid;
    const char *detail; /* a part of it; NULL: none */
};

static void
test_refusals(void **state)
{
    static const struct refusal cases[] = {
        {"put /v1/docs/a HTTP/1.1\r\nHost: x", 400, true, "lower-case"},
        {"PUT /v1/docs/a HTTP/1.1\r\nHost: x\r\nX-HTTP-Method-Override: "
         "DELETE",
         400, true, "method overrides"},
        {"POST /v1/docs/a?_method=DELETE HTTP/1.1\r\nHost: x", 400, true,
         "method overrides"},
        {"PUT /v1/docs/%2F HTTP/1.1\r\nHost: x", 400, true,
         "the request path: "},
        {"TRACE /v1/docs/a HTTP/1.1\r\nHost: x", 405, false, NULL},
        {"PUT /v1/docs/a HTTP/1.1\r\nHost: x\r\nConnection: "
         "Fencing-Token\r\nFencing-Token: 1",
         400, true, "named in Connection"},
        {"PUT /v1/docs/a HTTP/1.1\r\nHost: x\r\nFencing-Token: "
         "1\r\nFencing-Token: 2",
         400, true, "more than one token header"},
        {"PUT /v1/docs/a HTTP/1.1\r\nHost: x\r\nContent-Length: 101", 413,
         false, NULL},
        {"PUT /h/a HTTP/1.1\r\nHost: x", 400, true,
         "the resource header is missing"},
        {"PUT /h/a HTTP/1.1\r\nHost: x\r\nFencing-Resource: "
         "a\r\nFencing-Resource: b",
         400, false, "more than one resource header"},
        {"MOVE /dav/a HTTP/1.1\r\nHost: x", 400, true, "needs a Destination"},
        {"MOVE /dav/a HTTP/1.1\r\nHost: x\r\nDestination: /dav/b\r\n"
         "Destination: /dav/c",
         400, true, "more than one Destination"},
        {"MOVE /dav/a HTTP/1.1\r\nHost: x\r\nDestination: /elsewhere", 400,
         true, "not under a fenced route"},
        {"POST /bucket?delete HTTP/1.1\r\nHost: x", 400, true, "has none"},
        {"POST /bucket?delete HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
         "chunked",
         411, false, "Content-Length"},
        {"POST /bucket?delete HTTP/1.1\r\nHost: x\r\nContent-Length: 0", 400,
         true, "has none"},
        {"POST /bucket/k?delete HTTP/1.1\r\nHost: x\r\nContent-Length: 9", 400,
         true, "POST /<bucket>?delete"},
        {"POST /bucket?delete HTTP/1.1\r\nHost: x\r\nContent-Length: "
         "2097153",
         413, false, "multi_delete_max"},
    };
    struct fixture *f = *state;

    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        const struct refusal *c = &cases[i];
        enum screen_verdict v = screen(f, c->head);
        if (v != SCREEN_REFUSE || f->s.status != c->status ||
            f->s.invalid != c->invalid ||
            (c->detail != NULL &&
             (f->s.detail == NULL || strstr(f->s.detail, c->detail) == NULL))) {
            fail_msg("case %zu (%s): verdict %d status %d invalid %d "
                     "detail %s",
                     i, c->head, v, f->s.status, f->s.invalid,
                     f->s.detail ? f->s.detail : "(none)");
        }
    }
}

static void
test_a_fenced_route(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(
        screen(f, "PUT /v1/docs/a%2Dz HTTP/1.1\r\nHost: x\r\nFencing-Token: 7"),
        SCREEN_FENCE);
    assert_string_equal(f->s.route_name, "docs");
    assert_int_equal(f->s.mode, TM_MODE_CORRECTNESS);
    assert_string_equal(f->s.resource, "docs/a-z");
    assert_int_equal(f->s.rlen, strlen("docs/a-z"));
    assert_int_equal(f->s.src_len, 0);
    assert_int_equal(f->s.token_idx, 1);
    assert_int_equal(f->s.max_body, 100);
    assert_int_equal(f->s.upstream, 0);
    assert_null(f->s.dest_raw.p);
    assert_int_equal(
        screen(f, "PUT /else/b HTTP/1.1\r\nHost: x\r\nContent-Length: 500"),
        SCREEN_FENCE);
    assert_int_equal(f->s.upstream, 1);
    assert_int_equal(f->s.token_idx, -1);
    assert_int_equal(f->s.max_body, UINT64_MAX);
}

static void
test_unmatched_passes_to_default(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(screen(f, "GET /nowhere HTTP/1.1\r\nHost: x"),
                     SCREEN_PASS);
    assert_null(f->s.route);
    assert_int_equal(f->s.mode, TM_MODE_OFF);
    assert_int_equal(f->s.upstream, 0);
    f->cfg.proxy.unmatched_reject = true;
    assert_int_equal(screen(f, "GET /nowhere HTTP/1.1\r\nHost: x"),
                     SCREEN_REFUSE);
    assert_int_equal(f->s.status, 404);
    assert_false(f->s.invalid);
    f->cfg.proxy.unmatched_reject = false;
}

static void
test_resource_from_header(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(screen(f, "PUT /h/a HTTP/1.1\r\nHost: x\r\n"
                               "Fencing-Resource: my/thing"),
                     SCREEN_FENCE);
    assert_string_equal(f->s.resource, "my/thing");
    /* An off route forwards without a resource. */
    assert_int_equal(screen(f, "PUT /oh/a HTTP/1.1\r\nHost: x"), SCREEN_FENCE);
    assert_int_equal(f->s.mode, TM_MODE_OFF);
    assert_int_equal(f->s.rlen, 0);
}

static void
test_dav_move_writes_both_ends(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(screen(f, "MOVE /dav/a HTTP/1.1\r\nHost: x\r\n"
                               "Destination: http://x/dav/b?q"),
                     SCREEN_FENCE);
    assert_string_equal(f->s.route_name, "files");
    assert_string_equal(f->s.resource, "files/b");
    assert_string_equal(f->s.src, "files/a");
    assert_int_equal(f->s.dest_raw.len, strlen("/dav/b?q"));
    assert_memory_equal(f->s.dest_raw.p, "/dav/b?q", f->s.dest_raw.len);
    /* A COPY on a webdav route writes its Destination only. */
    assert_int_equal(screen(f, "COPY /dav/a HTTP/1.1\r\nHost: x\r\n"
                               "Destination: /dav/b"),
                     SCREEN_FENCE);
    assert_string_equal(f->s.resource, "files/b");
    assert_int_equal(f->s.src_len, 0);
    /* Onto itself: one resource, one mark. */
    assert_int_equal(screen(f, "MOVE /dav/a HTTP/1.1\r\nHost: x\r\n"
                               "Destination: /dav/a"),
                     SCREEN_FENCE);
    assert_int_equal(f->s.src_len, 0);
}

static void
test_dav_subtree_flags(void **state)
{
    struct fixture *f = *state;

    /* A write keeps the subtree marks above it; a request on a
     * collection is also checked against its own. */
    assert_int_equal(screen(f, "PUT /dav/a/b HTTP/1.1\r\nHost: x"),
                     SCREEN_FENCE);
    assert_true(f->s.tree && !f->s.subtree);
    assert_int_equal(screen(f, "DELETE /dav/a/ HTTP/1.1\r\nHost: x"),
                     SCREEN_FENCE);
    assert_true(f->s.tree && f->s.subtree);
    assert_int_equal(screen(f, "MOVE /dav/a HTTP/1.1\r\nHost: x\r\n"
                               "Destination: /dav/b"),
                     SCREEN_FENCE);
    assert_true(f->s.tree && f->s.src_tree && f->s.subtree);
    assert_int_equal(screen(f, "LOCK /dav/a HTTP/1.1\r\nHost: x\r\n"
                               "Depth: 0"),
                     SCREEN_FENCE);
    assert_true(f->s.tree && !f->s.subtree);
    assert_int_equal(screen(f, "LOCK /dav/a HTTP/1.1\r\nHost: x"),
                     SCREEN_FENCE);
    assert_true(f->s.subtree);
    /* Not a webdav route: no subtree marks. */
    assert_int_equal(screen(f, "DELETE /v1/docs/a HTTP/1.1\r\nHost: x"),
                     SCREEN_FENCE);
    assert_false(f->s.tree);
    assert_true(screen_keeps_trees(&f->cfg));
}

static void
test_route_match_is_first_in_file_order(void **state)
{
    struct fixture *f = *state;
    struct tm_slice caps[TM_MAX_CAPTURES];
    struct tm_slice m = {"PUT", 3}, get = {"GET", 3}, p = {"/v1/docs/a", 10};
    const struct cfg_route *r = screen_route(&f->cfg, m, p, caps);

    assert_non_null(r);
    assert_string_equal(r->name, "docs");
    assert_null(screen_route(&f->cfg, get, p, caps));
}

struct s3_case {
    const char *head;
    enum screen_verdict want;
    const char *resource; /* FENCE: the mark; REFUSE: a part of detail */
};

static const struct s3_case s3_cases[] = {
    /* path-style, as before */
    {"PUT /tidemark/report HTTP/1.1\r\nHost: 127.0.0.1:7070", SCREEN_FENCE,
     "s3/tidemark/report"},
    {"PUT /tidemark/report HTTP/1.1\r\nHost: s3.amazonaws.com", SCREEN_FENCE,
     "s3/tidemark/report"},
    /* virtual-hosted: the bucket comes first, whatever the path */
    {"PUT /report HTTP/1.1\r\nHost: tidemark.s3.amazonaws.com", SCREEN_FENCE,
     "s3/tidemark/report"},
    {"DELETE /a/b HTTP/1.1\r\nHost: tidemark.s3.eu-west-1.amazonaws.com",
     SCREEN_FENCE, "s3/tidemark/a/b"},
    {"PUT / HTTP/1.1\r\nHost: tidemark.s3.amazonaws.com", SCREEN_FENCE,
     "s3/tidemark"},
    {"PUT /report HTTP/1.1\r\nHost: data.minio.example:9000", SCREEN_FENCE,
     "s3/data/report"},
    /* the Host an absolute-form target names is not the one forwarded */
    {"PUT http://tidemark.s3.amazonaws.com/tidemark/r HTTP/1.1\r\n"
     "Host: 127.0.0.1",
     SCREEN_FENCE, "s3/tidemark/r"},
    /* the bucket path through a virtual host is the bucket */
    {"POST / HTTP/1.1\r\nHost: tidemark.s3.amazonaws.com\r\n"
     "Content-Type: multipart/form-data; boundary=x",
     SCREEN_REFUSE, "form upload"},
    /* a Host that could name a bucket, when which one cannot be told */
    {"PUT /tidemark/report HTTP/1.1\r\nHost: files.example.com", SCREEN_REFUSE,
     "CNAME"},
    {"GET /tidemark/report HTTP/1.1\r\nHost: files.example.com", SCREEN_REFUSE,
     "CNAME"},
    {"PUT /report HTTP/1.1\r\nHost: Tidemark.s3.amazonaws.com", SCREEN_REFUSE,
     "upper-case"},
    /* another upstream is read as sent */
    {"PUT /plain/a HTTP/1.1\r\nHost: files.example.com", SCREEN_FENCE,
     "plain/a"},
};

static void
test_s3_bucket_from_the_host(void **state)
{
    struct fixture *f = *state;

    for (size_t i = 0; i < ARRAY_LEN(s3_cases); i++) {
        const struct s3_case *c = &s3_cases[i];
        enum screen_verdict v = screen(f, c->head);

        if (v != c->want) {
            fail_msg("%s: verdict %d (%s), want %d", c->head, v,
                     f->s.detail != NULL ? f->s.detail : "-", c->want);
        }
        if (v == SCREEN_FENCE) {
            assert_string_equal(f->s.resource, c->resource);
        } else if (strstr(f->s.detail, c->resource) == NULL) {
            fail_msg("%s: '%s' does not say '%s'", c->head, f->s.detail,
                     c->resource);
        } else {
            assert_int_equal(f->s.status, 400);
        }
    }
}

/* A multi-object delete's keys are fenced as a DELETE of each is:
 * path-style or virtual-hosted, on the request's upstream's routes. */
static void
test_s3_batch_keys(void **state)
{
    static const char *const heads[] = {
        "POST /?delete HTTP/1.1\r\nHost: tidemark.s3.amazonaws.com\r\n"
        "Content-Length: 10",
        "POST /tidemark/?delete= HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Length: 10",
    };
    static const struct {
        const char *key;
        const char *del; /* the path of a DELETE of it */
    } keys[] = {
        {"a b+c", "/tidemark/a%20b+c"},
        {"dir/../x", "/tidemark/dir/../x"},
        {"caf\xc3\xa9", "/tidemark/caf%C3%A9"},
        {"100%", "/tidemark/100%25"},
    };
    struct fixture *f = *state;
    struct screen_keyres kr;

    for (size_t i = 0; i < ARRAY_LEN(heads); i++) {
        for (size_t j = 0; j < ARRAY_LEN(keys); j++) {
            char head[256], want[TM_RESOURCE_MAX + 1];

            snprintf(head, sizeof(head),
                     "DELETE %s HTTP/1.1\r\nHost: 127.0.0.1", keys[j].del);
            assert_int_equal(screen(f, head), SCREEN_FENCE);
            snprintf(want, sizeof(want), "%s", f->s.resource);
            assert_int_equal(screen(f, heads[i]), SCREEN_FENCE);
            assert_true(f->s.batch);
            assert_int_equal(screen_batch_key(&f->cfg, &f->h, &f->s,
                                              keys[j].key, strlen(keys[j].key),
                                              &kr),
                             SCREEN_KEY_FENCED);
            assert_string_equal(kr.resource, want);
            assert_string_equal(kr.route->name, "key");
        }
        assert_int_equal(
            screen_batch_key(&f->cfg, &f->h, &f->s, "../x", 4, &kr),
            SCREEN_KEY_REFUSED);
        assert_non_null(strstr(kr.why, "bucket"));
    }
    /* The plain upstream's route is not the S3 server's. */
    assert_int_equal(screen(f, "POST /plain?delete HTTP/1.1\r\nHost: "
                               "127.0.0.1\r\nContent-Length: 10"),
                     SCREEN_FENCE);
    assert_true(f->s.batch);
    assert_int_equal(screen_batch_key(&f->cfg, &f->h, &f->s, "a", 1, &kr),
                     SCREEN_KEY_FENCED);
    assert_string_equal(kr.resource, "s3/plain/a");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_fenced_route, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unmatched_passes_to_default, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_resource_from_header, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_dav_subtree_flags, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_dav_move_writes_both_ends, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_route_match_is_first_in_file_order,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_s3_bucket_from_the_host, setup_s3,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_s3_batch_keys, setup_s3, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
