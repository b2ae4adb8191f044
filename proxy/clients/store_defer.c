/* store_defer.c: a FIFO of store and lock answers run by one libevent
 * event that is activated when the first answer is queued. */
#include "store_defer.h"

#include <stdlib.h>

#include <event2/event.h>

#include "../log.h"

struct defer_item {
    struct defer_item *next;
    bool lock; /* cb.lock, else cb.store */
    union {
        store_cb store;
        lock_cb lock;
    } cb;
    void *arg;
    int res; /* enum store_result or enum lock_result */
    int64_t mark;
};

struct store_defer {
    struct event *ev;
    const struct tm_log *log; /* the proxy's, entered by callbacks */
    struct defer_item *head;
    struct defer_item **tail;
};

static void
run_all(struct store_defer *d)
{
    /* Answers queued by the callbacks join the end and run too. */
    while (d->head != NULL) {
        struct defer_item *it = d->head;

        d->head = it->next;
        if (d->head == NULL) {
            d->tail = &d->head;
        }
        if (it->lock) {
            it->cb.lock(it->arg, (enum lock_result)it->res, 0, 0);
        } else {
            it->cb.store(it->arg, (enum store_result)it->res, it->mark);
        }
        free(it);
    }
}

static void
on_defer(evutil_socket_t fd, short what, void *arg)
{
    lib_enter(((struct store_defer *)arg)->log);
    (void)fd;
    (void)what;
    run_all(arg);
}

struct store_defer *
store_defer_new(struct event_base *base)
{
    struct store_defer *d = calloc(1, sizeof(*d));

    if (d == NULL) {
        return NULL;
    }
    d->tail = &d->head;
    d->log = log_current();
    d->ev = event_new(base, -1, 0, on_defer, d);
    if (d->ev == NULL) {
        free(d);
        return NULL;
    }
    return d;
}

static void
push(struct store_defer *d, struct defer_item *it)
{
    it->next = NULL;
    *d->tail = it;
    d->tail = &it->next;
    event_active(d->ev, 0, 1);
}

void
store_defer(struct store_defer *d, store_cb cb, void *arg,
            enum store_result res, int64_t mark)
{
    struct defer_item *it = malloc(sizeof(*it));

    if (it == NULL) {
        log_error("store: out of memory: a store callback is lost");
        return;
    }
    *it = (struct defer_item){
        .cb.store = cb, .arg = arg, .res = (int)res, .mark = mark};
    push(d, it);
}

void
store_defer_lock(struct store_defer *d, lock_cb cb, void *arg,
                 enum lock_result res)
{
    struct defer_item *it = malloc(sizeof(*it));

    if (it == NULL) {
        log_error("locks: out of memory: a lock callback is lost");
        return;
    }
    *it = (struct defer_item){
        .lock = true, .cb.lock = cb, .arg = arg, .res = (int)res};
    push(d, it);
}

void
store_defer_free(struct store_defer *d)
{
    if (d == NULL) {
        return;
    }
    run_all(d);
    event_free(d->ev);
    free(d);
}
