/* recent.c: the rings behind the control port's page. */
#include "recent.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* The wall clock in ms since the epoch. */
static int64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src != NULL ? src : "");
}

void
recent_mark(struct recent *r, const char *resource, int64_t mark)
{
    struct recent_mark *m;

    /* A resource written again moves to the front, not in twice. */
    if (r->nmarks > 0) {
        m = &r->marks[(r->nmarks - 1) % RECENT_N];
        if (strncmp(m->resource, resource, RECENT_NAME - 1) == 0) {
            m->mark = mark;
            m->when_ms = now_ms();
            m->when = (time_t)(m->when_ms / 1000);
            return;
        }
    }
    m = &r->marks[r->nmarks++ % RECENT_N];
    m->when_ms = now_ms();
    m->when = (time_t)(m->when_ms / 1000);
    m->mark = mark;
    copy(m->resource, sizeof(m->resource), resource);
}

void
recent_refusal(struct recent *r, int status, const char *reason,
               const char *route, const char *resource, int64_t token,
               int64_t mark)
{
    struct recent_refusal *f = &r->refusals[r->nrefusals++ % RECENT_N];

    f->when_ms = now_ms();
    f->when = (time_t)(f->when_ms / 1000);
    f->status = status;
    f->token = token;
    f->mark = mark;
    copy(f->reason, sizeof(f->reason), reason);
    copy(f->route, sizeof(f->route), route);
    copy(f->resource, sizeof(f->resource), resource);
}
