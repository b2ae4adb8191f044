/* recent.h: what the control port's page shows: the current marks of the
 * resources written last (one entry each), the latest refusals, the
 * history of every accepted write and refusal, and the leases this
 * sidecar handed out, in small fixed tables (no allocation). */
#ifndef TM_RECENT_H
#define TM_RECENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define RECENT_N 32     /* at most 256: struct recent's order is bytes */
#define RECENT_NAME 128 /* resource names are cut to this for display */

/* when: seconds since the epoch; when_ms: the same instant in ms, for the
 * page's timeline (several events a second apart). */
struct recent_mark {
    time_t when;
    int64_t when_ms;
    int64_t mark;
    char resource[RECENT_NAME];
};

/* Who sent a write or a refused request: its route, the client's address
 * and the request id (each NULL: unknown). */
struct recent_who {
    const char *route;
    const char *client;
    const char *rid;
};

#define RECENT_EVENTS 128 /* the history of writes and refusals */

/* One accepted write or refusal: mark is the resource's mark then (a
 * request without a token shows the mark when it is known). An accepted
 * write's status is the answer the client got, once it is known (0
 * before: in flight): the upstream's, or tidemark's when it could not
 * forward it (502, 504, with the reason). */
struct recent_event {
    time_t when;
    int64_t when_ms;
    int status;
    bool accepted; /* the fence let it through (the mark was raised) */
    uint64_t seq;  /* 1 for the first event ever */
    int64_t token; /* 0: the request had none */
    int64_t mark;
    char reason[24];
    char route[48];
    char client[48];
    char rid[129]; /* access.h: REQID_MAX */
    char resource[RECENT_NAME];
};

/* A lease the lock service answered with (acquire or extend). */
struct recent_lock {
    int64_t fence;
    int64_t expires_ms; /* wall clock, ms since the epoch */
    uint64_t hash;
    char holder[64]; /* the address of the client that took or extended it */
    char name[RECENT_NAME];
};

struct recent {
    struct recent_mark marks[RECENT_N]; /* in no order: see order */
    uint8_t order[RECENT_N];      /* indexes into marks, most recently written
                                   * first (moving one is a byte, not an entry) */
    size_t nmarks;                /* in use: marks[0 .. nmarks - 1] */
    uint64_t mark_hash[RECENT_N]; /* of marks[i].resource, side by side:
                                   * a name is looked for in 256 bytes */
    struct recent_event refusals[RECENT_N]; /* the refusals only */
    size_t nrefusals; /* ever recorded; the ring holds the last */
    struct recent_event events[RECENT_EVENTS];
    uint64_t nevents;  /* ever recorded; the ring holds the last */
    uint64_t accepted; /* fenced writes accepted, ever */
    struct recent_lock locks[RECENT_N];
    size_t nlocks; /* in use */
    time_t started;
};

/* A fenced write with token was accepted: resource at mark, and a MOVE's
 * source (src NULL: none) at src_mark; one event in the history, whose
 * sequence number (1 for the first event ever) is returned for
 * recent_answered. */
uint64_t recent_accept(struct recent *r, const struct recent_who *who,
                       const char *resource, int64_t token, int64_t mark,
                       const char *src, int64_t src_mark);
/* The accepted write of event seq (0: none) was answered with status;
 * reason (NULL: keep "accepted") says why tidemark answered itself.
 * Nothing when the history has moved past it. */
void recent_answered(struct recent *r, uint64_t seq, int status,
                     const char *reason);
/* The mark the table holds for resource, or 0 (not written lately). */
int64_t recent_known_mark(const struct recent *r, const char *resource);
/* The i-th most recently written of the nmarks resources. */
const struct recent_mark *recent_mark_at(const struct recent *r, size_t i);
/* A refusal, in the refusals and in the history; mark 0 with a resource
 * whose mark the table holds: that mark. Its sequence number, for
 * recent_mark. */
uint64_t recent_refusal(struct recent *r, const struct recent_who *who,
                        int status, const char *reason, const char *resource,
                        int64_t token, int64_t mark);
/* The mark of event seq's resource was read (from the store): shown in
 * the history and the refusals, while they hold the event. */
void recent_mark(struct recent *r, uint64_t seq, int64_t mark);
/* The i-th most recent of the events the history holds (i below
 * recent_nevents). */
const struct recent_event *recent_event_at(const struct recent *r, size_t i);
size_t recent_nevents(const struct recent *r);
/* The lock service leased name (len bytes) with fence for ttl_ms more to
 * holder (NULL: unknown); a full table forgets the lease that ends first. */
void recent_lease(struct recent *r, const char *name, size_t len, int64_t fence,
                  int64_t ttl_ms, const char *holder);
/* Forget the leases whose time ran out by now_ms (nobody extended or
 * released them here), calling ended with each first. */
void recent_leases_end(struct recent *r, int64_t now_ms,
                       void (*ended)(const struct recent_lock *l));
/* name's lease with fence was released or lost (another's stays). */
void recent_lease_gone(struct recent *r, const char *name, size_t len,
                       int64_t fence);

/* Milliseconds since the epoch, now. */
int64_t recent_now_ms(void);

#endif
