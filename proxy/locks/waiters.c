/* waiters.c: per-name FIFOs of waiting acquires, each with a timer that
 * gives its head another turn when the blocking lease ends. */
#include "waiters.h"

#include <stdlib.h>
#include <string.h>

#include "../log.h"

#include <event2/event.h>

struct waitq {
    struct waitq *prev, *next; /* ws->queues */
    struct waiters *ws;
    struct waiter *head, *tail;
    struct event *retry; /* the holder's lease ends */
    bool trying;         /* the head's acquire is in flight */
    size_t len;
    char name[];
};

struct waiters {
    struct event_base *base;
    const struct tm_log *log;
    waiter_try_fn try_head;
    struct waitq *queues;
};

struct waiters *
waiters_new(struct event_base *base, const struct tm_log *log,
            waiter_try_fn try_head)
{
    struct waiters *ws = calloc(1, sizeof(*ws));

    if (ws == NULL) {
        return NULL;
    }
    ws->base = base;
    ws->log = log;
    ws->try_head = try_head;
    return ws;
}

static void
waitq_free(struct waitq *q)
{
    struct waiters *ws = q->ws;

    if (q->prev != NULL) {
        q->prev->next = q->next;
    } else {
        ws->queues = q->next;
    }
    if (q->next != NULL) {
        q->next->prev = q->prev;
    }
    event_free(q->retry);
    free(q);
}

void
waiters_free(struct waiters *ws)
{
    if (ws == NULL) {
        return;
    }
    while (ws->queues != NULL) {
        for (struct waiter *w = ws->queues->head; w != NULL; w = w->next) {
            w->q = NULL;
        }
        waitq_free(ws->queues);
    }
    free(ws);
}

struct waitq *
waiters_find(struct waiters *ws, const char *name, size_t len)
{
    for (struct waitq *q = ws->queues; q != NULL; q = q->next) {
        if (q->len == len && memcmp(q->name, name, len) == 0) {
            return q;
        }
    }
    return NULL;
}

static void
waitq_try(struct waitq *q)
{
    struct waiter *w = q->head;

    if (w == NULL || q->trying) {
        return;
    }
    q->trying = true;
    q->ws->try_head(w->arg);
}

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
    lib_enter(((struct waitq *)arg)->ws->log);
    (void)fd;
    (void)what;
    waitq_try(arg);
}

struct waitq *
waiters_get(struct waiters *ws, const char *name, size_t len)
{
    struct waitq *q = waiters_find(ws, name, len);

    if (q != NULL) {
        return q;
    }
    q = calloc(1, sizeof(*q) + len + 1);
    if (q == NULL) {
        return NULL;
    }
    q->retry = evtimer_new(ws->base, retry_cb, q);
    if (q->retry == NULL) {
        free(q);
        return NULL;
    }
    q->ws = ws;
    q->len = len;
    memcpy(q->name, name, len);
    q->next = ws->queues;
    if (ws->queues != NULL) {
        ws->queues->prev = q;
    }
    ws->queues = q;
    return q;
}

void
waitq_push(struct waitq *q, struct waiter *w, void *arg)
{
    w->q = q;
    w->next = NULL;
    w->arg = arg;
    if (q->tail == NULL) {
        q->head = w;
    } else {
        q->tail->next = w;
    }
    q->tail = w;
}

void
waiter_leave(struct waiter *w, bool try_next)
{
    struct waitq *q = w->q;
    struct waiter **pp;
    struct waiter *prev = NULL;
    bool was_head = q != NULL && q->head == w;

    if (q == NULL) {
        return;
    }
    for (pp = &q->head; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            if (q->tail == w) {
                q->tail = prev;
            }
            break;
        }
        prev = *pp;
    }
    w->q = NULL;
    w->next = NULL;
    if (q->head == NULL) {
        waitq_free(q);
    } else if (try_next && was_head && !q->trying) {
        waitq_try(q);
    }
}

bool
waiter_is_head(const struct waiter *w)
{
    return w->q != NULL && w->q->head == w;
}

void
waiter_tried(struct waiter *w)
{
    if (waiter_is_head(w)) {
        w->q->trying = false;
    }
}

void
waitq_arm(struct waitq *q, int64_t ttl_ms)
{
    struct timeval tv;

    ttl_ms += 1;
    tv.tv_sec = (time_t)(ttl_ms / 1000);
    tv.tv_usec = (suseconds_t)(ttl_ms % 1000) * 1000;
    evtimer_add(q->retry, &tv);
}

void
waiters_kick(struct waiters *ws, const char *name, size_t len)
{
    struct waitq *q = waiters_find(ws, name, len);

    if (q != NULL && !q->trying) {
        evtimer_del(q->retry);
        waitq_try(q);
    }
}
