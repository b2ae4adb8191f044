/* lock_zookeeper.c: leases on ZooKeeper with its lock recipe: each try is
 * an ephemeral sequential znode under the lock's own znode, the lowest one
 * holds the lock, and the fence is that node's czxid. */
#include "lock_zookeeper.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <zookeeper/zookeeper.h>

#include "../../conf/cfg.h"
#include "../../policies/ascii.h"
#include "../../policies/zkname.h"
#include "../log.h"
#include "../seed.h"
#include "../clients/defer.h"

static struct zk_locks *
to_zk(struct lock_backend *b)
{
    return (struct zk_locks *)b;
}

int64_t
zkl_clock_ms(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- calls ------------------------------------------------------------ */

/* A call for step on path (copied; NULL: none), serving r (NULL: none).
 * NULL when out of memory. */
struct zk_call *
zkl_call_new(struct zk_locks *z, enum zk_step step, struct zk_req *r,
             const char *path)
{
    struct zk_call *c = zk_call_new(z->k, (int)step, path);

    if (c != NULL && r != NULL) {
        c->req = r;
        r->pending++;
    }
    return c;
}

void
zkl_sent(struct zk_locks *z, struct zk_call *c, int rc)
{
    zk_conn_sent(z->k, c, rc);
}

void
zkl_send_create(struct zk_locks *z, struct zk_call *c, const char *path,
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
    zkl_sent(z, c, rc);
}

void
zkl_send_children(struct zk_locks *z, struct zk_call *c, const char *dir)
{
    zkl_sent(z, c,
             ZH(z) != NULL
                 ? zoo_aget_children(ZH(z), dir, 0, zk_done_strings, c)
                 : ZCLOSING);
}

void
zkl_send_delete(struct zk_locks *z, struct zk_call *c)
{
    zkl_sent(z, c,
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
bool
zkl_name_of(const struct zk_locks *z, const char *path, char **out, size_t *len)
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
const char *
zkl_first_kid(char **kids, int n)
{
    int i = zkname_first(kids, n);

    return i >= 0 ? kids[i] : NULL;
}

/* A decimal 0..INT64_MAX from a node's data; -1 when it is not one. */
int64_t
zkl_data_dec(const char *d, int n)
{
    uint64_t v;

    if (d == NULL || n <= 0 ||
        !ascii_udec(d, (size_t)n, 18, (uint64_t)INT64_MAX, &v)) {
        return -1;
    }
    return (int64_t)v;
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
void
zkl_answer(struct zk_req *r, enum lock_result res, int64_t fence,
           int64_t ttl_ms)
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
    struct zk_call *c = zkl_call_new(r->z, ZK_S_LOCAL, r, NULL);

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
        c = zkl_call_new(z, ZK_S_ROOT, NULL, NULL);
        if (c == NULL || (c->path = strndup(z->root, i)) == NULL) {
            free(c);
            return;
        }
        zkl_send_create(z, c, c->path, "", 0, false);
    }
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
        zkl_sweep_all(z);
    } else if (st == ZK_CONN_EXPIRED) {
        log_warn("locks: zookeeper: the session ended: every lease of it is "
                 "lost; starting a new one");
        zkl_leases_lost(z);
    } else {
        log_warn("locks: zookeeper: connection lost: lock calls are 503 "
                 "until it is back");
    }
}

void
zkl_on_watch(struct zk_locks *z, struct zk_call *c)
{
    char *name;
    size_t len;

    if (c->str != NULL && zkl_name_of(z, c->str, &name, &len)) {
        zkl_tell_freed(z, name, len);
        free(name);
    }
}

/* ---- dispatch ----------------------------------------------------------- */

static void
dispatch_req(struct zk_req *r, struct zk_call *c)
{
    switch (c->step) {
    case ZK_S_CREATE:
        zkl_on_create(r, c);
        break;
    case ZK_S_CHILDREN:
        if (r->kind != LOCK_OP_ACQUIRE) {
            zkl_on_status_children(r, c);
            break;
        }
        r->kids_rc = c->rc;
        r->kids = c->kids;
        r->nkids = c->nkids;
        c->kids = NULL;
        c->nkids = 0;
        if (r->pending == 0) {
            zkl_acquire_decide(r, c->gen);
        }
        break;
    case ZK_S_DIR:
        zkl_on_dir(r, c);
        break;
    case ZK_S_HOLDER:
        zkl_on_holder(r, c);
        break;
    case ZK_S_SET:
        zkl_on_set(r, c);
        break;
    case ZK_S_DELETE:
        zkl_on_delete(r, c);
        break;
    case ZK_S_LOCAL:
        zkl_answer(r, (enum lock_result)c->code, c->num[0], c->num[1]);
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
        zkl_on_watch(z, c);
    } else if (c->step == ZK_S_DROP) {
        zkl_on_drop(z, c);
    } else if (c->step == ZK_S_SWEEP) {
        zkl_on_sweep(z, c);
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
    struct zk_lease *l = zkl_lease_by_name(z, r->name, r->len);
    struct zk_call *c;
    char ttl[24];

    if (l == NULL && r->kind == LOCK_OP_RELEASE) {
        /* Maybe taken through another process (one that died: its
         * session holds the node until it times out): find the holder. */
        c = zkl_call_new(z, ZK_S_CHILDREN, r, NULL);
        if (c == NULL) {
            answer_soon(r, LOCK_ERROR, 0, 0);
            return;
        }
        zkl_send_children(z, c, r->dir);
        return;
    }
    if (l == NULL || l->fence != r->fence || l->expired) {
        /* Not held here under that fence: expired, released, or ended
         * with a session; an extend also when taken through another
         * process, whose session alone keeps the node. */
        answer_soon(r, LOCK_LOST, r->fence, 0);
        return;
    }
    c = zkl_call_new(z, r->kind == LOCK_OP_EXTEND ? ZK_S_SET : ZK_S_DELETE, r,
                     l->path);
    if (c == NULL) {
        answer_soon(r, LOCK_ERROR, 0, 0);
        return;
    }
    l->busy++;
    if (r->kind == LOCK_OP_RELEASE) {
        zkl_send_delete(z, c);
        return;
    }
    snprintf(ttl, sizeof(ttl), "%" PRId64, r->ttl_ms);
    zkl_sent(z, c,
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
    own = zkl_lease_by_name(z, r->name, r->len);
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
            answer_soon(r, LOCK_BUSY, own->fence, zkl_lease_left(own));
            return;
        }
        zkl_acquire_send(r);
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
            answer_soon(r, LOCK_OK, own->fence, zkl_lease_left(own));
            return;
        }
        c = zkl_call_new(z, ZK_S_CHILDREN, r, NULL);
        if (c == NULL) {
            answer_soon(r, LOCK_ERROR, 0, 0);
            return;
        }
        zkl_send_children(z, c, r->dir);
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
    htab_fini(&z->leases);
    htab_fini(&z->lease_paths);
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
    if (!htab_init(&z->leases, 64, tm_seed(z)) ||
        !htab_init(&z->lease_paths, 64, tm_seed(&z->lease_paths))) {
        snprintf(err, errlen, "locks: out of memory");
        zk_free(z);
        return NULL;
    }
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
    zkl_leases_lost(z);
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
