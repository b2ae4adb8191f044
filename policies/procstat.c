/* procstat.c: /proc/self/stat and /proc/stat's btime as numbers. */
#include "procstat.h"

#include <string.h>

#include "ascii.h"

/* The unsigned decimal p[0..n) (1 to 19 digits); a signed field that is
 * negative ("-1") reads as 0. false when it is not a number. */
static bool
decimal(const char *p, size_t n, uint64_t *out)
{
    bool neg = n > 0 && p[0] == '-';
    uint64_t v;

    if (!ascii_udec(p + neg, n - neg, 19, UINT64_MAX, &v)) {
        return false;
    }
    *out = neg ? 0 : v;
    return true;
}

/* Field numbers of proc(5) (the first is 1); those after the command
 * name's ')' are counted from 3. */
#define FIELD_FIRST 3
#define FIELD_LAST 24

bool
procstat_parse(const char *text, size_t len, struct procstat *out)
{
    uint64_t *want[FIELD_LAST + 1] = {0};
    size_t i = len;
    int field = FIELD_FIRST;

    want[14] = &out->utime;
    want[15] = &out->stime;
    want[22] = &out->starttime;
    want[23] = &out->vsize;
    want[24] = &out->rss;
    while (i > 0 && text[i - 1] != ')') {
        i--;
    }
    if (i == 0) {
        return false;
    }
    for (; field <= FIELD_LAST; field++) {
        size_t start;

        if (i >= len || text[i] != ' ') {
            return false;
        }
        start = ++i;
        while (i < len && text[i] != ' ' && text[i] != '\n') {
            i++;
        }
        if (i == start) {
            return false;
        }
        if (want[field] != NULL &&
            !decimal(text + start, i - start, want[field])) {
            return false;
        }
    }
    return true;
}

bool
procstat_btime(const char *text, size_t len, uint64_t *out)
{
    static const char key[] = "btime ";
    size_t klen = sizeof(key) - 1;
    size_t i = 0;

    while (i < len) {
        size_t end = i;

        while (end < len && text[end] != '\n') {
            end++;
        }
        if (end - i > klen && memcmp(text + i, key, klen) == 0) {
            return decimal(text + i + klen, end - i - klen, out);
        }
        i = end + 1;
    }
    return false;
}
