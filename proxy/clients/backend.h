/* backend.h: what the mark stores (store/) and the lock backends (locks/)
 * share: the registry of backends by name, answers deferred to a later
 * pass of the loop, and calls parked until the first connection. Each
 * side keeps its typed calls over these: store_find, store_defer and
 * store_park (store.h); lock_find, lock_defer and lock_park (lock.h). */
#ifndef TM_BACKEND_H
#define TM_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coldq.h"
#include "defer.h"

/* The longest name a parked call copies (a resource, a lock name). */
#define BACKEND_PARK_MAX 65536

/* The entry of table[0..n) named name: each entry points at a backend's
 * ops, whose first member is its name (const char *). NULL when none
 * is, or name is NULL. */
const void *backend_find(const void *const *table, size_t n, const char *name);

/* backend_find over a registry's array table. */
#define BACKEND_FIND(table, name)                                              \
    backend_find((table), sizeof(table) / sizeof((table)[0]), (name))

/* An answer on a later pass: call(a) calls the caller's callback cb
 * (cast back to its own type) with arg, res and value. */
struct backend_answer {
    struct defer_item it; /* first: defer.h runs and frees it */
    void (*call)(const struct backend_answer *a);
    void (*cb)(void);
    void *arg;
    int res;
    int64_t value;
};

/* Run call(a) with a copy of *a on a later pass of d's loop, then free
 * it. Allocates one small record; when that fails the answer is lost and
 * lost is logged (the caller's timeout answers instead). */
void backend_defer(struct defer *d, const struct backend_answer *a,
                   const char *lost);

/* size bytes (zeroed) for a call that names len bytes, to park on q;
 * NULL when q does not wait for a first connection, len is over
 * BACKEND_PARK_MAX, or out of memory. */
void *backend_park_alloc(const struct coldq *q, size_t size, size_t len)
    __attribute__((warn_unused_result));

/* Park rec (from backend_park_alloc) to run fn(rec, up), which frees
 * it. false (rec freed, fn never called) when q does not take it. */
bool backend_park(struct coldq *q, coldq_fn fn, void *rec)
    __attribute__((warn_unused_result));

#endif
