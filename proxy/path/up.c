/* up.c: upstream connection pools. One pool per [upstream]: the host is
 * resolved once at startup, and a connection tries its addresses in turn
 * (dial.c); idle keep-alive connections are kept most recently used first
 * and dropped when the upstream closes them. A request that finds none
 * idle waits for the end of the loop pass: a connection given back in
 * that pass serves it, and only the requests still waiting dial. */
#include "up.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/ssl.h>

#include "../../conf/cfg.h"
#include "../clients/dial.h"
#include "../clients/tls_client.h"
#include "../log.h"
#include "creds.h"
#include "sock.h"

/* Idle connections are closed after this, well before the keep-alive
 * timeout of common servers (nginx 75 s, Node.js 5 s), so that a write is
 * rarely sent on a connection the upstream is closing at that moment. */
#define UP_IDLE_MS 4000

struct up_conn {
    struct up_pool *pool;
    struct bufferevent *bev; /* NULL while dialing */
    struct sock sk;          /* reads bev's socket */
    struct dial *dial;       /* while the socket connects */
    int64_t deadline;        /* of the connect, TLS handshake included */
    struct up_conn *next;    /* idle or waiting list */
    struct up_conn *prev;
    up_ready_cb cb;
    void *arg;
    unsigned uses;
    bool idle;
    bool waiting;               /* for the pass's end: no socket yet */
    bool busy;                  /* handed to a request */
    int tmo_ms;                 /* the write timeout set on bev, 0: none */
    int rtmo_ms;                /* the read timeout set on its sock, 0: none */
    int64_t idle_since;         /* ms, CLOCK_MONOTONIC_COARSE */
    struct sock_peer_text peer; /* the upstream's address, read once */
};

/* A list of connections with both ends kept. */
struct conn_list {
    struct up_conn *head;
    struct up_conn *tail;
    size_t n;
};

struct up_pool {
    struct event_base *base;
    const struct tm_log *log; /* the proxy's, entered by callbacks */
    const struct cfg_upstream *cfg;
    SSL_CTX *tls;         /* https upstreams */
    SSL_SESSION *session; /* the last one, resumed by new connections */
    struct dial_list addrs;
    size_t good;           /* the address that connected last: tried first */
    char who[96];          /* "upstream NAME", for log lines */
    struct conn_list idle; /* most recently used first */
    struct conn_list wait; /* up_connect's, in arrival order */
    size_t nbusy;
    struct event *turn;  /* serves the waiting at the end of the pass */
    bool turn_on;        /* turn is active */
    struct event *trim;  /* closes the idle beyond max_idle, a pass later */
    struct creds *creds; /* sign = aws-sigv4: what it signs with */
};

static void on_turn(evutil_socket_t fd, short what, void *arg);
static void on_trim(evutil_socket_t fd, short what, void *arg);

static void
ms_to_tv(int ms, struct timeval *tv)
{
    tv->tv_sec = ms / 1000;
    tv->tv_usec = (ms % 1000) * 1000;
}

/* The pool's TLS context (clients/tls_client.c). */
static bool
tls_setup(struct up_pool *p, char *err, size_t errlen)
{
    const struct cfg_upstream *cfg = p->cfg;
    struct tls_client_conf tc = {.ca_file = cfg->ca_file};

    p->tls = tls_client_ctx(&tc, p->who, err, errlen);
    return p->tls != NULL;
}

/* Log why a TLS connection failed, without a secret in sight. */
static void
tls_log_failure(struct up_conn *uc)
{
    char why[320];

    tls_client_why(uc->bev, why, sizeof(why));
    if (why[0] != '\0') {
        log_error("%s: TLS with %s: %s", uc->pool->who,
                  LOG_STR(uc->pool->cfg->host), why);
    }
}

struct up_pool *
up_pool_new(struct event_base *base, const struct cfg_upstream *cfg, char *err,
            size_t errlen)
{
    struct up_pool *p;
    char why[256];

    p = calloc(1, sizeof(*p));
    if (p == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (!dial_resolve(cfg->host, atoi(cfg->port), &p->addrs, why,
                      sizeof(why))) {
        snprintf(err, errlen, "upstream %s: %s", cfg->name, why);
        free(p);
        return NULL;
    }
    p->base = base;
    p->log = log_current();
    p->cfg = cfg;
    snprintf(p->who, sizeof(p->who), "upstream %s", cfg->name);
    p->turn = event_new(base, -1, 0, on_turn, p);
    p->trim = evtimer_new(base, on_trim, p);
    if (p->turn == NULL || p->trim == NULL) {
        snprintf(err, errlen, "out of memory");
        up_pool_free(p);
        return NULL;
    }
    if (cfg->tls && !tls_setup(p, err, errlen)) {
        up_pool_free(p);
        return NULL;
    }
    if (cfg->sign != CFG_SIGN_NONE &&
        (p->creds = creds_new(base, cfg)) == NULL) {
        snprintf(err, errlen, "out of memory");
        up_pool_free(p);
        return NULL;
    }
    return p;
}

static void
list_unlink(struct conn_list *l, struct up_conn *uc)
{
    if (uc->prev != NULL) {
        uc->prev->next = uc->next;
    } else {
        l->head = uc->next;
    }
    if (uc->next != NULL) {
        uc->next->prev = uc->prev;
    } else {
        l->tail = uc->prev;
    }
    uc->next = uc->prev = NULL;
    l->n--;
}

/* Put uc at the front of l (front) or at its back. */
static void
list_add(struct conn_list *l, struct up_conn *uc, bool front)
{
    uc->next = uc->prev = NULL;
    if (l->head == NULL) {
        l->head = l->tail = uc;
    } else if (front) {
        uc->next = l->head;
        l->head->prev = uc;
        l->head = uc;
    } else {
        uc->prev = l->tail;
        l->tail->next = uc;
        l->tail = uc;
    }
    l->n++;
}

static void
idle_unlink(struct up_conn *uc)
{
    list_unlink(&uc->pool->idle, uc);
    uc->idle = false;
}

static void
wait_unlink(struct up_conn *uc)
{
    list_unlink(&uc->pool->wait, uc);
    uc->waiting = false;
}

static void
conn_free(struct up_conn *uc)
{
    if (uc->idle) {
        idle_unlink(uc);
    }
    if (uc->waiting) {
        wait_unlink(uc);
    }
    dial_cancel(uc->dial);
    if (uc->bev != NULL) {
        sock_fini(&uc->sk);
        bufferevent_free(uc->bev);
    }
    free(uc);
}

void
up_pool_free(struct up_pool *p)
{
    if (p == NULL) {
        return;
    }
    while (p->idle.head != NULL) {
        conn_free(p->idle.head);
    }
    while (p->wait.head != NULL) {
        conn_free(p->wait.head);
    }
    creds_free(p->creds);
    if (p->turn != NULL) {
        event_free(p->turn);
    }
    if (p->trim != NULL) {
        event_free(p->trim);
    }
    if (p->session != NULL) {
        SSL_SESSION_free(p->session);
    }
    if (p->tls != NULL) {
        SSL_CTX_free(p->tls);
    }
    free(p);
}

/* An idle connection must stay silent: data or a close means it cannot
 * carry another request. */
static void
idle_read_cb(struct bufferevent *bev, void *arg)
{
    lib_enter(((struct up_conn *)arg)->pool->log);
    (void)bev;
    conn_free(arg);
}

static void
idle_event_cb(struct bufferevent *bev, short what, void *arg)
{
    lib_enter(((struct up_conn *)arg)->pool->log);
    (void)bev;
    (void)what;
    conn_free(arg);
}

static int64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct up_conn *
up_take_idle(struct up_pool *p)
{
    struct up_conn *uc;
    int64_t now = now_ms();

    /* Most recent first; one idle too long may be closing upstream. */
    while ((uc = p->idle.head) != NULL && now - uc->idle_since > UP_IDLE_MS) {
        conn_free(uc);
    }
    if (uc == NULL) {
        return NULL;
    }
    idle_unlink(uc);
    sock_setcb(&uc->sk, NULL, NULL, NULL, NULL);
    uc->uses++;
    uc->busy = true;
    p->nbusy++;
    return uc;
}

/* The connection is made (ok) or not (err: why): tell the caller. */
static void
connect_done(struct up_conn *uc, bool ok, int err)
{
    up_ready_cb cb = uc->cb;
    int one = 1;

    if (ok) {
        sock_setcb(&uc->sk, NULL, NULL, NULL, NULL);
        sock_timeouts(&uc->sk, 0, 0);
        uc->tmo_ms = uc->rtmo_ms = 0;
        setsockopt(bufferevent_getfd(uc->bev), IPPROTO_TCP, TCP_NODELAY, &one,
                   sizeof(one));
        uc->busy = true;
        uc->pool->nbusy++;
        cb(uc->arg, uc, true);
        return;
    }
    errno = err;
    cb(uc->arg, uc, false);
    conn_free(uc);
}

/* The TLS handshake ended. */
static void
handshake_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct up_conn *uc = arg;

    lib_enter(uc->pool->log);
    bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
    if (what & BEV_EVENT_CONNECTED) {
        SSL *ssl = bufferevent_openssl_get_ssl(bev);
        SSL_SESSION *sess = SSL_get1_session(ssl);

        if (sess != NULL) {
            if (uc->pool->session != NULL) {
                SSL_SESSION_free(uc->pool->session);
            }
            uc->pool->session = sess;
        }
        connect_done(uc, true, 0);
        return;
    }
    if (what & BEV_EVENT_TIMEOUT) {
        connect_done(uc, false, ETIMEDOUT);
        return;
    }
    tls_log_failure(uc);
    connect_done(uc, false, EPROTO);
}

/* The socket is connected: wrap it in a bufferevent, plain or TLS (the
 * handshake gets what is left of the connect deadline). false when out
 * of memory: the socket is closed. */
static bool
conn_wrap(struct up_conn *uc, int fd)
{
    struct up_pool *p = uc->pool;

    if (p->tls != NULL) {
        SSL *ssl = tls_client_ssl(p->tls, p->cfg->host, p->session);

        if (ssl == NULL) {
            close(fd);
            return false;
        }
        /* On failure the bufferevent frees ssl (BEV_OPT_CLOSE_ON_FREE). */
        uc->bev = bufferevent_openssl_socket_new(p->base, fd, ssl,
                                                 BUFFEREVENT_SSL_CONNECTING,
                                                 BEV_OPT_CLOSE_ON_FREE);
        if (uc->bev != NULL) {
            /* Many servers close without close_notify; framing, not the
             * TLS shutdown, tells where an answer ends. */
            bufferevent_openssl_set_allow_dirty_shutdown(uc->bev, 1);
        }
    } else {
        uc->bev = bufferevent_socket_new(p->base, fd, BEV_OPT_CLOSE_ON_FREE);
    }
    if (uc->bev == NULL) {
        close(fd);
        return false;
    }
    if (!sock_init(&uc->sk, uc->bev, p->tls != NULL)) {
        bufferevent_free(uc->bev);
        uc->bev = NULL;
        return false;
    }
    return true;
}

static void
on_dialed(void *arg, int fd, int err, size_t index)
{
    struct up_conn *uc = arg;
    struct timeval tv;

    uc->dial = NULL;
    if (fd < 0) {
        connect_done(uc, false, err);
        return;
    }
    uc->pool->good = index;
    if (!conn_wrap(uc, fd)) {
        connect_done(uc, false, ENOMEM);
        return;
    }
    if (uc->pool->tls == NULL) {
        connect_done(uc, true, 0);
        return;
    }
    ms_to_tv(dial_share_ms(uc->deadline - dial_now_ms(), 1), &tv);
    bufferevent_set_timeouts(uc->bev, &tv, &tv);
    bufferevent_setcb(uc->bev, NULL, NULL, handshake_event_cb, uc);
}

/* Serve a waiting request: a connection given back since it came, or a
 * new one. */
static void
serve(struct up_conn *uc)
{
    struct up_pool *p = uc->pool;
    struct up_conn *got;

    wait_unlink(uc);
    got = up_take_idle(p);
    if (got != NULL) {
        up_ready_cb cb = uc->cb;
        void *arg = uc->arg;

        free(uc);
        cb(arg, got, true);
        return;
    }
    uc->deadline = dial_now_ms() + p->cfg->connect_timeout_ms;
    uc->dial = dial_start(p->base, &p->addrs, p->good,
                          p->cfg->connect_timeout_ms, p->who, on_dialed, uc);
    if (uc->dial == NULL) {
        connect_done(uc, false, ENOMEM);
    }
}

/* The end of the loop pass: every request that waited then gets a
 * connection (those that come meanwhile wait for the next turn). */
static void
on_turn(evutil_socket_t fd, short what, void *arg)
{
    struct up_pool *p = arg;
    size_t n = p->wait.n;

    lib_enter(p->log);
    (void)fd;
    (void)what;
    p->turn_on = false;
    while (n-- > 0 && p->wait.head != NULL) {
        serve(p->wait.head);
    }
}

/* A pass after connections were given back beyond max_idle: those no
 * request took (the waiting left theirs) are closed, oldest first. */
static void
on_trim(evutil_socket_t fd, short what, void *arg)
{
    struct up_pool *p = arg;

    lib_enter(p->log);
    (void)fd;
    (void)what;
    while (p->idle.n > (size_t)p->cfg->max_idle + p->wait.n) {
        conn_free(p->idle.tail);
    }
}

struct up_conn *
up_connect(struct up_pool *p, up_ready_cb cb, void *arg)
{
    struct up_conn *uc;

    uc = calloc(1, sizeof(*uc));
    if (uc == NULL) {
        return NULL;
    }
    uc->pool = p;
    uc->cb = cb;
    uc->arg = arg;
    uc->waiting = true;
    list_add(&p->wait, uc, false);
    /* Active events run in the order activated: this one after every
     * event the pass had already, the answers that free connections. */
    if (!p->turn_on) {
        p->turn_on = true;
        event_active(p->turn, EV_TIMEOUT, 1);
    }
    return uc;
}

void
up_put(struct up_conn *uc, bool reusable)
{
    struct up_pool *p = uc->pool;

    if (uc->busy) {
        uc->busy = false;
        p->nbusy--;
    }
    if (uc->bev == NULL) {
        conn_free(uc); /* still waiting or dialing */
        return;
    }
    sock_setcb(&uc->sk, NULL, NULL, NULL, NULL);
    if (!reusable || p->cfg->max_idle == 0 ||
        evbuffer_get_length(bufferevent_get_input(uc->bev)) != 0) {
        conn_free(uc);
        return;
    }
    uc->idle = true;
    list_add(&p->idle, uc, true);
    /* Beyond max_idle, it stays for the next pass: under load the
     * clients answered in this pass send their next requests in the next
     * one, and would dial where it is closed now. */
    if (p->idle.n > (size_t)p->cfg->max_idle &&
        !evtimer_pending(p->trim, NULL)) {
        static const struct timeval next_pass = {0, 0};

        evtimer_add(p->trim, &next_pass);
    }
    /* The request's read timeout stays as a backstop: an idle connection
     * is closed by it, or passed over by up_take_idle after UP_IDLE_MS,
     * without touching libevent's timers on every request. */
    uc->idle_since = now_ms();
    sock_setcb(&uc->sk, idle_read_cb, NULL, idle_event_cb, uc);
    sock_read(&uc->sk, true);
}

const char *
up_peer(struct up_conn *uc)
{
    return uc->bev != NULL
               ? sock_peer_text(&uc->peer, bufferevent_getfd(uc->bev))
               : NULL;
}

struct bufferevent *
up_bev(struct up_conn *uc)
{
    return uc->bev;
}

struct sock *
up_sock(struct up_conn *uc)
{
    return &uc->sk;
}

struct creds *
up_creds(const struct up_pool *p)
{
    return p->creds;
}

void
up_inherit(struct up_pool *p, const struct up_pool *old)
{
    creds_inherit(p->creds, old->creds);
}

const struct cfg_upstream *
up_cfg(const struct up_pool *p)
{
    return p->cfg;
}

void
up_timeouts(struct up_conn *uc, int read_ms, int write_ms)
{
    if (uc->rtmo_ms == read_ms && uc->tmo_ms == write_ms) {
        return;
    }
    uc->rtmo_ms = read_ms;
    uc->tmo_ms = write_ms;
    sock_timeouts(&uc->sk, read_ms, write_ms);
}

bool
up_tls(const struct up_conn *uc)
{
    return uc->pool->tls != NULL;
}

bool
up_reused(const struct up_conn *uc)
{
    return uc->uses > 0;
}

size_t
up_idle_count(const struct up_pool *p)
{
    return p->idle.n;
}

size_t
up_busy_count(const struct up_pool *p)
{
    return p->nbusy;
}
