/* test_fence.c: the fence service's rules against a fake store whose
 * answers the test gives by hand: the cache as the decision input, an
 * equal token on a shared store asked again, out-of-order answers made
 * stale, cancelled raises still reaching the cache, reads lifted to the
 * cache, a miss read at once from a store that can. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../conf/cfg.h"
#include "../../proxy/metrics.h"
#include "../../proxy/store/fence.h"

#define FAKE_MAX 16

/* A call the fake store holds until the test answers it. */
struct fake_call {
    store_cb cb;
    void *arg;
    int64_t token; /* 0: a get */
    char res[64];
};

struct fake_store {
    struct fake_call calls[FAKE_MAX];
    int n;
};

static struct fake_store fake;

static struct store *
fake_open(struct event_base *base, const struct cfg_store *cfg, char *err,
          size_t errlen)
{
    memset(&fake, 0, sizeof(fake));
    return (struct store *)&fake;
}

static void
fake_call(const char *res, size_t len, int64_t token, store_cb cb, void *arg)
{
    struct fake_call *c = &fake.calls[fake.n++];

    assert_true(fake.n <= FAKE_MAX && len < sizeof(c->res));
    c->cb = cb;
    c->arg = arg;
    c->token = token;
    memcpy(c->res, res, len);
    c->res[len] = '\0';
}

static void
fake_raise(struct store *s, const char *res, size_t len, int64_t token,
           store_cb cb, void *arg)
{
    fake_call(res, len, token, cb, arg);
}

static void
fake_get(struct store *s, const char *res, size_t len, store_cb cb, void *arg)
{
    fake_call(res, len, 0, cb, arg);
}

static bool
fake_ready(struct store *s)
{
    return true;
}

static void
fake_close(struct store *s)
{
}

/* A store that reads at once (as the lmdb file does): the mark it gives
 * for any name, how many reads it made, and whether a read fails. */
static struct {
    int64_t mark;
    int reads;
    bool fails;
} peeked;

static bool
fake_peek(struct store *s, const char *res, size_t len, int64_t *mark)
{
    peeked.reads++;
    *mark = peeked.mark;
    return !peeked.fails;
}

/* The fake store's operations; the variants differ in peek and shared. */
#define FAKE_OPS                                                               \
    .name = "fake", .open = fake_open, .raise = fake_raise, .get = fake_get,   \
    .ready = fake_ready, .close = fake_close

static const struct store_ops fake_ops = {FAKE_OPS};
static const struct store_ops fake_shared_ops = {FAKE_OPS, .shared = true};
static const struct store_ops fake_peek_ops = {FAKE_OPS, .peek = fake_peek};
static const struct store_ops fake_peek_shared_ops = {
    FAKE_OPS, .peek = fake_peek, .shared = true};

/* What a caller of the fence was told. */
struct answer {
    int calls;
    enum store_result res;
    int64_t mark;
};

static void
on_answer(void *arg, enum store_result res, int64_t mark)
{
    struct answer *a = arg;

    a->calls++;
    a->res = res;
    a->mark = mark;
}

struct fixture {
    struct metrics *m;
    struct fence *f;
};

static struct fence *
fixture_open(struct fixture *fx, const struct store_ops *ops)
{
    struct cfg_store cfg = {.cache_entries = 64};
    char err[128];

    fx->m = metrics_new();
    assert_non_null(fx->m);
    fx->f = fence_open(NULL, ops, &cfg, fx->m, err, sizeof(err));
    assert_non_null(fx->f);
    return fx->f;
}

static void
fixture_close(struct fixture *fx)
{
    fence_close(fx->f);
    metrics_free(fx->m);
}

/* The store answers call i. */
static void
store_answers(int i, enum store_result res, int64_t mark)
{
    fake.calls[i].cb(fake.calls[i].arg, res, mark);
}

static void
raise_s(struct fence *f, const char *res, int64_t token, struct answer *a)
{
    assert_non_null(fence_raise(f, res, strlen(res), token, on_answer, a));
}

static void
test_check_is_the_cache(void **state)
{
    struct fixture fx;
    struct fence *f = fixture_open(&fx, &fake_ops);
    struct answer a = {0};

    assert_int_equal(fence_check(f, "r", 1, 5), 0);
    raise_s(f, "r", 5, &a);
    assert_int_equal(a.calls, 0); /* never inside the call */
    assert_string_equal(fake.calls[0].res, "r");
    assert_int_equal(fake.calls[0].token, 5);
    store_answers(0, STORE_ACCEPTED, 5);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.res, STORE_ACCEPTED);
    assert_int_equal(a.mark, 5);
    /* Below: stale; equal: durable already (one store, one writer). */
    assert_int_equal(fence_check(f, "r", 1, 4), 5);
    assert_int_equal(fence_check(f, "r", 1, 5), 5);
    assert_int_equal(fence_check(f, "r", 1, 6), 5);
    assert_int_equal(fence_check(f, "", 0, 5), 0);
    /* A stale answer is a mark too. */
    raise_s(f, "s", 3, &a);
    store_answers(1, STORE_STALE, 8);
    assert_int_equal(a.res, STORE_STALE);
    assert_int_equal(a.mark, 8);
    assert_int_equal(fence_check(f, "s", 1, 1), 8);
    /* An error teaches nothing. */
    raise_s(f, "t", 3, &a);
    store_answers(2, STORE_ERROR, 0);
    assert_int_equal(a.res, STORE_ERROR);
    assert_int_equal(fence_check(f, "t", 1, 3), 0);
    fixture_close(&fx);
}

static void
test_shared_equal_token_is_asked(void **state)
{
    struct fixture fx;
    struct fence *f = fixture_open(&fx, &fake_shared_ops);
    struct answer a = {0};

    raise_s(f, "r", 1, &a);
    store_answers(0, STORE_ACCEPTED, 1);
    raise_s(f, "q", 7, &a);
    store_answers(1, STORE_ACCEPTED, 7);
    /* Equal: lowered below the token (still a lower bound), so that
     * decide_request raises; below and above are as on one store. */
    assert_int_equal(fence_check(f, "r", 1, 1), 0);
    assert_int_equal(fence_check(f, "q", 1, 7), 6);
    assert_int_equal(fence_check(f, "q", 1, 6), 7);
    assert_int_equal(fence_check(f, "q", 1, 8), 7);
    fixture_close(&fx);
}

static void
test_out_of_order_answer_is_stale(void **state)
{
    struct fixture fx;
    struct fence *f = fixture_open(&fx, &fake_shared_ops);
    struct answer lo = {0}, hi = {0};

    raise_s(f, "r", 5, &lo);
    raise_s(f, "r", 7, &hi);
    store_answers(1, STORE_ACCEPTED, 7);
    store_answers(0, STORE_ACCEPTED, 5);
    assert_int_equal(hi.res, STORE_ACCEPTED);
    assert_int_equal(hi.mark, 7);
    assert_int_equal(lo.res, STORE_STALE);
    assert_int_equal(lo.mark, 7);
    assert_int_equal(fence_check(f, "r", 1, 1), 7);
    fixture_close(&fx);
}

static void
test_cancelled_raise_reaches_the_cache(void **state)
{
    struct fixture fx;
    struct fence *f = fixture_open(&fx, &fake_ops);
    struct answer a = {0};
    struct fence_call *fc = fence_raise(f, "r", 1, 9, on_answer, &a);

    assert_non_null(fc);
    fence_cancel(fc);
    fence_cancel(NULL);
    store_answers(0, STORE_ACCEPTED, 9);
    assert_int_equal(a.calls, 0);
    assert_int_equal(fence_check(f, "r", 1, 1), 9);
    fixture_close(&fx);
}

static void
test_get_is_lifted_to_the_cache(void **state)
{
    struct fixture fx;
    struct fence *f = fixture_open(&fx, &fake_ops);
    struct answer a = {0};

    raise_s(f, "r", 9, &a);
    store_answers(0, STORE_ACCEPTED, 9);
    /* The store lost the mark (a failover): the cache keeps the floor. */
    assert_true(fence_get(f, "r", 1, on_answer, &a));
    assert_int_equal(fake.calls[1].token, 0);
    store_answers(1, STORE_ACCEPTED, 3);
    assert_int_equal(a.res, STORE_ACCEPTED);
    assert_int_equal(a.mark, 9);
    /* A higher mark read goes into the cache. */
    assert_true(fence_get(f, "n", 1, on_answer, &a));
    store_answers(2, STORE_ACCEPTED, 12);
    assert_int_equal(a.mark, 12);
    assert_int_equal(fence_check(f, "n", 1, 1), 12);
    /* No mark anywhere: 0. */
    assert_true(fence_get(f, "z", 1, on_answer, &a));
    store_answers(3, STORE_ACCEPTED, 0);
    assert_int_equal(a.res, STORE_ACCEPTED);
    assert_int_equal(a.mark, 0);
    assert_true(fence_get(f, "r", 1, on_answer, &a));
    store_answers(4, STORE_ERROR, 0);
    assert_int_equal(a.res, STORE_ERROR);
    assert_int_equal(a.mark, 0);
    fixture_close(&fx);
}

static void
test_raise_above(void **state)
{
    struct fixture fx;
    struct fence *f = fixture_open(&fx, &fake_ops);
    struct answer a = {0};
    struct fence_call *fc;
    bool asked = false;

    /* Every collection above the name, at once; one answer. */
    fc = fence_raise_above(f, "dav/a/b/m", 9, 7, &asked, on_answer, &a);
    assert_non_null(fc);
    assert_true(asked);
    assert_int_equal(fake.n, 3);
    assert_string_equal(fake.calls[0].res, "dav/a/b;below");
    assert_string_equal(fake.calls[1].res, "dav/a;below");
    assert_string_equal(fake.calls[2].res, "dav;below");
    assert_int_equal(fake.calls[2].token, 7);
    store_answers(0, STORE_ACCEPTED, 7);
    /* Already higher is as good as raised. */
    store_answers(2, STORE_STALE, 9);
    assert_int_equal(a.calls, 0);
    store_answers(1, STORE_ACCEPTED, 7);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.res, STORE_ACCEPTED);
    assert_int_equal(fence_check(f, "dav;below", 9, 1), 9);
    /* What the cache knows at the token or above is not asked again;
     * nothing left to ask: no call, no answer. */
    fc = fence_raise_above(f, "dav/a/b/n", 9, 7, &asked, on_answer, &a);
    assert_null(fc);
    assert_false(asked);
    assert_int_equal(fake.n, 3);
    fc = fence_raise_above(f, "dav", 3, 7, &asked, on_answer, &a);
    assert_null(fc);
    assert_false(asked);
    /* One failure fails the group; a cancelled group never answers. */
    fc = fence_raise_above(f, "dav/a/x", 7, 10, &asked, on_answer, &a);
    assert_non_null(fc);
    assert_int_equal(fake.n, 5);
    store_answers(3, STORE_ERROR, 0);
    store_answers(4, STORE_ACCEPTED, 10);
    assert_int_equal(a.calls, 2);
    assert_int_equal(a.res, STORE_ERROR);
    fc = fence_raise_above(f, "dav/b/x", 7, 10, &asked, on_answer, &a);
    assert_non_null(fc);
    assert_int_equal(fake.n, 6); /* "dav;below" is known at 10 */
    fence_cancel(fc);
    store_answers(5, STORE_ACCEPTED, 10);
    assert_int_equal(a.calls, 2);
    assert_int_equal(fence_check(f, "dav/b;below", 11, 1), 10);
    fixture_close(&fx);
}

static void
test_raise_tree(void **state)
{
    struct fixture fx;
    struct fence *f = fixture_open(&fx, &fake_ops);
    struct answer a = {0};

    /* The name and the subtree marks above it, answered as the name. */
    assert_non_null(fence_raise_tree(f, "dav/a/m", 7, 5, on_answer, &a));
    assert_int_equal(fake.n, 3);
    assert_string_equal(fake.calls[0].res, "dav/a/m");
    assert_string_equal(fake.calls[1].res, "dav/a;below");
    assert_string_equal(fake.calls[2].res, "dav;below");
    store_answers(1, STORE_ACCEPTED, 5);
    store_answers(0, STORE_ACCEPTED, 5);
    assert_int_equal(a.calls, 0);
    store_answers(2, STORE_STALE, 6);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.res, STORE_ACCEPTED);
    assert_int_equal(a.mark, 5);
    /* Stale stays stale; accepted with a failed subtree raise fails. */
    assert_non_null(fence_raise_tree(f, "dav/b/m", 7, 4, on_answer, &a));
    store_answers(3, STORE_STALE, 9);
    store_answers(4, STORE_ERROR, 0);
    assert_int_equal(a.res, STORE_STALE);
    assert_int_equal(a.mark, 9);
    assert_non_null(fence_raise_tree(f, "dav/c/m", 7, 10, on_answer, &a));
    assert_int_equal(fake.n, 8);
    store_answers(5, STORE_ACCEPTED, 10);
    store_answers(6, STORE_ERROR, 0);
    store_answers(7, STORE_ACCEPTED, 10);
    assert_int_equal(a.calls, 3);
    assert_int_equal(a.res, STORE_ERROR);
    fixture_close(&fx);
}

static void
test_holder_and_floor_follow_the_routes(void **state)
{
    struct fixture fx;
    struct fence *f = fixture_open(&fx, &fake_ops);
    struct answer a = {0};

    /* No route keeps subtree marks: the name alone. */
    assert_non_null(fence_raise_holder(f, "d/x", 3, 2, on_answer, &a));
    assert_true(fence_get_floor(f, "d/x", 3, on_answer, &a));
    assert_int_equal(fake.n, 2);
    assert_int_equal(fake.calls[1].token, 0);
    store_answers(0, STORE_ACCEPTED, 2);
    store_answers(1, STORE_ACCEPTED, 2);
    fence_keep_trees(f, true);
    assert_non_null(fence_raise_holder(f, "d/x", 3, 3, on_answer, &a));
    assert_int_equal(fake.n, 4);
    assert_string_equal(fake.calls[3].res, "d;below");
    store_answers(2, STORE_ACCEPTED, 3);
    store_answers(3, STORE_ACCEPTED, 3);
    /* A fence starts above the name's mark and its subtree mark. */
    assert_true(fence_get_floor(f, "d", 1, on_answer, &a));
    assert_string_equal(fake.calls[4].res, "d");
    assert_string_equal(fake.calls[5].res, "d;below");
    assert_int_equal(fake.calls[5].token, 0);
    store_answers(5, STORE_ACCEPTED, 8);
    store_answers(4, STORE_ACCEPTED, 1);
    assert_int_equal(a.res, STORE_ACCEPTED);
    assert_int_equal(a.mark, 8);
    assert_true(fence_get_floor(f, "d", 1, on_answer, &a));
    store_answers(6, STORE_ACCEPTED, 1);
    store_answers(7, STORE_ERROR, 0);
    assert_int_equal(a.res, STORE_ERROR);
    fixture_close(&fx);
}

/* fence_bound: a name the cache does not know is read from the store at
 * once where it can, and kept; a cached name, a failed read, a mark of
 * 0 and a store without peek change nothing; a shared store's equal
 * token is still asked. */
static void
test_bound_reads_a_miss(void **state)
{
    struct fixture fx;
    struct fence *f = fixture_open(&fx, &fake_peek_ops);

    memset(&peeked, 0, sizeof(peeked));
    peeked.mark = 9;
    assert_int_equal(fence_bound(f, "r", 1, 3), 9);
    assert_int_equal(peeked.reads, 1);
    /* Kept: the cache answers from now on, without a read. */
    assert_int_equal(fence_check(f, "r", 1, 3), 9);
    assert_int_equal(fence_bound(f, "r", 1, 9), 9);
    assert_int_equal(peeked.reads, 1);
    assert_int_equal(fake.n, 0); /* no raise, no get */
    /* Nothing there: 0, and the next call reads again. */
    peeked.mark = 0;
    assert_int_equal(fence_bound(f, "n", 1, 3), 0);
    assert_int_equal(fence_bound(f, "n", 1, 3), 0);
    assert_int_equal(peeked.reads, 3);
    /* A failed read is the cache's answer; nothing is kept. */
    peeked.mark = 7;
    peeked.fails = true;
    assert_int_equal(fence_bound(f, "x", 1, 3), 0);
    assert_int_equal(fence_check(f, "x", 1, 3), 0);
    /* An empty name is never read. */
    assert_int_equal(fence_bound(f, "", 0, 3), 0);
    assert_int_equal(peeked.reads, 4);
    fixture_close(&fx);

    /* A store that cannot read at once: the cache alone. */
    f = fixture_open(&fx, &fake_ops);
    assert_int_equal(fence_bound(f, "r", 1, 3), 0);
    fixture_close(&fx);

    /* Shared: an equal token is below the bound's answer, so asked. */
    f = fixture_open(&fx, &fake_peek_shared_ops);
    memset(&peeked, 0, sizeof(peeked));
    peeked.mark = 9;
    assert_int_equal(fence_bound(f, "r", 1, 9), 8);
    assert_int_equal(fence_bound(f, "r", 1, 3), 9);
    assert_int_equal(peeked.reads, 1);
    fixture_close(&fx);
}

static void
test_backend_facts(void **state)
{
    struct fixture fx;
    struct fence *f = fixture_open(&fx, &fake_ops);

    assert_string_equal(fence_backend(f), "fake");
    assert_true(fence_ready(f));
    assert_false(fence_fresh(f)); /* no fresh in the vtable */
    fence_stats(f, NULL);         /* no metrics in the vtable: no output */
    fixture_close(&fx);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_is_the_cache),
        cmocka_unit_test(test_shared_equal_token_is_asked),
        cmocka_unit_test(test_out_of_order_answer_is_stale),
        cmocka_unit_test(test_cancelled_raise_reaches_the_cache),
        cmocka_unit_test(test_get_is_lifted_to_the_cache),
        cmocka_unit_test(test_raise_above),
        cmocka_unit_test(test_raise_tree),
        cmocka_unit_test(test_holder_and_floor_follow_the_routes),
        cmocka_unit_test(test_bound_reads_a_miss),
        cmocka_unit_test(test_backend_facts),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
