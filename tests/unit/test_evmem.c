/* test_evmem.c: the slot pool under libevent's tiny allocations: which
 * sizes it takes, that slots (and read-sized chains) are reused, that a
 * full region and anything it does not own fall through to malloc, and
 * that libevent runs on it. The pool is process state: the tests run in
 * order, on one region. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "../../proxy/evmem.h"

#define REGION (64 * 1024) /* one step: 2048 slots */

static void
before_init_everything_is_malloc(void **state)
{
    void *p = evmem_malloc(16);

    (void)state;
    assert_non_null(p);
    assert_false(evmem_owns(p));
    p = evmem_realloc(p, 24);
    assert_false(evmem_owns(p));
    evmem_free(p);
    evmem_free(NULL);
}

static void
tiny_sizes_come_from_the_region(void **state)
{
    static const size_t sizes[] = {1, 8, 16, EVMEM_SLOT};
    void *p[4], *big;

    (void)state;
    assert_true(evmem_init(REGION));
    assert_false(evmem_init(REGION));
    for (size_t i = 0; i < 4; i++) {
        p[i] = evmem_malloc(sizes[i]);
        assert_true(evmem_owns(p[i]));
        assert_int_equal((uintptr_t)p[i] % 16, 0);
        memset(p[i], 0xa5, sizes[i]);
    }
    for (size_t i = 1; i < 4; i++) {
        assert_int_equal((char *)p[i] - (char *)p[i - 1], EVMEM_SLOT);
    }
    big = evmem_malloc(EVMEM_SLOT + 1);
    assert_non_null(big);
    assert_false(evmem_owns(big));
    evmem_free(big);
    for (size_t i = 0; i < 4; i++) {
        evmem_free(p[i]);
    }
}

static void
a_freed_slot_is_reused(void **state)
{
    void *p = evmem_malloc(16), *q;

    (void)state;
    evmem_free(p);
    q = evmem_malloc(24);
    assert_ptr_equal(p, q);
    evmem_free(q);
}

/* A freed 4 KiB block (libevent's chain for a socket's first read) is
 * handed out again for the next one, up to 16 of them; another size is
 * not. */
static void
a_freed_read_chain_is_reused(void **state)
{
    void *p[17], *q, *other;

    (void)state;
    for (size_t i = 0; i < 17; i++) {
        p[i] = evmem_malloc(4096);
        assert_non_null(p[i]);
        assert_false(evmem_owns(p[i]));
        memset(p[i], 0x5a, 4096);
    }
    for (size_t i = 0; i < 17; i++) {
        evmem_free(p[i]); /* the 17th goes back to malloc */
    }
    q = evmem_malloc(4096);
    assert_ptr_equal(q, p[15]);
    other = evmem_malloc(4000);
    assert_non_null(other);
    for (size_t i = 0; i < 15; i++) {
        assert_ptr_not_equal(other, p[i]);
    }
    evmem_free(other);
    evmem_free(q);
}

static void
realloc_keeps_the_contents(void **state)
{
    char *p = evmem_malloc(EVMEM_SLOT), *q;

    (void)state;
    for (int i = 0; i < EVMEM_SLOT; i++) {
        p[i] = (char)i;
    }
    /* Still fits: the same slot. */
    assert_ptr_equal(evmem_realloc(p, 4), p);
    q = evmem_realloc(p, 100);
    assert_non_null(q);
    assert_false(evmem_owns(q));
    for (int i = 0; i < EVMEM_SLOT; i++) {
        assert_int_equal(q[i], (char)i);
    }
    /* The slot went back. */
    assert_ptr_equal(evmem_malloc(8), p);
    evmem_free(p);
    q = evmem_realloc(q, 1000);
    assert_false(evmem_owns(q));
    evmem_free(q);
    q = evmem_realloc(NULL, 8);
    assert_false(evmem_owns(q));
    evmem_free(q);
}

static void
a_full_region_falls_back_to_malloc(void **state)
{
    size_t n = REGION / EVMEM_SLOT;
    void **p = calloc(n + 1, sizeof(*p)), *again;

    (void)state;
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) {
        p[i] = evmem_malloc(16);
        assert_true(evmem_owns(p[i]));
    }
    p[n] = evmem_malloc(16);
    assert_non_null(p[n]);
    assert_false(evmem_owns(p[n]));
    evmem_free(p[n]);
    evmem_free(p[7]);
    again = evmem_malloc(16);
    assert_ptr_equal(again, p[7]);
    for (size_t i = 0; i < n; i++) {
        evmem_free(p[i]);
    }
    free(p);
}

static void
on_read(evutil_socket_t fd, short what, void *arg)
{
    char c;

    (void)what;
    assert_int_equal(read(fd, &c, 1), 1);
    (*(int *)arg)++;
}

static void
libevent_runs_on_it(void **state)
{
    struct event_base *base;
    struct event *ev;
    int fds[2], fired = 0;

    (void)state;
    assert_true(evmem_install());
    assert_true(evmem_install());
    base = event_base_new();
    assert_non_null(base);
    assert_int_equal(pipe(fds), 0);
    ev = event_new(base, fds[0], EV_READ | EV_PERSIST, on_read, &fired);
    assert_non_null(ev);
    assert_int_equal(event_add(ev, NULL), 0);
    assert_int_equal(write(fds[1], "x", 1), 1);
    assert_int_equal(event_base_loop(base, EVLOOP_ONCE), 0);
    assert_int_equal(fired, 1);
    event_free(ev);
    event_base_free(base);
    close(fds[0]);
    close(fds[1]);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(before_init_everything_is_malloc),
        cmocka_unit_test(tiny_sizes_come_from_the_region),
        cmocka_unit_test(a_freed_slot_is_reused),
        cmocka_unit_test(a_freed_read_chain_is_reused),
        cmocka_unit_test(realloc_keeps_the_contents),
        cmocka_unit_test(a_full_region_falls_back_to_malloc),
        cmocka_unit_test(libevent_runs_on_it),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
