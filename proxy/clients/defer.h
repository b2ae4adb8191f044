/* defer.h: answers a network store or lock backend gives without a
 * round trip (an outage, a full queue), run on a later pass of the event
 * loop, so that a callback never runs inside the call that caused it.
 * The typed answers are store_defer (store.h) and lock_defer (lock.h),
 * both through backend_defer (backend.h). */
#ifndef TM_DEFER_H
#define TM_DEFER_H

struct event_base;
struct defer;

/* One deferred call, embedded first in the caller's record: run(it)
 * makes the call and frees the record. */
struct defer_item {
    struct defer_item *next;
    void (*run)(struct defer_item *it);
};

/* A queue whose calls run from base's loop. NULL when out of memory. */
struct defer *defer_new(struct event_base *base)
    __attribute__((warn_unused_result));

/* Run it on a later pass of the loop, after those pushed before it. */
void defer_push(struct defer *d, struct defer_item *it);

/* Run every queued call now (including those queued by the calls it
 * runs), then free. For close. NULL is fine. */
void defer_free(struct defer *d);

#endif
