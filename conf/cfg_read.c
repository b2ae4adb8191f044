/* cfg_read.c: reading tidemark's INI text with inih: section headers,
 * keys into the sections as read (cfg_load.h), and every problem
 * collected as "FILE:LINE: message" or "env:NAME: message". */
#include "cfg_load.h"

#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

char *
cfg_where(const struct loader *l, const struct origin *at)
{
    bool env = at != NULL && at->env != NULL;
    const char *name = env ? at->env : l->file;
    size_t n = strlen(name) + 16; /* "env:", or ':' and an int */
    char *buf = malloc(n);

    if (buf == NULL) {
        return NULL;
    }
    if (env) {
        snprintf(buf, n, "env:%s", name);
    } else if (at != NULL && at->line > 0) {
        snprintf(buf, n, "%s:%d", name, at->line);
    } else {
        snprintf(buf, n, "%s", name);
    }
    return buf;
}

void
cfg_add_err(struct loader *l, const struct origin *at, const char *fmt, ...)
{
    char msg[512];
    char *where;
    char *full;
    char **msgs;
    int *keys;
    size_t n;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    where = cfg_where(l, at);
    n = where != NULL ? strlen(where) + strlen(msg) + 3 : 0;
    full = where != NULL ? malloc(n) : NULL;
    if (full == NULL) {
        free(where);
        l->oom = true;
        return;
    }
    snprintf(full, n, "%s: %s", where, msg);
    free(where);
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
void
cfg_sort_errs(struct loader *l)
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
    cfg_add_err(l, &at, "%s", msg);
}

/* "[store]" or "[route documents]", for messages. */
const char *
cfg_sect_label(const struct raw_sect *s, char *buf, size_t len)
{
    if (s->name != NULL) {
        snprintf(buf, len, "[%s %s]", cfg_sect_name(s->kind), s->name);
    } else {
        snprintf(buf, len, "[%s]", cfg_sect_name(s->kind));
    }
    return buf;
}

struct raw_sect *
cfg_find_sect(struct loader *l, enum cfg_sect kind, const char *name)
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
struct raw_sect *
cfg_new_sect(struct loader *l, enum cfg_sect kind, const char *name, int line)
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
    sect = cfg_find_sect(l, k, cfg_sect_named(k) ? name : NULL);
    if (sect != NULL && sect->line > 0) {
        char label[128];

        line_err(l, "duplicate section %s (first at line %d)",
                 cfg_sect_label(sect, label, sizeof(label)), sect->line);
        return;
    }
    if (sect == NULL) {
        sect = cfg_new_sect(l, k, cfg_sect_named(k) ? name : NULL, l->lineno);
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
        cfg_add_err(l, &at, "key '%s' outside any section", key);
        return 1;
    }
    if (l->reading == READ_SKIP) {
        return 1;
    }
    s = &l->sects[l->cur];
    i = find_opt(s->kind, key);
    if (i < 0) {
        cfg_add_err(l, &at, "unknown key '%s' in %s", key,
                    cfg_sect_label(s, label, sizeof(label)));
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
        cfg_add_err(l, &at, "duplicate key '%s' in %s (first at line %d)", key,
                    cfg_sect_label(s, label, sizeof(label)), v->at.line);
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

void
cfg_read_file(struct loader *l)
{
    int rc;

    l->fp = l->text != NULL ? fmemopen((void *)l->text, strlen(l->text), "r")
                            : fopen(l->file, "r");
    if (l->fp == NULL) {
        cfg_add_err(l, NULL, "cannot open: %s", strerror(errno));
        return;
    }
    rc = ini_parse_stream(read_line, l, on_key, l);
    if (ferror(l->fp)) {
        cfg_add_err(l, NULL, "read error: %s", strerror(errno));
    } else if (rc > 0) {
        /* read_line hands inih only lines it accepts: defensive. */
        struct origin at = {rc, NULL};

        cfg_add_err(l, &at, "%s", "syntax error");
    } else if (rc < 0) {
        cfg_add_err(l, NULL, "%s", "cannot parse (out of memory)");
    }
    fclose(l->fp);
    l->fp = NULL;
}
