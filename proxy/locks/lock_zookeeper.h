/* lock_zookeeper.h: the ZooKeeper lock backend's state and what its files
 * share: the requests and the session (lock_zookeeper.c), the lock recipe
 * (lock_zookeeper_acquire.c) and the leases (lock_zookeeper_lease.c).
 * Internal to locks/. */
#ifndef TM_LOCK_ZOOKEEPER_H
#define TM_LOCK_ZOOKEEPER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "../../policies/htab.h"
#include "../clients/zk_conn.h"
#include "lock.h"

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
    struct hnode by_name, by_path; /* in z's two tables */
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
    struct htab leases, lease_paths; /* by name, by node path */
    struct zk_sweep *sweeps;
    struct defer *defer; /* answers when out of memory */
    lock_freed_cb freed;
    void *freed_arg;
};

/* The handle, or NULL between handles and while closing (a call sent
 * then comes back ZCLOSING). */
#define ZH(z) zk_conn_zh((z)->k)

/* ---- lock_zookeeper.c: requests, calls, answers ---- */

/* Answer r once (on the loop, from a dispatch: never inside submit). */
void zkl_answer(struct zk_req *r, enum lock_result res, int64_t fence,
                int64_t ttl_ms);

/* A call for step on path (copied; NULL: none), serving r (NULL: none).
 * NULL when out of memory. */
struct zk_call *zkl_call_new(struct zk_locks *z, enum zk_step step,
                             struct zk_req *r, const char *path);

/* Clock id now, in milliseconds. */
int64_t zkl_clock_ms(clockid_t id);

/* A decimal 0..INT64_MAX from a node's data; -1 when it is not one. */
int64_t zkl_data_dec(const char *d, int n);

/* The holder among kids: the lowest sequence number; NULL: none. */
const char *zkl_first_kid(char **kids, int n);

/* The lock name of a path under the root (ROOT/E or ROOT/E/child), into
 * out (malloc, *len bytes); false when path is not one of ours. */
bool zkl_name_of(const struct zk_locks *z, const char *path, char **out,
                 size_t *len);

/* A watched node changed or went: waiters for its lock are told. */
void zkl_on_watch(struct zk_locks *z, struct zk_call *c);

/* Send c: the children of dir, a create of path holding value, a delete
 * of c's path; each through zkl_sent (an error rc answers c later). */
void zkl_send_children(struct zk_locks *z, struct zk_call *c, const char *dir);

void zkl_send_create(struct zk_locks *z, struct zk_call *c, const char *path,
                     const char *value, int mode, bool with_stat);

void zkl_send_delete(struct zk_locks *z, struct zk_call *c);

/* c was sent with result rc (zk_conn_sent). */
void zkl_sent(struct zk_locks *z, struct zk_call *c, int rc);

/* ---- lock_zookeeper_lease.c ---- */

/* Delete our node at path, which holds or queues for the lock name (NULL:
 * unknown); when it is gone, waiters for name are told. A lost answer
 * leaves a sweep for the next connection. */
void zkl_drop_node(struct zk_locks *z, const char *path, const char *name,
                   size_t len);

/* A lease for r, whose node won. NULL when out of memory. */
struct zk_lease *zkl_lease_add(struct zk_req *r);

/* The lease this process holds at node path, or on lock name; NULL. */
struct zk_lease *zkl_lease_by_name(struct zk_locks *z, const char *name,
                                   size_t len);

struct zk_lease *zkl_lease_by_path(struct zk_locks *z, const char *path);

/* Milliseconds until l's TTL ends (0: ended). */
int64_t zkl_lease_left(const struct zk_lease *l);

/* The session ended: ZooKeeper deleted every node of it, so every lease
 * of this process is lost, and nothing is left to sweep. */
void zkl_leases_lost(struct zk_locks *z);

/* The answers of the lease steps (release, drop, extend, sweep): c is
 * the call that came back. */
void zkl_on_delete(struct zk_req *r, struct zk_call *c);

void zkl_on_drop(struct zk_locks *z, struct zk_call *c);

void zkl_on_set(struct zk_req *r, struct zk_call *c);

void zkl_on_sweep(struct zk_locks *z, struct zk_call *c);

/* Note a sweep of dir for our nodes starting with prefix. */
void zkl_sweep_add(struct zk_locks *z, const char *dir, const char *prefix);

/* Look for nodes that lost answers left behind. */
void zkl_sweep_all(struct zk_locks *z);

/* Tell the lock service that name may be free (not while closing). */
void zkl_tell_freed(struct zk_locks *z, const char *name, size_t len);

/* ---- lock_zookeeper_acquire.c ---- */

/* Both answers of zkl_acquire_send are in: decide. */
void zkl_acquire_decide(struct zk_req *r, uint64_t gen);

/* Create r's node and read the lock's children: one round trip, since a
 * session's requests are answered in order and its reads see its own
 * writes, so the children include the node. */
void zkl_acquire_send(struct zk_req *r);

/* The answers of the acquire steps: c is the call that came back. */
void zkl_on_create(struct zk_req *r, struct zk_call *c);

void zkl_on_dir(struct zk_req *r, struct zk_call *c);

/* The first child's node came back: for a busy acquire the holder's
 * fence and time left, for a lookup the answer. */
void zkl_on_holder(struct zk_req *r, struct zk_call *c);

/* A status's children came back: ask the holder's node, or answer. */
void zkl_on_status_children(struct zk_req *r, struct zk_call *c);

#endif
