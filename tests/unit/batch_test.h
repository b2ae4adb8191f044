/* batch_test.h: what the tests of the network stores' batches share:
 * calls queued for waiters by index (the callback's arg), the answer
 * each was told, in the order told, and the check that one was told
 * once. */
#ifndef TM_BATCH_TEST_H
#define TM_BATCH_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
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

/* Queue for waiter i a call on key (len bytes, the resource itself): a
 * raise to token, or a get. */
static void
push_call(struct batch_list *l, const char *key, size_t len, int64_t token,
          bool is_get, int i)
{
    struct batch_req *r = batch_req_new(key, len, NULL, 0, token, is_get,
                                        on_answer, (void *)(intptr_t)i);

    assert_non_null(r);
    QUEUE_PUSH(l, r);
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
