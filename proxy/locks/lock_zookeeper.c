/* lock_zookeeper.c: leases on ZooKeeper with its lock recipe: each try is
 * an ephemeral sequential znode under the lock's own znode, the lowest one
 * holds the lock, and the fence is that node's czxid. */
#include "lock.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <zookeeper/zookeeper.h>

#include "../../conf/cfg.h"
#include "../../policies/zkname.h"
#include "../log.h"
#include "../clients/defer.h"
#include "../clients/zk_conn.h"

/*
 * Layout. The lock named N lives at ROOT/E, E being N with every byte
 * but [A-Za-z0-9_-] written %XX (a znode name holds no '/', and "." and
 * ".." are not names). ROOT/E is a container node: ZooKeeper removes it
 * once its last child is gone. Each acquire creates an ephemeral
 * sequential child "S-C-lock-NNNNNNNNNN" (S: this session's id, C: a
 * counter of this process), so that after a lost answer the node can be
 * found again and deleted (the session outlives a lost connection). The
 * child with the lowest sequence number holds the lock; its czxid, the
 * zxid of the transaction that created it, is the fence: every
 * transaction of the ensemble has its own zxid, and zxids only grow, also
 * across leader changes (doc/guide.md: "Leases on ZooKeeper"), so no fence is
 * handed out twice. A busy try deletes its node again and watches the
 * holder's: its end wakes this process's first waiter (lock.h,
 * watch_freed).
 *
 * TTL and session. tidemark keeps one session for all its leases. A
 * lease ends at the first of: its TTL, which tidemark enforces itself
 * (a timer deletes the node; the node's data holds the TTL, so a lookup
 * from another tidemark can tell the time left), a release, or the end
 * of the session (ZooKeeper deletes every ephemeral node of a session
 * that expired: a tidemark that died or is cut off frees its locks after
 * [locks] session_timeout_ms). A session that ended makes every lease of
 * it lost (409 on extend); while the connection is down nothing is
 * answered (503), since the server may be expiring the session. A lease
 * is extended through the tidemark that took it; a release through
 * another one deletes the holder's node when its czxid is the token.
 *
 * Threads. The C client (libzookeeper_mt) runs its I/O and its
 * completions on threads of its own; ../clients/zk_conn.c hands every
 * answer and event back to the loop thread, and everything here (leases,
 * requests, answers, timers) is touched on the loop thread only.
 */

#define ZK_DIR_TRIES 3
#define ZK_SETTLE_MS 2000 /* close: the longest wait for answers out */

enum zk_step {
    ZK_S_CREATE = 0, /* acquire: our node */
    ZK_S_CHILDREN,   /* acquire, status: the lock's children */
    ZK_S_HOLDER,     /* acquire (busy), status: the first child */
    ZK_S_DIR,        /* acquire: the lock's own znode */
    ZK_S_SET,        /* extend */
    ZK_S_DELETE,     /* release */
    ZK_S_DROP,       /* a node of ours that must go; no answer */
    ZK_S_SWEEP,      /* reconnected: the children of a dir to clean */
    ZK_S_ROOT,       /* connected: one part of the root */
    /* (a watched node changed or went: zk_conn's ZK_CALL_EVENT) */
    ZK_S_LOCAL, /* an answer given without a round trip: code, num[0]
                 * and num[1] hold the result, fence and ttl_ms */
};

struct zk_locks;
struct zk_req;

/* One lock operation. It lives until it is answered and none of its
 * calls is out. */
struct zk_req {
    struct zk_locks *z;
    enum lock_kind kind;
    lock_cb cb;
    void *arg;
    int64_t ttl_ms, fence, min_fence;
    int pending; /* calls not yet dispatched */
    bool answered;
    int tries; /* acquire: creations of the lock's znode */
    int create_rc, kids_rc;
    char *node; /* acquire: our node's path */
    int64_t czxid;
    char **kids;
    int nkids;
    char *dir;       /* ROOT/E */
    char prefix[64]; /* "S-C-lock-" */
    size_t len;
    char name[]; /* len bytes and a NUL */
};

/* A lease this process holds. */
struct zk_lease {
    struct zk_lease *next;
    struct zk_locks *z;
    struct event *timer; /* its TTL */
    int64_t fence;
    int64_t deadline; /* monotonic ms */
    int busy;         /* extends and releases out */
    bool expired;     /* the TTL passed while busy: it ends after them */
    char *path;
    size_t len;
    char name[];
};

/* A lock's znode to clean of this session's nodes named prefix..., once
 * connected again (a create or delete whose answer was lost). */
struct zk_sweep {
    struct zk_sweep *next;
    char *dir;
    char *prefix;
};

struct zk_locks {
    struct event_base *base;
    const struct tm_log *log;
    struct zk_conn *k; /* the session */
    char *root;
    int session_ms;
    bool closing;
    uint64_t counter;
    struct zk_lease *leases;
    struct zk_sweep *sweeps;
    struct defer *defer; /* answers when out of memory */
    lock_freed_cb freed;
    void *freed_arg;
};

static struct zk_locks *
to_zk(struct lock_backend *b)
{
    return (struct zk_locks *)b;
}

static int64_t
clock_ms(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- calls ------------------------------------------------------------ */

/* A call for step on path (copied; NULL: none), serving r (NULL: none).
 * NULL when out of memory. */
static struct zk_call *
call_new(struct zk_locks *z, enum zk_step step, struct zk_req *r,
         const char *path)
{
    struct zk_call *c = zk_call_new(z->k, (int)step, path);

    if (c != NULL && r != NULL) {
        c->req = r;
        r->pending++;
    }
    return c;
}

/* The handle, or NULL between handles and while closing (a call sent
 * then comes back ZCLOSING). */
#define ZH(z) zk_conn_zh((z)->k)

static void
sent(struct zk_locks *z, struct zk_call *c, int rc)
{
    zk_conn_sent(z->k, c, rc);
}

static void
send_create(struct zk_locks *z, struct zk_call *c, const char *path,
            const char *value, int mode, bool with_stat)
{
    int rc = ZCLOSING;

    if (ZH(z) != NULL) {
        rc = with_stat
                 ? zoo_acreate2(ZH(z), path, value, (int)strlen(value),
                                &ZOO_OPEN_ACL_UNSAFE, mode, zk_done_string_stat,
                                c)
                 : zoo_acreate(ZH(z), path, value, (int)strlen(value),
                               &ZOO_OPEN_ACL_UNSAFE, mode, zk_done_string, c);
    }
    sent(z, c, rc);
}

static void
send_children(struct zk_locks *z, struct zk_call *c, const char *dir)
{
    sent(z, c,
         ZH(z) != NULL ? zoo_aget_children(ZH(z), dir, 0, zk_done_strings, c)
                       : ZCLOSING);
}

static void
send_delete(struct zk_locks *z, struct zk_call *c)
{
    sent(z, c,
         ZH(z) != NULL ? zoo_adelete(ZH(z), c->path, -1, zk_done_void, c)
                       : ZCLOSING);
}

/* ---- names -------------------------------------------------------------- */

/* ROOT/E for the lock name (len bytes), E its escape (zkname.h); malloc,
 * NULL when out of memory. */
static char *
dir_of(const struct zk_locks *z, const char *name, size_t len)
{
    size_t rl = strlen(z->root), n;
    char *d = malloc(rl + 2 + ZKNAME_MAX(len));

    if (d == NULL) {
        return NULL;
    }
    memcpy(d, z->root, rl);
    d[rl] = '/';
    n = zkname_escape(name, len, d + rl + 1);
    d[rl + 1 + n] = '\0';
    return d;
}

/* The lock name of a path under the root (ROOT/E or ROOT/E/child), into
 * out (malloc, *len bytes); false when path is not one of ours. */
static bool
name_of(const struct zk_locks *z, const char *path, char **out, size_t *len)
{
    size_t rl = strlen(z->root), n;
    const char *e;

    if (strncmp(path, z->root, rl) != 0 || path[rl] != '/') {
        return false;
    }
    e = path + rl + 1;
    n = strcspn(e, "/");
    if ((*out = malloc(n + 1)) == NULL) {
        return false;
    }
    if (!zkname_unescape(e, n, *out, len)) {
        free(*out);
        return false;
    }
    (*out)[*len] = '\0';
    return true;
}

/* The holder among kids: the lowest sequence number; NULL: none. */
static const char *
first_kid(char **kids, int n)
{
    int i = zkname_first(kids, n);

    return i >= 0 ? kids[i] : NULL;
}

/* A decimal 0..INT64_MAX from a node's data; -1 when it is not one. */
static int64_t
data_dec(const char *d, int n)
{
    int64_t v = 0;

    if (d == NULL || n <= 0 || n > 18) {
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (d[i] < '0' || d[i] > '9') {
            return -1;
        }
        v = v * 10 + (d[i] - '0');
    }
    return v;
}

/* ---- requests ----------------------------------------------------------- */

static void
req_free(struct zk_req *r)
{
    zk_kids_free(r->kids, r->nkids);
    free(r->node);
    free(r->dir);
    free(r);
}

/* Answer r once (on the loop, from a dispatch: never inside submit). */
static void
answer(struct zk_req *r, enum lock_result res, int64_t fence, int64_t ttl_ms)
{
    if (r->answered) {
        return;
    }
    r->answered = true;
    if (res == LOCK_ERROR) {
        fence = 0;
        ttl_ms = 0;
    }
    r->cb(r->arg, res, fence, ttl_ms);
}

/* An answer given without a round trip, through the queue (so never
 * inside the call that asked). Out of memory: an error, deferred. */
static void
answer_soon(struct zk_req *r, enum lock_result res, int64_t fence,
            int64_t ttl_ms)
{
    struct zk_call *c = call_new(r->z, ZK_S_LOCAL, r, NULL);

    if (c == NULL) {
        lock_defer(r->z->defer, r->cb, r->arg, LOCK_ERROR);
        r->answered = true;
        if (r->pending == 0) {
            req_free(r);
        }
        return;
    }
    c->code = (int)res;
    c->num[0] = fence;
    c->num[1] = ttl_ms;
    zk_conn_push(r->z->k, c);
}

/* ---- leases and sweeps -------------------------------------------------- */

static struct zk_lease *
lease_by_path(struct zk_locks *z, const char *path)
{
    for (struct zk_lease *l = z->leases; l != NULL; l = l->next) {
        if (strcmp(l->path, path) == 0) {
            return l;
        }
    }
    return NULL;
}

static struct zk_lease *
lease_by_name(struct zk_locks *z, const char *name, size_t len)
{
    for (struct zk_lease *l = z->leases; l != NULL; l = l->next) {
        if (l->len == len && memcmp(l->name, name, len) == 0) {
            return l;
        }
    }
    return NULL;
}

/* Take l out of the table and free it (its node is not touched). */
static void
lease_free(struct zk_lease *l)
{
    struct zk_lease **pp;

    for (pp = &l->z->leases; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == l) {
            *pp = l->next;
            break;
        }
    }
    event_free(l->timer);
    free(l->path);
    free(l);
}

static int64_t
lease_left(const struct zk_lease *l)
{
    int64_t left = l->deadline - clock_ms(CLOCK_MONOTONIC);

    return left > 0 ? left : 0;
}

static void
lease_arm(struct zk_lease *l, int64_t ttl_ms)
{
    struct timeval tv = {(time_t)(ttl_ms / 1000),
                         (suseconds_t)(ttl_ms % 1000) * 1000};

    l->deadline = clock_ms(CLOCK_MONOTONIC) + ttl_ms;
    evtimer_add(l->timer, &tv);
}

static void
sweep_add(struct zk_locks *z, const char *dir, const char *prefix)
{
    struct zk_sweep *s = calloc(1, sizeof(*s));

    if (s != NULL && (s->dir = strdup(dir)) != NULL &&
        (s->prefix = strdup(prefix)) != NULL) {
        s->next = z->sweeps;
        z->sweeps = s;
        return;
    }
    /* The node stays until the session ends. */
    log_error("locks: zookeeper: out of memory: a node under %s stays until "
              "the session ends",
              LOG_STR(dir));
    if (s != NULL) {
        free(s->dir);
        free(s);
    }
}

static void
sweeps_free(struct zk_locks *z)
{
    while (z->sweeps != NULL) {
        struct zk_sweep *s = z->sweeps;

        z->sweeps = s->next;
        free(s->dir);
        free(s->prefix);
        free(s);
    }
}

/* Delete our node at path, which holds or queues for the lock name (NULL:
 * unknown); when it is gone, waiters for name are told. A lost answer
 * leaves a sweep for the next connection. */
static void
drop_node(struct zk_locks *z, const char *path, const char *name, size_t len)
{
    struct zk_call *c = call_new(z, ZK_S_DROP, NULL, path);

    if (c != NULL && name != NULL) {
        c->name = malloc(len + 1);
        if (c->name == NULL) {
            zk_call_free(c);
            c = NULL;
        } else {
            memcpy(c->name, name, len);
            c->name[len] = '\0';
            c->len = len;
        }
    }
    if (c == NULL) {
        log_error("locks: zookeeper: out of memory: %s stays until the "
                  "session ends",
                  LOG_STR(path));
        return;
    }
    send_delete(z, c);
}

/* l's TTL passed: it ends now (its node goes), or after the extends and
 * releases in flight when one is. */
static void
lease_expire(struct zk_lease *l)
{
    struct zk_locks *z = l->z;
    char *path = l->path;

    if (l->busy > 0) {
        l->expired = true;
        return;
    }
    log_debug("locks: zookeeper: %s: the lease's TTL passed: deleting %s",
              LOG_ESC(l->name, l->len), LOG_STR(path));
    drop_node(z, path, l->name, l->len);
    lease_free(l);
}

static void
on_lease_timer(evutil_socket_t fd, short what, void *arg)
{
    struct zk_lease *l = arg;

    lib_enter(l->z->log);
    (void)fd;
    (void)what;
    lease_expire(l);
}

/* A lease for r, whose node won. NULL when out of memory. */
static struct zk_lease *
lease_add(struct zk_req *r)
{
    struct zk_locks *z = r->z;
    struct zk_lease *l = calloc(1, sizeof(*l) + r->len + 1);

    if (l == NULL) {
        return NULL;
    }
    l->z = z;
    l->fence = r->czxid;
    l->len = r->len;
    memcpy(l->name, r->name, r->len);
    l->path = strdup(r->node);
    l->timer = evtimer_new(z->base, on_lease_timer, l);
    if (l->path == NULL || l->timer == NULL) {
        free(l->path);
        if (l->timer != NULL) {
            event_free(l->timer);
        }
        free(l);
        return NULL;
    }
    l->next = z->leases;
    z->leases = l;
    lease_arm(l, r->ttl_ms);
    return l;
}

/* The session ended: ZooKeeper deleted every node of it, so every lease
 * of this process is lost, and nothing is left to sweep. */
static void
leases_lost(struct zk_locks *z)
{
    while (z->leases != NULL) {
        lease_free(z->leases);
    }
    sweeps_free(z);
}

static void
tell_freed(struct zk_locks *z, const char *name, size_t len)
{
    if (z->freed != NULL && !z->closing) {
        z->freed(z->freed_arg, name, len);
    }
}

/* ---- acquire ------------------------------------------------------------ */

/* Create r's node and read the lock's children: one round trip, since a
 * session's requests are answered in order and its reads see its own
 * writes, so the children include the node. */
static void
acquire_send(struct zk_req *r)
{
    struct zk_locks *z = r->z;
    struct zk_call *mk, *ls;
    char ttl[24], *path;
    const clientid_t *id = ZH(z) != NULL ? zoo_client_id(ZH(z)) : NULL;

    snprintf(r->prefix, sizeof(r->prefix), "%016" PRIx64 "-%" PRIx64 "-lock-",
             id != NULL ? (uint64_t)id->client_id : 0, ++z->counter);
    path = zk_path_join(r->dir, r->prefix);
    mk = path != NULL ? call_new(z, ZK_S_CREATE, r, NULL) : NULL;
    ls = mk != NULL ? call_new(z, ZK_S_CHILDREN, r, NULL) : NULL;
    if (ls == NULL) {
        if (mk != NULL) {
            r->pending--;
            zk_call_free(mk);
        }
        free(path);
        log_error("locks: zookeeper: %s: out of memory",
                  LOG_ESC(r->name, r->len));
        answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    r->create_rc = ZOK;
    r->kids_rc = ZOK;
    snprintf(ttl, sizeof(ttl), "%" PRId64, r->ttl_ms);
    send_create(z, mk, path, ttl, ZOO_EPHEMERAL_SEQUENTIAL, true);
    send_children(z, ls, r->dir);
    free(path);
}

/* The lock's znode is missing (never made, or removed as an empty
 * container): make it, then try again. */
static void
acquire_mkdir(struct zk_req *r)
{
    struct zk_call *c = call_new(r->z, ZK_S_DIR, r, r->dir);

    if (c == NULL) {
        answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    r->tries++;
    zk_kids_free(r->kids, r->nkids);
    r->kids = NULL;
    r->nkids = 0;
    send_create(r->z, c, r->dir, "", ZOO_CONTAINER, false);
}

/* Busy: read the holder's node (its czxid and TTL) with a watch, so
 * that its end wakes this process's waiters (on_watch). */
static void
acquire_busy(struct zk_req *r, const char *first)
{
    char *path = zk_path_join(r->dir, first);
    struct zk_call *c =
        path != NULL ? call_new(r->z, ZK_S_HOLDER, r, path) : NULL;
    struct zk_locks *z = r->z;

    free(path);
    if (c == NULL) {
        answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    sent(z, c,
         ZH(z) != NULL ? zoo_awget(ZH(z), c->path, zk_conn_watcher,
                                   zk_conn_ctx(z->k), zk_done_data, c)
                       : ZCLOSING);
}

/* Both answers of acquire_send are in: decide. */
static void
acquire_decide(struct zk_req *r, uint64_t gen)
{
    struct zk_locks *z = r->z;
    int first = -1;

    if (r->create_rc == ZNONODE && r->tries < ZK_DIR_TRIES) {
        acquire_mkdir(r);
        return;
    }
    if (r->create_rc != ZOK) {
        if (zk_rc_outage(r->create_rc) && gen == zk_conn_gen(z->k) &&
            !z->closing) {
            /* The create may have happened: find the node later. */
            sweep_add(z, r->dir, r->prefix);
        }
        log_warn("locks: zookeeper: %s: create: %s", LOG_ESC(r->name, r->len),
                 zerror(r->create_rc));
        answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    if (r->kids_rc != ZOK) {
        log_warn("locks: zookeeper: %s: children: %s", LOG_ESC(r->name, r->len),
                 zerror(r->kids_rc));
        drop_node(z, r->node, NULL, 0);
        answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    switch (zkname_turn(r->dir, r->node, r->kids, r->nkids, &first)) {
    case ZKNAME_FOREIGN:
        /* Not a child of the lock's node (a peer's bad answer): ours, if
         * it was made, is found by name once connected again. */
        sweep_add(z, r->dir, r->prefix);
        answer(r, LOCK_ERROR, 0, 0);
        return;
    case ZKNAME_NO_HOLDER:
        drop_node(z, r->node, NULL, 0);
        answer(r, LOCK_ERROR, 0, 0);
        return;
    case ZKNAME_BEHIND:
        drop_node(z, r->node, NULL, 0);
        acquire_busy(r, r->kids[first]);
        return;
    case ZKNAME_HELD:
        break;
    }
    if (r->czxid < r->min_fence || r->czxid < 1) {
        log_error("locks: zookeeper: %s: the node's zxid %" PRId64
                  " is below the lowest fence allowed (%" PRId64
                  ", the resource's mark plus one): tokens for it were "
                  "issued elsewhere; refused",
                  LOG_ESC(r->name, r->len), r->czxid, r->min_fence);
        drop_node(z, r->node, NULL, 0);
        answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    if (lease_add(r) == NULL) {
        drop_node(z, r->node, NULL, 0);
        answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    answer(r, LOCK_OK, r->czxid, r->ttl_ms);
}

static void
on_create(struct zk_req *r, struct zk_call *c)
{
    r->create_rc = c->rc;
    if (c->rc == ZOK) {
        r->node = c->str;
        c->str = NULL;
        r->czxid = c->stat.czxid;
    }
    if (r->pending == 0) {
        acquire_decide(r, c->gen);
    }
}

static void
on_dir(struct zk_req *r, struct zk_call *c)
{
    if (c->rc == ZOK || c->rc == ZNODEEXISTS) {
        acquire_send(r);
        return;
    }
    log_warn("locks: zookeeper: cannot create %s: %s", LOG_STR(c->path),
             zerror(c->rc));
    answer(r, LOCK_ERROR, 0, 0);
}

/* A release of a lease another process took: the holder's node came
 * back; delete it when its fence is the caller's, at the version read
 * (an extend in between: 409, nothing deleted). */
static void
release_other(struct zk_req *r, struct zk_call *c)
{
    struct zk_locks *z = r->z;
    struct zk_call *d;

    if (c->rc != ZOK && c->rc != ZNONODE) {
        answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    if (c->rc == ZNONODE || c->stat.czxid != r->fence) {
        answer(r, LOCK_LOST, r->fence, 0);
        return;
    }
    d = call_new(z, ZK_S_DELETE, r, c->path);
    if (d == NULL) {
        answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    sent(z, d,
         ZH(z) != NULL
             ? zoo_adelete(ZH(z), d->path, c->stat.version, zk_done_void, d)
             : ZCLOSING);
}

/* The first child's node came back: for a busy acquire the holder's
 * fence and time left, for a lookup the answer. */
static void
on_holder(struct zk_req *r, struct zk_call *c)
{
    struct zk_locks *z = r->z;
    struct zk_lease *own = lease_by_path(z, c->path);
    int64_t ttl = data_dec(c->data, c->data_len), left;

    if (r->kind == LOCK_OP_RELEASE) {
        release_other(r, c);
        return;
    }
    if (c->rc == ZNONODE) {
        if (r->kind == LOCK_OP_STATUS) {
            answer(r, LOCK_NONE, 0, 0);
            return;
        }
        /* Gone between the two reads: try again at once. */
        answer(r, LOCK_BUSY, 0, 1);
        tell_freed(z, r->name, r->len);
        return;
    }
    if (c->rc != ZOK) {
        answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    if (own != NULL) {
        left = lease_left(own);
    } else if (ttl >= 0) {
        /* mtime is the leader's clock at the last create or extend. */
        left = zkname_left(ttl, c->stat.mtime, clock_ms(CLOCK_REALTIME));
    } else {
        left = -1; /* not one of ours: no TTL */
    }
    if (r->kind == LOCK_OP_STATUS) {
        answer(r, LOCK_OK, c->stat.czxid, left > 0 ? left : 0);
        return;
    }
    /* A holder past its TTL (its tidemark is cut off, or it is not
     * tidemark's) ends at the latest with its session. */
    answer(r, LOCK_BUSY, c->stat.czxid, left > 0 ? left : z->session_ms);
}

/* ---- status, extend, release -------------------------------------------- */

static void
on_status_children(struct zk_req *r, struct zk_call *c)
{
    const char *first;
    char *path;
    struct zk_call *g;
    struct zk_locks *z = r->z;

    if (c->rc != ZOK && c->rc != ZNONODE) {
        answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    first = c->rc == ZOK ? first_kid(c->kids, c->nkids) : NULL;
    if (first == NULL) {
        answer(r, r->kind == LOCK_OP_STATUS ? LOCK_NONE : LOCK_LOST, r->fence,
               0);
        return;
    }
    path = zk_path_join(r->dir, first);
    g = path != NULL ? call_new(z, ZK_S_HOLDER, r, path) : NULL;
    free(path);
    if (g == NULL) {
        answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    sent(z, g,
         ZH(z) != NULL ? zoo_aget(ZH(z), g->path, 0, zk_done_data, g)
                       : ZCLOSING);
}

/* An extend or release came back: the lease it was about, if this
 * process still holds it. */
static struct zk_lease *
lease_back(struct zk_locks *z, struct zk_call *c)
{
    struct zk_lease *l = lease_by_path(z, c->path);

    if (l != NULL) {
        l->busy--;
    }
    return l;
}

static void
on_set(struct zk_req *r, struct zk_call *c)
{
    struct zk_lease *l = lease_back(r->z, c);

    if (c->rc == ZOK && l != NULL) {
        l->expired = false;
        lease_arm(l, r->ttl_ms);
        answer(r, LOCK_OK, r->fence, r->ttl_ms);
        return;
    }
    if (c->rc == ZOK || c->rc == ZNONODE || c->rc == ZSESSIONEXPIRED) {
        /* The session ended (ZooKeeper deleted its nodes), or the node
         * was deleted: the lease is gone. */
        if (l != NULL) {
            lease_free(l);
        }
        answer(r, LOCK_LOST, r->fence, 0);
        return;
    }
    answer(r, LOCK_ERROR, 0, 0);
    if (l != NULL && l->expired) {
        lease_expire(l);
    }
}

static void
on_delete(struct zk_req *r, struct zk_call *c)
{
    struct zk_lease *l = lease_back(r->z, c);

    if (c->rc == ZOK || c->rc == ZNONODE || c->rc == ZBADVERSION ||
        c->rc == ZSESSIONEXPIRED) {
        if (l != NULL) {
            lease_free(l);
        }
        answer(r, c->rc == ZOK ? LOCK_OK : LOCK_LOST, r->fence, 0);
        return;
    }
    answer(r, LOCK_ERROR, 0, 0);
    if (l != NULL && l->expired) {
        lease_expire(l);
    }
}

/* ---- the session -------------------------------------------------------- */

/* Make the root's parts (persistent); errors other than "exists" are
 * logged, and acquires then fail on their own. Sent first on a new
 * connection, so the session's later requests see them. */
static void
make_root(struct zk_locks *z)
{
    size_t n = strlen(z->root);

    for (size_t i = 1; i <= n; i++) {
        struct zk_call *c;

        if (i < n && z->root[i] != '/') {
            continue;
        }
        c = call_new(z, ZK_S_ROOT, NULL, NULL);
        if (c == NULL || (c->path = strndup(z->root, i)) == NULL) {
            free(c);
            return;
        }
        send_create(z, c, c->path, "", 0, false);
    }
}

/* Look for nodes that lost answers left behind. */
static void
sweep_all(struct zk_locks *z)
{
    struct zk_sweep *todo = z->sweeps;

    z->sweeps = NULL;
    while (todo != NULL) {
        struct zk_sweep *s = todo;
        struct zk_call *c = call_new(z, ZK_S_SWEEP, NULL, s->dir);

        todo = s->next;
        if (c == NULL) {
            s->next = z->sweeps;
            z->sweeps = s;
            continue;
        }
        c->name = s->prefix;
        free(s->dir);
        free(s);
        send_children(z, c, c->path);
    }
}

static void
on_sweep(struct zk_locks *z, struct zk_call *c)
{
    char *name = NULL;
    size_t len = 0;
    size_t pl = strlen(c->name);

    if (c->rc == ZNONODE) {
        return;
    }
    if (c->rc != ZOK) {
        if (c->gen == zk_conn_gen(z->k) && !z->closing) {
            sweep_add(z, c->path, c->name);
        }
        return;
    }
    if (!name_of(z, c->path, &name, &len)) {
        name = NULL;
    }
    for (int i = 0; i < c->nkids; i++) {
        if (strncmp(c->kids[i], c->name, pl) == 0) {
            char *path = zk_path_join(c->path, c->kids[i]);

            if (path != NULL) {
                log_info("locks: zookeeper: deleting %s, left by a lost "
                         "answer",
                         LOG_STR(path));
                drop_node(z, path, name, len);
                free(path);
            }
        }
    }
    free(name);
}

static void
on_drop(struct zk_locks *z, struct zk_call *c)
{
    if (c->rc == ZOK || c->rc == ZNONODE) {
        if (c->name != NULL) {
            tell_freed(z, c->name, c->len);
        }
        return;
    }
    if (zk_rc_outage(c->rc)) {
        char *slash = strrchr(c->path, '/');

        if (c->gen == zk_conn_gen(z->k) && !z->closing && slash != NULL) {
            *slash = '\0';
            sweep_add(z, c->path, slash + 1);
        }
        return;
    }
    log_warn("locks: zookeeper: cannot delete %s: %s", LOG_STR(c->path),
             zerror(c->rc));
}

/* The session's state changed (zk_conn). */
static void
on_state(void *arg, enum zk_conn_state st)
{
    struct zk_locks *z = arg;

    if (z->closing) {
        return;
    }
    if (st == ZK_CONN_UP) {
        make_root(z);
        sweep_all(z);
    } else if (st == ZK_CONN_EXPIRED) {
        log_warn("locks: zookeeper: the session ended: every lease of it is "
                 "lost; starting a new one");
        leases_lost(z);
    } else {
        log_warn("locks: zookeeper: connection lost: lock calls are 503 "
                 "until it is back");
    }
}

static void
on_watch(struct zk_locks *z, struct zk_call *c)
{
    char *name;
    size_t len;

    if (c->str != NULL && name_of(z, c->str, &name, &len)) {
        tell_freed(z, name, len);
        free(name);
    }
}

/* ---- dispatch ----------------------------------------------------------- */

static void
dispatch_req(struct zk_req *r, struct zk_call *c)
{
    switch (c->step) {
    case ZK_S_CREATE:
        on_create(r, c);
        break;
    case ZK_S_CHILDREN:
        if (r->kind != LOCK_OP_ACQUIRE) {
            on_status_children(r, c);
            break;
        }
        r->kids_rc = c->rc;
        r->kids = c->kids;
        r->nkids = c->nkids;
        c->kids = NULL;
        c->nkids = 0;
        if (r->pending == 0) {
            acquire_decide(r, c->gen);
        }
        break;
    case ZK_S_DIR:
        on_dir(r, c);
        break;
    case ZK_S_HOLDER:
        on_holder(r, c);
        break;
    case ZK_S_SET:
        on_set(r, c);
        break;
    case ZK_S_DELETE:
        on_delete(r, c);
        break;
    case ZK_S_LOCAL:
        answer(r, (enum lock_result)c->code, c->num[0], c->num[1]);
        break;
    default:
        break;
    }
}

/* A call came back, or an event came (zk_conn). */
static void
zk_dispatch(void *arg, struct zk_call *c)
{
    struct zk_locks *z = arg;
    struct zk_req *r = c->req;

    if (r != NULL) {
        r->pending--;
        dispatch_req(r, c);
        if (r->answered && r->pending == 0) {
            req_free(r);
        }
    } else if (c->step == ZK_CALL_EVENT) {
        on_watch(z, c);
    } else if (c->step == ZK_S_DROP) {
        on_drop(z, c);
    } else if (c->step == ZK_S_SWEEP) {
        on_sweep(z, c);
    } else if (c->step == ZK_S_ROOT && c->rc != ZOK && c->rc != ZNODEEXISTS &&
               !zk_rc_outage(c->rc)) {
        log_error("locks: zookeeper: cannot create %s: %s", LOG_STR(c->path),
                  zerror(c->rc));
    }
    zk_call_free(c);
}

/* ---- the backend -------------------------------------------------------- */

static bool
zk_ready(struct lock_backend *b)
{
    struct zk_locks *z = to_zk(b);

    return !z->closing && zk_conn_ready(z->k);
}

static struct zk_req *
req_new(struct zk_locks *z, const struct lock_op *op)
{
    struct zk_req *r =
        op->len <= 65536 ? calloc(1, sizeof(*r) + op->len + 1) : NULL;

    if (r == NULL) {
        return NULL;
    }
    r->z = z;
    r->kind = op->kind;
    r->cb = op->cb;
    r->arg = op->arg;
    r->ttl_ms = op->ttl_ms;
    r->fence = op->fence;
    r->min_fence = op->min_fence;
    r->len = op->len;
    memcpy(r->name, op->name, op->len);
    r->dir = dir_of(z, op->name, op->len);
    if (r->dir == NULL) {
        free(r);
        return NULL;
    }
    return r;
}

/* extend and release: on the lease this process holds under op's fence. */
static void
submit_lease_op(struct zk_req *r)
{
    struct zk_locks *z = r->z;
    struct zk_lease *l = lease_by_name(z, r->name, r->len);
    struct zk_call *c;
    char ttl[24];

    if (l == NULL && r->kind == LOCK_OP_RELEASE) {
        /* Maybe taken through another process (one that died: its
         * session holds the node until it times out): find the holder. */
        c = call_new(z, ZK_S_CHILDREN, r, NULL);
        if (c == NULL) {
            answer_soon(r, LOCK_ERROR, 0, 0);
            return;
        }
        send_children(z, c, r->dir);
        return;
    }
    if (l == NULL || l->fence != r->fence || l->expired) {
        /* Not held here under that fence: expired, released, or ended
         * with a session; an extend also when taken through another
         * process, whose session alone keeps the node. */
        answer_soon(r, LOCK_LOST, r->fence, 0);
        return;
    }
    c = call_new(z, r->kind == LOCK_OP_EXTEND ? ZK_S_SET : ZK_S_DELETE, r,
                 l->path);
    if (c == NULL) {
        answer_soon(r, LOCK_ERROR, 0, 0);
        return;
    }
    l->busy++;
    if (r->kind == LOCK_OP_RELEASE) {
        send_delete(z, c);
        return;
    }
    snprintf(ttl, sizeof(ttl), "%" PRId64, r->ttl_ms);
    sent(z, c,
         ZH(z) != NULL ? zoo_aset(ZH(z), c->path, ttl, (int)strlen(ttl), -1,
                                  zk_done_stat, c)
                       : ZCLOSING);
}

static void
zk_submit(struct lock_backend *b, const struct lock_op *op)
{
    struct zk_locks *z = to_zk(b);
    struct zk_req *r = req_new(z, op);
    struct zk_lease *own;
    struct zk_call *c;

    if (r == NULL) {
        lock_defer(z->defer, op->cb, op->arg, LOCK_ERROR);
        return;
    }
    if (!zk_ready(b)) {
        answer_soon(r, LOCK_ERROR, 0, 0);
        return;
    }
    own = lease_by_name(z, r->name, r->len);
    log_debug("locks: zookeeper: %s name=%s",
              op->kind == LOCK_OP_ACQUIRE   ? "acquire"
              : op->kind == LOCK_OP_EXTEND  ? "extend"
              : op->kind == LOCK_OP_RELEASE ? "release"
                                            : "status",
              LOG_ESC(r->name, r->len));
    switch (op->kind) {
    case LOCK_OP_ACQUIRE:
        if (own != NULL && !own->expired) {
            /* Held through this process: no round trip. */
            answer_soon(r, LOCK_BUSY, own->fence, lease_left(own));
            return;
        }
        acquire_send(r);
        if (r->answered && r->pending == 0) {
            req_free(r);
        }
        return;
    case LOCK_OP_EXTEND:
    case LOCK_OP_RELEASE:
        submit_lease_op(r);
        return;
    case LOCK_OP_STATUS:
        if (own != NULL && !own->expired) {
            answer_soon(r, LOCK_OK, own->fence, lease_left(own));
            return;
        }
        c = call_new(z, ZK_S_CHILDREN, r, NULL);
        if (c == NULL) {
            answer_soon(r, LOCK_ERROR, 0, 0);
            return;
        }
        send_children(z, c, r->dir);
        return;
    }
}

static void
zk_watch_freed(struct lock_backend *b, lock_freed_cb freed, void *arg)
{
    struct zk_locks *z = to_zk(b);

    z->freed = freed;
    z->freed_arg = arg;
}

static void
zk_free(struct zk_locks *z)
{
    defer_free(z->defer);
    free(z->root);
    free(z);
}

static struct lock_backend *
zk_open(struct event_base *base, const struct cfg_locks *cfg, char *err,
        size_t errlen)
{
    static const struct zk_conn_hooks hooks = {.call = zk_dispatch,
                                               .state = on_state};
    struct zk_locks *z;

    if (cfg->zk_hosts == NULL || cfg->zk_hosts[0] == '\0') {
        snprintf(err, errlen, "locks: [locks] hosts is not set");
        return NULL;
    }
    z = calloc(1, sizeof(*z));
    if (z == NULL) {
        snprintf(err, errlen, "locks: out of memory");
        return NULL;
    }
    z->base = base;
    z->log = log_current();
    z->session_ms = cfg->zk_sess_ms;
    z->root = strdup(cfg->zk_root != NULL ? cfg->zk_root : "/tidemark/locks");
    z->defer = defer_new(base);
    if (z->root == NULL || z->defer == NULL) {
        snprintf(err, errlen, "locks: cannot set up events");
        zk_free(z);
        return NULL;
    }
    /* Unreachable now (down, or a name that does not resolve yet) is
     * an outage, not a configuration error: lock calls are 503 until
     * the ensemble answers. */
    z->k = zk_conn_new(base, cfg->zk_hosts, z->session_ms, "locks: zookeeper",
                       &hooks, z, err, errlen);
    if (z->k == NULL) {
        zk_free(z);
        return NULL;
    }
    return (struct lock_backend *)z;
}

static void
zk_close(struct lock_backend *b)
{
    struct zk_locks *z = to_zk(b);

    if (z == NULL) {
        return;
    }
    z->closing = true; /* nothing new goes out (ZH) */
    /* Let the calls out be answered, for up to ZK_SETTLE_MS: the answers
     * are the real ones. */
    zk_conn_close(z->k, ZK_SETTLE_MS);
    /* Closing the session deletes its nodes: every lease ends. The calls
     * still out come back (ZCLOSING) and are answered. */
    zk_conn_free(z->k);
    z->k = NULL;
    leases_lost(z);
    zk_free(z);
}

const struct lock_ops lock_zookeeper_ops = {
    .name = "zookeeper",
    .open = zk_open,
    .submit = zk_submit,
    .ready = zk_ready,
    .watch_freed = zk_watch_freed,
    .close = zk_close,
};
