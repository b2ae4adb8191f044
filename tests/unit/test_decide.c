/* test_decide.c: the decision table of doc/design.md's "Modes", row by row,
 * before the store (decide_request) and after it (decide_store). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../policies/decide.h"

#define C TM_MODE_CORRECTNESS
#define E TM_MODE_EFFICIENCY
#define O TM_MODE_OFF

struct request_case {
    enum tm_mode mode;
    enum token_status ts;
    int64_t token;
    int64_t cached;
    enum decision want;
};

static const struct request_case request_cases[] = {
    /* off: everything goes through, whatever the token. */
    {O, TOKEN_MISSING, 0, 0, DECIDE_FORWARD},
    {O, TOKEN_INVALID, 0, 0, DECIDE_FORWARD},
    {O, TOKEN_OK, 3, 10, DECIDE_FORWARD},
    {O, TOKEN_OK, 10, 10, DECIDE_FORWARD},
    {O, TOKEN_OK, 11, 10, DECIDE_FORWARD},
    /* token missing: 428 on correctness, forwarded on efficiency. */
    {C, TOKEN_MISSING, 0, 0, DECIDE_MISSING},
    {C, TOKEN_MISSING, 0, 10, DECIDE_MISSING},
    {E, TOKEN_MISSING, 0, 0, DECIDE_FORWARD},
    {E, TOKEN_MISSING, 0, 10, DECIDE_FORWARD},
    /* malformed: 400 wherever tokens are checked. */
    {C, TOKEN_INVALID, 0, 0, DECIDE_INVALID},
    {E, TOKEN_INVALID, 0, 10, DECIDE_INVALID},
    /* unsigned, forged or borrowed (verify = hmac): 403, never raised,
     * even above the mark; off still forwards. */
    {C, TOKEN_FORBIDDEN, 0, 0, DECIDE_FORBIDDEN},
    {E, TOKEN_FORBIDDEN, 0, 10, DECIDE_FORBIDDEN},
    {O, TOKEN_FORBIDDEN, 0, 10, DECIDE_FORWARD},
    /* below the cached mark: stale without asking the store. */
    {C, TOKEN_OK, 9, 10, DECIDE_STALE},
    {E, TOKEN_OK, 9, 10, DECIDE_STALE},
    {C, TOKEN_OK, 1, INT64_MAX, DECIDE_STALE},
    /* equal to a known mark: durable already, no write. */
    {C, TOKEN_OK, 10, 10, DECIDE_ACCEPT},
    {E, TOKEN_OK, 10, 10, DECIDE_ACCEPT},
    {C, TOKEN_OK, INT64_MAX, INT64_MAX, DECIDE_ACCEPT},
    /* above, or nothing known: the store decides. */
    {C, TOKEN_OK, 11, 10, DECIDE_RAISE},
    {E, TOKEN_OK, 11, 10, DECIDE_RAISE},
    {C, TOKEN_OK, 1, 0, DECIDE_RAISE},
    {E, TOKEN_OK, 1, 0, DECIDE_RAISE},
    {C, TOKEN_OK, INT64_MAX, 0, DECIDE_RAISE},
};

struct store_case {
    enum tm_mode mode;
    bool store_ok;
    bool stale;
    enum decision want;
};

static const struct store_case store_cases[] = {
    {C, true, false, DECIDE_ACCEPT},
    {E, true, false, DECIDE_ACCEPT},
    {C, true, true, DECIDE_STALE},
    {E, true, true, DECIDE_STALE},
    /* store down: 503 on correctness, never forwarded; efficiency goes. */
    {C, false, false, DECIDE_UNAVAILABLE},
    {E, false, false, DECIDE_FORWARD},
    /* off never asks the store; if it did, it would still forward. */
    {O, false, false, DECIDE_FORWARD},
    {O, true, true, DECIDE_FORWARD},
};

static void
test_request(void **state)
{
    for (size_t i = 0; i < sizeof(request_cases) / sizeof(request_cases[0]);
         i++) {
        const struct request_case *c = &request_cases[i];
        enum decision got = decide_request(c->mode, c->ts, c->token, c->cached);

        if (got != c->want) {
            fail_msg("row %zu: mode %d ts %d token %lld cached %lld: got "
                     "%d, want %d",
                     i, (int)c->mode, (int)c->ts, (long long)c->token,
                     (long long)c->cached, (int)got, (int)c->want);
        }
    }
}

static void
test_store(void **state)
{
    for (size_t i = 0; i < sizeof(store_cases) / sizeof(store_cases[0]); i++) {
        const struct store_case *c = &store_cases[i];
        enum decision got = decide_store(c->mode, c->store_ok, c->stale);

        if (got != c->want) {
            fail_msg("row %zu: mode %d ok %d stale %d: got %d, want %d", i,
                     (int)c->mode, c->store_ok, c->stale, (int)got,
                     (int)c->want);
        }
    }
}

/* Two resources: a refusal of either wins; a raise of either means the
 * store must be asked; both accepted (or both forwarded) go on. */
static void
test_pair(void **state)
{
    static const struct {
        enum decision a, b, want;
    } rows[] = {
        {DECIDE_ACCEPT, DECIDE_ACCEPT, DECIDE_ACCEPT},
        {DECIDE_ACCEPT, DECIDE_RAISE, DECIDE_RAISE},
        {DECIDE_RAISE, DECIDE_ACCEPT, DECIDE_RAISE},
        {DECIDE_RAISE, DECIDE_STALE, DECIDE_STALE},
        {DECIDE_STALE, DECIDE_RAISE, DECIDE_STALE},
        {DECIDE_ACCEPT, DECIDE_STALE, DECIDE_STALE},
        {DECIDE_STALE, DECIDE_STALE, DECIDE_STALE},
        {DECIDE_FORWARD, DECIDE_FORWARD, DECIDE_FORWARD},
        {DECIDE_FORWARD, DECIDE_MISSING, DECIDE_MISSING},
        {DECIDE_MISSING, DECIDE_FORWARD, DECIDE_MISSING},
        {DECIDE_FORBIDDEN, DECIDE_RAISE, DECIDE_FORBIDDEN},
        {DECIDE_RAISE, DECIDE_FORBIDDEN, DECIDE_FORBIDDEN},
        {DECIDE_STALE, DECIDE_FORBIDDEN, DECIDE_FORBIDDEN},
        {DECIDE_INVALID, DECIDE_INVALID, DECIDE_INVALID},
        {DECIDE_UNAVAILABLE, DECIDE_RAISE, DECIDE_UNAVAILABLE},
        {DECIDE_STALE, DECIDE_UNAVAILABLE, DECIDE_STALE},
    };

    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        enum decision got = decide_pair(rows[i].a, rows[i].b);

        if (got != rows[i].want) {
            fail_msg("row %zu: %d + %d: got %d, want %d", i, (int)rows[i].a,
                     (int)rows[i].b, (int)got, (int)rows[i].want);
        }
    }
}

/* A write on a route bound to a carrier: its fence only while holding
 * and the write brings no token of its own. */
static void
test_carried(void **state)
{
    static const struct {
        enum carry_state st;
        bool token;
        int status;
        const char *kind;
    } rows[] = {
        {CARRY_HOLDING, false, 0, NULL},
        {CARRY_HOLDING, true, 400, "token-on-carried-route"},
        {CARRY_STANDBY, false, 503, "not-leader"},
        {CARRY_STANDBY, true, 400, "token-on-carried-route"},
        {CARRY_LOST, false, 503, "lease-lost"},
        {CARRY_STARTING, false, 503, "lease-starting"},
        {CARRY_NSTATES, false, 503, "lease-starting"},
    };

    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct carry_verdict v = decide_carried(rows[i].st, rows[i].token);

        assert_int_equal(v.status, rows[i].status);
        if (rows[i].kind == NULL) {
            assert_null(v.kind);
        } else {
            assert_string_equal(v.kind, rows[i].kind);
            assert_non_null(v.detail);
        }
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request),
        cmocka_unit_test(test_store),
        cmocka_unit_test(test_pair),
        cmocka_unit_test(test_carried),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
