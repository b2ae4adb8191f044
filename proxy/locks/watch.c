/* watch.c: the [watch NAME] sections: a source per section (a small
 * registry by backend, as lock.c has), and what every source shares:
 * mapping a lock's name to its resource and raising the resource's mark
 * to the new holder's fence through the fence service. */
#include "watch.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../conf/cfg.h"
#include "../../policies/canon.h"
#include "../../policies/route.h"
#include "../fence.h"
#include "../log.h"

/* Every source, by the name part of its watch_<name>_ops. */
#define WATCH_SOURCES(X) X(etcd) X(zookeeper)

#define WATCH_DECLARE(name)                                                    \
    extern const struct watch_source_ops watch_##name##_ops;
#define WATCH_ENTRY(name) &watch_##name##_ops,

WATCH_SOURCES(WATCH_DECLARE)

static const struct watch_source_ops *const sources[] = {
    WATCH_SOURCES(WATCH_ENTRY)};

/* One [watch] section at work. */
struct watch_one {
    struct watches *set;
    const struct watch_source_ops *ops;
    struct watch_source *src;
    char *section;  /* its NAME, for log lines */
    char *resource; /* the template */
};

struct watches {
    struct fence *fence;
    struct watch_one *w;
    size_t n;
};

static const struct watch_source_ops *
source_find(const char *name)
{
    for (size_t i = 0; i < sizeof(sources) / sizeof(sources[0]); i++) {
        if (name != NULL && strcmp(sources[i]->name, name) == 0) {
            return sources[i];
        }
    }
    return NULL;
}

bool
watch_resource(const char *tmpl, const char *name, size_t len, char *out,
               size_t outcap, size_t *outlen)
{
    const char *at = strstr(tmpl, "{name}");
    size_t pre = at != NULL ? (size_t)(at - tmpl) : strlen(tmpl);
    const char *rest = at != NULL ? at + 6 : "";
    size_t n = pre + (at != NULL ? len : 0) + strlen(rest);
    char *raw;
    const char *why;
    bool ok;

    if (n == 0 || n > 4096 || memchr(name, '\0', len) != NULL) {
        return false;
    }
    raw = malloc(n);
    if (raw == NULL) {
        return false;
    }
    memcpy(raw, tmpl, pre);
    if (at != NULL) {
        memcpy(raw + pre, name, len);
        memcpy(raw + pre + len, rest, strlen(rest));
    }
    ok = canon_name(raw, n, out, outcap, outlen, &why);
    free(raw);
    return ok;
}

struct raise_ctx {
    char section[64];
    int64_t fence;
    size_t len;
    char res[];
};

static void
raised(void *arg, enum store_result res, int64_t mark)
{
    struct raise_ctx *r = arg;

    if (res == STORE_ACCEPTED) {
        log_info("watch %s: %s: the holder changed: mark raised to %" PRId64,
                 r->section, r->res, r->fence);
    } else if (res == STORE_STALE) {
        /* A later holder's fence (or a write) is there already. */
        log_debug("watch %s: %s: the mark %" PRId64 " is above the "
                  "holder's fence %" PRId64,
                  r->section, r->res, mark, r->fence);
    } else {
        log_error("watch %s: %s: the mark store cannot raise the mark to "
                  "the new holder's fence %" PRId64
                  ": the previous holder is refused only once the new "
                  "one writes",
                  r->section, r->res, r->fence);
    }
    free(r);
}

/* A source's report: raise the lock's resource to fence. */
static void
on_holder(void *owner, const char *name, size_t len, int64_t fence)
{
    struct watch_one *w = owner;
    char res[TM_RESOURCE_MAX + 1];
    size_t rlen = 0;
    struct raise_ctx *r;

    if (fence <= 0) {
        return;
    }
    if (!watch_resource(w->resource, name, len, res, sizeof(res), &rlen)) {
        log_warn("watch %s: lock %.*s names no resource through %s: "
                 "not fenced",
                 w->section, len > 200 ? 200 : (int)len, name, w->resource);
        return;
    }
    r = malloc(sizeof(*r) + rlen + 1);
    if (r == NULL) {
        log_error("watch %s: out of memory: %s not raised", w->section, res);
        return;
    }
    snprintf(r->section, sizeof(r->section), "%s", w->section);
    r->fence = fence;
    r->len = rlen;
    memcpy(r->res, res, rlen + 1);
    if (fence_raise_holder(w->set->fence, r->res, rlen, fence, raised, r) ==
        NULL) {
        log_error("watch %s: out of memory: %s not raised", w->section, res);
        free(r);
    }
}

struct watches *
watches_new(struct event_base *base, struct fence *f,
            const struct tm_config *cfg, char *err, size_t errlen)
{
    struct watches *set = calloc(1, sizeof(*set));

    if (set == NULL ||
        (set->w = calloc(cfg->nwatches + 1, sizeof(*set->w))) == NULL) {
        free(set);
        snprintf(err, errlen, "watch: out of memory");
        return NULL;
    }
    set->fence = f;
    for (size_t i = 0; i < cfg->nwatches; i++) {
        const struct cfg_watch *c = &cfg->watches[i];
        struct watch_one *w = &set->w[i];

        w->set = set;
        w->ops = source_find(c->backend);
        w->section = strdup(c->name);
        w->resource = strdup(c->resource);
        set->n++;
        if (w->ops == NULL || w->section == NULL || w->resource == NULL) {
            snprintf(err, errlen, "watch %s: backend %s is not available",
                     c->name, c->backend != NULL ? c->backend : "-");
            watches_free(set);
            return NULL;
        }
        w->src = w->ops->open(base, c, on_holder, w, err, errlen);
        if (w->src == NULL) {
            watches_free(set);
            return NULL;
        }
        log_info("watch %s: %s locks under \"%s\" fence %s", c->name,
                 c->backend, c->prefix, c->resource);
    }
    return set;
}

void
watches_free(struct watches *set)
{
    if (set == NULL) {
        return;
    }
    for (size_t i = 0; i < set->n; i++) {
        struct watch_one *w = &set->w[i];

        if (w->src != NULL) {
            w->ops->close(w->src);
        }
        free(w->section);
        free(w->resource);
    }
    free(set->w);
    free(set);
}
