/* fuzz_config.c: libFuzzer target for the configuration loader. Each
 * input is written to one temporary file (made once per process) and
 * loaded with an empty environment; everything must be released
 * (LeakSanitizer runs at exit) and every error must carry a message. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../conf/cfg.h"

static char tmp_path[] = "/tmp/tidemark-fuzz-config-XXXXXX";
static int tmp_fd = -1;

static void
check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "invariant violated: %s\n", what);
        abort();
    }
}

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
    }
    cfg_free(&c);
    cfg_errors_free(&errs);
    return 0;
}
