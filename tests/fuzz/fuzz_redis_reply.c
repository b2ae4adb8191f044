/* fuzz_redis_reply.c: libFuzzer target for what tidemark makes of Redis's
 * replies to its scripts (proxy/locks/lock_redis_reply.c and
 * proxy/clients/redis_reply.c). The input is raw RESP, read into replies
 * by hiredis's own reader, as a connection would. Invariants, for every
 * reply and every lock script:
 * - the answer is one of the script's: acquire OK, BUSY or ERROR; status
 *   OK, NONE or ERROR; release and extend OK, LOST or ERROR;
 * - an ERROR says nothing (fence 0, ttl 0);
 * - a held lease (acquire or status OK) has the fence the reply's second
 *   element spells in decimal, at least 1; acquire's TTL is the one
 *   asked, status's the reply's PTTL, never negative;
 * - release and extend answer with the caller's fence, extend OK with
 *   the TTL asked, the others with none;
 * - the mark store's {flag, mark} is read only from an array of exactly
 *   an integer and a decimal string, and the mark is that decimal;
 * - a CLUSTER SLOTS range (the reply, and each element of it) is read
 *   only from [start, end, [host, port, ...], ...] with 0 <= start <=
 *   end < 16384 and a port of 1 to 65535, as those integers; its host is
 *   the reply's own bytes, 1 to 255 of them, each a printable byte other
 *   than '[', ']', '/' and '@', or none for "" and "?" (the node that
 *   answered); a range refused writes nothing.
 * And for the weighing of every answer (redis_weigher_set), the input
 * read a second time by a reader that weighs, with as many commands
 * waiting as the input's length modulo 8: each answer it builds is the plain
 * reader's, weighs (counted here apart) at most REDIS_ANSWER_MAX, and
 * comes while a command waits, or is an error; it stops, with why, only
 * at an answer past the bound or one no command waits for, never sooner.
 * hiredis 0.14's plain reader allocates an array for any count a reply
 * announces (*328653477 is 2.6 GB, before a single element came), so
 * inputs that announce more than BIG elements or bytes are read by the
 * weighing reader alone, which refuses them. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "../../proxy/clients/redis_reply.h"
#include "../../proxy/locks/lock_redis_reply.h"
#include "fuzz.h"

#define FENCE_IN 42
#define BIG 65536
#define TTL_ASKED 30000

/* The decimal that element e spells, read apart from redis_reply_dec:
 * -1 when it is no string of 1 to 19 digits up to INT64_MAX. */
static int64_t
spelled(const redisReply *e)
{
    __int128 v = 0;

    if (e->type != REDIS_REPLY_STRING || e->len == 0 || e->len > 19) {
        return -1;
    }
    for (size_t i = 0; i < e->len; i++) {
        if (e->str[i] < '0' || e->str[i] > '9') {
            return -1;
        }
        v = v * 10 + (e->str[i] - '0');
    }
    return v > INT64_MAX ? -1 : (int64_t)v;
}

static void
held(const redisReply *rep, const struct rl_answer *a)
{
    check(rep->type == REDIS_REPLY_ARRAY && rep->elements >= 2 &&
              rep->element[0]->type == REDIS_REPLY_INTEGER &&
              rep->element[0]->integer == 1,
          "a lease held without {1, fence}");
    check(a->fence >= 1 && a->fence == spelled(rep->element[1]),
          "a held lease's fence is not the reply's");
}

static void
lock_answers(const redisReply *rep)
{
    for (int op = RL_S_ACQUIRE; op <= RL_S_STATUS; op++) {
        struct rl_answer a = rl_reply_read(op, rep, FENCE_IN, TTL_ASKED);

        check(a.res >= LOCK_OK && a.res <= LOCK_ERROR, "no such result");
        if (a.res == LOCK_ERROR) {
            check(a.fence == 0 && a.ttl_ms == 0, "an error says something");
            continue;
        }
        check(rep->type != REDIS_REPLY_ERROR, "an error reply answered");
        check(a.ttl_ms >= 0 && a.fence >= 0, "a negative fence or ttl");
        switch (op) {
        case RL_S_ACQUIRE:
            check(a.res == LOCK_OK || a.res == LOCK_BUSY, "acquire: no such");
            if (a.res == LOCK_OK) {
                held(rep, &a);
                check(a.ttl_ms == TTL_ASKED, "acquire: not the TTL asked");
            }
            break;
        case RL_S_STATUS:
            check(a.res == LOCK_OK || a.res == LOCK_NONE, "status: no such");
            if (a.res == LOCK_OK) {
                held(rep, &a);
                check(rep->elements == 3 &&
                          rep->element[2]->type == REDIS_REPLY_INTEGER,
                      "status: a lease without its PTTL");
            }
            break;
        default:
            check(a.res == LOCK_OK || a.res == LOCK_LOST, "release: no such");
            check(rep->type == REDIS_REPLY_INTEGER, "release: not a count");
            check(a.fence == FENCE_IN, "release: not the caller's fence");
            check(a.ttl_ms ==
                      (op == RL_S_EXTEND && a.res == LOCK_OK ? TTL_ASKED : 0),
                  "extend: not the TTL asked");
        }
    }
}

static void
store_pair(const redisReply *rep)
{
    long long flag = -7;
    int64_t mark = -7;

    if (!redis_reply_pair(rep, &flag, &mark)) {
        check(flag == -7 && mark == -7, "a refused pair wrote its outputs");
        return;
    }
    check(rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
              rep->element[0]->type == REDIS_REPLY_INTEGER &&
              flag == rep->element[0]->integer,
          "a pair from something else");
    check(mark >= 0 && mark == spelled(rep->element[1]),
          "a pair's mark is not its decimal");
}

/* Whether byte c may be in a host a cluster names, by the rule above. */
static bool
host_byte(unsigned char c)
{
    return c > ' ' && c < 0x7f && c != '[' && c != ']' && c != '/' && c != '@';
}

static void
slots_range(const redisReply *e)
{
    struct redis_slots_range r = {.start = 7, .port = 7};
    const redisReply *m, *h;

    if (!redis_reply_slots_range(e, &r)) {
        check(r.start == 7 && r.end == 0 && r.host == NULL && r.hlen == 0 &&
                  r.port == 7,
              "a refused range wrote its output");
        return;
    }
    check(e->type == REDIS_REPLY_ARRAY && e->elements >= 3 &&
              e->element[0]->type == REDIS_REPLY_INTEGER &&
              e->element[1]->type == REDIS_REPLY_INTEGER &&
              e->element[2]->type == REDIS_REPLY_ARRAY,
          "a range from something else");
    m = e->element[2];
    check(m->elements >= 2 && m->element[0]->type == REDIS_REPLY_STRING &&
              m->element[1]->type == REDIS_REPLY_INTEGER,
          "a range's master from something else");
    h = m->element[0];
    check(e->element[0]->integer >= 0 &&
              e->element[0]->integer <= e->element[1]->integer &&
              e->element[1]->integer < 16384 &&
              r.start == (unsigned)e->element[0]->integer &&
              r.end == (unsigned)e->element[1]->integer,
          "a range's slots are not its integers, or out of 0..16383");
    check(m->element[1]->integer >= 1 && m->element[1]->integer <= 65535 &&
              r.port == (unsigned)m->element[1]->integer,
          "a range's port is not its integer, or out of 1..65535");
    if (h->len == 0 || (h->len == 1 && h->str[0] == '?')) {
        check(r.hlen == 0, "the answering node's range names a host");
        return;
    }
    check(r.host == h->str && r.hlen == h->len && r.hlen <= 255,
          "a range's host is not the reply's bytes");
    for (size_t i = 0; i < r.hlen; i++) {
        check(host_byte((unsigned char)r.host[i]),
              "a range's host holds a byte no host has");
    }
}

/* What the weigher counts for rep, counted apart: each reply, its slot
 * table, its string and NUL. */
static size_t
weight_of(const redisReply *rep)
{
    size_t n = sizeof(redisReply);

    switch (rep->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        return n + rep->len + 1;
    case REDIS_REPLY_ARRAY:
        n += rep->elements * sizeof(void *);
        for (size_t i = 0; i < rep->elements; i++) {
            n += weight_of(rep->element[i]);
        }
        return n;
    default:
        return n;
    }
}

static bool
same(const redisReply *a, const redisReply *b)
{
    if (a->type != b->type || a->integer != b->integer || a->len != b->len ||
        a->elements != b->elements ||
        (a->len > 0 && memcmp(a->str, b->str, a->len) != 0)) {
        return false;
    }
    for (size_t i = 0; i < a->elements; i++) {
        if (!same(a->element[i], b->element[i])) {
            return false;
        }
    }
    return true;
}

/* The weighing reader's asked: commands left waiting. */
static bool
waiting(void *arg)
{
    return *(int *)arg > 0;
}

/* data read by a weighing reader with size % 8 commands waiting,
 * against plain (the plain reader's answers, nplain of them, and
 * whether it stopped on an error; NULL when it was not run). */
static void
weighed(const uint8_t *data, size_t size, redisReply **plain, size_t nplain,
        bool plain_failed)
{
    redisReader *rd = redisReaderCreate();
    struct redis_weigher w;
    int left = (int)(size % 8);
    size_t n = 0;
    void *reply = NULL;
    int rc = REDIS_OK;

    check(rd != NULL, "out of memory");
    redis_weigher_set(rd, &w, waiting, &left);
    if (redisReaderFeed(rd, (const char *)data, size) == REDIS_OK) {
        while ((rc = redisReaderGetReply(rd, &reply)) == REDIS_OK &&
               reply != NULL) {
            const redisReply *r = reply;

            check(weight_of(r) <= REDIS_ANSWER_MAX,
                  "an answer built past the bound");
            check(left > 0 || r->type == REDIS_REPLY_ERROR,
                  "an answer built that no command waits for");
            check(plain == NULL || (n < nplain && same(r, plain[n])),
                  "an answer not the plain reader's");
            left--;
            n++;
            freeReplyObject(reply);
            reply = NULL;
        }
    }
    if (rc != REDIS_OK && w.refused != NULL) {
        /* Refused at answer n: the plain reader's, if it has one, is
         * past the bound or unasked. */
        check(plain == NULL || n >= nplain ||
                  weight_of(plain[n]) > REDIS_ANSWER_MAX ||
                  (left <= 0 && plain[n]->type != REDIS_REPLY_ERROR),
              "an answer refused that is within the bound and asked");
    } else if (plain != NULL) {
        check((rc != REDIS_OK) == plain_failed && n == nplain,
              "the weighing reader stopped where the plain one did not");
    }
    redisReaderFree(rd);
}

/* Whether the input announces an array or a string over BIG anywhere. */
static bool
announces_big(const uint8_t *data, size_t size)
{
    for (size_t i = 0; i < size; i++) {
        size_t v = 0, k = i + 1;

        if (data[i] != '*' && data[i] != '$') {
            continue;
        }
        while (k < size && data[k] >= '0' && data[k] <= '9' && v <= BIG) {
            v = v * 10 + (size_t)(data[k++] - '0');
        }
        if (v > BIG) {
            return true;
        }
    }
    return false;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An answer is at least 3 bytes ("+\r\n"): room for every one. */
    redisReply **plain = calloc(size / 3 + 1, sizeof(*plain));
    size_t nplain = 0;
    redisReader *rd;
    void *reply = NULL;
    int rc = REDIS_OK;

    check(plain != NULL, "out of memory");
    if (announces_big(data, size)) {
        weighed(data, size, NULL, 0, false);
        free(plain);
        return 0;
    }
    rd = redisReaderCreate();
    check(rd != NULL, "out of memory");
    if (redisReaderFeed(rd, (const char *)data, size) == REDIS_OK) {
        while ((rc = redisReaderGetReply(rd, &reply)) == REDIS_OK &&
               reply != NULL) {
            lock_answers(reply);
            store_pair(reply);
            slots_range(reply);
            if (((redisReply *)reply)->type == REDIS_REPLY_ARRAY) {
                for (size_t i = 0; i < ((redisReply *)reply)->elements; i++) {
                    slots_range(((redisReply *)reply)->element[i]);
                }
            }
            check(nplain < size / 3 + 1, "more answers than bytes for them");
            plain[nplain++] = reply;
            reply = NULL;
        }
    }
    redisReaderFree(rd);
    weighed(data, size, plain, nplain, rc != REDIS_OK);
    for (size_t i = 0; i < nplain; i++) {
        freeReplyObject(plain[i]);
    }
    free(plain);
    return 0;
}
