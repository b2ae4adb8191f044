/* waiters.c: per-name FIFOs of waiting acquires, each with a timer that
 * gives its head another turn when the blocking lease ends. The queues
 * are in a seeded table by name; a queue is a doubly linked list. */
#include "waiters.h"

#include <stdlib.h>
#include <string.h>

#include "../../policies/htab.h"
#include "../log.h"
#include "../seed.h"

#include <event2/event.h>

struct waitq {
    struct hnode node; /* in ws->queues, by name */
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
    struct htab queues;
    size_t waiting; /* waiters in all the queues */
};

struct waiters *
waiters_new(struct event_base *base, const struct tm_log *log,
            waiter_try_fn try_head)
{
    struct waiters *ws = calloc(1, sizeof(*ws));

    if (ws == NULL) {
        return NULL;
    }
    if (!htab_init(&ws->queues, 64, tm_seed(ws))) {
        free(ws);
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
    event_free(q->retry);
    free(q);
}

/* A queue dropped with its service: its waiters get no turn any more. */
static void
orphan(struct hnode *e, void *arg)
{
    struct waitq *q = HTAB_ENTRY(e, struct waitq, node);

    (void)arg;
    for (struct waiter *w = q->head; w != NULL; w = w->next) {
        w->q = NULL;
    }
    waitq_free(q);
}

void
waiters_free(struct waiters *ws)
{
    if (ws == NULL) {
        return;
    }
    htab_drain(&ws->queues, orphan, NULL);
    htab_fini(&ws->queues);
    free(ws);
}

static struct waitq *
find(struct waiters *ws, const char *name, size_t len, uint64_t h)
{
    struct hnode *e = htab_find(&ws->queues, name, len, h);

    return e != NULL ? HTAB_ENTRY(e, struct waitq, node) : NULL;
}

struct waitq *
waiters_find(struct waiters *ws, const char *name, size_t len)
{
    return find(ws, name, len, htab_key(&ws->queues, name, len));
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
    uint64_t h = htab_key(&ws->queues, name, len);
    struct waitq *q = find(ws, name, len, h);

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
    htab_add(&ws->queues, &q->node, q->name, len, h);
    return q;
}

void
waitq_push(struct waitq *q, struct waiter *w, void *arg)
{
    q->ws->waiting++;
    w->q = q;
    w->next = NULL;
    w->prev = q->tail;
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
    bool was_head;

    if (q == NULL) {
        return;
    }
    was_head = q->head == w;
    if (w->prev != NULL) {
        w->prev->next = w->next;
    } else {
        q->head = w->next;
    }
    if (w->next != NULL) {
        w->next->prev = w->prev;
    } else {
        q->tail = w->prev;
    }
    q->ws->waiting--;
    w->q = NULL;
    w->next = w->prev = NULL;
    if (q->head == NULL) {
        htab_del(&q->ws->queues, &q->node);
        waitq_free(q);
    } else if (try_next && was_head && !q->trying) {
        waitq_try(q);
    }
}

size_t
waiters_count(const struct waiters *ws)
{
    return ws->waiting;
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
