/* cfg_opts.h: the one table of options behind cfg_load (internal to
 * conf/): every key, its section, type, default, bounds, flags and help.
 * Parsing, cfg_free, reload's restart warnings and the shown (redacted)
 * values come from it; the man page and conf/tidemark.ini are checked
 * against it (cfg_doc.h). */
#ifndef TM_CFG_OPTS_H
#define TM_CFG_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cfg.h"

enum cfg_sect {
    CFG_PROXY = 0,
    CFG_ADMIN,
    CFG_STORE,
    CFG_LOCKS,
    CFG_TOKENS,
    CFG_UPSTREAM,
    CFG_ROUTE,
    CFG_WATCH,
    CFG_LEASE,
    CFG_FOLLOW,
    CFG_NSECT,
};

enum cfg_flag {
    CFG_REQUIRED = 1u << 0,   /* no default: a section without it is wrong */
    CFG_EMPTY_OK = 1u << 1,   /* "key =" is a value, not a mistake */
    CFG_REPEAT = 1u << 2,     /* may be given many times: the setter gets
                               * the values joined by '\n' */
    CFG_RESTART = 1u << 3,    /* read once at start (a listener, a store,
                               * the lock backend): a reload keeps the
                               * running value and says so */
    CFG_SECRET = 1u << 4,     /* may hold a password: never logged */
    CFG_HOST_SIZED = 1u << 5, /* left unset, sized to the host at load
                               * (the default is the most): an example
                               * leaves it commented out */
    CFG_ZERO_OK = 1u << 6,    /* 0 is a value too (off), besides min to
                               * max */
};

/* What an option's field is: how a value is parsed into it, compared,
 * copied, shown and freed. The setter is the type's, but for CFG_T_CUSTOM
 * (several fields, parsed by the entry's ops). */
enum cfg_type {
    CFG_T_CUSTOM = 0, /* ops->set parses it, ops->drop frees it */
    CFG_T_INT,        /* int, between min and max */
    CFG_T_SIZE,       /* int64_t bytes, K M G T suffixes, min to max */
    CFG_T_BOOL,       /* bool: yes | no */
    CFG_T_FLAG,       /* bool: a two-way choice, true for the second */
    CFG_T_ENUM,       /* an enum whose values are the choices' indices */
    CFG_T_CHOICE,     /* char *: one of choices, as written */
    CFG_T_STR,        /* char *: text, checked by ops->check when given */
    CFG_T_KEYFILE,    /* a file holding a secret, min to max bytes: the
                       * fields char *NAME_file (off), unsigned char
                       * *bytes, size_t len, in that order */
};

struct cfg_opt;

/* Parse value into the section's struct obj. Returns NULL, or a message
 * (static, or written into buf) that never repeats the value: it may be
 * a password. */
typedef const char *(*cfg_set_fn)(const struct cfg_opt *o, void *obj,
                                  const char *value, char *buf, size_t len);

/* What a type leaves to the entry. */
struct cfg_ops {
    /* CFG_T_STR: whether a non-empty value is well formed (the value is
     * stored by the type). NULL: any text. */
    const char *(*check)(const char *value, char *buf, size_t len);
    cfg_set_fn set;          /* CFG_T_CUSTOM: parse into the fields */
    void (*drop)(void *obj); /* CFG_T_CUSTOM: free what set made */
    /* CFG_T_CUSTOM: the value as a file would write it, into buf; a
     * repeatable option's values one a line. Never a secret: a secret
     * part is written "(secret)". */
    void (*show)(const void *obj, char *buf, size_t len);
};

struct cfg_opt {
    enum cfg_sect sect;
    const char *key;
    enum cfg_type type;
    const char *def;            /* default, as written in a file */
    size_t off;                 /* of the field in the section's struct */
    int64_t min, max;           /* bounds of integers, sizes, key files */
    const char *const *choices; /* NULL-terminated: FLAG, ENUM, CHOICE */
    const struct cfg_ops *ops;  /* STR: check; CUSTOM: set and drop */
    unsigned flags;             /* enum cfg_flag bits */
    const char *help;           /* one line, for the docs and --help */
};

/* The table, in the order keys are applied within a section (a route's
 * path before its resource). */
extern const struct cfg_opt cfg_opts[];
extern const size_t cfg_nopts;

/* Parse value into o's field(s) of obj (of o's section), freeing what
 * they held: the type's setter, or the entry's own. NULL, or a message
 * (static, or in buf) that never repeats the value. */
const char *cfg_opt_set(const struct cfg_opt *o, void *obj, const char *value,
                        char *buf, size_t len);

/* Free what o's field(s) of obj hold (secrets wiped first) and clear
 * them. */
void cfg_opt_drop(const struct cfg_opt *o, void *obj);

/* Whether the fields of o in objects a and b (of o's section) hold the
 * same value. Only for options of a type but CFG_T_CUSTOM: every
 * CFG_RESTART option is one (cfg_opt_comparable). */
bool cfg_opt_comparable(const struct cfg_opt *o);
bool cfg_opt_same(const struct cfg_opt *o, const void *a, const void *b);

/* Copy o's value from src into dst (both of o's section), freeing what
 * dst held. NULL, or a message (out of memory). */
const char *cfg_opt_copy(const struct cfg_opt *o, void *dst, const void *src);

/* o's value in obj as a file would write it ("2000", "yes", a path),
 * into buf; "(none)" or "(empty)" when unset. A CFG_SECRET value is
 * written as "(secret)". */
void cfg_opt_show(const struct cfg_opt *o, const void *obj, char *buf,
                  size_t len);

/* Write the configuration c as an INI file would give it, after
 * environment overrides and defaults, secrets written "(secret)": each
 * line through emit (without its '\n'). Keys left unset are not written.
 */
void cfg_print(const struct tm_config *c,
               void (*emit)(void *arg, const char *line), void *arg);

/* The object of singleton section s in c: &c->proxy, ...; NULL for
 * named sections. */
void *cfg_singleton(struct tm_config *c, enum cfg_sect s);

/* The i-th object of section kind s in c (a singleton's only one is
 * i == 0); NULL past the last. */
void *cfg_sect_obj(struct tm_config *c, enum cfg_sect s, size_t i);

/* Section and upstream names: letters, digits, '_', '-' and '.'. */
bool cfg_name_ok(const char *s, size_t n);

/* "proxy", ..., "route". */
const char *cfg_sect_name(enum cfg_sect s);
/* Whether sections of kind s carry a name: [route NAME]. */
bool cfg_sect_named(enum cfg_sect s);

/* Section-level check of [locks] once every key is set: redis needs url,
 * postgres dsn. NULL when fine. */
const char *cfg_check_locks(const struct cfg_locks *l, char *buf, size_t len);

/* Section-level check of a [lease]: renew_ms below ttl_ms. NULL when
 * fine. */
const char *cfg_check_lease(const struct cfg_lease *l, char *buf, size_t len);

/* max_uri must leave this much of max_head for the method, the version
 * and Host, so that a target over max_uri is seen (414) before the head
 * runs over max_head (431). */
#define CFG_URI_SLACK 64

/* A [watch] section as a whole: the keys its backend needs, a znode
 * path as a zookeeper prefix. NULL, or a message in buf. */
const char *cfg_check_watch(const struct cfg_watch *w, char *buf, size_t len);
/* A [follow] section once its keys are set: its backend's address, a
 * kind of election that backend holds, an election name of that kind's
 * shape, an identity. "KEY: ..." names the key at fault. */
const char *cfg_check_follow(const struct cfg_follow *f, char *buf, size_t len);

/* Section-level check of [proxy] once every key is set: max_uri leaves
 * CFG_URI_SLACK bytes of max_head. NULL when fine. */
const char *cfg_check_proxy(const struct cfg_proxy *p, char *buf, size_t len);

/* Section-level check of [store] once every key is set: the chosen type's
 * own key is present. NULL when fine. */
const char *cfg_check_store(const struct cfg_store *s, char *buf, size_t len);

#endif
