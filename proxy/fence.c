/* fence.c: the fence service: the store handle and the mark cache behind
 * one owner, so that the data path and the lock service apply the same
 * rules (out-of-order answers, equal tokens on a shared store, the cache
 * as a floor of every read). */
#include "fence.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../conf/cfg.h"
#include "../policies/profile.h"
#include "marks.h"
#include "metrics.h"

struct fence {
    const struct store_ops *ops;
    struct store *store;
    struct marks *marks;
    struct metrics *metrics;
};

/* One raise or get in flight, or a group of raises answered as one
 * (fence_raise_above). cb is NULL once nobody waits for it. */
struct fence_call {
    struct fence *f;
    fence_cb cb;
    void *arg;
    struct fence_call *group; /* the group a raise answers to, or NULL */
    size_t pending;           /* a group: raises not answered yet */
    bool failed;              /* a group: one raise failed */
    struct timespec t0;
    size_t len;
    char res[];
};

struct fence *
fence_open(struct event_base *base, const struct store_ops *ops,
           const struct cfg_store *cfg, struct metrics *m, char *err,
           size_t errlen)
{
    struct fence *f = calloc(1, sizeof(*f));

    if (f == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    f->ops = ops;
    f->metrics = m;
    f->marks = marks_new((size_t)cfg->cache_entries);
    if (f->marks == NULL) {
        snprintf(err, errlen, "out of memory");
        free(f);
        return NULL;
    }
    f->store = ops->open(base, cfg, err, errlen);
    if (f->store == NULL) {
        marks_free(f->marks);
        free(f);
        return NULL;
    }
    return f;
}

void
fence_close(struct fence *f)
{
    if (f == NULL) {
        return;
    }
    /* Runs the callbacks of pending calls; they still reach the cache. */
    f->ops->close(f->store);
    marks_free(f->marks);
    free(f);
}

const char *
fence_backend(const struct fence *f)
{
    return f->ops->name;
}

bool
fence_ready(struct fence *f)
{
    return f->ops->ready(f->store);
}

bool
fence_fresh(struct fence *f)
{
    return f->ops->fresh != NULL && f->ops->fresh(f->store);
}

void
fence_stats(struct fence *f, struct evbuffer *out)
{
    if (f->ops->metrics != NULL) {
        f->ops->metrics(f->store, out);
    }
}

int64_t
fence_check(struct fence *f, const char *res, size_t len, int64_t token)
{
    int64_t mark = len > 0 ? marks_get(f->marks, res, len) : 0;

    if (f->ops->shared && mark > 0 && token == mark) {
        /* Another sidecar may have raised the mark past the cached one.
         * mark - 1 is still a lower bound, and makes the token a raise. */
        return mark - 1;
    }
    return mark;
}

static struct fence_call *
call_new(struct fence *f, const char *res, size_t len, fence_cb cb, void *arg)
{
    struct fence_call *fc = malloc(sizeof(*fc) + len + 1);

    if (fc == NULL) {
        return NULL;
    }
    fc->f = f;
    fc->cb = cb;
    fc->arg = arg;
    fc->group = NULL;
    fc->pending = 0;
    fc->failed = false;
    clock_gettime(CLOCK_MONOTONIC, &fc->t0);
    fc->len = len;
    memcpy(fc->res, res, len);
    fc->res[len] = '\0';
    return fc;
}

/* One raise of group g is answered (failed: STORE_ERROR); the group
 * answers once the last one is. */
static void
group_answer(struct fence_call *g, bool failed)
{
    g->failed = g->failed || failed;
    if (--g->pending > 0) {
        return;
    }
    if (g->cb != NULL) {
        g->cb(g->arg, g->failed ? STORE_ERROR : STORE_ACCEPTED, 0);
    }
    free(g);
}

static void
raised(void *arg, enum store_result res, int64_t mark)
{
    struct fence_call *fc = arg;
    struct fence *f = fc->f;

    metrics_store(f->metrics, metrics_since(&fc->t0), res != STORE_ERROR);
    if (res != STORE_ERROR && mark > 0) {
        marks_put(f->marks, fc->res, fc->len, mark);
    }
    if (res == STORE_ACCEPTED) {
        /* A store with several connections can answer a lower token
         * after a higher one on the same resource (committed in that
         * order, answered out of it). The higher one may be on its way
         * to the backend already: acting on this one now would reach
         * the backend after a newer write, so it is stale. */
        int64_t known = marks_get(f->marks, fc->res, fc->len);

        if (known > mark) {
            res = STORE_STALE;
            mark = known;
        }
    }
    if (fc->group != NULL) {
        group_answer(fc->group, res == STORE_ERROR);
    } else if (fc->cb != NULL) {
        fc->cb(fc->arg, res, mark);
    }
    free(fc);
}

struct fence_call *
fence_raise(struct fence *f, const char *res, size_t len, int64_t token,
            fence_cb cb, void *arg)
{
    struct fence_call *fc = call_new(f, res, len, cb, arg);

    if (fc == NULL) {
        return NULL;
    }
    f->ops->raise(f->store, fc->res, fc->len, token, raised, fc);
    return fc;
}

/* Add a raise of name to token to group g. false when out of memory. */
static bool
group_raise(struct fence_call *g, const char *name, size_t len, int64_t token)
{
    struct fence_call *fc = call_new(g->f, name, len, NULL, NULL);

    if (fc == NULL) {
        return false;
    }
    fc->group = g;
    g->pending++;
    g->f->ops->raise(g->f->store, fc->res, fc->len, token, raised, fc);
    return true;
}

struct fence_call *
fence_raise_above(struct fence *f, const char *res, size_t len, int64_t token,
                  bool *asked, fence_cb cb, void *arg)
{
    char name[TM_RESOURCE_MAX + DAV_BELOW_LEN + 1];
    struct fence_call *g = call_new(f, "", 0, cb, arg);
    bool ok = g != NULL;

    *asked = true;
    /* Held by the loop below until every raise is made. */
    if (ok) {
        g->pending = 1;
    }
    for (len = dav_parent_len(res, len); ok && len > 0;
         len = dav_parent_len(res, len)) {
        size_t n = dav_below_name(res, len, name, sizeof(name));

        if (n == 0 || marks_get(f->marks, name, n) >= token) {
            continue; /* too long to be a resource's parent; or known */
        }
        ok = group_raise(g, name, n, token);
    }
    if (g == NULL) {
        return NULL;
    }
    if (g->pending == 1) {
        free(g);
        *asked = !ok;
        return NULL;
    }
    if (!ok) {
        /* Those made still answer; nobody waits for them. */
        g->cb = NULL;
        group_answer(g, true);
        return NULL;
    }
    g->pending--;
    return g;
}

void
fence_cancel(struct fence_call *fc)
{
    if (fc != NULL) {
        fc->cb = NULL;
    }
}

static void
got(void *arg, enum store_result res, int64_t mark)
{
    struct fence_call *fc = arg;
    struct fence *f = fc->f;

    if (res == STORE_ACCEPTED) {
        int64_t known;

        marks_put(f->marks, fc->res, fc->len, mark);
        /* The cache is a lower bound of the mark: it can only lift it. */
        known = marks_get(f->marks, fc->res, fc->len);
        if (known > mark) {
            mark = known;
        }
    } else {
        res = STORE_ERROR;
        mark = 0;
    }
    if (fc->cb != NULL) {
        fc->cb(fc->arg, res, mark);
    }
    free(fc);
}

bool
fence_get(struct fence *f, const char *res, size_t len, fence_cb cb, void *arg)
{
    struct fence_call *fc = call_new(f, res, len, cb, arg);

    if (fc == NULL) {
        return false;
    }
    f->ops->get(f->store, fc->res, fc->len, got, fc);
    return true;
}
