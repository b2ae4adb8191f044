/* lmdb_test.h: what the LMDB store's unit tests share: a fixture with
 * its own directory and event loop, raises and gets run until answered,
 * and the failsync shim (fdatasync fails once the trigger file exists). */
#ifndef TM_LMDB_TEST_H
#define TM_LMDB_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>
#include <lmdb.h>

#include "../../conf/cfg.h"
#include "../../proxy/log.h"
#include "../../proxy/store/journal.h"
#include "../../proxy/store/store.h"
#include "../../proxy/store/store_lmdb.h"

/* The shim itself, linked into this binary: the executable's fsync and
 * fdatasync come first in symbol lookup, so liblmdb's commits call them.
 * Failures start when the trigger file exists. */
#include "../preload/failsync.c"

#define MAX_ANSWERS 4096

struct answer {
    int done;
    enum store_result res;
    int64_t mark;
};

struct fixture {
    char dir[64];
    char path[128];
    char trigger[128];
    struct event_base *base;
    struct cfg_store cfg;
    const struct store_ops *ops;
    struct store *st;
    int pending; /* callbacks still expected */
    int in_call; /* set while inside raise/get */
    char lastlog[1024];
    char lastinfo[1024];
    int errors_logged;
};

static struct tm_log test_log;

static inline void
on_log(void *arg, enum tm_log_level level, const char *msg)
{
    struct fixture *f = arg;

    if (level == TM_LOG_ERROR) {
        f->errors_logged++;
        snprintf(f->lastlog, sizeof(f->lastlog), "%s", msg);
    }
    if (level == TM_LOG_INFO && strstr(msg, "replayed") != NULL) {
        snprintf(f->lastinfo, sizeof(f->lastinfo), "%s", msg);
    }
    if (getenv("TEST_VERBOSE") != NULL) {
        fprintf(stderr, "log %d: %s\n", (int)level, msg);
    }
}

/* Each callback's arg is an answer slot; answers carry the fixture
 * through this global so the slot stays a plain struct. */
static struct fixture *cur;

static inline void
on_answer(void *arg, enum store_result res, int64_t mark)
{
    struct answer *a = arg;

    assert_int_equal(cur->in_call, 0);
    assert_int_equal(a->done, 0);
    a->done = 1;
    a->res = res;
    a->mark = mark;
    cur->pending--;
}

static inline void
do_raise(struct fixture *f, const char *res, size_t len, int64_t token,
         struct answer *a)
{
    memset(a, 0, sizeof(*a));
    f->pending++;
    f->in_call = 1;
    f->ops->raise(f->st, res, len, token, on_answer, a);
    f->in_call = 0;
    /* Never answered from inside the call. */
    assert_int_equal(a->done, 0);
}

static inline void
do_get(struct fixture *f, const char *res, size_t len, struct answer *a)
{
    memset(a, 0, sizeof(*a));
    f->pending++;
    f->in_call = 1;
    f->ops->get(f->st, res, len, on_answer, a);
    f->in_call = 0;
    assert_int_equal(a->done, 0);
}

/* Run the loop until every expected callback ran (10 s at most). */
static inline void
run_until_done(struct fixture *f)
{
    struct timeval limit = {10, 0};
    struct timeval now, end;

    gettimeofday(&now, NULL);
    timeradd(&now, &limit, &end);
    while (f->pending > 0) {
        assert_int_equal(event_base_loop(f->base, EVLOOP_ONCE), 0);
        gettimeofday(&now, NULL);
        assert_true(timercmp(&now, &end, <));
    }
}

static inline struct answer
raise_wait(struct fixture *f, const char *res, int64_t token)
{
    struct answer a;

    do_raise(f, res, strlen(res), token, &a);
    run_until_done(f);
    assert_int_equal(a.done, 1);
    return a;
}

static inline struct answer
get_wait(struct fixture *f, const char *res, size_t len)
{
    struct answer a;

    do_get(f, res, len, &a);
    run_until_done(f);
    assert_int_equal(a.done, 1);
    return a;
}

static inline void
store_open(struct fixture *f)
{
    char err[256] = "";

    f->st = f->ops->open(f->base, &f->cfg, err, sizeof(err));
    if (f->st == NULL) {
        fail_msg("open: %s", err);
    }
    assert_true(f->ops->ready(f->st));
}

static inline void
store_close(struct fixture *f)
{
    f->ops->close(f->st);
    f->st = NULL;
    assert_int_equal(f->pending, 0);
}

static inline int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    if (f == NULL) {
        return -1;
    }
    snprintf(f->dir, sizeof(f->dir), "/tmp/tm-lmdb-XXXXXX");
    if (mkdtemp(f->dir) == NULL) {
        free(f);
        return -1;
    }
    /* A parent that does not exist yet: open creates it. */
    snprintf(f->path, sizeof(f->path), "%s/var/marks.mdb", f->dir);
    snprintf(f->trigger, sizeof(f->trigger), "%s/failsync", f->dir);
    setenv("FAILSYNC_TRIGGER", f->trigger, 1);
    f->base = event_base_new();
    if (f->base == NULL) {
        free(f);
        return -1;
    }
    f->cfg.type = "lmdb";
    f->cfg.path = f->path;
    f->cfg.map_size = 16 << 20;
    f->cfg.cache_entries = 1024;
    f->cfg.timeout_ms = 1000;
    f->ops = store_find("lmdb");
    if (f->ops == NULL) {
        return -1;
    }
    test_log = (struct tm_log){on_log, f, TM_LOG_INFO};
    lib_enter(&test_log);
    cur = f;
    *state = f;
    return 0;
}

static inline int
teardown(void **state)
{
    struct fixture *f = *state;
    char cmd[160];

    if (f->st != NULL) {
        f->ops->close(f->st);
    }
    lib_enter(NULL);
    event_base_free(f->base);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "could not remove %s\n", f->dir);
    }
    free(f);
    cur = NULL;
    return 0;
}

static inline void
touch(const char *path)
{
    FILE *fp = fopen(path, "w");

    assert_non_null(fp);
    fclose(fp);
}

#endif
