/* cfg_opts.h: the one table of options behind cfg_load (internal to
 * conf/): every key, its section, default, bounds and setter. */
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
    CFG_NSECT,
};

enum cfg_flag {
    CFG_REQUIRED = 1u << 0, /* no default: a section without it is wrong */
    CFG_EMPTY_OK = 1u << 1, /* "key =" is a value, not a mistake */
    CFG_REPEAT = 1u << 2,   /* may be given many times: the setter gets
                             * the values joined by '\n' */
    CFG_RESTART = 1u << 3,  /* read once at start (a listener, a store,
                             * the lock backend): a reload keeps the
                             * running value and says so */
    CFG_SECRET = 1u << 4,   /* may hold a password: never logged */
};

struct cfg_opt;

/* Parse value into the section's struct obj. Returns NULL, or a message
 * (static, or written into buf) that never repeats the value: it may be
 * a password. */
typedef const char *(*cfg_set_fn)(const struct cfg_opt *o, void *obj,
                                  const char *value, char *buf, size_t len);

struct cfg_opt {
    enum cfg_sect sect;
    const char *key;
    const char *def; /* default, as written in a file */
    cfg_set_fn set;
    size_t off;                 /* of the field in the section's struct */
    int64_t min, max;           /* bounds of integers and sizes */
    const char *const *choices; /* NULL-terminated, for enumerations */
    unsigned flags;             /* enum cfg_flag bits */
    const char *help;
};

/* The table, in the order keys are applied within a section (a route's
 * path before its resource). */
extern const struct cfg_opt cfg_opts[];
extern const size_t cfg_nopts;

/* Whether the fields of o in objects a and b (of o's section) hold the
 * same value. Only for options whose field type the table knows: every
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

/* The object of singleton section s in c: &c->proxy, ...; NULL for
 * named sections. */
void *cfg_singleton(struct tm_config *c, enum cfg_sect s);

/* Section and upstream names: letters, digits, '_', '-' and '.'. */
bool cfg_name_ok(const char *s, size_t n);

/* "proxy", ..., "route". */
const char *cfg_sect_name(enum cfg_sect s);
/* Whether sections of kind s carry a name: [route NAME]. */
bool cfg_sect_named(enum cfg_sect s);

/* Section-level check of [locks] once every key is set: redis needs url,
 * postgres dsn. NULL when fine. */
const char *cfg_check_locks(const struct cfg_locks *l, char *buf, size_t len);

/* max_uri must leave this much of max_head for the method, the version
 * and Host, so that a target over max_uri is seen (414) before the head
 * runs over max_head (431). */
#define CFG_URI_SLACK 64

/* Section-level check of [proxy] once every key is set: max_uri leaves
 * CFG_URI_SLACK bytes of max_head. NULL when fine. */
const char *cfg_check_proxy(const struct cfg_proxy *p, char *buf, size_t len);

/* Section-level check of [store] once every key is set: the chosen type's
 * own key is present. NULL when fine. */
const char *cfg_check_store(const struct cfg_store *s, char *buf, size_t len);

#endif
