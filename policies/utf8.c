/* utf8.c: well-formed UTF-8 sequences (RFC 3629). Pure: no I/O, no
 * globals. */
#include "utf8.h"

#include <stdint.h>

size_t
utf8_seq(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    uint32_t cp;
    size_t n;

    if (len == 0) {
        return 0;
    }
    if (p[0] < 0x80) {
        return 1;
    }
    if (p[0] >= 0xc2 && p[0] <= 0xdf) {
        n = 2;
        cp = p[0] & 0x1f;
    } else if ((p[0] & 0xf0) == 0xe0) {
        n = 3;
        cp = p[0] & 0x0f;
    } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        n = 4;
        cp = p[0] & 0x07;
    } else {
        return 0;
    }
    if (len < n) {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) {
            return 0;
        }
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff)) {
        return 0;
    }
    return n;
}

bool
utf8_valid(const char *s, size_t len)
{
    while (len > 0) {
        size_t k = utf8_seq(s, len);

        if (k == 0) {
            return false;
        }
        s += k;
        len -= k;
    }
    return true;
}
