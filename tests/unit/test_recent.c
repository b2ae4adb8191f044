/* test_recent.c: the page's tables: one mark per resource, the latest
 * written first, the oldest forgotten when full; leases replaced by name,
 * dropped only by their own fence, the one ending first forgotten. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../proxy/recent.h"

static const struct recent_who nobody = {NULL, NULL, NULL};

static void
test_marks_once_each_latest_first(void **state)
{
    static struct recent r;
    char name[32];

    memset(&r, 0, sizeof(r));
    recent_accept(&r, &nobody, "a", 1, 1, NULL, 0);
    recent_accept(&r, &nobody, "b", 2, 2, NULL, 0);
    recent_accept(&r, &nobody, "a", 3, 3, NULL, 0);
    assert_int_equal(r.nmarks, 2);
    assert_string_equal(recent_mark_at(&r, 0)->resource, "a");
    assert_int_equal(recent_mark_at(&r, 0)->mark, 3);
    assert_string_equal(recent_mark_at(&r, 1)->resource, "b");
    /* A MOVE: the destination first, then its source. */
    recent_accept(&r, &nobody, "dst", 9, 9, "b", 9);
    assert_int_equal(r.nmarks, 3);
    assert_string_equal(recent_mark_at(&r, 0)->resource, "dst");
    assert_string_equal(recent_mark_at(&r, 1)->resource, "b");
    assert_int_equal(recent_mark_at(&r, 1)->mark, 9);
    assert_int_equal(recent_known_mark(&r, "b"), 9);
    assert_int_equal(recent_known_mark(&r, "nope"), 0);
    assert_int_equal(r.accepted, 4);
    for (int i = 0; i < RECENT_N + 5; i++) {
        snprintf(name, sizeof(name), "r%d", i);
        recent_accept(&r, &nobody, name, i, i, NULL, 0);
    }
    assert_int_equal(r.nmarks, RECENT_N);
    assert_string_equal(recent_mark_at(&r, 0)->resource, "r36");
    assert_string_equal(recent_mark_at(&r, RECENT_N - 1)->resource, "r5");
}

static void
test_long_names_are_one_entry(void **state)
{
    static struct recent r;
    char a[300], b[300];

    memset(&r, 0, sizeof(r));
    memset(a, 'x', sizeof(a) - 1);
    a[sizeof(a) - 1] = '\0';
    memcpy(b, a, sizeof(b));
    recent_accept(&r, &nobody, a, 1, 1, NULL, 0);
    recent_accept(&r, &nobody, b, 2, 2, NULL, 0);
    assert_int_equal(r.nmarks, 1);
    assert_int_equal(strlen(recent_mark_at(&r, 0)->resource), RECENT_NAME - 1);
}

/* Every write and refusal is one event, newest first, the last
 * RECENT_EVENTS kept; a refusal without a token shows the known mark. */
static void
test_history_ring(void **state)
{
    static struct recent r;
    struct recent_who who = {"docs", "127.0.0.1:4000", "rid-1"};
    char name[32];

    memset(&r, 0, sizeof(r));
    recent_accept(&r, &who, "a", 7, 7, NULL, 0);
    recent_refusal(&r, &who, 409, "stale", "a", 3, 7);
    recent_refusal(&r, &nobody, 428, "no-token", "a", 0, 0);
    recent_refusal(&r, &nobody, 428, "no-token", "zz", 0, 0);
    assert_int_equal(recent_nevents(&r), 4);
    assert_int_equal(recent_event_at(&r, 3)->status, 0);
    assert_int_equal(recent_event_at(&r, 3)->token, 7);
    assert_string_equal(recent_event_at(&r, 3)->client, "127.0.0.1:4000");
    assert_string_equal(recent_event_at(&r, 3)->rid, "rid-1");
    assert_string_equal(recent_event_at(&r, 2)->reason, "stale");
    assert_int_equal(recent_event_at(&r, 1)->mark, 7);
    assert_int_equal(r.refusals[1].mark, 7);
    assert_int_equal(recent_event_at(&r, 0)->mark, 0);
    assert_string_equal(recent_event_at(&r, 0)->client, "");
    for (int i = 0; i < RECENT_EVENTS + 3; i++) {
        snprintf(name, sizeof(name), "w%d", i);
        recent_accept(&r, &who, name, i + 1, i + 1, NULL, 0);
    }
    assert_int_equal(r.nevents, RECENT_EVENTS + 7);
    assert_int_equal(recent_nevents(&r), RECENT_EVENTS);
    assert_int_equal(recent_event_at(&r, 0)->token, RECENT_EVENTS + 3);
    assert_int_equal(recent_event_at(&r, RECENT_EVENTS - 1)->token, 4);
}

/* An accepted write's event takes the answer's status (and tidemark's
 * reason when it answered itself), a refusal's the mark read later; an
 * event the ring has dropped, or none (0), is left alone. */
static void
test_answered(void **state)
{
    static struct recent r;
    uint64_t first, second;

    (void)state;
    memset(&r, 0, sizeof(r));
    first = recent_accept(&r, &nobody, "a", 1, 1, NULL, 0);
    second = recent_accept(&r, &nobody, "b", 2, 2, NULL, 0);
    assert_int_equal(first, 1);
    assert_int_equal(second, 2);
    assert_true(recent_event_at(&r, 0)->accepted);
    assert_int_equal(recent_event_at(&r, 0)->status, 0);
    recent_answered(&r, second, 201, NULL);
    recent_answered(&r, first, 504, "upstream timeout");
    recent_answered(&r, 0, 500, "none");
    assert_int_equal(recent_event_at(&r, 0)->status, 201);
    assert_string_equal(recent_event_at(&r, 0)->reason, "accepted");
    assert_int_equal(recent_event_at(&r, 1)->status, 504);
    assert_string_equal(recent_event_at(&r, 1)->reason, "upstream timeout");
    for (int i = 0; i < RECENT_EVENTS; i++) {
        recent_refusal(&r, &nobody, 409, "stale", "c", 1, 2);
    }
    recent_mark(&r, r.nevents, 42);
    assert_int_equal(recent_event_at(&r, 0)->mark, 42);
    assert_int_equal(r.refusals[(r.nrefusals - 1) % RECENT_N].mark, 42);
    recent_mark(&r, second, 43); /* gone from the ring: nothing */
    recent_mark(&r, 0, 44);
    for (size_t i = 1; i < recent_nevents(&r); i++) {
        assert_int_equal(recent_event_at(&r, i)->mark, 2);
    }
    recent_answered(&r, second, 500, "late");
    recent_answered(&r, r.nevents + 1, 500, "future");
    for (size_t i = 0; i < recent_nevents(&r); i++) {
        assert_int_equal(recent_event_at(&r, i)->status, 409);
        assert_false(recent_event_at(&r, i)->accepted);
    }
}

static void
test_leases(void **state)
{
    static struct recent r;
    char name[32];

    memset(&r, 0, sizeof(r));
    recent_lease(&r, "jobs/x", 6, 4, 1000, NULL);
    recent_lease(&r, "jobs/x", 6, 4, 5000, NULL); /* extended */
    assert_int_equal(r.nlocks, 1);
    assert_true(r.locks[0].expires_ms > recent_now_ms() + 1000);
    recent_lease_gone(&r, "jobs/x", 6, 3); /* an older holder's */
    assert_int_equal(r.nlocks, 1);
    recent_lease_gone(&r, "jobs/x", 6, 4);
    assert_int_equal(r.nlocks, 0);
    for (int i = 0; i < RECENT_N; i++) {
        snprintf(name, sizeof(name), "l%d", i);
        recent_lease(&r, name, strlen(name), i + 1, 10000 + i, NULL);
    }
    recent_lease(&r, "new", 3, 99, 60000, NULL);
    assert_int_equal(r.nlocks, RECENT_N);
    for (size_t i = 0; i < r.nlocks; i++) {
        assert_string_not_equal(r.locks[i].name, "l0");
    }
}

static int64_t ended_fence[4];
static size_t nended;

static void
ended(const struct recent_lock *l)
{
    assert_string_equal(l->holder, "10.0.0.1:5");
    ended_fence[nended++] = l->fence;
}

/* The leases whose time ran out are reported once and forgotten; the
 * others stay. */
static void
test_leases_end(void **state)
{
    static struct recent r;
    int64_t now = recent_now_ms();

    memset(&r, 0, sizeof(r));
    recent_lease(&r, "a", 1, 1, 1000, "10.0.0.1:5");
    recent_lease(&r, "b", 1, 2, 60000, "10.0.0.1:5");
    recent_lease(&r, "c", 1, 3, 2000, "10.0.0.1:5");
    recent_leases_end(&r, now + 5000, ended);
    assert_int_equal(nended, 2);
    assert_true((ended_fence[0] == 1 && ended_fence[1] == 3) ||
                (ended_fence[0] == 3 && ended_fence[1] == 1));
    assert_int_equal(r.nlocks, 1);
    assert_string_equal(r.locks[0].name, "b");
    recent_leases_end(&r, now + 5000, ended);
    assert_int_equal(nended, 2);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_marks_once_each_latest_first),
        cmocka_unit_test(test_long_names_are_one_entry),
        cmocka_unit_test(test_history_ring),
        cmocka_unit_test(test_answered),
        cmocka_unit_test(test_leases),
        cmocka_unit_test(test_leases_end),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
