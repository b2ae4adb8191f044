/* test_redis_slot.c: Redis Cluster hash slots (CRC16 with hash tags)
 * against Redis's documented values, and MOVED / ASK redirections. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../policies/redis_slot.h"

struct slot_case {
    const char *key;
    unsigned slot;
};

/* The CRC16 check value of "123456789" is 0x31C3 (Redis's crc16.c);
 * CLUSTER KEYSLOT of the others, from Redis's documentation and a live
 * cluster. */
static const struct slot_case slot_cases[] = {
    {"123456789", 0x31C3 & 16383},
    {"somekey", 11058},
    {"foo", 12182},
    {"foo{hash_tag}", 2515},
    {"bar{hash_tag}", 2515},
    {"hash_tag", 2515},
    {"{hash_tag}", 2515},
    {"lock:{hash_tag}", 2515},
    {"fence:{hash_tag}", 2515},
    /* The first '{' and the first '}' after it. */
    {"fence:{hash_tag}x}", 2515},
    {"fence:{hash_tag}{y}", 2515},
    {"a{{hash_tag}", 0}, /* the tag is "{hash_tag": computed below */
    /* An empty tag: the whole key counts. */
    {"{}", 0},
    {"fence:{}", 0},
    {"", 0},
};

static void
test_crc16(void **state)
{
    (void)state;
    assert_int_equal(redis_crc16("123456789", 9), 0x31C3);
    assert_int_equal(redis_crc16("", 0), 0);
}

static void
test_slots(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(slot_cases) / sizeof(slot_cases[0]); i++) {
        const struct slot_case *c = &slot_cases[i];
        unsigned want = c->slot;

        if (strcmp(c->key, "a{{hash_tag}") == 0) {
            want = redis_crc16("{hash_tag", 9) & 16383;
        } else if (strcmp(c->key, "{}") == 0 ||
                   strcmp(c->key, "fence:{}") == 0) {
            want = redis_crc16(c->key, strlen(c->key)) & 16383;
        }
        assert_int_equal(redis_slot(c->key, strlen(c->key)), want);
    }
}

/* A lock's two keys share a slot, whatever the name holds, unless it is
 * empty or begins with '}' (then the tag is empty and each whole key
 * counts: the cluster backend refuses such names). */
static void
test_lock_and_fence_share_a_slot(void **state)
{
    static const char *const names[] = {"documents/a", "x}y",   "{", "x}",
                                        "{a}",         "a{b}c", "é"};

    (void)state;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char lock[64], fence[64];
        int nl = snprintf(lock, sizeof(lock), "lock:{%s}", names[i]);
        int nf = snprintf(fence, sizeof(fence), "fence:{%s}", names[i]);

        assert_int_equal(redis_slot(lock, (size_t)nl),
                         redis_slot(fence, (size_t)nf));
    }
    assert_int_not_equal(redis_slot("lock:{}x}", 9),
                         redis_slot("fence:{}x}", 10));
}

struct redirect_case {
    const char *s;
    enum redis_redirect_kind kind;
    unsigned slot;
    const char *host;
    unsigned port;
};

static const struct redirect_case redirect_cases[] = {
    {"MOVED 3999 127.0.0.1:6381", REDIS_REDIRECT_MOVED, 3999, "127.0.0.1",
     6381},
    {"ASK 0 10.0.0.2:7000", REDIS_REDIRECT_ASK, 0, "10.0.0.2", 7000},
    {"MOVED 16383 redis-3.example:6379", REDIS_REDIRECT_MOVED, 16383,
     "redis-3.example", 6379},
    {"MOVED 1 ::1:6379", REDIS_REDIRECT_MOVED, 1, "::1", 6379},
    {"MOVED 1 [::1]:6379", REDIS_REDIRECT_MOVED, 1, "::1", 6379},
    {"MOVED 12 :6380", REDIS_REDIRECT_MOVED, 12, "", 6380},
    {"MOVED 16384 h:1", REDIS_REDIRECT_NONE, 0, NULL, 0},
    {"MOVED -1 h:1", REDIS_REDIRECT_NONE, 0, NULL, 0},
    {"MOVED 1 h:0", REDIS_REDIRECT_NONE, 0, NULL, 0},
    {"MOVED 1 h:65536", REDIS_REDIRECT_NONE, 0, NULL, 0},
    {"MOVED 1 h", REDIS_REDIRECT_NONE, 0, NULL, 0},
    {"MOVED 1 h:", REDIS_REDIRECT_NONE, 0, NULL, 0},
    {"MOVED 1", REDIS_REDIRECT_NONE, 0, NULL, 0},
    {"MOVED  1 h:1", REDIS_REDIRECT_NONE, 0, NULL, 0},
    {"MOVED 1 h h:1", REDIS_REDIRECT_NONE, 0, NULL, 0},
    {"MOVED 1 u@h:1", REDIS_REDIRECT_NONE, 0, NULL, 0},
    {"moved 1 h:1", REDIS_REDIRECT_NONE, 0, NULL, 0},
    {"ASKING", REDIS_REDIRECT_NONE, 0, NULL, 0},
    {"NOSCRIPT No matching script", REDIS_REDIRECT_NONE, 0, NULL, 0},
    {"CLUSTERDOWN The cluster is down", REDIS_REDIRECT_NONE, 0, NULL, 0},
    {"TRYAGAIN Multiple keys request during rehashing of slot",
     REDIS_REDIRECT_NONE, 0, NULL, 0},
    {"", REDIS_REDIRECT_NONE, 0, NULL, 0},
};

static void
test_redirects(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(redirect_cases) / sizeof(redirect_cases[0]);
         i++) {
        const struct redirect_case *c = &redirect_cases[i];
        struct redis_redirect r = {.kind = REDIS_REDIRECT_NONE};
        enum redis_redirect_kind k =
            redis_redirect_parse(c->s, strlen(c->s), &r);

        assert_int_equal(k, c->kind);
        if (k == REDIS_REDIRECT_NONE) {
            continue;
        }
        assert_int_equal(r.kind, c->kind);
        assert_int_equal(r.slot, c->slot);
        assert_int_equal(r.port, c->port);
        assert_int_equal(r.host.len, strlen(c->host));
        assert_memory_equal(r.host.p, c->host, r.host.len);
    }
}

/* The reply is not a C string: nothing past len is read. */
static void
test_redirect_stops_at_len(void **state)
{
    struct redis_redirect r;
    const char *s = "MOVED 3999 127.0.0.1:63819999";

    (void)state;
    assert_int_equal(redis_redirect_parse(s, 25, &r), REDIS_REDIRECT_MOVED);
    assert_int_equal(r.port, 6381);
}

/* A host a peer names (a redirection, a CLUSTER SLOTS answer) goes into
 * a redis:// URL after the seed's password: it must be one host and
 * nothing else (from CLUSTER SLOTS, "x@evil" made the URL's password
 * "pw@x" and its host "evil", while logs named "x@evil"). */
static void
test_host_ok(void **state)
{
    static const char *const good[] = {"127.0.0.1", "::1", "node-3.redis",
                                       "fe80::1%eth0"};
    static const char *const bad[] = {"a@b",  "a/b",   "[::1]",   "a b",
                                      "a\tb", "a\x7f", "\xc3\xa9"};

    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        assert_true(redis_host_ok(good[i], strlen(good[i])));
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_false(redis_host_ok(bad[i], strlen(bad[i])));
    }
    assert_false(redis_host_ok("a\0b", 3));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc16),
        cmocka_unit_test(test_slots),
        cmocka_unit_test(test_lock_and_fence_share_a_slot),
        cmocka_unit_test(test_redirects),
        cmocka_unit_test(test_redirect_stops_at_len),
        cmocka_unit_test(test_host_ok),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
