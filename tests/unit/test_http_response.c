/* test_http_response.c: the strict HTTP/1.1 parser's response heads:
 * valid heads, framing by status and method, refusals, and heads that
 * arrive a byte at a time. */
#include "http_test.h"

/* Responses. */
struct resp_case {
    const char *name;
    const char *raw;
    size_t len;
    bool head;
    enum http_rc rc;
    int status;
    enum http_body body;
    uint64_t cl;
    bool keep_alive;
};

#define R(name, raw, head, rc, st, body, cl, ka)                               \
    {                                                                          \
        name, S(raw), head, rc, st, body, cl, ka                               \
    }
#define RERR(name, raw) R(name, raw, false, HTTP_BAD, 0, HTTP_BODY_NONE, 0, 0)

static const struct resp_case resp_cases[] = {
    R("length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", false, HTTP_OK,
      200, HTTP_BODY_LENGTH, 5, true),
    R("length 0", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false,
      HTTP_OK, 200, HTTP_BODY_NONE, 0, true),
    R("close framing", "HTTP/1.1 200 OK\r\n\r\n", false, HTTP_OK, 200,
      HTTP_BODY_CLOSE, 0, false),
    R("chunked", "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n",
      false, HTTP_OK, 201, HTTP_BODY_CHUNKED, 0, true),
    R("chunked close",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
      "Connection: close\r\n\r\n",
      false, HTTP_OK, 200, HTTP_BODY_CHUNKED, 0, false),
    R("204", "HTTP/1.1 204 No Content\r\n\r\n", false, HTTP_OK, 204,
      HTTP_BODY_NONE, 0, true),
    R("304 with length",
      "HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n", false, HTTP_OK,
      304, HTTP_BODY_NONE, 0, true),
    R("100", "HTTP/1.1 100 Continue\r\n\r\n", false, HTTP_OK, 100,
      HTTP_BODY_NONE, 0, true),
    R("101", "HTTP/1.1 101 Switching\r\nUpgrade: x\r\n\r\n", false, HTTP_OK,
      101, HTTP_BODY_NONE, 0, true),
    R("head with length", "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n", true,
      HTTP_OK, 200, HTTP_BODY_NONE, 0, true),
    R("head with chunked",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", true, HTTP_OK,
      200, HTTP_BODY_NONE, 0, true),
    R("head without framing", "HTTP/1.1 200 OK\r\n\r\n", true, HTTP_OK, 200,
      HTTP_BODY_NONE, 0, true),
    R("1.0", "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", false, HTTP_OK,
      200, HTTP_BODY_LENGTH, 1, false),
    R("1.0 keep-alive",
      "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n",
      false, HTTP_OK, 200, HTTP_BODY_LENGTH, 1, true),
    R("1.1 close",
      "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n",
      false, HTTP_OK, 200, HTTP_BODY_LENGTH, 1, false),
    R("no reason", "HTTP/1.1 404\r\nContent-Length: 0\r\n\r\n", false, HTTP_OK,
      404, HTTP_BODY_NONE, 0, true),
    R("empty reason", "HTTP/1.1 404 \r\nContent-Length: 0\r\n\r\n", false,
      HTTP_OK, 404, HTTP_BODY_NONE, 0, true),
    R("reason text", "HTTP/1.1 599 a\tb \x80\xff!\r\nContent-Length: 0\r\n\r\n",
      false, HTTP_OK, 599, HTTP_BODY_NONE, 0, true),
    RERR("te and cl", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                      "Content-Length: 5\r\n\r\n"),
    RERR("te and cl on head", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                              "Transfer-Encoding: chunked\r\n\r\n"),
    RERR("gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"),
    RERR("gzip chunked",
         "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
    RERR("chunked twice",
         "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n"),
    RERR("te on 1.0", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
    RERR("cl twice", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n"
                     "Content-Length: 1\r\n\r\n"),
    RERR("cl list", "HTTP/1.1 200 OK\r\nContent-Length: 1,1\r\n\r\n"),
    RERR("cl sign", "HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\n"),
    RERR("connection content-length",
         "HTTP/1.1 200 OK\r\nConnection: Content-Length\r\n"
         "Content-Length: 1\r\n\r\n"),
    RERR("te underscore", "HTTP/1.1 200 OK\r\nTransfer_Encoding: chunked\r\n"
                          "Content-Length: 1\r\n\r\n"),
    RERR("cl underscore", "HTTP/1.1 200 OK\r\nContent_Length: 1\r\n\r\n"),
    R("token underscore is no fencing header here",
      "HTTP/1.1 200 OK\r\nFencing_Token: 1\r\nContent-Length: 0\r\n\r\n", false,
      HTTP_OK, 200, HTTP_BODY_NONE, 0, true),
    RERR("two digits", "HTTP/1.1 20 OK\r\n\r\n"),
    RERR("four digits", "HTTP/1.1 2000 OK\r\n\r\n"),
    RERR("letters", "HTTP/1.1 abc OK\r\n\r\n"),
    RERR("status 099", "HTTP/1.1 099 X\r\n\r\n"),
    RERR("status 600", "HTTP/1.1 600 X\r\n\r\n"),
    RERR("no space after version", "HTTP/1.1\r\n\r\n"),
    RERR("two spaces", "HTTP/1.1  200 OK\r\n\r\n"),
    RERR("reason glued", "HTTP/1.1 200OK\r\n\r\n"),
    RERR("bare LF status", "HTTP/1.1 200 OK\n\r\n"),
    RERR("bare LF field", "HTTP/1.1 200 OK\r\nA: b\n\r\n"),
    RERR("bare CR reason", "HTTP/1.1 200 O\rK\r\n\r\n"),
    RERR("CTL in reason", "HTTP/1.1 200 O\x01K\r\n\r\n"),
    RERR("obs-fold", "HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n"),
    RERR("space before colon", "HTTP/1.1 200 OK\r\nA : b\r\n\r\n"),
    RERR("leading CRLF", "\r\nHTTP/1.1 200 OK\r\n\r\n"),
    RERR("version garbage", "HTTP/x 200 OK\r\n\r\n"),
    R("version 2", "HTTP/2.0 200 OK\r\n\r\n", false, HTTP_BAD_VERSION, 0,
      HTTP_BODY_NONE, 0, false),
    R("version 1.2", "HTTP/1.2 200 OK\r\n\r\n", false, HTTP_BAD_VERSION, 0,
      HTTP_BODY_NONE, 0, false),
};

static void
test_response_table(void **state)
{
    static struct http_response resp;

    (void)state;
    for (size_t i = 0; i < NELEM(resp_cases); i++) {
        const struct resp_case *c = &resp_cases[i];
        char *b = dup_exact(c->raw, c->len);
        enum http_rc rc =
            http_parse_response(b, c->len, &lim_std, c->head, &resp);

        if (rc != c->rc) {
            fail_msg("%s: rc %d, want %d (%s)", c->name, rc, c->rc,
                     resp.error != NULL ? resp.error : "-");
        }
        if (rc == HTTP_OK &&
            (resp.head_len != c->len || resp.status != c->status ||
             resp.body != c->body || resp.content_length != c->cl ||
             resp.keep_alive != c->keep_alive)) {
            fail_msg("%s: head_len %zu status %d body %d cl %llu ka %d",
                     c->name, resp.head_len, resp.status, resp.body,
                     (unsigned long long)resp.content_length, resp.keep_alive);
        }
        if (rc == HTTP_OK) {
            assert_in(resp.reason, b, c->len);
        }
        for (size_t k = 0; k < c->len; k++) {
            enum http_rc prc = resp_rc(c->raw, k, c->head);

            if (prc != HTTP_INCOMPLETE && (c->rc == HTTP_OK || prc != c->rc)) {
                fail_msg("%s: prefix %zu gives %d", c->name, k, prc);
            }
        }
        free(b);
    }
}

static void
test_response_fields(void **state)
{
    static const char raw[] = "HTTP/1.1 503 Service Unavailable\r\n"
                              "Retry-After: 5\r\nConnection: retry-after\r\n"
                              "Content-Length: 2\r\n\r\nokHTTP/1.1 200 \r\n";
    static struct http_response resp;

    (void)state;
    assert_int_equal(
        http_parse_response(raw, sizeof(raw) - 1, &lim_std, false, &resp),
        HTTP_OK);
    assert_int_equal(resp.head_len, sizeof(raw) - 1 - 17);
    assert_int_equal(resp.status, 503);
    assert_int_equal(resp.minor, 1);
    assert_true(slice_eq(resp.reason, "Service Unavailable"));
    assert_int_equal(resp.nheaders, 3);
    assert_true(resp.headers[0].hop);
    assert_true(resp.headers[1].hop);
    assert_false(resp.headers[2].hop);
    assert_int_equal(http_parse_response(raw + resp.head_len + 2, 15, &lim_std,
                                         false, &resp),
                     HTTP_INCOMPLETE);
    assert_int_equal(resp_rc(raw, 0, false), HTTP_INCOMPLETE);
}

/* Responses a byte at a time: the result of one read. */
static void
test_response_bytewise(void **state)
{
    static struct http_response one, more;

    (void)state;
    for (size_t i = 0; i < NELEM(resp_cases); i++) {
        const struct resp_case *c = &resp_cases[i];
        struct http_scan sc = {0};
        enum http_rc want =
            http_parse_response(c->raw, c->len, &lim_std, c->head, &one);
        enum http_rc rc = HTTP_INCOMPLETE;
        size_t k;

        for (k = 1; k <= c->len && rc == HTTP_INCOMPLETE; k++) {
            char *b = dup_exact(c->raw, k);

            rc = http_parse_response_more(&sc, b, k, k == c->len, &lim_std,
                                          c->head, &more);
            free(b);
        }
        if (rc != want) {
            fail_msg("%s: bytewise rc %d, one read %d", c->name, rc, want);
        }
        assert_true(sc.looked <= 3 * c->len);
        assert_true(sc.parses <= 3);
        if (rc == HTTP_OK) {
            assert_int_equal(k - 1, c->len);
            assert_int_equal(more.head_len, one.head_len);
            assert_int_equal(more.status, one.status);
            assert_int_equal(more.body, one.body);
            assert_int_equal(more.keep_alive, one.keep_alive);
        }
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_response_table),
        cmocka_unit_test(test_response_fields),
        cmocka_unit_test(test_response_bytewise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
