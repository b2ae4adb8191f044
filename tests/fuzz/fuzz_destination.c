/* fuzz_destination.c: libFuzzer target for the WebDAV Destination parser
 * and the S3 query and media-type readers. The input is
 * "AUTHORITY\nVALUE"; a missing part is empty. Any violated invariant
 * aborts. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../policies/profile.h"
#include "fuzz.h"

/* An exact-size heap copy (so ASan sees reads past its end). */
static char *
copy(const uint8_t *p, size_t n)
{
    char *s = malloc(n > 0 ? n : 1);

    if (s == NULL) {
        abort();
    }
    if (n > 0) {
        memcpy(s, p, n);
    }
    return s;
}

/* Parse with an output buffer of cap bytes and check what comes back. */
static void
parse(struct tm_slice v, struct tm_slice auth, size_t cap)
{
    char *out = malloc(cap);
    size_t n = (size_t)-1;
    struct tm_slice raw = {NULL, 0};
    const char *why = NULL;

    if (out == NULL) {
        abort();
    }
    if (!dav_destination(v, auth, out, cap, &n, &raw, &why)) {
        check(why != NULL && why[0] != '\0', "refused without a reason");
        free(out);
        return;
    }
    check(n > 0 && n < cap, "length out of bounds");
    check(out[0] == '/' && out[n] == '\0', "not an absolute NUL-ended path");
    check(strlen(out) == n, "NUL inside the path");
    check(raw.p >= v.p && raw.p + raw.len == v.p + v.len,
          "raw is not the tail of the value");
    check(raw.len == 0 || raw.p[0] == '/' || raw.p[0] == '?',
          "raw does not start the path or the query");
    check(memchr(v.p, '#', v.len) == NULL, "accepted a fragment");
    for (size_t i = 0; i < v.len; i++) {
        check(v.p[i] > 0x20 && v.p[i] < 0x7f, "accepted a byte outside URIs");
    }
    free(out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    size_t alen = nl != NULL ? (size_t)(nl - data) : 0;
    size_t voff = nl != NULL ? alen + 1 : 0;
    char *a = copy(data, alen);
    char *v = copy(data + voff, size - voff);
    struct tm_slice auth = {a, alen}, val = {v, size - voff};

    parse(val, auth, DAV_DEST_MAX);
    parse(val, auth, 1 + size % 16);
    (void)query_has_param(val, "delete");
    (void)media_is_form(val);
    free(a);
    free(v);
    return 0;
}
