/* watch.c: the [watch NAME] sections: a source per section (a small
 * registry by backend, as lock.c has), and what every source shares:
 * mapping a lock's name to its resource and raising the resource's mark
 * to the new holder's fence through the fence service. */
#include "watch.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "../../conf/cfg.h"
#include "../../policies/canon.h"
#include "../../policies/route.h"
#include "../clients/dial.h"
#include "../log.h"
#include "../metrics.h"
#include "../recent.h"
#include "../store/fence.h"

/* While a watch fails, a reminder this often (no line per retry). */
#define WATCH_REMIND_MS (5 * 60 * 1000)

/* Every source, by the name part of its watch_<name>_ops. */
#define WATCH_SOURCES(X) X(etcd) X(zookeeper)

#define WATCH_DECLARE(name)                                                    \
    extern const struct watch_source_ops watch_##name##_ops;
#define WATCH_ENTRY(name) &watch_##name##_ops,

WATCH_SOURCES(WATCH_DECLARE)

static const struct watch_source_ops *const sources[] = {
    WATCH_SOURCES(WATCH_ENTRY)};

/* What a watch knows of its own health. Times: _ms on CLOCK_MONOTONIC
 * (ages), _wall in ms since the epoch (shown). */
struct watch_health {
    enum watch_state state;
    int64_t since_ms, since_wall; /* the state's start */
    int64_t read_ms;              /* the store's last answer; 0: none */
    int64_t event_ms;             /* its last change told; 0: none */
    int64_t start_ms;
    uint64_t errors;
    char why[256]; /* the last failure, escaped */
    struct event *remind;
};

/* One [watch] section at work. */
struct watch_one {
    struct watches *set;
    const struct watch_source_ops *ops;
    struct watch_source *src;
    char *section;  /* its NAME, for log lines */
    char *resource; /* the template */
    bool required;  /* readiness waits for it */
    struct watch_health h;
};

static const char *const state_names[] = {"starting", "ok", "failing"};

struct watches {
    const struct tm_log *log; /* the proxy's, entered by timers */
    struct fence *fence;
    struct watch_one *w;
    size_t n;
};

const struct watch_source_ops *
watch_source_find(const char *name)
{
    for (size_t i = 0; i < sizeof(sources) / sizeof(sources[0]); i++) {
        if (name != NULL && strcmp(sources[i]->name, name) == 0) {
            return sources[i];
        }
    }
    return NULL;
}

/* The name read on its own is a name: its ".." may remove its own
 * segments, never the template's, so a lock "../x" under a section's
 * prefix cannot raise the mark of a resource outside its template. */
static bool
name_alone(const char *name, size_t len)
{
    char *out = malloc(len + 1);
    size_t olen = 0;
    const char *why;
    bool ok = out != NULL && canon_name(name, len, out, len + 1, &olen, &why);

    free(out);
    return ok;
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

    if (n == 0 || n > 4096 || memchr(name, '\0', len) != NULL ||
        (at != NULL && !name_alone(name, len))) {
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
                 r->section, LOG_STR(r->res), r->fence);
    } else if (res == STORE_STALE) {
        /* A later holder's fence (or a write) is there already. */
        log_debug("watch %s: %s: the mark %" PRId64 " is above the "
                  "holder's fence %" PRId64,
                  r->section, LOG_STR(r->res), mark, r->fence);
    } else {
        log_error("watch %s: %s: the mark store cannot raise the mark to "
                  "the new holder's fence %" PRId64
                  ": the previous holder is refused only once the new "
                  "one writes",
                  r->section, LOG_STR(r->res), r->fence);
    }
    free(r);
}

/* A source's report: raise the lock's resource to fence. */
static void
on_holder(void *owner, const char *name, size_t len, int64_t fence,
          const char *who, size_t wlen)
{
    struct watch_one *w = owner;
    char res[TM_RESOURCE_MAX + 1];
    size_t rlen = 0;
    struct raise_ctx *r;

    (void)who;
    (void)wlen;
    if (fence <= 0) {
        return;
    }
    if (!watch_resource(w->resource, name, len, res, sizeof(res), &rlen)) {
        log_warn("watch %s: lock %s names no resource through %s: "
                 "not fenced",
                 w->section, LOG_ESC(name, len), LOG_STR(w->resource));
        return;
    }
    r = malloc(sizeof(*r) + rlen + 1);
    if (r == NULL) {
        log_error("watch %s: out of memory: %s not raised", w->section,
                  LOG_STR(res));
        return;
    }
    snprintf(r->section, sizeof(r->section), "%s", w->section);
    r->fence = fence;
    r->len = rlen;
    memcpy(r->res, res, rlen + 1);
    if (fence_raise_holder(w->set->fence, r->res, rlen, fence, raised, r) ==
        NULL) {
        log_error("watch %s: out of memory: %s not raised", w->section,
                  LOG_STR(res));
        free(r);
    }
}

/* ---- health ------------------------------------------------------------ */

static void
health_set(struct watch_one *w, enum watch_state st)
{
    w->h.state = st;
    w->h.since_ms = dial_now_ms();
    w->h.since_wall = recent_now_ms();
}

static void
remind_cb(evutil_socket_t fd, short what, void *arg)
{
    struct watch_one *w = arg;

    lib_enter(w->set->log);
    (void)fd;
    (void)what;
    log_warn("watch %s: still cannot follow its locks after %" PRId64
             " s (%" PRIu64 " errors; last: %s)",
             w->section, (dial_now_ms() - w->h.since_ms) / 1000, w->h.errors,
             w->h.why);
}

/* A failure: counted; logged once when the watch starts failing. */
static void
health_failed(struct watch_one *w, const char *why)
{
    w->h.errors++;
    why = why != NULL ? why : "-";
    logesc(w->h.why, sizeof(w->h.why), why, strlen(why), LOGESC_WORD);
    if (w->h.state == WATCH_FAILING) {
        return;
    }
    health_set(w, WATCH_FAILING);
    log_warn("watch %s: cannot follow its locks: %s: a lock that changes "
             "holder now is fenced only once it is back",
             w->section, w->h.why);
    if (w->h.remind != NULL) {
        struct timeval tv = {WATCH_REMIND_MS / 1000, 0};

        evtimer_add(w->h.remind, &tv);
    }
}

/* The store answered: ok, logged when it was failing. */
static void
health_answered(struct watch_one *w)
{
    w->h.read_ms = dial_now_ms();
    if (w->h.state == WATCH_FAILING) {
        log_warn("watch %s: follows its locks again, after %.1f s without "
                 "them (%" PRIu64 " errors so far)",
                 w->section, (double)(w->h.read_ms - w->h.since_ms) / 1e3,
                 w->h.errors);
        evtimer_del(w->h.remind);
    } else if (w->h.state == WATCH_STARTING) {
        log_info("watch %s: follows its locks", w->section);
    }
    if (w->h.state != WATCH_OK) {
        health_set(w, WATCH_OK);
    }
}

static void
on_seen(void *owner, enum watch_seen what, const char *why)
{
    struct watch_one *w = owner;

    if (what == WATCH_SEEN_ERROR) {
        health_failed(w, why);
        return;
    }
    if (what == WATCH_SEEN_EVENT) {
        w->h.event_ms = dial_now_ms();
    }
    health_answered(w);
}

bool
watches_ready(const struct watches *set, bool required_only)
{
    for (size_t i = 0; set != NULL && i < set->n; i++) {
        if ((set->w[i].required || !required_only) &&
            set->w[i].h.state != WATCH_OK) {
            return false;
        }
    }
    return true;
}

void
watches_describe(const struct watches *set, struct evbuffer *out)
{
    for (size_t i = 0; set != NULL && i < set->n; i++) {
        const struct watch_one *w = &set->w[i];
        time_t t = (time_t)(w->h.since_wall / 1000);
        struct tm tm;
        char when[32];

        gmtime_r(&t, &tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
        evbuffer_add_printf(out, "\nwatch %s: %s since %s (%" PRId64 " s)",
                            w->section, state_names[w->h.state], when,
                            (dial_now_ms() - w->h.since_ms) / 1000);
        if (w->h.state == WATCH_FAILING) {
            evbuffer_add_printf(out, ", %" PRIu64 " errors: %s", w->h.errors,
                                w->h.why);
        }
        if (!w->required) {
            evbuffer_add_printf(out, " (not required)");
        }
    }
}

/* Seconds since t (CLOCK_MONOTONIC ms), or since the watch started when
 * t is 0. */
static double
age_s(const struct watch_one *w, int64_t t)
{
    return (double)(dial_now_ms() - (t > 0 ? t : w->h.start_ms)) / 1e3;
}

/* w's value in family id (one of the watch families but the state). */
static double
watch_value(const struct watch_one *w, enum metric_id id)
{
    if (id == MID_tidemark_watch_errors_total) {
        return (double)w->h.errors;
    }
    return age_s(w, id == MID_tidemark_watch_last_event_age_seconds
                        ? w->h.event_ms
                        : w->h.read_ms);
}

void
watches_metrics(const struct watches *set, struct evbuffer *out)
{
    static const enum metric_id ids[] = {
        MID_tidemark_watch_errors_total,
        MID_tidemark_watch_last_event_age_seconds,
        MID_tidemark_watch_last_read_age_seconds,
    };

    if (set == NULL || set->n == 0) {
        return;
    }
    metrics_head(out, MID_tidemark_watch_state);
    for (size_t i = 0; i < set->n; i++) {
        for (int st = WATCH_STARTING; st <= WATCH_FAILING; st++) {
            metrics_sample(out, MID_tidemark_watch_state,
                           set->w[i].h.state == (enum watch_state)st,
                           "watch=\"%s\",state=\"%s\"", set->w[i].section,
                           state_names[st]);
        }
    }
    for (size_t k = 0; k < sizeof(ids) / sizeof(ids[0]); k++) {
        metrics_head(out, ids[k]);
        for (size_t i = 0; i < set->n; i++) {
            metrics_sample(out, ids[k], watch_value(&set->w[i], ids[k]),
                           "watch=\"%s\"", set->w[i].section);
        }
    }
}

/* ---- the set ------------------------------------------------------------ */

struct watches *
watches_new(struct event_base *base, struct fence *f,
            const struct tm_config *cfg, char *err, size_t errlen)
{
    static const struct watch_hooks hooks = {.holder = on_holder,
                                             .seen = on_seen};
    struct watches *set = calloc(1, sizeof(*set));

    if (set == NULL ||
        (set->w = calloc(cfg->nwatches + 1, sizeof(*set->w))) == NULL) {
        free(set);
        snprintf(err, errlen, "watch: out of memory");
        return NULL;
    }
    set->fence = f;
    set->log = log_current();
    for (size_t i = 0; i < cfg->nwatches; i++) {
        const struct cfg_watch *c = &cfg->watches[i];
        struct watch_one *w = &set->w[i];

        w->set = set;
        w->ops = watch_source_find(c->backend);
        w->section = strdup(c->name);
        w->resource = strdup(c->resource);
        w->required = c->required;
        health_set(w, WATCH_STARTING);
        w->h.start_ms = w->h.since_ms;
        w->h.remind = event_new(base, -1, EV_PERSIST, remind_cb, w);
        set->n++;
        if (w->ops == NULL || w->section == NULL || w->resource == NULL ||
            w->h.remind == NULL) {
            snprintf(err, errlen, "watch %s: backend %s is not available",
                     c->name, c->backend != NULL ? c->backend : "-");
            watches_free(set);
            return NULL;
        }
        w->src = w->ops->open(base, c, &hooks, w, err, errlen);
        if (w->src == NULL) {
            watches_free(set);
            return NULL;
        }
        log_info("watch %s: %s locks under %s fence %s", c->name, c->backend,
                 LOG_QSTR(c->prefix), LOG_STR(c->resource));
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
        if (w->h.remind != NULL) {
            event_free(w->h.remind);
        }
        free(w->section);
        free(w->resource);
    }
    free(set->w);
    free(set);
}
