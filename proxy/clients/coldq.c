/* coldq.c: the calls that wait for a shared backend's first connection:
 * a FIFO whose head is the next to expire (every call waits as long). */
#include "coldq.h"

#include <stdlib.h>

#include <event2/event.h>

#include "../log.h"
#include "dial.h"
#include "queue.h"

#define COLDQ_MAX 65536

struct parked {
    struct parked *next;
    coldq_fn fn;
    void *arg;
    int64_t until; /* ms, CLOCK_MONOTONIC */
};

struct parked_list {
    QUEUE_FIELDS(struct parked);
};

struct coldq {
    struct event_base *base;
    const struct tm_log *log; /* the proxy's, entered by callbacks */
    int timeout_ms;
    bool up;
    bool full_logged;
    struct parked_list list;
    struct event *expire_ev; /* for the head */
    struct event *run_ev;    /* up: run them all */
};

static void
arm_expire(struct coldq *q)
{
    int64_t ms;
    struct timeval tv;

    if (q->list.head == NULL) {
        evtimer_del(q->expire_ev);
        return;
    }
    ms = q->list.head->until - dial_now_ms();
    ms = ms < 0 ? 0 : ms;
    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
    evtimer_add(q->expire_ev, &tv);
}

/* Take the head and call it: the list may change inside fn. */
static void
pop_call(struct coldq *q, bool up)
{
    struct parked *p;

    QUEUE_POP(&q->list, p);
    p->fn(p->arg, up);
    free(p);
}

static void
on_expire(evutil_socket_t fd, short what, void *arg)
{
    struct coldq *q = arg;
    int64_t now = dial_now_ms();

    lib_enter(q->log);
    (void)fd;
    (void)what;
    while (q->list.head != NULL && q->list.head->until <= now) {
        pop_call(q, false);
    }
    arm_expire(q);
}

static void
on_run(evutil_socket_t fd, short what, void *arg)
{
    struct coldq *q = arg;
    size_t n = q->list.n;

    lib_enter(q->log);
    (void)fd;
    (void)what;
    /* Only those parked before: a call made again may not park anew
     * (coldq_waiting is false), but stay safe. */
    while (n-- > 0 && q->list.head != NULL) {
        pop_call(q, true);
    }
    arm_expire(q);
}

struct coldq *
coldq_new(struct event_base *base, int timeout_ms)
{
    struct coldq *q = calloc(1, sizeof(*q));

    if (q == NULL) {
        return NULL;
    }
    q->base = base;
    q->log = log_current();
    q->timeout_ms = timeout_ms > 0 ? timeout_ms : 2000;
    q->expire_ev = evtimer_new(base, on_expire, q);
    q->run_ev = event_new(base, -1, 0, on_run, q);
    if (q->expire_ev == NULL || q->run_ev == NULL) {
        coldq_free(q);
        return NULL;
    }
    return q;
}

bool
coldq_waiting(const struct coldq *q)
{
    return !q->up;
}

bool
coldq_park(struct coldq *q, coldq_fn fn, void *arg)
{
    struct parked *p;

    if (q->up ||
        !queue_admit(q->list.n, COLDQ_MAX, &q->full_logged, "cold start",
                     "calls are waiting for the first connection")) {
        return false;
    }
    p = malloc(sizeof(*p));
    if (p == NULL) {
        return false;
    }
    p->fn = fn;
    p->arg = arg;
    p->until = dial_now_ms() + q->timeout_ms;
    QUEUE_PUSH(&q->list, p);
    if (q->list.n == 1) {
        arm_expire(q);
    }
    return true;
}

void
coldq_up(struct coldq *q)
{
    if (q->up) {
        return;
    }
    q->up = true;
    if (q->list.head != NULL) {
        event_active(q->run_ev, EV_TIMEOUT, 1);
    }
}

void
coldq_free(struct coldq *q)
{
    if (q == NULL) {
        return;
    }
    q->up = true; /* nothing parks from the callbacks */
    while (q->list.head != NULL) {
        pop_call(q, false);
    }
    if (q->expire_ev != NULL) {
        event_free(q->expire_ev);
    }
    if (q->run_ev != NULL) {
        event_free(q->run_ev);
    }
    free(q);
}
