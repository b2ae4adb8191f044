/* batch_test.h: what the tests of the network stores' batches share:
 * the answer each waiter was told, by its index (the callback's arg),
 * in the order told, and the check that one was told once. */
#ifndef TM_BATCH_TEST_H
#define TM_BATCH_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../proxy/store/batch.h"

#define MAX_WAITERS 64

/* What each waiter was told, by its index. */
struct answer {
    int calls;
    enum store_result res;
    int64_t mark;
};

static struct answer answers[MAX_WAITERS];
static int order[MAX_WAITERS]; /* the waiters, in the order told */
static int norder;

/* The callback of every call queued for waiter (intptr_t)arg. */
static void
on_answer(void *arg, enum store_result res, int64_t mark)
{
    int i = (int)(intptr_t)arg;

    assert_true(i >= 0 && i < MAX_WAITERS && norder < MAX_WAITERS);
    answers[i].calls++;
    answers[i].res = res;
    answers[i].mark = mark;
    order[norder++] = i;
}

static void
reset(void)
{
    memset(answers, 0, sizeof(answers));
    norder = 0;
}

/* Waiter i was told res with mark, once. */
static void
told(int i, enum store_result res, int64_t mark)
{
    assert_int_equal(answers[i].calls, 1);
    assert_int_equal(answers[i].res, res);
    assert_true(answers[i].mark == mark);
}

#endif
