/* cfg_doc.c: the option table written as documentation, and the checks
 * that keep the checked-in documentation in step with it. The checks
 * read text given to them; they open nothing. */
#include "cfg_doc.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cfg_opts.h"

/* ---- writing ------------------------------------------------------ */

/* s as roff text: at the start of a line, a leading '.' or '\'' would
 * be a request; anywhere, '\' an escape. */
static void
roff_text(FILE *f, const char *s, bool line_start)
{
    if (line_start && (s[0] == '.' || s[0] == '\'')) {
        fputs("\\&", f);
    }
    for (; *s != '\0'; s++) {
        if (*s == '\\') {
            fputs("\\e", f);
        } else {
            fputc(*s, f);
        }
    }
}

enum doc_form { DOC_ROFF, DOC_INI, DOC_MD };

static void
sect_header(FILE *f, enum cfg_sect s, enum doc_form form)
{
    const char *name = cfg_sect_name(s);
    const char *named = cfg_sect_named(s) ? " NAME" : "";

    if (form == DOC_INI) {
        fprintf(f, "\n[%s%s]\n", name, named);
    } else if (form == DOC_MD) {
        fprintf(f, "\n### [%s%s]\n\n", name, named);
    } else if (cfg_sect_named(s)) {
        fprintf(f, ".SS [%s \\fINAME\\fP]\n", name);
    } else {
        fprintf(f, ".SS [%s]\n", name);
    }
}

void
cfg_doc_man(FILE *f)
{
    for (enum cfg_sect s = 0; s < CFG_NSECT; s++) {
        sect_header(f, s, DOC_ROFF);
        for (size_t i = 0; i < cfg_nopts; i++) {
            const struct cfg_opt *o = &cfg_opts[i];
            bool restart = (o->flags & CFG_RESTART) != 0;

            if (o->sect != s) {
                continue;
            }
            fprintf(f, ".TP\n.B %s\n", o->key);
            roff_text(f, o->help, true);
            fputs(".\n", f);
            if (o->flags & CFG_REQUIRED) {
                fputs("Required.\n", f);
            }
            if (o->def != NULL) {
                fputc('[', f);
                roff_text(f, o->def[0] != '\0' ? o->def : "empty", false);
                fprintf(f, "]%s\n", restart ? " " CFG_DOC_RESTART : "");
            } else if (restart) {
                fputs(CFG_DOC_RESTART "\n", f);
            }
        }
    }
}

void
cfg_doc_ini(FILE *f)
{
    fputs("; Keys marked " CFG_DOC_RESTART " are read at start only: a "
          "reload keeps\n; their running values.\n",
          f);
    for (enum cfg_sect s = 0; s < CFG_NSECT; s++) {
        sect_header(f, s, DOC_INI);
        for (size_t i = 0; i < cfg_nopts; i++) {
            const struct cfg_opt *o = &cfg_opts[i];
            char line[160];

            if (o->sect != s) {
                continue;
            }
            bool off = o->def == NULL || (o->flags & CFG_HOST_SIZED);

            snprintf(line, sizeof(line), "%s%s = %s", off ? "; " : "", o->key,
                     o->def ? o->def : "");
            fprintf(f, "%-35s ; %s%s\n", line, o->help,
                    o->flags & CFG_RESTART ? " " CFG_DOC_RESTART : "");
        }
    }
}

void
cfg_doc_md(FILE *f)
{
    for (enum cfg_sect s = 0; s < CFG_NSECT; s++) {
        sect_header(f, s, DOC_MD);
        for (size_t i = 0; i < cfg_nopts; i++) {
            const struct cfg_opt *o = &cfg_opts[i];

            if (o->sect != s) {
                continue;
            }
            fprintf(f, "- **`%s`**", o->key);
            if (o->def != NULL) {
                fprintf(f, " `[%s]`", o->def[0] != '\0' ? o->def : "empty");
            }
            fprintf(f, "%s: %s.%s\n",
                    o->flags & CFG_RESTART ? " " CFG_DOC_RESTART : "", o->help,
                    o->flags & CFG_REQUIRED ? " Required." : "");
        }
    }
}

/* ---- reading ------------------------------------------------------ */

struct checker {
    const char *name;
    struct cfg_errors *errs;
    bool failed; /* a problem was found (even one lost to memory) */
};

static void doc_err(struct checker *k, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Append "NAME:LINE: message" ("NAME: message" for line 0). Out of
 * memory, the message is lost but the check still fails. */
static void
doc_err(struct checker *k, int line, const char *fmt, ...)
{
    char msg[384], full[512];
    char **msgs;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (line > 0) {
        snprintf(full, sizeof(full), "%s:%d: %s", k->name, line, msg);
    } else {
        snprintf(full, sizeof(full), "%s: %s", k->name, msg);
    }
    k->failed = true;
    msgs = realloc(k->errs->msgs, (k->errs->n + 1) * sizeof(*msgs));
    if (msgs == NULL) {
        return;
    }
    k->errs->msgs = msgs;
    if ((msgs[k->errs->n] = strdup(full)) != NULL) {
        k->errs->n++;
    }
}

/* The next line of *text into line (without its '\n'), NUL-terminated
 * and cut at len - 1; false at the end. */
static bool
next_line(const char **text, char *line, size_t len)
{
    const char *p = *text, *eol;
    size_t n;

    if (*p == '\0') {
        return false;
    }
    eol = strchr(p, '\n');
    n = eol != NULL ? (size_t)(eol - p) : strlen(p);
    *text = p + n + (eol != NULL);
    if (n >= len) {
        n = len - 1;
    }
    memcpy(line, p, n);
    line[n] = '\0';
    return true;
}

static bool
is_key_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

/* Length of the key-like word at s: [a-z0-9_]+. */
static size_t
key_len(const char *s)
{
    size_t n = 0;

    while (is_key_char(s[n])) {
        n++;
    }
    return n;
}

/* The section kind named s[0..n), or CFG_NSECT. */
static enum cfg_sect
sect_of(const char *s, size_t n)
{
    for (enum cfg_sect k = 0; k < CFG_NSECT; k++) {
        const char *name = cfg_sect_name(k);

        if (strlen(name) == n && memcmp(name, s, n) == 0) {
            return k;
        }
    }
    return CFG_NSECT;
}

/* "[kind" or "[kind NAME]" at s: the kind, or CFG_NSECT. */
static enum cfg_sect
bracket_sect(const char *s)
{
    if (s[0] != '[') {
        return CFG_NSECT;
    }
    return sect_of(s + 1, key_len(s + 1));
}

/* The index of key s[0..n) of section kind k, or -1. */
static int
find_opt(enum cfg_sect k, const char *s, size_t n)
{
    for (size_t i = 0; i < cfg_nopts; i++) {
        if (cfg_opts[i].sect == k && strlen(cfg_opts[i].key) == n &&
            memcmp(cfg_opts[i].key, s, n) == 0) {
            return (int)i;
        }
    }
    return -1;
}

static bool
starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void
missing(struct checker *k, const int *seen, const char *what)
{
    for (size_t i = 0; i < cfg_nopts; i++) {
        if (seen[i] == 0) {
            doc_err(k, 0, "[%s] %s is not %s", cfg_sect_name(cfg_opts[i].sect),
                    cfg_opts[i].key, what);
        }
    }
}

/* ---- the man page --------------------------------------------------- */

/* One ".TP" / ".B key" entry being read. */
struct man_entry {
    int opt; /* -1: none open */
    int line;
    int def_line;
    char def[128];
    bool restart;
};

static void
man_entry_end(struct checker *k, struct man_entry *e)
{
    const struct cfg_opt *o;
    const char *want;
    bool restart;

    if (e->opt < 0) {
        return;
    }
    o = &cfg_opts[e->opt];
    restart = (o->flags & CFG_RESTART) != 0;
    want = o->def == NULL ? NULL : o->def[0] == '\0' ? "empty" : o->def;
    if (want != NULL && e->def_line == 0) {
        doc_err(k, e->line, "[%s] %s: no [%s] line, the table's default",
                cfg_sect_name(o->sect), o->key, want);
    } else if (want == NULL && e->def_line > 0) {
        doc_err(k, e->def_line, "[%s] %s: [%s], but the table has no default",
                cfg_sect_name(o->sect), o->key, e->def);
    } else if (want != NULL && strcmp(want, e->def) != 0) {
        doc_err(k, e->def_line, "[%s] %s: [%s], but the table's default is %s",
                cfg_sect_name(o->sect), o->key, e->def, want);
    }
    if (restart != e->restart) {
        doc_err(k, e->line, "[%s] %s: %s, but the table says it %s",
                cfg_sect_name(o->sect), o->key,
                e->restart ? "marked " CFG_DOC_RESTART
                           : "not marked " CFG_DOC_RESTART,
                restart ? "needs a restart" : "applies on reload");
    }
    e->opt = -1;
}

/* The entry's default is s[0..n), said on lineno. */
static void
entry_default(struct checker *k, struct man_entry *e, const char *s, size_t n,
              int lineno)
{
    if (e->def_line > 0) {
        doc_err(k, lineno, "a second default line in the entry of line %d",
                e->line);
    }
    if (n >= sizeof(e->def)) {
        n = sizeof(e->def) - 1;
    }
    memcpy(e->def, s, n);
    e->def[n] = '\0';
    e->def_line = lineno;
}

/* A line of an entry: "[default]", "[default] (restart)" or
 * "(restart)"; anything else is prose. */
static void
man_entry_line(struct checker *k, struct man_entry *e, const char *line,
               int lineno)
{
    const char *close;

    if (strcmp(line, CFG_DOC_RESTART) == 0) {
        e->restart = true;
        return;
    }
    if (line[0] != '[' || (close = strchr(line, ']')) == NULL) {
        return;
    }
    if (close[1] != '\0' && strcmp(close + 1, " " CFG_DOC_RESTART) != 0) {
        return;
    }
    entry_default(k, e, line + 1, (size_t)(close - line - 1), lineno);
    e->restart |= close[1] != '\0';
}

/* A check of a page of entries, one per key (the man page, the
 * reference). */
struct entries {
    struct checker k;
    struct man_entry e; /* the entry being read */
    enum cfg_sect sect; /* the section being read, or CFG_NSECT */
    int *seen;          /* per option, the line of its entry, or 0 */
};

static bool
entries_start(struct entries *d, const char *name, struct cfg_errors *errs)
{
    *d = (struct entries){{name, errs, false}, {.opt = -1}, CFG_NSECT, NULL};
    d->seen = calloc(cfg_nopts, sizeof(*d->seen));
    if (d->seen == NULL) {
        doc_err(&d->k, 0, "out of memory");
        return false;
    }
    return true;
}

/* Close the last entry, name each key without one ("[sect] key is not
 * where"): true when the page had no problem. */
static bool
entries_end(struct entries *d, const char *where)
{
    man_entry_end(&d->k, &d->e);
    missing(&d->k, d->seen, where);
    free(d->seen);
    return !d->k.failed;
}

/* Open the entry of key s[0..n) of the current section at lineno: an
 * error when the table has no such key or it was documented before (the
 * entry stays closed). */
static void
entry_open(struct entries *d, const char *s, size_t n, int lineno)
{
    int opt = find_opt(d->sect, s, n);

    man_entry_end(&d->k, &d->e);
    if (opt < 0) {
        doc_err(&d->k, lineno, "[%s] %.*s is not a key of the table",
                cfg_sect_name(d->sect), (int)n, s);
    } else if (d->seen[opt] > 0) {
        doc_err(&d->k, lineno, "[%s] %.*s again (first on line %d)",
                cfg_sect_name(d->sect), (int)n, s, d->seen[opt]);
    } else {
        d->seen[opt] = lineno;
        d->e = (struct man_entry){.opt = opt, .line = lineno};
    }
}

/* A section heading, s after its marker ("[sect ...]"): the entries that
 * follow are sect's. */
static void
entries_sect(struct entries *d, const char *s, int lineno)
{
    man_entry_end(&d->k, &d->e);
    d->sect = bracket_sect(s);
    if (s[0] == '[' && d->sect == CFG_NSECT) {
        doc_err(&d->k, lineno, "%s: no such section", s);
    }
}

bool
cfg_doc_check_man(const char *name, const char *text, struct cfg_errors *errs)
{
    struct entries d;
    bool in_config = false, after_tp = false;
    char line[1024];
    int lineno = 0;

    if (!entries_start(&d, name, errs)) {
        return false;
    }
    while (next_line(&text, line, sizeof(line))) {
        bool tp = false;
        size_t klen = key_len(line + (starts(line, ".B ") ? 3 : 0));

        lineno++;
        if (starts(line, ".SH")) {
            man_entry_end(&d.k, &d.e);
            in_config = strcmp(line, ".SH CONFIGURATION") == 0;
            d.sect = CFG_NSECT;
        } else if (!in_config) {
            /* nothing to check outside CONFIGURATION */
        } else if (starts(line, ".SS")) {
            entries_sect(&d, line + 4, lineno);
        } else if (strcmp(line, ".TP") == 0) {
            man_entry_end(&d.k, &d.e);
            tp = true;
        } else if (strcmp(line, ".PP") == 0 || strcmp(line, ".LP") == 0) {
            man_entry_end(&d.k, &d.e);
        } else if (after_tp && d.sect != CFG_NSECT && starts(line, ".B ") &&
                   klen > 0 && line[3 + klen] == '\0') {
            entry_open(&d, line + 3, klen, lineno);
        } else if (d.e.opt >= 0) {
            man_entry_line(&d.k, &d.e, line, lineno);
        }
        after_tp = tp;
    }
    return entries_end(&d, "documented under .SH CONFIGURATION");
}

/* ---- the configuration reference (Markdown) ------------------------ */

#define REF_HEADING "## Configuration reference"
#define REF_KEY "- **`"

/* The length of the key of an entry line, "- **`key`**...", or 0. */
static size_t
ref_key(const char *line)
{
    size_t n;

    if (!starts(line, REF_KEY)) {
        return 0;
    }
    n = key_len(line + strlen(REF_KEY));
    return n > 0 && starts(line + strlen(REF_KEY) + n, "`**") ? n : 0;
}

/* What follows an entry's key, s: " `[default]`" and " (restart)",
 * each when there is one, then ':'. */
static void
ref_entry_head(struct checker *k, struct man_entry *e, const char *s,
               int lineno)
{
    if (starts(s, " `[")) {
        const char *close = strstr(s + 3, "]`");

        if (close == NULL) {
            doc_err(k, lineno, "a default without its closing ]`");
            return;
        }
        entry_default(k, e, s + 3, (size_t)(close - s - 3), lineno);
        s = close + 2;
    }
    if (starts(s, " " CFG_DOC_RESTART)) {
        e->restart = true;
        s += strlen(" " CFG_DOC_RESTART);
    }
    if (*s != ':') {
        doc_err(k, lineno, "an entry's key, default and %s end with ':'",
                CFG_DOC_RESTART);
    }
}

bool
cfg_doc_check_ref(const char *name, const char *text, struct cfg_errors *errs)
{
    struct entries d;
    bool in_ref = false, found = false, in_code = false;
    char line[1024];
    int lineno = 0;

    if (!entries_start(&d, name, errs)) {
        return false;
    }
    while (next_line(&text, line, sizeof(line))) {
        size_t klen = ref_key(line);

        lineno++;
        if (starts(line, "```")) {
            in_code = !in_code;
        } else if (in_code) {
            /* an example, not an entry */
        } else if (starts(line, "## ")) {
            man_entry_end(&d.k, &d.e);
            in_ref = strcmp(line, REF_HEADING) == 0;
            found |= in_ref;
            d.sect = CFG_NSECT;
        } else if (!in_ref) {
            /* nothing to check outside the reference */
        } else if (starts(line, "### ")) {
            entries_sect(&d, line + 4, lineno);
        } else if (d.sect != CFG_NSECT && klen > 0) {
            /* (under a wrong heading, that was said) */
            entry_open(&d, line + strlen(REF_KEY), klen, lineno);
            if (d.e.opt >= 0) {
                ref_entry_head(&d.k, &d.e, line + strlen(REF_KEY) + klen + 3,
                               lineno);
            }
        }
    }
    if (!found) {
        doc_err(&d.k, 0, "no \"%s\" section", REF_HEADING);
    }
    return entries_end(&d, "in the configuration reference");
}

/* ---- the example INI ---------------------------------------------- */

/* A "key = value ; comment" line (s after any "; " of a commented-out
 * key): the key's length, the value (trimmed) and the comment; false
 * when s is not one. inih's inline comments: ';' after a space. */
static bool
ini_key_line(const char *s, size_t *klen, char *value, size_t vlen,
             const char **comment)
{
    const char *v, *end;
    size_t n = key_len(s);

    if (n == 0) {
        return false;
    }
    v = s + n;
    v += strspn(v, " \t");
    if (*v != '=') {
        return false;
    }
    v++;
    v += strspn(v, " \t");
    for (end = v; *end != '\0'; end++) {
        if (*end == ';' && (end[-1] == ' ' || end[-1] == '\t')) {
            break;
        }
    }
    *comment = *end == ';' ? end + 1 : end;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t')) {
        end--;
    }
    *klen = n;
    snprintf(value, vlen, "%.*s", (int)(end - v), v);
    return true;
}

/* Check one key line of the example. */
static void
ini_key(struct checker *k, int opt, bool commented, const char *value,
        const char *comment, int lineno)
{
    const struct cfg_opt *o = &cfg_opts[opt];
    bool restart = (o->flags & CFG_RESTART) != 0;
    const char *sn = cfg_sect_name(o->sect);

    if ((o->flags & CFG_HOST_SIZED) && !commented) {
        doc_err(k, lineno,
                "[%s] %s is sized to the host when unset: leave it "
                "commented out",
                sn, o->key);
    } else if (o->def != NULL && commented && !(o->flags & CFG_HOST_SIZED)) {
        doc_err(k, lineno, "[%s] %s has a default (%s): set it, uncommented",
                sn, o->key, o->def);
    } else if (o->def != NULL && strcmp(value, o->def) != 0) {
        doc_err(k, lineno, "[%s] %s = %s, but the table's default is %s", sn,
                o->key, value, o->def[0] != '\0' ? o->def : "empty");
    }
    comment += strspn(comment, " \t");
    if (*comment == '\0') {
        doc_err(k, lineno, "[%s] %s has no comment", sn, o->key);
    }
    if (restart != (strstr(comment, CFG_DOC_RESTART) != NULL)) {
        doc_err(k, lineno, "[%s] %s: %s, but the table says it %s", sn, o->key,
                restart ? "not marked " CFG_DOC_RESTART
                        : "marked " CFG_DOC_RESTART,
                restart ? "needs a restart" : "applies on reload");
    }
}

bool
cfg_doc_check_ini(const char *name, const char *text, struct cfg_errors *errs)
{
    struct checker k = {name, errs, false};
    int *seen = calloc(cfg_nopts, sizeof(*seen));
    int *here = calloc(cfg_nopts, sizeof(*here));
    enum cfg_sect sect = CFG_NSECT;
    bool bad_sect = false;
    bool sect_off = false; /* its header is commented out */
    char line[1024], value[256];
    int lineno = 0;

    if (seen == NULL || here == NULL) {
        free(seen);
        free(here);
        doc_err(&k, 0, "out of memory");
        return false;
    }
    while (next_line(&text, line, sizeof(line))) {
        const char *s = line + strspn(line, " \t"), *comment;
        bool commented = s[0] == ';' || s[0] == '#';
        size_t klen;
        int opt;

        lineno++;
        if (commented) {
            s += 1 + strspn(s + 1, " \t");
        }
        /* A section may be shown commented out ("; [watch NAME]"), its
         * keys commented too: an example to turn on. */
        if (s[0] == '[' && (!commented || bracket_sect(s) != CFG_NSECT)) {
            sect = bracket_sect(s);
            sect_off = commented;
            bad_sect = sect == CFG_NSECT;
            if (bad_sect) {
                doc_err(&k, lineno, "%s: no such section", s);
            }
            memset(here, 0, cfg_nopts * sizeof(*here));
            continue;
        }
        if (!ini_key_line(s, &klen, value, sizeof(value), &comment)) {
            if (!commented && s[0] != '\0') {
                doc_err(&k, lineno, "neither a section, a key nor a comment");
            }
            continue;
        }
        if (sect == CFG_NSECT) {
            /* Under a wrong header, that was said. */
            if (!bad_sect) {
                doc_err(&k, lineno, "%.*s outside a section", (int)klen, s);
            }
            continue;
        }
        opt = find_opt(sect, s, klen);
        if (opt < 0) {
            doc_err(&k, lineno, "[%s] %.*s is not a key of the table",
                    cfg_sect_name(sect), (int)klen, s);
            continue;
        }
        if (here[opt] > 0 && !(cfg_opts[opt].flags & CFG_REPEAT)) {
            doc_err(&k, lineno, "[%s] %s again (first on line %d)",
                    cfg_sect_name(sect), cfg_opts[opt].key, here[opt]);
        }
        here[opt] = lineno;
        seen[opt] = lineno;
        if (sect_off && !commented) {
            doc_err(&k, lineno,
                    "[%s] %s is set under a commented-out section: it "
                    "belongs to the section above",
                    cfg_sect_name(sect), cfg_opts[opt].key);
        }
        ini_key(&k, opt, commented && !sect_off, value, comment, lineno);
    }
    missing(&k, seen, "in the example");
    free(seen);
    free(here);
    return !k.failed;
}

/* ---- the README --------------------------------------------------- */

/* "[sect] key" or "[sect NAME] key" at s, as in "`[locks] timeout_ms`":
 * an error unless key is one of sect's. Anything else is let be. */
static void
readme_mention(struct checker *k, const char *s, size_t n, int lineno)
{
    enum cfg_sect sect = bracket_sect(s);
    const char *close = memchr(s, ']', n), *key;
    size_t klen;

    if (sect == CFG_NSECT || close == NULL || close + 1 >= s + n ||
        close[1] != ' ') {
        return;
    }
    key = close + 2;
    klen = key_len(key);
    if (klen == 0 || (key + klen < s + n && key[klen] != ' ')) {
        return;
    }
    if (find_opt(sect, key, klen) < 0) {
        doc_err(k, lineno, "`%.*s`: [%s] has no key %.*s", (int)n, s,
                cfg_sect_name(sect), (int)klen, key);
    }
}

bool
cfg_doc_check_readme(const char *name, const char *text,
                     struct cfg_errors *errs)
{
    struct checker k = {name, errs, false};
    enum cfg_sect sect = CFG_NSECT;
    bool in_ini = false, in_code = false;
    char line[1024], value[256];
    int lineno = 0;

    while (next_line(&text, line, sizeof(line))) {
        const char *s = line, *comment, *tick;
        size_t klen;

        lineno++;
        if (starts(line, "```")) {
            in_ini = !in_code && strcmp(line, "```ini") == 0;
            in_code = !in_code;
            sect = CFG_NSECT;
            continue;
        }
        if (in_ini && line[0] == '[') {
            sect = bracket_sect(line);
            if (sect == CFG_NSECT) {
                doc_err(&k, lineno, "%s: no such section", line);
            }
        } else if (in_ini &&
                   ini_key_line(line, &klen, value, sizeof(value), &comment)) {
            if (sect != CFG_NSECT && find_opt(sect, line, klen) < 0) {
                doc_err(&k, lineno, "[%s] has no key %.*s", cfg_sect_name(sect),
                        (int)klen, line);
            }
        }
        while (!in_code && (tick = strchr(s, '`')) != NULL) {
            const char *end = strchr(tick + 1, '`');

            if (end == NULL) {
                break;
            }
            readme_mention(&k, tick + 1, (size_t)(end - tick - 1), lineno);
            s = end + 1;
        }
    }
    return !k.failed;
}
