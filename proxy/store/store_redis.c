/* store_redis.c: marks in Redis, one script call per raise on the
 * shared connection (redis_conn.c: hiredis async on the proxy's loop,
 * reconnect with backoff), or across a Redis Cluster (redis_cluster.c);
 * optional WAIT for replicas (one server). */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "../../conf/cfg.h"
#include "../clients/coldq.h"
#include "../clients/defer.h"
#include "../clients/redis_conn.h"
#include "../clients/redis_reply.h"
#include "../log.h"
#include "../clients/redis_cluster.h"
#include "store.h"

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

#define REDIS_SCRIPT                                                           \
    "local cur = redis.call('GET', KEYS[1])\n"                                 \
    "local tok = ARGV[1]\n"                                                    \
    "if cur then\n"                                                            \
    "  if #cur > 19 or not (cur == '0' or string.match(cur, "                  \
    "'^[1-9]%d*$')) then\n"                                                    \
    "    return redis.error_reply('tidemark: the value of ' .. KEYS[1] .. "    \
    "' is not a mark')\n"                                                      \
    "  end\n"                                                                  \
    "  if #cur > #tok or (#cur == #tok and cur > tok) then\n"                  \
    "    return {0, cur}\n"                                                    \
    "  end\n"                                                                  \
    "  if cur == tok then\n"                                                   \
    "    return {1, cur}\n"                                                    \
    "  end\n"                                                                  \
    "end\n"                                                                    \
    "redis.call('SET', KEYS[1], tok)\n"                                        \
    "return {1, tok}\n"

#define REDIS_KEY_PREFIX "fence:{"
#define REDIS_KEY_PREFIX_LEN 7

struct redis_wait;

struct redis_req {
    struct redis_store *s;
    store_cb cb;
    void *arg;
    int64_t token;           /* raise: the token; get: 0 */
    bool retried;            /* NOSCRIPT: loaded and sent again once */
    bool no_wait;            /* could not join a WAIT: answer an error */
    struct redis_wait *wait; /* the WAIT that answers it, or NULL */
    enum store_result res;   /* with wait: the script's answer so far */
    int64_t mark;
    size_t keylen;
    char key[]; /* "fence:{" resource "}" */
};

/* One WAIT: the raises sent since the previous one. */
struct redis_wait {
    struct redis_store *s;
    struct redis_req **reqs;
    size_t n;
    size_t cap;
};

struct redis_store {
    struct event_base *base;
    const struct tm_log *log; /* the proxy's, entered by callbacks */
    struct redis_cluster *conn;
    int wait_replicas;
    int wait_ms;
    bool closing;
    struct event *kick_ev; /* end of turn: send the open WAIT */
    struct redis_wait *open_wait;
    struct defer *defer;
};

static struct redis_store *
to_redis(struct store *s)
{
    return (struct redis_store *)s;
}

/* r's name, escaped for a "%s" of a log line: its key without the
 * prefix and the '}'. */
#define REQ_NAME(r)                                                            \
    LOG_ESC((r)->key + REDIS_KEY_PREFIX_LEN,                                   \
            (r)->keylen - REDIS_KEY_PREFIX_LEN - 1)

static void
req_answer(struct redis_req *r, enum store_result res, int64_t mark)
{
    r->cb(r->arg, res, mark);
    free(r);
}

/* ---- raise ----------------------------------------------------------- */

/* The script's reply: {1, mark} accepted, {0, mark} stale. */
static enum store_result
script_result(struct redis_req *r, redisReply *rep, int64_t *mark)
{
    long long flag = 0;

    if (rep->type == REDIS_REPLY_ERROR) {
        log_error("redis: raise of %s to %" PRId64 " failed: %s", REQ_NAME(r),
                  r->token, LOG_ESC(rep->str, rep->len));
        return STORE_ERROR;
    }
    if (!redis_reply_pair(rep, &flag, mark)) {
        log_error("redis: raise of %s: the script answered something "
                  "that is not {accepted, mark}: refused",
                  REQ_NAME(r));
        return STORE_ERROR;
    }
    if (flag == 1 && *mark == r->token) {
        return STORE_ACCEPTED;
    }
    if (flag == 0 && *mark > r->token) {
        return STORE_STALE;
    }
    log_error("redis: raise of %s to %" PRId64 ": the script answered "
              "%lld with mark %" PRId64 ", which does not fit: refused",
              REQ_NAME(r), r->token, flag, *mark);
    return STORE_ERROR;
}

static void join_wait(struct redis_store *s, struct redis_req *r);

/* NOSCRIPT made redis_conn send r again: its reply now comes after the
 * WAIT it had joined, so it joins the next one. */
static void
on_resent(void *priv)
{
    struct redis_req *r = priv;

    if (r->wait != NULL) {
        join_wait(r->s, r);
    }
}

static void
on_script(void *priv, redisReply *rep)
{
    struct redis_req *r = priv;
    enum store_result res;
    int64_t mark = 0;

    if (rep == NULL) {
        res = STORE_ERROR; /* connection lost or store closing */
    } else {
        res = script_result(r, rep, &mark);
    }
    if (r->wait != NULL) {
        r->res = res;
        r->mark = mark;
        return; /* the WAIT's reply answers */
    }
    if (r->no_wait && res != STORE_ERROR) {
        log_error("redis: out of memory: raise of %s not waited for: "
                  "refused",
                  REQ_NAME(r));
        res = STORE_ERROR;
    }
    req_answer(r, res, mark);
}

static bool
send_script(struct redis_store *s, struct redis_req *r)
{
    char tok[24];
    const char *argv[3];
    size_t lens[3];

    snprintf(tok, sizeof(tok), "%" PRId64, r->token);
    argv[0] = "1";
    lens[0] = 1;
    argv[1] = r->key;
    lens[1] = r->keylen;
    argv[2] = tok;
    lens[2] = strlen(tok);
    return redis_cluster_eval(s->conn, 0, 3, argv, lens, on_script, on_resent,
                              r);
}

static void
on_wait(redisAsyncContext *ac, void *reply, void *priv)
{
    struct redis_wait *w = priv;
    redisReply *rep = reply;
    bool ok = false;

    lib_enter(w->s->log);
    (void)ac;
    if (w->n > 0) {
        struct redis_store *s = w->reqs[0]->s;

        if (rep != NULL) {
            redis_conn_replied(redis_cluster_single(s->conn));
        }
        if (rep != NULL && rep->type == REDIS_REPLY_INTEGER &&
            rep->integer >= s->wait_replicas) {
            ok = true;
        } else if (rep != NULL) {
            log_error("redis: %s: WAIT: %lld of %d replicas have %zu "
                      "raises within %d ms: refused",
                      LOG_STR(redis_cluster_peer(s->conn)),
                      rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1LL,
                      s->wait_replicas, w->n, s->wait_ms);
        }
    }
    for (size_t i = 0; i < w->n; i++) {
        struct redis_req *r = w->reqs[i];

        if (r->wait != w) {
            continue; /* sent again after NOSCRIPT: a later WAIT */
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
        w->s = s;
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

    lib_enter(s->log);
    (void)fd;
    (void)what;
    s->open_wait = NULL;
    if (w == NULL) {
        return;
    }
    /* WAIT needs the one server (a cluster refuses wait_replicas). */
    if (redis_cluster_single(s->conn) != NULL &&
        redis_conn_ac(redis_cluster_single(s->conn)) != NULL &&
        redisAsyncCommand(redis_conn_ac(redis_cluster_single(s->conn)), on_wait,
                          w, "WAIT %d %d", s->wait_replicas,
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

extern const struct store_ops store_redis_ops;

/* Before the first connection is up (scripts loaded), a call waits for
 * it (coldq.h): true when parked. */
static bool
cold_park(struct redis_store *s, bool is_get, const char *res, size_t len,
          int64_t token, store_cb cb, void *arg)
{
    return !s->closing && !redis_cluster_ready(s->conn) &&
           store_park(redis_cluster_coldq(s->conn), (struct store *)s,
                      &store_redis_ops, is_get, res, len, token, cb, arg);
}

static void
redis_raise(struct store *st, const char *res, size_t len, int64_t token,
            store_cb cb, void *arg)
{
    struct redis_store *s = to_redis(st);
    struct redis_req *r;

    if (cold_park(s, false, res, len, token, cb, arg)) {
        return;
    }
    if (s->closing) {
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
on_get(void *priv, redisReply *rep)
{
    struct redis_req *r = priv;
    int64_t mark = 0;

    if (rep == NULL) {
        req_answer(r, STORE_ERROR, 0);
        return;
    }
    if (rep->type == REDIS_REPLY_NIL) {
        req_answer(r, STORE_ACCEPTED, 0);
        return;
    }
    if (rep->type == REDIS_REPLY_STRING &&
        redis_reply_dec(rep->str, rep->len, &mark)) {
        req_answer(r, STORE_ACCEPTED, mark);
        return;
    }
    log_error("redis: the value of %s is not a mark (%s)", REQ_NAME(r),
              rep->type == REDIS_REPLY_ERROR ? LOG_ESC(rep->str, rep->len)
                                             : "unexpected reply");
    req_answer(r, STORE_ERROR, 0);
}

static bool
send_get(struct redis_store *s, struct redis_req *r)
{
    const char *argv[2] = {"GET", r->key};
    size_t lens[2] = {3, r->keylen};

    return redis_cluster_command(s->conn, 2, argv, lens, on_get, r);
}

static void
redis_get(struct store *st, const char *res, size_t len, store_cb cb, void *arg)
{
    struct redis_store *s = to_redis(st);
    struct redis_req *r;

    if (cold_park(s, true, res, len, 0, cb, arg)) {
        return;
    }
    if (s->closing) {
        store_defer(s->defer, cb, arg, STORE_ERROR, 0);
        return;
    }
    r = req_new(s, res, len, 0, cb, arg);
    if (r == NULL || !send_get(s, r)) {
        free(r);
        store_defer(s->defer, cb, arg, STORE_ERROR, 0);
    }
}

static bool
redis_ready(struct store *st)
{
    struct redis_store *s = to_redis(st);

    return !s->closing && redis_cluster_ready(s->conn);
}

/* ---- life cycle ------------------------------------------------------ */

static const char *const redis_scripts[] = {REDIS_SCRIPT};

static void
redis_free(struct redis_store *s)
{
    if (s->kick_ev != NULL) {
        event_free(s->kick_ev);
    }
    defer_free(s->defer);
    free(s);
}

static struct store *
redis_open(struct event_base *base, const struct cfg_store *cfg, char *err,
           size_t errlen)
{
    struct redis_store *s;

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
    s->log = log_current();
    s->wait_replicas = cfg->wait_replicas;
    /* WAIT answers before the core's own timeout, so the log says why. */
    s->wait_ms = cfg->timeout_ms > 4 ? cfg->timeout_ms * 3 / 4 : 1;
    s->kick_ev = event_new(base, -1, 0, on_kick, s);
    s->defer = defer_new(base);
    if (s->kick_ev == NULL || s->defer == NULL) {
        snprintf(err, errlen, "redis: cannot set up events");
        redis_free(s);
        return NULL;
    }
    /* Unreachable now is an outage, not a configuration error: tidemark
     * starts not ready and connects when Redis is there. */
    if (cfg->cluster && s->wait_replicas > 0) {
        snprintf(err, errlen,
                 "redis: [store] wait_replicas needs one "
                 "server, not a cluster");
        redis_free(s);
        return NULL;
    }
    s->conn = redis_cluster_new(base, cfg->url, cfg->cluster, "[store]",
                                redis_scripts, 1, cfg->timeout_ms, err, errlen);
    if (s->conn == NULL) {
        redis_free(s);
        return NULL;
    }
    if (s->wait_replicas > 0) {
        log_info("redis: a raise is accepted once %d replicas have it",
                 s->wait_replicas);
    }
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
    /* Answers every command in flight with a NULL reply. */
    redis_cluster_free(s->conn);
    s->conn = NULL;
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
