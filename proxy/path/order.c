/* order.c: per-resource gates. A gate exists while its resource has a
 * write in flight, queued or in its grace period; the table holds at most
 * as many gates as there are client connections, in a seeded table that
 * grows with them (htab.h). After a start, a hold queues every write
 * until it ends. */
#include "order.h"

#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "../../policies/htab.h"
#include "../clients/dial.h"
#include "../log.h"
#include "../seed.h"

struct order_slot {
    struct gate *gate;
    struct order_slot *next; /* in the gate's in-flight or queue list */
    struct order_slot *prev;
    struct order *order;
    int64_t token;
    order_go_cb go;
    void *arg;
    bool queued;
    bool passive;        /* order_wait_below's: holds up no other write */
    struct event *grace; /* while in its grace period */
};

/* A doubly linked list with both ends kept, so that an append and an
 * unlink cost the same with one write in it or ten thousand. */
struct slot_list {
    struct order_slot *head;
    struct order_slot *tail;
};

struct gate {
    struct hnode node;       /* in the table, by name */
    struct slot_list flying; /* in flight (including grace) */
    struct slot_list queue;  /* writes waiting, by token (arrival order
                              * within one) */
    struct slot_list below;  /* passive slots waiting, by token */
    int64_t low;             /* the lowest token flying (passive left out) */
    size_t nlow;             /* how many flying writes have it */
    size_t len;
    char name[];
};

struct order {
    struct event_base *base;
    const struct tm_log *log; /* the proxy's, entered by callbacks */
    struct htab gates;
    size_t waiting;     /* slots queued, on every gate */
    struct event *hold; /* while every write waits (after a start) */
    int64_t hold_end;   /* monotonic ms */
};

struct order *
order_new(struct event_base *base)
{
    struct order *o = calloc(1, sizeof(*o));

    if (o == NULL) {
        return NULL;
    }
    o->base = base;
    o->log = log_current();
    if (!htab_init(&o->gates, 1024, tm_seed(o))) {
        free(o);
        return NULL;
    }
    return o;
}

/* At the end: g and its writes in flight go (the queued ones are their
 * requests', gone already). */
static void
gate_free(struct hnode *e, void *arg)
{
    struct gate *g = HTAB_ENTRY(e, struct gate, node);
    struct order_slot *s = g->flying.head;

    (void)arg;
    while (s != NULL) {
        struct order_slot *sn = s->next;
        if (s->grace != NULL) {
            event_free(s->grace);
        }
        free(s);
        s = sn;
    }
    free(g);
}

void
order_free(struct order *o)
{
    if (o == NULL) {
        return;
    }
    htab_drain(&o->gates, gate_free, NULL);
    if (o->hold != NULL) {
        event_free(o->hold);
    }
    htab_fini(&o->gates);
    free(o);
}

static struct gate *
gate_find(struct order *o, const char *res, size_t len, uint64_t h)
{
    struct hnode *e = htab_find(&o->gates, res, len, h);

    return e != NULL ? HTAB_ENTRY(e, struct gate, node) : NULL;
}

static void
gate_drop(struct order *o, struct gate *g)
{
    htab_del(&o->gates, &g->node);
    free(g);
}

/* s goes into l right after `after`, or first when after is NULL. */
static void
list_insert(struct slot_list *l, struct order_slot *after, struct order_slot *s)
{
    s->prev = after;
    s->next = after != NULL ? after->next : l->head;
    if (s->next != NULL) {
        s->next->prev = s;
    } else {
        l->tail = s;
    }
    if (after != NULL) {
        after->next = s;
    } else {
        l->head = s;
    }
}

static void
list_push(struct slot_list *l, struct order_slot *s)
{
    list_insert(l, l->tail, s);
}

static void
list_unlink(struct slot_list *l, struct order_slot *s)
{
    if (s->prev != NULL) {
        s->prev->next = s->next;
    } else {
        l->head = s->next;
    }
    if (s->next != NULL) {
        s->next->prev = s->prev;
    } else {
        l->tail = s->prev;
    }
    s->next = s->prev = NULL;
}

/* The lowest token of a list kept in token order, or INT64_MAX when it
 * is empty. */
static int64_t
head_token(const struct slot_list *q)
{
    return q->head != NULL ? q->head->token : INT64_MAX;
}

/* The lowest token among the writes waiting (passive slots, which hold
 * up no one, are in a list of their own). */
static int64_t
lowest_queued(const struct gate *g)
{
    return head_token(&g->queue);
}

/* Queue s in token order, after every write of its token or lower: equal
 * tokens keep their arrival order. Writes reach a gate after their check,
 * which raised the mark to their token, so they come in token order but
 * for answers that crossed on their way back: the walk from the tail
 * ends at once, and the queue's lowest is its head, found without a walk
 * however many writes wait. */
static void
queue_insert(struct slot_list *q, struct order_slot *s)
{
    struct order_slot *after = q->tail;

    while (after != NULL && after->token > s->token) {
        after = after->prev;
    }
    list_insert(q, after, s);
}

/* The list s waits in: passive slots apart from writes. */
static struct slot_list *
wait_list(struct gate *g, const struct order_slot *s)
{
    return s->passive ? &g->below : &g->queue;
}

/* s waits on its gate. */
static void
enqueue(struct order *o, struct order_slot *s)
{
    s->queued = true;
    queue_insert(wait_list(s->gate, s), s);
    o->waiting++;
}

/* s waits no more. */
static void
dequeue(struct order *o, struct order_slot *s)
{
    list_unlink(wait_list(s->gate, s), s);
    s->queued = false;
    o->waiting--;
}

/* The lowest token in flight, or INT64_MAX when none: kept up to date by
 * fly and land, so that a write on a busy resource does not walk every
 * other write in flight on it. */
static int64_t
lowest_flying(const struct gate *g)
{
    return g->low;
}

static void
count_low(struct gate *g, const struct order_slot *s)
{
    if (s->passive || s->token > g->low) {
        return;
    }
    if (s->token < g->low) {
        g->low = s->token;
        g->nlow = 0;
    }
    g->nlow++;
}

/* s goes in flight. */
static void
fly(struct gate *g, struct order_slot *s)
{
    list_push(&g->flying, s);
    count_low(g, s);
}

/* s is no longer in flight. When the last write of the lowest token
 * lands, the next lowest is found among those left: a write enters flight
 * only at or below the lowest, so that is once per token, not per write. */
static void
land(struct gate *g, struct order_slot *s)
{
    list_unlink(&g->flying, s);
    if (s->passive || s->token != g->low || --g->nlow > 0) {
        return;
    }
    g->low = INT64_MAX;
    for (const struct order_slot *t = g->flying.head; t != NULL; t = t->next) {
        count_low(g, t);
    }
}

/* A new slot on res's gate (made when there is none). NULL when out of
 * memory. */
static struct order_slot *
slot_new(struct order *o, const char *res, size_t len)
{
    uint64_t h = htab_key(&o->gates, res, len);
    struct gate *g = gate_find(o, res, len, h);
    struct order_slot *s;

    /* malloc, not calloc: glibc's calloc skips the thread's cache of
     * small blocks, and a slot (and mostly a gate) is made and freed
     * once a fenced write. */
    s = malloc(sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    *s = (struct order_slot){0};
    if (g == NULL) {
        g = malloc(sizeof(*g) + len + 1);
        if (g == NULL) {
            free(s);
            return NULL;
        }
        *g = (struct gate){0};
        g->name[len] = '\0';
        g->low = INT64_MAX;
        g->len = len;
        memcpy(g->name, res, len);
        htab_add(&o->gates, &g->node, g->name, len, h);
    }
    s->gate = g;
    return s;
}

struct order_slot *
order_wait_below(struct order *o, const char *res, size_t len, int64_t token,
                 order_go_cb go, void *arg, bool *now)
{
    struct gate *g = gate_find(o, res, len, htab_key(&o->gates, res, len));
    struct order_slot *s;

    *now =
        g == NULL || (lowest_flying(g) >= token && lowest_queued(g) >= token);
    if (*now) {
        return NULL;
    }
    s = slot_new(o, res, len);
    if (s == NULL) {
        return NULL;
    }
    s->order = o;
    s->token = token;
    s->go = go;
    s->arg = arg;
    s->passive = true;
    enqueue(o, s);
    return s;
}

struct order_slot *
order_enter(struct order *o, const char *res, size_t len, int64_t token,
            order_go_cb go, void *arg, bool *now)
{
    struct order_slot *s = slot_new(o, res, len);
    struct gate *g;

    if (s == NULL) {
        return NULL;
    }
    g = s->gate;
    s->order = o;
    s->token = token;
    s->go = go;
    s->arg = arg;
    /* Equal tokens are the same holder: they need not wait for each other.
     * Behind a queued write, a new one waits too, to keep arrival order
     * among equal tokens (a passive slot holds up no one). */
    if (o->hold == NULL && g->queue.head == NULL && token <= lowest_flying(g)) {
        fly(g, s);
        *now = true;
    } else {
        enqueue(o, s);
        *now = false;
    }
    return s;
}

/* The slots at the head of q whose token is low go. */
static void
wake_head(struct order *o, struct gate *g, struct slot_list *q, int64_t low)
{
    struct order_slot *s;

    while ((s = q->head) != NULL && s->token == low) {
        dequeue(o, s);
        fly(g, s);
        s->go(s->arg);
    }
}

/* Start every queued slot whose turn has come: the lowest queued token
 * (the head of the writes or of the passive slots), once nothing lower
 * is in flight. Costs the slots it starts, not how many wait. */
static void
gate_wake(struct order *o, struct gate *g)
{
    while (o->hold == NULL &&
           (g->queue.head != NULL || g->below.head != NULL)) {
        int64_t w = head_token(&g->queue), b = head_token(&g->below);
        int64_t low = w < b ? w : b;

        if (low > lowest_flying(g)) {
            break;
        }
        wake_head(o, g, &g->queue, low);
        wake_head(o, g, &g->below, low);
    }
    if (g->flying.head == NULL && g->queue.head == NULL &&
        g->below.head == NULL) {
        gate_drop(o, g);
    }
}

static void
slot_finish(struct order_slot *s)
{
    struct gate *g = s->gate;
    struct order *o = s->order;

    land(g, s);
    if (s->grace != NULL) {
        event_free(s->grace);
    }
    free(s);
    gate_wake(o, g);
}

static void
grace_done(evutil_socket_t fd, short what, void *arg)
{
    lib_enter(((struct order_slot *)arg)->order->log);
    (void)fd;
    (void)what;
    slot_finish(arg);
}

void
order_leave(struct order *o, struct order_slot *s, int grace_ms)
{
    struct gate *g = s->gate;

    if (s->queued) {
        dequeue(o, s);
        free(s);
        gate_wake(o, g);
        return;
    }
    if (grace_ms > 0) {
        struct timeval tv = {grace_ms / 1000, (grace_ms % 1000) * 1000};

        s->grace = evtimer_new(o->base, grace_done, s);
        if (s->grace != NULL && evtimer_add(s->grace, &tv) == 0) {
            log_info("order: resource %s closed to higher tokens for "
                     "%d ms after write of token %lld ended unanswered",
                     LOG_ESC(g->name, g->len), grace_ms, (long long)s->token);
            return;
        }
        /* No timer: keep the slot for good rather than reopen early. */
        log_error("order: cannot arm grace timer; resource %s stays "
                  "closed",
                  LOG_ESC(g->name, g->len));
        return;
    }
    slot_finish(s);
}

/* Every gate's queued writes go, as far as order lets them. A write let
 * go may open a gate, and the table grow: the walk then starts over (a
 * gate woken twice has nothing more to let go). gate_wake may free the
 * gate it wakes, so its successor is taken first. */
static void
wake_all(struct order *o)
{
    struct hnode **b;

    do {
        b = o->gates.b;
        for (size_t i = 0; b == o->gates.b && i <= o->gates.mask; i++) {
            struct hnode *e = b[i];

            while (e != NULL && b == o->gates.b) {
                struct hnode *next = e->next;

                gate_wake(o, HTAB_ENTRY(e, struct gate, node));
                e = next;
            }
        }
    } while (b != o->gates.b);
}

/* The hold ended: every resource's queued writes go, lowest token
 * first. */
static void
hold_done(evutil_socket_t fd, short what, void *arg)
{
    struct order *o = arg;

    lib_enter(o->log);
    (void)fd;
    (void)what;
    event_free(o->hold);
    o->hold = NULL;
    log_info("order: fenced writes held since the start go now (%zu "
             "resources waited)",
             o->gates.n);
    wake_all(o);
}

bool
order_hold(struct order *o, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

    if (ms <= 0 || o->hold != NULL) {
        return true;
    }
    o->hold = evtimer_new(o->base, hold_done, o);
    if (o->hold == NULL || evtimer_add(o->hold, &tv) != 0) {
        if (o->hold != NULL) {
            event_free(o->hold);
            o->hold = NULL;
        }
        return false;
    }
    o->hold_end = dial_now_ms() + ms;
    return true;
}

int64_t
order_hold_left(const struct order *o)
{
    int64_t left = o->hold != NULL ? o->hold_end - dial_now_ms() : 0;

    /* At least 1 while held: the timer may not have run yet. */
    return o->hold == NULL ? 0 : left > 0 ? left : 1;
}

size_t
order_active(const struct order *o)
{
    return o->gates.n;
}

size_t
order_waiting(const struct order *o)
{
    return o->waiting;
}
