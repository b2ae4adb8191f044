/* store.c: the registry of store backends, looked up by [store] type;
 * and the stores' typed answers deferred to a later pass of the loop and
 * calls parked until the first connection, over what the lock backends
 * share with them (clients/backend.h). */
#include "store.h"

#include <stdlib.h>
#include <string.h>

#include "../clients/backend.h"

/* Every backend: adding one is one entry here (and its store_<name>.c). */
extern const struct store_ops store_lmdb_ops, store_redis_ops,
    store_postgres_ops, store_etcd_ops;

static const void *const backends[] = {&store_lmdb_ops, &store_redis_ops,
                                       &store_postgres_ops, &store_etcd_ops};

const struct store_ops *
store_find(const char *type)
{
    return BACKEND_FIND(backends, type);
}

/* ---- answers on a later pass ------------------------------------------ */

static void
store_answer_call(const struct backend_answer *a)
{
    ((store_cb)a->cb)(a->arg, (enum store_result)a->res, a->value);
}

void
store_defer(struct defer *d, store_cb cb, void *arg, enum store_result res,
            int64_t mark)
{
    backend_defer(d,
                  &(struct backend_answer){.call = store_answer_call,
                                           .cb = (void (*)(void))cb,
                                           .arg = arg,
                                           .res = (int)res,
                                           .value = mark},
                  "store: out of memory: a store callback is lost");
}

/* ---- calls parked for a cold start ------------------------------------ */

struct store_call {
    struct store *st;
    const struct store_ops *ops;
    bool is_get;
    int64_t token;
    store_cb cb;
    void *arg;
    size_t len;
    char res[];
};

static void
store_call_run(void *arg, bool up)
{
    struct store_call *c = arg;

    if (!up) {
        c->cb(c->arg, STORE_ERROR, 0);
    } else if (c->is_get) {
        c->ops->get(c->st, c->res, c->len, c->cb, c->arg);
    } else {
        c->ops->raise(c->st, c->res, c->len, c->token, c->cb, c->arg);
    }
    free(c);
}

bool
store_park(struct coldq *q, struct store *st, const struct store_ops *ops,
           bool is_get, const char *res, size_t len, int64_t token, store_cb cb,
           void *arg)
{
    struct store_call *c = backend_park_alloc(q, sizeof(*c) + len + 1, len);

    if (c == NULL) {
        return false;
    }
    *c = (struct store_call){.st = st,
                             .ops = ops,
                             .is_get = is_get,
                             .token = token,
                             .cb = cb,
                             .arg = arg,
                             .len = len};
    memcpy(c->res, res, len);
    c->res[len] = '\0';
    return backend_park(q, store_call_run, c);
}
