/* store_redis.c: marks in Redis, one script call per raise through
 * hiredis's async API on the proxy's libevent loop; optional WAIT for
 * replicas; reconnect with backoff. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <openssl/sha.h>

#include "../../conf/cfg.h"
#include "../log.h"
#include "store.h"
#include "store_defer.h"

/*
 * Keys. The mark of resource R is the string key "fence:{R}" holding the
 * decimal token (no leading zeros): the hash tag keeps a resource's keys
 * in one cluster slot, and the lock service's fence counter (INCR on the
 * same key) stays compatible, since INCR keeps decimal strings.
 *
 * The script compares decimal strings by length, then bytes: Lua numbers
 * are doubles and would round tokens above 2^53. A value that is not a
 * decimal token is an error reply, never overwritten.
 *
 * Durability. Redis acknowledges a write before any replica has it, and
 * with appendfsync other than always, before it is on disk: a failover or
 * a restart can lose an accepted mark, and a mark that goes down lets a
 * stale write through. wait_replicas > 0 sends WAIT after the scripts of
 * a loop turn and accepts only when that many replicas have them;
 * appendfsync is checked at each connect and a warning logged.
 */

#define REDIS_SCRIPT                                                        \
    "local cur = redis.call('GET', KEYS[1])\n"                              \
    "local tok = ARGV[1]\n"                                                 \
    "if cur then\n"                                                         \
    "  if #cur > 19 or not (cur == '0' or string.match(cur, "               \
    "'^[1-9]%d*$')) then\n"                                                 \
    "    return redis.error_reply('tidemark: the value of ' .. KEYS[1] .. " \
    "' is not a mark')\n"                                                   \
    "  end\n"                                                               \
    "  if #cur > #tok or (#cur == #tok and cur > tok) then\n"               \
    "    return {0, cur}\n"                                                 \
    "  end\n"                                                               \
    "  if cur == tok then\n"                                                \
    "    return {1, cur}\n"                                                 \
    "  end\n"                                                               \
    "end\n"                                                                 \
    "redis.call('SET', KEYS[1], tok)\n"                                     \
    "return {1, tok}\n"

#define REDIS_KEY_PREFIX "fence:{"
#define REDIS_KEY_PREFIX_LEN 7
#define REDIS_BACKOFF_MIN_MS 50
#define REDIS_BACKOFF_MAX_MS 2000
/* Bytes of a resource name quoted in a log line. */
#define REDIS_LOG_NAME_MAX 200

struct redis_wait;

struct redis_req {
    struct redis_store *s;
    store_cb cb;
    void *arg;
    int64_t token;          /* raise: the token; get: 0 */
    bool retried;           /* NOSCRIPT: loaded and sent again once */
    bool no_wait;           /* could not join a WAIT: answer an error */
    struct redis_wait *wait; /* the WAIT that answers it, or NULL */
    enum store_result res;  /* with wait: the script's answer so far */
    int64_t mark;
    size_t keylen;
    char key[];             /* "fence:{" resource "}" */
};

/* One WAIT: the raises sent since the previous one. */
struct redis_wait {
    struct redis_req **reqs;
    size_t n;
    size_t cap;
};

struct redis_store {
    struct event_base *base;
    char *host;
    int port;
    int db;
    char *user;             /* NULL: AUTH with the password alone */
    char *password;         /* NULL: no AUTH */
    int wait_replicas;
    int wait_ms;

    redisAsyncContext *ac;  /* NULL while down */
    bool script_ok;         /* this connection loaded the script */
    bool closing;
    bool ever_ready;
    int backoff_ms;
    unsigned failures;      /* connects failed in a row */
    struct event *retry_ev;
    struct event *watch_ev; /* every timeout_ms: is Redis answering? */
    uint64_t replies;       /* replies received, ever */
    uint64_t watched;       /* replies at the previous watch */
    bool stalled;           /* commands were waiting at that watch */
    int timeout_ms;
    struct event *kick_ev;  /* end of turn: send the open WAIT */
    struct redis_wait *open_wait;
    struct store_defer *defer;
    char sha[41];
};

static struct redis_store *
to_redis(struct store *s)
{
    return (struct redis_store *)s;
}

static int
log_name_len(size_t keylen)
{
    size_t n = keylen - REDIS_KEY_PREFIX_LEN - 1;

    return n > REDIS_LOG_NAME_MAX ? REDIS_LOG_NAME_MAX : (int)n;
}

#define REQ_NAME(r) log_name_len((r)->keylen), (r)->key + REDIS_KEY_PREFIX_LEN

static void connect_now(struct redis_store *s);

/* Parse redis://[[user]:password@]host:port[/db] (the config loader has
 * checked its shape). false with a message in err. */
static bool
parse_url(struct redis_store *s, const char *url, char *err, size_t errlen)
{
    const char *a = url + 8;
    const char *end = a + strcspn(a, "/");
    const char *at = NULL;
    const char *hp, *colon;

    if (strncmp(url, "redis://", 8) != 0) {
        snprintf(err, errlen, "redis: [store] url must be redis://...");
        return false;
    }
    for (const char *p = a; p < end; p++) {
        if (*p == '@') {
            at = p;
        }
    }
    hp = a;
    if (at != NULL) {
        const char *c = memchr(a, ':', (size_t)(at - a));

        if (c == NULL) {
            s->password = strndup(a, (size_t)(at - a));
        } else {
            if (c > a) {
                s->user = strndup(a, (size_t)(c - a));
            }
            s->password = strndup(c + 1, (size_t)(at - c - 1));
        }
        hp = at + 1;
    }
    if (*hp == '[') {
        const char *rb = memchr(hp, ']', (size_t)(end - hp));

        if (rb == NULL || rb[1] != ':') {
            snprintf(err, errlen, "redis: [store] url: bad host");
            return false;
        }
        s->host = strndup(hp + 1, (size_t)(rb - hp - 1));
        colon = rb + 1;
    } else {
        colon = memchr(hp, ':', (size_t)(end - hp));
        if (colon == NULL) {
            snprintf(err, errlen, "redis: [store] url needs host:port");
            return false;
        }
        s->host = strndup(hp, (size_t)(colon - hp));
    }
    s->port = atoi(colon + 1);
    s->db = *end == '/' ? atoi(end + 1) : 0;
    if (s->host == NULL) {
        snprintf(err, errlen, "redis: out of memory");
        return false;
    }
    if (s->port <= 0 || s->port > 65535) {
        snprintf(err, errlen, "redis: [store] url: bad port");
        return false;
    }
    return true;
}

/* A decimal mark 0..INT64_MAX from a reply string; false otherwise. */
static bool
parse_mark(const char *p, size_t len, int64_t *out)
{
    uint64_t v = 0;

    if (len == 0 || len > 19) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return false;
        }
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    if (v > (uint64_t)INT64_MAX) {
        return false;
    }
    *out = (int64_t)v;
    return true;
}

static void
req_answer(struct redis_req *r, enum store_result res, int64_t mark)
{
    r->cb(r->arg, res, mark);
    free(r);
}

/* ---- connection ------------------------------------------------------ */

static void
schedule_retry(struct redis_store *s)
{
    struct timeval tv;

    if (s->closing) {
        return;
    }
    tv.tv_sec = s->backoff_ms / 1000;
    tv.tv_usec = (s->backoff_ms % 1000) * 1000;
    evtimer_add(s->retry_ev, &tv);
    s->backoff_ms *= 2;
    if (s->backoff_ms > REDIS_BACKOFF_MAX_MS) {
        s->backoff_ms = REDIS_BACKOFF_MAX_MS;
    }
}

/* Every timeout_ms: when commands have been waiting since the previous
 * watch and no reply came in between, Redis is stuck (stopped, or the
 * network drops everything): drop the connection, which answers every
 * waiting command STORE_ERROR, and reconnect. */
static void schedule_retry(struct redis_store *s);

static void
on_watch(evutil_socket_t fd, short what, void *arg)
{
    struct redis_store *s = arg;
    bool waiting = s->ac != NULL && s->ac->replies.head != NULL;

    (void)fd;
    (void)what;
    if (waiting && s->stalled && s->replies == s->watched) {
        redisAsyncContext *ac = s->ac;

        log_error("redis: %s:%d answered nothing in %d ms: dropping the "
                  "connection", s->host, s->port, s->timeout_ms);
        s->stalled = false;
        /* Runs the callbacks (NULL replies), and on_disconnect only if
         * the connection had been made: plan the reconnect here. */
        s->ac = NULL;
        s->script_ok = false;
        redisAsyncFree(ac);
        schedule_retry(s);
        return;
    }
    s->stalled = waiting;
    s->watched = s->replies;
}

static void
on_retry(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    connect_now(arg);
}

static void
on_connect(const redisAsyncContext *ac, int status)
{
    struct redis_store *s = ac->data;

    if (status != REDIS_OK) {
        /* hiredis frees ac after this returns; queued commands get a
         * NULL reply first. */
        if (s->failures == 0 || s->failures % 50 == 0) {
            log_error("redis: cannot connect to %s:%d: %s; retrying",
                      s->host, s->port, ac->errstr);
        }
        s->failures++;
        s->ac = NULL;
        s->script_ok = false;
        schedule_retry(s);
        return;
    }
    log_info("redis: connected to %s:%d", s->host, s->port);
}

static void
on_disconnect(const redisAsyncContext *ac, int status)
{
    struct redis_store *s = ac->data;

    s->ac = NULL;
    s->script_ok = false;
    if (s->closing) {
        return;
    }
    log_error("redis: connection to %s:%d lost: %s; reconnecting", s->host,
              s->port, status == REDIS_OK ? "closed" : ac->errstr);
    s->failures = 1;
    schedule_retry(s);
}

/* Reply to AUTH or SELECT: only errors matter (later commands fail too
 * and are answered STORE_ERROR). */
static void
on_setup(redisAsyncContext *ac, void *reply, void *priv)
{
    redisReply *rep = reply;
    struct redis_store *s = ac->data;

    s->replies++;
    if (rep != NULL && rep->type == REDIS_REPLY_ERROR) {
        log_error("redis: %s:%d: %s failed: %s", s->host, s->port,
                  (const char *)priv, rep->str);
    }
}

static void
on_script_load(redisAsyncContext *ac, void *reply, void *priv)
{
    redisReply *rep = reply;
    struct redis_store *s = ac->data;

    (void)priv;
    s->replies++;
    if (rep == NULL) {
        return;  /* disconnected */
    }
    if (rep->type != REDIS_REPLY_STRING || rep->len != 40 ||
        memcmp(rep->str, s->sha, 40) != 0) {
        log_error("redis: %s:%d: SCRIPT LOAD answered %s: the store is not "
                  "usable", s->host, s->port,
                  rep->type == REDIS_REPLY_ERROR ? rep->str
                                                 : "an unexpected reply");
        return;
    }
    if (ac == s->ac) {
        if (!s->script_ok && s->ever_ready) {
            log_info("redis: %s:%d usable again", s->host, s->port);
        }
        s->script_ok = true;
        s->ever_ready = true;
        s->failures = 0;
        s->backoff_ms = REDIS_BACKOFF_MIN_MS;
    }
}

static void
on_appendfsync(redisAsyncContext *ac, void *reply, void *priv)
{
    redisReply *rep = reply;
    struct redis_store *s = ac->data;

    (void)priv;
    s->replies++;
    if (rep == NULL) {
        return;
    }
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
        rep->element[1]->type == REDIS_REPLY_STRING) {
        if (strcmp(rep->element[1]->str, "always") != 0) {
            log_warn("redis: %s:%d runs with appendfsync %s, not always: "
                     "a restart can lose accepted marks (and a lost mark "
                     "lets a stale write through)",
                     s->host, s->port, rep->element[1]->str);
        }
        return;
    }
    log_warn("redis: %s:%d: could not check appendfsync (CONFIG GET "
             "answered %s): accepted marks may be lost on a restart unless "
             "it is always",
             s->host, s->port,
             rep->type == REDIS_REPLY_ERROR ? rep->str : "no value");
}

static void
connect_now(struct redis_store *s)
{
    redisAsyncContext *ac;

    if (s->closing || s->ac != NULL) {
        return;
    }
    ac = redisAsyncConnect(s->host, s->port);
    if (ac == NULL) {
        log_error("redis: out of memory");
        schedule_retry(s);
        return;
    }
    if (ac->err != 0) {
        if (s->failures == 0 || s->failures % 50 == 0) {
            log_error("redis: cannot connect to %s:%d: %s; retrying",
                      s->host, s->port, ac->errstr);
        }
        s->failures++;
        redisAsyncFree(ac);
        schedule_retry(s);
        return;
    }
    ac->data = s;
    if (redisLibeventAttach(ac, s->base) != REDIS_OK) {
        log_error("redis: cannot attach to the event loop");
        redisAsyncFree(ac);
        schedule_retry(s);
        return;
    }
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    s->ac = ac;
    s->script_ok = false;
    /* Queued now, sent once connected, before any raise. */
    if (s->password != NULL) {
        if (s->user != NULL) {
            redisAsyncCommand(ac, on_setup, "AUTH", "AUTH %s %s", s->user,
                              s->password);
        } else {
            redisAsyncCommand(ac, on_setup, "AUTH", "AUTH %s", s->password);
        }
    }
    if (s->db != 0) {
        redisAsyncCommand(ac, on_setup, "SELECT", "SELECT %d", s->db);
    }
    redisAsyncCommand(ac, on_script_load, NULL, "SCRIPT LOAD %s",
                      REDIS_SCRIPT);
    redisAsyncCommand(ac, on_appendfsync, NULL, "CONFIG GET appendfsync");
}

/* ---- raise ----------------------------------------------------------- */

/* The script's reply: {1, mark} accepted, {0, mark} stale. */
static enum store_result
script_result(struct redis_req *r, redisReply *rep, int64_t *mark)
{
    redisReply *m;

    if (rep->type == REDIS_REPLY_ERROR) {
        log_error("redis: raise of %.*s to %" PRId64 " failed: %s",
                  REQ_NAME(r), r->token, rep->str);
        return STORE_ERROR;
    }
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
        rep->element[0]->type != REDIS_REPLY_INTEGER ||
        rep->element[1]->type != REDIS_REPLY_STRING ||
        !parse_mark(rep->element[1]->str, rep->element[1]->len, mark)) {
        log_error("redis: raise of %.*s: the script answered something "
                  "that is not {accepted, mark}: refused",
                  REQ_NAME(r));
        return STORE_ERROR;
    }
    m = rep->element[0];
    if (m->integer == 1 && *mark == r->token) {
        return STORE_ACCEPTED;
    }
    if (m->integer == 0 && *mark > r->token) {
        return STORE_STALE;
    }
    log_error("redis: raise of %.*s to %" PRId64 ": the script answered "
              "%lld with mark %" PRId64 ", which does not fit: refused",
              REQ_NAME(r), r->token, m->integer, *mark);
    return STORE_ERROR;
}

static bool send_script(struct redis_store *s, struct redis_req *r);
static void join_wait(struct redis_store *s, struct redis_req *r);

static void
on_script(redisAsyncContext *ac, void *reply, void *priv)
{
    struct redis_req *r = priv;
    struct redis_store *s = r->s;
    redisReply *rep = reply;
    enum store_result res;
    int64_t mark = 0;

    (void)ac;
    s->replies++;
    if (rep == NULL) {
        res = STORE_ERROR;  /* connection lost or store closing */
    } else if (rep->type == REDIS_REPLY_ERROR && !r->retried &&
               strncmp(rep->str, "NOSCRIPT", 8) == 0 && s->ac != NULL) {
        /* The script cache was flushed (or a failover): load it again
         * and send this raise once more, behind the load. */
        log_warn("redis: %s:%d lost the script: loading it again", s->host,
                 s->port);
        redisAsyncCommand(s->ac, on_script_load, NULL, "SCRIPT LOAD %s",
                          REDIS_SCRIPT);
        r->retried = true;
        if (send_script(s, r)) {
            if (r->wait != NULL) {
                join_wait(s, r);
            }
            return;
        }
        res = STORE_ERROR;
    } else {
        res = script_result(r, rep, &mark);
    }
    if (r->wait != NULL) {
        r->res = res;
        r->mark = mark;
        return;  /* the WAIT's reply answers */
    }
    if (r->no_wait && res != STORE_ERROR) {
        log_error("redis: out of memory: raise of %.*s not waited for: "
                  "refused", REQ_NAME(r));
        res = STORE_ERROR;
    }
    req_answer(r, res, mark);
}

static bool
send_script(struct redis_store *s, struct redis_req *r)
{
    char tok[24];
    const char *argv[5];
    size_t lens[5];

    snprintf(tok, sizeof(tok), "%" PRId64, r->token);
    argv[0] = "EVALSHA";
    argv[1] = s->sha;
    argv[2] = "1";
    argv[3] = r->key;
    argv[4] = tok;
    for (int i = 0; i < 5; i++) {
        lens[i] = strlen(argv[i]);
    }
    lens[3] = r->keylen;
    return redisAsyncCommandArgv(s->ac, on_script, r, 5, argv, lens) ==
           REDIS_OK;
}

static void
on_wait(redisAsyncContext *ac, void *reply, void *priv)
{
    struct redis_wait *w = priv;
    redisReply *rep = reply;
    bool ok = false;

    (void)ac;
    if (w->n > 0) {
        struct redis_store *s = w->reqs[0]->s;

        s->replies++;
        if (rep != NULL && rep->type == REDIS_REPLY_INTEGER &&
            rep->integer >= s->wait_replicas) {
            ok = true;
        } else if (rep != NULL) {
            log_error("redis: %s:%d: WAIT: %lld of %d replicas have %zu "
                      "raises within %d ms: refused",
                      s->host, s->port,
                      rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1LL,
                      s->wait_replicas, w->n, s->wait_ms);
        }
    }
    for (size_t i = 0; i < w->n; i++) {
        struct redis_req *r = w->reqs[i];

        if (r->wait != w) {
            continue;  /* sent again after NOSCRIPT: a later WAIT */
        }
        if (ok) {
            req_answer(r, r->res, r->mark);
        } else {
            req_answer(r, STORE_ERROR, 0);
        }
    }
    free(w->reqs);
    free(w);
}

/* Put r in the WAIT sent at the end of this loop turn. */
static void
join_wait(struct redis_store *s, struct redis_req *r)
{
    struct redis_wait *w = s->open_wait;

    if (w == NULL) {
        w = calloc(1, sizeof(*w));
        if (w == NULL) {
            r->wait = NULL;
            r->no_wait = true;
            return;
        }
        s->open_wait = w;
        event_active(s->kick_ev, 0, 1);
    }
    if (w->n == w->cap) {
        size_t cap = w->cap == 0 ? 16 : w->cap * 2;
        struct redis_req **nr = realloc(w->reqs, cap * sizeof(*nr));

        if (nr == NULL) {
            r->wait = NULL;
            r->no_wait = true;
            return;
        }
        w->reqs = nr;
        w->cap = cap;
    }
    w->reqs[w->n++] = r;
    r->wait = w;
    r->res = STORE_ERROR;
    r->mark = 0;
}

static void
on_kick(evutil_socket_t fd, short what, void *arg)
{
    struct redis_store *s = arg;
    struct redis_wait *w = s->open_wait;

    (void)fd;
    (void)what;
    s->open_wait = NULL;
    if (w == NULL) {
        return;
    }
    if (s->ac != NULL &&
        redisAsyncCommand(s->ac, on_wait, w, "WAIT %d %d", s->wait_replicas,
                          s->wait_ms) == REDIS_OK) {
        return;
    }
    /* Down: the scripts were answered NULL already (or will be); answer
     * the raises here. */
    on_wait(NULL, NULL, w);
}

static struct redis_req *
req_new(struct redis_store *s, const char *res, size_t len, int64_t token,
        store_cb cb, void *arg)
{
    struct redis_req *r;
    size_t keylen;

    if (len > SIZE_MAX - sizeof(*r) - REDIS_KEY_PREFIX_LEN - 2) {
        return NULL;
    }
    keylen = REDIS_KEY_PREFIX_LEN + len + 1;
    r = malloc(sizeof(*r) + keylen + 1);
    if (r == NULL) {
        return NULL;
    }
    r->s = s;
    r->cb = cb;
    r->arg = arg;
    r->token = token;
    r->retried = false;
    r->no_wait = false;
    r->wait = NULL;
    r->res = STORE_ERROR;
    r->mark = 0;
    r->keylen = keylen;
    memcpy(r->key, REDIS_KEY_PREFIX, REDIS_KEY_PREFIX_LEN);
    if (len > 0) {
        memcpy(r->key + REDIS_KEY_PREFIX_LEN, res, len);
    }
    r->key[keylen - 1] = '}';
    r->key[keylen] = '\0';
    return r;
}

static void
redis_raise(struct store *st, const char *res, size_t len, int64_t token,
            store_cb cb, void *arg)
{
    struct redis_store *s = to_redis(st);
    struct redis_req *r;

    if (s->closing || s->ac == NULL) {
        store_defer(s->defer, cb, arg, STORE_ERROR, 0);
        return;
    }
    r = req_new(s, res, len, token, cb, arg);
    if (r == NULL) {
        store_defer(s->defer, cb, arg, STORE_ERROR, 0);
        return;
    }
    if (!send_script(s, r)) {
        free(r);
        store_defer(s->defer, cb, arg, STORE_ERROR, 0);
        return;
    }
    if (s->wait_replicas > 0) {
        join_wait(s, r);
    }
}

/* ---- get ------------------------------------------------------------- */

static void
on_get(redisAsyncContext *ac, void *reply, void *priv)
{
    struct redis_req *r = priv;
    redisReply *rep = reply;
    int64_t mark = 0;

    (void)ac;
    r->s->replies++;
    if (rep == NULL) {
        req_answer(r, STORE_ERROR, 0);
        return;
    }
    if (rep->type == REDIS_REPLY_NIL) {
        req_answer(r, STORE_ACCEPTED, 0);
        return;
    }
    if (rep->type == REDIS_REPLY_STRING &&
        parse_mark(rep->str, rep->len, &mark)) {
        req_answer(r, STORE_ACCEPTED, mark);
        return;
    }
    log_error("redis: the value of %.*s is not a mark (%s)", REQ_NAME(r),
              rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
    req_answer(r, STORE_ERROR, 0);
}

static void
redis_get(struct store *st, const char *res, size_t len, store_cb cb,
          void *arg)
{
    struct redis_store *s = to_redis(st);
    struct redis_req *r;

    if (s->closing || s->ac == NULL) {
        store_defer(s->defer, cb, arg, STORE_ERROR, 0);
        return;
    }
    r = req_new(s, res, len, 0, cb, arg);
    if (r == NULL ||
        redisAsyncCommand(s->ac, on_get, r, "GET %b", r->key, r->keylen) !=
            REDIS_OK) {
        free(r);
        store_defer(s->defer, cb, arg, STORE_ERROR, 0);
    }
}

static bool
redis_ready(struct store *st)
{
    struct redis_store *s = to_redis(st);

    return !s->closing && s->ac != NULL && s->script_ok;
}

/* ---- life cycle ------------------------------------------------------ */

static void
redis_free(struct redis_store *s)
{
    if (s->retry_ev != NULL) {
        event_free(s->retry_ev);
    }
    if (s->watch_ev != NULL) {
        event_free(s->watch_ev);
    }
    if (s->kick_ev != NULL) {
        event_free(s->kick_ev);
    }
    store_defer_free(s->defer);
    free(s->host);
    free(s->user);
    free(s->password);
    free(s);
}

static struct store *
redis_open(struct event_base *base, const struct cfg_store *cfg, char *err,
           size_t errlen)
{
    struct redis_store *s;
    unsigned char digest[SHA_DIGEST_LENGTH];

    if (cfg->url == NULL || cfg->url[0] == '\0') {
        snprintf(err, errlen, "redis: [store] url is not set");
        return NULL;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "redis: out of memory");
        return NULL;
    }
    s->base = base;
    s->wait_replicas = cfg->wait_replicas;
    /* WAIT answers before the core's own timeout, so the log says why. */
    s->wait_ms = cfg->timeout_ms > 4 ? cfg->timeout_ms * 3 / 4 : 1;
    s->backoff_ms = REDIS_BACKOFF_MIN_MS;
    if (!parse_url(s, cfg->url, err, errlen)) {
        redis_free(s);
        return NULL;
    }
    SHA1((const unsigned char *)REDIS_SCRIPT, strlen(REDIS_SCRIPT), digest);
    for (int i = 0; i < SHA_DIGEST_LENGTH; i++) {
        snprintf(s->sha + 2 * i, 3, "%02x", digest[i]);
    }
    s->retry_ev = evtimer_new(base, on_retry, s);
    s->watch_ev = event_new(base, -1, EV_PERSIST, on_watch, s);
    s->kick_ev = event_new(base, -1, 0, on_kick, s);
    s->defer = store_defer_new(base);
    s->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 2000;
    if (s->retry_ev == NULL || s->watch_ev == NULL || s->kick_ev == NULL ||
        s->defer == NULL) {
        snprintf(err, errlen, "redis: cannot set up events");
        redis_free(s);
        return NULL;
    }
    {
        struct timeval tv = {s->timeout_ms / 1000,
                             (s->timeout_ms % 1000) * 1000};

        event_add(s->watch_ev, &tv);
    }
    if (s->wait_replicas > 0) {
        log_info("redis: a raise is accepted once %d replicas have it",
                 s->wait_replicas);
    }
    /* Unreachable now is an outage, not a configuration error: tidemark
     * starts not ready and connects when Redis is there. */
    connect_now(s);
    return (struct store *)s;
}

static void
redis_close(struct store *st)
{
    struct redis_store *s = to_redis(st);

    if (s == NULL) {
        return;
    }
    s->closing = true;
    evtimer_del(s->retry_ev);
    event_del(s->watch_ev);
    if (s->ac != NULL) {
        redisAsyncContext *ac = s->ac;

        /* Answers every command in flight with a NULL reply. */
        s->ac = NULL;
        redisAsyncFree(ac);
    }
    if (s->open_wait != NULL) {
        struct redis_wait *w = s->open_wait;

        s->open_wait = NULL;
        on_wait(NULL, NULL, w);
    }
    redis_free(s);
}

const struct store_ops store_redis_ops = {
    .name = "redis",
    .shared = true,
    .open = redis_open,
    .raise = redis_raise,
    .get = redis_get,
    .ready = redis_ready,
    .close = redis_close,
};
