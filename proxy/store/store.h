/* store.h: the durable mark. Every backend implements one atomic
 * operation, raise(resource, token) -> accepted | stale(mark) | error,
 * behind a table of function pointers; the core never knows which one it
 * talks to. */
#ifndef TM_STORE_H
#define TM_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct evbuffer;
struct cfg_store;

enum store_result {
    STORE_ACCEPTED = 0, /* token >= mark; the mark is token, durably */
    STORE_STALE,        /* token < mark; mark holds the current mark */
    STORE_ERROR,        /* unknown: treat as unavailable */
};

/* Called once per raise or get, always on the event loop's thread and
 * never from inside the raise/get call itself. mark: the mark after the
 * operation (for get: the mark, 0 when the resource has none). */
typedef void (*store_cb)(void *arg, enum store_result res, int64_t mark);

struct store;

struct store_ops {
    const char *name;
    /* Other processes may raise the marks too (many sidecars on one
     * store): a cached mark is still a lower bound, but a token equal to
     * it proves nothing and must be asked. */
    bool shared;
    /* Open with cfg on base. NULL on failure with a message in err. */
    struct store *(*open)(struct event_base *base, const struct cfg_store *cfg,
                          char *err, size_t errlen);
    /* Raise res (len bytes, not NUL-terminated necessarily; copied) to
     * token (>= 1). Accepted means durable: on stable storage. */
    void (*raise)(struct store *s, const char *res, size_t len, int64_t token,
                  store_cb cb, void *arg);
    /* Read the mark of res: STORE_ACCEPTED with the mark (0 when res
     * has none), or STORE_ERROR. */
    void (*get)(struct store *s, const char *res, size_t len, store_cb cb,
                void *arg);
    /* Optional (NULL: none). Read the mark of res here and now, for a
     * store that can without waiting (a local file, not a network):
     * true with *mark (0 when res has none), false when it cannot (then
     * ask through get or raise). The mark holds every raise already
     * answered and only durable marks, as get's does. Loop thread; no
     * callback, no allocation. */
    bool (*peek)(struct store *s, const char *res, size_t len, int64_t *mark);
    /* false while the store cannot be used (failed sync, unreachable). */
    bool (*ready)(struct store *s);
    /* Optional (NULL: none). Append the backend's own families to out,
     * named tidemark_<name>_* in metrics.h's table and written with its
     * metrics_head and metrics_sample. Loop thread. */
    void (*metrics)(struct store *s, struct evbuffer *out);
    /* Optional (NULL: never). Whether the store held no mark when it was
     * opened: then no fenced write can have been forwarded through it
     * before this process. */
    bool (*fresh)(struct store *s);
    /* Finish every queued raise (their callbacks run before this
     * returns), then release everything. Call it on the loop thread,
     * not from inside a store callback; raises and gets made by the
     * callbacks it runs are answered STORE_ERROR. */
    void (*close)(struct store *s);
};

/* The backend registered under type ("lmdb", ...), or NULL. */
const struct store_ops *store_find(const char *type);

/* ---- for the network stores ---- */

struct coldq;
struct defer;

/* Answer cb(arg, res, mark) on a later pass of d's loop. Allocates one
 * small record; when that fails the answer is lost and the caller's
 * [store] timeout_ms answers instead (logged). */
void store_defer(struct defer *d, store_cb cb, void *arg, enum store_result res,
                 int64_t mark);

/* A raise (is_get false) or get on st, parked while q waits for the
 * store's first connection: made again through ops when it is up,
 * answered STORE_ERROR otherwise. Copies res. false (cb never called)
 * when q does not wait, is full or out of memory. */
bool store_park(struct coldq *q, struct store *st, const struct store_ops *ops,
                bool is_get, const char *res, size_t len, int64_t token,
                store_cb cb, void *arg) __attribute__((warn_unused_result));

#endif
