/* store.c: the registry of store backends, looked up by [store] type. */
#include "store.h"

#include <string.h>

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
