/* test_lock_lmdb.c: the LMDB lock backend through its ops table: busy,
 * lost, release keeps the counter, expiry, extend, a fence that keeps
 * growing across a reopen, and the operations of one turn in order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "../../conf/cfg.h"
#include "../../proxy/locks/lock.h"

struct answer {
    int done;
    enum lock_result res;
    int64_t fence;
    int64_t ttl;
};

struct fixture {
    char dir[64];
    char path[128];
    struct event_base *base;
    struct cfg_locks cfg;
    const struct lock_ops *ops;
    struct lock_backend *b;
    int pending;
};

static struct fixture *cur;

static void
on_answer(void *arg, enum lock_result res, int64_t fence, int64_t ttl)
{
    struct answer *a = arg;

    assert_int_equal(a->done, 0);
    a->done = 1;
    a->res = res;
    a->fence = fence;
    a->ttl = ttl;
    cur->pending--;
}

static void
run(struct fixture *f)
{
    while (f->pending > 0) {
        assert_int_equal(event_base_loop(f->base, EVLOOP_ONCE), 0);
    }
}

static void
reopen(struct fixture *f)
{
    char err[256] = "";

    if (f->b != NULL) {
        f->ops->close(f->b);
    }
    f->b = f->ops->open(f->base, &f->cfg, err, sizeof(err));
    if (f->b == NULL) {
        fail_msg("open: %s", err);
    }
}

static int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/tidemark-locks-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/sub/locks.lmdb", f->dir);
    f->base = event_base_new();
    assert_non_null(f->base);
    f->cfg.backend = "lmdb";
    f->cfg.path = f->path;
    f->cfg.map_size = 1 << 20;
    f->ops = lock_find("lmdb");
    assert_non_null(f->ops);
    assert_null(lock_find("nosuch"));
    cur = f;
    reopen(f);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;
    char cmd[256];

    f->ops->close(f->b);
    event_base_free(f->base);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

/* Submit kind on name to f's backend, answered into a. */
static void
submit(struct fixture *f, enum lock_kind kind, const char *name, int64_t fence,
       int64_t ttl, int64_t min_fence, struct answer *a)
{
    struct lock_op op = {.kind = kind,
                         .name = name,
                         .len = strlen(name),
                         .ttl_ms = ttl,
                         .fence = fence,
                         .min_fence = min_fence,
                         .cb = on_answer,
                         .arg = a};

    f->pending++;
    f->ops->submit(f->b, &op);
}

static struct answer
acquire(struct fixture *f, const char *name, int64_t ttl)
{
    struct answer a = {0};

    submit(f, LOCK_OP_ACQUIRE, name, 0, ttl, 0, &a);
    assert_int_equal(a.done, 0); /* never from inside the call */
    run(f);
    return a;
}

static struct answer
op(struct fixture *f, char which, const char *name, int64_t fence, int64_t ttl)
{
    struct answer a = {0};

    submit(f,
           which == 'e'   ? LOCK_OP_EXTEND
           : which == 'r' ? LOCK_OP_RELEASE
                          : LOCK_OP_STATUS,
           name, fence, ttl, 0, &a);
    run(f);
    return a;
}

static void
test_lifecycle(void **state)
{
    struct fixture *f = *state;
    struct answer a;

    a = op(f, 'g', "r/1", 0, 0);
    assert_int_equal(a.res, LOCK_NONE);
    a = acquire(f, "r/1", 60000);
    assert_int_equal(a.res, LOCK_OK);
    assert_int_equal(a.fence, 1);
    assert_int_equal(a.ttl, 60000);
    a = acquire(f, "r/1", 60000);
    assert_int_equal(a.res, LOCK_BUSY);
    assert_int_equal(a.fence, 1);
    assert_true(a.ttl > 0 && a.ttl <= 60000);
    a = op(f, 'g', "r/1", 0, 0);
    assert_int_equal(a.res, LOCK_OK);
    assert_int_equal(a.fence, 1);
    /* another holder's fence: nothing changes */
    assert_int_equal(op(f, 'r', "r/1", 2, 0).res, LOCK_LOST);
    assert_int_equal(op(f, 'e', "r/1", 2, 1000).res, LOCK_LOST);
    a = op(f, 'e', "r/1", 1, 90000);
    assert_int_equal(a.res, LOCK_OK);
    assert_int_equal(a.ttl, 90000);
    assert_int_equal(op(f, 'r', "r/1", 1, 0).res, LOCK_OK);
    /* released: a second release, an extend find it gone */
    assert_int_equal(op(f, 'r', "r/1", 1, 0).res, LOCK_LOST);
    assert_int_equal(op(f, 'e', "r/1", 1, 1000).res, LOCK_LOST);
    assert_int_equal(op(f, 'g', "r/1", 0, 0).res, LOCK_NONE);
    /* the counter survives release */
    a = acquire(f, "r/1", 60000);
    assert_int_equal(a.res, LOCK_OK);
    assert_int_equal(a.fence, 2);
    /* and a reopen */
    reopen(f);
    assert_int_equal(acquire(f, "r/1", 60000).res, LOCK_BUSY);
    assert_int_equal(op(f, 'r', "r/1", 2, 0).res, LOCK_OK);
    assert_int_equal(acquire(f, "r/1", 60000).fence, 3);
    /* other names have their own counter */
    assert_int_equal(acquire(f, "r/2", 60000).fence, 1);
}

static void
test_expiry(void **state)
{
    struct fixture *f = *state;
    struct answer a = acquire(f, "x", 20);

    assert_int_equal(a.res, LOCK_OK);
    usleep(40 * 1000);
    assert_int_equal(op(f, 'g', "x", 0, 0).res, LOCK_NONE);
    /* the slow client's release and extend delete nothing */
    assert_int_equal(op(f, 'r', "x", 1, 0).res, LOCK_LOST);
    assert_int_equal(op(f, 'e', "x", 1, 1000).res, LOCK_LOST);
    a = acquire(f, "x", 60000);
    assert_int_equal(a.res, LOCK_OK);
    assert_int_equal(a.fence, 2);
    assert_int_equal(op(f, 'r', "x", 1, 0).res, LOCK_LOST);
    assert_int_equal(op(f, 'g', "x", 0, 0).fence, 2);
}

/* A floor above the counter sets the fence and the counter; a floor
 * below it changes nothing. */
static void
test_floor(void **state)
{
    struct fixture *f = *state;
    struct answer a = {0};

    submit(f, LOCK_OP_ACQUIRE, "fl", 0, 60000, 1001, &a);
    run(f);
    assert_int_equal(a.res, LOCK_OK);
    assert_int_equal(a.fence, 1001);
    assert_int_equal(op(f, 'r', "fl", 1001, 0).res, LOCK_OK);
    a = (struct answer){0};
    submit(f, LOCK_OP_ACQUIRE, "fl", 0, 60000, 5, &a);
    run(f);
    assert_int_equal(a.res, LOCK_OK);
    assert_int_equal(a.fence, 1002);
}

/* Acquires of one turn share a commit and still see each other: one
 * wins, the rest are busy with the winner's fence. */
static void
test_one_turn(void **state)
{
    struct fixture *f = *state;
    struct answer a[16] = {{0}};
    int wins = 0;

    for (int i = 0; i < 16; i++) {
        submit(f, LOCK_OP_ACQUIRE, "hot", 0, 60000, 0, &a[i]);
    }
    run(f);
    for (int i = 0; i < 16; i++) {
        assert_int_equal(a[i].fence, 1);
        wins += a[i].res == LOCK_OK;
        assert_true(a[i].res == (i == 0 ? LOCK_OK : LOCK_BUSY));
    }
    assert_int_equal(wins, 1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lifecycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expiry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_turn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_floor, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
