/* decide.h: the decision table. Given a route's mode, what the request
 * carries and what is known of the mark, say what to do. Pure. */
#ifndef TM_DECIDE_H
#define TM_DECIDE_H

#include <stdbool.h>
#include <stdint.h>

#include "route.h"
#include "token.h"

enum decision {
    DECIDE_FORWARD = 0, /* forward without touching the store (bypass) */
    DECIDE_RAISE,       /* ask the store to raise the mark, then decide */
    DECIDE_ACCEPT,      /* token equals the known durable mark: forward */
    DECIDE_STALE,       /* 409: token below the mark */
    DECIDE_MISSING,     /* 428 */
    DECIDE_INVALID,     /* 400 */
    DECIDE_UNAVAILABLE, /* 503: store failed on a correctness route */
    DECIDE_FORBIDDEN,   /* 403: unsigned, forged or borrowed token */
};

/* Before the store: mode, the token's parse status and value, and the
 * cached lower bound of the mark (0 when unknown). */
enum decision decide_request(enum tm_mode mode, enum token_status ts,
                             int64_t token, int64_t cached_mark);

/* After the store answered a raise: store_ok is false when the store
 * failed; stale is true when it answered stale. */
enum decision decide_store(enum tm_mode mode, bool store_ok, bool stale);

/* One request, two resources (a WebDAV MOVE writes its Destination and
 * its source): given each one's decision, the one that acts first. A
 * refusal wins over going on: invalid, forbidden, missing, stale,
 * unavailable, in that order; then raise (some mark must be asked),
 * accept, forward. The caller looks at a first to name the resource. */
enum decision decide_pair(enum decision a, enum decision b);

/* A carrier's state (proxy/carry/carry.h): whether this sidecar holds the
 * lease (or is the election's holder) that carries a bound route's
 * token. */
enum carry_state {
    CARRY_STARTING = 0, /* not decided yet */
    CARRY_HOLDING,      /* this sidecar is the holder: it has a fence */
    CARRY_STANDBY,      /* someone else holds it */
    CARRY_LOST,         /* the lease ended (renewal failed, TTL ran out) */
    CARRY_NSTATES,
};

/* What a write on a route bound to a carrier gets: go on with the
 * carrier's fence as its token (status 0), or a refusal: status, its
 * Tidemark-Error kind and a detail. */
struct carry_verdict {
    int status;
    const char *kind;
    const char *detail;
};

/* The verdict for a write that brings a token of its own (has_token) or
 * none, while the carrier is in state st. */
struct carry_verdict decide_carried(enum carry_state st, bool has_token);

#endif
