/* fuzz_http_response.c: libFuzzer target for the response head parser.
 * The first input byte chooses whether the request was HEAD (its low
 * bit); the rest is the response. Any violated invariant aborts. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_http.h"

static void
check_response(const struct http_response *r, const char *buf, size_t len,
               bool head_request, const struct http_limits *lim)
{
    check(r->error == NULL, "response: OK with an error");
    check(r->head_len >= 4 && r->head_len <= len &&
              r->head_len <= lim->max_head,
          "response: head_len out of range");
    check(memcmp(buf + r->head_len - 4, "\r\n\r\n", 4) == 0,
          "response: head does not end in CRLFCRLF");
    check(r->status >= 100 && r->status <= 599, "response: status range");
    check(r->minor == 0 || r->minor == 1, "response: bad minor");
    check(r->nheaders <= lim->max_headers, "response: too many headers");
    check_in(r->reason, buf, r->head_len, "response: reason slice");
    for (size_t i = 0; i < r->nheaders; i++) {
        check_in(r->headers[i].name, buf, r->head_len,
                 "response: header name slice");
        check_in(r->headers[i].value, buf, r->head_len,
                 "response: header value slice");
        check(r->headers[i].name.len > 0, "response: empty header name");
    }
    if (head_request || r->status < 200 || r->status == 204 ||
        r->status == 304) {
        check(r->body == HTTP_BODY_NONE, "response: body where none may be");
    }
    check((r->body == HTTP_BODY_LENGTH) == (r->content_length > 0),
          "response: content_length without a length body");
    check(r->content_length <= (uint64_t)INT64_MAX,
          "response: content_length over INT64_MAX");
    if (r->body == HTTP_BODY_CLOSE) {
        check(!r->keep_alive, "response: keep-alive with a close body");
    }
}

/* Parse buf[0..size) under lim and check what came out. */
static void
response_check(const char *buf, size_t size, bool head_request,
               const struct http_limits *lim)
{
    static struct http_response resp;
    static struct http_response again;
    enum http_rc rc;

    memset(&resp, 0xa5, sizeof(resp));
    rc = http_parse_response(buf, size, lim, head_request, &resp);
    if (rc == HTTP_OK) {
        check_response(&resp, buf, size, head_request, lim);
    } else {
        check_not_ok("response", rc, resp.error, size, lim);
    }

    if (rc == HTTP_OK) {
        size_t hl = resp.head_len;

        /* The head alone parses the same; a strict prefix is incomplete. */
        rc = http_parse_response(buf, hl, lim, head_request, &again);
        check(rc == HTTP_OK && again.head_len == hl &&
                  again.status == resp.status && again.body == resp.body &&
                  again.content_length == resp.content_length &&
                  again.keep_alive == resp.keep_alive,
              "response: head alone parses differently");
        rc = http_parse_response(buf, hl - 1, lim, head_request, &again);
        check(rc == HTTP_INCOMPLETE,
              "response: head minus one byte is not incomplete");
        rc = http_parse_response(buf, hl / 2, lim, head_request, &again);
        check(rc == HTTP_INCOMPLETE,
              "response: half of a head is not incomplete");
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    /* The low bit of the first byte: the request was HEAD. */
    response_check((const char *)data + 1, size - 1, (data[0] & 1) != 0,
                   &lim_std);
    response_check((const char *)data + 1, size - 1, (data[0] & 1) != 0,
                   &lim_tight);
    return 0;
}
