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
struct fence;
struct cfg_watch;
struct tm_config;

/* What a source reports: lock name (len bytes, as the lock store names
 * it, below the section's prefix) is now held by the holder whose fence
 * is fence (etcd: its key's create revision; zookeeper: its node's
 * czxid). A source reports each change of holder at least once, on the
 * loop thread; reporting a holder again is harmless. */
typedef void (*watch_holder_cb)(void *owner, const char *name, size_t len,
                                int64_t fence);

struct watch_source;

/* One kind of lock store. */
struct watch_source_ops {
    const char *name; /* [watch] backend = name */
    /* Start following cfg's locks: the current holders first, then every
     * change. Outages are the source's to ride out (it reports again
     * what it may have missed). NULL with a message in err when cfg
     * cannot be used. */
    struct watch_source *(*open)(struct event_base *base,
                                 const struct cfg_watch *cfg,
                                 watch_holder_cb cb, void *owner, char *err,
                                 size_t errlen);
    /* Stop; no callback after this. */
    void (*close)(struct watch_source *src);
};

struct watches;

/* Start every [watch] section of cfg, raising marks through f. NULL on
 * failure with a message in err (a configuration error). A config
 * without [watch] sections gives an empty set, never NULL for that. */
struct watches *watches_new(struct event_base *base, struct fence *f,
                            const struct tm_config *cfg, char *err,
                            size_t errlen) __attribute__((warn_unused_result));

/* Stop every source. Raises in flight finish without us. */
void watches_free(struct watches *w);

/* Pure: the resource of lock name for template tmpl ("{name}" replaced
 * by name, then the canonical form, policies/canon.h) into out (outcap
 * bytes). false when the result is not a resource name, or when name
 * read alone is none (a ".." that would climb out of name into the
 * template: "documents/{name}" never reaches beyond documents/). */
bool watch_resource(const char *tmpl, const char *name, size_t len, char *out,
                    size_t outcap, size_t *outlen);

#endif
