/* zk_conn.c: one ZooKeeper session for the event loop (zk_conn.h).
 *
 * Threads. The C client (libzookeeper_mt) runs its I/O and its
 * completions on threads of its own. A completion only copies what it
 * was given into its call and queues the call under a mutex, then wakes
 * the loop through an eventfd; everything else is touched on the loop
 * thread only. */
#include "zk_conn.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <event2/event.h>

#include "../log.h"
#include "dial.h"
#include "zk_relay.h"

/* The step of a session event: zk_conn's own. */
#define ZK_CALL_SESSION (-2)

/* What the client's threads see of a handle: whom to tell. */
struct zk_ctx {
    struct zk_conn *k;
    uint64_t gen;
};

struct zk_conn {
    struct event_base *base;
    const struct tm_log *log;
    struct zk_conn_hooks hooks;
    void *arg;
    char *hosts;
    struct zk_relay *relay; /* the client's way to hosts */
    char *who;
    int session_ms;
    zhandle_t *zh;
    struct zk_ctx *ctx;
    uint64_t gen;
    bool connected;
    bool closing;
    struct zk_call *out;  /* calls the client holds */
    struct event *retry;  /* a new handle after a failed start */
    pthread_mutex_t mu;   /* the calls answered, shared with the */
    struct zk_call *head; /* client's threads */
    struct zk_call *tail;
    int efd;
    struct event *done_ev;
};

bool
zk_rc_outage(int rc)
{
    return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT ||
           rc == ZSESSIONEXPIRED || rc == ZCLOSING || rc == ZINVALIDSTATE ||
           rc == ZSYSTEMERROR || rc == ZMARSHALLINGERROR;
}

/* ---- the queue between the client's threads and the loop ------------ */

/* Any thread: queue c for the loop and wake it. */
void
zk_conn_push(struct zk_conn *k, struct zk_call *c)
{
    uint64_t one = 1;
    ssize_t n;

    pthread_mutex_lock(&k->mu);
    c->next = NULL;
    c->queued = true;
    if (k->tail != NULL) {
        k->tail->next = c;
    } else {
        k->head = c;
    }
    k->tail = c;
    pthread_mutex_unlock(&k->mu);
    n = write(k->efd, &one, sizeof(one));
    (void)n; /* EAGAIN: the counter is full, the loop wakes anyway */
}

static void session_event(struct zk_conn *k, struct zk_call *c);

static void
out_unlink(struct zk_conn *k, struct zk_call *c)
{
    if (!c->out) {
        return;
    }
    if (c->oprev != NULL) {
        c->oprev->onext = c->onext;
    } else {
        k->out = c->onext;
    }
    if (c->onext != NULL) {
        c->onext->oprev = c->oprev;
    }
    c->out = false;
}

/* Loop thread: hand every queued call to the owner, also those queued
 * meanwhile. */
static void
drain(struct zk_conn *k)
{
    for (;;) {
        struct zk_call *c;

        pthread_mutex_lock(&k->mu);
        c = k->head;
        if (c != NULL) {
            k->head = c->next;
            if (k->head == NULL) {
                k->tail = NULL;
            }
        }
        pthread_mutex_unlock(&k->mu);
        if (c == NULL) {
            return;
        }
        out_unlink(k, c);
        if (c->step == ZK_CALL_SESSION) {
            session_event(k, c);
        } else {
            k->hooks.call(k->arg, c);
        }
    }
}

static void
on_done(evutil_socket_t fd, short what, void *arg)
{
    struct zk_conn *k = arg;
    uint64_t n;
    ssize_t got;

    lib_enter(k->log);
    (void)what;
    /* Reset the counter before taking the queue: a wake-up sent after
     * the take is not lost. */
    got = read(fd, &n, sizeof(n));
    (void)got;
    drain(k);
}

/* ---- the client's threads: completions and watches -------------------- */

void
zk_done_void(int rc, const void *data)
{
    struct zk_call *c = (struct zk_call *)data;

    c->rc = rc;
    zk_conn_push(c->k, c);
}

void
zk_done_string(int rc, const char *s, const void *data)
{
    (void)s;
    zk_done_void(rc, data);
}

void
zk_done_stat(int rc, const struct Stat *st, const void *data)
{
    struct zk_call *c = (struct zk_call *)data;

    c->rc = rc;
    if (rc == ZOK && st != NULL) {
        c->stat = *st;
    }
    zk_conn_push(c->k, c);
}

void
zk_done_string_stat(int rc, const char *s, const struct Stat *st,
                    const void *data)
{
    struct zk_call *c = (struct zk_call *)data;

    c->rc = rc;
    if (rc == ZOK) {
        c->stat = *st;
        if (s == NULL || (c->str = strdup(s)) == NULL) {
            c->rc = ZSYSTEMERROR;
        }
    }
    zk_conn_push(c->k, c);
}

/* Copy v into c's kids; false when out of memory. */
static bool
copy_kids(struct zk_call *c, const struct String_vector *v)
{
    if (v == NULL || v->count <= 0) {
        return true;
    }
    c->kids = calloc((size_t)v->count, sizeof(*c->kids));
    for (int i = 0; c->kids != NULL && i < v->count; i++) {
        if ((c->kids[i] = strdup(v->data[i])) == NULL) {
            break;
        }
        c->nkids++;
    }
    return c->nkids == v->count;
}

void
zk_done_strings(int rc, const struct String_vector *v, const void *data)
{
    struct zk_call *c = (struct zk_call *)data;

    c->rc = rc;
    if (rc == ZOK && !copy_kids(c, v)) {
        c->rc = ZSYSTEMERROR;
    }
    zk_conn_push(c->k, c);
}

void
zk_done_strings_stat(int rc, const struct String_vector *v,
                     const struct Stat *st, const void *data)
{
    struct zk_call *c = (struct zk_call *)data;

    c->rc = rc;
    if (rc == ZOK && st != NULL) {
        c->stat = *st;
    }
    if (rc == ZOK && !copy_kids(c, v)) {
        c->rc = ZSYSTEMERROR;
    }
    zk_conn_push(c->k, c);
}

void
zk_done_data(int rc, const char *value, int len, const struct Stat *st,
             const void *data)
{
    struct zk_call *c = (struct zk_call *)data;

    c->rc = rc;
    if (rc == ZOK) {
        c->stat = *st;
        if (value != NULL && len > 0) {
            c->data = malloc((size_t)len);
            if (c->data == NULL) {
                c->rc = ZSYSTEMERROR;
            } else {
                memcpy(c->data, value, (size_t)len);
                c->data_len = len;
            }
        }
    }
    zk_conn_push(c->k, c);
}

/* An event, queued as a call of its own. Lost only when out of memory:
 * the owners look again at the next change or connection. */
static void
event_push(struct zk_ctx *x, int step, int type, int state, const char *path)
{
    struct zk_call *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        return;
    }
    c->k = x->k;
    c->step = step;
    c->gen = x->gen;
    c->type = type;
    c->state = state;
    if (path != NULL && (c->str = strdup(path)) == NULL) {
        free(c);
        return;
    }
    zk_conn_push(x->k, c);
}

static void
session_watch(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh;
    (void)path;
    if (type == ZOO_SESSION_EVENT) {
        event_push(ctx, ZK_CALL_SESSION, type, state, NULL);
    }
}

void
zk_conn_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh;
    /* Every watcher hears of session changes too: session_watch's. */
    if (type != ZOO_SESSION_EVENT && path != NULL) {
        event_push(ctx, ZK_CALL_EVENT, type, state, path);
    }
}

/* The client's own log lines: the library writes to no fixed place
 * (log.h); what matters is logged from its answers. */
static void
zk_log_drop(const char *msg)
{
    (void)msg;
}

/* ---- calls ------------------------------------------------------------ */

char *
zk_path_join(const char *dir, const char *kid)
{
    size_t dl = strlen(dir), kl = strlen(kid);
    char *p = malloc(dl + kl + 2);

    if (p != NULL) {
        memcpy(p, dir, dl);
        p[dl] = '/';
        memcpy(p + dl + 1, kid, kl + 1);
    }
    return p;
}

void
zk_kids_free(char **kids, int n)
{
    for (int i = 0; i < n; i++) {
        free(kids[i]);
    }
    free(kids);
}

void
zk_call_free(struct zk_call *c)
{
    if (c == NULL) {
        return;
    }
    zk_kids_free(c->kids, c->nkids);
    free(c->path);
    free(c->name);
    free(c->str);
    free(c->data);
    free(c);
}

struct zk_call *
zk_call_new(struct zk_conn *k, int step, const char *path)
{
    struct zk_call *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        return NULL;
    }
    c->k = k;
    c->step = step;
    c->gen = k->gen;
    if (path != NULL && (c->path = strdup(path)) == NULL) {
        free(c);
        return NULL;
    }
    return c;
}

void
zk_conn_sent(struct zk_conn *k, struct zk_call *c, int rc)
{
    if (rc != ZOK) {
        c->rc = rc;
        zk_conn_push(k, c);
        return;
    }
    c->out = true;
    c->oprev = NULL;
    c->onext = k->out;
    if (k->out != NULL) {
        k->out->oprev = c;
    }
    k->out = c;
}

zhandle_t *
zk_conn_zh(const struct zk_conn *k)
{
    return k->closing ? NULL : k->zh;
}

void *
zk_conn_ctx(const struct zk_conn *k)
{
    return k->ctx;
}

uint64_t
zk_conn_gen(const struct zk_conn *k)
{
    return k->gen;
}

bool
zk_conn_ready(const struct zk_conn *k)
{
    return !k->closing && k->zh != NULL && k->connected &&
           zoo_state(k->zh) == ZOO_CONNECTED_STATE;
}

bool
zk_conn_closing(const struct zk_conn *k)
{
    return k->closing;
}

/* ---- the session -------------------------------------------------------- */

static void
retry_later(struct zk_conn *k)
{
    struct timeval tv = {1, 0};

    evtimer_add(k->retry, &tv);
}

/* A new handle (and session); the old one must be closed. */
static bool
start(struct zk_conn *k)
{
    struct zk_ctx *x = malloc(sizeof(*x));

    if (x == NULL) {
        return false;
    }
    k->gen++;
    x->k = k;
    x->gen = k->gen;
    k->zh = zookeeper_init2(zk_relay_hosts(k->relay), session_watch,
                            k->session_ms, NULL, x, 0, zk_log_drop);
    if (k->zh == NULL) {
        free(x);
        return false;
    }
    k->ctx = x;
    return true;
}

/* Close the handle: its threads end, and every call it still held comes
 * back through the queue as ZCLOSING. */
static void
stop(struct zk_conn *k)
{
    uint64_t gen = k->gen;

    if (k->zh == NULL) {
        return;
    }
    zookeeper_close(k->zh);
    k->zh = NULL;
    free(k->ctx);
    k->ctx = NULL;
    k->connected = false;
    /* The client's threads are gone: what they did not complete is ours. */
    for (struct zk_call *c = k->out, *next; c != NULL; c = next) {
        next = c->onext;
        if (c->gen == gen && !c->queued) {
            out_unlink(k, c);
            c->rc = ZCLOSING;
            zk_conn_push(k, c);
        }
    }
}

static void
on_retry(evutil_socket_t fd, short what, void *arg)
{
    struct zk_conn *k = arg;

    lib_enter(k->log);
    (void)fd;
    (void)what;
    if (k->zh == NULL && !k->closing && !start(k)) {
        log_debug("%s: cannot start a client for %s: %s", k->who,
                  LOG_STR(k->hosts), strerror(errno));
        retry_later(k);
    }
}

static void
on_session(struct zk_conn *k, int state)
{
    if (state == ZOO_CONNECTED_STATE) {
        const clientid_t *id = zoo_client_id(k->zh);

        log_info("%s: connected, session 0x%" PRIx64 ", timeout %d ms", k->who,
                 (uint64_t)id->client_id, zoo_recv_timeout(k->zh));
        k->connected = true;
        k->hooks.state(k->arg, ZK_CONN_UP);
    } else if (state == ZOO_EXPIRED_SESSION_STATE ||
               state == ZOO_AUTH_FAILED_STATE) {
        k->hooks.state(k->arg, ZK_CONN_EXPIRED);
        stop(k);
        if (!start(k)) {
            retry_later(k);
        }
    } else if (k->connected) {
        k->connected = false;
        k->hooks.state(k->arg, ZK_CONN_DOWN);
    }
}

/* A session event of the current handle: zk_conn's, not the owner's. */
static void
session_event(struct zk_conn *k, struct zk_call *c)
{
    if (c->gen == k->gen && !k->closing && k->zh != NULL) {
        on_session(k, c->state);
    }
    zk_call_free(c);
}

struct zk_conn *
zk_conn_new(struct event_base *base, const char *hosts, int session_ms,
            const char *who, const struct zk_conn_hooks *hooks, void *arg,
            char *err, size_t errlen)
{
    struct zk_conn *k = calloc(1, sizeof(*k));
    int connect_ms;

    if (k == NULL || pthread_mutex_init(&k->mu, NULL) != 0) {
        free(k);
        snprintf(err, errlen, "%s: out of memory", who);
        return NULL;
    }
    k->base = base;
    k->log = log_current();
    k->hooks = *hooks;
    k->arg = arg;
    k->session_ms = session_ms;
    k->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    k->hosts = strdup(hosts);
    k->who = strdup(who);
    if (k->efd >= 0) {
        k->done_ev = event_new(base, k->efd, EV_READ | EV_PERSIST, on_done, k);
    }
    k->retry = evtimer_new(base, on_retry, k);
    if (k->hosts == NULL || k->who == NULL || k->done_ev == NULL ||
        k->retry == NULL || event_add(k->done_ev, NULL) != 0) {
        snprintf(err, errlen, "%s: cannot set up events", who);
        zk_conn_free(k);
        return NULL;
    }
    /* A connection to a server is given a third of the session. */
    connect_ms = session_ms / 3 > 1000 ? session_ms / 3 : 1000;
    k->relay = zk_relay_new(hosts, who, connect_ms, err, errlen);
    if (k->relay == NULL) {
        zk_conn_free(k);
        return NULL;
    }
    /* Unreachable now (down, or a name that does not resolve yet) is
     * an outage, not a configuration error. */
    if (!start(k)) {
        log_warn("%s: cannot start a client for %s: %s; trying again every "
                 "second",
                 k->who, LOG_STR(k->hosts), strerror(errno));
        retry_later(k);
    }
    return k;
}

void
zk_conn_close(struct zk_conn *k, int settle_ms)
{
    int64_t end = dial_now_ms() + settle_ms;

    k->closing = true; /* nothing new goes out (zk_conn_zh) */
    /* Let the calls out be answered: the answers are the real ones, and
     * the client frees a request it answers, not always one it is closed
     * with. */
    while (k->out != NULL && k->connected) {
        int64_t left = end - dial_now_ms();
        struct pollfd p = {.fd = k->efd, .events = POLLIN};
        uint64_t n;

        if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
            return;
        }
        if (read(k->efd, &n, sizeof(n)) < 0 && errno != EAGAIN) {
            return;
        }
        drain(k);
    }
}

void
zk_conn_free(struct zk_conn *k)
{
    if (k == NULL) {
        return;
    }
    k->closing = true;
    stop(k);
    zk_relay_free(k->relay); /* after the handle: it says goodbye */
    if (k->efd >= 0) {
        drain(k);
    }
    if (k->done_ev != NULL) {
        event_free(k->done_ev);
    }
    if (k->retry != NULL) {
        event_free(k->retry);
    }
    if (k->efd >= 0) {
        close(k->efd);
    }
    pthread_mutex_destroy(&k->mu);
    free(k->hosts);
    free(k->who);
    free(k);
}
