/* queue.h: one FIFO for every request queue of the stores and the lock
 * backends, and the bound on its length. Elements are any struct with a
 * `next` pointer; a queue is any struct with QUEUE_FIELDS. Macros, so
 * that each keeps its own types. */
#ifndef TM_QUEUE_H
#define TM_QUEUE_H

#include <stdbool.h>
#include <stddef.h>

/* Whether a queue holding n may take one more: n is below max. The first
 * refusal since the queue last took one is logged, as "<who>: <max>
 * <what>: refusing more until the queue drains"; *logged (the caller's,
 * false at first) remembers that it was. */
bool queue_admit(size_t n, size_t max, bool *logged, const char *who,
                 const char *what) __attribute__((warn_unused_result));

#define QUEUE_FIELDS(type)                                                     \
    type *head;                                                                \
    type *tail;                                                                \
    size_t n

/* Append e to q. */
#define QUEUE_PUSH(q, e)                                                       \
    do {                                                                       \
        (e)->next = NULL;                                                      \
        if ((q)->tail == NULL) {                                               \
            (q)->head = (e);                                                   \
        } else {                                                               \
            (q)->tail->next = (e);                                             \
        }                                                                      \
        (q)->tail = (e);                                                       \
        (q)->n++;                                                              \
    } while (0)

/* Take the first element of q into out (NULL when q is empty). */
#define QUEUE_POP(q, out)                                                      \
    do {                                                                       \
        (out) = (q)->head;                                                     \
        if ((out) != NULL) {                                                   \
            (q)->head = (out)->next;                                           \
            if ((q)->head == NULL) {                                           \
                (q)->tail = NULL;                                              \
            }                                                                  \
            (q)->n--;                                                          \
            (out)->next = NULL;                                                \
        }                                                                      \
    } while (0)

/* Move every element of from to the end of to; from is left empty. */
#define QUEUE_SPLICE(to, from)                                                 \
    do {                                                                       \
        if ((from)->head != NULL) {                                            \
            if ((to)->tail == NULL) {                                          \
                (to)->head = (from)->head;                                     \
            } else {                                                           \
                (to)->tail->next = (from)->head;                               \
            }                                                                  \
            (to)->tail = (from)->tail;                                         \
            (to)->n += (from)->n;                                              \
            (from)->head = NULL;                                               \
            (from)->tail = NULL;                                               \
            (from)->n = 0;                                                     \
        }                                                                      \
    } while (0)

#endif
