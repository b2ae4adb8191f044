/* cfg_test.h: what the configuration's unit tests share: INI and key
 * files written to temporary files, a config loaded from them, and its
 * errors compared with the exact messages wanted. */
#ifndef TM_CFG_TEST_H
#define TM_CFG_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../conf/cfg.h"
#include "../../conf/cfg_opts.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
/* The one [upstream] most test files need. */
#define UP_DEFAULT "[upstream default]\nurl = http://127.0.0.1:8080\n"
#define MAX_ENV 24
#define MAX_WANT 8

/* Write text to a new temporary file; returns its malloc'd path. */
static inline char *
write_ini(const char *text)
{
    char *path = strdup("/tmp/tidemark-cfg-XXXXXX");
    int fd;
    size_t len = strlen(text);

    assert_non_null(path);
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
    return path;
}

/* A key file holding text with the given mode; its malloc'd path. */
static inline char *
write_key(const char *text, mode_t mode)
{
    char *path = write_ini(text);

    assert_int_equal(chmod(path, mode), 0);
    return path;
}

struct loaded {
    char *path;
    struct tm_config c;
    struct cfg_errors errs;
    bool ok;
};

/* Load text with the given environment (NULL-terminated, may be NULL). */
/* The route's methods, space-separated, are want ("" for every method). */
static inline void
assert_methods(const struct tm_methods *m, const char *want)
{
    char got[512] = "";
    size_t n = 0;

    for (size_t i = 0; i < m->n; i++) {
        n += (size_t)snprintf(got + n, sizeof(got) - n, "%s%s", i ? " " : "",
                              m->v[i].name);
        assert_int_equal(m->v[i].len, strlen(m->v[i].name));
    }
    assert_string_equal(got, want);
}

static inline void
load(struct loaded *l, const char *text, const char *const *env)
{
    char *envp[MAX_ENV + 1] = {NULL};

    for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
        assert_true(i < MAX_ENV);
        envp[i] = (char *)env[i];
    }
    memset(l, 0, sizeof(*l));
    l->path = write_ini(text);
    l->ok = cfg_load(&l->c, l->path, envp, &l->errs);
    /* Read once: gone even when an assertion fails later. */
    unlink(l->path);
}

static inline void
unload(struct loaded *l)
{
    free(l->path);
    cfg_free(&l->c);
    cfg_errors_free(&l->errs);
}

static inline void
print_errs(const struct loaded *l)
{
    for (size_t i = 0; i < l->errs.n; i++) {
        print_message("  got: %s\n", l->errs.msgs[i]);
    }
}

static inline void
load_ok(struct loaded *l, const char *text, const char *const *env)
{
    load(l, text, env);
    if (!l->ok || l->errs.n != 0) {
        print_errs(l);
        fail_msg("expected the config to load");
    }
}

/* Check that the errors are exactly want, in order; "@" at the start of
 * a wanted message stands for the file's path. */
static inline void
expect_errs(const struct loaded *l, const char *name, const char *const want[])
{
    size_t n = 0;
    bool same;

    while (n < MAX_WANT && want[n] != NULL) {
        n++;
    }
    same = !l->ok && l->errs.n == n;
    for (size_t i = 0; same && i < n; i++) {
        char buf[512];

        if (want[i][0] == '@') {
            snprintf(buf, sizeof(buf), "%s%s", l->path, want[i] + 1);
        } else {
            snprintf(buf, sizeof(buf), "%s", want[i]);
        }
        same = strcmp(buf, l->errs.msgs[i]) == 0;
    }
    if (!same) {
        for (size_t i = 0; i < n; i++) {
            print_message("  want: %s\n", want[i]);
        }
        print_errs(l);
        fail_msg("case \"%s\": errors differ (ok=%d)", name, l->ok);
    }
}

#endif
