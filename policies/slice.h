/* slice.h: a (pointer, length) view into a buffer someone else owns. */
#ifndef TM_SLICE_H
#define TM_SLICE_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

struct tm_slice {
    const char *p;
    size_t len;
};

static inline bool
slice_eq(struct tm_slice s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && memcmp(s.p, lit, n) == 0;
}

/* ASCII case-insensitive comparison, as header names need. */
static inline bool
slice_ieq(struct tm_slice s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && strncasecmp(s.p, lit, n) == 0;
}

/* s without the spaces and tabs around it (a field value's OWS). */
static inline struct tm_slice
slice_trim(struct tm_slice s)
{
    while (s.len > 0 && (s.p[0] == ' ' || s.p[0] == '\t')) {
        s.p++;
        s.len--;
    }
    while (s.len > 0 && (s.p[s.len - 1] == ' ' || s.p[s.len - 1] == '\t')) {
        s.len--;
    }
    return s;
}

#endif
