/* cfg.c: loading tidemark's INI file with inih, then TIDEMARK_<SECTION>_<KEY>
 * overrides, then applying the table of options (cfg_opts.c). Every
 * problem is collected as "FILE:LINE: message" or "env:NAME: message". */
#include "cfg.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "cfg_opts.h"

#define ENV_PREFIX "TIDEMARK_"

/* Variables that share the prefix without being overrides: the test
 * harness's path to the binary. */
static const char *const env_not_overrides[] = {"TIDEMARK_BIN", NULL};

/* Where a value came from: a line of the file, or an env variable. */
struct origin {
    int line;  /* 0: not from the file */
    char *env; /* the variable's name, owned; NULL: not from env */
};

struct raw_val {
    bool set;
    char *value;
    struct origin at;
};

/* A section as read, before the table is applied to it. */
struct raw_sect {
    enum cfg_sect kind;
    char *name;           /* NULL for [proxy], [admin], [store] */
    char *env_name;       /* "ROUTE_DOCUMENTS" */
    int line;             /* of the header; 0: not in the file */
    struct raw_val *vals; /* cfg_nopts of them, indexed like cfg_opts */
};

enum reading {
    READ_NONE = 0, /* before the first section header */
    READ_SECT,     /* keys go to sects[cur] */
    READ_SKIP,     /* in a section already reported as wrong */
};

struct loader {
    const char *file;
    const char *text; /* the file's contents, given: cfg_load_string */
    struct cfg_errors *errs;
    size_t errs_before; /* errs->n when loading started */
    int *err_keys;      /* per new error: where it sorts */
    bool oom;
    FILE *fp;
    char *line;
    size_t linecap;
    int lineno;
    enum reading reading;
    size_t cur;
    struct raw_sect *sects;
    size_t nsects;
    char *const *envp;
    char *env_links; /* service-link variables set aside (env_link) */
};

static void add_err(struct loader *l, const struct origin *at, const char *fmt,
                    ...) __attribute__((format(printf, 3, 4)));

static void
add_err(struct loader *l, const struct origin *at, const char *fmt, ...)
{
    char msg[512];
    char where[32] = "";
    const char *prefix = l->file;
    bool from_env = at != NULL && at->env != NULL;
    char *full;
    char **msgs;
    int *keys;
    size_t n;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (from_env) {
        prefix = at->env;
    } else if (at != NULL && at->line > 0) {
        snprintf(where, sizeof(where), ":%d", at->line);
    }
    n = strlen(prefix) + strlen(where) + strlen(msg) + 7;
    full = malloc(n);
    if (full == NULL) {
        l->oom = true;
        return;
    }
    snprintf(full, n, "%s%s%s: %s", from_env ? "env:" : "", prefix, where, msg);
    msgs = realloc(l->errs->msgs, (l->errs->n + 1) * sizeof(*msgs));
    if (msgs == NULL) {
        free(full);
        l->oom = true;
        return;
    }
    l->errs->msgs = msgs;
    keys =
        realloc(l->err_keys, (l->errs->n - l->errs_before + 1) * sizeof(*keys));
    if (keys == NULL) {
        free(full);
        l->oom = true;
        return;
    }
    l->err_keys = keys;
    /* File problems in line order, then the environment's. */
    keys[l->errs->n - l->errs_before] = at == NULL        ? 0
                                        : at->env != NULL ? INT_MAX
                                                          : at->line;
    msgs[l->errs->n++] = full;
}

/* Stable sort of the new errors by their keys. */
static void
sort_errs(struct loader *l)
{
    size_t n = l->errs->n - l->errs_before;
    char **msgs;

    /* Not even NULL + 0 when there is nothing to sort: that is undefined
     * behaviour (UBSan's pointer-overflow check, found by fuzzing). */
    if (n < 2) {
        return;
    }
    msgs = l->errs->msgs + l->errs_before;
    for (size_t i = 1; i < n; i++) {
        int key = l->err_keys[i];
        char *msg = msgs[i];
        size_t j = i;

        for (; j > 0 && l->err_keys[j - 1] > key; j--) {
            l->err_keys[j] = l->err_keys[j - 1];
            msgs[j] = msgs[j - 1];
        }
        l->err_keys[j] = key;
        msgs[j] = msg;
    }
}

/* An error on the line being read. */
static void line_err(struct loader *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
line_err(struct loader *l, const char *fmt, ...)
{
    struct origin at = {l->lineno, NULL};
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    add_err(l, &at, "%s", msg);
}

/* "[store]" or "[route documents]", for messages. */
static const char *
sect_label(const struct raw_sect *s, char *buf, size_t len)
{
    if (s->name != NULL) {
        snprintf(buf, len, "[%s %s]", cfg_sect_name(s->kind), s->name);
    } else {
        snprintf(buf, len, "[%s]", cfg_sect_name(s->kind));
    }
    return buf;
}

static struct raw_sect *
find_sect(struct loader *l, enum cfg_sect kind, const char *name)
{
    for (size_t i = 0; i < l->nsects; i++) {
        struct raw_sect *s = &l->sects[i];

        if (s->kind != kind) {
            continue;
        }
        if (name == NULL || (s->name != NULL && strcmp(s->name, name) == 0)) {
            return s;
        }
    }
    return NULL;
}

/* Append a section; NULL when out of memory. */
static struct raw_sect *
new_sect(struct loader *l, enum cfg_sect kind, const char *name, int line)
{
    struct raw_sect *s;
    const char *kname = cfg_sect_name(kind);
    size_t klen = strlen(kname);
    size_t nlen = name != NULL ? strlen(name) : 0;

    s = realloc(l->sects, (l->nsects + 1) * sizeof(*s));
    if (s == NULL) {
        l->oom = true;
        return NULL;
    }
    l->sects = s;
    s = &l->sects[l->nsects];
    memset(s, 0, sizeof(*s));
    s->kind = kind;
    s->line = line;
    s->name = name != NULL ? strdup(name) : NULL;
    s->env_name = malloc(klen + nlen + 2);
    s->vals = calloc(cfg_nopts, sizeof(*s->vals));
    if ((name != NULL && s->name == NULL) || s->env_name == NULL ||
        s->vals == NULL) {
        free(s->name);
        free(s->env_name);
        free(s->vals);
        l->oom = true;
        return NULL;
    }
    /* Uppercased; spaces and '-' (and '.') become '_'. */
    snprintf(s->env_name, klen + nlen + 2, "%s%s%s", kname,
             name != NULL ? "_" : "", name != NULL ? name : "");
    for (char *p = s->env_name; *p != '\0'; p++) {
        if (*p >= 'a' && *p <= 'z') {
            *p = (char)(*p - 'a' + 'A');
        } else if (*p == ' ' || *p == '-' || *p == '.') {
            *p = '_';
        }
    }
    l->nsects++;
    return s;
}

static bool
is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\f' || c == '\v';
}

/* A "[kind]" or "[kind NAME]" line: s points at '['. */
static void
section_line(struct loader *l, char *s)
{
    char *end = strchr(s, ']');
    char *kind, *name, *after;
    struct raw_sect *sect;
    enum cfg_sect k;

    l->reading = READ_SKIP;
    if (end == NULL) {
        line_err(l, "%s", "syntax error: a section header needs a ']'");
        return;
    }
    for (after = end + 1; is_space(*after); after++) {
    }
    if (*after != '\0' && *after != ';' && *after != '#') {
        line_err(l, "%s", "syntax error: text after the section header");
        return;
    }
    *end = '\0';
    for (kind = s + 1; is_space(*kind); kind++) {
    }
    while (end > kind && is_space(end[-1])) {
        *--end = '\0';
    }
    for (name = kind; *name != '\0' && !is_space(*name); name++) {
    }
    if (*name != '\0') {
        *name++ = '\0';
        while (is_space(*name)) {
            name++;
        }
    }
    for (k = 0; k < CFG_NSECT; k++) {
        if (strcmp(kind, cfg_sect_name(k)) == 0) {
            break;
        }
    }
    if (k == CFG_NSECT) {
        line_err(l, "unknown section [%s%s%s]", kind, *name != '\0' ? " " : "",
                 name);
        return;
    }
    if (cfg_sect_named(k) && *name == '\0') {
        line_err(l, "[%s] needs a name: [%s NAME]", kind, kind);
        return;
    }
    if (!cfg_sect_named(k) && *name != '\0') {
        line_err(l, "[%s] takes no name", kind);
        return;
    }
    if (cfg_sect_named(k) && !cfg_name_ok(name, strlen(name))) {
        line_err(l, "section name '%s': use letters, digits, '_', '-' and '.'",
                 name);
        return;
    }
    sect = find_sect(l, k, cfg_sect_named(k) ? name : NULL);
    if (sect != NULL && sect->line > 0) {
        char label[128];

        line_err(l, "duplicate section %s (first at line %d)",
                 sect_label(sect, label, sizeof(label)), sect->line);
        return;
    }
    if (sect == NULL) {
        sect = new_sect(l, k, cfg_sect_named(k) ? name : NULL, l->lineno);
        if (sect == NULL) {
            return;
        }
    }
    sect->line = l->lineno;
    l->cur = (size_t)(sect - l->sects);
    l->reading = READ_SECT;
}

/* inih's reader: hands inih one line at a time, so lineno is the line of
 * the handler's key. Section headers are handled here (inih never
 * reports a section without keys, nor its line); overlong and malformed
 * lines are reported here, every one of them, and given to inih blank.
 * Leading blanks are dropped: inih would take an indented line for a
 * continuation of the previous value. */
static char *
read_line(char *str, int num, void *stream)
{
    struct loader *l = stream;
    ssize_t got;
    char *s;
    size_t len;

    got = getline(&l->line, &l->linecap, l->fp);
    if (got < 0) {
        return NULL;
    }
    l->lineno++;
    s = l->line;
    len = strlen(s);
    while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == '\r')) {
        s[--len] = '\0';
    }
    if (l->lineno == 1 && strncmp(s, "\xEF\xBB\xBF", 3) == 0) {
        s += 3;
    }
    while (is_space(*s)) {
        s++;
    }
    len = strlen(s);
    strcpy(str, "\n");
    if (*s == '\0' || *s == ';' || *s == '#') {
        return str;
    }
    if (len + 3 > (size_t)num) {
        line_err(l, "line longer than %d characters", num - 3);
        return str;
    }
    if (*s == '[') {
        section_line(l, s);
        return str;
    }
    /* As inih splits: at the first '=' or ':', unless an inline comment
     * (';' after a blank) comes first. */
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '=' || s[i] == ':') {
            if (i == 0) {
                break;
            }
            memcpy(str, s, len);
            memcpy(str + len, "\n", 2);
            return str;
        }
        if (s[i] == ';' && i > 0 && is_space(s[i - 1])) {
            break;
        }
    }
    line_err(l, "%s", "syntax error: expected key = value");
    return str;
}

static int
find_opt(enum cfg_sect kind, const char *key)
{
    for (size_t i = 0; i < cfg_nopts; i++) {
        if (cfg_opts[i].sect == kind && strcmp(cfg_opts[i].key, key) == 0) {
            return (int)i;
        }
    }
    return -1;
}

/* inih's handler: one key = value of the current section. Always goes
 * on (returns 1): errors are collected, not fatal. */
static int
on_key(void *user, const char *section, const char *key, const char *value)
{
    struct loader *l = user;
    struct raw_sect *s;
    struct raw_val *v;
    struct origin at = {l->lineno, NULL};
    char label[128];
    int i;

    if (l->reading == READ_NONE) {
        add_err(l, &at, "key '%s' outside any section", key);
        return 1;
    }
    if (l->reading == READ_SKIP) {
        return 1;
    }
    s = &l->sects[l->cur];
    i = find_opt(s->kind, key);
    if (i < 0) {
        add_err(l, &at, "unknown key '%s' in %s", key,
                sect_label(s, label, sizeof(label)));
        return 1;
    }
    v = &s->vals[i];
    if (v->set && (cfg_opts[i].flags & CFG_REPEAT)) {
        size_t a = strlen(v->value), b = strlen(value != NULL ? value : "");
        char *joined = realloc(v->value, a + b + 2);

        if (joined == NULL) {
            l->oom = true;
            return 1;
        }
        joined[a] = '\n';
        memcpy(joined + a + 1, value != NULL ? value : "", b + 1);
        v->value = joined;
        return 1;
    }
    if (v->set) {
        add_err(l, &at, "duplicate key '%s' in %s (first at line %d)", key,
                sect_label(s, label, sizeof(label)), v->at.line);
        return 1;
    }
    v->value = strdup(value != NULL ? value : "");
    if (v->value == NULL) {
        l->oom = true;
        return 1;
    }
    v->set = true;
    v->at.line = l->lineno;
    return 1;
}

static void
read_file(struct loader *l)
{
    int rc;

    l->fp = l->text != NULL ? fmemopen((void *)l->text, strlen(l->text), "r")
                            : fopen(l->file, "r");
    if (l->fp == NULL) {
        add_err(l, NULL, "cannot open: %s", strerror(errno));
        return;
    }
    rc = ini_parse_stream(read_line, l, on_key, l);
    if (ferror(l->fp)) {
        add_err(l, NULL, "read error: %s", strerror(errno));
    } else if (rc > 0) {
        /* read_line hands inih only lines it accepts: defensive. */
        struct origin at = {rc, NULL};

        add_err(l, &at, "%s", "syntax error");
    } else if (rc < 0) {
        add_err(l, NULL, "%s", "cannot parse (out of memory)");
    }
    fclose(l->fp);
    l->fp = NULL;
}

/* Whether name (len bytes) spells key uppercased. */
static bool
env_key_eq(const char *name, size_t len, const char *key)
{
    if (strlen(key) != len) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char k = key[i];

        if (k >= 'a' && k <= 'z') {
            k = (char)(k - 'a' + 'A');
        }
        if (name[i] != k) {
            return false;
        }
    }
    return true;
}

/*
 * Kubernetes "service links". For every Service S of a pod's namespace
 * (unless the pod sets enableServiceLinks: false), every container gets,
 * with S upper-cased and '-' made '_':
 *   S_SERVICE_HOST, S_SERVICE_PORT, S_SERVICE_PORT_<PORTNAME>, S_PORT,
 *   S_PORT_<n>_<TCP|UDP|SCTP>, and that with _PROTO, _PORT or _ADDR.
 * A Service named tidemark, or tidemark-anything, so makes TIDEMARK_
 * variables that name no key. Such a variable is set aside instead of
 * refused when it has one of these shapes for some S that is TIDEMARK or
 * TIDEMARK_ followed by [A-Z0-9_], and S_SERVICE_HOST and S_SERVICE_PORT
 * are both in the environment: Kubernetes always sets the two together,
 * a typo does not (a lone TIDEMARK_PROXY_PORT stays an error).
 */

/* Whether tail (after S, starting with '_') is a service link's. */
static bool
link_tail(const char *t, size_t n)
{
    static const char *const protos[] = {"_TCP", "_UDP", "_SCTP"};
    static const char *const parts[] = {"_PROTO", "_PORT", "_ADDR"};
    size_t d = 0;

#define IS(lit) (n == strlen(lit) && memcmp(t, lit, n) == 0)
#define STARTS(lit) (n >= strlen(lit) && memcmp(t, lit, strlen(lit)) == 0)
    if (IS("_SERVICE_HOST") || IS("_SERVICE_PORT") || IS("_PORT")) {
        return true;
    }
    if (STARTS("_SERVICE_PORT_")) {
        return n > strlen("_SERVICE_PORT_");
    }
    if (!STARTS("_PORT_")) {
        return false;
    }
#undef IS
#undef STARTS
    t += 6;
    n -= 6;
    while (d < n && t[d] >= '0' && t[d] <= '9') {
        d++;
    }
    if (d == 0 || d > 5) {
        return false;
    }
    t += d;
    n -= d;
    for (size_t i = 0; i < 3; i++) {
        size_t pl = strlen(protos[i]);

        if (n < pl || memcmp(t, protos[i], pl) != 0) {
            continue;
        }
        if (n == pl) {
            return true;
        }
        for (size_t j = 0; j < 3; j++) {
            if (n - pl == strlen(parts[j]) &&
                memcmp(t + pl, parts[j], n - pl) == 0) {
                return true;
            }
        }
    }
    return false;
}

/* Whether envp holds the variable s[0..slen) followed by suffix. */
static bool
env_has(char *const *envp, const char *s, size_t slen, const char *suffix)
{
    size_t n = strlen(suffix);

    for (size_t i = 0; envp != NULL && envp[i] != NULL; i++) {
        const char *e = envp[i];

        if (strncmp(e, s, slen) == 0 && strncmp(e + slen, suffix, n) == 0 &&
            e[slen + n] == '=') {
            return true;
        }
    }
    return false;
}

/* Whether var[0..nlen) is a Kubernetes service link (above). */
static bool
env_link(char *const *envp, const char *var, size_t nlen)
{
    const size_t base = strlen(ENV_PREFIX) - 1; /* "TIDEMARK" */

    for (size_t s = base; s < nlen; s++) {
        if (var[s] != '_') {
            continue;
        }
        if (link_tail(var + s, nlen - s) &&
            env_has(envp, var, s, "_SERVICE_HOST") &&
            env_has(envp, var, s, "_SERVICE_PORT")) {
            return true;
        }
    }
    return false;
}

/* The service part may only hold what Kubernetes makes of a Service
 * name: upper-case letters, digits and '_'. */
static bool
env_link_chars(const char *var, size_t nlen)
{
    for (size_t i = 0; i < nlen; i++) {
        char c = var[i];

        if (!(c >= 'A' && c <= 'Z') && !(c >= '0' && c <= '9') && c != '_') {
            return false;
        }
    }
    return true;
}

/* Note var[0..nlen) among the service links set aside. */
static void
note_link(struct loader *l, const char *var, size_t nlen)
{
    size_t have = l->env_links != NULL ? strlen(l->env_links) : 0;
    char *s = realloc(l->env_links, have + nlen + 2);

    if (s == NULL) {
        l->oom = true;
        return;
    }
    if (have > 0) {
        s[have++] = ' ';
    }
    memcpy(s + have, var, nlen);
    s[have + nlen] = '\0';
    l->env_links = s;
}

/* One TIDEMARK_ variable: find the one section and key it names and
 * replace the file's value. */
static void
apply_env(struct loader *l, const char *var)
{
    const char *eq = strchr(var, '=');
    size_t nlen = eq != NULL ? (size_t)(eq - var) : strlen(var);
    const char *rest = var + strlen(ENV_PREFIX);
    size_t rlen = nlen - strlen(ENV_PREFIX);
    struct raw_sect *hit = NULL;
    int hit_opt = -1;
    size_t hits = 0;
    struct origin at = {0, NULL};
    struct raw_val *v;
    char *value;
    bool link;

    if (eq == NULL) {
        return;
    }
    for (size_t i = 0; env_not_overrides[i] != NULL; i++) {
        if (strlen(env_not_overrides[i]) == nlen &&
            memcmp(var, env_not_overrides[i], nlen) == 0) {
            return;
        }
    }
    at.env = strndup(var, nlen);
    if (at.env == NULL) {
        l->oom = true;
        return;
    }
    for (size_t i = 0; i < l->nsects; i++) {
        struct raw_sect *s = &l->sects[i];
        size_t slen = strlen(s->env_name);

        if (rlen <= slen + 1 || memcmp(rest, s->env_name, slen) != 0 ||
            rest[slen] != '_') {
            continue;
        }
        for (size_t j = 0; j < cfg_nopts; j++) {
            if (cfg_opts[j].sect == s->kind &&
                env_key_eq(rest + slen + 1, rlen - slen - 1, cfg_opts[j].key)) {
                hits++;
                hit = s;
                hit_opt = (int)j;
            }
        }
    }
    link = env_link_chars(var, nlen) && env_link(l->envp, var, nlen);
    if (hits == 0 && link) {
        note_link(l, var, nlen);
        free(at.env);
        return;
    }
    if (hits != 1 || link) {
        add_err(l, &at, "%s",
                hits == 0 ? "names no section and key of the configuration"
                : link    ? "is both a key's override and a Kubernetes "
                            "service link (a Service named tidemark-...): set "
                            "enableServiceLinks: false or rename the section"
                          : "names more than one section and key; rename "
                            "a section");
        free(at.env);
        return;
    }
    value = strdup(eq + 1);
    if (value == NULL) {
        l->oom = true;
        free(at.env);
        return;
    }
    v = &hit->vals[hit_opt];
    free(v->value);
    free(v->at.env);
    v->value = value;
    v->at = at;
    v->set = true;
}

/* Where to report a problem of a whole section: its header; for a
 * singleton not in the file, the override that caused it. */
static const struct origin *
sect_origin(const struct raw_sect *s, struct origin *at)
{
    at->line = s->line;
    at->env = NULL;
    for (size_t i = 0; s->line == 0 && i < cfg_nopts; i++) {
        if (s->vals[i].set) {
            return &s->vals[i].at;
        }
    }
    return at;
}

/* Where key of s was set, tried in order; else where s is. */
static const struct origin *
keys_origin(const struct raw_sect *s, const char *const *keys,
            struct origin *at)
{
    for (; *keys != NULL; keys++) {
        for (size_t i = 0; i < cfg_nopts; i++) {
            if (cfg_opts[i].sect == s->kind &&
                strcmp(cfg_opts[i].key, *keys) == 0 && s->vals[i].set) {
                return &s->vals[i].at;
            }
        }
    }
    return sect_origin(s, at);
}

static void *
sect_obj(struct tm_config *c, const struct raw_sect *s, size_t *nup,
         size_t *nroute, size_t *nwatch, size_t *nlease, size_t *nfollow)
{
    switch (s->kind) {
    case CFG_LEASE:
        return &c->leases[(*nlease)++];
    case CFG_FOLLOW:
        return &c->follows[(*nfollow)++];
    case CFG_UPSTREAM:
        return &c->upstreams[(*nup)++];
    case CFG_ROUTE:
        return &c->routes[(*nroute)++];
    case CFG_WATCH:
        return &c->watches[(*nwatch)++];
    default:
        return cfg_singleton(c, s->kind);
    }
}

/* Run every option of s's kind through its setter: the value from the
 * file or env, else the default. */
static void
apply_sect(struct loader *l, const struct raw_sect *s, void *obj)
{
    char label[128];
    char buf[256];

    for (size_t i = 0; i < cfg_nopts; i++) {
        const struct cfg_opt *o = &cfg_opts[i];
        const struct raw_val *v = &s->vals[i];
        const char *msg;

        if (o->sect != s->kind) {
            continue;
        }
        if (!v->set && o->def == NULL) {
            if (o->flags & CFG_REQUIRED) {
                struct origin at = {s->line, NULL};

                add_err(l, &at, "%s: missing required key '%s'",
                        sect_label(s, label, sizeof(label)), o->key);
            }
            continue;
        }
        buf[0] = '\0';
        msg = cfg_opt_set(o, obj, v->set ? v->value : o->def, buf, sizeof(buf));
        if (msg != NULL) {
            add_err(l, v->set ? &v->at : NULL, "%s: %s", o->key, msg);
        }
    }
}

/* The value of NAME (len bytes) in envp, or NULL. */
static const char *
env_lookup(char *const *envp, const char *name, size_t len)
{
    for (size_t i = 0; envp != NULL && envp[i] != NULL; i++) {
        if (strncmp(envp[i], name, len) == 0 && envp[i][len] == '=') {
            return envp[i] + len + 1;
        }
    }
    return NULL;
}

/* v with each ${VAR} replaced by the environment's value (malloc); an
 * unset variable is an error at at, "WHAT: ${VAR} is not set in the
 * environment", naming it, never a value. NULL when out of memory. */
static char *
expand_env(struct loader *l, const struct origin *at, const char *what,
           const char *v)
{
    size_t cap = strlen(v) + 1, n = 0;
    char *out = malloc(cap);
    const char *p;

    if (out == NULL) {
        l->oom = true;
        return NULL;
    }
    for (p = v; *p != '\0';) {
        const char *end, *val;
        size_t vlen, need;

        if (p[0] != '$' || p[1] != '{' || (end = strchr(p + 2, '}')) == NULL) {
            out[n++] = *p++;
            continue;
        }
        val = env_lookup(l->envp, p + 2, (size_t)(end - p - 2));
        if (val == NULL) {
            add_err(l, at, "%s: ${%.*s} is not set in the environment", what,
                    (int)(end - p - 2), p + 2);
            val = "";
        }
        vlen = strlen(val);
        need = n + vlen + strlen(end + 1) + 1;
        if (need > cap) {
            char *bigger = realloc(out, need);
            if (bigger == NULL) {
                free(out);
                l->oom = true;
                return NULL;
            }
            out = bigger;
            cap = need;
        }
        memcpy(out + n, val, vlen);
        n += vlen;
        p = end + 1;
    }
    out[n] = '\0';
    return out;
}

/* Replace ${VAR} in add_header values by the environment's value. */
static void
expand_headers(struct loader *l, const struct raw_sect *s,
               struct cfg_upstream *u)
{
    for (size_t i = 0; i < u->nadd; i++) {
        struct origin at;
        char what[300];
        char *out;

        snprintf(what, sizeof(what), "add_header %s", u->add[i].name);
        out = expand_env(l, sect_origin(s, &at), what, u->add[i].value);
        if (out == NULL) {
            return;
        }
        if (strpbrk(out, "\r\n") != NULL) {
            add_err(l, sect_origin(s, &at),
                    "add_header %s: the environment's value has a line "
                    "break",
                    u->add[i].name);
        }
        free(u->add[i].value);
        u->add[i].value = out;
    }
}

/* The largest credentials file read. */
#define CREDS_MAX 65536

/* Read a file that only its owner (and group) may read, up to
 * CREDS_MAX bytes, into a malloc'd buffer (*out, *n). NULL, or a
 * message that never quotes the file. */
static const char *
read_private(const char *path, char **out, size_t *n, char *buf, size_t len)
{
    struct stat st;
    ssize_t got;
    int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);

    if (fd < 0) {
        snprintf(buf, len, "cannot open it: %s", strerror(errno));
        return buf;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > CREDS_MAX) {
        close(fd);
        return "it is not a regular file of at most 64 KiB";
    }
    if (st.st_mode & (S_IROTH | S_IWOTH)) {
        close(fd);
        return "it is readable or writable by others: chmod 600 it (or 640 "
               "for a group)";
    }
    *out = malloc(CREDS_MAX);
    *n = 0;
    while (*out != NULL && *n < CREDS_MAX &&
           (got = read(fd, *out + *n, CREDS_MAX - *n)) != 0) {
        if (got < 0 && errno != EINTR) {
            close(fd);
            return "cannot read it";
        }
        *n += got > 0 ? (size_t)got : 0;
    }
    close(fd);
    return *out == NULL ? "out of memory" : NULL;
}

/* A credential from the environment: printable ASCII, no spaces. */
static bool
env_cred_ok(const char *v)
{
    size_t n = strlen(v);

    for (size_t i = 0; i < n; i++) {
        if (v[i] <= ' ' || v[i] > '~') {
            return false;
        }
    }
    return n > 0 && n <= 4096;
}

/* sign = aws-sigv4: its region, and its credentials from
 * sign_credentials_file or the environment, into u->sign_creds. No
 * message quotes a credential. */
static void
load_sign(struct loader *l, const struct raw_sect *s, struct cfg_upstream *u)
{
    static const char *const keys[] = {"sign_credentials_file", "sign", NULL};
    const char *key_id, *secret, *session, *msg;
    struct sigv4_creds *cr = &u->sign_creds;
    char buf[256];
    struct origin at;

    if (u->sign == CFG_SIGN_NONE) {
        return;
    }
    if (u->sign_region == NULL || u->sign_region[0] == '\0') {
        static const char *const rk[] = {"sign", NULL};

        add_err(l, keys_origin(s, rk, &at),
                "sign = aws-sigv4 needs sign_region");
    }
    if (u->sign_credentials_file != NULL &&
        u->sign_credentials_file[0] != '\0') {
        char *text = NULL;
        size_t n = 0;

        msg =
            read_private(u->sign_credentials_file, &text, &n, buf, sizeof(buf));
        if (msg == NULL) {
            msg = sigv4_creds_parse(text, n, u->sign_profile, cr);
        }
        if (text != NULL) {
            explicit_bzero(text, n);
        }
        free(text);
        if (msg != NULL) {
            add_err(l, keys_origin(s, keys, &at),
                    "sign_credentials_file [%s]: %s", u->sign_profile, msg);
        }
        return;
    }
    key_id = env_lookup(l->envp, "AWS_ACCESS_KEY_ID", 17);
    secret = env_lookup(l->envp, "AWS_SECRET_ACCESS_KEY", 21);
    session = env_lookup(l->envp, "AWS_SESSION_TOKEN", 17);
    if (key_id == NULL || secret == NULL || key_id[0] == '\0' ||
        secret[0] == '\0') {
        add_err(l, keys_origin(s, keys, &at),
                "sign = aws-sigv4 needs credentials: sign_credentials_file, "
                "or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the "
                "environment");
        return;
    }
    if (!env_cred_ok(key_id) || !env_cred_ok(secret) ||
        (session != NULL && session[0] != '\0' && !env_cred_ok(session))) {
        add_err(l, keys_origin(s, keys, &at),
                "sign: an AWS_* credential in the environment is not "
                "printable ASCII without spaces");
        return;
    }
    cr->key_id = strdup(key_id);
    cr->secret = strdup(secret);
    cr->session =
        session != NULL && session[0] != '\0' ? strdup(session) : NULL;
    l->oom |= cr->key_id == NULL || cr->secret == NULL ||
              (session != NULL && session[0] != '\0' && cr->session == NULL);
}

/* A [follow] once its keys are set: identity's ${VAR} expanded (an
 * identity that comes out empty is an error), then its keys together. */
static void
load_follow(struct loader *l, const struct raw_sect *s, struct cfg_follow *f,
            size_t before)
{
    static const char *const id_key[] = {"identity", NULL};
    struct origin at;
    char buf[256];
    char *id;

    if (find_sect(l, CFG_LEASE, f->name) != NULL) {
        add_err(l, sect_origin(s, &at),
                "[follow %s]: a [lease %s] has that name too: a route's "
                "lease = %s would name both",
                f->name, f->name, f->name);
    }
    if (l->errs->n != before || f->identity == NULL) {
        return;
    }
    id = expand_env(l, keys_origin(s, id_key, &at), "identity", f->identity);
    if (id == NULL) {
        return;
    }
    free(f->identity);
    f->identity = id;
    if (l->errs->n == before && cfg_check_follow(f, buf, sizeof(buf))) {
        static const char *const none[] = {NULL};
        static const char *const keyed[][2] = {
            {"kind", NULL}, {"election", NULL}, {"identity", NULL}};
        const char *const *keys = none;

        for (size_t i = 0; i < sizeof(keyed) / sizeof(keyed[0]); i++) {
            size_t n = strlen(keyed[i][0]);

            if (strncmp(buf, keyed[i][0], n) == 0 && buf[n] == ':') {
                keys = keyed[i];
            }
        }
        add_err(l, keys_origin(s, keys, &at), "%s", buf);
    }
}

/* Whether s is in the file, or set from the environment. */
static bool
sect_given(const struct raw_sect *s)
{
    if (s == NULL || s->line > 0) {
        return s != NULL;
    }
    for (size_t i = 0; i < cfg_nopts; i++) {
        if (cfg_opts[i].sect == s->kind && s->vals[i].set) {
            return true;
        }
    }
    return false;
}

/* A [lease] once its keys are set: renew_ms below ttl_ms (0 becomes
 * ttl_ms / 3), and a [locks] section naming the backend it lives in (a
 * lease in the default ./data/locks.lmdb would be shared with nobody). */
static void
check_lease(struct loader *l, const struct raw_sect *s, struct cfg_lease *ls,
            size_t before)
{
    struct origin at;
    char buf[256];

    if (l->errs->n != before) {
        return;
    }
    if (ls->renew_ms == 0) {
        ls->renew_ms = ls->ttl_ms / 3 > 0 ? ls->ttl_ms / 3 : 1;
    }
    if (cfg_check_lease(ls, buf, sizeof(buf)) != NULL) {
        static const char *const keys[] = {"renew_ms", NULL};

        add_err(l, keys_origin(s, keys, &at), "%s", buf);
    }
    if (!sect_given(find_sect(l, CFG_LOCKS, NULL))) {
        add_err(l, sect_origin(s, &at),
                "[lease %s] needs a [locks] section: the lease lives in the "
                "lock service's backend (lmdb for one host; redis, "
                "postgres, etcd or zookeeper to share it)",
                ls->name);
    }
}

/* Whether name is a section that can carry a route's token: a [lease]
 * (or a [follow]). */
static bool
carrier_known(const struct tm_config *c, const char *name)
{
    for (size_t i = 0; i < c->nleases; i++) {
        if (strcmp(c->leases[i].name, name) == 0) {
            return true;
        }
    }
    for (size_t i = 0; i < c->nfollows; i++) {
        if (strcmp(c->follows[i].name, name) == 0) {
            return true;
        }
    }
    return false;
}

static void
build(struct loader *l, struct tm_config *c)
{
    size_t nup = 0, nroute = 0, nwatch = 0, nlease = 0, nfollow = 0, before;
    char buf[256];

    for (size_t i = 0; i < l->nsects; i++) {
        nup += l->sects[i].kind == CFG_UPSTREAM;
        nroute += l->sects[i].kind == CFG_ROUTE;
        nwatch += l->sects[i].kind == CFG_WATCH;
        nlease += l->sects[i].kind == CFG_LEASE;
        nfollow += l->sects[i].kind == CFG_FOLLOW;
    }
    c->upstreams = calloc(nup + 1, sizeof(*c->upstreams));
    c->routes = calloc(nroute + 1, sizeof(*c->routes));
    c->watches = calloc(nwatch + 1, sizeof(*c->watches));
    c->leases = calloc(nlease + 1, sizeof(*c->leases));
    c->follows = calloc(nfollow + 1, sizeof(*c->follows));
    if (c->upstreams == NULL || c->routes == NULL || c->watches == NULL ||
        c->leases == NULL || c->follows == NULL) {
        l->oom = true;
        return;
    }
    c->nupstreams = nup;
    c->nroutes = nroute;
    c->nwatches = nwatch;
    c->nleases = nlease;
    c->nfollows = nfollow;
    nup = 0;
    nroute = 0;
    nwatch = 0;
    nlease = 0;
    nfollow = 0;
    for (size_t i = 0; i < l->nsects; i++) {
        const struct raw_sect *s = &l->sects[i];
        void *obj = sect_obj(c, s, &nup, &nroute, &nwatch, &nlease, &nfollow);

        if (s->kind == CFG_UPSTREAM) {
            struct cfg_upstream *u = obj;

            u->name = strdup(s->name);
            u->line = s->line;
            l->oom |= u->name == NULL;
        } else if (s->kind == CFG_ROUTE) {
            struct cfg_route *r = obj;

            r->name = strdup(s->name);
            r->line = s->line;
            l->oom |= r->name == NULL;
        } else if (s->kind == CFG_WATCH) {
            struct cfg_watch *w = obj;

            w->name = strdup(s->name);
            w->line = s->line;
            l->oom |= w->name == NULL;
        } else if (s->kind == CFG_LEASE) {
            struct cfg_lease *ls = obj;

            ls->name = strdup(s->name);
            ls->line = s->line;
            l->oom |= ls->name == NULL;
        } else if (s->kind == CFG_FOLLOW) {
            struct cfg_follow *f = obj;

            f->name = strdup(s->name);
            f->line = s->line;
            l->oom |= f->name == NULL;
        }
        before = l->errs->n;
        apply_sect(l, s, obj);
        if (s->kind == CFG_UPSTREAM) {
            expand_headers(l, s, obj);
            load_sign(l, s, obj);
        }
        if (s->kind == CFG_FOLLOW) {
            load_follow(l, s, obj, before);
        }
        /* A bad value was reported; "needs" would only repeat it. */
        if (s->kind == CFG_PROXY && l->errs->n == before &&
            cfg_check_proxy(&c->proxy, buf, sizeof(buf)) != NULL) {
            static const char *const keys[] = {"max_uri", "max_head", NULL};
            struct origin at;

            add_err(l, keys_origin(s, keys, &at), "%s", buf);
        }
        if (s->kind == CFG_STORE && l->errs->n == before &&
            cfg_check_store(&c->store, buf, sizeof(buf)) != NULL) {
            struct origin at;

            add_err(l, sect_origin(s, &at), "%s", buf);
        }
        if (s->kind == CFG_LOCKS && l->errs->n == before &&
            cfg_check_locks(&c->locks, buf, sizeof(buf)) != NULL) {
            struct origin at;

            add_err(l, sect_origin(s, &at), "%s", buf);
        }
        if (s->kind == CFG_LEASE) {
            check_lease(l, s, obj, before);
        }
        if (s->kind == CFG_WATCH && l->errs->n == before &&
            cfg_check_watch(obj, buf, sizeof(buf)) != NULL) {
            /* "KEY: ..." is reported where KEY is set. */
            static const char *const none[] = {NULL};
            static const char *const prefix[] = {"prefix", NULL};
            static const char *const token[] = {"token", NULL};
            const char *const *keys = none;
            struct origin at;

            if (strncmp(buf, "prefix:", 7) == 0) {
                keys = prefix;
            } else if (strncmp(buf, "token:", 6) == 0) {
                keys = token;
            }
            add_err(l, keys_origin(s, keys, &at), "%s", buf);
        }
    }
    nroute = 0;
    for (size_t i = 0; i < l->nsects; i++) {
        const struct raw_sect *s = &l->sects[i];
        struct cfg_route *r;
        size_t j;

        if (s->kind != CFG_ROUTE) {
            continue;
        }
        r = &c->routes[nroute++];
        if (r->verify == TM_VERIFY_HMAC && c->tokens.key == NULL) {
            struct origin at = {s->line, NULL};

            add_err(l, &at, "[route %s]: verify = hmac needs [tokens] key_file",
                    r->name);
        }
        if (r->profile == TM_PROFILE_WEBDAV && r->resource_from_header) {
            struct origin at = {s->line, NULL};

            /* A MOVE onto this route is named by the template. */
            add_err(l, &at,
                    "[route %s]: profile = webdav needs a resource template, "
                    "not header",
                    r->name);
        }
        if (r->lease != NULL && !carrier_known(c, r->lease)) {
            static const char *const keys[] = {"lease", NULL};
            struct origin at;

            add_err(l, keys_origin(s, keys, &at),
                    "lease: no [lease] or [follow] section %s", r->lease);
        }
        if (r->upstream == NULL) {
            continue;
        }
        for (j = 0; j < c->nupstreams; j++) {
            if (strcmp(c->upstreams[j].name, r->upstream) == 0) {
                break;
            }
        }
        if (j < c->nupstreams) {
            r->upstream_idx = j;
            if (r->profile == TM_PROFILE_S3 && r->mode != TM_MODE_OFF) {
                c->upstreams[j].s3_fenced = true;
            }
        } else {
            struct origin at = {s->line, NULL};

            add_err(l, &at, "[route %s]: no [upstream %s] section", r->name,
                    r->upstream);
        }
    }
}

/* Append a warning line about the file to c->warnings. */
static void
add_warning(struct loader *l, struct tm_config *c, const char *msg)
{
    size_t have = c->warnings != NULL ? strlen(c->warnings) : 0;
    size_t need = have + strlen(l->file) + strlen(msg) + 16;
    char *w = realloc(c->warnings, need);

    if (w == NULL) {
        l->oom = true;
        return;
    }
    snprintf(w + have, need - have, "%s%s: warning: %s", have > 0 ? "\n" : "",
             l->file, msg);
    c->warnings = w;
}

/* Whether listen addresses a and b ("host:port") would take the same
 * socket: the same port, and the same host or a wildcard on either. */
static bool
same_socket(const char *a, const char *b)
{
    char *ah, *ap, *bh, *bp;
    bool same = false;

    if (a == NULL || b == NULL || a[0] == '\0' || b[0] == '\0' ||
        !cfg_split_hostport(a, &ah, &ap)) {
        return false;
    }
    if (cfg_split_hostport(b, &bh, &bp)) {
        bool any = ah[0] == '\0' || bh[0] == '\0' || strcmp(ah, "*") == 0 ||
                   strcmp(bh, "*") == 0 || strcmp(ah, "0.0.0.0") == 0 ||
                   strcmp(bh, "0.0.0.0") == 0 || strcmp(ah, "::") == 0 ||
                   strcmp(bh, "::") == 0;

        same = strcmp(ap, bp) == 0 && strcmp(ap, "0") != 0 &&
               (any || strcasecmp(ah, bh) == 0);
        free(bh);
        free(bp);
    }
    free(ah);
    free(ap);
    return same;
}

/* What concerns the file as a whole, once every section is read. */
static void
check_whole(struct loader *l, struct tm_config *c)
{
    static const char *const keys[] = {"listen", NULL};

    if (same_socket(c->proxy.listen, c->admin.listen)) {
        struct origin at_admin, at_proxy;
        const struct origin *at =
            keys_origin(find_sect(l, CFG_ADMIN, NULL), keys, &at_admin);

        /* Where the clash was written: [admin] unless it kept its
         * default. */
        if (at->line == 0 && at->env == NULL) {
            at = keys_origin(find_sect(l, CFG_PROXY, NULL), keys, &at_proxy);
        }
        add_err(l, at,
                "[admin] listen %s is the address of [proxy] listen %s: the "
                "control port needs its own",
                c->admin.listen, c->proxy.listen);
    }
    if (c->nroutes == 0) {
        add_warning(l, c,
                    "no [route] section: no request is fenced (unmatched "
                    "requests are passed or refused, per [proxy] unmatched)");
    }
    if (c->nupstreams == 0) {
        add_warning(l, c,
                    "no [upstream] section: no request is forwarded (the "
                    "control port and its lock service still run)");
    }
}

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

/* cfg_load, from text when it is not NULL (path names it then). */
static bool
load(struct tm_config *c, const char *path, const char *text, char *const *envp,
     struct cfg_errors *errs)
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
    if (new_sect(&l, CFG_PROXY, NULL, 0) == NULL ||
        new_sect(&l, CFG_ADMIN, NULL, 0) == NULL ||
        new_sect(&l, CFG_STORE, NULL, 0) == NULL ||
        new_sect(&l, CFG_LOCKS, NULL, 0) == NULL ||
        new_sect(&l, CFG_TOKENS, NULL, 0) == NULL) {
        free_loader(&l);
        return false;
    }
    read_file(&l);
    for (size_t i = 0; envp != NULL && envp[i] != NULL; i++) {
        if (strncmp(envp[i], ENV_PREFIX, strlen(ENV_PREFIX)) == 0) {
            apply_env(&l, envp[i]);
        }
    }
    build(&l, c);
    if (!l.oom) {
        check_whole(&l, c);
    }
    c->env_links = l.env_links;
    l.env_links = NULL;
    if (l.oom) {
        add_err(&l, NULL, "%s", "out of memory");
    }
    sort_errs(&l);
    free_loader(&l);
    return !l.oom && errs->n == before;
}

bool
cfg_load(struct tm_config *c, const char *path, char *const *envp,
         struct cfg_errors *errs)
{
    return load(c, path, NULL, envp, errs);
}

bool
cfg_load_string(struct tm_config *c, const char *name, const char *text,
                char *const *envp, struct cfg_errors *errs)
{
    return load(c, name, text, envp, errs);
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
