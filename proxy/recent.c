/* recent.c: the rings behind the control port's page. */
#include "recent.h"

#include <stdio.h>
#include <string.h>

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
            m->when = time(NULL);
            return;
        }
    }
    m = &r->marks[r->nmarks++ % RECENT_N];
    m->when = time(NULL);
    m->mark = mark;
    copy(m->resource, sizeof(m->resource), resource);
}

void
recent_refusal(struct recent *r, int status, const char *reason,
               const char *route, const char *resource, int64_t token,
               int64_t mark)
{
    struct recent_refusal *f = &r->refusals[r->nrefusals++ % RECENT_N];

    f->when = time(NULL);
    f->status = status;
    f->token = token;
    f->mark = mark;
    copy(f->reason, sizeof(f->reason), reason);
    copy(f->route, sizeof(f->route), route);
    copy(f->resource, sizeof(f->resource), resource);
}
