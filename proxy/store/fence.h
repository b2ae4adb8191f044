/* fence.h: the fence service between the data path (and the lock service)
 * and the mark store: the one owner of the store handle, the mark cache
 * and the rules about them. */
#ifndef TM_FENCE_H
#define TM_FENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

struct event_base;
struct evbuffer;
struct cfg_store;
struct metrics;
struct fence;
struct fence_call;

/* The answer to fence_raise or fence_get, once, on the loop thread and
 * never from inside the call that asked. Same meaning as store_cb. */
typedef void (*fence_cb)(void *arg, enum store_result res, int64_t mark);

/* Open the store ops on base with cfg, and a cache of
 * cfg->cache_entries marks. Every raise's time and outcome go to m.
 * NULL on failure with a message in err. */
struct fence *fence_open(struct event_base *base, const struct store_ops *ops,
                         const struct cfg_store *cfg, struct metrics *m,
                         char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Close the store (the callbacks of its pending calls run now, except
 * those cancelled), then free. Loop thread, not from a callback. NULL is
 * fine. */
void fence_close(struct fence *f);

/* The store's backend name ("lmdb", ...), for labels. */
const char *fence_backend(const struct fence *f);

/* false while the store cannot be used. */
bool fence_ready(struct fence *f);

/* Whether the store held no mark when it was opened (false when the
 * backend cannot tell). */
bool fence_fresh(struct fence *f);

/* Append the store backend's own counters to out (Prometheus text). */
void fence_stats(struct fence *f, struct evbuffer *out);

/* What the cache knows of res's mark before the store is asked, as the
 * input of decide_request for token: a lower bound of the durable mark
 * (0: nothing known; always 0 for an empty name). A token below it is
 * stale; equal to it, durable already, except on a shared store, where
 * another sidecar may have raised the mark since: there the bound is
 * lowered below the token, so that the store is asked again. No
 * allocation, no I/O. */
int64_t fence_check(struct fence *f, const char *res, size_t len,
                    int64_t token);

/* fence_check, and when the cache does not know res, the mark the store
 * reads at once where it can (the lmdb store's file, on this thread:
 * ops->peek), kept in the cache: what a refusal of a token the cache
 * does not hold costs is one read, not a raise through the writer. On
 * every other store, or when the read fails, fence_check's answer. No
 * allocation beyond the cache's. */
int64_t fence_bound(struct fence *f, const char *res, size_t len,
                    int64_t token);

/* Ask the store to raise res (len bytes, copied) to token (>= 1), and
 * answer cb(arg, ...) with the outcome the data path may act on:
 * - accepted with mark == token, unless the cache knows a higher mark by
 *   the time the answer comes (a store with several connections answered
 *   a lower token after a higher one): then stale with that mark, since a
 *   newer write may be on its way to the backend already;
 * - stale with the mark;
 * - STORE_ERROR.
 * Every answered mark goes into the cache, also when nobody waits any
 * more. NULL when out of memory (cb is never called). */
struct fence_call *fence_raise(struct fence *f, const char *res, size_t len,
                               int64_t token, fence_cb cb, void *arg)
    __attribute__((warn_unused_result));

/* Raise the subtree mark (profile.h: dav_below_name) of every
 * collection above res (dav_parent_len, up to the first segment) to
 * token, all in one go, those the cache already knows at token or above
 * left out. cb answers once: STORE_ACCEPTED (mark 0) when each is at
 * token or above, STORE_ERROR when one could not be raised. When none
 * needs asking, *asked is false, NULL is returned and cb never runs.
 * NULL with *asked true when out of memory (cb never runs). */
struct fence_call *fence_raise_above(struct fence *f, const char *res,
                                     size_t len, int64_t token, bool *asked,
                                     fence_cb cb, void *arg)
    __attribute__((warn_unused_result));

/* Raise res to token as fence_raise does, and with it, in one go, the
 * subtree marks above res as fence_raise_above does. cb answers once,
 * with res's outcome; a failed subtree raise makes an accepted one
 * STORE_ERROR. NULL when out of memory (cb never runs). */
struct fence_call *fence_raise_tree(struct fence *f, const char *res,
                                    size_t len, int64_t token, fence_cb cb,
                                    void *arg)
    __attribute__((warn_unused_result));

/* Whether some route keeps subtree marks (screen_keeps_trees): then a
 * lock's new holder raises the subtree marks above its resource too
 * (fence_raise_holder), and new fences start above the subtree mark
 * (fence_get_floor). */
void fence_keep_trees(struct fence *f, bool on);

/* A lock's new holder (eager fencing, a [watch]): raise res to its
 * fence, with fence_raise_tree while subtree marks are kept, else with
 * fence_raise. */
struct fence_call *fence_raise_holder(struct fence *f, const char *res,
                                      size_t len, int64_t token, fence_cb cb,
                                      void *arg)
    __attribute__((warn_unused_result));

/* The caller stops waiting for fc: its cb will not run (the store's answer
 * still updates the cache). fc must be a raise whose cb has not run. */
void fence_cancel(struct fence_call *fc);

/* Read res's mark from the store: STORE_ACCEPTED with the mark (0 when
 * none), or STORE_ERROR. The mark read goes into the cache, and the
 * answer is never below the cached mark (a store that lost marks, as
 * Redis on a failover, does not take back a mark this process has
 * enforced). false when out of memory (cb is never called). */
bool fence_get(struct fence *f, const char *res, size_t len, fence_cb cb,
               void *arg) __attribute__((warn_unused_result));

/* The floor of a new fence for res: fence_get's answer, and while
 * subtree marks are kept the higher of res's mark and its subtree mark
 * (both read from the store; STORE_ERROR when one cannot be). false
 * when out of memory (cb never runs). */
bool fence_get_floor(struct fence *f, const char *res, size_t len, fence_cb cb,
                     void *arg) __attribute__((warn_unused_result));

#endif
