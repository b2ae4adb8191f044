/* decide.c: the decision table of DESIGN.md's "Modes", as two pure
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
