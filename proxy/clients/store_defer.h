/* store_defer.h: answers a network store or lock backend gives without a
 * round trip (an outage, a full queue), run on a later pass of the event
 * loop, so that a callback never runs inside the call that caused it. */
#ifndef TM_STORE_DEFER_H
#define TM_STORE_DEFER_H

#include <stdbool.h>
#include <stdint.h>

#include "../locks/lock.h"
#include "../store/store.h"

struct event_base;
struct store_defer;

/* A queue whose answers run from base's loop. NULL when out of memory. */
struct store_defer *store_defer_new(struct event_base *base)
    __attribute__((warn_unused_result));

/* Answer cb(arg, res, mark) on a later pass of the loop. Allocates one
 * small record; when that fails the answer is lost and the caller's
 * [store] timeout_ms answers instead (logged). */
void store_defer(struct store_defer *d, store_cb cb, void *arg,
                 enum store_result res, int64_t mark);

/* Answer a lock operation cb(arg, res, 0, 0) on a later pass of the
 * loop; as store_defer otherwise. */
void store_defer_lock(struct store_defer *d, lock_cb cb, void *arg,
                      enum lock_result res);

/* Run every queued answer now (including those queued by the callbacks
 * it runs), then free. For close. NULL is fine. */
void store_defer_free(struct store_defer *d);

#endif
