/* batch.h: the calls a network store sends together: a queue of raises
 * and gets, taken a batch at a time, sorted by key, one entry per distinct
 * key with the highest token, and each answer fanned back to every
 * waiter. The Postgres and etcd stores build their statements on it. */
#ifndef TM_BATCH_H
#define TM_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../clients/queue.h"
#include "store.h"

/* One raise or get waiting for the store. */
struct batch_req {
    struct batch_req *next;
    store_cb cb;
    void *arg;
    int64_t token; /* raise: the token; get: 0 */
    bool is_get;
    enum store_result res; /* the answer; STORE_ERROR until settled */
    int64_t mark;
    size_t nlen;      /* the resource name, for log lines */
    const char *name; /* key itself, or after it when they differ */
    size_t klen;      /* the key the store keeps */
    char key[];       /* key, then name when they differ, then a NUL */
};

struct batch_list {
    QUEUE_FIELDS(struct batch_req);
};

/* A call for the resource res (len bytes). key (klen bytes) is what the
 * store keeps under, NULL: res itself. Copies both; one allocation, freed
 * by batch_answer (or free). NULL when out of memory. */
struct batch_req *batch_req_new(const char *res, size_t len, const char *key,
                                size_t klen, int64_t token, bool is_get,
                                store_cb cb, void *arg)
    __attribute__((warn_unused_result));

/* Move calls from the head of pending to the end of batch (empty): a get
 * alone, or raises in arrival order while batch holds fewer than
 * max_raises and at most max_keys distinct keys (SIZE_MAX: no bound, and
 * no scan). Returns how many were taken. */
size_t batch_take(struct batch_list *pending, struct batch_list *batch,
                  size_t max_raises, size_t max_keys);

/* Reorder batch by key (bytes, then length), so that each key's raises
 * follow each other, in one byte order for every batch and every
 * sidecar. scratch holds batch->n pointers. Returns the number of
 * distinct keys. */
size_t batch_sort(struct batch_list *batch, struct batch_req **scratch);

/* In a sorted batch, the raises of first's key run from first to the
 * returned request (the first of the next key, NULL at the end); *top is
 * their highest token: the one value the store is asked to raise to. */
struct batch_req *batch_group(struct batch_req *first, int64_t *top);

/* In a sorted batch, the first request whose key is key (klen bytes),
 * or NULL. The look starts at from (NULL: the head; else the first
 * request of its key, such as the end batch_group returned), goes to
 * the end, then from the head up to from: answers that come in the
 * batch's own order, each looked for from where the last one's group
 * ended, cost a step each instead of a walk of the batch. */
struct batch_req *batch_find(const struct batch_list *batch,
                             struct batch_req *from, const char *key,
                             size_t klen);

/* Settle the raises from first to end (one key's group) from the key's
 * mark after the batch: a raise whose token is the mark is accepted,
 * one below it stale with the mark; as in one serial order of the
 * group, highest token first. A mark below a token cannot be the
 * store's answer to it: that raise stays STORE_ERROR (logged with who). */
void batch_settle(struct batch_req *first, struct batch_req *end, int64_t mark,
                  const char *who);

/* Run every callback of l in order with its answer, freeing each; l is
 * left empty. Callbacks may queue new calls elsewhere. */
void batch_answer(struct batch_list *l);

/* batch_answer with STORE_ERROR for every call. */
void batch_fail(struct batch_list *l);

#endif
