/* test_batch.c: the batching the network stores share, without a server:
 * taking a batch off the queue, sorting and deduplicating it per key with
 * the highest token, and fanning one key's mark back to every waiter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "batch_test.h"

/* Queue a raise (token > 0) or a get (token 0) of name for waiter i. */
static void
push(struct batch_list *l, const char *name, int64_t token, int i)
{
    push_call(l, name, strlen(name), token, token == 0, i);
}

static void
test_req_keys(void **state)
{
    struct batch_req *r = batch_req_new("doc", 3, NULL, 0, 5, false, NULL, 0);

    assert_non_null(r);
    assert_int_equal(r->klen, 3);
    assert_memory_equal(r->key, "doc", 3);
    assert_ptr_equal(r->name, r->key);
    assert_int_equal(r->nlen, 3);
    assert_int_equal(r->res, STORE_ERROR);
    free(r);
    /* A key of its own (a digest): the name follows it. */
    r = batch_req_new("d\0c", 3, "K:123", 5, 5, false, NULL, 0);
    assert_non_null(r);
    assert_int_equal(r->klen, 5);
    assert_memory_equal(r->key, "K:123", 5);
    assert_int_equal(r->nlen, 3);
    assert_memory_equal(r->name, "d\0c", 3);
    free(r);
    r = batch_req_new("", 0, NULL, 0, 1, false, NULL, 0);
    assert_non_null(r);
    assert_int_equal(r->klen, 0);
    free(r);
}

static void
test_take(void **state)
{
    struct batch_list pending = {0}, batch = {0};

    reset();
    /* A get goes alone. */
    push(&pending, "g", 0, 0);
    push(&pending, "a", 1, 1);
    assert_int_equal(batch_take(&pending, &batch, 100, SIZE_MAX), 1);
    assert_true(batch.head->is_get);
    batch_fail(&batch);
    /* Raises up to the next get. */
    push(&pending, "b", 2, 2);
    push(&pending, "g", 0, 3);
    assert_int_equal(batch_take(&pending, &batch, 100, SIZE_MAX), 2);
    assert_null(batch.head->next->next);
    batch_fail(&batch);
    batch_fail(&pending);
    /* At most max_raises. */
    for (int i = 0; i < 5; i++) {
        push(&pending, "a", i + 1, i);
    }
    assert_int_equal(batch_take(&pending, &batch, 3, SIZE_MAX), 3);
    assert_int_equal(pending.n, 2);
    batch_fail(&batch);
    batch_fail(&pending);
    /* At most max_keys distinct keys; repeats of a key taken ride
     * along. */
    push(&pending, "a", 1, 0);
    push(&pending, "b", 1, 1);
    push(&pending, "a", 2, 2);
    push(&pending, "c", 1, 3);
    push(&pending, "b", 2, 4);
    assert_int_equal(batch_take(&pending, &batch, 100, 2), 3);
    assert_int_equal(pending.n, 2);
    assert_memory_equal(pending.head->key, "c", 1);
    batch_fail(&batch);
    batch_fail(&pending);
    /* Nothing queued: nothing taken. */
    assert_int_equal(batch_take(&pending, &batch, 100, 2), 0);
    assert_null(batch.head);
    for (int i = 0; i < 5; i++) {
        assert_true(answers[i].calls >= 1);
        assert_int_equal(answers[i].res, STORE_ERROR);
    }
}

static void
test_sort_group_settle(void **state)
{
    static const struct {
        const char *name;
        int64_t token;
    } in[] = {
        {"b", 3}, {"a", 7}, {"ab", 1}, {"b", 9}, {"a", 2}, {"b", 9}, {"a", 5},
    };
    size_t n = sizeof(in) / sizeof(in[0]);
    struct batch_list batch = {0};
    struct batch_req *scratch[16];
    struct batch_req *first, *end;
    int64_t top;

    reset();
    for (size_t i = 0; i < n; i++) {
        push(&batch, in[i].name, in[i].token, (int)i);
    }
    assert_int_equal(batch_sort(&batch, scratch), 3);
    assert_int_equal(batch.n, n);
    /* Keys in byte order, then length: a, ab, b. */
    first = batch.head;
    end = batch_group(first, &top);
    assert_memory_equal(first->key, "a", 1);
    assert_int_equal(top, 7);
    assert_ptr_equal(batch_find(&batch, NULL, "a", 1), first);
    /* The store raised a to 7: 7 is accepted, 2 and 5 stale with 7. */
    batch_settle(first, end, 7, "test");
    first = end;
    end = batch_group(first, &top);
    assert_int_equal(first->klen, 2);
    assert_int_equal(top, 1);
    assert_ptr_equal(batch_find(&batch, NULL, "ab", 2), first);
    /* Looked for from ab's group: ab there, b after it, a before it (the
     * look wraps to the head), c nowhere. */
    assert_ptr_equal(batch_find(&batch, first, "ab", 2), first);
    assert_ptr_equal(batch_find(&batch, first, "b", 1), end);
    assert_ptr_equal(batch_find(&batch, first, "a", 1), batch.head);
    assert_null(batch_find(&batch, first, "c", 1));
    assert_null(batch_find(&batch, first, "", 0));
    /* ab's mark was higher already: stale. */
    batch_settle(first, end, 4, "test");
    first = end;
    end = batch_group(first, &top);
    assert_memory_equal(first->key, "b", 1);
    assert_int_equal(top, 9);
    assert_null(end);
    /* A mark below a token cannot be an answer to it: an error. */
    batch_settle(first, end, 8, "test");
    assert_null(batch_find(&batch, NULL, "c", 1));
    batch_answer(&batch);
    assert_null(batch.head);
    assert_int_equal(batch.n, 0);
    assert_int_equal(norder, (int)n);
    told(1, STORE_ACCEPTED, 7); /* a 7 */
    told(4, STORE_STALE, 7);    /* a 2 */
    told(6, STORE_STALE, 7);    /* a 5 */
    told(2, STORE_STALE, 4);    /* ab 1 */
    told(0, STORE_STALE, 8);    /* b 3 below 8 */
    told(3, STORE_ERROR, 0);    /* b 9 above 8 */
    told(5, STORE_ERROR, 0);
}

static void
test_sort_empty_and_one(void **state)
{
    struct batch_list batch = {0};
    struct batch_req *scratch[1];
    int64_t top;

    reset();
    assert_int_equal(batch_sort(&batch, scratch), 0);
    push(&batch, "x", 4, 0);
    assert_int_equal(batch_sort(&batch, scratch), 1);
    assert_null(batch_group(batch.head, &top));
    assert_int_equal(top, 4);
    batch_settle(batch.head, NULL, 4, "test");
    batch_answer(&batch);
    told(0, STORE_ACCEPTED, 4);
}

/* A callback may queue another call on the same list: it runs too. */
static struct batch_list *requeue_list;

static void
on_requeue(void *arg, enum store_result res, int64_t mark)
{
    on_answer(arg, res, mark);
    if ((intptr_t)arg == 0) {
        push(requeue_list, "y", 1, 1);
    }
}

static void
test_fail_runs_what_callbacks_queue(void **state)
{
    struct batch_list l = {0};
    struct batch_req *r =
        batch_req_new("x", 1, NULL, 0, 1, false, on_requeue, (void *)0);

    reset();
    assert_non_null(r);
    QUEUE_PUSH(&l, r);
    requeue_list = &l;
    batch_fail(&l);
    /* batch_fail marks what is there; the new call keeps its own
     * (unsettled: STORE_ERROR) answer. */
    told(0, STORE_ERROR, 0);
    told(1, STORE_ERROR, 0);
    assert_null(l.head);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_req_keys),
        cmocka_unit_test(test_take),
        cmocka_unit_test(test_sort_group_settle),
        cmocka_unit_test(test_sort_empty_and_one),
        cmocka_unit_test(test_fail_runs_what_callbacks_queue),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
