/* watch_zookeeper.c: a [watch] source on ZooKeeper: the locks that
 * ZooKeeper's lock recipe takes (kazoo's Lock, Curator's
 * InterProcessMutex): each child of the prefix is one lock, its
 * ephemeral sequential children its contenders, the holder the one with
 * the lowest sequence number, its fence that node's czxid. Followed with
 * ZooKeeper's one-shot watches, set again by every read.
 *
 * An election (Curator's LeaderLatch, kazoo's Election) is one lock of
 * this shape: its path's sequential children the participants, the
 * leader the lowest, its node's data the leader's id. With cfg->only,
 * the source follows only the lock <prefix>/<only>, and reports its
 * holder with the holder's data, and that it has none when it has no
 * child or no node. */
#include "watch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../conf/cfg.h"
#include "../../policies/zkname.h"
#include "../clients/zk_conn.h"
#include "../log.h"

#include <event2/event.h>

/*
 * What is watched. A read of the prefix's children sets a child watch on
 * the prefix (a lock made or removed), or, while the prefix does not
 * exist, an exists watch on it. A read of a lock's children sets a child
 * watch on the lock (a contender came or went: maybe a new holder); the
 * holder's czxid is then read with exists. Every event is answered by
 * reading again, which sets the watch again: ZooKeeper delivers a watch
 * event before any read that sees the change, so no change is missed
 * between the event and the next read.
 *
 * Order. A holder is reported more than once (a read per event) and
 * maybe late, after a later holder: harmless, since the next holder's
 * node was created after the previous holder's, so its czxid is higher,
 * and a mark only grows.
 *
 * Sessions. A connection lost and found again keeps the session and its
 * watches (the client sets them again); a session that ended loses them.
 * Either way, every (re)connection reads every lock again and reports
 * its holder.
 */

#define ZW_SETTLE_MS 500
#define ZW_PROBE_MS 1000

enum zw_step {
    ZW_PREFIX = 0,  /* the prefix's children, with a watch */
    ZW_PREFIX_WAIT, /* the prefix does not exist: exists, with a watch */
    ZW_LOCK,        /* a lock's children, with a watch */
    ZW_HOLDER,      /* the holder's node: its czxid */
    ZW_PROBE,       /* while not connected: answered when a try failed */
};

struct watch_source {
    const struct tm_log *log;
    struct zk_conn *k;
    struct watch_hooks hooks;
    void *owner;
    struct event *probe_ev; /* the next probe while not connected */
    bool probing;           /* a probe is out */
    char *section;
    char *prefix;
    char *only;      /* NULL: every lock; else the one followed */
    char *only_path; /* its node's path */
    /* The locks whose children are watched (or read), sorted by strcmp. */
    char **locks;
    int nlocks;
};

static void
locks_clear(struct watch_source *s)
{
    zk_kids_free(s->locks, s->nlocks);
    s->locks = NULL;
    s->nlocks = 0;
}

static int
by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Send the read of step about path (lock: the lock's name, or NULL). */
static void
send_read(struct watch_source *s, enum zw_step step, const char *path,
          const char *lock)
{
    struct zk_call *c = zk_call_new(s->k, (int)step, path);
    zhandle_t *zh = zk_conn_zh(s->k);
    void *ctx = zk_conn_ctx(s->k);
    int rc = ZCLOSING;

    if (c == NULL || (lock != NULL && (c->name = strdup(lock)) == NULL)) {
        log_error("watch %s: out of memory: %s is not followed until the "
                  "next connection",
                  s->section, LOG_STR(path));
        zk_call_free(c);
        return;
    }
    if (zh != NULL && step == ZW_HOLDER) {
        rc = zoo_aget(zh, path, 0, zk_done_data, c);
    } else if (zh != NULL && step == ZW_PROBE) {
        rc = zoo_aexists(zh, path, 0, zk_done_stat, c);
    } else if (zh != NULL && step == ZW_PREFIX_WAIT) {
        rc = zoo_awexists(zh, path, zk_conn_watcher, ctx, zk_done_stat, c);
    } else if (zh != NULL) {
        rc = zoo_awget_children(zh, path, zk_conn_watcher, ctx, zk_done_strings,
                                c);
    }
    zk_conn_sent(s->k, c, rc);
}

static void
read_prefix(struct watch_source *s)
{
    send_read(s, ZW_PREFIX, s->prefix, NULL);
}

/* While not connected, a read that the client answers when a try to
 * connect fails (it fails every call it holds then): so a store that
 * cannot be reached is told after the first try, not only after a
 * session that never comes. */
static void
probe(struct watch_source *s)
{
    if (!s->probing && !zk_conn_ready(s->k)) {
        s->probing = true;
        send_read(s, ZW_PROBE, s->prefix, NULL);
    }
}

static void
probe_cb(evutil_socket_t fd, short what, void *arg)
{
    struct watch_source *s = arg;

    lib_enter(s->log);
    (void)fd;
    (void)what;
    probe(s);
}

/* The probe came back: a failed try, or connected meanwhile. */
static void
on_probe(struct watch_source *s, struct zk_call *c)
{
    struct timeval tv = {ZW_PROBE_MS / 1000, (ZW_PROBE_MS % 1000) * 1000};

    s->probing = false;
    if (zk_conn_ready(s->k)) {
        return;
    }
    if (c->rc == ZCLOSING && c->gen != zk_conn_gen(s->k)) {
        /* its handle was closed for a new session's: no try failed */
    } else if (c->rc == ZCLOSING) {
        s->hooks.seen(s->owner, WATCH_SEEN_ERROR,
                      "cannot start a ZooKeeper client (do the hosts "
                      "resolve?)");
    } else if (zk_rc_outage(c->rc)) {
        char why[128];

        snprintf(why, sizeof(why), "cannot connect to ZooKeeper: %s",
                 zerror(c->rc));
        s->hooks.seen(s->owner, WATCH_SEEN_ERROR, why);
    }
    evtimer_add(s->probe_ev, &tv);
}

/* Tell that lock name has no holder now, when it is the one followed
 * (a [watch] has nothing to raise then). */
static void
no_holder(struct watch_source *s, const char *name)
{
    if (s->only != NULL && strcmp(name, s->only) == 0) {
        s->hooks.holder(s->owner, name, strlen(name), 0, NULL, 0);
    }
}

static void
read_lock(struct watch_source *s, const char *name)
{
    char *path =
        s->only != NULL ? strdup(s->only_path) : zk_path_join(s->prefix, name);

    if (path == NULL) {
        log_error("watch %s: out of memory: lock %s is not followed until "
                  "the next connection",
                  s->section, LOG_STR(name));
        return;
    }
    send_read(s, ZW_LOCK, path, name);
    free(path);
}

/* The prefix's children came: read each lock not followed yet; the set
 * becomes kids (taken from c). */
/* With a lock followed, the prefix's children but that one are none of
 * ours: out of c->kids; its absence tells it has no holder. */
static void
keep_only(struct watch_source *s, struct zk_call *c)
{
    int n = 0;

    for (int i = 0; i < c->nkids; i++) {
        if (strcmp(c->kids[i], s->only) == 0) {
            c->kids[n++] = c->kids[i];
        } else {
            free(c->kids[i]);
        }
    }
    c->nkids = n;
    if (n == 0) {
        no_holder(s, s->only);
    }
}

static void
on_prefix(struct watch_source *s, struct zk_call *c)
{
    int i = 0, j = 0;

    if (s->only != NULL) {
        keep_only(s, c);
    }

    if (c->nkids > 1) {
        qsort(c->kids, (size_t)c->nkids, sizeof(*c->kids), by_name);
    }
    while (i < c->nkids) {
        int cmp = j < s->nlocks ? strcmp(c->kids[i], s->locks[j]) : -1;

        if (cmp < 0) {
            read_lock(s, c->kids[i++]);
        } else {
            j++;
            i += cmp == 0;
        }
    }
    locks_clear(s);
    s->locks = c->kids;
    s->nlocks = c->nkids;
    c->kids = NULL;
    c->nkids = 0;
}

/* Take name out of the set: its node is gone (a new one is seen through
 * the prefix's watch). */
static void
lock_forget(struct watch_source *s, const char *name)
{
    for (int i = 0; i < s->nlocks; i++) {
        if (strcmp(s->locks[i], name) == 0) {
            free(s->locks[i]);
            memmove(&s->locks[i], &s->locks[i + 1],
                    (size_t)(s->nlocks - i - 1) * sizeof(*s->locks));
            s->nlocks--;
            return;
        }
    }
}

/* A lock's contenders came: read the holder's node. */
static void
on_lock(struct watch_source *s, struct zk_call *c)
{
    int first = zkname_first(c->kids, c->nkids);
    char *path;

    if (first < 0) {
        log_debug("watch %s: lock %s: no holder", s->section, LOG_STR(c->name));
        no_holder(s, c->name);
        return;
    }
    path = zk_path_join(c->path, c->kids[first]);
    if (path == NULL) {
        log_error("watch %s: out of memory: lock %s not followed", s->section,
                  LOG_STR(c->name));
        return;
    }
    send_read(s, ZW_HOLDER, path, c->name);
    free(path);
}

/* A watch fired on path: read again what it was about. */
static void
on_event(struct watch_source *s, struct zk_call *c)
{
    size_t len = 0;
    const char *name;

    if (c->str == NULL || c->type == ZOO_NOTWATCHING_EVENT) {
        return;
    }
    s->hooks.seen(s->owner, WATCH_SEEN_EVENT, NULL);
    if (strcmp(c->str, s->prefix) == 0) {
        read_prefix(s);
        return;
    }
    if (s->only != NULL) {
        if (strcmp(c->str, s->only_path) == 0) {
            read_lock(s, s->only);
        }
        return;
    }
    name = zkname_below(s->prefix, c->str, &len);
    if (name != NULL) {
        char *lock = strndup(name, len);

        if (lock != NULL) {
            read_lock(s, lock);
            free(lock);
        }
    }
}

/* An error that is no outage (an ACL, say): it stays until an operator
 * acts, so it is logged; an outage is read again on the next
 * connection. */
static void
on_error(struct watch_source *s, struct zk_call *c)
{
    if (zk_rc_outage(c->rc)) {
        log_debug("watch %s: %s: %s; read again once connected", s->section,
                  LOG_STR(c->path), zerror(c->rc));
        return;
    }
    log_error("watch %s: cannot read %s: %s: its locks are not followed",
              s->section, LOG_STR(c->path), zerror(c->rc));
    s->hooks.seen(s->owner, WATCH_SEEN_ERROR, zerror(c->rc));
}

static void
zw_call(void *arg, struct zk_call *c)
{
    struct watch_source *s = arg;

    if (c->step == ZW_PROBE && !zk_conn_closing(s->k)) {
        on_probe(s, c); /* any session's: it tells of a try */
    } else if (zk_conn_closing(s->k) || c->gen != zk_conn_gen(s->k)) {
        /* an old session's: the new one reads everything again */
    } else if (c->step == ZK_CALL_EVENT) {
        on_event(s, c);
    } else if (c->step == ZW_PREFIX && c->rc == ZNONODE) {
        locks_clear(s);
        send_read(s, ZW_PREFIX_WAIT, s->prefix, NULL);
    } else if (c->step == ZW_PREFIX_WAIT && c->rc == ZNONODE) {
        log_info("watch %s: %s does not exist yet: waiting for it", s->section,
                 LOG_STR(s->prefix));
        s->hooks.seen(s->owner, WATCH_SEEN_READ, NULL);
        if (s->only != NULL) {
            no_holder(s, s->only);
        }
    } else if (c->step == ZW_LOCK && c->rc == ZNONODE) {
        lock_forget(s, c->name);
        no_holder(s, c->name);
    } else if (c->step == ZW_HOLDER && c->rc == ZNONODE) {
        /* gone since: the lock's watch fires and it is read again */
    } else if (c->rc != ZOK) {
        on_error(s, c);
    } else if (c->step == ZW_PREFIX) {
        s->hooks.seen(s->owner, WATCH_SEEN_READ, NULL);
        on_prefix(s, c);
    } else if (c->step == ZW_PREFIX_WAIT) {
        read_prefix(s); /* made meanwhile */
    } else if (c->step == ZW_LOCK) {
        on_lock(s, c);
    } else if (c->step == ZW_HOLDER) {
        log_debug("watch %s: lock %s: held by %s, czxid %lld", s->section,
                  LOG_STR(c->name), LOG_STR(c->path), (long long)c->stat.czxid);
        s->hooks.holder(s->owner, c->name, strlen(c->name), c->stat.czxid,
                        c->data, c->data != NULL ? (size_t)c->data_len : 0);
    }
    zk_call_free(c);
}

static void
zw_state(void *arg, enum zk_conn_state st)
{
    struct watch_source *s = arg;

    if (st == ZK_CONN_UP) {
        log_info("watch %s: reading every lock under %s", s->section,
                 LOG_STR(s->prefix));
        locks_clear(s);
        read_prefix(s);
    } else if (st == ZK_CONN_DOWN) {
        s->hooks.seen(s->owner, WATCH_SEEN_ERROR,
                      "the connection to ZooKeeper is lost");
        probe(s);
    } else {
        log_info("watch %s: the session ended: starting a new one", s->section);
        s->hooks.seen(s->owner, WATCH_SEEN_ERROR, "the session ended");
        locks_clear(s);
        /* once the new handle is there (zk_conn starts it after this) */
        event_active(s->probe_ev, EV_TIMEOUT, 1);
    }
}

static void
zw_close(struct watch_source *s)
{
    if (s == NULL) {
        return;
    }
    if (s->k != NULL) {
        zk_conn_close(s->k, ZW_SETTLE_MS);
        zk_conn_free(s->k); /* the calls out come back: dropped */
    }
    if (s->probe_ev != NULL) {
        event_free(s->probe_ev);
    }
    locks_clear(s);
    free(s->section);
    free(s->prefix);
    free(s->only);
    free(s->only_path);
    free(s);
}

static struct watch_source *
zw_open(struct event_base *base, const struct cfg_watch *cfg,
        const struct watch_hooks *hooks, void *owner, char *err, size_t errlen)
{
    static const struct zk_conn_hooks zk_hooks = {.call = zw_call,
                                                  .state = zw_state};
    struct watch_source *s = calloc(1, sizeof(*s));
    char who[96];

    if (s == NULL) {
        snprintf(err, errlen, "watch: out of memory");
        return NULL;
    }
    s->log = log_current();
    s->hooks = *hooks;
    s->owner = owner;
    s->section = strdup(cfg->name);
    s->prefix = strdup(cfg->prefix);
    s->probe_ev = evtimer_new(base, probe_cb, s);
    if (cfg->only != NULL && s->prefix != NULL) {
        s->only = strdup(cfg->only);
        /* below "/", "/only"; else "prefix/only" */
        s->only_path = zk_path_join(
            strcmp(s->prefix, "/") == 0 ? "" : s->prefix, cfg->only);
    }
    if (s->section == NULL || s->prefix == NULL || s->probe_ev == NULL ||
        (cfg->only != NULL && (s->only == NULL || s->only_path == NULL))) {
        snprintf(err, errlen, "watch: out of memory");
        zw_close(s);
        return NULL;
    }
    if (cfg->zk_hosts == NULL || cfg->zk_hosts[0] == '\0') {
        snprintf(err, errlen, "watch %s: backend zookeeper needs hosts",
                 cfg->name);
        zw_close(s);
        return NULL;
    }
    snprintf(who, sizeof(who), "watch %s: zookeeper", cfg->name);
    /* The first read waits for the session (zw_state, ZK_CONN_UP). */
    s->k = zk_conn_new(base, cfg->zk_hosts, cfg->zk_sess_ms, who, &zk_hooks, s,
                       err, errlen);
    if (s->k == NULL) {
        zw_close(s);
        return NULL;
    }
    probe(s);
    return s;
}

const struct watch_source_ops watch_zookeeper_ops = {
    .name = "zookeeper",
    .open = zw_open,
    .close = zw_close,
};
