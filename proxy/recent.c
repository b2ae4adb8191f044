/* recent.c: the tables behind the control port's page. */
#include "recent.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* How many of s's len bytes are kept in max: all, or a cut before a
 * UTF-8 character, never inside one (the page shows the name). */
static size_t
kept_len(const char *s, size_t len, size_t max)
{
    size_t n = len < max ? len : max;

    while (n > 0 && n < len && ((unsigned char)s[n] & 0xC0) == 0x80) {
        n--;
    }
    return n;
}

/* src cut to cap - 1 bytes (NULL: empty). */
static void
copy(char *dst, size_t cap, const char *src)
{
    size_t n = src != NULL ? kept_len(src, strnlen(src, cap), cap - 1) : 0;

    memcpy(dst, src != NULL ? src : "", n);
    dst[n] = '\0';
}

/* FNV-1a over what is kept of a name. */
static uint64_t
name_hash(const char *s, size_t len)
{
    uint64_t h = 14695981039346656037ULL;

    len = kept_len(s, len, RECENT_NAME - 1);
    for (size_t i = 0; i < len; i++) {
        h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    }
    return h;
}

static bool
same_name(const char *kept, uint64_t kept_hash, const char *s, size_t len,
          uint64_t h)
{
    size_t n;

    if (kept_hash != h) {
        return false; /* the common case, before any byte is read */
    }
    n = kept_len(s, len, RECENT_NAME - 1);
    return strncmp(kept, s, n) == 0 && kept[n] == '\0';
}

/* The slot of marks holding resource (len bytes, hash h), or -1. */
static int
find_mark(const struct recent *r, const char *resource, size_t len, uint64_t h)
{
    for (size_t s = 0; s < r->nmarks; s++) {
        if (same_name(r->marks[s].resource, r->mark_hash[s], resource, len,
                      h)) {
            return (int)s;
        }
    }
    return -1;
}

/* Put resource at mark first, once, as seen at when_ms: its old entry
 * (or the oldest, when the table is full) makes room. */
static void
mark_first(struct recent *r, const char *resource, int64_t mark,
           int64_t when_ms)
{
    size_t len = strlen(resource);
    uint64_t h = name_hash(resource, len);
    int found = find_mark(r, resource, len, h);
    struct recent_mark *m;
    uint8_t slot;
    size_t i;

    if (found >= 0) {
        const uint8_t *at = memchr(r->order, found, r->nmarks);

        i = (size_t)(at - r->order); /* every slot in use is in order */
    } else if (r->nmarks < RECENT_N) {
        i = r->nmarks;
        r->order[i] = (uint8_t)r->nmarks++;
    } else {
        i = RECENT_N - 1;
    }
    slot = r->order[i];
    memmove(&r->order[1], &r->order[0], i);
    r->order[0] = slot;
    m = &r->marks[slot];
    m->when_ms = when_ms;
    m->when = (time_t)(m->when_ms / 1000);
    m->mark = mark;
    r->mark_hash[slot] = h;
    copy(m->resource, sizeof(m->resource), resource);
}

const struct recent_mark *
recent_mark_at(const struct recent *r, size_t i)
{
    return &r->marks[r->order[i]];
}

int64_t
recent_known_mark(const struct recent *r, const char *resource)
{
    size_t len = strlen(resource);
    int s = find_mark(r, resource, len, name_hash(resource, len));

    return s >= 0 ? r->marks[s].mark : 0;
}

/* The next event of the history, its time, who and resource set. */
static struct recent_event *
event_new(struct recent *r, const struct recent_who *who, const char *resource)
{
    struct recent_event *e = &r->events[r->nevents++ % RECENT_EVENTS];

    e->seq = r->nevents;
    e->when_ms = recent_now_ms();
    e->when = (time_t)(e->when_ms / 1000);
    copy(e->route, sizeof(e->route), who->route);
    copy(e->client, sizeof(e->client), who->client);
    copy(e->rid, sizeof(e->rid), who->rid);
    copy(e->resource, sizeof(e->resource), resource);
    return e;
}

uint64_t
recent_accept(struct recent *r, const struct recent_who *who,
              const char *resource, int64_t token, int64_t mark,
              const char *src, int64_t src_mark)
{
    struct recent_event *e = event_new(r, who, resource);

    e->status = 0;
    e->accepted = true;
    e->token = token;
    e->mark = mark;
    copy(e->reason, sizeof(e->reason), "accepted");
    r->accepted++;
    if (src != NULL) {
        mark_first(r, src, src_mark, e->when_ms);
    }
    mark_first(r, resource, mark, e->when_ms);
    return r->nevents;
}

void
recent_answered(struct recent *r, uint64_t seq, int status, const char *reason)
{
    struct recent_event *e;

    if (seq == 0 || seq > r->nevents || r->nevents - seq >= RECENT_EVENTS) {
        return;
    }
    e = &r->events[(seq - 1) % RECENT_EVENTS];
    e->status = status;
    if (reason != NULL) {
        copy(e->reason, sizeof(e->reason), reason);
    }
}

uint64_t
recent_refusal(struct recent *r, const struct recent_who *who, int status,
               const char *reason, const char *resource, int64_t token,
               int64_t mark)
{
    struct recent_event *e = event_new(r, who, resource);

    e->accepted = false;
    if (mark == 0 && resource != NULL) {
        mark = recent_known_mark(r, resource);
    }
    e->status = status;
    e->token = token;
    e->mark = mark;
    copy(e->reason, sizeof(e->reason), reason);
    r->refusals[r->nrefusals++ % RECENT_N] = *e;
    return e->seq;
}

void
recent_mark(struct recent *r, uint64_t seq, int64_t mark)
{
    if (seq == 0) {
        return;
    }
    if (r->events[(seq - 1) % RECENT_EVENTS].seq == seq) {
        r->events[(seq - 1) % RECENT_EVENTS].mark = mark;
    }
    for (size_t i = 0; i < RECENT_N; i++) {
        if (r->refusals[i].seq == seq) {
            r->refusals[i].mark = mark;
        }
    }
}

size_t
recent_nevents(const struct recent *r)
{
    return r->nevents < RECENT_EVENTS ? (size_t)r->nevents : RECENT_EVENTS;
}

const struct recent_event *
recent_event_at(const struct recent *r, size_t i)
{
    return &r->events[(r->nevents - 1 - i) % RECENT_EVENTS];
}

int64_t
recent_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static size_t
lease_find(const struct recent *r, const char *name, size_t len, uint64_t h)
{
    size_t i;

    for (i = 0; i < r->nlocks; i++) {
        if (same_name(r->locks[i].name, r->locks[i].hash, name, len, h)) {
            break;
        }
    }
    return i;
}

void
recent_lease(struct recent *r, const char *name, size_t len, int64_t fence,
             int64_t ttl_ms, const char *holder)
{
    uint64_t h = name_hash(name, len);
    size_t i = lease_find(r, name, len, h);
    int64_t now = recent_now_ms();
    struct recent_lock *l;

    if (i == r->nlocks && r->nlocks < RECENT_N) {
        r->nlocks++;
    } else if (i == r->nlocks) {
        /* Full: the lease that ends first goes (it may have ended). */
        i = 0;
        for (size_t j = 1; j < r->nlocks; j++) {
            if (r->locks[j].expires_ms < r->locks[i].expires_ms) {
                i = j;
            }
        }
    }
    l = &r->locks[i];
    l->fence = fence;
    l->expires_ms = now + ttl_ms;
    l->hash = h;
    copy(l->holder, sizeof(l->holder), holder);
    len = kept_len(name, len, RECENT_NAME - 1);
    memcpy(l->name, name, len);
    l->name[len] = '\0';
}

void
recent_lease_gone(struct recent *r, const char *name, size_t len, int64_t fence)
{
    size_t i = lease_find(r, name, len, name_hash(name, len));

    if (i < r->nlocks && r->locks[i].fence == fence) {
        r->locks[i] = r->locks[--r->nlocks];
    }
}

void
recent_leases_end(struct recent *r, int64_t now_ms,
                  void (*ended)(const struct recent_lock *l))
{
    size_t i = 0;

    while (i < r->nlocks) {
        if (r->locks[i].expires_ms > now_ms) {
            i++;
            continue;
        }
        ended(&r->locks[i]);
        r->locks[i] = r->locks[--r->nlocks];
    }
}
