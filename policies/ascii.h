/* ascii.h: the byte helpers every parser here needs, locale-free (the
 * <ctype.h> ones follow the locale and take int). */
#ifndef TM_ASCII_H
#define TM_ASCII_H

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
