/* recent.h: what the control port's page shows: the latest accepted marks
 * and the latest refusals, in two small fixed rings (no allocation). */
#ifndef TM_RECENT_H
#define TM_RECENT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define RECENT_N 32
#define RECENT_NAME 128 /* resource names are cut to this for display */

/* when: seconds since the epoch; when_ms: the same instant in ms, for the
 * page's timeline (several events a second apart). */
struct recent_mark {
    time_t when;
    int64_t when_ms;
    int64_t mark;
    char resource[RECENT_NAME];
};

struct recent_refusal {
    time_t when;
    int64_t when_ms;
    int status;
    int64_t token;
    int64_t mark;
    char reason[24];
    char route[48];
    char resource[RECENT_NAME];
};

struct recent {
    struct recent_mark marks[RECENT_N];
    size_t nmarks; /* ever recorded; the ring holds the last */
    struct recent_refusal refusals[RECENT_N];
    size_t nrefusals;
};

void recent_mark(struct recent *r, const char *resource, int64_t mark);
void recent_refusal(struct recent *r, int status, const char *reason,
                    const char *route, const char *resource, int64_t token,
                    int64_t mark);

#endif
