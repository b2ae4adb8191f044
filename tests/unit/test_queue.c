/* test_queue.c: the FIFO macros and queue_admit, the bound the network
 * stores and the Postgres lock backend put on their queues: one log line
 * per run of refusals, in the words each backend used before. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../proxy/clients/queue.h"
#include "../../proxy/log.h"

static int nlogs;
static char last[256];

static void
on_log(void *arg, enum tm_log_level level, const char *msg)
{
    (void)arg;
    assert_int_equal(level, TM_LOG_ERROR);
    nlogs++;
    snprintf(last, sizeof(last), "%s", msg);
}

struct admit_step {
    size_t n;
    bool want;
    int logs; /* log lines so far */
};

static const struct admit_step steps[] = {
    {0, true, 0},  {2, true, 0}, {3, false, 1}, {4, false, 1},
    {3, false, 1}, {2, true, 1}, {3, false, 2}, {0, true, 2},
};

static const struct tm_log logger = {on_log, NULL, TM_LOG_INFO};

static void
test_admit_logs_once_per_run(void **state)
{
    bool logged = false;

    (void)state;
    nlogs = 0;
    lib_enter(&logger);
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        assert_int_equal(
            queue_admit(steps[i].n, 3, &logged, "etcd", "requests are waiting"),
            steps[i].want);
        assert_int_equal(nlogs, steps[i].logs);
        assert_int_equal(logged, !steps[i].want);
    }
    lib_enter(NULL);
}

struct admit_words {
    const char *who;
    const char *what;
    const char *want;
};

static const struct admit_words words[] = {
    {"postgres", "requests are waiting for a connection",
     "postgres: 65536 requests are waiting for a connection: refusing more "
     "until the queue drains"},
    {"etcd", "requests are waiting",
     "etcd: 65536 requests are waiting: refusing more until the queue "
     "drains"},
    {"locks: postgres", "operations are waiting for a connection",
     "locks: postgres: 65536 operations are waiting for a connection: "
     "refusing more until the queue drains"},
};

static void
test_admit_words(void **state)
{
    (void)state;
    lib_enter(&logger);
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        bool logged = false;

        assert_false(
            queue_admit(65536, 65536, &logged, words[i].who, words[i].what));
        assert_string_equal(last, words[i].want);
    }
    lib_enter(NULL);
}

struct item {
    struct item *next;
    int v;
};

struct item_list {
    QUEUE_FIELDS(struct item);
};

static void
test_fifo(void **state)
{
    struct item it[4] = {{NULL, 0}, {NULL, 1}, {NULL, 2}, {NULL, 3}};
    struct item_list a = {0}, b = {0};
    struct item *e;

    (void)state;
    QUEUE_PUSH(&a, &it[0]);
    QUEUE_PUSH(&a, &it[1]);
    QUEUE_PUSH(&b, &it[2]);
    QUEUE_PUSH(&b, &it[3]);
    QUEUE_SPLICE(&a, &b);
    assert_int_equal(a.n, 4);
    assert_int_equal(b.n, 0);
    assert_null(b.head);
    for (int i = 0; i < 4; i++) {
        QUEUE_POP(&a, e);
        assert_non_null(e);
        assert_int_equal(e->v, i);
        assert_null(e->next);
    }
    QUEUE_POP(&a, e);
    assert_null(e);
    assert_null(a.tail);
    assert_int_equal(a.n, 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admit_logs_once_per_run),
        cmocka_unit_test(test_admit_words),
        cmocka_unit_test(test_fifo),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
