/* fuzz_logesc.c: libFuzzer target for logesc (outside values as log
 * text). The first byte picks the room, the second the form; the rest
 * is the value. Invariants, on every input:
 * - the output fits the room, is NUL-terminated where logesc says, and
 *   holds no control byte, C1 control, line or paragraph separator, and
 *   nothing that is not well-formed UTF-8;
 * - bare, it is the value itself, one word (no space, quote, backslash,
 *   nor '=' in LOGESC_WORD), and not in LOGESC_QUOTED;
 * - quoted, its content decodes back to the value; or it is marked cut
 *   ("..." after the closing quote), its content decodes to a prefix of
 *   the value, and the value could not fit the room. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../policies/logesc.h"
#include "../../policies/utf8.h"
#include "fuzz.h"

static void
check_text(const char *out, size_t len)
{
    const unsigned char *p = (const unsigned char *)out;

    check(utf8_valid(out, len), "output is UTF-8");
    for (size_t i = 0; i < len; i++) {
        check(p[i] >= 0x20 && p[i] != 0x7f, "no control byte");
        check(!(p[i] == 0xc2 && i + 1 < len && p[i + 1] < 0xa0),
              "no C1 control");
        check(!(p[i] == 0xe2 && i + 2 < len && p[i + 1] == 0x80 &&
                (p[i + 2] == 0xa8 || p[i + 2] == 0xa9)),
              "no line or paragraph separator");
    }
}

static void
check_bare(const char *out, size_t len, const char *s, size_t n,
           enum logesc_form form)
{
    check(form != LOGESC_QUOTED, "LOGESC_QUOTED is quoted");
    check(len == n && len > 0 && memcmp(out, s, n) == 0, "bare is itself");
    check(strcspn(out, form == LOGESC_WORD ? " \"\\=" : " \"\\") == len,
          "bare is one word");
}

static void
check_quoted(const char *out, size_t len, const char *s, size_t n, size_t cap)
{
    bool cut = len >= 5 && memcmp(out + len - 4, "\"...", 4) == 0;
    size_t clen = len - (cut ? 5 : 2), used, m;
    char *back = malloc(len + 1);

    check(back != NULL, "out of memory");
    check(len >= 2 && out[len - 1 - (cut ? 3 : 0)] == '"', "closed quote");
    m = logesc_decode(out + 1, clen, back, &used);
    check(used == clen, "the content is all escapes and plain bytes");
    if (cut) {
        check(m < n && memcmp(back, s, m) == 0, "cut: a prefix of the value");
        check(cap < LOGESC_SIZE(n), "cut only when it could not fit");
    } else {
        check(m == n && memcmp(back, s, n) == 0, "decodes to the value");
    }
    free(back);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t cap, len, n;
    enum logesc_form form;
    const char *s;
    char *out;

    if (size < 2) {
        return 0;
    }
    cap = LOGESC_MIN + data[0] * 4u;
    form = (enum logesc_form)(data[1] % 3);
    s = (const char *)data + 2;
    n = size - 2;
    out = malloc(cap);
    check(out != NULL, "out of memory");
    len = logesc(out, cap, s, n, form);
    check(len < cap && out[len] == '\0', "fits the room, NUL-terminated");
    check_text(out, len);
    check(strlen(out) == len, "no NUL inside");
    if (len > 0 && out[0] == '"') {
        check_quoted(out, len, s, n, cap);
    } else {
        check_bare(out, len, s, n, form);
    }
    free(out);
    return 0;
}
