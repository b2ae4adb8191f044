/* coldq.h: calls that reach a shared store or lock backend while it makes
 * its first connection wait for it, each up to the backend's timeout_ms,
 * instead of failing at once. Once the backend has been up, an outage
 * fails fast as before: only a cold start waits. The typed parkings are
 * store_park (store.h) and lock_park (lock.h), both through backend_park
 * (backend.h). */
#ifndef TM_COLDQ_H
#define TM_COLDQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct coldq;

/* up: the backend is up, make the call now; false: it did not come up in
 * time (or is closing), answer an error. Exactly once per parked call,
 * never from inside coldq_park. */
typedef void (*coldq_fn)(void *arg, bool up);

/* A queue whose calls wait up to timeout_ms each. NULL: out of memory. */
struct coldq *coldq_new(struct event_base *base, int timeout_ms)
    __attribute__((warn_unused_result));

/* The backend has never been up: calls should park. NULL is never. */
bool coldq_waiting(const struct coldq *q);

/* Park fn(arg). false (fn never called) when not waiting, the queue is
 * full (COLDQ_MAX, logged once) or out of memory. */
bool coldq_park(struct coldq *q, coldq_fn fn, void *arg)
    __attribute__((warn_unused_result));

/* The backend is up: every parked call runs fn(arg, true) on the next
 * pass of the loop, in order; coldq_waiting is false from now on. */
void coldq_up(struct coldq *q);

/* fn(arg, false) for every parked call, now; then free. NULL is fine. */
void coldq_free(struct coldq *q);

#endif
