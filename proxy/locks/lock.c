/* lock.c: the registry of lock backends, looked up by [locks] backend. */
#include "lock.h"

#include <string.h>

/* Every backend, by the name part of its lock_<name>_ops. Adding one is
 * one entry here (and its lock_<name>.c). */
#define LOCK_BACKENDS(X) X(lmdb) X(redis) X(postgres) X(etcd)

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
