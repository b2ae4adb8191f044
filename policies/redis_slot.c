/* redis_slot.c: CRC16 hash slots with hash tags, and MOVED / ASK
 * redirections, as Redis Cluster defines them. */
#include "redis_slot.h"

#include <string.h>

#include "ascii.h"

unsigned
redis_crc16(const char *p, size_t len)
{
    unsigned crc = 0;

    for (size_t i = 0; i < len; i++) {
        crc ^= (unsigned)(unsigned char)p[i] << 8;
        for (int b = 0; b < 8; b++) {
            crc = (crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1;
            crc &= 0xffff;
        }
    }
    return crc;
}

unsigned
redis_slot(const char *key, size_t len)
{
    const char *open = len > 0 ? memchr(key, '{', len) : NULL;

    if (open != NULL) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = rest > 0 ? memchr(open + 1, '}', rest) : NULL;

        if (close != NULL && close > open + 1) {
            return redis_crc16(open + 1, (size_t)(close - open - 1)) &
                   (REDIS_SLOTS - 1);
        }
    }
    return redis_crc16(key, len) & (REDIS_SLOTS - 1);
}

/* A decimal of 1 to 5 digits in p[0..len), at most max. */
static bool
parse_small(const char *p, size_t len, unsigned max, unsigned *out)
{
    uint64_t v;

    if (!ascii_udec(p, len, 5, max, &v)) {
        return false;
    }
    *out = (unsigned)v;
    return true;
}

bool
redis_host_ok(const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];

        if (c <= ' ' || c >= 0x7f || c == '[' || c == ']' || c == '/' ||
            c == '@') {
            return false;
        }
    }
    return true;
}

enum redis_redirect_kind
redis_redirect_parse(const char *s, size_t len, struct redis_redirect *out)
{
    enum redis_redirect_kind kind;
    const char *p, *end = s + len, *sp, *colon;
    struct redis_redirect r;

    if (len > 6 && memcmp(s, "MOVED ", 6) == 0) {
        kind = REDIS_REDIRECT_MOVED;
        p = s + 6;
    } else if (len > 4 && memcmp(s, "ASK ", 4) == 0) {
        kind = REDIS_REDIRECT_ASK;
        p = s + 4;
    } else {
        return REDIS_REDIRECT_NONE;
    }
    sp = memchr(p, ' ', (size_t)(end - p));
    if (sp == NULL ||
        !parse_small(p, (size_t)(sp - p), REDIS_SLOTS - 1, &r.slot)) {
        return REDIS_REDIRECT_NONE;
    }
    p = sp + 1;
    colon = memrchr(p, ':', (size_t)(end - p));
    if (colon == NULL ||
        !parse_small(colon + 1, (size_t)(end - colon - 1), 65535, &r.port) ||
        r.port == 0) {
        return REDIS_REDIRECT_NONE;
    }
    r.host.p = p;
    r.host.len = (size_t)(colon - p);
    if (r.host.len >= 2 && r.host.p[0] == '[' &&
        r.host.p[r.host.len - 1] == ']') {
        r.host.p++;
        r.host.len -= 2;
    }
    if (!redis_host_ok(r.host.p, r.host.len)) {
        return REDIS_REDIRECT_NONE;
    }
    r.kind = kind;
    *out = r;
    return kind;
}
