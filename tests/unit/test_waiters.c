/* test_waiters.c: the lock service's queues of waiting acquires: each
 * name's queue found among many, arrival order kept when a waiter leaves
 * from the head, the middle or the tail (a timeout, a client that hangs
 * up), the head's turn given once at a time, and a queue gone with its
 * last waiter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>

#include "../../proxy/locks/waiters.h"

static int tries;
static void *last_try;

static void
try_head(void *arg)
{
    tries++;
    last_try = arg;
}

static struct event_base *base;
static struct waiters *ws;

static int
setup(void **state)
{
    (void)state;
    base = event_base_new();
    ws = waiters_new(base, NULL, try_head);
    tries = 0;
    last_try = NULL;
    return base != NULL && ws != NULL ? 0 : -1;
}

static int
teardown(void **state)
{
    (void)state;
    waiters_free(ws);
    event_base_free(base);
    return 0;
}

/* The args of q's waiters, head to tail, as a string of their names. */
static void
order_of(const struct waiter *head, char *out)
{
    for (const struct waiter *w = head; w != NULL; w = w->next) {
        *out++ = *(const char *)w->arg;
    }
    *out = '\0';
}

static void
test_each_name_has_its_own_queue_among_many(void **state)
{
    enum { NAMES = 20000 };
    struct waiter *w = calloc(NAMES, sizeof(*w));
    char name[32];

    (void)state;
    assert_non_null(w);
    for (int i = 0; i < NAMES; i++) {
        int len = snprintf(name, sizeof(name), "jobs/%d", i);
        struct waitq *q = waiters_get(ws, name, (size_t)len);

        assert_non_null(q);
        assert_ptr_equal(waiters_get(ws, name, (size_t)len), q);
        waitq_push(q, &w[i], &w[i]);
    }
    for (int i = 0; i < NAMES; i++) {
        int len = snprintf(name, sizeof(name), "jobs/%d", i);

        assert_ptr_equal(waiters_find(ws, name, (size_t)len), w[i].q);
        assert_true(waiter_is_head(&w[i]));
    }
    assert_null(waiters_find(ws, "jobs/", 5));
    assert_null(waiters_find(ws, "jobs/1", 5)); /* a prefix of a name */
    for (int i = 0; i < NAMES; i++) {
        waiter_leave(&w[i], true);
        assert_null(w[i].q);
    }
    assert_int_equal(tries, 0); /* nobody was behind them */
    assert_null(waiters_find(ws, "jobs/0", 6));
    free(w);
}

static void
test_leaving_anywhere_keeps_arrival_order(void **state)
{
    static char names[] = "abcdef";
    struct waiter w[6] = {0};
    struct waitq *q = waiters_get(ws, "x", 1);
    char got[8];

    (void)state;
    assert_non_null(q);
    for (int i = 0; i < 5; i++) {
        waitq_push(q, &w[i], &names[i]);
    }
    waiter_leave(&w[2], true); /* the middle: c */
    order_of(&w[0], got);
    assert_string_equal(got, "abde");
    assert_int_equal(tries, 0);
    waiter_leave(&w[4], true); /* the tail: e */
    waitq_push(q, &w[5], &names[5]);
    order_of(&w[0], got);
    assert_string_equal(got, "abdf");
    waiter_leave(&w[0], true); /* the head, giving up its turn */
    assert_int_equal(tries, 1);
    assert_ptr_equal(last_try, &names[1]);
    assert_true(waiter_is_head(&w[1]));
    order_of(&w[1], got);
    assert_string_equal(got, "bdf");
    /* b's try is out: a kick waits for its answer. */
    waiters_kick(ws, "x", 1);
    assert_int_equal(tries, 1);
    waiter_tried(&w[1]);
    waiters_kick(ws, "x", 1);
    assert_int_equal(tries, 2);
    assert_ptr_equal(last_try, &names[1]);
    waiter_tried(&w[1]);
    waiter_leave(&w[1], false); /* won: the next turn is the timer's */
    assert_int_equal(tries, 2);
    waiter_leave(&w[5], true);
    waiter_leave(&w[3], true);
    assert_null(waiters_find(ws, "x", 1));
    assert_int_equal(tries, 2);
}

static void
test_freed_service_leaves_waiters_without_a_queue(void **state)
{
    struct waiter w[2] = {0};
    struct waitq *q = waiters_get(ws, "y", 1);

    (void)state;
    waitq_push(q, &w[0], "a");
    waitq_push(q, &w[1], "b");
    waiters_free(ws);
    ws = NULL;
    assert_null(w[0].q);
    assert_null(w[1].q);
    waiter_leave(&w[1], true); /* a no-op now */
    assert_int_equal(tries, 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_each_name_has_its_own_queue_among_many, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_leaving_anywhere_keeps_arrival_order, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_freed_service_leaves_waiters_without_a_queue, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
