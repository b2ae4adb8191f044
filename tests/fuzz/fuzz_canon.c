/* fuzz_canon.c: libFuzzer target for canonical paths and names. The
 * first byte picks path or name, the rest is the raw text. Invariants:
 * an accepted result is canonical (canon.h), it reads back as itself once
 * escaped, and its length never exceeds the input's. Any violation
 * aborts. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../policies/canon.h"
#include "../../policies/utf8.h"
#include "fuzz.h"

/* The canonical form, checked from its definition: segments joined by
 * '/' (a path: after a leading '/', or the root "/"), none empty, "."
 * or "..", of UTF-8 without control characters, ';' or '+'. */
static bool
is_canonical(const char *s, size_t len, bool path)
{
    size_t i = 0;

    if (path) {
        if (len == 0 || s[0] != '/') {
            return false;
        }
        if (len == 1) {
            return true;
        }
        i = 1;
    }
    if (len == i || !utf8_valid(s, len)) {
        return false;
    }
    while (i <= len) {
        const char *slash = memchr(s + i, '/', len - i);
        size_t end = slash != NULL ? (size_t)(slash - s) : len;
        size_t n = end - i;

        if (n == 0 || (n == 1 && s[i] == '.') ||
            (n == 2 && s[i] == '.' && s[i + 1] == '.')) {
            return false;
        }
        for (size_t k = i; k < end; k++) {
            unsigned char b = (unsigned char)s[k];
            if (b < 0x20 || b == 0x7f || b == ';' || b == '+') {
                return false;
            }
        }
        i = end + 1;
    }
    return true;
}

/* out escaped: every byte but letters, digits and '/' as %XX. */
static size_t
escape(const char *s, size_t len, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;

    for (size_t i = 0; i < len; i++) {
        unsigned char b = (unsigned char)s[i];

        if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') ||
            (b >= '0' && b <= '9') || b == '/') {
            out[n++] = (char)b;
        } else {
            out[n++] = '%';
            out[n++] = hex[b >> 4];
            out[n++] = hex[b & 15];
        }
    }
    return n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bool path;
    const char *raw;
    size_t len, olen, olen2, elen;
    char *out, *out2, *esc;
    const char *why = NULL;
    bool ok;

    if (size == 0) {
        return 0;
    }
    path = (data[0] & 1) == 0;
    len = size - 1;
    /* An exact-size copy, so ASan sees a read past the end. */
    raw = memcpy(malloc(len + 1), data + 1, len);
    out = malloc(len + 2);
    out2 = malloc(3 * (len + 2) + 1);
    esc = malloc(3 * (len + 2) + 1);
    if (raw == NULL || out == NULL || out2 == NULL || esc == NULL) {
        abort();
    }
    ok = path ? canon_path(raw, len, out, len + 2, &olen, &why)
              : canon_name(raw, len, out, len + 2, &olen, &why);
    if (!ok) {
        check(why != NULL && why[0] != '\0', "a refusal without a reason");
        check(olen == 0, "a refusal with a length");
    } else {
        check(olen <= (len > 0 ? len : 1), "longer than the input");
        check(out[olen] == '\0', "not NUL-terminated");
        check(strlen(out) == olen, "a NUL inside the result");
        check(is_canonical(out, olen, path), "the result is not canonical");
        /* Read back: escaped, the result is its own canonical form. */
        elen = escape(out, olen, esc);
        ok = path ? canon_path(esc, elen, out2, elen + 2, &olen2, &why)
                  : canon_name(esc, elen, out2, elen + 2, &olen2, &why);
        check(ok, "the escaped result is refused");
        check(olen2 == olen && memcmp(out, out2, olen) == 0,
              "the escaped result reads as something else");
        /* And as it is, where that is legal text (no '%'). */
        if (memchr(out, '%', olen) == NULL) {
            ok = path ? canon_path(out, olen, out2, olen + 2, &olen2, &why)
                      : canon_name(out, olen, out2, olen + 2, &olen2, &why);
            check(ok && olen2 == olen && memcmp(out, out2, olen) == 0,
                  "the result is not its own canonical form");
        }
    }
    free((void *)raw);
    free(out);
    free(out2);
    free(esc);
    return 0;
}
