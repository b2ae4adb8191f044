/* lock_zookeeper_acquire.c: ZooKeeper's lock recipe: an acquire creates
 * its node and reads the lock's children, the lowest child holds the
 * lock (its czxid the fence), a busy try deletes its node and watches the
 * holder's; a status reads the holder. */
#include "lock_zookeeper.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <zookeeper/zookeeper.h>

#include "../../policies/zkname.h"
#include "../log.h"

/* ---- acquire ------------------------------------------------------------ */

/* Create r's node and read the lock's children: one round trip, since a
 * session's requests are answered in order and its reads see its own
 * writes, so the children include the node. */
void
zkl_acquire_send(struct zk_req *r)
{
    struct zk_locks *z = r->z;
    struct zk_call *mk, *ls;
    char ttl[24], *path;
    const clientid_t *id = ZH(z) != NULL ? zoo_client_id(ZH(z)) : NULL;

    snprintf(r->prefix, sizeof(r->prefix), "%016" PRIx64 "-%" PRIx64 "-lock-",
             id != NULL ? (uint64_t)id->client_id : 0, ++z->counter);
    path = zk_path_join(r->dir, r->prefix);
    mk = path != NULL ? zkl_call_new(z, ZK_S_CREATE, r, NULL) : NULL;
    ls = mk != NULL ? zkl_call_new(z, ZK_S_CHILDREN, r, NULL) : NULL;
    if (ls == NULL) {
        if (mk != NULL) {
            r->pending--;
            zk_call_free(mk);
        }
        free(path);
        log_error("locks: zookeeper: %s: out of memory",
                  LOG_ESC(r->name, r->len));
        zkl_answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    r->create_rc = ZOK;
    r->kids_rc = ZOK;
    snprintf(ttl, sizeof(ttl), "%" PRId64, r->ttl_ms);
    zkl_send_create(z, mk, path, ttl, ZOO_EPHEMERAL_SEQUENTIAL, true);
    zkl_send_children(z, ls, r->dir);
    free(path);
}

/* The lock's znode is missing (never made, or removed as an empty
 * container): make it, then try again. */
static void
acquire_mkdir(struct zk_req *r)
{
    struct zk_call *c = zkl_call_new(r->z, ZK_S_DIR, r, r->dir);

    if (c == NULL) {
        zkl_answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    r->tries++;
    zk_kids_free(r->kids, r->nkids);
    r->kids = NULL;
    r->nkids = 0;
    zkl_send_create(r->z, c, r->dir, "", ZOO_CONTAINER, false);
}

/* Busy: read the holder's node (its czxid and TTL) with a watch, so
 * that its end wakes this process's waiters (zkl_on_watch). */
static void
acquire_busy(struct zk_req *r, const char *first)
{
    char *path = zk_path_join(r->dir, first);
    struct zk_call *c =
        path != NULL ? zkl_call_new(r->z, ZK_S_HOLDER, r, path) : NULL;
    struct zk_locks *z = r->z;

    free(path);
    if (c == NULL) {
        zkl_answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    zkl_sent(z, c,
             ZH(z) != NULL ? zoo_awget(ZH(z), c->path, zk_conn_watcher,
                                       zk_conn_ctx(z->k), zk_done_data, c)
                           : ZCLOSING);
}

/* Both answers of zkl_acquire_send are in: decide. */
void
zkl_acquire_decide(struct zk_req *r, uint64_t gen)
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
            zkl_sweep_add(z, r->dir, r->prefix);
        }
        log_warn("locks: zookeeper: %s: create: %s", LOG_ESC(r->name, r->len),
                 zerror(r->create_rc));
        zkl_answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    if (r->kids_rc != ZOK) {
        log_warn("locks: zookeeper: %s: children: %s", LOG_ESC(r->name, r->len),
                 zerror(r->kids_rc));
        zkl_drop_node(z, r->node, NULL, 0);
        zkl_answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    switch (zkname_turn(r->dir, r->node, r->kids, r->nkids, &first)) {
    case ZKNAME_FOREIGN:
        /* Not a child of the lock's node (a peer's bad answer): ours, if
         * it was made, is found by name once connected again. */
        zkl_sweep_add(z, r->dir, r->prefix);
        zkl_answer(r, LOCK_ERROR, 0, 0);
        return;
    case ZKNAME_NO_HOLDER:
        zkl_drop_node(z, r->node, NULL, 0);
        zkl_answer(r, LOCK_ERROR, 0, 0);
        return;
    case ZKNAME_BEHIND:
        zkl_drop_node(z, r->node, NULL, 0);
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
        zkl_drop_node(z, r->node, NULL, 0);
        zkl_answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    if (zkl_lease_add(r) == NULL) {
        zkl_drop_node(z, r->node, NULL, 0);
        zkl_answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    zkl_answer(r, LOCK_OK, r->czxid, r->ttl_ms);
}

void
zkl_on_create(struct zk_req *r, struct zk_call *c)
{
    r->create_rc = c->rc;
    if (c->rc == ZOK) {
        r->node = c->str;
        c->str = NULL;
        r->czxid = c->stat.czxid;
    }
    if (r->pending == 0) {
        zkl_acquire_decide(r, c->gen);
    }
}

void
zkl_on_dir(struct zk_req *r, struct zk_call *c)
{
    if (c->rc == ZOK || c->rc == ZNODEEXISTS) {
        zkl_acquire_send(r);
        return;
    }
    log_warn("locks: zookeeper: cannot create %s: %s", LOG_STR(c->path),
             zerror(c->rc));
    zkl_answer(r, LOCK_ERROR, 0, 0);
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
        zkl_answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    if (c->rc == ZNONODE || c->stat.czxid != r->fence) {
        zkl_answer(r, LOCK_LOST, r->fence, 0);
        return;
    }
    d = zkl_call_new(z, ZK_S_DELETE, r, c->path);
    if (d == NULL) {
        zkl_answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    zkl_sent(z, d,
             ZH(z) != NULL
                 ? zoo_adelete(ZH(z), d->path, c->stat.version, zk_done_void, d)
                 : ZCLOSING);
}

/* The first child's node came back: for a busy acquire the holder's
 * fence and time left, for a lookup the answer. */
void
zkl_on_holder(struct zk_req *r, struct zk_call *c)
{
    struct zk_locks *z = r->z;
    struct zk_lease *own = zkl_lease_by_path(z, c->path);
    int64_t ttl = zkl_data_dec(c->data, c->data_len), left;

    if (r->kind == LOCK_OP_RELEASE) {
        release_other(r, c);
        return;
    }
    if (c->rc == ZNONODE) {
        if (r->kind == LOCK_OP_STATUS) {
            zkl_answer(r, LOCK_NONE, 0, 0);
            return;
        }
        /* Gone between the two reads: try again at once. */
        zkl_answer(r, LOCK_BUSY, 0, 1);
        zkl_tell_freed(z, r->name, r->len);
        return;
    }
    if (c->rc != ZOK) {
        zkl_answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    if (own != NULL) {
        left = zkl_lease_left(own);
    } else if (ttl >= 0) {
        /* mtime is the leader's clock at the last create or extend. */
        left = zkname_left(ttl, c->stat.mtime, zkl_clock_ms(CLOCK_REALTIME));
    } else {
        left = -1; /* not one of ours: no TTL */
    }
    if (r->kind == LOCK_OP_STATUS) {
        zkl_answer(r, LOCK_OK, c->stat.czxid, left > 0 ? left : 0);
        return;
    }
    /* A holder past its TTL (its tidemark is cut off, or it is not
     * tidemark's) ends at the latest with its session. */
    zkl_answer(r, LOCK_BUSY, c->stat.czxid, left > 0 ? left : z->session_ms);
}

/* ---- status ------------------------------------------------------------- */

void
zkl_on_status_children(struct zk_req *r, struct zk_call *c)
{
    const char *first;
    char *path;
    struct zk_call *g;
    struct zk_locks *z = r->z;

    if (c->rc != ZOK && c->rc != ZNONODE) {
        zkl_answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    first = c->rc == ZOK ? zkl_first_kid(c->kids, c->nkids) : NULL;
    if (first == NULL) {
        zkl_answer(r, r->kind == LOCK_OP_STATUS ? LOCK_NONE : LOCK_LOST,
                   r->fence, 0);
        return;
    }
    path = zk_path_join(r->dir, first);
    g = path != NULL ? zkl_call_new(z, ZK_S_HOLDER, r, path) : NULL;
    free(path);
    if (g == NULL) {
        zkl_answer(r, LOCK_ERROR, 0, 0);
        return;
    }
    zkl_sent(z, g,
             ZH(z) != NULL ? zoo_aget(ZH(z), g->path, 0, zk_done_data, g)
                           : ZCLOSING);
}
