/* test_backend.c: what the mark stores and the lock backends share
 * (proxy/clients/backend.c): every backend the option table offers is
 * registered under its name, an answer given without a round trip comes
 * on a later pass of the loop, and a call made before the first
 * connection is made again, with its own copy of the name, once it is up.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>

#include "../../conf/cfg_opts.h"
#include "../../proxy/clients/backend.h"
#include "../../proxy/locks/lock.h"
#include "../../proxy/store/store.h"

/* The choices of [sect] key in the option table. */
static const char *const *
choices_of(enum cfg_sect sect, const char *key)
{
    for (size_t i = 0; i < cfg_nopts; i++) {
        if (cfg_opts[i].sect == sect && strcmp(cfg_opts[i].key, key) == 0) {
            return cfg_opts[i].choices;
        }
    }
    fail_msg("no [%s] %s in the option table", cfg_sect_name(sect), key);
    return NULL;
}

static void
test_offered_backends_are_registered(void **state)
{
    const char *const *types = choices_of(CFG_STORE, "type");
    const char *const *locks = choices_of(CFG_LOCKS, "backend");

    (void)state;
    for (size_t i = 0; types[i] != NULL; i++) {
        assert_non_null(store_find(types[i]));
        assert_string_equal(store_find(types[i])->name, types[i]);
    }
    for (size_t i = 0; locks[i] != NULL; i++) {
        assert_non_null(lock_find(locks[i]));
        assert_string_equal(lock_find(locks[i])->name, locks[i]);
    }
    assert_null(store_find("zookeeper"));
    assert_null(lock_find("LMDB"));
    assert_null(lock_find(NULL));
}

struct got {
    int calls;
    int res;
    int64_t mark;
    char res_name[16];
};

static void
on_store(void *arg, enum store_result res, int64_t mark)
{
    struct got *g = arg;

    g->calls++;
    g->res = (int)res;
    g->mark = mark;
}

static void
on_lock(void *arg, enum lock_result res, int64_t fence, int64_t ttl_ms)
{
    struct got *g = arg;

    g->calls++;
    g->res = (int)res;
    g->mark = fence + ttl_ms;
}

static void
test_deferred_answers_come_on_a_later_pass(void **state)
{
    struct event_base *base = event_base_new();
    struct defer *d = defer_new(base);
    struct got s = {0}, l = {0};

    (void)state;
    assert_non_null(d);
    store_defer(d, on_store, &s, STORE_STALE, 42);
    lock_defer(d, on_lock, &l, LOCK_ERROR);
    assert_int_equal(s.calls + l.calls, 0);
    event_base_loop(base, EVLOOP_NONBLOCK);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.res, STORE_STALE);
    assert_int_equal(s.mark, 42);
    assert_int_equal(l.calls, 1);
    assert_int_equal(l.res, LOCK_ERROR);
    assert_int_equal(l.mark, 0);
    defer_free(d);
    event_base_free(base);
}

static struct got *parked_get;

static void
fake_get(struct store *st, const char *res, size_t len, store_cb cb, void *arg)
{
    (void)st;
    assert_true(len < sizeof(parked_get->res_name));
    memcpy(parked_get->res_name, res, len);
    cb(arg, STORE_ACCEPTED, 7);
}

static void
test_parked_call_is_made_once_up(void **state)
{
    static const struct store_ops fake = {.name = "fake", .get = fake_get};
    struct event_base *base = event_base_new();
    struct coldq *q = coldq_new(base, 60000);
    struct got g = {0};
    char res[] = "docs/a";
    char *huge = calloc(1, BACKEND_PARK_MAX + 2);

    (void)state;
    parked_get = &g;
    assert_non_null(q);
    assert_non_null(huge);
    memset(huge, 'x', BACKEND_PARK_MAX + 1);
    assert_false(store_park(q, NULL, &fake, true, huge, BACKEND_PARK_MAX + 1, 0,
                            on_store, &g));
    assert_true(
        store_park(q, NULL, &fake, true, res, strlen(res), 0, on_store, &g));
    memset(res, '?', strlen(res)); /* the parked call has its own copy */
    event_base_loop(base, EVLOOP_NONBLOCK);
    assert_int_equal(g.calls, 0);
    coldq_up(q);
    event_base_loop(base, EVLOOP_NONBLOCK);
    assert_int_equal(g.calls, 1);
    assert_string_equal(g.res_name, "docs/a");
    assert_int_equal(g.mark, 7);
    assert_false(
        store_park(q, NULL, &fake, true, res, strlen(res), 0, on_store, &g));
    free(huge);
    coldq_free(q);
    event_base_free(base);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_offered_backends_are_registered),
        cmocka_unit_test(test_deferred_answers_come_on_a_later_pass),
        cmocka_unit_test(test_parked_call_is_made_once_up),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
