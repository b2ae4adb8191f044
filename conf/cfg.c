/* cfg.c: loading tidemark's INI file: read with inih (cfg_read.c), then
 * TIDEMARK_<SECTION>_<KEY> overrides (cfg_env.c), then the table of
 * options applied (cfg_build.c); freeing a configuration, and what a
 * reload keeps from the running one. */
#include "cfg.h"

#include <stdlib.h>
#include <string.h>

#include "cfg_load.h"

static void
free_loader(struct loader *l)
{
    for (size_t i = 0; i < l->nsects; i++) {
        struct raw_sect *s = &l->sects[i];

        for (size_t j = 0; j < cfg_nopts; j++) {
            free(s->vals[j].value);
            free(s->vals[j].at.env);
        }
        free(s->vals);
        free(s->name);
        free(s->env_name);
    }
    free(l->sects);
    free(l->line);
    free(l->err_keys);
    free(l->env_links);
}

/* cfg_load, from text when it is not NULL (path names it then); probe:
 * also what cfg_probe asks of the host. */
static bool
load(struct tm_config *c, const char *path, const char *text, char *const *envp,
     struct cfg_errors *errs, bool probe)
{
    struct loader l;
    size_t before = errs->n;

    memset(c, 0, sizeof(*c));
    memset(&l, 0, sizeof(l));
    l.file = path;
    l.text = text;
    l.envp = envp;
    l.errs = errs;
    l.errs_before = errs->n;
    c->file = strdup(path);
    l.oom = c->file == NULL;
    /* The singletons exist even when the file leaves them out, so
     * defaults and env overrides reach them. */
    if (cfg_new_sect(&l, CFG_PROXY, NULL, 0) == NULL ||
        cfg_new_sect(&l, CFG_ADMIN, NULL, 0) == NULL ||
        cfg_new_sect(&l, CFG_STORE, NULL, 0) == NULL ||
        cfg_new_sect(&l, CFG_LOCKS, NULL, 0) == NULL ||
        cfg_new_sect(&l, CFG_TOKENS, NULL, 0) == NULL) {
        free_loader(&l);
        return false;
    }
    cfg_read_file(&l);
    for (size_t i = 0; envp != NULL && envp[i] != NULL; i++) {
        if (strncmp(envp[i], ENV_PREFIX, strlen(ENV_PREFIX)) == 0) {
            cfg_apply_env(&l, envp[i]);
        }
    }
    cfg_build(&l, c);
    if (!l.oom) {
        cfg_check_whole(&l, c);
    }
    if (probe && !l.oom && errs->n == before) {
        cfg_probe(&l, c);
    }
    c->env_links = l.env_links;
    l.env_links = NULL;
    if (l.oom) {
        cfg_add_err(&l, NULL, "%s", "out of memory");
    }
    cfg_sort_errs(&l);
    free_loader(&l);
    return !l.oom && errs->n == before;
}

bool
cfg_load(struct tm_config *c, const char *path, char *const *envp,
         struct cfg_errors *errs)
{
    return load(c, path, NULL, envp, errs, false);
}

bool
cfg_load_probe(struct tm_config *c, const char *path, char *const *envp,
               struct cfg_errors *errs)
{
    return load(c, path, NULL, envp, errs, true);
}

bool
cfg_load_string(struct tm_config *c, const char *name, const char *text,
                char *const *envp, struct cfg_errors *errs)
{
    return load(c, name, text, envp, errs, false);
}

/* Every option's fields are freed by the table (cfg_opt_drop); what is
 * left is the sections' names and arrays. */
void
cfg_free(struct tm_config *c)
{
    for (size_t i = 0; i < cfg_nopts; i++) {
        const struct cfg_opt *o = &cfg_opts[i];
        void *obj;

        for (size_t j = 0; (obj = cfg_sect_obj(c, o->sect, j)) != NULL; j++) {
            cfg_opt_drop(o, obj);
        }
    }
    for (size_t i = 0; i < c->nupstreams; i++) {
        free(c->upstreams[i].name);
        sigv4_creds_free(&c->upstreams[i].sign_creds);
        for (size_t e = 0; e < AWS_ENV_N; e++) {
            char *v = c->upstreams[i].sign_env[e];

            if (v != NULL) {
                explicit_bzero(v, strlen(v));
            }
            free(v);
        }
    }
    for (size_t i = 0; i < c->nroutes; i++) {
        free(c->routes[i].name);
    }
    for (size_t i = 0; i < c->nwatches; i++) {
        free(c->watches[i].name);
    }
    for (size_t i = 0; i < c->nleases; i++) {
        free(c->leases[i].name);
    }
    for (size_t i = 0; i < c->nfollows; i++) {
        free(c->follows[i].name);
    }
    free(c->follows);
    free(c->upstreams);
    free(c->routes);
    free(c->watches);
    free(c->leases);
    free(c->file);
    free(c->env_links);
    free(c->warnings);
    free(c->notes);
    free(c->check_notes);
    memset(c, 0, sizeof(*c));
}

/* The sections of kind k (named: [watch], [lease]) of a and b say the
 * same. Each named section's struct starts with its char *name. */
static bool
sects_same(const struct tm_config *a, const struct tm_config *b,
           enum cfg_sect k)
{
    struct tm_config *ca = (struct tm_config *)a, *cb = (struct tm_config *)b;
    const void *oa, *ob;

    for (size_t i = 0;; i++) {
        oa = cfg_sect_obj(ca, k, i);
        ob = cfg_sect_obj(cb, k, i);
        if (oa == NULL || ob == NULL) {
            return oa == ob;
        }
        if (strcmp(*(char *const *)oa, *(char *const *)ob) != 0) {
            return false;
        }
        for (size_t j = 0; j < cfg_nopts; j++) {
            const struct cfg_opt *o = &cfg_opts[j];

            if (o->sect == k && !cfg_opt_same(o, oa, ob)) {
                return false;
            }
        }
    }
}

/* The [watch] sections are read once at start: nw takes old's. */
static bool
watches_keep(struct tm_config *nw, const struct tm_config *old)
{
    struct cfg_watch *w = calloc(old->nwatches + 1, sizeof(*w));

    if (w == NULL) {
        return false;
    }
    for (size_t i = 0; i < nw->nwatches; i++) {
        for (size_t j = 0; j < cfg_nopts; j++) {
            if (cfg_opts[j].sect == CFG_WATCH) {
                cfg_opt_drop(&cfg_opts[j], &nw->watches[i]);
            }
        }
        free(nw->watches[i].name);
    }
    free(nw->watches);
    nw->watches = w;
    nw->nwatches = old->nwatches;
    for (size_t i = 0; i < old->nwatches; i++) {
        w[i].name = strdup(old->watches[i].name);
        w[i].line = old->watches[i].line;
        if (w[i].name == NULL) {
            return false;
        }
        for (size_t j = 0; j < cfg_nopts; j++) {
            if (cfg_opts[j].sect == CFG_WATCH &&
                cfg_opt_copy(&cfg_opts[j], &w[i], &old->watches[i]) != NULL) {
                return false;
            }
        }
    }
    return true;
}

bool
cfg_keep_restart_only(struct tm_config *nw, const struct tm_config *old,
                      void (*changed)(void *arg, const char *key,
                                      const char *kept),
                      void *arg)
{
    if (!sects_same(nw, old, CFG_WATCH)) {
        if (!watches_keep(nw, old)) {
            return false;
        }
        changed(arg, "[watch] sections", "the ones read at start");
    }
    if (!sects_same(nw, old, CFG_LEASE)) {
        /* The leases run from the first configuration; a route that
         * names one added since is refused (proxy/carry/carry.c). */
        changed(arg, "[lease] sections", "the ones read at start");
    }
    if (!sects_same(nw, old, CFG_FOLLOW)) {
        /* As the leases. */
        changed(arg, "[follow] sections", "the ones read at start");
    }
    for (size_t i = 0; i < cfg_nopts; i++) {
        const struct cfg_opt *o = &cfg_opts[i];
        void *dst = cfg_singleton(nw, o->sect);
        const void *src = cfg_singleton((struct tm_config *)old, o->sect);
        char key[96], kept[256];

        /* Named sections: [watch] above; the others have no restart
         * keys. */
        if (dst == NULL || src == NULL || !(o->flags & CFG_RESTART) ||
            cfg_opt_same(o, dst, src)) {
            continue;
        }
        if (cfg_opt_copy(o, dst, src) != NULL) {
            return false;
        }
        snprintf(key, sizeof(key), "[%s] %s", cfg_sect_name(o->sect), o->key);
        cfg_opt_show(o, src, kept, sizeof(kept));
        changed(arg, key, kept);
    }
    return true;
}

void
cfg_errors_free(struct cfg_errors *errs)
{
    for (size_t i = 0; i < errs->n; i++) {
        free(errs->msgs[i]);
    }
    free(errs->msgs);
    errs->msgs = NULL;
    errs->n = 0;
}
