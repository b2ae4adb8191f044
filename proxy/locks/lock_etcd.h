/* lock_etcd.h: the etcd lock backend's state and what its two files
 * share: requests, answers, status, extend and release (lock_etcd.c),
 * and the acquire with its wait behind older keys (lock_etcd_acquire.c).
 * Internal to locks/. */
#ifndef TM_LOCK_ETCD_H
#define TM_LOCK_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../clients/etcd_http.h"
#include "lock.h"

/*
 * Keys. A lock named N is the set of keys under "<prefix>N//" (a
 * canonical name has no empty segment, so no other name's keys start
 * so); each acquire grants a lease with the lock's TTL and creates
 * "<prefix>N//<lease in hex>" under it. The holder is the key with the
 * lowest create revision; waiters queue behind it in create-revision
 * order and each watches the key just before its own for a delete, as
 * etcd's mutex does: a release wakes one waiter, nothing polls.
 *
 * The fence is the key's create revision. etcd assigns revisions from
 * the Raft log: one per committed write, in log order, the same on every
 * member, and a new leader continues the log it was elected with (it has
 * every committed entry), so a revision is never handed out twice and
 * the next key's is higher, across leader changes and restarts.
 * Compaction drops old revisions' history; it never renumbers a live key
 * or the counter. Create-revision order is the queue's order, so each
 * holder's fence is above every earlier holder's.
 *
 * Extend is a keepalive of the holder's lease (etcd keeps the TTL it
 * granted: ttl_ms on extend cannot change it, and the answer says the
 * TTL kept); release revokes it, which deletes the key. A lease etcd no
 * longer has is LOCK_LOST: stop the work. Any call without an answer
 * (no quorum, no endpoint) is LOCK_ERROR: the service answers 503, and
 * nothing is guessed.
 */

#define EL_NAME_MAX 1024

struct etcd_locks {
    struct event_base *base;
    const struct tm_log *log;
    struct etcd_http *h;
    struct defer *defer;
    struct coldq *cold;  /* calls waiting for etcd's first answer */
    struct el_req *reqs; /* every operation not yet freed */
    char *prefix;
    size_t plen;
    bool closing;
};

struct el_req {
    struct el_req *prev, *next;
    struct etcd_locks *s;
    enum lock_kind kind;
    lock_cb cb;
    void *arg;
    int64_t ttl_ms, fence, min_fence, wait_ms;
    int64_t lease;    /* acquire: ours; extend, release, status: found */
    int64_t ttl_s;    /* granted */
    int64_t rev;      /* acquire: our key's create revision */
    int ncalls;       /* etcd calls in flight with this request as arg */
    bool answered;    /* cb has run: free once ncalls is 0 */
    bool waited;      /* queued behind another key */
    bool lease_known; /* acquire: lease holds a granted lease */
    bool in_submit;   /* answers now go through the loop (lock.h) */
    bool cleared;     /* acquire: an expired holder's lease was revoked */
    int64_t hlease;   /* acquire: the holder's lease */
    struct event *keepalive, *deadline;
    struct etcd_watch *watch;
    char *pfx; /* "<prefix>N//", plen bytes */
    size_t pfxlen;
    char *mykey; /* pfx and our lease in hex */
    size_t len;
    char name[]; /* len bytes and a NUL */
};

/* ---- lock_etcd.c ---- */

/* Answer r once; stop its wait. */
void ell_answer(struct el_req *r, enum lock_result res, int64_t fence,
                int64_t ttl_ms);

/* The holder is kv (fence and lease): its time left answers r (status,
 * or a busy acquire). */
void ell_answer_holder(struct el_req *r, const json_t *kv);

/* p[0..n) base64-encoded, as a JSON string (etcd_b64). */
json_t *ell_b64_str(const char *p, size_t n);

/* Send path(body) for r; cb answers. false after answering LOCK_ERROR. */
bool ell_call(struct el_req *r, const char *path, json_t *body, etcd_cb cb);

/* The first kv of a range answer (an object with "kvs"), or NULL. */
json_t *ell_first_kv(const json_t *range);

/* Whether kv's key is key[0..klen). */
bool ell_kv_key_is(const json_t *kv, const char *key, size_t klen);

/* A keepalive of r's lease came back: answer with the time it has left. */
void ell_on_keepalive(void *arg, const struct etcd_reply *rep);

/* A range over r's lock: every key of it, oldest first (limit: 0 all). */
json_t *ell_range_lock(const struct el_req *r, const char *order, int64_t limit,
                       int64_t min_create, int64_t max_create);

/* The reply's state for r: false (and r answered LOCK_ERROR when it was
 * not answered yet) when r is over or etcd gave no usable answer. */
bool ell_reply_ok(struct el_req *r, const struct etcd_reply *rep,
                  const char *what);

/* One of r's calls is over: free r once it is answered and none is
 * out. */
void ell_req_done(struct el_req *r);

/* response i of a txn answer, of type "response_range" etc. */
json_t *ell_txn_resp(const json_t *body, size_t i, const char *type);

/* ---- lock_etcd_acquire.c ---- */

/* One transaction creates our key under our lease. Without a wait, only
 * into an empty lock (a compare over the whole range); with one, always
 * (the recipe's compare on our own key), queueing behind older keys. */
void ell_create_key(struct el_req *r);

/* The lease for an acquire was granted: create the key under it. */
void ell_on_grant(void *arg, const struct etcd_reply *rep);

#endif
