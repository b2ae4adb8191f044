/* redis_conn.c: the Redis connection the mark store and the lock backend
 * share: connect (to each address of the host in turn) and reconnect with
 * backoff, scripts loaded at each connect, EVALSHA with NOSCRIPT reload,
 * a watchdog. */
#include "redis_conn.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <hiredis/async.h>
#include <openssl/sha.h>

#include "../log.h"
#include "coldq.h"
#include "dial.h"
#include "redis_reply.h"

#define REDIS_BACKOFF_MIN_MS 50
#define REDIS_BACKOFF_MAX_MS 2000
#define REDIS_MAX_SCRIPTS 8

struct redis_conn {
    struct event_base *base;
    const struct tm_log *log; /* the proxy's, entered by callbacks */
    char *host;
    int port;
    int db;
    char *user;       /* NULL: AUTH with the password alone */
    char *password;   /* NULL: no AUTH */
    const char *what; /* "[store]", "[locks]" */
    char peer[300];

    const char *const *scripts;
    size_t nscripts;
    char sha[REDIS_MAX_SCRIPTS][41];
    size_t loaded; /* scripts this connection has loaded */

    redisAsyncContext *ac; /* NULL while down */
    /* hiredis resolves a name itself but connects to its first IPv4
     * address only: it is given the addresses of addrs one by one. */
    struct dial_list addrs;
    size_t addr;              /* the address that connected last: tried first */
    size_t tried;             /* addresses of this connect given up on */
    int64_t deadline;         /* of this connect, across the addresses */
    bool dialing;             /* ac is connecting, not connected yet */
    char why[128];            /* why the address being tried failed */
    struct event *connect_ev; /* its share of the deadline; next one */
    struct coldq *cold;       /* calls waiting for the first connection */
    char who[32];             /* "redis [store]" */
    bool closing;
    bool ever_ready;
    int backoff_ms;
    unsigned failures; /* connects failed in a row */
    struct event *retry_ev;
    struct event *watch_ev; /* every timeout_ms: is Redis answering? */
    uint64_t replies;       /* replies received, ever */
    uint64_t watched;       /* replies at the previous watch */
    bool stalled;           /* commands were waiting at that watch */
    int timeout_ms;
    /* the answers weighed as hiredis builds them (redis_reply.h); its
     * refused also says why the bytes of one not read yet dropped the
     * connection */
    struct redis_weigher weigher;
};

/* hiredis's libevent glue, as its adapter does it, but the bytes of an
 * answer not complete yet are weighed before each read: hiredis keeps a
 * bulk string unread until its last byte, however long it says it is. */
struct redis_ev {
    redisAsyncContext *ac;
    struct event *rev, *wev;
};

/* One EVALSHA in flight, with its arguments kept for a NOSCRIPT resend. */
struct redis_eval {
    struct redis_conn *c;
    redis_conn_cb cb;
    redis_conn_resent_cb resent;
    void *priv;
    size_t script;
    bool retried;
    int argc;          /* after EVALSHA and the SHA */
    const char **argv; /* into buf */
    size_t *lens;
    char buf[];
};

static void connect_now(struct redis_conn *c);

/* Parse redis://[[user]:password@]host:port[/db] (the config loader has
 * checked its shape). false with a message in err. */
static bool
parse_url(struct redis_conn *c, const char *url, char *err, size_t errlen)
{
    const char *a = url + 8;
    const char *end, *at = NULL, *hp, *colon;

    if (strncmp(url, "redis://", 8) != 0) {
        snprintf(err, errlen, "redis: %s url must be redis://...", c->what);
        return false;
    }
    end = a + strcspn(a, "/");
    for (const char *p = a; p < end; p++) {
        if (*p == '@') {
            at = p;
        }
    }
    hp = a;
    if (at != NULL) {
        const char *cl = memchr(a, ':', (size_t)(at - a));

        if (cl == NULL) {
            c->password = strndup(a, (size_t)(at - a));
        } else {
            if (cl > a) {
                c->user = strndup(a, (size_t)(cl - a));
            }
            c->password = strndup(cl + 1, (size_t)(at - cl - 1));
        }
        hp = at + 1;
    }
    if (*hp == '[') {
        const char *rb = memchr(hp, ']', (size_t)(end - hp));

        if (rb == NULL || rb[1] != ':') {
            snprintf(err, errlen, "redis: %s url: bad host", c->what);
            return false;
        }
        c->host = strndup(hp + 1, (size_t)(rb - hp - 1));
        colon = rb + 1;
    } else {
        colon = memchr(hp, ':', (size_t)(end - hp));
        if (colon == NULL) {
            snprintf(err, errlen, "redis: %s url needs host:port", c->what);
            return false;
        }
        c->host = strndup(hp, (size_t)(colon - hp));
    }
    c->port = atoi(colon + 1);
    c->db = *end == '/' ? atoi(end + 1) : 0;
    if (c->host == NULL) {
        snprintf(err, errlen, "redis: out of memory");
        return false;
    }
    if (c->port <= 0 || c->port > 65535) {
        snprintf(err, errlen, "redis: %s url: bad port", c->what);
        return false;
    }
    snprintf(c->peer, sizeof(c->peer), "%s:%d", c->host, c->port);
    return true;
}

static void
schedule_retry(struct redis_conn *c)
{
    struct timeval tv;

    if (c->closing) {
        return;
    }
    tv.tv_sec = c->backoff_ms / 1000;
    tv.tv_usec = (c->backoff_ms % 1000) * 1000;
    evtimer_add(c->retry_ev, &tv);
    c->backoff_ms *= 2;
    if (c->backoff_ms > REDIS_BACKOFF_MAX_MS) {
        c->backoff_ms = REDIS_BACKOFF_MAX_MS;
    }
}

/* Close the connection from the loop (not from inside hiredis). This
 * runs the callbacks (NULL replies), and on_disconnect only if the
 * connection had been made: the reconnect is planned here. */
static void
drop(struct redis_conn *c)
{
    redisAsyncContext *ac = c->ac;

    c->ac = NULL;
    c->loaded = 0;
    redisAsyncFree(ac);
    schedule_retry(c);
}

/* Every timeout_ms: when commands have been waiting since the previous
 * watch and no reply came in between, Redis is stuck (stopped, or the
 * network drops everything): drop the connection, which answers every
 * waiting command with a NULL reply, and reconnect. */
static void
on_watch(evutil_socket_t fd, short what, void *arg)
{
    struct redis_conn *c = arg;
    /* A connect has its own deadline (connect_ev). */
    bool waiting = c->ac != NULL && !c->dialing && c->ac->replies.head != NULL;

    lib_enter(c->log);
    (void)fd;
    (void)what;
    if (waiting && c->stalled && c->replies == c->watched) {
        log_error("redis: %s answered nothing in %d ms: dropping the "
                  "connection",
                  LOG_STR(c->peer), c->timeout_ms);
        c->stalled = false;
        drop(c);
        return;
    }
    c->stalled = waiting;
    c->watched = c->replies;
}

static void
on_retry(evutil_socket_t fd, short what, void *arg)
{
    lib_enter(((struct redis_conn *)arg)->log);
    (void)fd;
    (void)what;
    connect_now(arg);
}

static void
on_connect(const redisAsyncContext *ac, int status)
{
    struct redis_conn *c = ac->data;
    struct timeval now = {0, 0};

    lib_enter(c->log);
    evtimer_del(c->connect_ev);
    c->dialing = false;
    if (status != REDIS_OK) {
        /* hiredis frees ac after this returns; queued commands get a
         * NULL reply first. The next address is tried from the loop,
         * not from inside hiredis. */
        snprintf(c->why, sizeof(c->why), "%s", ac->errstr);
        c->ac = NULL;
        c->loaded = 0;
        evtimer_add(c->connect_ev, &now);
        return;
    }
    c->addr = (c->addr + c->tried) % c->addrs.n;
    log_info("redis: connected to %s (%s, %s)", LOG_STR(c->peer),
             c->addrs.a[c->addr].text, c->what);
}

static void
on_disconnect(const redisAsyncContext *ac, int status)
{
    struct redis_conn *c = ac->data;

    lib_enter(c->log);
    c->ac = NULL;
    c->loaded = 0;
    c->dialing = false;
    if (c->closing) {
        return;
    }
    log_error("redis: connection to %s lost: %s; reconnecting",
              LOG_STR(c->peer),
              c->weigher.refused != NULL ? c->weigher.refused
              : status == REDIS_OK       ? "closed"
                                         : ac->errstr);
    c->weigher.refused = NULL;
    c->failures = 1;
    schedule_retry(c);
}

/* Reply to AUTH or SELECT: only errors matter (later commands fail too
 * and their callers answer an error). */
static void
on_setup(redisAsyncContext *ac, void *reply, void *priv)
{
    redisReply *rep = reply;
    struct redis_conn *c = ac->data;

    lib_enter(c->log);
    c->replies++;
    if (rep != NULL && rep->type == REDIS_REPLY_ERROR) {
        log_error("redis: %s: %s failed: %s", LOG_STR(c->peer),
                  (const char *)priv, LOG_ESC(rep->str, rep->len));
    }
}

static void
on_script_load(redisAsyncContext *ac, void *reply, void *priv)
{
    redisReply *rep = reply;
    struct redis_conn *c = ac->data;
    size_t i = (size_t)(uintptr_t)priv;

    lib_enter(c->log);
    c->replies++;
    if (rep == NULL) {
        return; /* disconnected */
    }
    if (rep->type != REDIS_REPLY_STRING || rep->len != 40 ||
        memcmp(rep->str, c->sha[i], 40) != 0) {
        log_error("redis: %s: SCRIPT LOAD answered %s: %s is not usable",
                  LOG_STR(c->peer),
                  rep->type == REDIS_REPLY_ERROR ? LOG_ESC(rep->str, rep->len)
                                                 : "an unexpected reply",
                  c->what);
        /* A Redis still loading its data (LOADING) connects but refuses
         * scripts: a connection kept as it is would never be ready. Drop
         * it (once its pending replies are in) and connect again. */
        if (ac == c->ac && c->loaded < c->nscripts &&
            !(ac->c.flags & REDIS_DISCONNECTING)) {
            redisAsyncDisconnect(ac);
        }
        return;
    }
    if (ac != c->ac || c->loaded >= c->nscripts) {
        return; /* an old connection, or a reload after NOSCRIPT */
    }
    if (++c->loaded < c->nscripts) {
        return;
    }
    if (c->ever_ready) {
        log_info("redis: %s usable again (%s)", LOG_STR(c->peer), c->what);
    }
    c->ever_ready = true;
    coldq_up(c->cold);
    c->failures = 0;
    c->backoff_ms = REDIS_BACKOFF_MIN_MS;
}

static void
on_appendfsync(redisAsyncContext *ac, void *reply, void *priv)
{
    redisReply *rep = reply;
    struct redis_conn *c = ac->data;

    lib_enter(c->log);
    (void)priv;
    c->replies++;
    if (rep == NULL) {
        return;
    }
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
        rep->element[1]->type == REDIS_REPLY_STRING) {
        if (strcmp(rep->element[1]->str, "always") != 0) {
            log_warn("redis: %s runs with appendfsync %s, not always: a "
                     "restart can lose what %s keeps there (a lost mark "
                     "or fence lets a stale write through)",
                     LOG_STR(c->peer),
                     LOG_ESC(rep->element[1]->str, rep->element[1]->len),
                     c->what);
        }
        return;
    }
    log_warn("redis: %s: could not check appendfsync (CONFIG GET answered "
             "%s): writes may be lost on a restart unless it is always",
             LOG_STR(c->peer),
             rep->type == REDIS_REPLY_ERROR ? LOG_ESC(rep->str, rep->len)
                                            : "no value");
}

static void
load_scripts(struct redis_conn *c)
{
    for (size_t i = 0; i < c->nscripts; i++) {
        redisAsyncCommand(c->ac, on_script_load, (void *)(uintptr_t)i,
                          "SCRIPT LOAD %s", c->scripts[i]);
    }
}

static void try_addr(struct redis_conn *c);

/* The address being tried failed (c->why says why): the next one while
 * the connect's deadline allows, else wait and start over. */
static void
addr_failed(struct redis_conn *c)
{
    size_t n = c->addrs.n;
    size_t i = (c->addr + c->tried) % n;
    bool more = c->tried + 1 < n && dial_now_ms() < c->deadline;

    dial_log_failure(c->who, &c->addrs, i, c->why, more ? (i + 1) % n : n);
    if (more) {
        c->tried++;
        try_addr(c);
        return;
    }
    if (c->failures == 0 || c->failures % 50 == 0) {
        log_error("redis: cannot connect to %s: %s; retrying", LOG_STR(c->peer),
                  c->why);
    }
    c->failures++;
    schedule_retry(c);
}

/* The address being tried ran out of its share of the deadline, or
 * on_connect saw it fail. */
static void
on_connect_timer(evutil_socket_t fd, short what, void *arg)
{
    struct redis_conn *c = arg;

    lib_enter(c->log);
    (void)fd;
    (void)what;
    if (c->ac != NULL) {
        redisAsyncContext *ac = c->ac;

        snprintf(c->why, sizeof(c->why), "Connection timed out");
        c->ac = NULL;
        c->dialing = false;
        c->loaded = 0;
        redisAsyncFree(ac); /* not connected: no on_disconnect */
    }
    addr_failed(c);
}

/* ---- the event loop's side of hiredis, with answers weighed ---------- */

/* Whether a command waits for the answer that starts now. */
static bool
asked(void *arg)
{
    const struct redis_conn *c = arg;

    return c->ac == NULL || c->ac->replies.head != NULL;
}

static void
ev_read(evutil_socket_t fd, short what, void *arg)
{
    struct redis_ev *e = arg;
    struct redis_conn *c = e->ac->data;
    const redisReader *r = e->ac->c.reader;

    (void)fd;
    (void)what;
    /* Nothing is read before the connect is made (dialing). */
    if (r->len - r->pos > REDIS_ANSWER_MAX && e->ac == c->ac && !c->dialing) {
        lib_enter(c->log);
        c->weigher.refused = "an answer larger than 64 MiB";
        drop(c);
        return;
    }
    redisAsyncHandleRead(e->ac);
}

static void
ev_write(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    redisAsyncHandleWrite(((struct redis_ev *)arg)->ac);
}

static void
ev_add_read(void *arg)
{
    event_add(((struct redis_ev *)arg)->rev, NULL);
}

static void
ev_del_read(void *arg)
{
    event_del(((struct redis_ev *)arg)->rev);
}

static void
ev_add_write(void *arg)
{
    event_add(((struct redis_ev *)arg)->wev, NULL);
}

static void
ev_del_write(void *arg)
{
    event_del(((struct redis_ev *)arg)->wev);
}

static void
ev_cleanup(void *arg)
{
    struct redis_ev *e = arg;

    event_free(e->rev);
    event_free(e->wev);
    free(e);
}

/* Put ac on c's loop, its answers weighed; false when out of memory. */
static bool
attach(struct redis_conn *c, redisAsyncContext *ac)
{
    redisReader *r = ac->c.reader;
    struct redis_ev *e = calloc(1, sizeof(*e));

    if (e != NULL) {
        e->ac = ac;
        e->rev = event_new(c->base, ac->c.fd, EV_READ, ev_read, e);
        e->wev = event_new(c->base, ac->c.fd, EV_WRITE, ev_write, e);
    }
    if (e == NULL || e->rev == NULL || e->wev == NULL) {
        if (e != NULL && e->rev != NULL) {
            event_free(e->rev);
        }
        if (e != NULL && e->wev != NULL) {
            event_free(e->wev);
        }
        free(e);
        return false;
    }
    redis_weigher_set(r, &c->weigher, asked, c);
    ac->ev.addRead = ev_add_read;
    ac->ev.delRead = ev_del_read;
    ac->ev.addWrite = ev_add_write;
    ac->ev.delWrite = ev_del_write;
    ac->ev.cleanup = ev_cleanup;
    ac->ev.data = e;
    event_add(e->rev, NULL);
    event_add(e->wev, NULL);
    return true;
}

/* Start connecting to the address being tried, with its share of the
 * deadline; AUTH, SELECT and the scripts are queued behind the connect. */
static void
try_addr(struct redis_conn *c)
{
    const struct dial_addr *a = &c->addrs.a[(c->addr + c->tried) % c->addrs.n];
    int ms = dial_share_ms(c->deadline - dial_now_ms(), c->addrs.n - c->tried);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    redisAsyncContext *ac = redisAsyncConnect(a->ip, c->port);

    if (ac == NULL) {
        log_error("redis: out of memory");
        schedule_retry(c);
        return;
    }
    if (ac->err != 0) {
        snprintf(c->why, sizeof(c->why), "%s", ac->errstr);
        redisAsyncFree(ac);
        addr_failed(c);
        return;
    }
    ac->data = c;
    if (!attach(c, ac)) {
        log_error("redis: cannot attach to the event loop");
        redisAsyncFree(ac);
        schedule_retry(c);
        return;
    }
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    c->ac = ac;
    c->loaded = 0;
    c->dialing = true;
    evtimer_add(c->connect_ev, &tv);
    /* Queued now, sent once connected, before any caller's command. */
    if (c->password != NULL) {
        if (c->user != NULL) {
            redisAsyncCommand(ac, on_setup, "AUTH", "AUTH %s %s", c->user,
                              c->password);
        } else {
            redisAsyncCommand(ac, on_setup, "AUTH", "AUTH %s", c->password);
        }
    }
    if (c->db != 0) {
        redisAsyncCommand(ac, on_setup, "SELECT", "SELECT %d", c->db);
    }
    load_scripts(c);
    redisAsyncCommand(ac, on_appendfsync, NULL, "CONFIG GET appendfsync");
}

/* Resolve the host now (a blocking getaddrinfo, as hiredis would) and
 * try its addresses in order, the one that connected last first, all
 * within timeout_ms. */
static void
connect_now(struct redis_conn *c)
{
    if (c->closing || c->ac != NULL) {
        return;
    }
    if (!dial_resolve(c->host, c->port, &c->addrs, c->why, sizeof(c->why))) {
        if (c->failures == 0 || c->failures % 50 == 0) {
            log_error("redis: %s; retrying", c->why);
        }
        c->failures++;
        schedule_retry(c);
        return;
    }
    if (c->addr >= c->addrs.n) {
        c->addr = 0;
    }
    c->tried = 0;
    c->deadline = dial_now_ms() + c->timeout_ms;
    try_addr(c);
}

/* ---- EVALSHA --------------------------------------------------------- */

static bool send_eval(struct redis_eval *e);

static void
on_eval(redisAsyncContext *ac, void *reply, void *priv)
{
    struct redis_eval *e = priv;
    struct redis_conn *c = e->c;
    redisReply *rep = reply;

    lib_enter(c->log);
    (void)ac;
    c->replies++;
    if (rep != NULL && rep->type == REDIS_REPLY_ERROR && !e->retried &&
        strncmp(rep->str, "NOSCRIPT", 8) == 0 && c->ac != NULL) {
        /* The script cache was flushed (or a failover): load it again
         * and send this call once more, behind the load. */
        log_warn("redis: %s lost the script: loading it again",
                 LOG_STR(c->peer));
        redisAsyncCommand(c->ac, on_script_load, (void *)(uintptr_t)e->script,
                          "SCRIPT LOAD %s", c->scripts[e->script]);
        e->retried = true;
        if (send_eval(e)) {
            if (e->resent != NULL) {
                e->resent(e->priv);
            }
            return;
        }
        rep = NULL;
    }
    e->cb(e->priv, rep);
    free(e);
}

static bool
send_eval(struct redis_eval *e)
{
    const char *argv[2 + 16];
    size_t lens[2 + 16];

    argv[0] = "EVALSHA";
    lens[0] = 7;
    argv[1] = e->c->sha[e->script];
    lens[1] = 40;
    for (int i = 0; i < e->argc; i++) {
        argv[2 + i] = e->argv[i];
        lens[2 + i] = e->lens[i];
    }
    return redisAsyncCommandArgv(e->c->ac, on_eval, e, 2 + e->argc, argv,
                                 lens) == REDIS_OK;
}

size_t
redis_argv_size(int argc, const size_t *lens)
{
    size_t total = (size_t)argc * (sizeof(char *) + sizeof(size_t));

    for (int i = 0; i < argc; i++) {
        if (lens[i] > SIZE_MAX / 4 - total) {
            return 0;
        }
        total += lens[i] + 1;
    }
    return total;
}

void
redis_argv_copy(char *buf, int argc, const char **argv, const size_t *lens,
                const char ***out_argv, size_t **out_lens)
{
    const char **v = (const char **)(void *)buf;
    size_t *l = (size_t *)(void *)(buf + (size_t)argc * sizeof(char *));
    char *p = buf + (size_t)argc * (sizeof(char *) + sizeof(size_t));

    for (int i = 0; i < argc; i++) {
        memcpy(p, argv[i], lens[i]);
        p[lens[i]] = '\0';
        v[i] = p;
        l[i] = lens[i];
        p += lens[i] + 1;
    }
    *out_argv = v;
    *out_lens = l;
}

bool
redis_conn_eval(struct redis_conn *c, size_t script, int argc,
                const char **argv, const size_t *lens, redis_conn_cb cb,
                redis_conn_resent_cb resent, void *priv)
{
    struct redis_eval *e;
    size_t size;

    if (c->closing || c->ac == NULL || script >= c->nscripts || argc < 1 ||
        argc > 16) {
        return false;
    }
    size = redis_argv_size(argc, lens);
    e = size > 0 ? malloc(sizeof(*e) + size) : NULL;
    if (e == NULL) {
        return false;
    }
    *e = (struct redis_eval){.c = c,
                             .cb = cb,
                             .resent = resent,
                             .priv = priv,
                             .script = script,
                             .argc = argc};
    redis_argv_copy(e->buf, argc, argv, lens, &e->argv, &e->lens);
    if (!send_eval(e)) {
        free(e);
        return false;
    }
    return true;
}

/* ---- the rest -------------------------------------------------------- */

struct coldq *
redis_conn_coldq(struct redis_conn *c)
{
    return c->cold;
}

bool
redis_conn_ready(const struct redis_conn *c)
{
    return !c->closing && c->ac != NULL && c->loaded == c->nscripts;
}

redisAsyncContext *
redis_conn_ac(const struct redis_conn *c)
{
    return c->closing ? NULL : c->ac;
}

void
redis_conn_replied(struct redis_conn *c)
{
    c->replies++;
}

const char *
redis_conn_peer(const struct redis_conn *c)
{
    return c->peer;
}

static void
conn_release(struct redis_conn *c)
{
    if (c->retry_ev != NULL) {
        event_free(c->retry_ev);
    }
    if (c->watch_ev != NULL) {
        event_free(c->watch_ev);
    }
    if (c->connect_ev != NULL) {
        event_free(c->connect_ev);
    }
    coldq_free(c->cold);
    free(c->host);
    free(c->user);
    free(c->password);
    free(c);
}

struct redis_conn *
redis_conn_new(struct event_base *base, const char *url, const char *what,
               const char *const *scripts, size_t nscripts, int timeout_ms,
               char *err, size_t errlen)
{
    struct redis_conn *c;
    struct timeval tv;

    if (nscripts > REDIS_MAX_SCRIPTS) {
        snprintf(err, errlen, "redis: too many scripts");
        return NULL;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        snprintf(err, errlen, "redis: out of memory");
        return NULL;
    }
    c->base = base;
    c->log = log_current();
    c->what = what;
    c->scripts = scripts;
    c->nscripts = nscripts;
    c->backoff_ms = REDIS_BACKOFF_MIN_MS;
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : 2000;
    if (!parse_url(c, url, err, errlen)) {
        conn_release(c);
        return NULL;
    }
    for (size_t i = 0; i < nscripts; i++) {
        unsigned char digest[SHA_DIGEST_LENGTH];

        SHA1((const unsigned char *)scripts[i], strlen(scripts[i]), digest);
        for (int k = 0; k < SHA_DIGEST_LENGTH; k++) {
            snprintf(c->sha[i] + 2 * k, 3, "%02x", digest[k]);
        }
    }
    c->retry_ev = evtimer_new(base, on_retry, c);
    c->watch_ev = event_new(base, -1, EV_PERSIST, on_watch, c);
    c->connect_ev = evtimer_new(base, on_connect_timer, c);
    c->cold = coldq_new(base, c->timeout_ms);
    snprintf(c->who, sizeof(c->who), "redis %s", what);
    if (c->retry_ev == NULL || c->watch_ev == NULL || c->connect_ev == NULL ||
        c->cold == NULL) {
        snprintf(err, errlen, "redis: cannot set up events");
        conn_release(c);
        return NULL;
    }
    tv.tv_sec = c->timeout_ms / 1000;
    tv.tv_usec = (c->timeout_ms % 1000) * 1000;
    event_add(c->watch_ev, &tv);
    connect_now(c);
    return c;
}

void
redis_conn_free(struct redis_conn *c)
{
    if (c == NULL) {
        return;
    }
    c->closing = true;
    coldq_free(c->cold); /* answers the calls still waiting */
    c->cold = NULL;
    evtimer_del(c->retry_ev);
    event_del(c->watch_ev);
    evtimer_del(c->connect_ev);
    if (c->ac != NULL) {
        redisAsyncContext *ac = c->ac;

        /* Answers every command in flight with a NULL reply. */
        c->ac = NULL;
        redisAsyncFree(ac);
    }
    conn_release(c);
}
