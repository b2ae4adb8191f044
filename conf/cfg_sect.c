/* cfg_sect.c: the sections of a configuration: their objects and names,
 * the whole configuration printed as a file would give it, and the
 * checks of a section once every key is set. */
#include "cfg_opts.h"

#include <stdio.h>
#include <string.h>

#include "cfg_set.h"

/* The name of a named section's object: [upstream NAME], [route NAME]. */
static const char *
sect_obj_name(enum cfg_sect s, const void *obj)
{
    switch (s) {
    case CFG_UPSTREAM:
        return ((const struct cfg_upstream *)obj)->name;
    case CFG_WATCH:
        return ((const struct cfg_watch *)obj)->name;
    case CFG_LEASE:
        return ((const struct cfg_lease *)obj)->name;
    case CFG_FOLLOW:
        return ((const struct cfg_follow *)obj)->name;
    default:
        return ((const struct cfg_route *)obj)->name;
    }
}

/* Whether o's value in obj is unset: a text option never given. */
static bool
opt_unset(const struct cfg_opt *o, const void *obj)
{
    switch (o->type) {
    case CFG_T_CHOICE:
    case CFG_T_STR:
    case CFG_T_KEYFILE:
        return *CFG_FIELD(obj, o, char *const) == NULL;
    default:
        return false;
    }
}

void
cfg_print(const struct tm_config *c, void (*emit)(void *arg, const char *line),
          void *arg)
{
    struct tm_config *cc = (struct tm_config *)c;
    char value[4096];
    char line[4352];

    for (enum cfg_sect s = 0; s < CFG_NSECT; s++) {
        const void *obj;

        for (size_t j = 0; (obj = cfg_sect_obj(cc, s, j)) != NULL; j++) {
            if (cfg_sect_named(s)) {
                snprintf(line, sizeof(line), "[%s %s]", cfg_sect_name(s),
                         sect_obj_name(s, obj));
            } else {
                snprintf(line, sizeof(line), "[%s]", cfg_sect_name(s));
            }
            emit(arg, line);
            for (size_t i = 0; i < cfg_nopts; i++) {
                const struct cfg_opt *o = &cfg_opts[i];
                char *v;

                if (o->sect != s || opt_unset(o, obj)) {
                    continue;
                }
                cfg_opt_show(o, obj, value, sizeof(value));
                if ((o->flags & CFG_REPEAT) && value[0] == '\0') {
                    continue; /* a repeatable option never given */
                }
                if (strcmp(value, "(empty)") == 0) {
                    value[0] = '\0';
                }
                v = value;
                do {
                    char *eol = strchr(v, '\n');

                    if (eol != NULL) {
                        *eol = '\0';
                    }
                    snprintf(line, sizeof(line), "%s =%s%s", o->key,
                             v[0] != '\0' ? " " : "", v);
                    emit(arg, line);
                    v = eol != NULL ? eol + 1 : NULL;
                } while (v != NULL);
            }
            emit(arg, "");
        }
    }
}

void *
cfg_singleton(struct tm_config *c, enum cfg_sect s)
{
    switch (s) {
    case CFG_PROXY:
        return &c->proxy;
    case CFG_ADMIN:
        return &c->admin;
    case CFG_STORE:
        return &c->store;
    case CFG_LOCKS:
        return &c->locks;
    case CFG_TOKENS:
        return &c->tokens;
    default:
        return NULL;
    }
}

void *
cfg_sect_obj(struct tm_config *c, enum cfg_sect s, size_t i)
{
    switch (s) {
    case CFG_UPSTREAM:
        return i < c->nupstreams ? &c->upstreams[i] : NULL;
    case CFG_ROUTE:
        return i < c->nroutes ? &c->routes[i] : NULL;
    case CFG_WATCH:
        return i < c->nwatches ? &c->watches[i] : NULL;
    case CFG_LEASE:
        return i < c->nleases ? &c->leases[i] : NULL;
    case CFG_FOLLOW:
        return i < c->nfollows ? &c->follows[i] : NULL;
    default:
        return i == 0 ? cfg_singleton(c, s) : NULL;
    }
}

const char *
cfg_sect_name(enum cfg_sect s)
{
    static const char *const names[CFG_NSECT] = {
        "proxy",    "admin", "store", "locks", "tokens",
        "upstream", "route", "watch", "lease", "follow",
    };

    return names[s];
}

bool
cfg_sect_named(enum cfg_sect s)
{
    return s == CFG_UPSTREAM || s == CFG_ROUTE || s == CFG_WATCH ||
           s == CFG_LEASE || s == CFG_FOLLOW;
}

const char *
cfg_check_locks(const struct cfg_locks *l, char *buf, size_t len)
{
    const char *need = NULL, *v = NULL;

    if (l->backend == NULL) {
        return NULL;
    }
    if (strcmp(l->backend, "redis") == 0) {
        need = "url";
        v = l->url;
    } else if (strcmp(l->backend, "postgres") == 0) {
        need = "dsn";
        v = l->dsn;
    } else if (strcmp(l->backend, "etcd") == 0) {
        need = "endpoints";
        v = l->endpoints;
    } else if (strcmp(l->backend, "zookeeper") == 0) {
        need = "hosts";
        v = l->zk_hosts;
    }
    if (need != NULL && (v == NULL || !*v)) {
        snprintf(buf, len, "[locks] backend %s needs %s", l->backend, need);
        return buf;
    }
    if (strcmp(l->backend, "redis") == 0) {
        return cfg_check_redis_pair("locks", l->url, l->cluster, buf, len);
    }
    return NULL;
}

const char *
cfg_check_lease(const struct cfg_lease *l, char *buf, size_t len)
{
    if (l->renew_ms >= l->ttl_ms) {
        snprintf(buf, len,
                 "[lease %s] renew_ms (%d) must be below ttl_ms (%d): a "
                 "lease renewed after its end is lost",
                 l->name, l->renew_ms, l->ttl_ms);
        return buf;
    }
    if (l->margin_ms > 0 && l->margin_ms >= l->ttl_ms - l->renew_ms) {
        snprintf(buf, len,
                 "[lease %s] margin_ms (%d) must be below ttl_ms - renew_ms "
                 "(%d): the lease would end on this sidecar's clock before "
                 "each renewal",
                 l->name, l->margin_ms, l->ttl_ms - l->renew_ms);
        return buf;
    }
    return NULL;
}

const char *
cfg_check_watch(const struct cfg_watch *w, char *buf, size_t len)
{
    const char *v = NULL, *need = NULL, *msg;

    if (w->backend == NULL || w->prefix == NULL) {
        return NULL; /* reported already */
    }
    if (strcmp(w->backend, "etcd") == 0) {
        need = "endpoints";
        v = w->endpoints;
    } else if (strcmp(w->backend, "zookeeper") == 0) {
        need = "hosts";
        v = w->zk_hosts;
    }
    if (need != NULL && (v == NULL || !*v)) {
        snprintf(buf, len, "[watch %s] backend %s needs %s", w->name,
                 w->backend, need);
        return buf;
    }
    if (strcmp(w->backend, "zookeeper") == 0 &&
        (msg = cfg_zk_root_ops.check(w->prefix, buf, len)) != NULL) {
        snprintf(buf, len, "prefix: %s", msg);
        return buf;
    }
    if (strcmp(w->backend, "zookeeper") == 0 && w->token != NULL &&
        strcmp(w->token, "lock_revision") == 0) {
        snprintf(buf, len,
                 "token: lock_revision is for backend etcd (a "
                 "ZooKeeper lock's token is its node's czxid)");
        return buf;
    }
    return NULL;
}

/* Which backend holds a kind of election. */
static const char *
follow_kind_backend(const char *kind)
{
    return strcmp(kind, "etcd-election") == 0 ? "etcd" : "zookeeper";
}

const char *
cfg_check_follow(const struct cfg_follow *f, char *buf, size_t len)
{
    const char *msg;
    size_t n;

    if (f->backend == NULL || f->election == NULL || f->kind == NULL ||
        f->identity == NULL) {
        return NULL; /* reported already */
    }
    n = strlen(f->election);
    if (strcmp(f->backend, follow_kind_backend(f->kind)) != 0) {
        snprintf(buf, len, "kind: %s is an election on %s, not on %s", f->kind,
                 follow_kind_backend(f->kind), f->backend);
    } else if (strcmp(f->backend, "etcd") == 0 &&
               (f->endpoints == NULL || !*f->endpoints)) {
        snprintf(buf, len, "[follow %s] backend etcd needs endpoints", f->name);
    } else if (strcmp(f->backend, "zookeeper") == 0 &&
               (f->zk_hosts == NULL || !*f->zk_hosts)) {
        snprintf(buf, len, "[follow %s] backend zookeeper needs hosts",
                 f->name);
    } else if (strcmp(f->backend, "etcd") == 0 &&
               (n == 0 || f->election[n - 1] == '/')) {
        snprintf(buf, len,
                 "election: the name the application elects under, not "
                 "ending in '/' (its keys are NAME/<lease>)");
    } else if (strcmp(f->backend, "zookeeper") == 0 &&
               (msg = cfg_zk_root_ops.check(f->election, buf, len)) != NULL) {
        snprintf(buf, len, "election: %s", msg);
    } else if (f->identity[0] == '\0') {
        snprintf(buf, len,
                 "identity: empty: this replica's identity is needed (an "
                 "unset ${VAR} reads as empty)");
    } else {
        return NULL;
    }
    return buf;
}

const char *
cfg_check_proxy(const struct cfg_proxy *p, char *buf, size_t len)
{
    if (p->max_uri > p->max_head - CFG_URI_SLACK) {
        snprintf(buf, len,
                 "max_uri (%d) must be at most max_head - %d (%d): a longer "
                 "target would be refused as a large head (431), never as "
                 "a long target (414)",
                 p->max_uri, CFG_URI_SLACK, p->max_head - CFG_URI_SLACK);
        return buf;
    }
    return NULL;
}

const char *
cfg_check_store(const struct cfg_store *s, char *buf, size_t len)
{
    static const struct {
        const char *type;
        const char *key;
        size_t off;
    } needs[] = {
        {"lmdb", "path", offsetof(struct cfg_store, path)},
        {"postgres", "dsn", offsetof(struct cfg_store, dsn)},
        {"redis", "url", offsetof(struct cfg_store, url)},
        {"etcd", "endpoints", offsetof(struct cfg_store, endpoints)},
    };

    if (s->type == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < sizeof(needs) / sizeof(needs[0]); i++) {
        const char *v =
            *(char *const *)(const void *)((const char *)s + needs[i].off);

        if (strcmp(s->type, needs[i].type) == 0 && (v == NULL || !*v)) {
            snprintf(buf, len, "[store] type %s needs %s", needs[i].type,
                     needs[i].key);
            return buf;
        }
    }
    if (strcmp(s->type, "redis") == 0) {
        if (s->cluster && s->wait_replicas > 0) {
            snprintf(buf, len,
                     "[store] wait_replicas needs one Redis server: with "
                     "cluster = yes a raise goes to its slot's master, and "
                     "WAIT is not supported there");
            return buf;
        }
        return cfg_check_redis_pair("store", s->url, s->cluster, buf, len);
    }
    return NULL;
}
