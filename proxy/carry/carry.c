/* carry.c: the carriers of the [lease] (and [follow]) sections: the
 * state each kind reports, the scope mark raised before a win counts,
 * and what the data path, the control port, /readyz and /metrics see. */
#include "carry.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "../../conf/cfg.h"
#include "../clients/dial.h"
#include "../json.h"
#include "../log.h"
#include "../metrics.h"
#include "../recent.h"
#include "../store/fence.h"

struct carrier {
    struct carriers *set;
    const struct carry_kind *kind;
    void *impl;
    char *name;
    bool ready; /* ready = yes */
    enum carry_state state;
    int64_t fence;    /* holding: ours; standby: the holder's (0: unknown) */
    int64_t until_ms; /* holding: on dial_now_ms's clock; 0: no end */
    int64_t since_wall;
    uint64_t changes;
    char holder[128]; /* as told, "" none */
    char why[128];    /* starting: the last reason logged */
    /* The scope mark: raised to want before a win counts. */
    int64_t raised;     /* the fence the scope mark is known to hold */
    int64_t want;       /* the fence being raised; 0: none */
    int64_t want_until; /* its until_ms */
    struct fence_call *raise;
    size_t scope_len;
    char scope[128]; /* "KIND/NAME" */
};

struct carriers {
    struct carry_env env;
    struct carrier *c;
    size_t n;
    size_t stopping; /* carriers still giving back, plus one while
                      * carriers_stop runs */
    void (*stopped)(void *arg);
    void *stopped_arg;
};

static const char *const state_names[CARRY_NSTATES] = {"starting", "holding",
                                                       "standby", "lost"};

const char *
carry_state_name(enum carry_state st)
{
    return st < CARRY_NSTATES ? state_names[st] : "-";
}

const char *
carry_name(const struct carrier *c)
{
    return c->name;
}

const char *
carry_scope(const struct carrier *c, size_t *len)
{
    *len = c->scope_len;
    return c->scope;
}

/* The holder's name as told (cut to fit; escaped where it is shown);
 * NULL: none known. */
static void
set_holder(struct carrier *c, const char *holder)
{
    snprintf(c->holder, sizeof(c->holder), "%s", holder != NULL ? holder : "");
}

/* Enter st with fence, logging why. */
static void
set_state(struct carrier *c, enum carry_state st, int64_t fence,
          const char *why)
{
    if (c->state == st && c->fence == fence) {
        return;
    }
    c->state = st;
    c->fence = fence;
    c->since_wall = recent_now_ms();
    c->changes++;
    if (st == CARRY_HOLDING) {
        log_info("%s %s: holding with fence %" PRId64
                 ": the scope mark %s is raised; writes on its routes carry "
                 "this fence",
                 c->kind->name, c->name, fence, c->scope);
    } else if (st == CARRY_LOST) {
        log_warn("%s %s: lost (fence %" PRId64 "): %s: writes on its routes "
                 "are refused until it is won again",
                 c->kind->name, c->name, fence, LOG_STR(why));
    } else {
        log_info("%s %s: %s (holder's fence %" PRId64 "): %s", c->kind->name,
                 c->name, state_names[st], fence, LOG_STR(why));
    }
}

static void
scope_raised(void *arg, enum store_result res, int64_t mark)
{
    struct carrier *c = arg;
    int64_t want = c->want;

    c->raise = NULL;
    c->want = 0;
    if (res == STORE_ACCEPTED) {
        c->raised = want;
        c->until_ms = c->want_until;
        set_state(c, CARRY_HOLDING, want, NULL);
        return;
    }
    if (res == STORE_STALE) {
        char why[160];

        snprintf(why, sizeof(why),
                 "the scope mark %" PRId64 " is above its fence %" PRId64
                 ": a later holder has won",
                 mark, want);
        carry_lost(c, why);
        return;
    }
    log_error("%s %s: the mark store cannot raise the scope mark %s to "
              "fence %" PRId64 ": not holding until it can",
              c->kind->name, c->name, c->scope, want);
}

void
carry_won(struct carrier *c, int64_t fence, int64_t until_ms,
          const char *holder)
{
    if (fence <= 0) {
        return;
    }
    if (c->state == CARRY_HOLDING && c->fence == fence) {
        c->until_ms = until_ms;
        return;
    }
    set_holder(c, holder);
    if (c->raised == fence) {
        c->until_ms = until_ms;
        set_state(c, CARRY_HOLDING, fence, NULL);
        return;
    }
    c->want_until = until_ms;
    if (c->raise != NULL && c->want == fence) {
        return; /* on its way */
    }
    if (c->raise != NULL) {
        fence_cancel(c->raise);
    }
    c->want = fence;
    c->raise = fence_raise(c->set->env.fence, c->scope, c->scope_len, fence,
                           scope_raised, c);
    if (c->raise == NULL) {
        c->want = 0;
        log_error("%s %s: out of memory: the scope mark is not raised",
                  c->kind->name, c->name);
    }
}

/* Stop waiting for a scope raise: the win it was for is over. */
static void
drop_raise(struct carrier *c)
{
    if (c->raise != NULL) {
        fence_cancel(c->raise);
        c->raise = NULL;
    }
    c->want = 0;
}

void
carry_standby(struct carrier *c, int64_t fence, const char *holder,
              const char *why)
{
    drop_raise(c);
    c->until_ms = 0;
    set_holder(c, holder);
    set_state(c, CARRY_STANDBY, fence > 0 ? fence : 0, why);
}

void
carry_lost(struct carrier *c, const char *why)
{
    drop_raise(c);
    c->until_ms = 0;
    if (c->state == CARRY_STARTING) {
        /* Once per reason, not once per try. */
        if (strncmp(c->why, why, sizeof(c->why) - 1) != 0) {
            snprintf(c->why, sizeof(c->why), "%s", why);
            log_warn("%s %s: not decided yet: %s: writes on its routes are "
                     "refused (lease-starting)",
                     c->kind->name, c->name, LOG_STR(why));
        }
        return;
    }
    set_holder(c, NULL);
    set_state(c, CARRY_LOST,
              c->state == CARRY_HOLDING || c->state == CARRY_LOST ? c->fence
                                                                  : 0,
              why);
}

enum carry_state
carry_now(struct carrier *c, int64_t *fence)
{
    *fence = 0;
    if (c->state == CARRY_HOLDING && c->until_ms > 0 &&
        dial_now_ms() >= c->until_ms) {
        carry_lost(c, "its TTL (less margin_ms) ran out on this process's "
                      "clock before a "
                      "renewal was answered");
    }
    if (c->state == CARRY_HOLDING) {
        *fence = c->fence;
    }
    return c->state;
}

/* ---- the set ----------------------------------------------------------- */

/* Add a carrier of kind for section name (cfg: its struct). */
static bool
add(struct carriers *set, const struct carry_kind *kind, const char *name,
    const void *cfg, bool ready, char *err, size_t errlen)
{
    struct carrier *c = &set->c[set->n];
    int n = snprintf(c->scope, sizeof(c->scope), "%s/%s", kind->name, name);

    c->set = set;
    c->kind = kind;
    c->ready = ready;
    c->since_wall = recent_now_ms();
    c->name = strdup(name);
    if (c->name == NULL || n < 0 || (size_t)n >= sizeof(c->scope)) {
        free(c->name);
        snprintf(err, errlen, "%s %s: out of memory or name too long",
                 kind->name, name);
        return false;
    }
    c->scope_len = (size_t)n;
    set->n++;
    c->impl = kind->open(&set->env, c, cfg, err, errlen);
    return c->impl != NULL;
}

struct carriers *
carriers_new(const struct carry_env *env, const struct tm_config *cfg,
             char *err, size_t errlen)
{
    struct carriers *set = calloc(1, sizeof(*set));
    size_t total = cfg->nleases + cfg->nfollows;

    if (set == NULL || (set->c = calloc(total + 1, sizeof(*set->c))) == NULL) {
        free(set);
        snprintf(err, errlen, "carriers: out of memory");
        return NULL;
    }
    set->env = *env;
    for (size_t i = 0; i < cfg->nleases; i++) {
        const struct cfg_lease *l = &cfg->leases[i];

        if (!add(set, &carry_lease_kind, l->name, l, l->ready, err, errlen)) {
            carriers_free(set);
            return NULL;
        }
    }
    for (size_t i = 0; i < cfg->nfollows; i++) {
        const struct cfg_follow *f = &cfg->follows[i];

        if (!add(set, &carry_follow_kind, f->name, f, f->ready, err, errlen)) {
            carriers_free(set);
            return NULL;
        }
    }
    return set;
}

void
carriers_free(struct carriers *set)
{
    if (set == NULL) {
        return;
    }
    for (size_t i = 0; i < set->n; i++) {
        struct carrier *c = &set->c[i];

        if (c->impl != NULL) {
            c->kind->close(c->impl);
        }
        drop_raise(c);
        free(c->name);
    }
    free(set->c);
    free(set);
}

/* One carrier has given back what it held. */
static void
one_stopped(void *arg)
{
    struct carriers *set = arg;
    void (*done)(void *) = set->stopped;

    if (set->stopping == 0 || --set->stopping > 0 || done == NULL) {
        return;
    }
    set->stopped = NULL;
    done(set->stopped_arg);
}

void
carriers_stop(struct carriers *set, void (*done)(void *arg), void *arg)
{
    set->stopped = done;
    set->stopped_arg = arg;
    set->stopping = set->n + 1;
    for (size_t i = 0; i < set->n; i++) {
        struct carrier *c = &set->c[i];

        if (c->kind->stop != NULL && c->impl != NULL) {
            c->kind->stop(c->impl, one_stopped, set);
        } else {
            one_stopped(set);
        }
    }
    one_stopped(set);
}

struct carrier *
carry_find(struct carriers *set, const char *name)
{
    for (size_t i = 0; set != NULL && name != NULL && i < set->n; i++) {
        if (strcmp(set->c[i].name, name) == 0) {
            return &set->c[i];
        }
    }
    return NULL;
}

bool
carriers_ready(struct carriers *set)
{
    int64_t fence;

    for (size_t i = 0; set != NULL && i < set->n; i++) {
        if (set->c[i].ready && carry_now(&set->c[i], &fence) != CARRY_HOLDING) {
            return false;
        }
    }
    return true;
}

void
carriers_describe(struct carriers *set, struct evbuffer *out)
{
    int64_t fence;

    for (size_t i = 0; set != NULL && i < set->n; i++) {
        struct carrier *c = &set->c[i];
        enum carry_state st = carry_now(c, &fence);

        evbuffer_add_printf(out, "\n%s %s: %s", c->kind->name, c->name,
                            state_names[st]);
        if (c->fence > 0) {
            evbuffer_add_printf(out, " fence %" PRId64, c->fence);
        }
        if (!c->ready) {
            evbuffer_add_printf(out, " (not required)");
        }
    }
}

void
carry_json(struct carrier *c, struct evbuffer *out)
{
    int64_t fence;
    enum carry_state st = carry_now(c, &fence);

    evbuffer_add_printf(out, "{\"name\":\"");
    json_escape(out, c->name, strlen(c->name));
    evbuffer_add_printf(out, "\",\"kind\":\"%s\",\"state\":\"%s\",",
                        c->kind->name, state_names[st]);
    if (c->fence > 0) {
        evbuffer_add_printf(out, "\"fence\":%" PRId64 ",", c->fence);
    } else {
        evbuffer_add_printf(out, "\"fence\":null,");
    }
    if (c->holder[0] != '\0') {
        evbuffer_add_printf(out, "\"holder\":\"");
        json_escape(out, c->holder, strlen(c->holder));
        evbuffer_add_printf(out, "\",");
    } else {
        evbuffer_add_printf(out, "\"holder\":null,");
    }
    evbuffer_add_printf(out, "\"scope\":\"");
    json_escape(out, c->scope, c->scope_len);
    evbuffer_add_printf(out, "\",\"since_ms\":%" PRId64 "}", c->since_wall);
}

void
carriers_json(struct carriers *set, struct evbuffer *out)
{
    evbuffer_add(out, "[", 1);
    for (size_t i = 0; set != NULL && i < set->n; i++) {
        if (i > 0) {
            evbuffer_add(out, ",", 1);
        }
        carry_json(&set->c[i], out);
    }
    evbuffer_add(out, "]", 1);
}

void
carriers_metrics(struct carriers *set, struct evbuffer *out)
{
    int64_t fence;

    if (set == NULL || set->n == 0) {
        return;
    }
    metrics_head(out, MID_tidemark_carrier_state);
    for (size_t i = 0; i < set->n; i++) {
        enum carry_state now = carry_now(&set->c[i], &fence);

        for (int st = 0; st < CARRY_NSTATES; st++) {
            metrics_sample(
                out, MID_tidemark_carrier_state, now == (enum carry_state)st,
                "carrier=\"%s\",state=\"%s\"", set->c[i].name, state_names[st]);
        }
    }
    metrics_head(out, MID_tidemark_carrier_changes_total);
    for (size_t i = 0; i < set->n; i++) {
        metrics_sample(out, MID_tidemark_carrier_changes_total,
                       (double)set->c[i].changes, "carrier=\"%s\"",
                       set->c[i].name);
    }
}
