/* decide.c: the decision table of doc/design.md's "Modes", as two pure
 * functions: one before the store is asked, one after it answered. */
#include "decide.h"

enum decision
decide_request(enum tm_mode mode, enum token_status ts, int64_t token,
               int64_t cached_mark)
{
    if (mode == TM_MODE_OFF) {
        return DECIDE_FORWARD;
    }
    if (ts == TOKEN_MISSING) {
        return mode == TM_MODE_EFFICIENCY ? DECIDE_FORWARD : DECIDE_MISSING;
    }
    if (ts == TOKEN_FORBIDDEN) {
        return DECIDE_FORBIDDEN;
    }
    if (ts != TOKEN_OK) {
        return DECIDE_INVALID;
    }
    /* The cached mark is a lower bound of the durable one: below it is
     * stale for sure; equal to it is durable already, so no write. */
    if (token < cached_mark) {
        return DECIDE_STALE;
    }
    if (cached_mark > 0 && token == cached_mark) {
        return DECIDE_ACCEPT;
    }
    return DECIDE_RAISE;
}

enum decision
decide_store(enum tm_mode mode, bool store_ok, bool stale)
{
    if (mode == TM_MODE_OFF) {
        return DECIDE_FORWARD;
    }
    if (stale) {
        return DECIDE_STALE;
    }
    if (!store_ok) {
        /* Any mode but efficiency fails closed. */
        return mode == TM_MODE_EFFICIENCY ? DECIDE_FORWARD : DECIDE_UNAVAILABLE;
    }
    return DECIDE_ACCEPT;
}

/* Higher acts first. */
static int
rank(enum decision d)
{
    switch (d) {
    case DECIDE_INVALID:
        return 7;
    case DECIDE_FORBIDDEN:
        return 6;
    case DECIDE_MISSING:
        return 5;
    case DECIDE_STALE:
        return 4;
    case DECIDE_UNAVAILABLE:
        return 3;
    case DECIDE_RAISE:
        return 2;
    case DECIDE_ACCEPT:
        return 1;
    default:
        return 0;
    }
}

enum decision
decide_pair(enum decision a, enum decision b)
{
    return rank(b) > rank(a) ? b : a;
}

struct carry_verdict
decide_carried(enum carry_state st, bool has_token)
{
    static const struct carry_verdict token = {
        400, "token-on-carried-route",
        "this route's writes carry the lease's fence, added by tidemark: "
        "send them without a fencing token"};
    static const struct carry_verdict refuse[CARRY_NSTATES] = {
        [CARRY_STARTING] = {503, "lease-starting",
                            "this sidecar has not learnt yet whether it "
                            "holds the lease; try again"},
        [CARRY_STANDBY] = {503, "not-leader",
                           "another replica holds the lease: this one is "
                           "on standby and does not write"},
        [CARRY_LOST] = {503, "lease-lost",
                        "this sidecar's lease has ended (a renewal failed "
                        "or its TTL ran out): writes wait until it is won "
                        "again"},
    };

    if (has_token) {
        return token;
    }
    if (st == CARRY_HOLDING) {
        return (struct carry_verdict){0, NULL, NULL};
    }
    return refuse[st < CARRY_NSTATES ? st : CARRY_STARTING];
}
