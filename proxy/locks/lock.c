/* lock.c: the registry of lock backends, looked up by [locks] backend;
 * and the backends' typed answers deferred to a later pass of the loop
 * and operations parked until the first connection, over what the mark
 * stores share with them (clients/backend.h). */
#include "lock.h"

#include <stdlib.h>
#include <string.h>

#include "../clients/backend.h"

/* Every backend: adding one is one entry here (and its lock_<name>.c). */
extern const struct lock_ops lock_lmdb_ops, lock_redis_ops, lock_postgres_ops,
    lock_etcd_ops, lock_zookeeper_ops;

static const void *const backends[] = {&lock_lmdb_ops, &lock_redis_ops,
                                       &lock_postgres_ops, &lock_etcd_ops,
                                       &lock_zookeeper_ops};

const struct lock_ops *
lock_find(const char *name)
{
    return BACKEND_FIND(backends, name);
}

/* ---- answers on a later pass ------------------------------------------ */

static void
lock_answer_call(const struct backend_answer *a)
{
    ((lock_cb)a->cb)(a->arg, (enum lock_result)a->res, 0, 0);
}

void
lock_defer(struct defer *d, lock_cb cb, void *arg, enum lock_result res)
{
    backend_defer(d,
                  &(struct backend_answer){.call = lock_answer_call,
                                           .cb = (void (*)(void))cb,
                                           .arg = arg,
                                           .res = (int)res},
                  "locks: out of memory: a lock callback is lost");
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
    struct parked_op *c =
        backend_park_alloc(q, sizeof(*c) + op->len + 1, op->len);

    if (c == NULL) {
        return false;
    }
    c->b = b;
    c->ops = ops;
    c->op = *op;
    memcpy(c->name, op->name, op->len);
    c->name[op->len] = '\0';
    c->op.name = c->name;
    return backend_park(q, parked_op_run, c);
}
