/* ascii.h: the byte helpers every parser here needs, locale-free (the
 * <ctype.h> ones follow the locale and take int). */
#ifndef TM_ASCII_H
#define TM_ASCII_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The value of a hex digit in either case, or -1. */
static inline int
ascii_hexval(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* An unsigned decimal from p[0..len): 1 to digits digits (19 at most)
 * and nothing else (no sign, no space), at most max. false otherwise,
 * *out untouched. The one reader of the decimals that peers answer. */
static inline bool
ascii_udec(const char *p, size_t len, size_t digits, uint64_t max,
           uint64_t *out)
{
    uint64_t v = 0; /* 19 digits stay below 10^19 < 2^64 */

    if (len == 0 || len > digits || len > 19) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return false;
        }
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    if (v > max) {
        return false;
    }
    *out = v;
    return true;
}

/* A decimal 0..INT64_MAX from p[0..len): 1 to 19 digits and nothing
 * else. false otherwise, *out untouched. */
static inline bool
ascii_dec_read(const char *p, size_t len, int64_t *out)
{
    uint64_t v;

    if (!ascii_udec(p, len, 19, INT64_MAX, &v)) {
        return false;
    }
    *out = (int64_t)v;
    return true;
}

/* The n bytes at b as 2n lowercase hex digits at out (no NUL). */
static inline void
ascii_hex(const unsigned char *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
}

/* How many bytes from s on (n at most) are printable ASCII other than
 * '"' and '\\': the run every escaper here (JSON, log values) copies as
 * it is. */
static inline size_t
ascii_plain_run(const char *s, size_t n)
{
    size_t i = 0;

    while (i < n) {
        unsigned char c = (unsigned char)s[i];

        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
            break;
        }
        i++;
    }
    return i;
}

/* The most bytes ascii_dec writes: "-9223372036854775808". */
#define ASCII_DEC_MAX 20

/* v in decimal, written so that it ends just before end (no NUL);
 * returns where it starts, at most ASCII_DEC_MAX bytes before end.
 * Where a number is written per request, snprintf's formatting engine
 * costs more than the rest of the field. */
static inline char *
ascii_dec(char *end, int64_t v)
{
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    char *p = end;

    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    if (v < 0) {
        *--p = '-';
    }
    return p;
}

/* c in lower case if it is an ASCII capital letter. */
static inline char
ascii_lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c | 0x20) : c;
}

#endif
