/* fuzz_http_request.c: libFuzzer target for the request head parser and
 * the chunked body decoder, which must give the same result however its
 * input is split. Any violated invariant aborts. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_http.h"

/* The default fencing header names, which the parser refuses in other
 * spellings. */
static const char *const fence[2] = {"Fencing-Token", "Fencing-Resource"};

/* Split points come from a generator seeded by the input itself, so a
 * crashing input replays exactly. */
static uint64_t
seed_of(const uint8_t *data, size_t size)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */

    for (size_t i = 0; i < size; i++) {
        h = (h ^ data[i]) * 1099511628211ull;
    }
    return h | 1;
}

static uint64_t
next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

struct chunk_result {
    size_t consumed;
    bool done;
    bool error;
    const char *why;
};

/* Feed p[0..n) to a fresh decoder in pieces; piece(i) gives the length of
 * the next piece (at least 1). Stops at an error or at the end of the
 * body, as a caller would. */
static struct chunk_result
chunk_run(const char *p, size_t n, int how, uint64_t seed)
{
    struct http_chunked c;
    struct chunk_result r = {0, false, false, NULL};
    size_t off = 0;

    http_chunked_init(&c);
    c.forbid[0] = fence[0];
    c.forbid[1] = fence[1];
    while (off < n) {
        size_t want = n - off;
        size_t got;

        if (how == 1) {
            want = 1;
        } else if (how == 2) {
            /* Mostly small pieces, sometimes large ones. */
            uint64_t x = next_rand(&seed);
            size_t cap = (x & 3) == 0 ? 4096 : 8;
            want = 1 + (size_t)((x >> 8) % cap);
        }
        if (want > n - off) {
            want = n - off;
        }
        got = http_chunked_feed(&c, p + off, want);
        if (got == (size_t)-1) {
            r.error = true;
            r.why = c.error;
            check(c.error != NULL, "chunked: error without a reason");
            check(!c.done, "chunked: error and done");
            check(http_chunked_feed(&c, p, n) == (size_t)-1,
                  "chunked: feeding after an error is not an error");
            break;
        }
        check(got <= want, "chunked: consumed more than fed");
        off += got;
        if (got < want) {
            check(c.done, "chunked: stopped early without done");
            break;
        }
    }
    r.consumed = off;
    r.done = c.done;
    if (c.done) {
        check(http_chunked_feed(&c, p, n) == 0,
              "chunked: feeding after done is not 0");
    }
    return r;
}

static void
chunk_check(const char *p, size_t n, uint64_t seed)
{
    struct chunk_result whole = chunk_run(p, n, 0, seed);
    struct chunk_result bytes;
    struct chunk_result parts;

    /* One byte at a time is quadratic in nothing, but keep it bounded. */
    if (n <= 65536) {
        bytes = chunk_run(p, n, 1, seed);
    } else {
        bytes = whole;
    }
    parts = chunk_run(p, n, 2, seed);
    for (int i = 0; i < 2; i++) {
        const struct chunk_result *o = i == 0 ? &bytes : &parts;

        if (whole.error != o->error || whole.done != o->done ||
            (!whole.error && whole.consumed != o->consumed)) {
            fprintf(stderr,
                    "whole: consumed %zu done %d error %d (%s); "
                    "%s: consumed %zu done %d error %d (%s)\n",
                    whole.consumed, whole.done, whole.error,
                    whole.why ? whole.why : "-", i == 0 ? "bytes" : "split",
                    o->consumed, o->done, o->error, o->why ? o->why : "-");
            fail("chunked: result depends on the split");
        }
        if (whole.error && strcmp(whole.why, o->why) != 0) {
            fprintf(stderr, "whole: %s; split: %s\n", whole.why, o->why);
            fail("chunked: error reason depends on the split");
        }
    }
}

static void
check_request(const struct http_request *req, const char *buf, size_t len,
              const struct http_limits *lim)
{
    check(req->error == NULL, "request: OK with an error");
    check(req->head_len >= 4 && req->head_len <= len,
          "request: head_len out of range");
    check(req->head_len <= lim->max_head, "request: head over max_head");
    check(req->nheaders <= lim->max_headers, "request: too many headers");
    check(req->minor == 0 || req->minor == 1, "request: bad minor");
    check(memcmp(buf + req->head_len - 4, "\r\n\r\n", 4) == 0,
          "request: head does not end in CRLFCRLF");
    check(req->method.len > 0, "request: empty method");
    check(req->target.len > 0 && req->target.len <= lim->max_uri,
          "request: target length");
    check(req->path.len > 0, "request: empty path");
    check_in(req->method, buf, req->head_len, "request: method slice");
    check_in(req->target, buf, req->head_len, "request: target slice");
    check_in(req->path, buf, req->head_len, "request: path slice");
    for (size_t i = 0; i < req->nheaders; i++) {
        check_in(req->headers[i].name, buf, req->head_len,
                 "request: header name slice");
        check_in(req->headers[i].value, buf, req->head_len,
                 "request: header value slice");
        check(req->headers[i].name.len > 0, "request: empty header name");
    }
    check((req->body == HTTP_BODY_LENGTH) == (req->content_length > 0),
          "request: content_length without a length body");
    check(req->content_length <= (uint64_t)INT64_MAX,
          "request: content_length over INT64_MAX");
    check(req->body != HTTP_BODY_CLOSE, "request: close-delimited body");
}

/* buf[0..size) arriving in random pieces through
 * http_parse_request_more, the last call final: the result one read
 * gives (rc), found by looking at each byte a bounded number of times. */
static void
more_check(const char *buf, size_t size, const struct http_limits *lim,
           enum http_rc rc, uint64_t seed)
{
    static struct http_header req_headers[HTTP_MAX_HEADERS];
    static struct http_request req = {.headers = req_headers};
    struct http_scan sc = {0};
    enum http_rc got = HTTP_INCOMPLETE;
    size_t len = 0;

    while (got == HTTP_INCOMPLETE && len < size) {
        len += 1 + (size_t)(next_rand(&seed) % 64);
        if (len > size) {
            len = size;
        }
        got = http_parse_request_more(&sc, buf, len, len == size, lim, fence,
                                      &req);
    }
    if (size == 0) {
        got = http_parse_request_more(&sc, buf, 0, true, lim, fence, &req);
    }
    check(got == rc, "request: read in pieces gives another result");
    check(sc.looked <= 3 * size + 3, "request: the search is not linear");
}

/* Parse buf[0..size) under lim and check what came out; the body after
 * a chunked head goes through chunk_check too. */
static void
request_check(const char *buf, size_t size, const struct http_limits *lim,
              uint64_t seed)
{
    static struct http_header req_headers[HTTP_MAX_HEADERS];
    static struct http_request req = {.headers = req_headers};
    static struct http_header again_headers[HTTP_MAX_HEADERS];
    static struct http_request again = {.headers = again_headers};
    enum http_rc rc;

    memset(&req, 0xa5, sizeof(req));
    req.headers = req_headers;
    rc = http_parse_request(buf, size, lim, fence, &req);
    if (rc == HTTP_OK) {
        check_request(&req, buf, size, lim);
    } else {
        check_not_ok("request", rc, req.error, size, lim);
    }
    more_check(buf, size, lim, rc, seed);

    if (rc == HTTP_OK) {
        size_t hl = req.head_len;
        size_t cut;

        /* The head alone parses the same; any strict prefix of it is
         * incomplete. */
        rc = http_parse_request(buf, hl, lim, fence, &again);
        check(rc == HTTP_OK && again.head_len == hl && again.body == req.body &&
                  again.content_length == req.content_length &&
                  again.nheaders == req.nheaders &&
                  again.keep_alive == req.keep_alive,
              "request: head alone parses differently");
        cut = (size_t)(next_rand(&seed) % hl);
        rc = http_parse_request(buf, cut, lim, fence, &again);
        if (rc != HTTP_INCOMPLETE) {
            fprintf(stderr, "prefix %zu of %zu: rc %d (%s)\n", cut, hl, (int)rc,
                    again.error ? again.error : "-");
            fail("request: prefix of a valid head is not incomplete");
        }
        rc = http_parse_request(buf, hl - 1, lim, fence, &again);
        check(rc == HTTP_INCOMPLETE,
              "request: head minus one byte is not incomplete");
        if (req.body == HTTP_BODY_CHUNKED) {
            chunk_check(buf + hl, size - hl, seed);
        }
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    uint64_t seed = seed_of(data, size);

    request_check(buf, size, &lim_std, seed);
    request_check(buf, size, &lim_tight, seed);
    chunk_check(buf, size, seed);
    return 0;
}
