/* test_order.c: the ordering gates: a higher token waits for lower ones in
 * flight, equal tokens go together, and the hold after a start keeps
 * every write until it ends, then lets them go in token order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>

#include "../../proxy/path/order.h"

struct write {
    int64_t token;
    struct order_slot *slot;
    int went; /* order of go() calls, from 1; 0: not yet */
};

static int gone;

static void
on_go(void *arg)
{
    struct write *w = arg;

    assert_int_equal(w->went, 0);
    w->went = ++gone;
}

static void
enter(struct order *o, const char *res, struct write *w, int64_t token,
      bool want_now)
{
    bool now = !want_now;

    memset(w, 0, sizeof(*w));
    w->token = token;
    w->slot = order_enter(o, res, strlen(res), token, on_go, w, &now);
    assert_non_null(w->slot);
    assert_int_equal(now, want_now);
    if (now) {
        w->went = ++gone;
    }
}

static void
test_higher_waits_for_lower(void **state)
{
    struct event_base *base = event_base_new();
    struct order *o = order_new(base);
    struct write a, b, c;

    (void)state;
    gone = 0;
    enter(o, "r", &a, 7, true);
    enter(o, "r", &b, 7, true); /* the same holder */
    enter(o, "r", &c, 8, false);
    order_leave(o, a.slot, 0);
    assert_int_equal(c.went, 0);
    order_leave(o, b.slot, 0);
    assert_int_equal(c.went, 3);
    order_leave(o, c.slot, 0);
    assert_int_equal(order_active(o), 0);
    order_free(o);
    event_base_free(base);
}

static void
test_hold_after_start(void **state)
{
    struct event_base *base = event_base_new();
    struct order *o = order_new(base);
    struct write w3, w1, w1b, s5, gone9;

    (void)state;
    gone = 0;
    assert_int_equal(order_hold_left(o), 0);
    assert_true(order_hold(o, 50));
    assert_true(order_hold_left(o) > 0 && order_hold_left(o) <= 50);
    enter(o, "r", &w3, 3, false);
    enter(o, "r", &w1, 1, false);
    enter(o, "r", &w1b, 1, false);
    enter(o, "s", &s5, 5, false);
    enter(o, "t", &gone9, 9, false);
    order_leave(o, gone9.slot, 0); /* a client that left while held */
    assert_int_equal(order_active(o), 2);
    /* Until the hold ends: 1, no event is left. */
    assert_int_equal(event_base_dispatch(base), 1);
    assert_int_equal(order_hold_left(o), 0);
    /* Per resource, the lowest token goes first; 3 waits for both 1s. */
    assert_true(w1.went > 0 && w1b.went > 0 && s5.went > 0);
    assert_int_equal(w3.went, 0);
    assert_int_equal(gone9.went, 0);
    order_leave(o, w1.slot, 0);
    assert_int_equal(w3.went, 0);
    order_leave(o, w1b.slot, 0);
    assert_int_equal(w3.went, 4);
    /* Once over, the hold is over: a new resource goes at once. */
    enter(o, "u", &gone9, 2, true);
    order_leave(o, gone9.slot, 0);
    order_leave(o, w3.slot, 0);
    order_leave(o, s5.slot, 0);
    assert_int_equal(order_active(o), 0);
    assert_true(order_hold(o, 0)); /* no hold */
    assert_int_equal(order_hold_left(o), 0);
    order_free(o);
    event_base_free(base);
}

static void
test_wait_below_holds_up_no_one(void **state)
{
    struct event_base *base = event_base_new();
    struct order *o = order_new(base);
    struct write c5, c12, m10, m5, free10;
    bool now = false;

    (void)state;
    gone = 0;
    /* No request on the collection: nothing to wait for, nothing held. */
    memset(&free10, 0, sizeof(free10));
    assert_null(order_wait_below(o, "c", 1, 10, on_go, &free10, &now));
    assert_true(now);
    assert_int_equal(order_active(o), 0);
    enter(o, "c", &c5, 5, true);
    /* The same token passes; a higher one waits. */
    memset(&m5, 0, sizeof(m5));
    assert_null(order_wait_below(o, "c", 1, 5, on_go, &m5, &now));
    assert_true(now);
    memset(&m10, 0, sizeof(m10));
    m10.slot = order_wait_below(o, "c", 1, 10, on_go, &m10, &now);
    assert_non_null(m10.slot);
    assert_false(now);
    /* The waiting slot holds up no other write: not even a higher
     * one that would queue behind it, once 5 is done. */
    enter(o, "c", &c12, 12, false);
    order_leave(o, c5.slot, 0);
    assert_int_equal(m10.went, 2);
    assert_int_equal(c12.went, 3);
    order_leave(o, m10.slot, 0);
    order_leave(o, c12.slot, 0);
    assert_int_equal(order_active(o), 0);
    order_free(o);
    event_base_free(base);
}

/* A lower token lands while higher ones are still in flight: the lowest
 * in flight is the higher one again, and a write above it still waits. */
static void
test_lowest_after_lower_lands(void **state)
{
    struct event_base *base = event_base_new();
    struct order *o = order_new(base);
    struct write a, b, c, d, e;

    (void)state;
    gone = 0;
    enter(o, "r", &a, 9, true);
    enter(o, "r", &b, 9, true);
    enter(o, "r", &c, 4, true); /* lower goes at once */
    order_leave(o, c.slot, 0);
    enter(o, "r", &d, 10, false); /* the 9s are still in flight */
    order_leave(o, a.slot, 0);
    assert_int_equal(d.went, 0);
    enter(o, "r", &e, 9, false); /* behind the queued 10 */
    order_leave(o, b.slot, 0);
    assert_int_equal(e.went, 4); /* the queue's lowest first */
    assert_int_equal(d.went, 0);
    order_leave(o, e.slot, 0);
    assert_int_equal(d.went, 5);
    order_leave(o, d.slot, 0);
    assert_int_equal(order_active(o), 0);
    order_free(o);
    event_base_free(base);
}

/* Writes whose checks were answered out of order reach the gate out of
 * token order: they still go lowest token first, equal tokens in arrival
 * order, and one that leaves while queued is skipped. */
static void
test_queue_goes_by_token(void **state)
{
    struct event_base *base = event_base_new();
    struct order *o = order_new(base);
    struct write f5, q9, q7, q8, q7b, q6, q8b;

    (void)state;
    gone = 0;
    enter(o, "r", &f5, 5, true);
    enter(o, "r", &q9, 9, false);
    enter(o, "r", &q7, 7, false);
    enter(o, "r", &q8, 8, false);
    enter(o, "r", &q7b, 7, false);
    enter(o, "r", &q6, 6, false);
    enter(o, "r", &q8b, 8, false);
    assert_int_equal(order_waiting(o), 6);
    order_leave(o, q8.slot, 0); /* its client hung up */
    assert_int_equal(order_waiting(o), 5);
    order_leave(o, f5.slot, 0);
    assert_int_equal(q6.went, 2);
    assert_int_equal(q7.went, 0);
    order_leave(o, q6.slot, 0);
    assert_int_equal(q7.went, 3);
    assert_int_equal(q7b.went, 4);
    assert_int_equal(q8b.went, 0);
    order_leave(o, q7b.slot, 0);
    assert_int_equal(q8b.went, 0);
    order_leave(o, q7.slot, 0);
    assert_int_equal(q8b.went, 5);
    assert_int_equal(q9.went, 0);
    order_leave(o, q8b.slot, 0);
    assert_int_equal(q9.went, 6);
    order_leave(o, q9.slot, 0);
    assert_int_equal(order_active(o), 0);
    order_free(o);
    event_base_free(base);
}

/* The hot lock handed on at every write: 10,000 writes of rising tokens
 * wait on one resource, with a collection's waiter among them; each
 * landing starts exactly the next. */
#define HOT_WRITES 10000

static void
test_hot_resource_hands_on_in_order(void **state)
{
    struct event_base *base = event_base_new();
    struct order *o = order_new(base);
    static struct write w[HOT_WRITES];
    struct write below;
    bool now = true;

    (void)state;
    gone = 0;
    enter(o, "hot", &w[0], 1, true);
    for (int i = 1; i < HOT_WRITES; i++) {
        enter(o, "hot", &w[i], 1 + i, false);
    }
    memset(&below, 0, sizeof(below));
    below.slot =
        order_wait_below(o, "hot", 3, HOT_WRITES / 2, on_go, &below, &now);
    assert_non_null(below.slot);
    assert_false(now);
    assert_int_equal(order_waiting(o), HOT_WRITES);
    /* Token t = i + 1 goes when t - 1 lands; the waiter, of token
     * HOT_WRITES / 2, goes with the write of that token (right after it,
     * having come after it), and holds up no one. */
    for (int i = 0; i < HOT_WRITES; i++) {
        assert_int_equal(w[i].went, i < HOT_WRITES / 2 ? i + 1 : i + 2);
        if (i + 1 < HOT_WRITES) {
            assert_int_equal(w[i + 1].went, 0);
        }
        order_leave(o, w[i].slot, 0);
        /* Waiting: those after the one that just went, and the
         * collection's waiter until its turn. */
        assert_int_equal(order_waiting(o),
                         (i + 2 < HOT_WRITES ? HOT_WRITES - 2 - i : 0) +
                             (i + 2 < HOT_WRITES / 2));
        if (i + 2 == HOT_WRITES / 2) {
            assert_int_equal(below.went, HOT_WRITES / 2 + 1);
            order_leave(o, below.slot, 0);
        }
    }
    assert_int_equal(order_active(o), 0);
    order_free(o);
    event_base_free(base);
}

/* Members' writes waiting below a collection's write hold up no one,
 * however many wait: a write of an equal token goes at once, one of a
 * higher token waits only for the lower ones in flight. */
static void
test_many_waiting_below_hold_up_no_one(void **state)
{
    struct event_base *base = event_base_new();
    struct order *o = order_new(base);
    static struct write m7[HOT_WRITES];
    struct write c5, c5b, c6, m6, m5;
    bool now = true;

    (void)state;
    gone = 0;
    enter(o, "c", &c5, 5, true);
    for (int i = 0; i < HOT_WRITES; i++) {
        memset(&m7[i], 0, sizeof(m7[i]));
        m7[i].slot = order_wait_below(o, "c", 1, 7, on_go, &m7[i], &now);
        assert_non_null(m7[i].slot);
        assert_false(now);
    }
    enter(o, "c", &c5b, 5, true);
    enter(o, "c", &c6, 6, false);
    memset(&m6, 0, sizeof(m6));
    m6.slot = order_wait_below(o, "c", 1, 6, on_go, &m6, &now);
    assert_false(now);
    memset(&m5, 0, sizeof(m5));
    assert_null(order_wait_below(o, "c", 1, 5, on_go, &m5, &now));
    assert_true(now);
    assert_int_equal(order_waiting(o), HOT_WRITES + 2);
    order_leave(o, c5.slot, 0);
    assert_int_equal(c6.went, 0);
    order_leave(o, c5b.slot, 0);
    assert_int_equal(c6.went, 3);
    assert_int_equal(m6.went, 4);
    assert_int_equal(m7[0].went, 0);
    order_leave(o, m6.slot, 0);
    assert_int_equal(order_waiting(o), HOT_WRITES);
    order_leave(o, c6.slot, 0);
    assert_int_equal(order_waiting(o), 0);
    for (int i = 0; i < HOT_WRITES; i++) {
        assert_int_equal(m7[i].went, 5 + i);
        order_leave(o, m7[i].slot, 0);
    }
    assert_int_equal(order_active(o), 0);
    order_free(o);
    event_base_free(base);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_higher_waits_for_lower),
        cmocka_unit_test(test_hold_after_start),
        cmocka_unit_test(test_wait_below_holds_up_no_one),
        cmocka_unit_test(test_lowest_after_lower_lands),
        cmocka_unit_test(test_queue_goes_by_token),
        cmocka_unit_test(test_hot_resource_hands_on_in_order),
        cmocka_unit_test(test_many_waiting_below_hold_up_no_one),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
