/* up.c: upstream connection pools. One pool per [upstream]: the host is
 * looked up at start, again every resolve_ms and after a failed connect
 * (evdns, off the loop's path), and a connection tries its addresses in
 * turn (dial.c); idle keep-alive connections are kept most recently used first
 * and dropped when the upstream closes them. A request that finds none
 * idle waits for the end of the loop pass: a connection given back in
 * that pass serves it, and only the requests still waiting dial. When
 * the process has no file descriptor to dial with (EMFILE, ENFILE), the
 * requests stay in that line: a connection given back serves the first,
 * and every UP_FD_RETRY_MS a socket is tried; the first in line gives up
 * when its connect timeout runs out. */
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
#include "../fdlimit.h"
#include "../log.h"
#include "../metrics.h"
#include "creds.h"
#include "sock.h"

/* Idle connections are closed after this, well before the keep-alive
 * timeout of common servers (nginx 75 s, Node.js 5 s), so that a write is
 * rarely sent on a connection the upstream is closing at that moment. */
#define UP_IDLE_MS 4000
/* Idle connections beyond max_idle are closed once idle this long: load
 * that comes in bursts (a store's batch of answered raises is forwarded
 * at once, one flush apart) reuses them instead of dialing every burst. */
#define UP_SURPLUS_MS 1000

/* A failed connect or a request to an upstream without an address asks
 * the resolver again, but not sooner than this after its last answer. */
#define UP_RELOOK_MS 1000

/* Without a file descriptor free, a socket is tried this often; the
 * shortage is logged when it starts, at most once a second while it
 * lasts, and when none has been missing for UP_FD_LOG_MS. */
#define UP_FD_RETRY_MS 20
#define UP_FD_LOG_MS 1000

struct up_conn {
    struct up_pool *pool;
    struct bufferevent *bev; /* NULL while dialing */
    struct sock sk;          /* reads bev's socket */
    struct dial *dial;       /* while the socket connects */
    int64_t deadline;        /* of the connect, TLS handshake included;
                              * of the wait, for a starved one */
    struct up_conn *next;    /* idle or waiting list */
    struct up_conn *prev;
    up_ready_cb cb;
    void *arg;
    unsigned uses;
    unsigned addr_gen; /* the pool's address set it was dialed with */
    bool idle;
    bool waiting;               /* for the pass's end: no socket yet */
    bool busy;                  /* handed to a request */
    bool starved;               /* waits for a descriptor (counted) */
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

/* A shortage of file descriptors, as the pool's dials met it. */
struct fd_short {
    struct event *retry;  /* every UP_FD_RETRY_MS while one is logged */
    bool on;              /* no dial until a socket can be opened again */
    int err;              /* EMFILE or ENFILE */
    int64_t began;        /* ms, when the warning was logged */
    int64_t last;         /* ms, the last time no socket could be opened */
    int64_t told;         /* ms, the last warning; 0: none (not short) */
    unsigned long waited; /* requests that waited since the warning */
    unsigned long since;  /* of them, since the last warning */
};

struct up_pool {
    struct event_base *base;
    const struct tm_log *log; /* the proxy's, entered by callbacks */
    const struct cfg_upstream *cfg;
    SSL_CTX *tls;           /* https upstreams */
    SSL_SESSION *session;   /* the last one, resumed by new connections */
    struct dial_list addrs; /* none: down until the name resolves */
    unsigned addr_gen;      /* counts the changes of addrs */
    size_t good;            /* the address that connected last: tried first */
    struct evdns_base *dns; /* NULL: the host is an address */
    struct up_names *names; /* counts the lookups */
    struct metrics *metrics;
    struct dial_lookup *lookup; /* in flight */
    struct event *relook;       /* the next scheduled lookup */
    int64_t looked_at;          /* when the last lookup ended, ms */
    bool failing;               /* the last lookup failed (logged once) */
    char why[320];              /* why addrs is empty */
    char who[96];               /* "upstream NAME", for log lines */
    struct conn_list idle;      /* most recently used first */
    struct conn_list wait;      /* up_connect's, in arrival order */
    size_t nbusy;
    struct event *turn;  /* serves the waiting at the end of the pass */
    bool turn_on;        /* turn is active */
    struct event *trim;  /* closes the idle beyond max_idle, UP_SURPLUS_MS on */
    struct creds *creds; /* sign = aws-sigv4: what it signs with */
    struct fd_short fds;
};

static void on_turn(evutil_socket_t fd, short what, void *arg);
static void conn_free(struct up_conn *uc);
static void on_trim(evutil_socket_t fd, short what, void *arg);
static void on_fd_retry(evutil_socket_t fd, short what, void *arg);

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
    p->tls = tls_client_ctx(&cfg->pki, p->who, err, errlen);
    return p->tls != NULL;
}

void
up_tls_log_failure(struct up_conn *uc)
{
    char why[320];

    if (uc->pool->tls == NULL) {
        return;
    }
    tls_client_why(uc->bev, why, sizeof(why));
    if (why[0] != '\0') {
        log_error("%s: TLS with %s: %s", uc->pool->who,
                  LOG_STR(uc->pool->cfg->host), why);
    }
}

static void on_looked_up(void *arg, const struct dial_list *list,
                         const char *why);

/* Ask the resolver now, unless a lookup is in flight already. */
static void
lookup_start(struct up_pool *p)
{
    if (p->dns == NULL || p->lookup != NULL) {
        return;
    }
    p->lookup = dial_lookup_start(p->base, p->dns, p->cfg->host,
                                  atoi(p->cfg->port), on_looked_up, p);
    p->names->asked++;
    if (p->lookup == NULL && !evtimer_pending(p->relook, NULL)) {
        struct timeval tv;

        ms_to_tv(UP_RELOOK_MS, &tv); /* out of memory: later */
        evtimer_add(p->relook, &tv);
    }
}

/* After a failed connect, or a request to an upstream without an
 * address: ask again, once a second at most. */
static void
lookup_soon(struct up_pool *p)
{
    if (dial_now_ms() - p->looked_at >= UP_RELOOK_MS) {
        lookup_start(p);
    }
}

static void
on_relook(evutil_socket_t fd, short what, void *arg)
{
    struct up_pool *p = arg;

    lib_enter(p->log);
    (void)fd;
    (void)what;
    lookup_start(p);
}

/* The lookup failed: the addresses the name had are kept (a resolver
 * that is down must not take the upstream down); without any, the
 * upstream is down. Logged when it starts failing. */
static void
looked_up_failed(struct up_pool *p, const char *why)
{
    metrics_upstream_resolve_failure(p->metrics, p->cfg->name);
    if (p->addrs.n == 0) {
        snprintf(p->why, sizeof(p->why), "%s", why);
    }
    if (!p->failing) {
        log_warn("upstream %s: %s; %s", p->cfg->name, why,
                 p->addrs.n > 0 ? "keeping the addresses it had"
                                : "down until it resolves");
    }
    p->failing = true;
}

/* The name resolved: a new set of addresses serves new connections, and
 * the idle ones to the old set are closed (busy ones when given back). */
static void
looked_up(struct up_pool *p, const struct dial_list *list)
{
    char text[256];

    if (dial_same(&p->addrs, list)) {
        if (p->failing) {
            log_info("upstream %s: %s resolves again", p->cfg->name,
                     LOG_STR(p->cfg->host));
        }
        p->failing = false;
        return;
    }
    dial_list_text(list, text, sizeof(text));
    if (p->addrs.n == 0) {
        log_info("upstream %s: up: %s resolves to %s", p->cfg->name,
                 LOG_STR(p->cfg->host), text);
    } else {
        log_info("upstream %s: %s now resolves to %s; its connections to the "
                 "old addresses are closed",
                 p->cfg->name, LOG_STR(p->cfg->host), text);
    }
    p->addrs = *list;
    p->good = 0;
    p->addr_gen++;
    p->failing = false;
    p->why[0] = '\0';
    while (p->idle.head != NULL) {
        conn_free(p->idle.head);
    }
}

static void turn_on(struct up_pool *p);

static void
on_looked_up(void *arg, const struct dial_list *list, const char *why)
{
    struct up_pool *p = arg;

    p->lookup = NULL;
    p->looked_at = dial_now_ms();
    if (list != NULL) {
        looked_up(p, list);
    } else {
        looked_up_failed(p, why);
    }
    if (p->cfg->resolve_ms > 0) {
        struct timeval tv;

        ms_to_tv(p->cfg->resolve_ms, &tv);
        evtimer_add(p->relook, &tv);
    }
    if (p->wait.n > 0) {
        turn_on(p); /* those that waited for the answer */
    }
}

/* The first addresses: a blocking lookup (the system's resolver, as
 * --check asks) when names->first_blocking or the host is an address,
 * else a lookup on the loop that the first requests wait for. A name
 * that does not resolve leaves the upstream down, not the start. */
static void
first_lookup(struct up_pool *p, const struct up_names *names)
{
    char why[256];

    if (p->dns != NULL && !names->first_blocking) {
        snprintf(p->why, sizeof(p->why), "looking %s up", p->cfg->host);
        lookup_start(p);
        return;
    }
    /* Into addrs itself: the start needs no "resolves to" line. */
    if (dial_resolve(p->cfg->host, atoi(p->cfg->port), &p->addrs, why,
                     sizeof(why))) {
        on_looked_up(p, &p->addrs, NULL);
    } else {
        on_looked_up(p, NULL, why);
    }
}

struct up_pool *
up_pool_new(struct event_base *base, const struct cfg_upstream *cfg,
            struct up_names *names, char *err, size_t errlen)
{
    struct up_pool *p;

    p = calloc(1, sizeof(*p));
    if (p == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    p->base = base;
    p->log = log_current();
    p->cfg = cfg;
    p->metrics = names->metrics;
    p->names = names;
    p->dns = dial_is_ip(cfg->host) ? NULL : names->dns;
    snprintf(p->who, sizeof(p->who), "upstream %s", cfg->name);
    p->turn = event_new(base, -1, 0, on_turn, p);
    p->trim = evtimer_new(base, on_trim, p);
    p->relook = evtimer_new(base, on_relook, p);
    p->fds.retry = evtimer_new(base, on_fd_retry, p);
    if (p->turn == NULL || p->trim == NULL || p->relook == NULL ||
        p->fds.retry == NULL) {
        snprintf(err, errlen, "out of memory");
        up_pool_free(p);
        return NULL;
    }
    if (cfg->tls && !tls_setup(p, err, errlen)) {
        up_pool_free(p);
        return NULL;
    }
    if (cfg->sign != CFG_SIGN_NONE &&
        (p->creds = creds_new(base, cfg, names)) == NULL) {
        snprintf(err, errlen, "out of memory");
        up_pool_free(p);
        return NULL;
    }
    first_lookup(p, names);
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
    if (p->relook != NULL) {
        event_free(p->relook);
    }
    if (p->fds.retry != NULL) {
        event_free(p->fds.retry);
    }
    dial_lookup_cancel(p->lookup);
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
    up_tls_log_failure(uc);
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

/* ---- no file descriptor to dial with ----------------------------------
 * A dial that finds none (EMFILE: the process's limit, ENFILE: the
 * system's) does not fail its request: the request waits in the line of
 * up_connect's, which a connection given back serves, first come first
 * served, and the pool dials nothing until a socket can be opened again.
 * The requests are allocated already; waiting allocates nothing. */

/* uc waits for a descriptor: counted once, its wait bounded by the
 * connect timeout from when it first needed one. */
static void
fd_wait_count(struct up_conn *uc)
{
    struct up_pool *p = uc->pool;

    if (uc->starved) {
        return;
    }
    uc->starved = true;
    if (uc->deadline == 0) {
        uc->deadline = dial_now_ms() + p->cfg->connect_timeout_ms;
    }
    p->fds.waited++;
    p->fds.since++;
    metrics_upstream_dial_deferred(p->metrics, p->cfg->name);
}

/* No socket could be opened (err): dials stop, the requests waiting now
 * wait for a descriptor too; the warning, once for the shortage. */
static void
fd_short_begin(struct up_pool *p, int err)
{
    int64_t now = dial_now_ms();

    p->fds.last = now;
    p->fds.err = err;
    if (p->fds.told == 0) {
        char limit[96];

        fd_limit_text(err, limit, sizeof(limit));
        log_warn("%s: cannot open a connection: %s (%s); requests wait for a "
                 "pooled connection to be given back or a descriptor to "
                 "free, up to connect_timeout_ms (%d)",
                 p->who, strerror(err), limit, p->cfg->connect_timeout_ms);
        p->fds.began = p->fds.told = now;
        p->fds.waited = p->fds.since = 0;
    }
    if (!p->fds.on) {
        struct timeval tv;

        p->fds.on = true;
        for (struct up_conn *uc = p->wait.head; uc != NULL; uc = uc->next) {
            fd_wait_count(uc);
        }
        ms_to_tv(UP_FD_RETRY_MS, &tv);
        evtimer_add(p->fds.retry, &tv);
    }
}

/* uc found no descriptor to dial with (err): it waits, first in line (it
 * was when it dialed), unless its time has run out. false when it gave
 * up: its callback ran, and may have freed the pool. */
static bool
fd_starve(struct up_conn *uc, int err)
{
    struct up_pool *p = uc->pool;

    if (uc->deadline != 0 && dial_now_ms() >= uc->deadline) {
        connect_done(uc, false, err);
        return false;
    }
    fd_short_begin(p, err);
    fd_wait_count(uc);
    uc->waiting = true;
    list_add(&p->wait, uc, true);
    return true;
}

/* While short, every UP_FD_RETRY_MS: a socket opened (and closed) ends
 * the wait for one, and the line is served again; those whose time ran
 * out give up, with the reason (err) in their error line; the log says
 * how it goes, once a second at most, and when it has ended. Those that
 * give up are told last: the last request of a generation a reload
 * retired frees the pool as it ends. */
static void
on_fd_retry(evutil_socket_t fd, short what, void *arg)
{
    struct up_pool *p = arg;
    int64_t now = dial_now_ms();
    struct conn_list gave_up = {NULL, NULL, 0};
    int err = p->fds.err;
    struct up_conn *uc;
    struct timeval tv;

    lib_enter(p->log);
    (void)fd;
    (void)what;
    if (p->fds.on) {
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (s >= 0 || !fd_exhausted(errno)) {
            if (s >= 0) {
                close(s);
            }
            p->fds.on = false;
            if (p->wait.n > 0) {
                turn_on(p);
            }
        } else {
            p->fds.last = now;
        }
    }
    /* In arrival order, so deadline order (give or take a loop pass). */
    while ((uc = p->wait.head) != NULL && uc->starved && uc->deadline <= now) {
        wait_unlink(uc);
        list_add(&gave_up, uc, false);
    }
    if (p->fds.on && p->fds.since > 0 && now - p->fds.told >= UP_FD_LOG_MS) {
        log_warn("%s: still no file descriptor free: %lu requests waited in "
                 "the last %.1f s",
                 p->who, p->fds.since, (double)(now - p->fds.told) / 1000);
        p->fds.told = now;
        p->fds.since = 0;
    }
    if (!p->fds.on && now - p->fds.last >= UP_FD_LOG_MS) {
        log_info("%s: file descriptors free again after %lld ms; %lu "
                 "requests waited for a connection",
                 p->who, (long long)(p->fds.last - p->fds.began),
                 p->fds.waited);
        p->fds.told = 0;
    } else {
        ms_to_tv(UP_FD_RETRY_MS, &tv);
        evtimer_add(p->fds.retry, &tv);
    }
    while ((uc = gave_up.head) != NULL) {
        list_unlink(&gave_up, uc);
        connect_done(uc, false, err);
    }
}

static void
on_dialed(void *arg, int fd, int err, size_t index)
{
    struct up_conn *uc = arg;
    struct timeval tv;

    uc->dial = NULL;
    if (fd < 0 && fd_exhausted(err)) {
        (void)fd_starve(uc, err);
        return;
    }
    if (fd < 0) {
        lookup_soon(uc->pool); /* the name may have moved */
        connect_done(uc, false, err);
        return;
    }
    if (uc->addr_gen == uc->pool->addr_gen) {
        uc->pool->good = index;
    }
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
 * new one. false when it waits on, first in line, for a descriptor.
 * true when it gave up: if it was the last request holding the pool,
 * its callback freed it, and no other waits in it. */
static bool
serve(struct up_conn *uc)
{
    struct up_pool *p = uc->pool;
    struct up_conn *got;
    int64_t now;

    wait_unlink(uc);
    got = up_take_idle(p);
    if (got != NULL) {
        up_ready_cb cb = uc->cb;
        void *arg = uc->arg;

        free(uc);
        cb(arg, got, true);
        return true;
    }
    if (p->fds.on) {
        fd_wait_count(uc);
        uc->waiting = true;
        list_add(&p->wait, uc, true);
        return false;
    }
    now = dial_now_ms();
    if (!uc->starved) {
        uc->deadline = now + p->cfg->connect_timeout_ms;
    }
    uc->addr_gen = p->addr_gen;
    uc->dial =
        dial_start(p->base, &p->addrs, p->good,
                   dial_share_ms(uc->deadline - now, 1), p->who, on_dialed, uc);
    if (uc->dial == NULL && fd_exhausted(errno)) {
        return !fd_starve(uc, errno); /* gave up: the pool may be gone */
    }
    if (uc->dial == NULL) {
        connect_done(uc, false, ENOMEM);
    }
    return true;
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
    if (p->addrs.n == 0) {
        lookup_soon(p);
        if (p->lookup != NULL) {
            return; /* its answer serves them */
        }
        while (n-- > 0 && p->wait.head != NULL) {
            struct up_conn *uc = p->wait.head;

            wait_unlink(uc);
            connect_done(uc, false, EHOSTUNREACH); /* up_down_why says why */
        }
        return;
    }
    while (n-- > 0 && p->wait.head != NULL && serve(p->wait.head)) {
    }
}

/* Arm trim to fire in ms milliseconds, unless it is armed. */
static void
trim_in(struct up_pool *p, int64_t ms)
{
    struct timeval tv;

    if (!evtimer_pending(p->trim, NULL)) {
        ms_to_tv((int)ms, &tv);
        evtimer_add(p->trim, &tv);
    }
}

static void
turn_on(struct up_pool *p)
{
    /* Active events run in the order activated: this one after every
     * event the pass had already, the answers that free connections. */
    if (!p->turn_on) {
        p->turn_on = true;
        event_active(p->turn, EV_TIMEOUT, 1);
    }
}

/* The idle beyond max_idle (and the waiting, who take theirs) that have
 * been idle UP_SURPLUS_MS are closed, oldest first; the next is due when
 * the oldest left has been. */
static void
on_trim(evutil_socket_t fd, short what, void *arg)
{
    struct up_pool *p = arg;
    int64_t now = now_ms();

    lib_enter(p->log);
    (void)fd;
    (void)what;
    while (p->idle.n > (size_t)p->cfg->max_idle + p->wait.n) {
        int64_t left = UP_SURPLUS_MS - (now - p->idle.tail->idle_since);

        if (left > 0) {
            trim_in(p, left);
            return;
        }
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
    if (p->fds.on) {
        fd_wait_count(uc);
    }
    turn_on(p);
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
    if (!reusable || p->cfg->max_idle == 0 || uc->addr_gen != p->addr_gen ||
        evbuffer_get_length(bufferevent_get_input(uc->bev)) != 0) {
        conn_free(uc);
        return;
    }
    uc->idle = true;
    list_add(&p->idle, uc, true);
    /* Beyond max_idle, it stays UP_SURPLUS_MS: under load the clients
     * answered in this pass send their next requests in the next one,
     * and a burst of answers comes again a flush later; both would dial
     * where it is closed now. The request's read timeout stays as a
     * backstop: an idle connection is closed by it, or passed over by
     * up_take_idle after UP_IDLE_MS, without touching libevent's timers
     * on every request. */
    uc->idle_since = now_ms();
    if (p->idle.n > (size_t)p->cfg->max_idle) {
        trim_in(p, UP_SURPLUS_MS);
    }
    sock_setcb(&uc->sk, idle_read_cb, NULL, idle_event_cb, uc);
    sock_read(&uc->sk, true);
    if (p->fds.on && p->wait.n > 0) {
        turn_on(p); /* to the first of those waiting for a descriptor */
    }
}

const char *
up_peer(struct up_conn *uc)
{
    return uc->bev != NULL ? sock_peer_text(&uc->peer, uc->bev) : NULL;
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

const char *
up_down_why(const struct up_pool *p)
{
    return p->addrs.n == 0 ? p->why : NULL;
}

size_t
up_addr_count(const struct up_pool *p)
{
    return p->addrs.n;
}
