/* fuzz_zkname.c: libFuzzer target for zkname (lock names as znode
 * names). Invariants, on every input:
 * - the input as a name: its escape is within ZKNAME_MAX, holds only
 *   [A-Za-z0-9_%-] (so no '/', never "." or ".."), and unescapes to the
 *   input;
 * - the input as an escaped name: when it unescapes, escaping the result
 *   gives the input back (one spelling per name);
 * - zkname_seq is -1 or a value of the last ten digits, and zkname_first
 *   over the input's lines picks one with the lowest;
 * - zkname_below with the first line as the directory and the rest as
 *   the path names a non-empty part of the path with no '/', right
 *   after the directory and a '/';
 * - zkname_turn with the first line as the lock's node, the second as
 *   the path a create answered and the rest as its children: foreign
 *   exactly when the path is not the node, '/', one child name; else
 *   the holder is zkname_first's pick, held exactly when it is the
 *   path's child;
 * - zkname_left on the input's first 24 bytes as ttl, mtime and now is
 *   0 to ttl, and ttl - (now - mtime) when that is in range. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../policies/zkname.h"
#include "fuzz.h"

static void
as_name(const uint8_t *data, size_t size)
{
    char *e = malloc(ZKNAME_MAX(size) + 1);
    char *back = malloc(ZKNAME_MAX(size) + 1);
    size_t n, m = 0;

    check(e != NULL && back != NULL, "out of memory");
    n = zkname_escape((const char *)data, size, e);
    check(n <= ZKNAME_MAX(size), "escape within ZKNAME_MAX");
    for (size_t i = 0; i < n; i++) {
        char c = e[i];

        check((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '%',
              "escape writes only [A-Za-z0-9_%-]");
    }
    check(zkname_unescape(e, n, back, &m), "an escape unescapes");
    check(m == size && memcmp(back, data, size) == 0, "round trip");
    free(e);
    free(back);
}

static void
as_escaped(const uint8_t *data, size_t size)
{
    char *out = malloc(size + 1);
    char *again;
    size_t m = 0;

    check(out != NULL, "out of memory");
    if (zkname_unescape((const char *)data, size, out, &m)) {
        again = malloc(ZKNAME_MAX(m) + 1);
        check(again != NULL, "out of memory");
        check(m <= size, "unescape never grows");
        check(zkname_escape(out, m, again) == size &&
                  memcmp(again, data, size) == 0,
              "one spelling per name");
        free(again);
    }
    free(out);
}

/* The input copied into copy (size + 1 bytes) and cut at each LF into
 * at most max lines; the count. */
static int
split_lines(const uint8_t *data, size_t size, char *copy, char **lines, int max)
{
    int n = 0;

    check(copy != NULL, "out of memory");
    memcpy(copy, data, size);
    copy[size] = '\0';
    for (char *p = copy, *nl; n < max && p != NULL; p = nl) {
        nl = strchr(p, '\n');
        if (nl != NULL) {
            *nl++ = '\0';
        }
        lines[n++] = p;
    }
    return n;
}

static void
as_children(const uint8_t *data, size_t size)
{
    char *copy = malloc(size + 1);
    char *kids[64];
    int n = 0, first;

    n = split_lines(data, size, copy, kids, 64);
    first = zkname_first(kids, n);
    for (int i = 0; i < n; i++) {
        int64_t s = zkname_seq(kids[i]);

        check(s >= -1 && s <= 9999999999LL, "seq in range");
        check(first >= 0 || s == -1, "a sequential child is found");
        check(s == -1 || zkname_seq(kids[first]) <= s, "first is lowest");
    }
    free(copy);
}

static void
as_below(const uint8_t *data, size_t size)
{
    char *copy = malloc(size + 1);
    char *path, *dir = copy;
    const char *got;
    size_t len = 0, dl;

    check(copy != NULL, "out of memory");
    memcpy(copy, data, size);
    copy[size] = '\0';
    path = strchr(copy, '\n');
    if (path != NULL) {
        *path++ = '\0';
        dl = strlen(dir);
        got = zkname_below(dir, path, &len);
        check(got == NULL ||
                  (got == path + dl + 1 && path[dl] == '/' && len > 0 &&
                   strncmp(path, dir, dl) == 0 &&
                   memchr(got, '/', len) == NULL && len <= strlen(got)),
              "below names one part right after the directory");
    }
    free(copy);
}

static void
as_turn(const uint8_t *data, size_t size)
{
    char *copy = malloc(size + 1);
    char *lines[66];
    int n = 0, first = 0;
    size_t dl;
    const char *child;
    enum zkname_turn t;

    n = split_lines(data, size, copy, lines, 66);
    if (n < 2) {
        free(copy);
        return;
    }
    t = zkname_turn(lines[0], lines[1], lines + 2, n - 2, &first);
    dl = strlen(lines[0]);
    child = lines[1] + dl + 1;
    if (strncmp(lines[1], lines[0], dl) != 0 || lines[1][dl] != '/' ||
        *child == '\0' || strchr(child, '/') != NULL) {
        check(t == ZKNAME_FOREIGN && first == -1,
              "a path that is no child of the node has a turn");
        free(copy);
        return;
    }
    check(t != ZKNAME_FOREIGN, "a child of the node is foreign");
    check(first == zkname_first(lines + 2, n - 2), "the holder is not first");
    check((t == ZKNAME_NO_HOLDER) == (first < 0), "no holder, yet a first");
    if (first >= 0) {
        check((t == ZKNAME_HELD) == (strcmp(lines[2 + first], child) == 0),
              "held is not the path's child being first");
    }
    free(copy);
}

static void
as_left(const uint8_t *data, size_t size)
{
    int64_t v[3], got;
    __int128 want;

    if (size < sizeof(v)) {
        return;
    }
    memcpy(v, data, sizeof(v));
    got = zkname_left(v[0], v[1], v[2]);
    check(got >= 0 && got <= (v[0] > 0 ? v[0] : 0), "time left out of range");
    want = (__int128)v[0] - ((__int128)v[2] - (__int128)v[1]);
    if (v[0] > 0 && v[2] >= 0 && want >= 0 && want <= v[0]) {
        check(got == (int64_t)want, "time left is not ttl - age");
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    as_name(data, size);
    as_escaped(data, size);
    as_children(data, size);
    as_below(data, size);
    as_turn(data, size);
    as_left(data, size);
    return 0;
}
