/* lock_redis.c: leases in Redis, the seed's acquire, release and extend
 * scripts (one atomic EVALSHA each) on the connection code the Redis mark
 * store uses (../clients/redis_cluster.c: one server, or a Redis Cluster). */
#include "lock.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../conf/cfg.h"
#include "../clients/coldq.h"
#include "../clients/defer.h"
#include "../clients/redis_conn.h"
#include "../log.h"
#include "../clients/redis_cluster.h"
#include "lock_redis_reply.h"

/*
 * Keys. The lease of name N is "lock:{N}" holding its fence as a decimal
 * string, with the lease's expiry as the key's (PX); the counter is
 * "fence:{N}", only ever INCRemented or raised, never deleted, so a
 * fence is not handed out twice, also after release. The hash tag keeps
 * both in one cluster slot, so one script can use both (a name that is
 * empty or begins with '}' has an empty hash tag: on a cluster its two
 * keys fall in different slots and redis_cluster refuses the script).
 * "fence:{N}" is also the key the Redis mark store keeps N's mark under: with
 * both on one Redis, the counter is the mark, and an acquire is above every
 * token that has written.
 *
 * Decimal strings throughout: Lua numbers are doubles and would round
 * fences above 2^53, so the acquire script reads the counter back with
 * GET after INCR, and compares the floor as a string (length, then
 * bytes).
 *
 * Durability is Redis's: with appendfsync always a fence survives a
 * restart; a failover before replication can lose a lease and repeat a
 * fence (the seed's failure table). redis_conn warns at each connect
 * when appendfsync is not always. The [store] marks still refuse a stale
 * write whatever the lock does.
 */

/* The seed's acquire, with a floor: ARGV[2] is the lowest fence to hand
 * out ("0": none), for eager fencing above a mark issued elsewhere. */
#define RL_ACQUIRE                                                             \
    "if redis.call('EXISTS', KEYS[1]) == 1 then\n"                             \
    "  return {0, redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}\n"  \
    "end\n"                                                                    \
    "redis.call('INCR', KEYS[2])\n"                                            \
    "local token = redis.call('GET', KEYS[2])\n"                               \
    "local floor = ARGV[2]\n"                                                  \
    "if #token < #floor or (#token == #floor and token < floor) then\n"        \
    "  redis.call('SET', KEYS[2], floor)\n"                                    \
    "  token = floor\n"                                                        \
    "end\n"                                                                    \
    "redis.call('SET', KEYS[1], token, 'PX', ARGV[1])\n"                       \
    "return {1, token}\n"

#define RL_RELEASE                                                             \
    "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"                          \
    "  return redis.call('DEL', KEYS[1])\n"                                    \
    "end\n"                                                                    \
    "return 0\n"

#define RL_EXTEND                                                              \
    "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"                          \
    "  return redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"                       \
    "end\n"                                                                    \
    "return 0\n"

/* The live lease and its time left, or the counter: one script, so the
 * two answers belong to one moment. */
#define RL_STATUS                                                              \
    "local v = redis.call('GET', KEYS[1])\n"                                   \
    "if v then\n"                                                              \
    "  return {1, v, redis.call('PTTL', KEYS[1])}\n"                           \
    "end\n"                                                                    \
    "return {0, redis.call('GET', KEYS[2]) or '0'}\n"

static const char *const rl_scripts[] = {RL_ACQUIRE, RL_RELEASE, RL_EXTEND,
                                         RL_STATUS};

struct rl_req;

struct redis_locks {
    struct event_base *base;
    struct redis_cluster *conn;
    struct defer *defer; /* answers given without Redis */
    bool closing;
};

struct rl_req {
    enum rl_script op;
    lock_cb cb;
    void *arg;
    int64_t fence;  /* extend, release: the caller's */
    int64_t ttl_ms; /* acquire, extend: asked for */
    size_t len;
    char name[]; /* len bytes and a NUL */
};

static struct redis_locks *
to_locks(struct lock_backend *b)
{
    return (struct redis_locks *)b;
}

/* Answer r with an error on a later pass of the loop (never inside the
 * call that started it), and free it. */
static void
defer_error(struct redis_locks *s, struct rl_req *r)
{
    lock_defer(s->defer, r->cb, r->arg, LOCK_ERROR);
    free(r);
}

/* The reply of one script, for r's operation. */
static void
on_reply(void *priv, redisReply *rep)
{
    struct rl_req *r = priv;
    struct rl_answer a = {LOCK_ERROR, 0, 0};

    if (rep == NULL) {
        goto out; /* connection lost or closing: logged by redis_conn */
    }
    if (rep->type == REDIS_REPLY_ERROR) {
        log_error("locks: redis: %s: %s", LOG_ESC(r->name, r->len),
                  LOG_ESC(rep->str, rep->len));
        goto out;
    }
    a = rl_reply_read(r->op, rep, r->fence, r->ttl_ms);
    if (a.res == LOCK_ERROR) {
        log_error("locks: redis: %s: the script answered something "
                  "unexpected: refused",
                  LOG_ESC(r->name, r->len));
    }
out:
    r->cb(r->arg, a.res, a.fence, a.ttl_ms);
    free(r);
}

/* Send op's script. Keys are built here. */
extern const struct lock_ops lock_redis_ops;

static void
rl_submit(struct lock_backend *b, const struct lock_op *op)
{
    struct redis_locks *s = to_locks(b);
    const char *name = op->name;
    size_t len = op->len;
    /* r->name holds the name and a NUL, then "lock:{N}", "fence:{N}". */
    size_t lklen = len + 7, fklen = len + 8;
    struct rl_req *r;
    char *lock_key, *fence_key;
    char a1[24], a2[24];
    const char *argv[5];
    size_t lens[5];
    int argc = 0;
    enum rl_script script = RL_S_STATUS;

    /* Before the first connection is up, wait for it (coldq.h). */
    if (!s->closing && !redis_cluster_ready(s->conn) &&
        lock_park(redis_cluster_coldq(s->conn), b, &lock_redis_ops, op)) {
        return;
    }
    r = len <= 65536 ? malloc(sizeof(*r) + len + 1 + lklen + fklen) : NULL;
    if (r == NULL) {
        lock_defer(s->defer, op->cb, op->arg, LOCK_ERROR);
        return;
    }
    *r = (struct rl_req){
        .cb = op->cb, .arg = op->arg, .fence = op->fence, .len = len};
    memcpy(r->name, name, len);
    r->name[len] = '\0';
    lock_key = r->name + len + 1;
    memcpy(lock_key, "lock:{", 6);
    memcpy(lock_key + 6, name, len);
    lock_key[lklen - 1] = '}';
    fence_key = lock_key + lklen;
    memcpy(fence_key, "fence:{", 7);
    memcpy(fence_key + 7, name, len);
    fence_key[fklen - 1] = '}';
    if (s->closing) {
        defer_error(s, r);
        return;
    }
    switch (op->kind) {
    case LOCK_OP_ACQUIRE:
    case LOCK_OP_STATUS:
        script = op->kind == LOCK_OP_ACQUIRE ? RL_S_ACQUIRE : RL_S_STATUS;
        argv[argc] = "2";
        lens[argc++] = 1;
        argv[argc] = lock_key;
        lens[argc++] = lklen;
        argv[argc] = fence_key;
        lens[argc++] = fklen;
        if (script == RL_S_ACQUIRE) {
            r->ttl_ms = op->ttl_ms;
            snprintf(a1, sizeof(a1), "%" PRId64, op->ttl_ms);
            snprintf(a2, sizeof(a2), "%" PRId64,
                     op->min_fence > 0 ? op->min_fence : 0);
            argv[argc] = a1;
            lens[argc++] = strlen(a1);
            argv[argc] = a2;
            lens[argc++] = strlen(a2);
        }
        break;
    case LOCK_OP_RELEASE:
    case LOCK_OP_EXTEND:
        script = op->kind == LOCK_OP_EXTEND ? RL_S_EXTEND : RL_S_RELEASE;
        argv[argc] = "1";
        lens[argc++] = 1;
        argv[argc] = lock_key;
        lens[argc++] = lklen;
        snprintf(a1, sizeof(a1), "%" PRId64, op->fence);
        argv[argc] = a1;
        lens[argc++] = strlen(a1);
        if (script == RL_S_EXTEND) {
            r->ttl_ms = op->ttl_ms;
            snprintf(a2, sizeof(a2), "%" PRId64, op->ttl_ms);
            argv[argc] = a2;
            lens[argc++] = strlen(a2);
        }
        break;
    }
    r->op = script;
    if (!redis_cluster_eval(s->conn, script, argc, argv, lens, on_reply, NULL,
                            r)) {
        defer_error(s, r);
    }
}

static bool
rl_ready(struct lock_backend *b)
{
    struct redis_locks *s = to_locks(b);

    return !s->closing && redis_cluster_ready(s->conn);
}

static struct lock_backend *
rl_open(struct event_base *base, const struct cfg_locks *cfg, char *err,
        size_t errlen)
{
    struct redis_locks *s;

    if (cfg->url == NULL || cfg->url[0] == '\0') {
        snprintf(err, errlen, "locks: [locks] url is not set");
        return NULL;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "locks: out of memory");
        return NULL;
    }
    s->base = base;
    s->defer = defer_new(base);
    if (s->defer == NULL) {
        snprintf(err, errlen, "locks: cannot set up events");
        free(s);
        return NULL;
    }
    /* Unreachable now is an outage, not a configuration error: acquires
     * are 503 until Redis is there. */
    s->conn =
        redis_cluster_new(base, cfg->url, cfg->cluster, "[locks]", rl_scripts,
                          sizeof(rl_scripts) / sizeof(rl_scripts[0]),
                          cfg->timeout_ms, err, errlen);
    if (s->conn == NULL) {
        defer_free(s->defer);
        free(s);
        return NULL;
    }
    return (struct lock_backend *)s;
}

static void
rl_close(struct lock_backend *b)
{
    struct redis_locks *s = to_locks(b);

    if (s == NULL) {
        return;
    }
    s->closing = true;
    /* Answers every script in flight (callbacks run now). */
    redis_cluster_free(s->conn);
    defer_free(s->defer);
    free(s);
}

const struct lock_ops lock_redis_ops = {
    .name = "redis",
    .open = rl_open,
    .submit = rl_submit,
    .ready = rl_ready,
    .close = rl_close,
};
