/* watch.h: eager fencing for locks that applications take elsewhere. A
 * [watch NAME] section names a lock store (etcd, watch_etcd.c, or
 * ZooKeeper, watch_zookeeper.c) and a prefix; the moment a lock under it
 * changes holder, the mark of the lock's resource is raised to the new
 * holder's fence, so the previous holder is refused before the new one
 * writes. */
#ifndef TM_WATCH_H
#define TM_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct evbuffer;
struct fence;
struct cfg_watch;
struct tm_config;

/* What a source reports: lock name (len bytes, as the lock store names
 * it, below the section's prefix) is now held by the holder whose fence
 * is fence (etcd: its key's create revision; zookeeper: its node's
 * czxid), and whose value is who (wlen bytes, not NUL-terminated, NULL
 * when it has none; etcd: its key's value, an election's proposal;
 * zookeeper: its node's data, a LeaderLatch's participant id): the
 * store's bytes, hostile, escaped before they are logged. fence 0 and
 * who NULL: the lock has no holder now. A source reports each change of
 * holder at least once, on the loop thread; reporting a holder again is
 * harmless. */
typedef void (*watch_holder_cb)(void *owner, const char *name, size_t len,
                                int64_t fence, const char *who, size_t wlen);

/* What a source tells of its store, besides holders. */
enum watch_seen {
    WATCH_SEEN_READ = 0, /* the store answered: its locks are followed */
    WATCH_SEEN_EVENT,    /* the store told of a change */
    WATCH_SEEN_ERROR,    /* a read failed; the stream or session was lost */
};

/* A source's report of its store: why (NUL-terminated, maybe the store's
 * own words: escaped before it is logged) says what failed, for
 * WATCH_SEEN_ERROR; NULL otherwise. On the loop thread. */
typedef void (*watch_seen_cb)(void *owner, enum watch_seen what,
                              const char *why);

/* Whom a source tells, and what. */
struct watch_hooks {
    watch_holder_cb holder;
    watch_seen_cb seen;
};

struct watch_source;

/* One kind of lock store. */
struct watch_source_ops {
    const char *name; /* [watch] backend = name */
    /* Start following cfg's locks: the current holders first, then every
     * change, told to hooks with owner. Outages are the source's to ride
     * out (it reports again what it may have missed), and to tell: every
     * failed try is a WATCH_SEEN_ERROR, the first one too, and a store
     * followed again is a WATCH_SEEN_READ. NULL with a message in err
     * when cfg cannot be used. */
    struct watch_source *(*open)(struct event_base *base,
                                 const struct cfg_watch *cfg,
                                 const struct watch_hooks *hooks, void *owner,
                                 char *err, size_t errlen);
    /* Stop; no callback after this. */
    void (*close)(struct watch_source *src);
};

/* The source for [watch] backend = name; NULL when none. */
const struct watch_source_ops *watch_source_find(const char *name);

struct watches;

/* Start every [watch] section of cfg, raising marks through f. NULL on
 * failure with a message in err (a configuration error). A config
 * without [watch] sections gives an empty set, never NULL for that. */
struct watches *watches_new(struct event_base *base, struct fence *f,
                            const struct tm_config *cfg, char *err,
                            size_t errlen) __attribute__((warn_unused_result));

/* Stop every source. Raises in flight finish without us. */
void watches_free(struct watches *w);

/* The health of a watch: starting until its store first answers, ok
 * while it follows its locks, failing from a failed read (or a lost
 * stream or session) until its store answers again. */
enum watch_state {
    WATCH_STARTING = 0,
    WATCH_OK,
    WATCH_FAILING,
};

/* true when every watch of w is ok; with required_only, every one that
 * readiness waits for ([watch] required = yes). */
bool watches_ready(const struct watches *w, bool required_only);

/* Append one line per watch to out, for /readyz:
 * "\nwatch NAME: STATE since TIME (N s)", and for a failing one its
 * errors and the last reason. */
void watches_describe(const struct watches *w, struct evbuffer *out);

/* Append the watch families of /metrics to out. */
void watches_metrics(const struct watches *w, struct evbuffer *out);

/* Pure: the resource of lock name for template tmpl ("{name}" replaced
 * by name, then the canonical form, policies/canon.h) into out (outcap
 * bytes). false when the result is not a resource name, or when name
 * read alone is none (a ".." that would climb out of name into the
 * template: "documents/{name}" never reaches beyond documents/). */
bool watch_resource(const char *tmpl, const char *name, size_t len, char *out,
                    size_t outcap, size_t *outlen);

#endif
