/* fuzz_config.c: libFuzzer target for the configuration loader. Each
 * input is written to one temporary file (made once per process) and
 * loaded with an empty environment; everything must be released
 * (LeakSanitizer runs at exit) and every error must carry a message. A
 * file that loads is printed as --print does, and the printed text must
 * load too and print the same (the printer and the loader agree). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../conf/cfg.h"
#include "../../conf/cfg_opts.h"
#include "fuzz.h"

static char tmp_path[] = "/tmp/tidemark-fuzz-config-XXXXXX";
static int tmp_fd = -1;

static void
remove_tmp(void)
{
    if (tmp_fd >= 0) {
        close(tmp_fd);
        unlink(tmp_path);
    }
}

/* Replace the temporary file's contents with data[0..size). */
static void
write_tmp(const uint8_t *data, size_t size)
{
    size_t off = 0;

    if (tmp_fd < 0) {
        tmp_fd = mkstemp(tmp_path);
        if (tmp_fd < 0) {
            perror("mkstemp");
            abort();
        }
        atexit(remove_tmp);
    }
    if (ftruncate(tmp_fd, 0) != 0 || lseek(tmp_fd, 0, SEEK_SET) != 0) {
        perror(tmp_path);
        abort();
    }
    while (off < size) {
        ssize_t n = write(tmp_fd, data + off, size - off);

        if (n <= 0) {
            perror(tmp_path);
            abort();
        }
        off += (size_t)n;
    }
}

struct text {
    char buf[1 << 16];
    size_t len;
    bool cut;
};

static void
text_line(void *arg, const char *line)
{
    struct text *t = arg;
    size_t n = strlen(line);

    if (t->len + n + 2 > sizeof(t->buf)) {
        t->cut = true;
        return;
    }
    memcpy(t->buf + t->len, line, n);
    t->len += n;
    t->buf[t->len++] = '\n';
    t->buf[t->len] = '\0';
}

/* Print c, load the text, print that: the two prints are the same. */
static void
round_trip(const struct tm_config *c)
{
    static char *const envp[] = {NULL};
    static struct text a, b;
    struct tm_config again;
    struct cfg_errors errs = {NULL, 0};
    bool ok;

    a.len = b.len = 0;
    a.cut = b.cut = false;
    a.buf[0] = b.buf[0] = '\0';
    cfg_print(c, text_line, &a);
    if (a.cut) {
        return;
    }
    memset(&again, 0, sizeof(again));
    ok = cfg_load_string(&again, tmp_path, a.buf, envp, &errs);
    check(ok, "a printed configuration does not load");
    cfg_print(&again, text_line, &b);
    check(strcmp(a.buf, b.buf) == 0, "printing a printed configuration "
                                     "changes it");
    cfg_free(&again);
    cfg_errors_free(&errs);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char *const envp[] = {NULL};
    struct tm_config c;
    struct cfg_errors errs = {NULL, 0};
    bool ok;

    write_tmp(data, size);
    memset(&c, 0, sizeof(c));
    ok = cfg_load(&c, tmp_path, envp, &errs);
    check(ok == (errs.n == 0), "cfg_load result disagrees with its errors");
    for (size_t i = 0; i < errs.n; i++) {
        check(errs.msgs[i] != NULL && errs.msgs[i][0] != '\0',
              "empty error message");
    }
    if (ok) {
        for (size_t i = 0; i < c.nroutes; i++) {
            const struct cfg_route *r = &c.routes[i];

            if (r->upstream != NULL) {
                check(r->upstream_idx < c.nupstreams &&
                          strcmp(c.upstreams[r->upstream_idx].name,
                                 r->upstream) == 0,
                      "route's upstream index names another upstream");
            }
        }
        round_trip(&c);
    }
    cfg_free(&c);
    cfg_errors_free(&errs);
    return 0;
}
