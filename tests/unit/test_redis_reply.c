/* test_redis_reply.c: redis_reply_dec, the one reader of the decimal
 * fences and marks the Redis scripts answer, for the mark store and the
 * lock backend alike; and a cluster's CLUSTER SLOTS ranges, read from
 * the bytes a node sends. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../proxy/clients/redis_reply.h"

struct dec_case {
    const char *s;
    bool ok;
    int64_t want;
};

static const struct dec_case dec_cases[] = {
    {"0", true, 0},
    {"7", true, 7},
    {"0042", true, 42},
    {"9223372036854775807", true, INT64_MAX},
    {"9223372036854775808", false, 0},  /* INT64_MAX + 1 */
    {"9999999999999999999", false, 0},  /* 19 digits, above */
    {"00000000000000000001", false, 0}, /* 20 digits */
    {"", false, 0},
    {"-1", false, 0},
    {"+1", false, 0},
    {" 1", false, 0},
    {"1 ", false, 0},
    {"12a", false, 0},
};

static void
test_parse_dec(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(dec_cases) / sizeof(dec_cases[0]); i++) {
        const struct dec_case *c = &dec_cases[i];
        int64_t v = -5;

        assert_int_equal(redis_reply_dec(c->s, strlen(c->s), &v), c->ok);
        assert_true(v == (c->ok ? c->want : -5)); /* untouched on false */
    }
}

static void
test_parse_dec_reads_len_bytes(void **state)
{
    int64_t v = 0;

    (void)state;
    assert_true(redis_reply_dec("123xyz", 3, &v));
    assert_int_equal(v, 123);
}

/* ---- CLUSTER SLOTS ranges --------------------------------------------- */

/* The reply that resp spells, read as a connection reads it. */
static redisReply *
reply_of(const char *resp, size_t len)
{
    redisReader *rd = redisReaderCreate();
    void *rep = NULL;

    assert_non_null(rd);
    assert_int_equal(redisReaderFeed(rd, resp, len), REDIS_OK);
    assert_int_equal(redisReaderGetReply(rd, &rep), REDIS_OK);
    assert_non_null(rep);
    redisReaderFree(rd);
    return rep;
}

/* The range [start, end, [host, port, "id"]] as RESP, read. */
static redisReply *
range_of(long long start, long long end, const char *host, size_t hlen,
         long long port)
{
    size_t cap = hlen + 200;
    char *buf = malloc(cap);
    int n;
    redisReply *rep;

    assert_non_null(buf);
    n = snprintf(buf, cap, "*3\r\n:%lld\r\n:%lld\r\n*3\r\n$%zu\r\n", start, end,
                 hlen);
    memcpy(buf + n, host, hlen);
    n += (int)hlen;
    n += snprintf(buf + n, cap - (size_t)n, "\r\n:%lld\r\n$2\r\nid\r\n", port);
    rep = reply_of(buf, (size_t)n);
    free(buf);
    return rep;
}

/* Whether the range reads, and as what. */
static void
range_reads(redisReply *rep, bool ok, unsigned start, unsigned end, size_t hlen,
            unsigned port)
{
    struct redis_slots_range r = {.start = 99};

    assert_int_equal(redis_reply_slots_range(rep, &r), ok);
    if (!ok) {
        assert_int_equal(r.start, 99); /* untouched */
    } else {
        assert_int_equal(r.start, start);
        assert_int_equal(r.end, end);
        assert_int_equal(r.hlen, hlen);
        assert_int_equal(r.port, port);
        if (hlen > 0) {
            assert_ptr_equal(r.host, rep->element[2]->element[0]->str);
        }
    }
    freeReplyObject(rep);
}

/* Slots and ports at and past their ends. */
static void
test_slots_range_numbers(void **state)
{
    (void)state;
    range_reads(range_of(0, 16383, "h", 1, 7000), true, 0, 16383, 1, 7000);
    range_reads(range_of(5, 5, "h", 1, 1), true, 5, 5, 1, 1);
    range_reads(range_of(16383, 16383, "h", 1, 65535), true, 16383, 16383, 1,
                65535);
    range_reads(range_of(0, 16384, "h", 1, 7000), false, 0, 0, 0, 0);
    range_reads(range_of(-1, 5, "h", 1, 7000), false, 0, 0, 0, 0);
    range_reads(range_of(6, 5, "h", 1, 7000), false, 0, 0, 0, 0);
    range_reads(range_of(0, 5, "h", 1, 0), false, 0, 0, 0, 0);
    range_reads(range_of(0, 5, "h", 1, -1), false, 0, 0, 0, 0);
    range_reads(range_of(0, 5, "h", 1, 65536), false, 0, 0, 0, 0);
    range_reads(range_of(0, 5, "h", 1, 4294967297LL), false, 0, 0, 0, 0);
}

/* Hosts of 0 to 256 bytes, and the bytes no host has. "" and "?" are
 * the answering node's (hlen 0). */
static void
test_slots_range_hosts(void **state)
{
    static const struct {
        const char *host;
        size_t len;
        bool ok;
        size_t hlen;
    } cases[] = {
        {"", 0, true, 0},
        {"?", 1, true, 0},
        {"h", 1, true, 1},
        {"??", 2, true, 2},
        {"node-7.cache.example.com", 24, true, 24},
        {"10.0.0.1", 8, true, 8},
        {"fe80::1", 7, true, 7},
        {"a b", 3, false, 0},
        {"a\tb", 3, false, 0},
        {"a\nX", 3, false, 0},
        {"a\0b", 3, false, 0},
        {"a@b", 3, false, 0},
        {"a/b", 3, false, 0},
        {"[::1]", 5, false, 0},
        {"a\x7f", 2, false, 0},
        {"a\xff", 2, false, 0},
    };
    char big[257];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        print_message("host \"%s\"\n", cases[i].host);
        range_reads(range_of(0, 9, cases[i].host, cases[i].len, 7000),
                    cases[i].ok, 0, 9, cases[i].hlen, 7000);
    }
    memset(big, 'h', sizeof(big));
    range_reads(range_of(0, 9, big, 255, 7000), true, 0, 9, 255, 7000);
    range_reads(range_of(0, 9, big, 256, 7000), false, 0, 0, 0, 0);
    range_reads(range_of(0, 9, big, 257, 7000), false, 0, 0, 0, 0);
}

/* What is no range at all: the wrong types, too few elements. */
static void
test_slots_range_shapes(void **state)
{
    static const char *const bad[] = {
        ":5\r\n",
        "*2\r\n:0\r\n:5\r\n",
        "*3\r\n$1\r\n0\r\n:5\r\n*2\r\n$1\r\nh\r\n:7000\r\n",
        "*3\r\n:0\r\n:5\r\n$1\r\nh\r\n",
        "*3\r\n:0\r\n:5\r\n*1\r\n$1\r\nh\r\n",
        "*3\r\n:0\r\n:5\r\n*2\r\n:1\r\n:7000\r\n",
        "*3\r\n:0\r\n:5\r\n*2\r\n$1\r\nh\r\n$4\r\n7000\r\n",
        "*3\r\n:0\r\n:5\r\n*2\r\n$-1\r\n:7000\r\n",
    };
    static const char good[] =
        "*4\r\n:0\r\n:5\r\n*2\r\n$1\r\nh\r\n:7000\r\n"
        "*2\r\n$1\r\nr\r\n:7001\r\n"; /* a replica after: not read */

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        print_message("reply %zu\n", i);
        range_reads(reply_of(bad[i], strlen(bad[i])), false, 0, 0, 0, 0);
    }
    range_reads(reply_of(good, sizeof(good) - 1), true, 0, 5, 1, 7000);
    assert_false(redis_reply_slots_range(NULL, &(struct redis_slots_range){0}));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_dec),
        cmocka_unit_test(test_parse_dec_reads_len_bytes),
        cmocka_unit_test(test_slots_range_numbers),
        cmocka_unit_test(test_slots_range_hosts),
        cmocka_unit_test(test_slots_range_shapes),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
