/* watch_etcd.c: a [watch] source on etcd: the locks that etcdctl lock and
 * etcd's concurrency.Mutex take (keys <prefix><name>/<lease in hex>, the
 * holder the key with the lowest create revision), followed with one
 * watch over the prefix (../clients/etcd_http.c).
 *
 * The fence reported for a holder is what its application sends. With
 * token = create_revision, its key's create revision. With token =
 * lock_revision, the revision at which it got the lock (etcdctl lock's
 * ETCD_LOCK_REV, Mutex.Header().Revision): a holder whose key was
 * created at C gets the lock once every key of its lock created before
 * C is gone, so the revision of any such deletion is at or below the
 * revision its Lock returns, and above any revision the deleted key's
 * own holder could have been handed. When a watched deletion at R was
 * of a key created before the holder's, the holder is reported at R
 * (or its create revision, if higher). A holder found by a full read
 * has no deletion seen: it is reported at its create revision.
 *
 * A watch that ends (its member lost, the connection closed) is opened
 * again from the revision after the last event it delivered, so that
 * no change in between goes unseen; a full read happens at the start,
 * when etcd compacted that revision away, and after a lock could not be
 * read.
 *
 * An election (concurrency.Election, etcdctl elect NAME) is one lock of
 * this shape: keys NAME/<lease in hex>, the leader the oldest, its value
 * the leader's proposal. With cfg->only, the source reads and watches
 * only the keys <prefix><only>/, and reports that lock's holder with its
 * value, and that it has none when its last key is gone; after an
 * outage it reads that lock again rather than resume its watch. */
#include "watch.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "../../conf/cfg.h"
#include "../clients/etcd_http.h"
#include "../log.h"
#include "etcd_keys.h"

#define WE_RETRY_MS 500
/* Failing tries space out to this (etcd coming back is seen by its
 * probe, which starts the next try at once). */
#define WE_RETRY_MAX_MS 8000

struct watch_source {
    struct event_base *base;
    const struct tm_log *log;
    struct etcd_http *h;
    struct watch_hooks hooks;
    void *owner;
    char *section;
    char *prefix; /* lock names are below it */
    size_t plen;
    char *scope; /* the keys read and watched: prefix, or prefix only '/' */
    size_t slen;
    char *only; /* NULL: every lock; else the one followed */
    size_t olen;
    struct etcd_watch *w;
    struct event *retry;
    struct event *idle; /* the stream has been silent too long */
    int idle_ms;
    int64_t next_rev; /* where a new watch starts; 0: read every lock */
    int retry_ms;     /* the wait before the next try */
    bool syncing;     /* the full read is in flight */
    bool lock_rev;    /* token = lock_revision */
    bool closing;
};

/* A look at one lock after a change. */
struct we_look {
    struct watch_source *s;
    struct ek_floor floor;
    size_t len;
    char name[];
};

/* Whether name (len bytes) is the lock followed (any, without only). */
static bool
followed(const struct watch_source *s, const char *name, size_t len)
{
    return s->only == NULL ||
           (len == s->olen && memcmp(name, s->only, len) == 0);
}

/* A holder among the kvs read: told when its lock is followed. */
struct we_report {
    struct watch_source *s;
    bool told;
};

static void
on_holder_kv(void *arg, const char *name, size_t len, int64_t rev,
             const char *who, size_t wlen)
{
    struct we_report *r = arg;

    if (followed(r->s, name, len)) {
        r->told = true;
        r->s->hooks.holder(r->s->owner, name, len, rev, who, wlen);
    }
}

/* Report the holder of each lock among kvs (etcd_keys.h), and with
 * one followed, that it has none when kvs hold none of its keys. */
static void
report_holders(struct watch_source *s, const json_t *kvs,
               const struct ek_floor *f)
{
    struct we_report r = {s, false};

    ek_holders(s->prefix, s->plen, kvs, f, on_holder_kv, &r);
    if (!r.told && s->only != NULL) {
        s->hooks.holder(s->owner, s->only, s->olen, 0, NULL, 0);
    }
}

static void rewatch(struct watch_source *s);

/* Tell the owner; an answer makes the next try quick again. */
static void
seen(struct watch_source *s, enum watch_seen what, const char *why)
{
    if (what != WATCH_SEEN_ERROR) {
        s->retry_ms = WE_RETRY_MS;
    }
    s->hooks.seen(s->owner, what, why);
}

/* A failed call's reason, into buf. */
static const char *
reply_why(const struct etcd_reply *rep, const char *what, char *buf, size_t len)
{
    if (rep->st == ETCD_NOANSWER) {
        snprintf(buf, len, "%s: no member answered", what);
    } else if (rep->st == ETCD_FAILED) {
        snprintf(buf, len, "%s: etcd answered %d: %.160s", what, rep->http,
                 rep->message != NULL ? rep->message : "-");
    } else {
        snprintf(buf, len, "%s: etcd's answer is not what it should be", what);
    }
    return buf;
}

/* Try again after retry_ms, twice as long the next time while nothing
 * answers. */
static void
retry_later(struct watch_source *s)
{
    struct timeval tv = {s->retry_ms / 1000, (s->retry_ms % 1000) * 1000};

    if (!s->closing && !evtimer_pending(s->retry, NULL)) {
        evtimer_add(s->retry, &tv);
        if (s->retry_ms < WE_RETRY_MAX_MS) {
            s->retry_ms *= 2;
        }
    }
}

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
    struct watch_source *s = arg;

    lib_enter(s->log);
    (void)fd;
    (void)what;
    rewatch(s);
}

/* The stream said something: it lives for idle_ms more. */
static void
idle_reset(struct watch_source *s)
{
    struct timeval tv = {s->idle_ms / 1000, (s->idle_ms % 1000) * 1000};

    evtimer_add(s->idle, &tv);
}

/* Drop the watch and open another later: where it stopped, or after
 * reading every lock when read_all. The one lock followed is read again
 * in any case (one range): its holder is reported after every outage,
 * changed or not. */
static void
end_watch(struct watch_source *s, bool read_all)
{
    evtimer_del(s->idle);
    etcd_watch_free(s->w);
    s->w = NULL;
    if (read_all || s->only != NULL) {
        s->next_rev = 0;
    }
    retry_later(s);
}

/* Nothing came on the stream for idle_ms, not even etcd's progress
 * notice: the connection is gone without a word (a partition) or its
 * member does not serve. */
static void
idle_cb(evutil_socket_t fd, short what, void *arg)
{
    struct watch_source *s = arg;
    char why[96];

    lib_enter(s->log);
    (void)fd;
    (void)what;
    if (s->w == NULL || s->closing) {
        return;
    }
    snprintf(why, sizeof(why), "the watch stream was silent for %d ms",
             s->idle_ms);
    seen(s, WATCH_SEEN_ERROR, why);
    end_watch(s, false);
}

static void
on_look(void *arg, const struct etcd_reply *rep)
{
    struct we_look *l = arg;
    struct watch_source *s = l->s;

    char why[256];

    if (!s->closing && rep->st == ETCD_OK) {
        seen(s, WATCH_SEEN_READ, NULL);
        report_holders(s, json_object_get(rep->body, "kvs"), &l->floor);
    } else if (!s->closing) {
        log_info("watch %s: cannot read lock %s after a change: "
                 "reading every lock again",
                 s->section, LOG_ESC(l->name, l->len));
        seen(s, WATCH_SEEN_ERROR,
             reply_why(rep, "a lock's read after a change", why, sizeof(why)));
        end_watch(s, true);
    }
    free(l);
}

/* A lock changed: read its keys, oldest first; its holder is the first. */
static void
look(struct watch_source *s, const unsigned char *name, size_t len,
     const struct ek_floor *floor)
{
    struct we_look *l = malloc(sizeof(*l) + len);

    if (l == NULL) {
        return;
    }
    l->s = s;
    l->floor = *floor;
    l->len = len;
    memcpy(l->name, name, len);
    if (!etcd_http_call(s->h, "/v3/kv/range",
                        ek_range(s->prefix, s->plen, l->name, len), on_look,
                        l)) {
        free(l);
    }
}

static void
on_event(void *arg, json_t *result)
{
    struct watch_source *s = arg;
    json_t *ev;
    size_t i;

    if (s->closing) {
        return;
    }
    if (result == NULL) {
        log_info("watch %s: the watch ended: watching again from revision "
                 "%" PRId64,
                 s->section, s->next_rev);
        seen(s, WATCH_SEEN_ERROR, "the watch stream ended or was refused");
        end_watch(s, false);
        return;
    }
    if (json_is_true(json_object_get(result, "canceled"))) {
        int64_t compacted = 0;

        if (!etcd_int(result, "compact_revision", &compacted)) {
            compacted = 0;
        }
        log_warn("watch %s: etcd ended the watch (compacted up to revision "
                 "%" PRId64 "): reading every lock again",
                 s->section, compacted);
        end_watch(s, true);
        return;
    }
    /* Created, a progress notice or events: the stream is alive. */
    idle_reset(s);
    seen(s,
         json_array_size(json_object_get(result, "events")) > 0
             ? WATCH_SEEN_EVENT
             : WATCH_SEEN_READ,
         NULL);
    json_array_foreach(json_object_get(result, "events"), i, ev)
    {
        struct ek_event e;
        bool lock = ek_event(s->prefix, s->plen, ev, s->lock_rev, &e);
        const unsigned char *key = e.key;
        int n = e.n;
        int64_t mod = e.mod;
        const char *type = e.type;
        struct ek_floor floor = e.floor;

        if (e.mod_ok && mod >= s->next_rev) {
            s->next_rev = mod + 1;
        }
        if (lock && followed(s, (const char *)key + s->plen, e.len)) {
            log_debug("watch %s: %s of %s at revision %" PRId64
                      " (deleted key created at %" PRId64 ")",
                      s->section, type, LOG_ESC((const char *)key, (size_t)n),
                      mod, floor.before);
            look(s, key + s->plen, e.len, &floor);
        }
        ek_event_free(&e);
    }
}

/* Open the watch from revision from on. progress_notify: etcd says now
 * and then that the stream is alive, so a stream that stays silent
 * (EH_WATCH_IDLE_S in etcd_http.c) has broken. */
static void
start_watch(struct watch_source *s, int64_t from)
{
    char rev[24];

    snprintf(rev, sizeof(rev), "%" PRId64, from);
    s->next_rev = from;
    s->w = etcd_http_watch(s->h,
                           json_pack("{s:o,s:o,s:s,s:b,s:b}", "key",
                                     etcd_b64(s->scope, s->slen), "range_end",
                                     etcd_prefix_end(s->scope, s->slen),
                                     "start_revision", rev, "prev_kv",
                                     s->lock_rev, "progress_notify", 1),
                           on_event, s);
    if (s->w == NULL) {
        seen(s, WATCH_SEEN_ERROR, "cannot open a watch stream");
        retry_later(s);
        return;
    }
    idle_reset(s);
}

static void
on_sync(void *arg, const struct etcd_reply *rep)
{
    struct watch_source *s = arg;
    int64_t rev = 0;
    char why[256];

    s->syncing = false;
    if (s->closing) {
        return;
    }
    if (rep->st != ETCD_OK ||
        !etcd_rev(json_object_get(rep->body, "header"), "revision", &rev)) {
        seen(s, WATCH_SEEN_ERROR,
             reply_why(rep, "the read of every lock", why, sizeof(why)));
        retry_later(s);
        return;
    }
    seen(s, WATCH_SEEN_READ, NULL);
    report_holders(s, json_object_get(rep->body, "kvs"),
                   &(struct ek_floor){0, 0});
    start_watch(s, rev + 1);
}

/* Read every lock under the prefix, report its holder, then watch every
 * change after that read. */
static void
sync_all(struct watch_source *s)
{
    if (s->closing) {
        return;
    }
    s->syncing = etcd_http_call(s->h, "/v3/kv/range",
                                ek_prefix_range(s->scope, s->slen), on_sync, s);
    if (!s->syncing) {
        seen(s, WATCH_SEEN_ERROR, "cannot send the read of every lock");
        retry_later(s);
    }
}

/* No watch open: open one where the last one stopped, or read every
 * lock first. */
static void
rewatch(struct watch_source *s)
{
    if (s->w != NULL || s->syncing) {
        return;
    }
    if (s->next_rev > 0) {
        start_watch(s, s->next_rev);
    } else {
        sync_all(s);
    }
}

static void
on_up(void *arg)
{
    rewatch(arg);
}

static void
we_close(struct watch_source *s)
{
    if (s == NULL) {
        return;
    }
    s->closing = true;
    etcd_http_free(s->h); /* calls in flight answer now; watches end */
    if (s->retry != NULL) {
        event_free(s->retry);
    }
    if (s->idle != NULL) {
        event_free(s->idle);
    }
    free(s->section);
    free(s->prefix);
    free(s->scope);
    free(s->only);
    free(s);
}

static struct watch_source *
we_open(struct event_base *base, const struct cfg_watch *cfg,
        const struct watch_hooks *hooks, void *owner, char *err, size_t errlen)
{
    struct watch_source *s = calloc(1, sizeof(*s));
    char who[96];

    if (s == NULL) {
        snprintf(err, errlen, "watch: out of memory");
        return NULL;
    }
    s->base = base;
    s->log = log_current();
    s->hooks = *hooks;
    s->owner = owner;
    s->section = strdup(cfg->name);
    s->prefix = strdup(cfg->prefix);
    s->plen = s->prefix != NULL ? strlen(s->prefix) : 0;
    s->only = cfg->only != NULL ? strdup(cfg->only) : NULL;
    s->olen = s->only != NULL ? strlen(s->only) : 0;
    s->scope = s->only != NULL ? etcd_key_join(s->prefix, s->plen, s->only,
                                               s->olen, "/", 1, &s->slen)
                               : strdup(cfg->prefix);
    if (s->only == NULL && s->scope != NULL) {
        s->slen = s->plen;
    }
    s->lock_rev =
        cfg->token != NULL && strcmp(cfg->token, "lock_revision") == 0;
    s->retry_ms = WE_RETRY_MS;
    s->idle_ms = cfg->idle_ms > 0 ? cfg->idle_ms : 660000;
    s->retry = evtimer_new(base, retry_cb, s);
    s->idle = evtimer_new(base, idle_cb, s);
    if (s->section == NULL || s->prefix == NULL || s->scope == NULL ||
        (cfg->only != NULL && s->only == NULL) || s->retry == NULL ||
        s->idle == NULL) {
        snprintf(err, errlen, "watch: out of memory");
        we_close(s);
        return NULL;
    }
    snprintf(who, sizeof(who), "[watch %s]", cfg->name);
    s->h = etcd_http_new(base, cfg->endpoints, &cfg->pki, who, cfg->timeout_ms,
                         1, err, errlen);
    if (s->h == NULL) {
        we_close(s);
        return NULL;
    }
    /* The first read goes now: a store that does not answer is told
     * at once, not only once it answers. */
    etcd_http_on_up(s->h, on_up, s);
    event_active(s->retry, EV_TIMEOUT, 1);
    return s;
}

const struct watch_source_ops watch_etcd_ops = {
    .name = "etcd",
    .open = we_open,
    .close = we_close,
};
