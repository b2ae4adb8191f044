/* proxy.c: the proxy's life cycle: open the store, resolve upstreams,
 * listen, accept within the connection cap, drain and stop. */
#include "tidemark.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "../conf/cfg.h"
#include "../policies/screen.h"
#include "adm/adm.h"
#include "carry/carry.h"
#include "fdlimit.h"
#include "listen_unix.h"
#include "locks/service.h"
#include "locks/watch.h"
#include "log.h"
#include "metrics.h"
#include "path/conn.h"
#include "path/gen.h"
#include "path/order.h"
#include "path/up.h"
#include "path/uploads.h"
#include "proxy_int.h"
#include "store/fence.h"
#include "store/store.h"

/* After a burst of connections has gone (the count fell by 1024 or more
 * to a quarter of its peak), give the freed memory back to the system:
 * glibc only trims the top of the heap by itself, and keeps freed pages
 * below a live allocation. (libevent's slot per descriptor ever used
 * would pin one page per connection; the daemon keeps those out of the
 * heap, evmem.h.) A second later, because libevent frees a closed
 * bufferevent's buffers in its own later callbacks. Measured with make
 * bench-conns. */
static void
trim_cb(evutil_socket_t fd, short what, void *arg)
{
    struct tm_proxy *px = arg;

    (void)fd;
    (void)what;
    lib_enter(&px->path.log);
#ifdef __GLIBC__
    malloc_trim(0);
#endif
    px->path.conn_peak = px->path.nclients;
}

static void
give_back_memory(struct tm_proxy *px)
{
    struct timeval later = {1, 0};

    if (px->path.conn_peak - px->path.nclients < 1024 ||
        px->path.nclients > px->path.conn_peak / 4 ||
        evtimer_pending(px->trimmer, NULL)) {
        return;
    }
    evtimer_add(px->trimmer, &later);
}

static void
carriers_gave_back(void *arg)
{
    struct tm_proxy *px = arg;

    px->carriers_stop = 2;
    event_active(px->path.reaper, EV_TIMEOUT, 1);
}

/* Draining with no client left: the leases held are given back first,
 * so that a standby takes over at once. Whether that is done. */
static bool
carriers_stopped(struct tm_proxy *px)
{
    if (px->carriers_stop == 0 && px->path.carriers != NULL) {
        px->carriers_stop = 1;
        carriers_stop(px->path.carriers, carriers_gave_back, px);
    }
    return px->path.carriers == NULL || px->carriers_stop == 2;
}

/* The drain has ended: each waiter's done once, then the hook's. */
static void
drained(struct tm_proxy *px)
{
    struct drain_waiter *w;

    while ((w = px->drain_waiters) != NULL) {
        px->drain_waiters = w->next;
        w->done(w->arg);
        free(w);
    }
    if (px->on_drained != NULL) {
        void (*done)(void *) = px->on_drained;

        px->on_drained = NULL;
        done(px->on_drained_arg);
    }
}

static void
reaper_cb(evutil_socket_t fd, short what, void *arg)
{
    struct tm_proxy *px = arg;

    (void)fd;
    (void)what;
    lib_enter(&px->path.log);
    client_reap(&px->path);
    give_back_memory(px);
    if (px->path.draining && px->path.nclients == 0 && carriers_stopped(px)) {
        drained(px);
    }
}

static void
flusher_cb(evutil_socket_t fd, short what, void *arg)
{
    struct tm_proxy *px = arg;

    (void)fd;
    (void)what;
    lib_enter(&px->path.log);
    client_flush_all(&px->path);
}

static void
accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
          int socklen, void *arg)
{
    struct tm_proxy *px = arg;

    (void)l;
    (void)sa;
    (void)socklen;
    lib_enter(&px->path.log);
    listen_rest_accepted(&px->rest);
    if (px->path.nclients >= (size_t)px->path.cfg->proxy.max_connections &&
        !client_evict_idle(&px->path)) {
        /* Every connection is busy with a request: refuse at once, a
         * connection we cannot serve should not wait. */
        static uint64_t refused;
        if (refused++ % 1000 == 0) {
            log_warn("max_connections (%d) reached: refusing connections",
                     px->path.cfg->proxy.max_connections);
        }
        evutil_closesocket(fd);
        return;
    }
    client_accept(&px->path, fd);
}

static void
accept_error_cb(struct evconnlistener *l, void *arg)
{
    struct tm_proxy *px = arg;

    (void)l;
    lib_enter(&px->path.log);
    listen_rest_error(&px->rest);
}

/* Listen on a Unix socket (listen = unix:PATH). NULL with err. */
static struct evconnlistener *
listen_on_unix(struct tm_proxy *px, const char *path, char *err, size_t errlen)
{
    const struct cfg_proxy *pc = &px->first->proxy;
    struct evconnlistener *l;
    int fd = listen_unix_open(&px->unix_sock, path, pc->listen_mode,
                              pc->listen_group, err, errlen);

    if (fd < 0) {
        return NULL;
    }
    /* Backlog 0: it listens already. */
    l = evconnlistener_new(px->path.base, accept_cb, px,
                           LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0,
                           fd);
    if (l == NULL) {
        snprintf(err, errlen, "cannot listen on unix:%s: out of memory", path);
        evutil_closesocket(fd);
        listen_unix_remove(&px->unix_sock);
    }
    return l;
}

/* Bind [proxy] listen ("host:port" or "unix:PATH") and listen. NULL
 * with err on failure. */
static struct evconnlistener *
proxy_listen(struct tm_proxy *px, char *err, size_t errlen)
{
    const char *addr = px->first->proxy.listen;
    struct sockaddr_storage ss;
    int sslen = sizeof(ss);
    struct evconnlistener *l;
    char host[256];
    size_t n = strlen(addr);

    if (strncmp(addr, LISTEN_UNIX_PREFIX, strlen(LISTEN_UNIX_PREFIX)) == 0) {
        return listen_on_unix(px, addr + strlen(LISTEN_UNIX_PREFIX), err,
                              errlen);
    }
    /* libevent refuses port 0 written out; without a port it is 0, and the
     * system picks one. */
    if (n > 2 && n < sizeof(host) && strcmp(addr + n - 2, ":0") == 0) {
        snprintf(host, sizeof(host), "%.*s", (int)(n - 2), addr);
    } else {
        snprintf(host, sizeof(host), "%s", addr);
    }
    if (evutil_parse_sockaddr_port(host, (struct sockaddr *)&ss, &sslen) != 0) {

        snprintf(err, errlen, "cannot parse listen address %s", addr);
        return NULL;
    }
    l = evconnlistener_new_bind(px->path.base, accept_cb, px,
                                LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
                                    LEV_OPT_CLOSE_ON_EXEC,
                                LISTEN_BACKLOG, (struct sockaddr *)&ss, sslen);
    if (l == NULL) {
        char why[128];

        snprintf(err, errlen, "cannot listen on %s: %s", addr,
                 errno_text(errno, why, sizeof(why)));
    }
    return l;
}

/* Stop accepting: the listener closed, a Unix socket's file removed. */
static void
stop_listening(struct tm_proxy *px)
{
    listen_rest_fini(&px->rest);
    if (px->listener != NULL) {
        evconnlistener_free(px->listener);
        px->listener = NULL;
    }
    listen_unix_remove(&px->unix_sock);
}

static void
restart_needed(void *arg, const char *key, const char *kept)
{
    (*(size_t *)arg)++;
    log_warn("reload: %s changed: needs a restart; keeping %s", key, kept);
}

/* A route that needs what only a restart brings: verify = hmac with no
 * key running. Its name, or NULL. */
static const char *
route_needs_restart(const struct tm_config *cfg)
{
    for (size_t i = 0; i < cfg->nroutes; i++) {
        if (cfg->routes[i].verify == TM_VERIFY_HMAC &&
            cfg->tokens.key == NULL) {
            return cfg->routes[i].name;
        }
    }
    return NULL;
}

static void
set_limits(struct tm_proxy *px, const struct tm_config *cfg)
{
    px->path.limits.max_head = (size_t)cfg->proxy.max_head;
    px->path.limits.max_headers = (size_t)cfg->proxy.max_headers;
    px->path.limits.max_uri = (size_t)cfg->proxy.max_uri;
}

/* The level the proxy's logger formats under cfg, when it follows the
 * configuration. */
static void
follow_level(struct tm_proxy *px, const struct tm_config *cfg)
{
    int level = tm_log_level_parse(cfg->proxy.log_level);

    if (px->log_from_cfg && px->path.log.fn != NULL) {
        px->path.log.level = level < 0 ? TM_LOG_INFO : level;
    }
}

static bool reload(struct tm_proxy *px, struct tm_config *cfg);

bool
tm_proxy_reload(struct tm_proxy *px, struct tm_config *cfg)
{
    const struct tm_log *prev = lib_enter(&px->path.log);
    /* NULL: the caller could not load the file (it said why). */
    bool ok = cfg != NULL && reload(px, cfg);

    metrics_reload(px->path.metrics, ok);
    lib_leave(prev);
    return ok;
}

static bool
reload(struct tm_proxy *px, struct tm_config *cfg)
{
    char err[256];
    size_t kept = 0;
    const char *route;
    struct gen *g = NULL;

    /* The keys read once at start keep their running values, so that
     * what the new generation says is what runs. */
    if (!cfg_keep_restart_only(cfg, px->path.cfg, restart_needed, &kept)) {
        snprintf(err, sizeof(err), "out of memory");
    } else if ((route = route_needs_restart(cfg)) != NULL) {
        snprintf(err, sizeof(err),
                 "[route %s] verify = hmac needs the [tokens] key_file that "
                 "only a restart loads",
                 route);
    } else {
        g = gen_new(px->path.base, cfg, &px->names, true, px->path.gen, err,
                    sizeof(err));
    }
    if (g == NULL) {
        log_error("reload refused, the old configuration stays: %s",
                  LOG_STR(err));
        tm_config_free(cfg);
        return false;
    }
    /* The old generation lives on while requests started under it run. */
    px->path.gen->next = px->path.retired;
    px->path.retired = px->path.gen;
    px->path.gen = g;
    px->path.cfg = cfg;
    px->pools = g->pools;
    fence_keep_trees(px->path.fence, screen_keeps_trees(cfg));
    set_limits(px, cfg);
    gen_drop(&px->path, px->path.retired);
    follow_level(px, cfg);
    log_info("reloaded: %zu routes, %zu upstreams; %zu changed key%s wait%s "
             "for a restart",
             cfg->nroutes, cfg->nupstreams, kept, kept == 1 ? "" : "s",
             kept == 1 ? "s" : "");
    return true;
}

/* After a start, the writes the previous process forwarded may still
 * reach the backend (kill -9, OOM: the backend goes on with a request
 * whose client is gone), and their list died with it: hold fenced writes
 * for order_grace_ms, as after a 504, so that none overtakes them. A
 * store that held no mark at open (the store's fresh, where it knows)
 * never let a fenced write through: nothing to wait for. */
static bool
start_hold(struct tm_proxy *px, char *err, size_t errlen)
{
    int ms = px->path.cfg->proxy.order_grace_ms;

    if (ms <= 0 || fence_fresh(px->path.fence)) {
        return true;
    }
    if (!order_hold(px->path.order, ms)) {
        snprintf(err, errlen, "cannot arm the timer of the start hold");
        return false;
    }
    log_info("holding fenced writes for %d ms after start: writes of the "
             "previous process may still be in flight (order_grace_ms)",
             ms);
    return true;
}

static bool start(struct tm_proxy *px, char *err, size_t errlen);

/* The lock service (for the control port, or for a [lease]) and the
 * carriers that hold the leases. */
static bool
start_carriers(struct tm_proxy *px, char *err, size_t errlen)
{
    const struct tm_config *cfg = px->first;
    struct carry_env env = {
        .base = px->path.base, .fence = px->path.fence, .log = &px->path.log};

    if ((cfg->admin.listen != NULL && cfg->admin.listen[0] != '\0') ||
        cfg->nleases > 0) {
        px->locks = lock_service_new(px->path.base, &px->path.log,
                                     px->path.fence, px->path.metrics,
                                     &px->path.recent, cfg, err, errlen);
        if (px->locks == NULL) {
            return false;
        }
    }
    env.locks = px->locks;
    env.lock_backend = cfg->locks.backend;
    px->path.carriers = carriers_new(&env, cfg, err, errlen);
    return px->path.carriers != NULL;
}

struct tm_proxy *
tm_proxy_new(struct event_base *base, struct tm_config *cfg,
             const struct tm_options *opts, char *err, size_t errlen)
{
    struct tm_proxy *px = calloc(1, sizeof(*px));
    const struct tm_log *prev;
    bool ok;

    if (cfg == NULL || px == NULL) {
        snprintf(err, errlen,
                 cfg == NULL ? "no configuration" : "out of memory");
        free(px);
        tm_config_free(cfg);
        return NULL;
    }

    px->path.base = base;
    px->first = cfg;
    px->path.recent.started = time(NULL);
    px->path.log.level = -1;
    if (opts != NULL && opts->log != NULL) {
        px->path.log.fn = opts->log;
        px->path.log.arg = opts->log_arg;
        px->path.log.level =
            opts->log_level > TM_LOG_DEBUG ? TM_LOG_DEBUG : opts->log_level;
        px->log_from_cfg = opts->log_level < 0;
    }
    follow_level(px, cfg);
    prev = lib_enter(&px->path.log);
    ok = start(px, err, errlen);
    lib_leave(prev);
    if (!ok) {
        tm_proxy_free(px);
        return NULL;
    }
    return px;
}

/* The body of tm_proxy_new, with px's logger current. */
/* The resolver upstream names are looked up with after the start:
 * [proxy] resolver's nameservers, or the system's (/etc/resolv.conf and
 * /etc/hosts, which getaddrinfo also reads for the first lookup). A
 * lookup gives up after 2 tries of 2 s. */
static bool
names_start(struct tm_proxy *px, char *err, size_t errlen)
{
    const char *servers = px->first->proxy.resolver;
    bool system = servers == NULL || servers[0] == '\0';
    int flags = EVDNS_BASE_DISABLE_WHEN_INACTIVE;
    struct evdns_base *dns;

    dns = evdns_base_new(px->path.base, flags);
    if (dns == NULL) {
        snprintf(err, errlen, "cannot start the name resolver");
        return false;
    }
    /* The system's configuration, read as evdns_base_new would, but a
     * host without one (a container image with no /etc/resolv.conf)
     * still starts: /etc/hosts and the default nameserver (127.0.0.1),
     * said once. A name that cannot be looked up leaves its upstream
     * down, as when DNS does not know it. */
    if (system) {
        int r = evdns_base_resolv_conf_parse(dns, DNS_OPTIONS_ALL,
                                             "/etc/resolv.conf");

        /* 1: no file, 6: no nameserver line; evdns then asks 127.0.0.1
         * (on any other failure it asks nobody: the same here). */
        if (r != 0 && r != 1 && r != 6) {
            (void)evdns_base_nameserver_ip_add(dns, "127.0.0.1");
        }
        if (r != 0) {
            log_warn("/etc/resolv.conf %s: upstream names are looked up in "
                     "/etc/hosts and at 127.0.0.1",
                     r == 1   ? "is missing"
                     : r == 6 ? "names no nameserver"
                              : "cannot be read");
        }
    }
    px->names = (struct up_names){
        .dns = dns, .metrics = px->path.metrics, .first_blocking = system};
    for (const char *p = servers; !system && *p != '\0';) {
        char one[64];
        size_t n;

        p += strspn(p, " \t,");
        n = strcspn(p, " \t,");
        if (n == 0) {
            break;
        }
        /* The option's check took IP[:port] items shorter than one. */
        snprintf(one, sizeof(one), "%.*s", (int)n, p);
        if (evdns_base_nameserver_ip_add(dns, one) != 0) {
            snprintf(err, errlen, "[proxy] resolver: cannot use %s", one);
            return false;
        }
        p += n;
    }
    evdns_base_set_option(dns, "timeout:", "2");
    evdns_base_set_option(dns, "attempts:", "2");
    return true;
}

static bool
start(struct tm_proxy *px, char *err, size_t errlen)
{
    struct event_base *base = px->path.base;
    const struct tm_config *cfg = px->first;
    const struct store_ops *sops;

    px->path.cfg = cfg;

    px->path.tokens = &cfg->tokens;
    set_limits(px, cfg);
    px->path.scratch_space = malloc(sizeof(*px->path.scratch_space));
    px->path.scratch = px->path.scratch_space == NULL
                           ? NULL
                           : http_request_space_init(px->path.scratch_space);
    px->path.scratch_resp = malloc(sizeof(*px->path.scratch_resp));
    px->path.reaper = event_new(base, -1, 0, reaper_cb, px);
    px->path.flusher = event_new(base, -1, 0, flusher_cb, px);
    px->trimmer = evtimer_new(base, trim_cb, px);
    px->path.order = order_new(base);
    px->path.uploads = uploads_new();
    px->path.metrics = metrics_new();
    if (px->path.metrics == NULL || px->path.uploads == NULL ||
        px->path.scratch == NULL || px->path.scratch_resp == NULL ||
        px->path.reaper == NULL || px->path.flusher == NULL ||
        px->trimmer == NULL || px->path.order == NULL) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    if (cfg->env_links != NULL) {
        log_info("env: ignored as Kubernetes service links: %s",
                 cfg->env_links);
    }
    if (!names_start(px, err, errlen)) {
        return false;
    }
    /* The first configuration lives as long as the proxy (px->first). */
    px->path.gen =
        gen_new(base, px->first, &px->names, false, NULL, err, errlen);
    if (px->path.gen == NULL) {
        return false;
    }
    px->pools = px->path.gen->pools;
    sops = store_find(cfg->store.type);
    if (sops == NULL) {
        snprintf(err, errlen, "store type %s is not available",
                 cfg->store.type);
        return false;
    }
    px->path.fence =
        fence_open(base, sops, &cfg->store, px->path.metrics, err, errlen);
    if (px->path.fence == NULL) {
        return false;
    }
    fence_keep_trees(px->path.fence, screen_keeps_trees(cfg));
    px->watches = watches_new(base, px->path.fence, cfg, err, errlen);
    if (px->watches == NULL || !start_carriers(px, err, errlen)) {
        return false;
    }
    px->listener = proxy_listen(px, err, errlen);
    if (px->listener == NULL) {
        return false;
    }
    if (!listen_rest_init(&px->rest, px->listener, "proxy")) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    evconnlistener_set_error_cb(px->listener, accept_error_cb);
    if (cfg->admin.listen != NULL && cfg->admin.listen[0] != '\0') {
        px->adm = adm_new(px, err, errlen);
        if (px->adm == NULL) {
            return false;
        }
    }
    if (!start_hold(px, err, errlen)) {
        return false;
    }
    log_info("listening on %s (store %s, %zu routes)",
             LOG_STR(cfg->proxy.listen), cfg->store.type, cfg->nroutes);
    return true;
}

int
tm_proxy_port(const struct tm_proxy *px)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    if (px->listener == NULL ||
        getsockname(evconnlistener_get_fd(px->listener), (struct sockaddr *)&ss,
                    &len) != 0) {
        return 0;
    }
    if (ss.ss_family == AF_INET6) {
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    if (ss.ss_family == AF_INET) {
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    }
    return 0; /* a Unix socket has no port */
}

static void
drain_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
    struct tm_proxy *px = arg;
    struct drain_end end;

    (void)fd;
    (void)what;
    lib_enter(&px->path.log);
    client_drain_end(&px->path, &end);
    log_warn("drain timeout: closed %zu connections still open: %zu "
             "requests not forwarded answered 503, %zu closed mid-exchange",
             end.open, end.refused, end.cut);
}

/* done(arg) joins those called when the drain ends. false when out of
 * memory (logged). */
static bool
drain_wait(struct tm_proxy *px, void (*done)(void *arg), void *arg)
{
    struct drain_waiter *w = malloc(sizeof(*w));

    if (w == NULL) {
        log_error("drain: out of memory: a caller will not be told its end");
        return false;
    }
    *w = (struct drain_waiter){
        .done = done, .arg = arg, .next = px->drain_waiters};
    px->drain_waiters = w;
    return true;
}

void
tm_proxy_drain(struct tm_proxy *px, int timeout_ms, void (*done)(void *arg),
               void *arg)
{
    const struct tm_log *prev = lib_enter(&px->path.log);
    struct timeval tv;

    if (done != NULL) {
        (void)drain_wait(px, done, arg);
    }
    /* Asked again (a signal after PUT /v1/drain): one drain, its first
     * timeout; the reaper tells the new waiter if it is over already. */
    if (px->path.draining) {
        event_active(px->path.reaper, EV_TIMEOUT, 1);
        lib_leave(prev);
        return;
    }
    if (timeout_ms < 0) {
        timeout_ms = px->path.cfg->proxy.drain_timeout_ms;
    }
    tv.tv_sec = timeout_ms / 1000;
    tv.tv_usec = (timeout_ms % 1000) * 1000;
    px->path.draining = true;
    stop_listening(px);
    log_info("stopping: %zu connections open", px->path.nclients);
    client_close_idle(&px->path, false);
    px->drain_timer = evtimer_new(px->path.base, drain_timeout_cb, px);
    if (px->drain_timer != NULL) {
        evtimer_add(px->drain_timer, &tv);
    }
    event_active(px->path.reaper, EV_TIMEOUT, 1);
    lib_leave(prev);
}

void
tm_proxy_on_drained(struct tm_proxy *px, void (*done)(void *arg), void *arg)
{
    px->on_drained = done;
    px->on_drained_arg = arg;
}

void
tm_proxy_free(struct tm_proxy *px)
{
    const struct tm_log *prev;

    if (px == NULL) {
        return;
    }
    prev = lib_enter(&px->path.log);
    stop_listening(px);
    adm_free(px->adm);
    if (px->path.reaper != NULL) {
        client_close_idle(&px->path, true);
        client_reap(&px->path);
    }
    carriers_free(px->path.carriers);
    lock_service_free(px->locks);
    watches_free(px->watches);
    /* Runs the callbacks of pending raises; nobody waits for them. */
    fence_close(px->path.fence);
    while (px->path.retired != NULL) {
        struct gen *g = px->path.retired;
        px->path.retired = g->next;
        gen_free(g);
    }
    if (px->path.gen != NULL) {
        gen_free(px->path.gen);
    }
    if (px->names.dns != NULL) {
        /* evdns tells of a cancelled lookup on the loop's next pass:
         * one pass lets the pools' last ones end and free. */
        if (px->names.asked > 0) {
            event_base_loop(px->path.base, EVLOOP_NONBLOCK);
        }
        evdns_base_free(px->names.dns, 0);
    }
    order_free(px->path.order);
    uploads_free(px->path.uploads);
    metrics_free(px->path.metrics);
    if (px->path.reaper != NULL) {
        event_free(px->path.reaper);
    }
    if (px->path.flusher != NULL) {
        event_free(px->path.flusher);
    }
    if (px->trimmer != NULL) {
        event_free(px->trimmer);
    }
    while (px->drain_waiters != NULL) {
        struct drain_waiter *w = px->drain_waiters;

        px->drain_waiters = w->next;
        free(w);
    }
    if (px->drain_timer != NULL) {
        event_free(px->drain_timer);
    }
    free(px->path.scratch_space);
    free(px->path.scratch_resp);
    tm_config_free(px->first);
    /* Back to the caller's sink, or to none if it was this proxy's. */
    if (prev == &px->path.log) {
        prev = NULL;
    }
    free(px);
    lib_leave(prev);
}
