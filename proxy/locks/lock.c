/* lock.c: the registry of lock backends, looked up by [locks] backend;
 * and what the network backends share: answers deferred to a later pass
 * of the loop, operations parked until the first connection. */
#include "lock.h"

#include <stdlib.h>
#include <string.h>

#include "../clients/coldq.h"
#include "../clients/defer.h"
#include "../log.h"

/* Every backend, by the name part of its lock_<name>_ops. Adding one is
 * one entry here (and its lock_<name>.c). */
#define LOCK_BACKENDS(X) X(lmdb) X(redis) X(postgres) X(etcd) X(zookeeper)

#define LOCK_DECLARE(name) extern const struct lock_ops lock_##name##_ops;
#define LOCK_ENTRY(name) &lock_##name##_ops,

LOCK_BACKENDS(LOCK_DECLARE)

static const struct lock_ops *const backends[] = {LOCK_BACKENDS(LOCK_ENTRY)};

const struct lock_ops *
lock_find(const char *name)
{
    if (name == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
        if (strcmp(backends[i]->name, name) == 0) {
            return backends[i];
        }
    }
    return NULL;
}

/* ---- answers on a later pass ------------------------------------------ */

struct lock_answer {
    struct defer_item it; /* first: defer.h runs and frees it */
    lock_cb cb;
    void *arg;
    enum lock_result res;
};

static void
lock_answer_run(struct defer_item *it)
{
    struct lock_answer *a = (struct lock_answer *)it;

    a->cb(a->arg, a->res, 0, 0);
    free(a);
}

void
lock_defer(struct defer *d, lock_cb cb, void *arg, enum lock_result res)
{
    struct lock_answer *a = malloc(sizeof(*a));

    if (a == NULL) {
        log_error("locks: out of memory: a lock callback is lost");
        return;
    }
    *a = (struct lock_answer){
        .it.run = lock_answer_run, .cb = cb, .arg = arg, .res = res};
    defer_push(d, &a->it);
}

/* ---- operations parked for a cold start ------------------------------- */

struct parked_op {
    struct lock_backend *b;
    const struct lock_ops *ops;
    struct lock_op op; /* op.name points at name */
    char name[];
};

static void
parked_op_run(void *arg, bool up)
{
    struct parked_op *c = arg;

    if (up) {
        c->ops->submit(c->b, &c->op);
    } else {
        c->op.cb(c->op.arg, LOCK_ERROR, 0, 0);
    }
    free(c);
}

bool
lock_park(struct coldq *q, struct lock_backend *b, const struct lock_ops *ops,
          const struct lock_op *op)
{
    struct parked_op *c;

    if (!coldq_waiting(q) || op->len > 65536) {
        return false;
    }
    c = malloc(sizeof(*c) + op->len + 1);
    if (c == NULL) {
        return false;
    }
    c->b = b;
    c->ops = ops;
    c->op = *op;
    memcpy(c->name, op->name, op->len);
    c->name[op->len] = '\0';
    c->op.name = c->name;
    if (!coldq_park(q, parked_op_run, c)) {
        free(c);
        return false;
    }
    return true;
}
