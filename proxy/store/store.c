/* store.c: the registry of store backends, looked up by [store] type;
 * and what the network stores share: answers deferred to a later pass of
 * the loop, calls parked until the first connection. */
#include "store.h"

#include <stdlib.h>
#include <string.h>

#include "../clients/coldq.h"
#include "../clients/defer.h"
#include "../log.h"

/* Every backend, by the name part of its store_<name>_ops. Adding one is
 * one entry here (and its store_<name>.c). */
#define STORE_BACKENDS(X) X(lmdb) X(redis) X(postgres) X(etcd)

#define STORE_DECLARE(name) extern const struct store_ops store_##name##_ops;
#define STORE_ENTRY(name) &store_##name##_ops,

STORE_BACKENDS(STORE_DECLARE)

static const struct store_ops *const backends[] = {STORE_BACKENDS(STORE_ENTRY)};

const struct store_ops *
store_find(const char *type)
{
    if (type == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
        if (strcmp(backends[i]->name, type) == 0) {
            return backends[i];
        }
    }
    return NULL;
}

/* ---- answers on a later pass ------------------------------------------ */

struct store_answer {
    struct defer_item it; /* first: defer.h runs and frees it */
    store_cb cb;
    void *arg;
    enum store_result res;
    int64_t mark;
};

static void
store_answer_run(struct defer_item *it)
{
    struct store_answer *a = (struct store_answer *)it;

    a->cb(a->arg, a->res, a->mark);
    free(a);
}

void
store_defer(struct defer *d, store_cb cb, void *arg, enum store_result res,
            int64_t mark)
{
    struct store_answer *a = malloc(sizeof(*a));

    if (a == NULL) {
        log_error("store: out of memory: a store callback is lost");
        return;
    }
    *a = (struct store_answer){.it.run = store_answer_run,
                               .cb = cb,
                               .arg = arg,
                               .res = res,
                               .mark = mark};
    defer_push(d, &a->it);
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
    struct store_call *c;

    if (!coldq_waiting(q) || len > 65536) {
        return false;
    }
    c = malloc(sizeof(*c) + len + 1);
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
    if (!coldq_park(q, store_call_run, c)) {
        free(c);
        return false;
    }
    return true;
}
