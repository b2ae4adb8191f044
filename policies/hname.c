/* hname.c: the header names a server may read as the same (hname.h). */
#include "hname.h"

#include "ascii.h"

#include <string.h>

static bool
is_alnum(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
           (c >= 'A' && c <= 'Z');
}

bool
hname_byte_same(char a, char b)
{
    if (is_alnum(a) || is_alnum(b)) {
        return ascii_lower(a) == ascii_lower(b);
    }
    return true;
}

bool
hname_same(const char *a, size_t alen, const char *b)
{
    size_t i;

    for (i = 0; i < alen && b[i] != '\0'; i++) {
        if (!hname_byte_same(a[i], b[i])) {
            return false;
        }
    }
    return i == alen && b[i] == '\0';
}

bool
hname_variant(const char *a, size_t alen, const char *b)
{
    size_t i;

    /* b itself in any case first: the name a parser meets most (the
     * fencing header, spelled right) is no variant, and this loop is
     * the cheaper one. */
    for (i = 0; i < alen && b[i] != '\0'; i++) {
        if (ascii_lower(a[i]) != ascii_lower(b[i])) {
            break;
        }
    }
    if (i == alen && b[i] == '\0') {
        return false;
    }
    return hname_same(a, alen, b);
}
