/* batch.c: queue, sort, dedupe and answer the raises a network store
 * sends in one statement or transaction. */
#include "batch.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../log.h"

struct batch_req *
batch_req_new(const char *res, size_t len, const char *key, size_t klen,
              int64_t token, bool is_get, store_cb cb, void *arg)
{
    bool keyed = key != NULL;
    size_t extra = keyed ? len : 0;
    struct batch_req *r;

    if (!keyed) {
        key = res;
        klen = len;
    }
    if (klen > SIZE_MAX / 2 - sizeof(*r) || extra > SIZE_MAX / 2) {
        return NULL;
    }
    r = malloc(sizeof(*r) + klen + extra + 1);
    if (r == NULL) {
        return NULL;
    }
    *r = (struct batch_req){.cb = cb,
                            .arg = arg,
                            .token = token,
                            .is_get = is_get,
                            .res = STORE_ERROR,
                            .nlen = len,
                            .klen = klen};
    if (klen > 0) {
        memcpy(r->key, key, klen);
    }
    if (extra > 0) {
        memcpy(r->key + klen, res, extra);
    }
    r->key[klen + extra] = '\0';
    r->name = keyed ? r->key + klen : r->key;
    return r;
}

static int
key_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);

    if (c != 0) {
        return c;
    }
    return alen < blen ? -1 : alen > blen;
}

static bool
same_key(const struct batch_req *a, const struct batch_req *b)
{
    return a->klen == b->klen && memcmp(a->key, b->key, a->klen) == 0;
}

static int
req_cmp(const void *x, const void *y)
{
    const struct batch_req *a = *(const struct batch_req *const *)x;
    const struct batch_req *b = *(const struct batch_req *const *)y;

    return key_cmp(a->key, a->klen, b->key, b->klen);
}

/* Whether batch has a call with r's key. */
static bool
has_key(const struct batch_list *batch, const struct batch_req *r)
{
    for (const struct batch_req *b = batch->head; b != NULL; b = b->next) {
        if (same_key(b, r)) {
            return true;
        }
    }
    return false;
}

size_t
batch_take(struct batch_list *pending, struct batch_list *batch,
           size_t max_raises, size_t max_keys)
{
    size_t keys = 0;
    struct batch_req *r;

    if (pending->head != NULL && pending->head->is_get) {
        QUEUE_POP(pending, r);
        QUEUE_PUSH(batch, r);
        return 1;
    }
    while ((r = pending->head) != NULL && !r->is_get && batch->n < max_raises) {
        if (max_keys != SIZE_MAX && !has_key(batch, r)) {
            if (keys == max_keys) {
                break;
            }
            keys++;
        }
        QUEUE_POP(pending, r);
        QUEUE_PUSH(batch, r);
    }
    return batch->n;
}

size_t
batch_sort(struct batch_list *batch, struct batch_req **scratch)
{
    size_t n = 0, keys = 0;
    struct batch_req *r;

    while (batch->head != NULL) {
        QUEUE_POP(batch, r);
        scratch[n++] = r;
    }
    qsort(scratch, n, sizeof(scratch[0]), req_cmp);
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || !same_key(scratch[i - 1], scratch[i])) {
            keys++;
        }
        QUEUE_PUSH(batch, scratch[i]);
    }
    return keys;
}

struct batch_req *
batch_group(struct batch_req *first, int64_t *top)
{
    struct batch_req *end = first->next;

    *top = first->token;
    while (end != NULL && same_key(first, end)) {
        if (end->token > *top) {
            *top = end->token;
        }
        end = end->next;
    }
    return end;
}

/* The first request from r up to (not including) end with key. */
static struct batch_req *
find_in(struct batch_req *r, const struct batch_req *end, const char *key,
        size_t klen)
{
    for (; r != end; r = r->next) {
        if (r->klen == klen && memcmp(r->key, key, klen) == 0) {
            return r;
        }
    }
    return NULL;
}

struct batch_req *
batch_find(const struct batch_list *batch, struct batch_req *from,
           const char *key, size_t klen)
{
    struct batch_req *r;

    if (from == NULL || from == batch->head) {
        return find_in(batch->head, NULL, key, klen);
    }
    r = find_in(from, NULL, key, klen);
    return r != NULL ? r : find_in(batch->head, from, key, klen);
}

void
batch_settle(struct batch_req *first, struct batch_req *end, int64_t mark,
             const char *who)
{
    for (struct batch_req *r = first; r != end; r = r->next) {
        if (mark == r->token) {
            r->res = STORE_ACCEPTED;
            r->mark = mark;
        } else if (mark > r->token) {
            r->res = STORE_STALE;
            r->mark = mark;
        } else {
            log_error("%s: raise of %s to %" PRId64 ": the store answered "
                      "%" PRId64 ", below it: refused",
                      who, LOG_ESC(r->name, r->nlen), r->token, mark);
        }
    }
}

void
batch_answer(struct batch_list *l)
{
    struct batch_req *r;

    for (;;) {
        QUEUE_POP(l, r);
        if (r == NULL) {
            break;
        }
        r->cb(r->arg, r->res, r->mark);
        free(r);
    }
}

void
batch_fail(struct batch_list *l)
{
    for (struct batch_req *r = l->head; r != NULL; r = r->next) {
        r->res = STORE_ERROR;
        r->mark = 0;
    }
    batch_answer(l);
}
