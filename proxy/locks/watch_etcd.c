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
 * read. */
#include "watch.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "../../conf/cfg.h"
#include "../clients/etcd_http.h"
#include "../log.h"

#define WE_RETRY_MS 500
#define WE_KEY_MAX 2048

struct watch_source {
    struct event_base *base;
    const struct tm_log *log;
    struct etcd_http *h;
    watch_holder_cb cb;
    void *owner;
    char *section;
    char *prefix;
    size_t plen;
    struct etcd_watch *w;
    struct event *retry;
    int64_t next_rev; /* where a new watch starts; 0: read every lock */
    bool syncing;     /* the full read is in flight */
    bool lock_rev;    /* token = lock_revision */
    bool closing;
};

/* What a watched deletion says of the holders after it: one whose key
 * was created after `before` got the lock at `at` or later. */
struct we_floor {
    int64_t before;
    int64_t at; /* 0: no deletion, nothing said */
};

/* A look at one lock after a change. */
struct we_look {
    struct watch_source *s;
    struct we_floor floor;
    size_t len;
    char name[];
};

/* The lock name of key k (n bytes): the part between the prefix and the
 * last '/', when what follows it is a lease in hex. */
static bool
key_name(const struct watch_source *s, const unsigned char *k, size_t n,
         size_t *len)
{
    const unsigned char *slash;
    size_t rest;

    if (n <= s->plen + 2 || memcmp(k, s->prefix, s->plen) != 0) {
        return false;
    }
    slash = memrchr(k + s->plen, '/', n - s->plen);
    if (slash == NULL || slash == k + s->plen) {
        return false;
    }
    rest = n - (size_t)(slash + 1 - k);
    if (rest == 0 || rest > 16) {
        return false;
    }
    for (const unsigned char *p = slash + 1; p < k + n; p++) {
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) {
            return false;
        }
    }
    *len = (size_t)(slash - (k + s->plen));
    return true;
}

/* The key of kv into key (WE_KEY_MAX bytes): its length, or -1. A key
 * too long for key is logged, so that no lock goes unfenced unseen. */
static int
key_of(const struct watch_source *s, const json_t *kv, unsigned char *key)
{
    const json_t *k = json_object_get(kv, "key");
    int n = etcd_unb64(k, key, WE_KEY_MAX);

    if (n < 0 && json_string_length(k) / 4 * 3 > WE_KEY_MAX) {
        log_warn("watch %s: a key of about %zu bytes is longer than the "
                 "%d a watched lock's key may have: not fenced",
                 s->section, json_string_length(k) / 4 * 3, WE_KEY_MAX);
    }
    return n;
}

/* Report the holder of each lock among kvs (oldest first): the first key
 * of each name, at the revision f says it got the lock at if later than
 * its key's. */
static void
report_holders(struct watch_source *s, const json_t *kvs,
               const struct we_floor *f)
{
    unsigned char key[WE_KEY_MAX], last[WE_KEY_MAX];
    size_t lastlen = (size_t)-1;
    size_t i;
    json_t *kv;

    /* Names already reported in this answer: kvs are few; a linear
     * look-back over the ones before is enough. */
    json_array_foreach(kvs, i, kv)
    {
        int n = key_of(s, kv, key);
        size_t len = 0;
        int64_t rev = 0;
        bool seen = false;

        if (n < 0 || !key_name(s, key, (size_t)n, &len) ||
            !etcd_int(kv, "create_revision", &rev)) {
            continue;
        }
        for (size_t j = 0; j < i && !seen; j++) {
            unsigned char other[WE_KEY_MAX];
            int m = etcd_unb64(json_object_get(json_array_get(kvs, j), "key"),
                               other, sizeof(other));
            size_t olen = 0;

            seen = m >= 0 && key_name(s, other, (size_t)m, &olen) &&
                   olen == len &&
                   memcmp(other + s->plen, key + s->plen, len) == 0;
        }
        if (!seen) {
            if (f->at > rev && rev > f->before) {
                rev = f->at;
            }
            memcpy(last, key + s->plen, len);
            lastlen = len;
            s->cb(s->owner, (const char *)last, lastlen, rev);
        }
    }
}

static void rewatch(struct watch_source *s);

static void
retry_later(struct watch_source *s)
{
    struct timeval tv = {0, WE_RETRY_MS * 1000};

    if (!s->closing && !evtimer_pending(s->retry, NULL)) {
        evtimer_add(s->retry, &tv);
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

/* Drop the watch and open another later: where it stopped, or after
 * reading every lock when read_all. */
static void
end_watch(struct watch_source *s, bool read_all)
{
    etcd_watch_free(s->w);
    s->w = NULL;
    if (read_all) {
        s->next_rev = 0;
    }
    retry_later(s);
}

static json_t *
prefix_range(const char *p, size_t n)
{
    return json_pack("{s:o,s:o,s:s,s:s}", "key", etcd_b64(p, n), "range_end",
                     etcd_prefix_end(p, n), "sort_target", "CREATE",
                     "sort_order", "ASCEND");
}

static void
on_look(void *arg, const struct etcd_reply *rep)
{
    struct we_look *l = arg;
    struct watch_source *s = l->s;

    if (!s->closing && rep->st == ETCD_OK) {
        report_holders(s, json_object_get(rep->body, "kvs"), &l->floor);
    } else if (!s->closing) {
        log_warn("watch %s: cannot read lock %.*s after a change: "
                 "reading every lock again",
                 s->section, l->len > 200 ? 200 : (int)l->len, l->name);
        end_watch(s, true);
    }
    free(l);
}

/* A lock changed: read its keys, oldest first; its holder is the first. */
static void
look(struct watch_source *s, const unsigned char *name, size_t len,
     const struct we_floor *floor)
{
    /* name[] holds the name, then the range's key: prefix, name, '/'. */
    size_t klen = s->plen + len + 1;
    struct we_look *l = malloc(sizeof(*l) + len + klen);
    char *p;

    if (l == NULL) {
        return;
    }
    l->s = s;
    l->floor = *floor;
    l->len = len;
    memcpy(l->name, name, len);
    p = l->name + len;
    memcpy(p, s->prefix, s->plen);
    memcpy(p + s->plen, name, len);
    p[klen - 1] = '/';
    if (!etcd_http_call(s->h, "/v3/kv/range", prefix_range(p, klen), on_look,
                        l)) {
        free(l);
    }
}

/* What a deletion ev says of the holders after it: a deletion (a
 * release, a lease's end) at R of a key created at C (its prev_kv) says
 * that a key created after C got the lock at R or later. Without its
 * prev_kv, it says nothing. */
static void
deletion_floor(const json_t *ev, struct we_floor *f)
{
    if (!etcd_int(json_object_get(ev, "kv"), "mod_revision", &f->at) ||
        !etcd_int(json_object_get(ev, "prev_kv"), "create_revision",
                  &f->before)) {
        f->at = 0;
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
        log_warn("watch %s: the watch ended: watching again from revision "
                 "%" PRId64,
                 s->section, s->next_rev);
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
    json_array_foreach(json_object_get(result, "events"), i, ev)
    {
        unsigned char key[WE_KEY_MAX];
        json_t *kv = json_object_get(ev, "kv");
        int n = key_of(s, kv, key);
        size_t len = 0;
        struct we_floor floor = {0, 0};
        int64_t mod = 0;
        /* etcd's JSON leaves out the default, PUT */
        const char *type = json_string_value(json_object_get(ev, "type"));

        if (etcd_int(kv, "mod_revision", &mod) && mod >= s->next_rev) {
            s->next_rev = mod + 1;
        }
        if (n < 0 || !key_name(s, key, (size_t)n, &len)) {
            continue;
        }
        if (type == NULL) {
            type = "PUT";
        }
        if (s->lock_rev && strcmp(type, "DELETE") == 0) {
            deletion_floor(ev, &floor);
        }
        log_debug("watch %s: %s of %.*s at revision %" PRId64
                  " (deleted key created at %" PRId64 ")",
                  s->section, type, n > 200 ? 200 : n, (const char *)key, mod,
                  floor.before);
        look(s, key + s->plen, len, &floor);
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
                                     etcd_b64(s->prefix, s->plen), "range_end",
                                     etcd_prefix_end(s->prefix, s->plen),
                                     "start_revision", rev, "prev_kv",
                                     s->lock_rev, "progress_notify", 1),
                           on_event, s);
    if (s->w == NULL) {
        retry_later(s);
    }
}

static void
on_sync(void *arg, const struct etcd_reply *rep)
{
    struct watch_source *s = arg;
    int64_t rev = 0;

    s->syncing = false;
    if (s->closing) {
        return;
    }
    if (rep->st != ETCD_OK ||
        !etcd_int(json_object_get(rep->body, "header"), "revision", &rev)) {
        retry_later(s);
        return;
    }
    report_holders(s, json_object_get(rep->body, "kvs"),
                   &(struct we_floor){0, 0});
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
                                prefix_range(s->prefix, s->plen), on_sync, s);
    if (!s->syncing) {
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
    free(s->section);
    free(s->prefix);
    free(s);
}

static struct watch_source *
we_open(struct event_base *base, const struct cfg_watch *cfg,
        watch_holder_cb cb, void *owner, char *err, size_t errlen)
{
    struct watch_source *s = calloc(1, sizeof(*s));
    char who[96];

    if (s == NULL) {
        snprintf(err, errlen, "watch: out of memory");
        return NULL;
    }
    s->base = base;
    s->log = log_current();
    s->cb = cb;
    s->owner = owner;
    s->section = strdup(cfg->name);
    s->prefix = strdup(cfg->prefix);
    s->plen = s->prefix != NULL ? strlen(s->prefix) : 0;
    s->lock_rev =
        cfg->token != NULL && strcmp(cfg->token, "lock_revision") == 0;
    s->retry = evtimer_new(base, retry_cb, s);
    if (s->section == NULL || s->prefix == NULL || s->retry == NULL) {
        snprintf(err, errlen, "watch: out of memory");
        we_close(s);
        return NULL;
    }
    snprintf(who, sizeof(who), "[watch %s]", cfg->name);
    s->h = etcd_http_new(base, cfg->endpoints, who, cfg->timeout_ms, 1, err,
                         errlen);
    if (s->h == NULL) {
        we_close(s);
        return NULL;
    }
    /* The first read waits for etcd's first answer. */
    etcd_http_on_up(s->h, on_up, s);
    return s;
}

const struct watch_source_ops watch_etcd_ops = {
    .name = "etcd",
    .open = we_open,
    .close = we_close,
};
