/* defer.c: a FIFO of deferred calls run by one libevent event that is
 * activated when the first call is queued. */
#include "defer.h"

#include <stdlib.h>

#include <event2/event.h>

#include "../log.h"

struct defer {
    struct event *ev;
    const struct tm_log *log; /* the proxy's, entered by callbacks */
    struct defer_item *head;
    struct defer_item **tail;
};

static void
run_all(struct defer *d)
{
    /* Calls queued by the calls join the end and run too. */
    while (d->head != NULL) {
        struct defer_item *it = d->head;

        d->head = it->next;
        if (d->head == NULL) {
            d->tail = &d->head;
        }
        it->run(it);
    }
}

static void
on_defer(evutil_socket_t fd, short what, void *arg)
{
    lib_enter(((struct defer *)arg)->log);
    (void)fd;
    (void)what;
    run_all(arg);
}

struct defer *
defer_new(struct event_base *base)
{
    struct defer *d = calloc(1, sizeof(*d));

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

void
defer_push(struct defer *d, struct defer_item *it)
{
    it->next = NULL;
    *d->tail = it;
    d->tail = &it->next;
    event_active(d->ev, 0, 1);
}

void
defer_free(struct defer *d)
{
    if (d == NULL) {
        return;
    }
    run_all(d);
    event_free(d->ev);
    free(d);
}
