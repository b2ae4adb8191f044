/* zkname.c: lock names as znode names, and the lowest sequential child
 * (zkname.h). */
#include "zkname.h"

#include <string.h>

#define ZKNAME_SEQ_DIGITS 10

static bool
plain(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
}

size_t
zkname_escape(const char *name, size_t len, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    char *w = out;

    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)name[i];

        if (plain(ch)) {
            *w++ = (char)ch;
        } else {
            *w++ = '%';
            *w++ = hex[ch >> 4];
            *w++ = hex[ch & 15];
        }
    }
    return (size_t)(w - out);
}

/* An upper-case hex digit's value, or -1. */
static int
hex_val(char ch)
{
    if (ch >= '0' && ch <= '9') {
        return ch - '0';
    }
    if (ch >= 'A' && ch <= 'F') {
        return ch - 'A' + 10;
    }
    return -1;
}

bool
zkname_unescape(const char *e, size_t elen, char *out, size_t *outlen)
{
    char *w = out;

    for (size_t i = 0; i < elen; i++) {
        int hi, lo;

        if (e[i] != '%') {
            if (!plain((unsigned char)e[i])) {
                return false;
            }
            *w++ = e[i];
            continue;
        }
        if (elen - i < 3 || (hi = hex_val(e[i + 1])) < 0 ||
            (lo = hex_val(e[i + 2])) < 0 ||
            plain((unsigned char)(hi * 16 + lo))) {
            return false;
        }
        *w++ = (char)(hi * 16 + lo);
        i += 2;
    }
    *outlen = (size_t)(w - out);
    return true;
}

int64_t
zkname_seq(const char *kid)
{
    size_t n = strlen(kid);
    int64_t v = 0;

    if (n < ZKNAME_SEQ_DIGITS) {
        return -1;
    }
    for (size_t i = n - ZKNAME_SEQ_DIGITS; i < n; i++) {
        if (kid[i] < '0' || kid[i] > '9') {
            return -1;
        }
        v = v * 10 + (kid[i] - '0');
    }
    return v;
}

int
zkname_first(char *const *kids, int n)
{
    int best = -1;
    int64_t bs = -1;

    for (int i = 0; i < n; i++) {
        int64_t s = zkname_seq(kids[i]);

        if (s >= 0 && (best < 0 || s < bs)) {
            best = i;
            bs = s;
        }
    }
    return best;
}

const char *
zkname_below(const char *dir, const char *path, size_t *len)
{
    size_t dl = strlen(dir);
    const char *c;

    if (strncmp(path, dir, dl) != 0 || path[dl] != '/') {
        return NULL;
    }
    c = path + dl + 1;
    *len = strcspn(c, "/");
    return *len > 0 ? c : NULL;
}

enum zkname_turn
zkname_turn(const char *dir, const char *node, char *const *kids, int n,
            int *first)
{
    size_t len = 0;
    const char *ours = zkname_below(dir, node, &len);

    *first = -1;
    if (ours == NULL || ours[len] != '\0') {
        return ZKNAME_FOREIGN;
    }
    *first = zkname_first(kids, n);
    if (*first < 0) {
        return ZKNAME_NO_HOLDER;
    }
    return strcmp(kids[*first], ours) == 0 ? ZKNAME_HELD : ZKNAME_BEHIND;
}

int64_t
zkname_left(int64_t ttl, int64_t mtime, int64_t now)
{
    if (ttl <= 0 || now < 0) {
        return 0;
    }
    if (mtime >= now) {
        return ttl; /* written "later" than now: the clocks differ */
    }
    if (mtime < now - ttl) {
        return 0; /* now - mtime > ttl, without computing it */
    }
    return ttl - (now - mtime);
}
