/* hname.c: the header names a server may read as the same (hname.h). */
#include "hname.h"

#include <string.h>

static bool
is_alnum(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
           (c >= 'A' && c <= 'Z');
}

static char
lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c | 0x20) : c;
}

bool
hname_byte_same(char a, char b)
{
    if (is_alnum(a) || is_alnum(b)) {
        return lower(a) == lower(b);
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
    if (!hname_same(a, alen, b)) {
        return false;
    }
    for (size_t i = 0; i < alen; i++) {
        if (lower(a[i]) != lower(b[i])) {
            return true;
        }
    }
    return false;
}
