/* waiters.h: the acquires waiting for each lock name, in arrival order.
 * Only a queue's head asks the backend, so the lock goes to waiters in
 * turn; the head asks again when the lease ahead of it ends (a timer)
 * or is released here (waiters_kick). Finding a name's queue, joining it
 * and leaving it from any place cost the same however many callers wait
 * and for however many names. */
#ifndef TM_WAITERS_H
#define TM_WAITERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct tm_log;
struct waiters;
struct waitq;

/* One waiting call, embedded (zeroed) in the caller's record. */
struct waiter {
    struct waiter *next, *prev; /* in q, arrival order */
    struct waitq *q;            /* the queue it waits in, or NULL */
    void *arg;                  /* the caller's record, given to try_head */
};

/* The head's turn to ask the backend: the caller asks, and calls
 * waiter_tried when the answer comes. */
typedef void (*waiter_try_fn)(void *arg);

/* Every queue of one lock service, whose timers run on base and enter
 * log. NULL when out of memory. */
struct waiters *waiters_new(struct event_base *base, const struct tm_log *log,
                            waiter_try_fn try_head)
    __attribute__((warn_unused_result));

/* Drop every queue; their waiters are left with q NULL, and no turn
 * comes any more. NULL is fine. */
void waiters_free(struct waiters *ws);

/* The queue of name, or NULL when nobody waits for it. */
struct waitq *waiters_find(struct waiters *ws, const char *name, size_t len);

/* The queue of name, made when missing. NULL when out of memory. */
struct waitq *waiters_get(struct waiters *ws, const char *name, size_t len)
    __attribute__((warn_unused_result));

/* Join the end of q. */
void waitq_push(struct waitq *q, struct waiter *w, void *arg);

/* Leave w's queue (nothing when w is not waiting); a queue left empty
 * goes. try_next: when w was the head, the next waiter's turn comes at
 * once (w gave up its turn). */
void waiter_leave(struct waiter *w, bool try_next);

/* How many waiters all the queues hold. */
size_t waiters_count(const struct waiters *ws);

/* Whether w is the head of its queue. */
bool waiter_is_head(const struct waiter *w);

/* w's try is answered: when w is the head, its queue may try again. */
void waiter_tried(struct waiter *w);

/* The head of q tries again in ttl_ms (the lease ahead of it ends),
 * unless a kick comes first. */
void waitq_arm(struct waitq *q, int64_t ttl_ms);

/* A lease of name ended here: its queue's head tries now. */
void waiters_kick(struct waiters *ws, const char *name, size_t len);

#endif
