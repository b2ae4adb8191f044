/* follow.c: the follow kind of carrier: a [follow NAME] section follows
 * the application's own leader election (etcd's concurrency.Election
 * and etcdctl elect; Curator's LeaderLatch and kazoo's Election on
 * ZooKeeper) through a [watch] source on that one election
 * (locks/watch.h, cfg_watch.only), and reports to its carrier: won
 * while the election's holder is this replica's identity, with the
 * holder's fence (etcd: the leader key's create revision; ZooKeeper:
 * the leader node's czxid); standby while another identity holds it, or
 * none; lost while its store cannot be followed (a holder may change
 * unseen then): until its store answers and the election is read
 * again.
 *
 * The holder is this identity when the leader's value (etcd: its key's
 * value, the proposal; ZooKeeper: its node's data, the participant id
 * or identifier) is the identity, byte for byte. The value is the
 * store's: shown and logged only escaped. After an outage the holder is
 * not known again until the source reports it: a source following one
 * lock reads it again once its store answers (watch_etcd.c,
 * watch_zookeeper.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../conf/cfg.h"
#include "../../policies/logesc.h"
#include "../locks/watch.h"
#include "../log.h"
#include "carry.h"

/* The holder's value as shown: escaped, cut. */
#define FOLLOW_HOLDER_MAX 128

struct follow {
    struct carrier *c;
    const struct watch_source_ops *ops;
    struct watch_source *src;
    struct cfg_watch w; /* the source's view of the election */
    const char *identity;
    size_t idlen;
    bool read;    /* a holder, or none, was reported */
    bool failing; /* the store cannot be followed */
    bool ours;    /* the last holder reported is this identity */
    int64_t fence;
    char holder[FOLLOW_HOLDER_MAX];
};

/* cfg's election as one lock of a [watch] source, into w (prefix and
 * only malloc'd): etcd's election NAME has the keys NAME/<lease>, the
 * lock only = NAME's last part below prefix = what comes before it; a
 * ZooKeeper election's znode is the lock only = its last segment below
 * its parent. false when out of memory. */
static bool
election_watch(const struct cfg_follow *cfg, struct cfg_watch *w)
{
    const char *e = cfg->election;
    const char *last = strrchr(e, '/');
    size_t cut = last != NULL ? (size_t)(last - e) + 1 : 0;

    *w = (struct cfg_watch){
        .name = cfg->name,
        .backend = cfg->backend,
        .endpoints = cfg->endpoints,
        .pki = cfg->pki,
        .zk_hosts = cfg->zk_hosts,
        .resource = "{name}",
        .timeout_ms = cfg->timeout_ms,
        .idle_ms = cfg->idle_ms,
        .zk_sess_ms = cfg->zk_sess_ms,
        .required = true,
        .line = cfg->line,
    };
    w->only = strdup(e + cut);
    if (strcmp(cfg->backend, "zookeeper") == 0 && cut > 1) {
        cut--; /* "/a/b" below "/a"; "/b" below "/" */
    }
    w->prefix = strndup(e, cut);
    return w->prefix != NULL && w->only != NULL;
}

/* Tell the carrier what is known now. */
static void
report(struct follow *f, const char *why)
{
    if (f->failing) {
        carry_lost(f->c, why);
    } else if (!f->read) {
        /* starting: nothing to tell until the first read */
    } else if (f->ours) {
        carry_won(f->c, f->fence, 0, f->identity);
    } else {
        carry_standby(f->c, f->fence, f->holder[0] != '\0' ? f->holder : NULL,
                      why);
    }
}

static void
on_holder(void *owner, const char *name, size_t len, int64_t fence,
          const char *who, size_t wlen)
{
    struct follow *f = owner;

    (void)name;
    (void)len;
    f->read = true;
    f->fence = fence > 0 ? fence : 0;
    f->ours = fence > 0 && who != NULL && wlen == f->idlen &&
              memcmp(who, f->identity, wlen) == 0;
    f->holder[0] = '\0';
    if (fence > 0 && who != NULL) {
        logesc(f->holder, sizeof(f->holder), who, wlen, LOGESC_WORD);
    }
    report(f, fence > 0 ? "another identity holds the election"
                        : "the election has no holder");
}

static void
on_seen(void *owner, enum watch_seen what, const char *why)
{
    struct follow *f = owner;
    bool was = f->failing;

    f->failing = what == WATCH_SEEN_ERROR;
    if (f->failing) {
        f->read = false; /* the holder may change unseen from now on */
    }
    if (f->failing || was) {
        report(f, f->failing ? (why != NULL ? why : "-")
                             : "its store is followed again");
    }
}

static void
follow_close(void *impl)
{
    struct follow *f = impl;

    if (f == NULL) {
        return;
    }
    if (f->src != NULL) {
        f->ops->close(f->src);
    }
    free(f->w.prefix);
    free(f->w.only);
    free(f);
}

static void *
follow_open(const struct carry_env *env, struct carrier *c, const void *cfgv,
            char *err, size_t errlen)
{
    static const struct watch_hooks hooks = {.holder = on_holder,
                                             .seen = on_seen};
    const struct cfg_follow *cfg = cfgv;
    struct follow *f = calloc(1, sizeof(*f));

    if (f == NULL || !election_watch(cfg, &f->w)) {
        snprintf(err, errlen, "follow %s: out of memory", cfg->name);
        follow_close(f);
        return NULL;
    }
    f->c = c;
    f->identity = cfg->identity;
    f->idlen = strlen(cfg->identity);
    f->ops = watch_source_find(cfg->backend);
    if (f->ops == NULL) {
        snprintf(err, errlen, "follow %s: backend %s is not available",
                 cfg->name, cfg->backend);
        follow_close(f);
        return NULL;
    }
    f->src = f->ops->open(env->base, &f->w, &hooks, f, err, errlen);
    if (f->src == NULL) {
        follow_close(f);
        return NULL;
    }
    log_info("follow %s: %s %s as %s", cfg->name, cfg->kind,
             LOG_QSTR(cfg->election), LOG_QSTR(cfg->identity));
    return f;
}

const struct carry_kind carry_follow_kind = {
    .name = "follow",
    .open = follow_open,
    .close = follow_close,
};
