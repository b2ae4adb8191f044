/* lock.h: the lock service's backends. A lock is a lease with a fencing
 * counter that never goes down (across release, expiry and restarts),
 * behind a table of function pointers; the core never knows which
 * backend it talks to. */
#ifndef TM_LOCK_H
#define TM_LOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct evbuffer;
struct cfg_locks;

enum lock_result {
    LOCK_OK = 0, /* done; fence and ttl_ms describe the caller's lease */
    LOCK_BUSY,   /* acquire: another lease is live (its fence, ttl left) */
    LOCK_LOST,   /* extend, release: the lease is gone or another's */
    LOCK_NONE,   /* get: no live lease (fence: the counter, 0 if none) */
    LOCK_ERROR,  /* the backend cannot be used; nothing was changed */
};

/* Called once per operation, on the loop thread, never from inside the
 * call that started it. fence: the lease's fence; ttl_ms: the time left
 * on it in milliseconds (for LOCK_OK after acquire/extend: the ttl
 * granted). */
typedef void (*lock_cb)(void *arg, enum lock_result res, int64_t fence,
                        int64_t ttl_ms);

struct lock_backend;

/* What one operation does. Every write (acquire, extend, release) is
 * durable before its callback runs: a fence handed out is never handed
 * out again. */
enum lock_kind {
    /* Take the lease when none is live: the fence becomes the counter
     * plus one, or min_fence when that is higher (0: no floor), and the
     * counter follows. The lock service passes the resource's mark plus
     * one, so a fence is never one that a mark already holds. LOCK_OK or
     * LOCK_BUSY. */
    LOCK_OP_ACQUIRE = 0,
    /* Reset a live lease whose fence is fence to ttl_ms from now. LOCK_OK
     * or LOCK_LOST. */
    LOCK_OP_EXTEND,
    /* End a live lease whose fence is fence; the counter stays. LOCK_OK
     * or LOCK_LOST (then nothing changed). */
    LOCK_OP_RELEASE,
    /* The live lease: LOCK_OK with its fence and time left, or
     * LOCK_NONE. */
    LOCK_OP_STATUS,
};

/* One operation on one lease, and whom to answer. The backend copies
 * what it keeps (the name too): op may go once submit returns. */
struct lock_op {
    enum lock_kind kind;
    const char *name; /* len bytes */
    size_t len;
    int64_t ttl_ms;    /* acquire, extend: >= 1 */
    int64_t fence;     /* extend, release: the caller's lease (>= 1) */
    int64_t min_fence; /* acquire: the lowest fence to hand out, 0: none */
    lock_cb cb;
    void *arg;
};

struct lock_ops {
    const char *name;
    /* Open with cfg on base. NULL on failure with a message in err. */
    struct lock_backend *(*open)(struct event_base *base,
                                 const struct cfg_locks *cfg, char *err,
                                 size_t errlen);
    /* Start op; op->cb runs once with the outcome. */
    void (*submit)(struct lock_backend *b, const struct lock_op *op);
    /* false while the backend cannot be used. */
    bool (*ready)(struct lock_backend *b);
    /* Optional (NULL: none). Append the backend's own families to out,
     * named tidemark_lock_<name>_* in metrics.h's table and written with
     * its metrics_head and metrics_sample. Loop thread. */
    void (*metrics)(struct lock_backend *b, struct evbuffer *out);
    /* Answer every queued operation (callbacks run before this returns),
     * then release everything. Loop thread, not from a callback. */
    void (*close)(struct lock_backend *b);
};

/* The backend registered under name ("lmdb", ...), or NULL. */
const struct lock_ops *lock_find(const char *name);

#endif
