/* lease.c: the lease kind of carrier: a [lease NAME] section held by
 * this sidecar through the lock service's backend. It takes the lock
 * (its floor the scope mark plus one), renews it every renew_ms, and
 * reports to its carrier: won with the lease's end on this process's
 * clock (counted from when the request was sent, so it never ends later
 * here than in the backend), standby while another holds it, lost when
 * a renewal fails. A standby tries again every renew_ms, or when the
 * holder's lease ends if sooner. With health_url, it renews (and tries)
 * only while the application answers 2xx there; a failed probe gives
 * the lease back at once. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/http.h>

#include "../../conf/cfg.h"
#include "../clients/dial.h"
#include "../locks/lock.h"
#include "../locks/service.h"
#include "../log.h"
#include "../store/fence.h"
#include "carry.h"

/* After a failure (the backend, the store), the next try comes this
 * soon at most. */
#define LEASE_RETRY_MS 500
/* What the application's health answer may send before its status and
 * headers end; its body is never read. */
#define LEASE_HEAD_MAX (16 << 10)

struct lease {
    struct carrier *c;
    const struct cfg_lease *cfg;
    struct carry_env env;
    struct event *timer;
    int64_t fence;   /* the lease held or last held; 0: none to renew */
    int64_t sent_ms; /* when the operation in flight was sent */
    bool busy;       /* an operation (or a probe) is in flight */
    bool probing;    /* what is in flight is a health probe */
    bool closed;     /* close ran while busy: the last callback frees */
    void (*stopped)(void *arg); /* stopping: called once given back */
    void *stopped_arg;
    bool stopping;
    /* health_url */
    struct evhttp_connection *hc;
    int probe_code; /* the status the probe's answer gave; 0: none yet */
    struct evhttp_request *probe_req; /* the probe in flight, until its
                                       * deadline (timer, while probing) */
    char *host_header;
    char *path;
    char self[96]; /* the holder's name: "host:pid" */
};

static void tick(struct lease *l);

static void
free_lease(struct lease *l)
{
    if (l->timer != NULL) {
        event_free(l->timer);
    }
    if (l->hc != NULL) {
        evhttp_connection_free(l->hc);
    }
    free(l->host_header);
    free(l->path);
    free(l);
}

/* An answer came: false when the lease was closed meanwhile (it is
 * freed now). */
static bool
landed(struct lease *l)
{
    int64_t fence;

    l->busy = false;
    if (l->closed) {
        free_lease(l);
        return false;
    }
    lib_enter(l->env.log);
    /* A process that was paused past its lease's end finds it lost by
     * its own clock first, whatever the answer then says. */
    carry_now(l->c, &fence);
    return true;
}

static void give_back(struct lease *l);

/* The next step in ms; stopping, the lease is given back instead. */
static void
again_in(struct lease *l, int64_t ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};

    if (l->stopping) {
        give_back(l);
        return;
    }
    evtimer_add(l->timer, &tv);
}

static int64_t
retry_ms(const struct lease *l)
{
    return l->cfg->renew_ms < LEASE_RETRY_MS ? l->cfg->renew_ms
                                             : LEASE_RETRY_MS;
}

/* ---- the lock ------------------------------------------------------------ */

static void
submit(struct lease *l, enum lock_kind kind, int64_t min_fence, lock_cb cb)
{
    struct lock_op op = {.kind = kind,
                         .name = l->cfg->lock,
                         .len = strlen(l->cfg->lock),
                         .ttl_ms = l->cfg->ttl_ms,
                         .fence = l->fence,
                         .min_fence = min_fence,
                         .cb = cb,
                         .arg = l};

    l->busy = true;
    l->sent_ms = dial_now_ms();
    lock_service_submit(l->env.locks, &op);
}

/* How much sooner than the TTL granted the lease may end for another
 * holder (CFG_ETCD_LEASE_EARLY_MS). */
static int64_t
early_ms(const struct lease *l)
{
    const char *b = l->env.lock_backend;

    return b != NULL && strcmp(b, "etcd") == 0 ? CFG_ETCD_LEASE_EARLY_MS : 0;
}

/* Held with l->fence for ttl_ms from when it was asked, less what the
 * backend may cut short and the margin a write needs (margin_ms, set at
 * load so that a renewal comes before it): the carrier's end is when
 * writes stop. */
static void
held(struct lease *l, int64_t ttl_ms)
{
    int64_t left = ttl_ms - early_ms(l) - l->cfg->margin_ms;

    carry_won(l->c, l->fence, l->sent_ms + (left > 0 ? left : 1), l->self);
    again_in(l, l->cfg->renew_ms);
}

static void
acquired(void *arg, enum lock_result res, int64_t fence, int64_t ttl_ms)
{
    struct lease *l = arg;

    if (!landed(l)) {
        return;
    }
    if (res == LOCK_OK) {
        l->fence = fence;
        held(l, ttl_ms);
    } else if (res == LOCK_BUSY) {
        carry_standby(l->c, fence, NULL, "another holder's lease is live");
        /* Its lease ends in ttl_ms unless renewed: try then. */
        again_in(l, ttl_ms > 0 && ttl_ms < l->cfg->renew_ms ? ttl_ms + 1
                                                            : l->cfg->renew_ms);
    } else {
        carry_lost(l->c, "the lock backend cannot be used");
        again_in(l, retry_ms(l));
    }
}

static void
floor_read(void *arg, enum store_result res, int64_t mark)
{
    struct lease *l = arg;

    if (!landed(l)) {
        return;
    }
    if (res != STORE_ACCEPTED) {
        carry_lost(l->c, "the mark store cannot read the scope mark");
        again_in(l, retry_ms(l));
        return;
    }
    /* A fence at or below the scope mark would be refused: start
     * above it, whatever the backend's counter says. */
    submit(l, LOCK_OP_ACQUIRE, mark < INT64_MAX ? mark + 1 : 0, acquired);
}

static void
try_win(struct lease *l)
{
    size_t len;
    const char *scope = carry_scope(l->c, &len);

    l->busy = true;
    if (!fence_get(l->env.fence, scope, len, floor_read, l)) {
        l->busy = false;
        carry_lost(l->c, "out of memory");
        again_in(l, retry_ms(l));
    }
}

static void
extended(void *arg, enum lock_result res, int64_t fence, int64_t ttl_ms)
{
    struct lease *l = arg;

    (void)fence;
    if (!landed(l)) {
        return;
    }
    if (res == LOCK_OK) {
        held(l, ttl_ms);
        return;
    }
    if (res == LOCK_LOST) {
        /* Ended in the backend (expired, taken): a new lease needs a
         * new fence. */
        carry_lost(l->c, "the lock backend says the lease has ended");
        l->fence = 0;
        tick(l);
        return;
    }
    /* The lease may still be ours: the next try renews it, which the
     * backend grants only while no one else has held it. */
    carry_lost(l->c, "a renewal failed: the lock backend cannot be used");
    again_in(l, retry_ms(l));
}

static void
released(void *arg, enum lock_result res, int64_t fence, int64_t ttl_ms)
{
    struct lease *l = arg;

    (void)res;
    (void)fence;
    (void)ttl_ms;
    if (!landed(l)) {
        return;
    }
    again_in(l, l->cfg->renew_ms);
}

/* Renew the lease held, or try to win one. */
static void
step(struct lease *l)
{
    if (l->stopping) {
        give_back(l); /* a probe answered after the stop began */
        return;
    }
    if (l->fence > 0) {
        submit(l, LOCK_OP_EXTEND, 0, extended);
    } else {
        try_win(l);
    }
}

/* ---- health_url ---------------------------------------------------------- */

/* The application does not answer: give the lease up now (a standby
 * takes it without waiting for the TTL), and try nothing until it does. */
static void
unhealthy(struct lease *l, int code)
{
    char why[128];

    if (code > 0) {
        snprintf(why, sizeof(why),
                 "the application's health_url answered %d, not 2xx: the "
                 "lease is given up",
                 code);
    } else {
        snprintf(why, sizeof(why),
                 "the application's health_url did not answer within %d "
                 "ms: the lease is given up",
                 l->cfg->renew_ms / 2 > 0 ? l->cfg->renew_ms / 2 : 1);
    }
    if (l->fence == 0) {
        log_debug("lease %s: %s", carry_name(l->c), why);
        again_in(l, l->cfg->renew_ms);
        return;
    }
    carry_lost(l->c, why);
    submit(l, LOCK_OP_RELEASE, 0, released);
    l->fence = 0;
}

/* The probe's answer has its status: all a probe needs. Its body is not
 * read (evhttp is told to stop, and answers the request NULL): a body
 * however long, or however slow, neither holds memory nor holds the
 * lease's renewals back. */
static int
probe_head(struct evhttp_request *req, void *arg)
{
    ((struct lease *)arg)->probe_code = evhttp_request_get_response_code(req);
    return -1;
}

static void
probed(struct evhttp_request *req, void *arg)
{
    struct lease *l = arg;
    int code =
        req != NULL ? evhttp_request_get_response_code(req) : l->probe_code;

    l->probe_req = NULL;
    evtimer_del(l->timer);

    l->probing = false;
    if (!landed(l)) {
        return;
    }
    if (code >= 200 && code <= 299) {
        step(l);
    } else {
        unhealthy(l, code);
    }
}

static void
probe(struct lease *l)
{
    struct evhttp_request *req = evhttp_request_new(probed, l);

    if (req == NULL) {
        unhealthy(l, 0);
        return;
    }
    evhttp_request_set_header_cb(req, probe_head);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Host",
                      l->host_header);
    l->probe_code = 0;
    l->busy = true;
    l->probing = true;
    if (evhttp_make_request(l->hc, req, EVHTTP_REQ_GET, l->path) != 0) {
        l->busy = false; /* req is freed by libevent */
        l->probing = false;
        unhealthy(l, 0);
        return;
    }
    /* The connection's timeout starts again with every byte: a status
     * line that trickles in is ended here, as a silent one is there. */
    l->probe_req = req;
    again_in(l, l->cfg->renew_ms / 2 > 0 ? l->cfg->renew_ms / 2 : 1);
}

/* The connection for health_url (checked by the config: http, a port). */
static bool
open_health(struct lease *l, char *err, size_t errlen)
{
    struct evhttp_uri *u = evhttp_uri_parse(l->cfg->health_url);
    const char *host = u != NULL ? evhttp_uri_get_host(u) : NULL;
    int port = u != NULL ? evhttp_uri_get_port(u) : -1;
    const char *path = u != NULL ? evhttp_uri_get_path(u) : NULL;
    const char *query = u != NULL ? evhttp_uri_get_query(u) : NULL;
    size_t n;
    bool ok = false;

    if (host != NULL && port > 0) {
        int64_t t = l->cfg->renew_ms / 2 > 0 ? l->cfg->renew_ms / 2 : 1;
        struct timeval tv = {(time_t)(t / 1000),
                             (suseconds_t)(t % 1000) * 1000};

        n = strlen(host) + 8;
        l->host_header = malloc(n);
        path = path != NULL && path[0] != '\0' ? path : "/";
        l->path =
            malloc(strlen(path) + (query != NULL ? strlen(query) : 0) + 2);
        l->hc = evhttp_connection_base_new(l->env.base, NULL, host,
                                           (unsigned short)port);
        if (l->host_header != NULL && l->path != NULL && l->hc != NULL) {
            snprintf(l->host_header, n, "%s:%d", host, port);
            sprintf(l->path, "%s%s%s", path, query != NULL ? "?" : "",
                    query != NULL ? query : "");
            evhttp_connection_set_timeout_tv(l->hc, &tv);
            evhttp_connection_set_retries(l->hc, 0);
            evhttp_connection_set_max_headers_size(l->hc, LEASE_HEAD_MAX);
            ok = true;
        }
    }
    if (u != NULL) {
        evhttp_uri_free(u);
    }
    if (!ok) {
        snprintf(err, errlen, "lease %s: cannot use health_url %s",
                 carry_name(l->c), l->cfg->health_url);
    }
    return ok;
}

/* ---- the kind ------------------------------------------------------------ */

static void
tick(struct lease *l)
{
    int64_t fence;

    if (l->busy) {
        return;
    }
    if (l->stopping) {
        give_back(l);
        return;
    }
    carry_now(l->c, &fence); /* as landed */
    if (l->hc != NULL) {
        probe(l);
    } else {
        step(l);
    }
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct lease *l = arg;

    (void)fd;
    (void)what;
    lib_enter(l->env.log);
    if (l->probe_req != NULL) {
        /* The probe's deadline: canceled, evhttp calls nothing back. */
        evhttp_cancel_request(l->probe_req);
        l->probe_req = NULL;
        l->probe_code = 0;
        probed(NULL, l);
        return;
    }
    tick(l);
}

/* Stopping: release the lease held (its answer comes back here through
 * again_in), then tell the set. */
static void
give_back(struct lease *l)
{
    void (*done)(void *) = l->stopped;

    if (l->fence > 0) {
        carry_lost(l->c, "stopping: the lease is given back");
        submit(l, LOCK_OP_RELEASE, 0, released);
        l->fence = 0;
        return;
    }
    l->stopped = NULL;
    if (done != NULL) {
        done(l->stopped_arg);
    }
}

static void
lease_stop(void *impl, void (*done)(void *arg), void *arg)
{
    struct lease *l = impl;

    l->stopping = true;
    l->stopped = done;
    l->stopped_arg = arg;
    if (l->probe_req == NULL) {
        evtimer_del(l->timer); /* else the probe's deadline, kept */
    }
    if (!l->busy) {
        give_back(l);
    }
}

static void *
lease_open(const struct carry_env *env, struct carrier *c, const void *cfg,
           char *err, size_t errlen)
{
    struct lease *l = calloc(1, sizeof(*l));
    char host[64] = "?";

    if (env->locks == NULL) {
        snprintf(err, errlen, "lease %s: no lock backend is open",
                 carry_name(c));
        free(l);
        return NULL;
    }
    if (l == NULL || (l->timer = evtimer_new(env->base, timer_cb, l)) == NULL) {
        snprintf(err, errlen, "lease %s: out of memory", carry_name(c));
        free(l);
        return NULL;
    }
    l->c = c;
    l->cfg = cfg;
    l->env = *env;
    gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    snprintf(l->self, sizeof(l->self), "%s:%ld", host, (long)getpid());
    if (l->cfg->health_url != NULL && !open_health(l, err, errlen)) {
        free_lease(l);
        return NULL;
    }
    log_info("lease %s: lock %s, ttl %d ms, renewed every %d ms, writes "
             "stop %d ms before its end%s%s",
             carry_name(c), LOG_STR(l->cfg->lock), l->cfg->ttl_ms,
             l->cfg->renew_ms, l->cfg->margin_ms,
             l->hc != NULL ? " while the application is healthy at " : "",
             l->hc != NULL ? LOG_STR(l->cfg->health_url) : "");
    again_in(l, 0);
    return l;
}

static void
lease_close(void *impl)
{
    struct lease *l = impl;

    evtimer_del(l->timer);
    if (l->probing) {
        /* Freeing the connection drops the probe without its
         * callback. */
        free_lease(l);
        return;
    }
    if (l->busy) {
        l->closed = true; /* the answer in flight frees it */
        return;
    }
    if (l->fence > 0) {
        /* Stopping: give the lease back so a standby need not wait for
         * its TTL. Best effort: the backend closes next. */
        l->closed = true;
        submit(l, LOCK_OP_RELEASE, 0, released);
        return;
    }
    free_lease(l);
}

const struct carry_kind carry_lease_kind = {
    .name = "lease",
    .open = lease_open,
    .stop = lease_stop,
    .close = lease_close,
};
