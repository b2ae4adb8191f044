/* order.h: ordering after the check. Per resource, a write with a higher
 * token is forwarded only after every in-flight write with a lower token
 * has finished; a write that ended without an answer keeps the resource
 * closed to higher tokens for a grace period. */
#ifndef TM_ORDER_H
#define TM_ORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct order;
struct order_slot;

/* Called on the loop when a queued write may go. */
typedef void (*order_go_cb)(void *arg);

struct order *order_new(struct event_base *base);
/* Every slot must have been left or cancelled. */
void order_free(struct order *o);

/* Ask to forward a write of token on res. Returns a slot; *now is true
 * when the write may go at once, else go(arg) runs when it may. NULL when
 * out of memory. */
struct order_slot *order_enter(struct order *o, const char *res, size_t len,
                               int64_t token, order_go_cb go, void *arg,
                               bool *now);

/* Wait, without a turn of its own, until no write with a lower token is
 * in flight or queued on res: a member's write behind a request on its
 * collection (which takes its turn on the collection's subtree mark).
 * *now true (NULL returned, nothing held) when none is; else a slot,
 * whose go(arg) runs when they are done: leave it then, outside go.
 * The slot holds up no other write. NULL with *now false when out of
 * memory. */
struct order_slot *order_wait_below(struct order *o, const char *res,
                                    size_t len, int64_t token, order_go_cb go,
                                    void *arg, bool *now);

/* The write finished. grace_ms > 0 when it ended without a complete
 * answer (timed out, aborted): its slot stays in flight that long more.
 * Also cancels a slot still queued. The slot is gone after this. */
void order_leave(struct order *o, struct order_slot *s, int grace_ms);

/* Hold every write that enters for ms from now, on every resource: after
 * a start, writes the previous process forwarded may still reach the
 * backend, and the in-memory list of them is gone. When the hold ends,
 * the writes queued meanwhile go per resource in token order. ms <= 0:
 * no hold. false when the timer cannot be armed (nothing is held). */
bool order_hold(struct order *o, int ms);

/* Milliseconds left of the hold, 0 when none. */
int64_t order_hold_left(const struct order *o);

/* Resources with writes in flight or queued. */
size_t order_active(const struct order *o);

/* Writes queued: waiting for a lower token's write in flight on their
 * resource (or a collection's), or for the hold after a start. */
size_t order_waiting(const struct order *o);

#endif
