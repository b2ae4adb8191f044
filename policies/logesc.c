/* logesc.c: outside values as log text, one piece (a byte or a UTF-8
 * sequence) at a time. Pure: no I/O, no globals. */
#include "logesc.h"

#include <stdbool.h>
#include <string.h>

#include "ascii.h"
#include "utf8.h"

/* Byte c as \xNN into esc; returns 4. */
static size_t
hex(unsigned char c, char *esc)
{
    esc[0] = '\\';
    esc[1] = 'x';
    ascii_hex(&c, 1, esc + 2);
    return 4;
}

/* Whether the well-formed sequence at p (k bytes) is a C1 control or a
 * line or paragraph separator: a line break or a terminal's escape to
 * a reader that honours them. */
static bool
hidden_break(const unsigned char *p, size_t k)
{
    return (k == 2 && p[0] == 0xc2 && p[1] < 0xa0) ||
           (k == 3 && p[0] == 0xe2 && p[1] == 0x80 &&
            (p[2] == 0xa8 || p[2] == 0xa9));
}

/* The letter of a two-byte escape for c (\\ \" \t \n \r), or 0. */
static char
named(unsigned char c)
{
    switch (c) {
    case '\\':
    case '"':
        return (char)c;
    case '\t':
        return 't';
    case '\n':
        return 'n';
    case '\r':
        return 'r';
    default:
        return 0;
    }
}

/* How the piece at s (len >= 1 bytes left) is written: *take bytes of
 * input, as themselves (returns 0) or as the escape put in esc (returns
 * its length). */
static size_t
piece(const char *s, size_t len, size_t *take, char esc[4])
{
    unsigned char c = (unsigned char)s[0];
    size_t k;

    *take = 1;
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
        return 0; /* the common case first */
    }
    if ((esc[1] = named(c)) != 0) {
        esc[0] = '\\';
        return 2;
    }
    if (c < 0x80) { /* the other controls and DEL */
        return hex(c, esc);
    }
    k = utf8_seq(s, len);
    if (k == 0 || hidden_break((const unsigned char *)s, k)) {
        return hex(c, esc); /* the bytes after it are escaped in turn */
    }
    *take = k;
    return 0;
}

/* The length of s[0..n) escaped, and whether form lets it stay bare. */
static size_t
escaped_len(const char *s, size_t n, enum logesc_form form, bool *bare)
{
    size_t total = 0;

    *bare = n > 0 && form != LOGESC_QUOTED;
    while (n > 0) {
        char esc[4];
        size_t take = ascii_plain_run(s, n), e = 0;

        if (take > 0) {
            *bare = *bare && memchr(s, ' ', take) == NULL &&
                    (form != LOGESC_WORD || memchr(s, '=', take) == NULL);
        } else {
            e = piece(s, n, &take, esc);
            *bare = *bare && e == 0;
        }
        total += e > 0 ? e : take;
        s += take;
        n -= take;
    }
    return total;
}

/* Write the pieces of s[0..n) at out + *o while they fit below limit;
 * returns whether all did. */
static bool
put_pieces(char *out, size_t *o, size_t limit, const char *s, size_t n)
{
    while (n > 0) {
        char esc[4];
        size_t take = ascii_plain_run(s, n), e = 0, w;

        if (take > 1) { /* a run: as much of it as fits */
            w = take < limit - *o ? take : limit - *o;
            memcpy(out + *o, s, w);
            *o += w;
            if (w < take) {
                return false;
            }
        } else {
            e = piece(s, n, &take, esc);
            w = e > 0 ? e : take;
            if (*o + w > limit) {
                return false;
            }
            memcpy(out + *o, e > 0 ? esc : s, w);
            *o += w;
        }
        s += take;
        n -= take;
    }
    return true;
}

size_t
logesc(char *out, size_t cap, const char *s, size_t n, enum logesc_form form)
{
    bool bare;
    size_t len = escaped_len(s, n, form, &bare), o = 0;

    if (len + (bare ? 0 : 2) < cap) {
        if (!bare) {
            out[o++] = '"';
        }
        put_pieces(out, &o, cap, s, n);
        if (!bare) {
            out[o++] = '"';
        }
        out[o] = '\0';
        return o;
    }
    /* Cut: room for the closing quote, "..." and the NUL after it. */
    out[o++] = '"';
    put_pieces(out, &o, cap - 5, s, n);
    memcpy(out + o, "\"...", 5);
    return o + 4;
}

size_t
logesc_decode(const char *s, size_t len, char *out, size_t *used)
{
    static const char named[] = "\\\\\"\"n\nr\rt\t";
    size_t i = 0, o = 0;

    while (i < len && s[i] != '"') {
        const char *m;
        int hi, lo;

        if (s[i] == '\\' && i + 1 < len && s[i + 1] != '\0' &&
            (m = strchr(named, s[i + 1])) != NULL && (m - named) % 2 == 0) {
            out[o++] = m[1];
            i += 2;
        } else if (s[i] == '\\' && i + 3 < len && s[i + 1] == 'x' &&
                   (hi = ascii_hexval(s[i + 2])) >= 0 &&
                   (lo = ascii_hexval(s[i + 3])) >= 0) {
            out[o++] = (char)(hi << 4 | lo);
            i += 4;
        } else {
            out[o++] = s[i++];
        }
    }
    *used = i;
    return o;
}
