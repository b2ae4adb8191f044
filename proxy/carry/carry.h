/* carry.h: carriers, the sections that carry a token on the
 * application's behalf. A route with lease = NAME sends its tokenless
 * writes with the fence of the carrier NAME: a [lease NAME] (this
 * sidecar holds a lease through the lock service, lease.c) or a
 * [follow NAME] (it follows the application's own election). Each kind
 * sits behind a small table (struct carry_kind) and tells its carrier
 * what it sees (carry_won, carry_standby, carry_lost); the carrier keeps
 * the state, raises the scope mark, and answers the data path, the
 * control port, /readyz, /metrics and the log. */
#ifndef TM_CARRY_H
#define TM_CARRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../policies/decide.h" /* enum carry_state */

struct event_base;
struct evbuffer;
struct fence;
struct lock_service;
struct tm_config;
struct tm_log;

/* "starting", "holding", "standby", "lost". */
const char *carry_state_name(enum carry_state st);

struct carrier;
struct carriers;

/* What a kind may use; outlives every carrier. */
struct carry_env {
    struct event_base *base;
    struct fence *fence;        /* the mark store */
    struct lock_service *locks; /* NULL without a [locks] backend open */
    const char *lock_backend;   /* [locks] backend: "etcd", ... */
    const struct tm_log *log;   /* the proxy's, entered by callbacks */
};

/* One kind of carrier. */
struct carry_kind {
    const char *name; /* "lease", "follow": the JSON's kind and the scope
                       * mark's prefix (lease/NAME) */
    /* Start following cfg (the section's struct: cfg_lease, ...) for c:
     * the kind reports to c from now on, never from inside this call.
     * NULL with a message in err. */
    void *(*open)(const struct carry_env *env, struct carrier *c,
                  const void *cfg, char *err, size_t errlen);
    /* Optional (NULL: nothing to give back). Stopping: no new win; give
     * what is held back (a standby need not wait for its TTL), then
     * done(arg), once, maybe from inside this call. */
    void (*stop)(void *impl, void (*done)(void *arg), void *arg);
    /* Stop: no report after this. */
    void (*close)(void *impl);
};

extern const struct carry_kind carry_lease_kind;  /* lease.c */
extern const struct carry_kind carry_follow_kind; /* follow.c */

/* ---- what a kind reports ---- */

/* This sidecar is the holder with fence (>= 1), valid on dial_now_ms's
 * clock until until_ms (0: until the kind says otherwise); holder names
 * it (NULL: none). The carrier raises the scope mark to fence first and
 * is holding once it is raised; a report of the same fence (a renewal)
 * moves until_ms on. */
void carry_won(struct carrier *c, int64_t fence, int64_t until_ms,
               const char *holder);

/* Someone else holds it: fence its fence (0: unknown), holder its name
 * (NULL: unknown). why: logged. */
void carry_standby(struct carrier *c, int64_t fence, const char *holder,
                   const char *why);

/* This sidecar stopped holding, or never could (the store is down):
 * lost after holding, else starting (nothing decided yet). why:
 * logged. */
void carry_lost(struct carrier *c, const char *why);

/* The section's NAME, for the kind's log lines. */
const char *carry_name(const struct carrier *c);

/* ---- the set ---- */

/* A carrier for each [lease] (and [follow]) section of cfg (which
 * outlives the set). NULL with a message in err; a config without any
 * gives an empty set. */
struct carriers *carriers_new(const struct carry_env *env,
                              const struct tm_config *cfg, char *err,
                              size_t errlen)
    __attribute__((warn_unused_result));

void carriers_free(struct carriers *set);

/* Stopping (once no client is left): every carrier gives back what it
 * holds; then done(arg), once (from inside this call when nothing is
 * held). */
void carriers_stop(struct carriers *set, void (*done)(void *arg), void *arg);

/* The carrier NAME, or NULL. */
struct carrier *carry_find(struct carriers *set, const char *name);

/* The state for a write now: holding only while the kind's until_ms has
 * not passed on this process's own clock (a process that was paused
 * finds its lease lost here, before any timer of it runs). *fence: the
 * fence while holding, else 0. */
enum carry_state carry_now(struct carrier *c, int64_t *fence);

/* The carrier's scope mark resource ("lease/NAME"), NUL-terminated. */
const char *carry_scope(const struct carrier *c, size_t *len);

/* Whether every carrier with ready = yes is holding. */
bool carriers_ready(struct carriers *set);

/* One line per carrier for /readyz: "\nlease NAME: STATE fence F". */
void carriers_describe(struct carriers *set, struct evbuffer *out);

/* The JSON of every carrier (a list), or of c alone (an object), for
 * /v1/leases. */
void carriers_json(struct carriers *set, struct evbuffer *out);
void carry_json(struct carrier *c, struct evbuffer *out);

/* The carrier families of /metrics. */
void carriers_metrics(struct carriers *set, struct evbuffer *out);

#endif
