/* fuzz_json.c: libFuzzer target for JSON string content. The first byte
 * sets the room, the rest is the raw text. Invariants: the content reads
 * back as a JSON string's inside (RFC 8259: no bare quote, backslash or
 * control byte; escapes whole), is UTF-8, with less room is a prefix
 * of the content with room for all, and is what writing it piece by
 * piece gives. Any violation aborts. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../policies/json.h"
#include "../../policies/utf8.h"
#include "fuzz.h"

static bool
is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* Whether s[0..n) is valid inside a JSON string. */
static bool
is_content(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c == '\\') {
            if (i + 1 < n && (s[i + 1] == '"' || s[i + 1] == '\\')) {
                i++;
                continue;
            }
            if (i + 5 < n && s[i + 1] == 'u' && is_hex(s[i + 2]) &&
                is_hex(s[i + 3]) && is_hex(s[i + 4]) && is_hex(s[i + 5])) {
                i += 5;
                continue;
            }
            return false;
        }
        if (c == '"' || c < 0x20) {
            return false;
        }
    }
    return utf8_valid(s, n);
}

/* json_escape_into as its contract reads: piece after piece, stopping at
 * the first that does not fit with one byte to spare. */
static void
escape_by_piece(char *buf, size_t cap, size_t *n, const char *s)
{
    size_t len = strlen(s);

    while (len > 0) {
        char esc[8];
        size_t take;
        const char *e = json_piece(s, len, &take, esc);
        size_t w = e != NULL ? strlen(e) : take;

        if (*n + w + 1 > cap) {
            return;
        }
        memcpy(buf + *n, e != NULL ? e : s, w);
        *n += w;
        s += take;
        len -= take;
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text, *all, *part, *ref;
    size_t cap, n_all = 0, n_part = 0, n_ref;

    if (size < 1) {
        return 0;
    }
    text = malloc(size);
    all = malloc(6 * size + 1);
    part = malloc(6 * size + 1);
    ref = malloc(6 * size + 1);
    check(text != NULL && all != NULL && part != NULL && ref != NULL, "malloc");
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0'; /* a NUL in the input ends the text */
    json_escape_into(all, 6 * size + 1, &n_all, text);
    check(n_all <= 6 * strlen(text), "at most six bytes a byte");
    check(is_content(all, n_all), "the content is valid JSON");
    cap = (size_t)data[0] + 1;
    if (cap > 6 * size + 1) {
        cap = 6 * size + 1;
    }
    json_escape_into(part, cap, &n_part, text);
    check(n_part < cap, "one byte of room is left");
    check(n_part <= n_all && memcmp(part, all, n_part) == 0,
          "less room gives a prefix");
    check(is_content(part, n_part), "a cut content is valid JSON");
    n_ref = 0;
    escape_by_piece(ref, cap, &n_ref, text);
    check(n_ref == n_part && memcmp(ref, part, n_part) == 0,
          "the same content as piece by piece");
    free(text);
    free(all);
    free(part);
    free(ref);
    return 0;
}
