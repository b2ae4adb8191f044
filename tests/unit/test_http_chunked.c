/* test_http_chunked.c: the chunked decoder fed in pieces of every size,
 * its bounds and trailer names, and random mutations of request,
 * response and chunked seeds. */
#include "http_test.h"

/* The chunked decoder. A case is a body, possibly followed by the next
 * message: body_len is how much belongs to the body, or -1 if refused,
 * or -2 if the input is a valid but unfinished body. */
struct chunk_case {
    const char *name;
    const char *raw;
    size_t len;
    long body_len;
};

#define C(name, raw, blen)                                                     \
    {                                                                          \
        name, S(raw), blen                                                     \
    }
#define CBAD(name, raw)                                                        \
    {                                                                          \
        name, S(raw), -1                                                       \
    }
#define CMORE(name, raw)                                                       \
    {                                                                          \
        name, S(raw), -2                                                       \
    }

static const struct chunk_case chunk_cases[] = {
    C("last only", "0\r\n\r\n", 5),
    C("one chunk", "5\r\nhello\r\n0\r\n\r\n", 15),
    C("two chunks", "5\r\nhello\r\n1\r\n!\r\n0\r\n\r\n", 21),
    C("hex", "A\r\n0123456789\r\na\r\n0123456789\r\n0\r\n\r\n", 35),
    C("16 digits", "0000000000000005\r\nhello\r\n0\r\n\r\n", 30),
    C("extensions", "5;a=b;c=\"x y\"\r\nhello\r\n0;last\r\n\r\n", 32),
    C("trailers", "0\r\nX-Sum: abc\r\nY:\r\n\r\n", 21),
    C("trailer text", "0\r\nX: a\tb \x80\r\n\r\n", 15),
    C("then next message", "3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\n", 13),
    C("then garbage", "0\r\n\r\n\0\0\0", 5),
    CMORE("unfinished data", "10\r\nabc"),
    CMORE("unfinished trailer", "0\r\nX: y\r\n"),
    CMORE("huge chunk", "7fffffffffffffff\r\nabc"),
    CMORE("empty", ""),
    CBAD("empty size", "\r\nabc\r\n0\r\n\r\n"),
    CBAD("not hex", "x\r\n"),
    CBAD("leading space", " 5\r\nhello\r\n0\r\n\r\n"),
    CBAD("trailing space", "5 \r\nhello\r\n0\r\n\r\n"),
    CBAD("space before ext", "5 ;a\r\nhello\r\n0\r\n\r\n"),
    CBAD("sign", "-5\r\n"),
    CBAD("0x", "0x5\r\n"),
    CBAD("17 digits", "00000000000000005\r\nhello\r\n0\r\n\r\n"),
    CBAD("overflow", "8000000000000000\r\n"),
    CBAD("overflow 2^64", "ffffffffffffffff\r\n"),
    CBAD("bare LF size", "5\nhello\r\n0\r\n\r\n"),
    CBAD("bare CR size", "5\rhello\r\n0\r\n\r\n"),
    CBAD("no CRLF after data", "5\r\nhelloX\r\n0\r\n\r\n"),
    CBAD("LF after data", "5\r\nhello\n0\r\n\r\n"),
    CBAD("CR after data", "5\r\nhello\r0\r\n\r\n"),
    CBAD("ext CTL", "5;a\x01\r\nhello\r\n0\r\n\r\n"),
    CBAD("ext bare LF", "5;a\nhello\r\n0\r\n\r\n"),
    CBAD("trailer obs-fold", "0\r\nX: a\r\n b\r\n\r\n"),
    CBAD("trailer space colon", "0\r\nX : a\r\n\r\n"),
    CBAD("trailer no colon", "0\r\nX\r\n\r\n"),
    CBAD("trailer empty name", "0\r\n: a\r\n\r\n"),
    CBAD("trailer CTL", "0\r\nX: a\x7f\r\n\r\n"),
    CBAD("trailer bare LF", "0\r\nX: a\n\r\n"),
    CBAD("end bare CR", "0\r\n\rX"),
    CBAD("end bare LF", "0\r\n\n"),
};

struct chunk_result {
    bool err;
    bool done;
    size_t consumed;
};

/* Feed raw in the pieces that cuts[] delimits (ascending offsets). */
static struct chunk_result
feed_split(const char *raw, size_t len, const size_t *cuts, size_t ncuts)
{
    struct http_chunked c;
    struct chunk_result r = {false, false, 0};
    size_t from = 0;

    http_chunked_init(&c);
    for (size_t i = 0; i <= ncuts; i++) {
        size_t to = i < ncuts ? cuts[i] : len;
        char *piece = dup_exact(raw + from, to - from);
        size_t got = http_chunked_feed(&c, piece, to - from);

        free(piece);
        if (got == (size_t)-1) {
            assert_non_null(c.error);
            assert_int_equal(http_chunked_feed(&c, "0", 1), (size_t)-1);
            r.err = true;
            return r;
        }
        assert_true(got <= to - from);
        r.consumed += got;
        if (c.done) {
            r.done = true;
            assert_int_equal(http_chunked_feed(&c, "0\r\n", 3), 0);
            return r;
        }
        assert_int_equal(got, to - from);
        from = to;
    }
    return r;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t
rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Whole, byte by byte, and in random pieces: always the same answer. */
static void
check_chunk_splits(const char *name, const char *raw, size_t len,
                   struct chunk_result want)
{
    size_t cuts[64];
    struct chunk_result r;
    size_t *bytes = malloc((len + 1) * sizeof(*bytes));

    assert_non_null(bytes);
    for (size_t i = 0; i < len; i++) {
        bytes[i] = i + 1;
    }
    r = feed_split(raw, len, bytes, len > 0 ? len - 1 : 0);
    free(bytes);
    if (r.err != want.err || r.done != want.done ||
        (!r.err && r.consumed != want.consumed)) {
        fail_msg("%s: byte by byte: err %d done %d consumed %zu", name, r.err,
                 r.done, r.consumed);
    }
    for (int round = 0; round < 200 && len > 1; round++) {
        size_t n = (size_t)(rng() % (len < 64 ? len : 64));
        size_t at = 0;

        for (size_t i = 0; i < n; i++) {
            at += 1 + (size_t)(rng() % ((len - 1) / (n + 1) + 1));
            if (at >= len) {
                n = i;
                break;
            }
            cuts[i] = at;
        }
        r = feed_split(raw, len, cuts, n);
        if (r.err != want.err || r.done != want.done ||
            (!r.err && r.consumed != want.consumed)) {
            fail_msg("%s: %zu pieces: err %d done %d consumed %zu", name, n + 1,
                     r.err, r.done, r.consumed);
        }
    }
}

static void
test_chunked_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < NELEM(chunk_cases); i++) {
        const struct chunk_case *c = &chunk_cases[i];
        struct chunk_result want = {c->body_len == -1, c->body_len >= 0,
                                    c->body_len >= 0 ? (size_t)c->body_len
                                                     : c->len};
        struct chunk_result r = feed_split(c->raw, c->len, NULL, 0);

        if (r.err != want.err || r.done != want.done ||
            (!r.err && r.consumed != want.consumed)) {
            fail_msg("%s: err %d done %d consumed %zu", c->name, r.err, r.done,
                     r.consumed);
        }
        check_chunk_splits(c->name, c->raw, c->len, want);
    }
}

static void
test_chunked_bounds(void **state)
{
    static char buf[16384];
    struct chunk_result want = {false, true, 0};
    struct chunk_result bad = {true, false, 0};
    struct http_chunked c;
    size_t n;

    (void)state;
    /* Extensions: a size line of 4096 bytes is fine, 4097 is not. */
    n = (size_t)sprintf(buf, "1;");
    memset(buf + n, 'e', 4096 - n);
    n = 4096;
    n += (size_t)sprintf(buf + n, "\r\nx\r\n0\r\n\r\n");
    want.consumed = n;
    check_chunk_splits("4096-byte size line", buf, n, want);
    n = (size_t)sprintf(buf, "1;");
    memset(buf + n, 'e', 4097 - n);
    n = 4097;
    n += (size_t)sprintf(buf + n, "\r\nx\r\n0\r\n\r\n");
    check_chunk_splits("4097-byte size line", buf, n, bad);

    /* Trailers: 8192 bytes in all, final CRLF included, and no more. */
    n = (size_t)sprintf(buf, "0\r\nX: ");
    memset(buf + n, 'v', 3 + 8192 - 4 - n);
    n = 3 + 8192 - 4;
    n += (size_t)sprintf(buf + n, "\r\n\r\n");
    want.consumed = n;
    check_chunk_splits("8 KiB trailers", buf, n, want);
    n = (size_t)sprintf(buf, "0\r\nX: ");
    memset(buf + n, 'v', 3 + 8192 - 3 - n);
    n = 3 + 8192 - 3;
    n += (size_t)sprintf(buf + n, "\r\n\r\n");
    check_chunk_splits("8 KiB + 1 trailers", buf, n, bad);

    /* A large chunk is counted, not buffered. */
    http_chunked_init(&c);
    assert_int_equal(http_chunked_feed(&c, S("7FFFFFFFFFFFFFFF\r\n")), 18);
    assert_true(c.remaining == (uint64_t)INT64_MAX);
    memset(buf, 'd', sizeof(buf));
    assert_int_equal(http_chunked_feed(&c, buf, sizeof(buf)), sizeof(buf));
    assert_true(c.remaining == (uint64_t)INT64_MAX - sizeof(buf));
    assert_false(c.done);
    assert_int_equal(http_chunked_feed(&c, buf, 0), 0);
}

/* Random damage to valid messages: no crash, no read past len (ASan),
 * slices inside the buffer, prefixes consistent with the whole, and the
 * chunked decoder indifferent to splits. */
static void
test_mutations(void **state)
{
    static const char *seeds[] = {
        "GET /a?b HTTP/1.1\r\nHost: a\r\nConnection: x, close\r\n\r\n",
        "POST http://h/x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: "
        "chunked\r\nContent-Length: 1\r\n\r\n",
        "\r\nPUT /x HTTP/1.0\r\nContent-Length: 10\r\nExpect: 100-continue"
        "\r\n\r\n",
    };
    static const char *rseeds[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n",
        "HTTP/1.0 204 \r\nTransfer-Encoding: chunked\r\n\r\n",
    };
    static const char *cseeds[] = {
        "5;x=y\r\nhello\r\n0\r\nA: b\r\n\r\n",
        "1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n",
    };
    static const char alphabet[] = "\r\n :;,\t\0\x7f\x80#/?aZ0fF9-\"";
    static struct http_header req_headers[HTTP_MAX_HEADERS];
    static struct http_request req = {.headers = req_headers};
    static struct http_response resp;
    char buf[256];

    (void)state;
    for (int round = 0; round < 3000; round++) {
        int kind = round % 3;
        const char *seed = kind == 0   ? seeds[rng() % NELEM(seeds)]
                           : kind == 1 ? rseeds[rng() % NELEM(rseeds)]
                                       : cseeds[rng() % NELEM(cseeds)];
        size_t len = strlen(seed);
        int edits = 1 + (int)(rng() % 3);
        char *b;
        enum http_rc rc;

        memcpy(buf, seed, len);
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t)(rng() % len);
            char ch = alphabet[rng() % (sizeof(alphabet) - 1)];

            switch (rng() % 3) {
            case 0:
                buf[at] = ch;
                break;
            case 1:
                if (len < sizeof(buf)) {
                    memmove(buf + at + 1, buf + at, len - at);
                    buf[at] = ch;
                    len++;
                }
                break;
            default:
                if (len > 1) {
                    memmove(buf + at, buf + at + 1, len - at - 1);
                    len--;
                }
                break;
            }
        }
        if (kind == 2) {
            struct chunk_result want = feed_split(buf, len, NULL, 0);
            check_chunk_splits("mutation", buf, len, want);
            continue;
        }
        b = dup_exact(buf, len);
        if (kind == 0) {
            rc = http_parse_request(b, len, &lim_std, fence, &req);
            if (rc == HTTP_OK) {
                assert_true(req.head_len <= len);
                assert_in(req.method, b, len);
                assert_in(req.target, b, len);
                assert_in(req.path, b, len);
                for (size_t h = 0; h < req.nheaders; h++) {
                    assert_in(req.headers[h].name, b, len);
                    assert_in(req.headers[h].value, b, len);
                }
            }
            for (size_t k = 0; k < len; k++) {
                enum http_rc prc = req_rc(b, k, &lim_std);
                bool whole = rc == HTTP_OK && k >= req.head_len;

                if (whole ? prc != HTTP_OK
                          : prc != HTTP_INCOMPLETE &&
                                (prc != rc || rc == HTTP_OK)) {
                    fail_msg("mutation %d: prefix %zu gives %d, whole %d",
                             round, k, prc, rc);
                }
            }
        } else {
            rc = http_parse_response(b, len, &lim_std, false, &resp);
            if (rc == HTTP_OK) {
                assert_true(resp.head_len <= len);
                assert_in(resp.reason, b, len);
            }
        }
        free(b);
    }
}

/* Trailers may not carry framing, routing or the fencing headers. */
static void
test_chunked_trailer_names(void **state)
{
    static const struct {
        const char *body;
        bool ok;
    } cases[] = {
        {"5\r\nhello\r\n0\r\nX-Sum: 1\r\n\r\n", true},
        {"5\r\nhello\r\n0\r\nFencing-Token: 9\r\n\r\n", false},
        {"5\r\nhello\r\n0\r\nfencing-token: 9\r\n\r\n", false},
        {"5\r\nhello\r\n0\r\nFencing-Resource: x\r\n\r\n", false},
        {"5\r\nhello\r\n0\r\nContent-Length: 5\r\n\r\n", false},
        {"5\r\nhello\r\n0\r\nTRANSFER-ENCODING: x\r\n\r\n", false},
        {"5\r\nhello\r\n0\r\nHost: a\r\n\r\n", false},
        {"5\r\nhello\r\n0\r\nFencing-Token-Extra: 9\r\n\r\n", true},
        /* Every spelling a server may read as a refused name. */
        {"5\r\nhello\r\n0\r\nFencing_Token: 9\r\n\r\n", false},
        {"5\r\nhello\r\n0\r\nFENCING.TOKEN: 9\r\n\r\n", false},
        {"5\r\nhello\r\n0\r\nfencing_resource: x\r\n\r\n", false},
        {"5\r\nhello\r\n0\r\nContent_Length: 5\r\n\r\n", false},
        {"5\r\nhello\r\n0\r\ncontent~length: 5\r\n\r\n", false},
        {"5\r\nhello\r\n0\r\nTransfer_Encoding: chunked\r\n\r\n", false},
        {"5\r\nhello\r\n0\r\nhOST: a\r\n\r\n", false},
        {"5\r\nhello\r\n0\r\nX-Sum: 1\r\nFencing_Token: 9\r\n\r\n", false},
        {"5\r\nhello\r\n0\r\nFencing_Token_: 9\r\n\r\n", true},
        {"5\r\nhello\r\n0\r\nFencing_Toke: 9\r\n\r\n", true},
        {"5\r\nhello\r\n0\r\nHosts: a\r\n\r\n", true},
        {"5\r\nhello\r\n0\r\nHos: a\r\n\r\n", true},
        /* A configured name longer than any buffer still counts. */
        {"5\r\nhello\r\n0\r\nX-A-Very-Long-Configured-Fencing-Token-"
         "Header-Name: 9\r\n\r\n",
         false},
        {"5\r\nhello\r\n0\r\nx_a_very_long_configured_fencing_token_"
         "header_name: 9\r\n\r\n",
         false},
        {"5\r\nhello\r\n0\r\nX-Very-Long-Trailer-Name-That-Goes-On-"
         "And-On: 1\r\n\r\n",
         true},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = strlen(cases[i].body);
        for (size_t split = 1; split <= n; split++) {
            struct http_chunked c;
            size_t a, b = 0;

            http_chunked_init(&c);
            c.forbid[0] = "Fencing-Token";
            c.forbid[1] = strstr(cases[i].body, "onfigured") != NULL
                              ? "X-A-Very-Long-Configured-Fencing-Token-"
                                "Header-Name"
                              : "Fencing-Resource";
            a = http_chunked_feed(&c, cases[i].body, split);
            if (a != (size_t)-1 && split < n && !c.done) {
                b = http_chunked_feed(&c, cases[i].body + split, n - split);
            }
            if (cases[i].ok) {
                assert_true(a != (size_t)-1 && b != (size_t)-1);
                assert_true(c.done);
            } else {
                assert_true(a == (size_t)-1 || b == (size_t)-1);
                assert_non_null(c.error);
            }
        }
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunked_table),
        cmocka_unit_test(test_chunked_bounds),
        cmocka_unit_test(test_chunked_trailer_names),
        cmocka_unit_test(test_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
