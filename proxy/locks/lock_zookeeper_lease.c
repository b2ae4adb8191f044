/* lock_zookeeper_lease.c: the ZooKeeper backend's leases: the table of
 * those this process holds, their TTL timers, extend and release, and
 * the sweeps of nodes that lost answers left behind. */
#include "lock_zookeeper.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <zookeeper/zookeeper.h>

#include "../log.h"

/* ---- leases and sweeps -------------------------------------------------- */

struct zk_lease *
zkl_lease_by_path(struct zk_locks *z, const char *path)
{
    struct hnode *n;
    size_t len;

    if (path == NULL) {
        return NULL;
    }
    len = strlen(path);
    n = htab_find(&z->lease_paths, path, len,
                  htab_key(&z->lease_paths, path, len));
    return n != NULL ? HTAB_ENTRY(n, struct zk_lease, by_path) : NULL;
}

struct zk_lease *
zkl_lease_by_name(struct zk_locks *z, const char *name, size_t len)
{
    struct hnode *n =
        htab_find(&z->leases, name, len, htab_key(&z->leases, name, len));

    return n != NULL ? HTAB_ENTRY(n, struct zk_lease, by_name) : NULL;
}

/* Take l out of the table by path and free it (its node is not
 * touched); out of the one by name already. */
static void
lease_gone(struct zk_lease *l)
{
    htab_del(&l->z->lease_paths, &l->by_path);
    event_free(l->timer);
    free(l->path);
    free(l);
}

static void
lease_free(struct zk_lease *l)
{
    htab_del(&l->z->leases, &l->by_name);
    lease_gone(l);
}

int64_t
zkl_lease_left(const struct zk_lease *l)
{
    int64_t left = l->deadline - zkl_clock_ms(CLOCK_MONOTONIC);

    return left > 0 ? left : 0;
}

static void
lease_arm(struct zk_lease *l, int64_t ttl_ms)
{
    struct timeval tv = {(time_t)(ttl_ms / 1000),
                         (suseconds_t)(ttl_ms % 1000) * 1000};

    l->deadline = zkl_clock_ms(CLOCK_MONOTONIC) + ttl_ms;
    evtimer_add(l->timer, &tv);
}

void
zkl_sweep_add(struct zk_locks *z, const char *dir, const char *prefix)
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
void
zkl_drop_node(struct zk_locks *z, const char *path, const char *name,
              size_t len)
{
    struct zk_call *c = zkl_call_new(z, ZK_S_DROP, NULL, path);

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
    zkl_send_delete(z, c);
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
    zkl_drop_node(z, path, l->name, l->len);
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
struct zk_lease *
zkl_lease_add(struct zk_req *r)
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
    htab_add(&z->leases, &l->by_name, l->name, l->len,
             htab_key(&z->leases, l->name, l->len));
    htab_add(&z->lease_paths, &l->by_path, l->path, strlen(l->path),
             htab_key(&z->lease_paths, l->path, strlen(l->path)));
    lease_arm(l, r->ttl_ms);
    return l;
}

/* Drained from the table by name: the rest of lease_free. */
static void
lease_lost(struct hnode *n, void *arg)
{
    (void)arg;
    lease_gone(HTAB_ENTRY(n, struct zk_lease, by_name));
}

/* The session ended: ZooKeeper deleted every node of it, so every lease
 * of this process is lost, and nothing is left to sweep. */
void
zkl_leases_lost(struct zk_locks *z)
{
    htab_drain(&z->leases, lease_lost, NULL);
    sweeps_free(z);
}

void
zkl_tell_freed(struct zk_locks *z, const char *name, size_t len)
{
    if (z->freed != NULL && !z->closing) {
        z->freed(z->freed_arg, name, len);
    }
}

/* ---- extend, release ----------------------------------------------------- */

/* An extend or release came back: the lease it was about, if this
 * process still holds it. */
static struct zk_lease *
lease_back(struct zk_locks *z, struct zk_call *c)
{
    struct zk_lease *l = zkl_lease_by_path(z, c->path);

    if (l != NULL) {
        l->busy--;
    }
    return l;
}

void
zkl_on_set(struct zk_req *r, struct zk_call *c)
{
    struct zk_lease *l = lease_back(r->z, c);

    if (c->rc == ZOK && l != NULL) {
        l->expired = false;
        lease_arm(l, r->ttl_ms);
        zkl_answer(r, LOCK_OK, r->fence, r->ttl_ms);
        return;
    }
    if (c->rc == ZOK || c->rc == ZNONODE || c->rc == ZSESSIONEXPIRED) {
        /* The session ended (ZooKeeper deleted its nodes), or the node
         * was deleted: the lease is gone. */
        if (l != NULL) {
            lease_free(l);
        }
        zkl_answer(r, LOCK_LOST, r->fence, 0);
        return;
    }
    zkl_answer(r, LOCK_ERROR, 0, 0);
    if (l != NULL && l->expired) {
        lease_expire(l);
    }
}

void
zkl_on_delete(struct zk_req *r, struct zk_call *c)
{
    struct zk_lease *l = lease_back(r->z, c);

    if (c->rc == ZOK || c->rc == ZNONODE || c->rc == ZBADVERSION ||
        c->rc == ZSESSIONEXPIRED) {
        if (l != NULL) {
            lease_free(l);
        }
        zkl_answer(r, c->rc == ZOK ? LOCK_OK : LOCK_LOST, r->fence, 0);
        return;
    }
    zkl_answer(r, LOCK_ERROR, 0, 0);
    if (l != NULL && l->expired) {
        lease_expire(l);
    }
}

/* Look for nodes that lost answers left behind. */
void
zkl_sweep_all(struct zk_locks *z)
{
    struct zk_sweep *todo = z->sweeps;

    z->sweeps = NULL;
    while (todo != NULL) {
        struct zk_sweep *s = todo;
        struct zk_call *c = zkl_call_new(z, ZK_S_SWEEP, NULL, s->dir);

        todo = s->next;
        if (c == NULL) {
            s->next = z->sweeps;
            z->sweeps = s;
            continue;
        }
        c->name = s->prefix;
        free(s->dir);
        free(s);
        zkl_send_children(z, c, c->path);
    }
}

void
zkl_on_sweep(struct zk_locks *z, struct zk_call *c)
{
    char *name = NULL;
    size_t len = 0;
    size_t pl = strlen(c->name);

    if (c->rc == ZNONODE) {
        return;
    }
    if (c->rc != ZOK) {
        if (c->gen == zk_conn_gen(z->k) && !z->closing) {
            zkl_sweep_add(z, c->path, c->name);
        }
        return;
    }
    if (!zkl_name_of(z, c->path, &name, &len)) {
        name = NULL;
    }
    for (int i = 0; i < c->nkids; i++) {
        if (strncmp(c->kids[i], c->name, pl) == 0) {
            char *path = zk_path_join(c->path, c->kids[i]);

            if (path != NULL) {
                log_info("locks: zookeeper: deleting %s, left by a lost "
                         "answer",
                         LOG_STR(path));
                zkl_drop_node(z, path, name, len);
                free(path);
            }
        }
    }
    free(name);
}

void
zkl_on_drop(struct zk_locks *z, struct zk_call *c)
{
    if (c->rc == ZOK || c->rc == ZNONODE) {
        if (c->name != NULL) {
            zkl_tell_freed(z, c->name, c->len);
        }
        return;
    }
    if (zk_rc_outage(c->rc)) {
        char *slash = strrchr(c->path, '/');

        if (c->gen == zk_conn_gen(z->k) && !z->closing && slash != NULL) {
            *slash = '\0';
            zkl_sweep_add(z, c->path, slash + 1);
        }
        return;
    }
    log_warn("locks: zookeeper: cannot delete %s: %s", LOG_STR(c->path),
             zerror(c->rc));
}
