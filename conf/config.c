/* config.c: the configuration calls of tidemark.h, over cfg_load and the
 * option table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../proxy/tidemark.h"
#include "cfg.h"
#include "cfg_opts.h"

/* errs' lines into err, separated by '\n'; cut at errlen. */
static void
join_errors(const struct cfg_errors *errs, char *err, size_t errlen)
{
    size_t n = 0;

    if (errlen == 0) {
        return;
    }
    err[0] = '\0';
    for (size_t i = 0; i < errs->n && n + 1 < errlen; i++) {
        int w = snprintf(err + n, errlen - n, "%s%s", i > 0 ? "\n" : "",
                         errs->msgs[i]);
        if (w < 0) {
            break;
        }
        n += (size_t)w;
    }
}

/* Load path (or text, when not NULL) into a new configuration; probe:
 * with cfg_load_probe. */
static struct tm_config *
load(const char *path, const char *text, char *const *envp, char *err,
     size_t errlen, bool probe)
{
    struct tm_config *c = calloc(1, sizeof(*c));
    struct cfg_errors errs = {0};
    bool ok;

    if (c == NULL) {
        snprintf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    ok = text != NULL ? cfg_load_string(c, path, text, envp, &errs)
         : probe      ? cfg_load_probe(c, path, envp, &errs)
                      : cfg_load(c, path, envp, &errs);
    if (!ok) {
        join_errors(&errs, err, errlen);
        if (errs.n == 0) {
            snprintf(err, errlen, "%s: out of memory", path);
        }
        cfg_errors_free(&errs);
        tm_config_free(c);
        return NULL;
    }
    cfg_errors_free(&errs);
    return c;
}

struct tm_config *
tm_config_load(const char *path, char *const *envp, char *err, size_t errlen)
{
    return load(path, NULL, envp, err, errlen, false);
}

struct tm_config *
tm_config_check(const char *path, char *const *envp, char *err, size_t errlen)
{
    return load(path, NULL, envp, err, errlen, true);
}

struct tm_config *
tm_config_from_string(const char *name, const char *text, char *const *envp,
                      char *err, size_t errlen)
{
    return load(name, text != NULL ? text : "", envp, err, errlen, false);
}

bool
tm_config_get(const struct tm_config *cfg, const char *section, const char *key,
              char *buf, size_t len)
{
    for (size_t i = 0; i < cfg_nopts; i++) {
        const struct cfg_opt *o = &cfg_opts[i];
        const void *obj;

        if (cfg_sect_named(o->sect) ||
            strcmp(cfg_sect_name(o->sect), section) != 0 ||
            strcmp(o->key, key) != 0) {
            continue;
        }
        obj = cfg_singleton((struct tm_config *)cfg, o->sect);
        cfg_opt_show(o, obj, buf, len);
        return true;
    }
    return false;
}

void
tm_config_free(struct tm_config *cfg)
{
    if (cfg != NULL) {
        cfg_free(cfg);
        free(cfg);
    }
}

struct text_buf {
    char *s;
    size_t len, cap;
    bool oom;
};

static void
text_line(void *arg, const char *line)
{
    struct text_buf *t = arg;
    size_t n = strlen(line);

    if (t->oom) {
        return;
    }
    if (t->len + n + 2 > t->cap) {
        size_t cap = (t->len + n + 2) * 2;
        char *s = realloc(t->s, cap);

        if (s == NULL) {
            t->oom = true;
            return;
        }
        t->s = s;
        t->cap = cap;
    }
    memcpy(t->s + t->len, line, n);
    t->len += n;
    t->s[t->len++] = '\n';
    t->s[t->len] = '\0';
}

char *
tm_config_text(const struct tm_config *cfg)
{
    struct text_buf t = {0};

    cfg_print(cfg, text_line, &t);
    if (t.oom) {
        free(t.s);
        return NULL;
    }
    return t.s != NULL ? t.s : strdup("");
}

const char *
tm_config_warnings(const struct tm_config *cfg)
{
    return cfg->warnings;
}

const char *
tm_config_notes(const struct tm_config *cfg)
{
    return cfg->notes;
}

const char *
tm_config_check_notes(const struct tm_config *cfg)
{
    return cfg->check_notes;
}

const char *
tm_version(void)
{
    return TM_VERSION;
}
