/* fence.c: the fence service: the store handle and the mark cache behind
 * one owner, so that the data path and the lock service apply the same
 * rules (out-of-order answers, equal tokens on a shared store, the cache
 * as a floor of every read). */
#include "fence.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../conf/cfg.h"
#include "../../policies/profile.h"
#include "../metrics.h"
#include "marks.h"

struct fence {
    const struct store_ops *ops;
    struct store *store;
    struct marks *marks;
    struct metrics *metrics;
    bool trees; /* some route keeps subtree marks */
};

/* One raise or get in flight, or a group of them answered as one
 * (fence_raise_above, fence_raise_tree, fence_get_floor). cb is NULL
 * once nobody waits for it. */
struct fence_call {
    struct fence *f;
    fence_cb cb;
    void *arg;
    struct fence_call *group; /* the group a call answers to, or NULL */
    bool primary;             /* its answer is the group's; a group: has one */
    /* A group: calls not answered yet, whether one failed, and the
     * answer so far (the primary's, else the highest mark). */
    size_t pending;
    bool failed;
    enum store_result res;
    int64_t mark;
    struct timespec t0;
    size_t len;
    char res_name[];
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

/* The bound decide_request gets for token from a mark known to be a
 * lower bound: on a shared store, a token equal to it is asked again. */
static int64_t
bound_of(const struct fence *f, int64_t mark, int64_t token)
{
    if (f->ops->shared && mark > 0 && token == mark) {
        /* Another sidecar may have raised the mark past the cached one.
         * mark - 1 is still a lower bound, and makes the token a raise. */
        return mark - 1;
    }
    return mark;
}

int64_t
fence_check(struct fence *f, const char *res, size_t len, int64_t token)
{
    return bound_of(f, len > 0 ? marks_get(f->marks, res, len) : 0, token);
}

int64_t
fence_bound(struct fence *f, const char *res, size_t len, int64_t token)
{
    int64_t mark = len > 0 ? marks_get(f->marks, res, len) : 0;
    int64_t read;

    if (mark == 0 && len > 0 && f->ops->peek != NULL &&
        f->ops->peek(f->store, res, len, &read) && read > 0) {
        /* Durable and holding every answered raise: a lower bound. */
        marks_put(f->marks, res, len, read);
        mark = read;
    }
    return bound_of(f, mark, token);
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
    fc->primary = false;
    fc->pending = 0;
    fc->failed = false;
    fc->res = STORE_ACCEPTED;
    fc->mark = 0;
    clock_gettime(CLOCK_MONOTONIC, &fc->t0);
    fc->len = len;
    memcpy(fc->res_name, res, len);
    fc->res_name[len] = '\0';
    return fc;
}

/* Call fc of a group is answered: fold it into the group, which
 * answers once its last call is: the primary's answer (a failure of
 * another call makes an accepted one an error), else accepted with the
 * highest mark (error when one failed). */
static void
group_answer(struct fence_call *fc, enum store_result res, int64_t mark)
{
    struct fence_call *g = fc->group;

    if (fc->primary) {
        g->res = res;
        g->mark = mark;
    } else if (res == STORE_ERROR) {
        g->failed = true;
    } else if (!g->primary && mark > g->mark) {
        g->mark = mark;
    }
    if (--g->pending > 0) {
        return;
    }
    if (g->failed && g->res == STORE_ACCEPTED) {
        g->res = STORE_ERROR;
        g->mark = 0;
    }
    if (g->cb != NULL) {
        g->cb(g->arg, g->res, g->mark);
    }
    free(g);
}

/* fc is answered: to its group, or to its caller. Frees fc. */
static void
answer(struct fence_call *fc, enum store_result res, int64_t mark)
{
    if (fc->group != NULL) {
        group_answer(fc, res, mark);
    } else if (fc->cb != NULL) {
        fc->cb(fc->arg, res, mark);
    }
    free(fc);
}

static void
raised(void *arg, enum store_result res, int64_t mark)
{
    struct fence_call *fc = arg;
    struct fence *f = fc->f;

    metrics_store(f->metrics, metrics_since(&fc->t0), res != STORE_ERROR);
    if (res != STORE_ERROR && mark > 0) {
        marks_put(f->marks, fc->res_name, fc->len, mark);
    }
    if (res == STORE_ACCEPTED) {
        /* A store with several connections can answer a lower token
         * after a higher one on the same resource (committed in that
         * order, answered out of it). The higher one may be on its way
         * to the backend already: acting on this one now would reach
         * the backend after a newer write, so it is stale. */
        int64_t known = marks_get(f->marks, fc->res_name, fc->len);

        if (known > mark) {
            res = STORE_STALE;
            mark = known;
        }
    }
    answer(fc, res, mark);
}

struct fence_call *
fence_raise(struct fence *f, const char *res, size_t len, int64_t token,
            fence_cb cb, void *arg)
{
    struct fence_call *fc = call_new(f, res, len, cb, arg);

    if (fc == NULL) {
        return NULL;
    }
    f->ops->raise(f->store, fc->res_name, fc->len, token, raised, fc);
    return fc;
}

static void got(void *arg, enum store_result res, int64_t mark);

/* Add to group g a raise of name to token (a get when token is 0).
 * false when out of memory. */
static bool
group_add(struct fence_call *g, const char *name, size_t len, int64_t token,
          bool primary)
{
    struct fence_call *fc = call_new(g->f, name, len, NULL, NULL);
    struct fence *f = g->f;

    if (fc == NULL) {
        return false;
    }
    fc->group = g;
    fc->primary = primary;
    g->primary = g->primary || primary;
    g->pending++;
    if (token > 0) {
        f->ops->raise(f->store, fc->res_name, fc->len, token, raised, fc);
    } else {
        f->ops->get(f->store, fc->res_name, fc->len, got, fc);
    }
    return true;
}

/* A group for cb, held open (one pending) until group_end. */
static struct fence_call *
group_new(struct fence *f, fence_cb cb, void *arg)
{
    struct fence_call *g = call_new(f, "", 0, cb, arg);

    if (g != NULL) {
        g->pending = 1;
    }
    return g;
}

/* Every call of g is made (ok: all of them could be): g, or NULL when
 * it holds none (freed; *asked false) or one could not be made (the
 * others still answer, to nobody; *asked true). */
static struct fence_call *
group_end(struct fence_call *g, bool ok, bool *asked)
{
    *asked = true;
    if (g->pending == 1 && ok) {
        free(g);
        *asked = false;
        return NULL;
    }
    if (!ok) {
        g->cb = NULL;
    }
    if (--g->pending == 0) {
        free(g);
    }
    return ok ? g : NULL;
}

/* Add to g the raises of the subtree marks above res that the cache
 * does not know at token or above. false when out of memory. */
static bool
group_above(struct fence_call *g, const char *res, size_t len, int64_t token)
{
    char name[TM_RESOURCE_MAX + DAV_BELOW_LEN + 1];

    for (len = dav_parent_len(res, len); len > 0;
         len = dav_parent_len(res, len)) {
        size_t n = dav_below_name(res, len, name, sizeof(name));

        if (n > 0 && marks_get(g->f->marks, name, n) < token &&
            !group_add(g, name, n, token, false)) {
            return false;
        }
    }
    return true;
}

struct fence_call *
fence_raise_above(struct fence *f, const char *res, size_t len, int64_t token,
                  bool *asked, fence_cb cb, void *arg)
{
    struct fence_call *g = group_new(f, cb, arg);

    *asked = true;
    if (g == NULL) {
        return NULL;
    }
    return group_end(g, group_above(g, res, len, token), asked);
}

struct fence_call *
fence_raise_tree(struct fence *f, const char *res, size_t len, int64_t token,
                 fence_cb cb, void *arg)
{
    struct fence_call *g = group_new(f, cb, arg);
    bool asked;

    if (g == NULL) {
        return NULL;
    }
    return group_end(g,
                     group_add(g, res, len, token, true) &&
                         group_above(g, res, len, token),
                     &asked);
}

void
fence_keep_trees(struct fence *f, bool on)
{
    f->trees = on;
}

struct fence_call *
fence_raise_holder(struct fence *f, const char *res, size_t len, int64_t token,
                   fence_cb cb, void *arg)
{
    if (f->trees) {
        return fence_raise_tree(f, res, len, token, cb, arg);
    }
    return fence_raise(f, res, len, token, cb, arg);
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

        marks_put(f->marks, fc->res_name, fc->len, mark);
        /* The cache is a lower bound of the mark: it can only lift it. */
        known = marks_get(f->marks, fc->res_name, fc->len);
        if (known > mark) {
            mark = known;
        }
    } else {
        res = STORE_ERROR;
        mark = 0;
    }
    answer(fc, res, mark);
}

bool
fence_get(struct fence *f, const char *res, size_t len, fence_cb cb, void *arg)
{
    struct fence_call *fc = call_new(f, res, len, cb, arg);

    if (fc == NULL) {
        return false;
    }
    f->ops->get(f->store, fc->res_name, fc->len, got, fc);
    return true;
}

bool
fence_get_floor(struct fence *f, const char *res, size_t len, fence_cb cb,
                void *arg)
{
    char name[TM_RESOURCE_MAX + DAV_BELOW_LEN + 1];
    size_t n = dav_below_name(res, len, name, sizeof(name));
    struct fence_call *g;
    bool asked;

    if (!f->trees || n == 0) {
        return fence_get(f, res, len, cb, arg);
    }
    g = group_new(f, cb, arg);
    if (g == NULL) {
        return false;
    }
    return group_end(g,
                     group_add(g, res, len, 0, false) &&
                         group_add(g, name, n, 0, false),
                     &asked) != NULL;
}
