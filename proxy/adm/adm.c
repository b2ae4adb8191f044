/* adm.c: the control port on libevent's evhttp: /healthz, /readyz,
 * /metrics, /v1/marks/{resource}, and /v1/locks/{name} (locks/service.c). */
#include "adm.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../conf/cfg.h"
#include "../../policies/canon.h"
#include "../../policies/origin.h"
#include "../adm_reply.h"
#include "../carry/carry.h"
#include "../fdlimit.h"
#include "../json.h"
#include "../locks/service.h"
#include "../locks/watch.h"
#include "../log.h"
#include "../metrics.h"
#include "../path/creds.h"
#include "../path/order.h"
#include "../path/up.h"
#include "../problem.h"
#include "../store/fence.h"
#include "../tidemark.h"
#include "adm_page.h"
#include "proxy_view.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/http_struct.h>
#include <event2/listener.h>
#include <sys/queue.h>
#include <event2/keyvalq_struct.h>
#include <openssl/crypto.h>
#include <strings.h>

struct adm {
    struct tm_proxy *px;
    struct evhttp *http;
    struct listen_rest rest; /* its listener's, when accept() finds no fd */
    struct adm *next;        /* in this thread's ports */
    struct lock_service *locks;
    char *host;    /* [admin] listen's host, as bound (restart-only) */
    unsigned port; /* and its port */
    bool failed;   /* PUT /v1/ready fail: /readyz says 503 until ok */
};

/* A marks lookup in flight; req is NULL once the connection closed. */
struct mark_get {
    struct evhttp_request *req;
    struct evhttp_connection *conn;
    char *resource;
};

static void
reply_problem(struct evhttp_request *req, int status, const char *detail,
              const char *resource)
{
    struct problem p = {
        .status = status, .detail = detail, .resource = resource};

    adm_reply_problem(req, &p);
}

static void
simple(struct evhttp_request *req, int code, const char *text)
{
    struct evbuffer *b = evbuffer_new();

    if (b == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    evbuffer_add_printf(b, "%s\n", text);
    adm_reply(req, code,
              code == 200   ? "OK"
              : code == 202 ? "Accepted"
                            : "Service Unavailable",
              "text/plain; charset=utf-8", b);
    evbuffer_free(b);
}

/* Each upstream whose host resolves to no address yet: a line saying
 * why. false when there is one. */
static bool
upstreams_describe(const struct tm_proxy *px, struct evbuffer *b)
{
    bool all = true;

    for (size_t i = 0; i < proxy_cfg(px)->nupstreams; i++) {
        const char *why = up_down_why(proxy_pool(px, i));

        if (why != NULL) {
            evbuffer_add_printf(b, "\nupstream %s: down: %s",
                                proxy_cfg(px)->upstreams[i].name, why);
            all = false;
        }
    }
    return all;
}

/* 503 while the data path cannot fence (the store is unusable, or a
 * required [watch] cannot follow its locks: a paused holder's writes
 * would pass), cannot forward (an upstream's name resolves to no
 * address) or tidemark is draining. The lock backend is reported in
 * the body only: fenced writes still pass without it, so a load
 * balancer should keep sending them; so is the hold after a start
 * (fenced writes wait, they are not refused). */
static void
readyz(struct adm *a, struct evhttp_request *req)
{
    const struct watches *w = proxy_watches(a->px);
    bool store = fence_ready(proxy_fence(a->px));
    bool ready = store && watches_ready(w, true) &&
                 carriers_ready(proxy_carriers(a->px)) &&
                 !proxy_draining(a->px) && !a->failed;
    int64_t held = order_hold_left(proxy_order(a->px));
    struct evbuffer *b = evbuffer_new();
    struct evbuffer *ups = evbuffer_new();

    if (b == NULL || ups == NULL) {
        evhttp_send_error(req, 500, NULL);
        goto out;
    }
    ready = upstreams_describe(a->px, ups) && ready;
    evbuffer_add_printf(b, "%s\nstore: %s", ready ? "ready" : "not ready",
                        store ? "ready" : "unavailable");
    evbuffer_add_buffer(b, ups);
    if (a->locks != NULL) {
        evbuffer_add_printf(b, "\nlocks: %s",
                            lock_service_ready(a->locks) ? "ready"
                                                         : "unavailable");
    }
    watches_describe(w, b);
    carriers_describe(proxy_carriers(a->px), b);
    if (held > 0) {
        evbuffer_add_printf(
            b, "\norder: fenced writes held after start, %" PRId64 " ms left",
            held);
    }
    evbuffer_add_printf(b, "%s%s\n",
                        a->failed ? "\nfailed on the control port" : "",
                        proxy_draining(a->px) ? "\ndraining" : "");
    adm_reply(req, ready ? 200 : 503, ready ? "OK" : "Service Unavailable",
              "text/plain; charset=utf-8", b);
out:
    if (b != NULL) {
        evbuffer_free(b);
    }
    if (ups != NULL) {
        evbuffer_free(ups);
    }
}

/* Every family: the registry's, then the values this port reads now,
 * then the store's and the lock service's own. */
static void
metrics(struct adm *a, struct evhttp_request *req)
{
    const struct tm_proxy *px = a->px;
    struct evbuffer *b = evbuffer_new();

    if (b == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    metrics_write(proxy_metrics(px), fence_backend(proxy_fence(px)), b);
    metrics_head(b, MID_tidemark_connections);
    metrics_value(b, MID_tidemark_connections, (double)proxy_clients(px));
    metrics_head(b, MID_tidemark_order_start_hold_seconds);
    metrics_value(b, MID_tidemark_order_start_hold_seconds,
                  (double)order_hold_left(proxy_order(px)) / 1e3);
    metrics_head(b, MID_tidemark_order_waiting);
    metrics_value(b, MID_tidemark_order_waiting,
                  (double)order_waiting(proxy_order(px)));
    metrics_head(b, MID_tidemark_upstream_connections);
    for (size_t i = 0; i < proxy_cfg(px)->nupstreams; i++) {
        const char *name = proxy_cfg(px)->upstreams[i].name;

        metrics_sample(b, MID_tidemark_upstream_connections,
                       (double)up_idle_count(proxy_pool(px, i)),
                       "upstream=\"%s\",state=\"idle\"", name);
        metrics_sample(b, MID_tidemark_upstream_connections,
                       (double)up_busy_count(proxy_pool(px, i)),
                       "upstream=\"%s\",state=\"busy\"", name);
    }
    metrics_head(b, MID_tidemark_upstream_addresses);
    for (size_t i = 0; i < proxy_cfg(px)->nupstreams; i++) {
        metrics_sample(b, MID_tidemark_upstream_addresses,
                       (double)up_addr_count(proxy_pool(px, i)),
                       "upstream=\"%s\"", proxy_cfg(px)->upstreams[i].name);
    }
    metrics_head(b, MID_tidemark_sign_credentials_expiry_timestamp_seconds);
    for (size_t i = 0; i < proxy_cfg(px)->nupstreams; i++) {
        struct creds *c = up_creds(proxy_pool(px, i));

        if (c != NULL) {
            metrics_sample(
                b, MID_tidemark_sign_credentials_expiry_timestamp_seconds,
                creds_expiry(c), "upstream=\"%s\"",
                proxy_cfg(px)->upstreams[i].name);
        }
    }
    fence_stats(proxy_fence(px), b);
    if (a->locks != NULL) {
        lock_service_metrics(a->locks, b);
    }
    watches_metrics(proxy_watches(px), b);
    carriers_metrics(proxy_carriers(px), b);
    adm_reply(req, 200, "OK", "text/plain; version=0.0.4", b);
    evbuffer_free(b);
}

static void
conn_closed(struct evhttp_connection *conn, void *arg)
{
    struct mark_get *mg = arg;

    (void)conn;
    mg->req = NULL;
}

static void
mark_done(void *arg, enum store_result res, int64_t mark)
{
    struct mark_get *mg = arg;
    struct evbuffer *b;

    if (mg->req == NULL) {
        goto out;
    }
    evhttp_connection_set_closecb(mg->conn, NULL, NULL);
    if (res == STORE_ERROR) {
        reply_problem(mg->req, 503, "the mark store cannot be used",
                      mg->resource);
        goto out;
    }
    if (mark <= 0) {
        reply_problem(mg->req, 404, "no mark for this resource", mg->resource);
        goto out;
    }
    b = evbuffer_new();
    if (b == NULL) {
        evhttp_send_error(mg->req, 500, NULL);
        goto out;
    }
    evbuffer_add(b, "{\"resource\":\"", 13);
    json_escape(b, mg->resource, strlen(mg->resource));
    evbuffer_add_printf(b, "\",\"high_water\":%" PRId64 "}\n", mark);
    adm_reply(mg->req, 200, "OK", "application/json", b);
    evbuffer_free(b);
out:
    free(mg->resource);
    free(mg);
}

static void
marks_get_req(struct adm *a, struct evhttp_request *req, const char *path)
{
    struct tm_proxy *px = a->px;
    struct mark_get *mg;
    char name[TM_RESOURCE_MAX + 1];
    char *res;
    size_t len;
    const char *why;

    /* The one canonical name, as routes, locks and signatures use. */
    if (!canon_name(path, strlen(path), name, sizeof(name), &len, &why)) {
        char detail[160];

        snprintf(detail, sizeof(detail), "bad resource name: %s", why);
        reply_problem(req, 400, detail, NULL);
        return;
    }
    res = strdup(name);
    if (res == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    mg = calloc(1, sizeof(*mg));
    if (mg == NULL) {
        free(res);
        evhttp_send_error(req, 500, NULL);
        return;
    }
    mg->req = req;
    mg->conn = evhttp_request_get_connection(req);
    mg->resource = res;
    evhttp_connection_set_closecb(mg->conn, conn_closed, mg);
    if (!fence_get(proxy_fence(px), res, len, mark_done, mg)) {
        evhttp_connection_set_closecb(mg->conn, NULL, NULL);
        evhttp_send_error(req, 500, NULL);
        free(res);
        free(mg);
    }
}

/* With [admin] token_file, the /v1/ calls (locks, marks, the page's data)
 * need "Authorization: Bearer <token>", compared in constant time. */
static bool
authorized(const struct adm *a, struct evhttp_request *req)
{
    const struct cfg_admin *ac = &proxy_cfg(a->px)->admin;
    const char *h;
    size_t n;

    if (ac->token_len == 0) {
        return true;
    }
    h = evhttp_find_header(evhttp_request_get_input_headers(req),
                           "Authorization");
    if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0) {
        return false;
    }
    h += 7;
    n = strlen(h);
    return n == ac->token_len && CRYPTO_memcmp(h, ac->token, n) == 0;
}

/* The value of header name in req, p == NULL when absent; false when
 * the header is given more than once. */
static bool
one_header(struct evhttp_request *req, const char *name, struct tm_slice *out)
{
    struct evkeyvalq *hs = evhttp_request_get_input_headers(req);
    struct evkeyval *kv;

    out->p = NULL;
    out->len = 0;
    for (kv = TAILQ_FIRST(hs); kv != NULL; kv = TAILQ_NEXT(kv, next)) {
        if (strcasecmp(kv->key, name) != 0) {
            continue;
        }
        if (out->p != NULL) {
            return false;
        }
        out->p = kv->value;
        out->len = strlen(kv->value);
    }
    return true;
}

/* Whether req is HTTP/1.1 (or above: evhttp reads any 1.x and refuses
 * other majors). */
static bool
http11(const struct evhttp_request *req)
{
    return req->major > 1 || (req->major == 1 && req->minor >= 1);
}

/* Before any route, for every request: a web page of another origin
 * (Origin, Sec-Fetch-Site) or a Host that is not ours (DNS rebinding)
 * is refused (policies/origin.h). Replies and returns false then. */
static bool
origin_allowed(const struct adm *a, struct evhttp_request *req,
               const char *path)
{
    struct origin_self self = {{a->host, strlen(a->host)},
                               a->port,
                               proxy_cfg(a->px)->admin.allowed_hosts};
    struct tm_slice host, origin, site;
    enum origin_verdict v;
    struct problem p = {0};

    if (!one_header(req, "Host", &host) ||
        !one_header(req, "Origin", &origin) ||
        !one_header(req, "Sec-Fetch-Site", &site)) {
        p.status = 400;
        p.detail = "Host, Origin or Sec-Fetch-Site is given more than once";
    } else {
        v = origin_check(&self, http11(req), host, origin, site);
        if (v == ORIGIN_OK) {
            return true;
        }
        p.status = origin_status(v);
        p.detail = origin_reason(v);
    }
    if (p.status == 400) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Connection",
                          "close");
    }
    log_warn("admin: refused %s: %s", LOG_STR(path), LOG_STR(p.detail));
    adm_reply_problem(req, &p);
    return false;
}

/* GET /v1/config: the configuration in effect, as `tidemark --check
 * --print` writes it (secrets redacted). */
static void
config_text(const struct adm *a, struct evhttp_request *req)
{
    char *text = tm_config_text(proxy_cfg(a->px));
    struct evbuffer *b = evbuffer_new();

    if (text == NULL || b == NULL || evbuffer_add(b, text, strlen(text)) != 0) {
        free(text);
        if (b != NULL) {
            evbuffer_free(b);
        }
        evhttp_send_error(req, 500, NULL);
        return;
    }
    free(text);
    adm_reply(req, 200, "OK", "text/plain; charset=utf-8", b);
    evbuffer_free(b);
}

/* /v1/leases: every carrier; /v1/leases/NAME: one (404 when none), in
 * whatever state: the application polls it to learn whether it is the
 * active one. */
static void
leases(struct adm *a, struct evhttp_request *req, const char *name)
{
    struct carriers *set = proxy_carriers(a->px);
    struct carrier *c = name != NULL ? carry_find(set, name) : NULL;
    struct evbuffer *b;

    if (name != NULL && c == NULL) {
        reply_problem(req, 404, "no [lease] or [follow] section of that name",
                      NULL);
        return;
    }
    b = evbuffer_new();
    if (b == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    if (c != NULL) {
        carry_json(c, b);
    } else {
        carriers_json(set, b);
    }
    evbuffer_add(b, "\n", 1);
    adm_reply(req, 200, "OK", "application/json", b);
    evbuffer_free(b);
}

/* The word a PUT sent (its body, a trailing newline dropped) into
 * buf; false when it is longer than buf holds. */
static bool
put_word(struct evhttp_request *req, char *buf, size_t len)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);

    if (n >= len) {
        return false;
    }
    evbuffer_remove(in, buf, n);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) {
        n--;
    }
    buf[n] = '\0';
    return true;
}

/* GET /v1/log/level: the level; PUT with error, warn, info or debug
 * sets it (until a reload). */
static void
log_level(struct adm *a, struct evhttp_request *req, enum evhttp_cmd_type cmd)
{
    char word[16];
    int level;

    if (cmd == EVHTTP_REQ_PUT) {
        level =
            put_word(req, word, sizeof(word)) ? tm_log_level_parse(word) : -1;
        if (level < 0) {
            reply_problem(req, 400,
                          "the body is one of error, warn, info, debug", NULL);
            return;
        }
        log_warn("admin: log level %s, until a reload",
                 tm_log_level_name((enum tm_log_level)level));
        proxy_set_log_level(a->px, (enum tm_log_level)level);
    } else if (cmd != EVHTTP_REQ_GET) {
        reply_problem(req, 400, "GET or PUT here", NULL);
        return;
    }
    level = proxy_log(a->px)->level;
    simple(req, 200, level < 0 ? "-" : tm_log_level_name(level));
}

/* PUT /v1/ready with fail: /readyz answers 503 (a load balancer takes
 * tidemark out) until PUT ok; the data path keeps serving. */
static void
ready(struct adm *a, struct evhttp_request *req, enum evhttp_cmd_type cmd)
{
    char word[8];
    bool ok = false;

    if (cmd != EVHTTP_REQ_PUT || !put_word(req, word, sizeof(word)) ||
        (!(ok = strcmp(word, "ok") == 0) && strcmp(word, "fail") != 0)) {
        reply_problem(req, 400, "PUT fail or ok here", NULL);
        return;
    }
    if (a->failed == ok) {
        log_warn("admin: readiness %s", ok ? "back to the checks" : "failed");
    }
    a->failed = !ok;
    simple(req, 200, ok ? "ok" : "fail");
}

/* PUT /v1/drain: stop as SIGTERM does (stop accepting, let requests
 * under way finish within drain_timeout_ms, then the daemon exits): 202
 * the first time, 200 while already draining. */
static void
drain(struct adm *a, struct evhttp_request *req, enum evhttp_cmd_type cmd)
{
    if (cmd != EVHTTP_REQ_PUT) {
        reply_problem(req, 400, "PUT here", NULL);
        return;
    }
    if (proxy_draining(a->px)) {
        simple(req, 200, "draining");
        return;
    }
    log_warn("admin: drain asked on the control port");
    proxy_drain(a->px);
    simple(req, 202, "draining");
}

static void
dispatch(struct evhttp_request *req, void *arg)
{
    struct adm *a = arg;
    const char *uri = evhttp_request_get_uri(req);
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    char path[2048];
    size_t n = strcspn(uri, "?");
    const char *query = uri[n] == '?' ? uri + n + 1 : NULL;

    lib_enter(proxy_log(a->px));
    if (n >= sizeof(path)) {
        reply_problem(req, 414, NULL, NULL);
        return;
    }
    memcpy(path, uri, n);
    path[n] = '\0';
    if (!origin_allowed(a, req, path)) {
        return;
    }
    if (strncmp(path, "/v1/", 4) == 0 && !authorized(a, req)) {
        struct problem p = {.status = 401,
                            .detail = "this call needs the control port's "
                                      "bearer token"};
        evhttp_add_header(evhttp_request_get_output_headers(req),
                          "WWW-Authenticate", "Bearer");
        log_warn("admin: refused %s %s: no valid bearer token",
                 cmd == EVHTTP_REQ_GET ? "GET" : "call", LOG_STR(path));
        adm_reply_problem(req, &p);
        return;
    }
    if (strncmp(path, "/v1/locks/", 10) == 0 && a->locks != NULL) {
        lock_service_serve(a->locks, req, path + 10, query);
        return;
    }
    if (strcmp(path, "/v1/log/level") == 0) {
        log_level(a, req, cmd);
        return;
    }
    if (strcmp(path, "/v1/ready") == 0) {
        ready(a, req, cmd);
        return;
    }
    if (strcmp(path, "/v1/drain") == 0) {
        drain(a, req, cmd);
        return;
    }
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
        reply_problem(req, 400, "only GET is served here", NULL);
        return;
    }
    if (strcmp(path, "/") == 0) {
        struct evbuffer *b = evbuffer_new();
        if (b == NULL) {
            evhttp_send_error(req, 500, NULL);
            return;
        }
        adm_page_html(b);
        adm_reply(req, 200, "OK", "text/html; charset=utf-8", b);
        evbuffer_free(b);
    } else if (strcmp(path, "/v1/recent") == 0) {
        struct evbuffer *b = evbuffer_new();
        if (b == NULL) {
            evhttp_send_error(req, 500, NULL);
            return;
        }
        struct page_status st = {
            .store_ready = fence_ready(proxy_fence(a->px)),
            .locks_on = a->locks != NULL,
            .locks_ready = a->locks != NULL && lock_service_ready(a->locks),
            .watches_on = proxy_cfg(a->px)->nwatches > 0,
            .watches_ready = watches_ready(proxy_watches(a->px), false),
            .draining = proxy_draining(a->px),
        };

        adm_recent_json(proxy_recent(a->px), proxy_cfg(a->px), &st, b);
        adm_reply(req, 200, "OK", "application/json", b);
        evbuffer_free(b);
    } else if (strcmp(path, "/v1/config") == 0) {
        config_text(a, req);
    } else if (strcmp(path, "/v1/leases") == 0) {
        leases(a, req, NULL);
    } else if (strncmp(path, "/v1/leases/", 11) == 0) {
        leases(a, req, path + 11);
    } else if (strcmp(path, "/healthz") == 0) {
        simple(req, 200, "ok");
    } else if (strcmp(path, "/readyz") == 0) {
        readyz(a, req);
    } else if (strcmp(path, "/metrics") == 0) {
        metrics(a, req);
    } else if (strncmp(path, "/v1/marks/", 10) == 0) {
        marks_get_req(a, req, path + 10);
    } else {
        reply_problem(req, 404, "no such endpoint", NULL);
    }
}

/* libevent hands a listener's error callback the argument of its accept
 * callback, evhttp's own, not ours: the control ports of this thread's
 * proxies, to find one by its listener (thread-local, as the logger: a
 * proxy runs on its loop's thread). */
static _Thread_local struct adm *ports;

static void
accept_error_cb(struct evconnlistener *l, void *arg)
{
    (void)arg;
    for (struct adm *a = ports; a != NULL; a = a->next) {
        if (a->rest.l == l) {
            lib_enter(a->rest.log);
            listen_rest_error(&a->rest);
            return;
        }
    }
}

/* The listener rests instead of spinning when accept() finds no file
 * descriptor free (evhttp leaves it enabled and logs each failure). */
static bool
rest_setup(struct adm *a, struct evhttp_bound_socket *bound)
{
    struct evconnlistener *l = evhttp_bound_socket_get_listener(bound);

    if (!listen_rest_init(&a->rest, l, "admin")) {
        return false;
    }
    evconnlistener_set_error_cb(l, accept_error_cb);
    a->next = ports;
    ports = a;
    return true;
}

struct adm *
adm_new(struct tm_proxy *px, char *err, size_t errlen)
{
    struct evhttp_bound_socket *bound;
    struct adm *a = calloc(1, sizeof(*a));
    char *host = NULL, *port = NULL;

    if (a == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    a->px = px;
    a->http = evhttp_new(proxy_base(px));
    if (a->http == NULL ||
        !cfg_split_hostport(proxy_cfg(px)->admin.listen, &host, &port)) {
        snprintf(err, errlen, "admin: bad listen address %s",
                 proxy_cfg(px)->admin.listen);
        goto fail;
    }
    evhttp_set_allowed_methods(
        a->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
                     EVHTTP_REQ_PUT | EVHTTP_REQ_PATCH | EVHTTP_REQ_DELETE);
    evhttp_set_max_headers_size(a->http, 16384);
    evhttp_set_max_body_size(a->http, 65536);
    evhttp_set_timeout(a->http, 30);
    evhttp_set_gencb(a->http, dispatch, a);
    a->locks = proxy_locks(px);
    bound =
        evhttp_bind_socket_with_handle(a->http, host, (ev_uint16_t)atoi(port));
    if (bound == NULL) {
        char why[128];

        snprintf(err, errlen, "admin: cannot listen on %s: %s",
                 proxy_cfg(px)->admin.listen,
                 errno_text(errno, why, sizeof(why)));
        goto fail;
    }
    a->host = host;
    a->port = (unsigned)atoi(port);
    free(port);
    if (!rest_setup(a, bound)) {
        snprintf(err, errlen, "out of memory");
        adm_free(a);
        return NULL;
    }
    return a;
fail:
    free(host);
    free(port);
    adm_free(a);
    return NULL;
}

void
adm_free(struct adm *a)
{
    if (a == NULL) {
        return;
    }
    for (struct adm **pp = &ports; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == a) {
            *pp = a->next;
            break;
        }
    }
    listen_rest_fini(&a->rest);
    /* First the port: its connections' close callbacks tell waiting
     * lock calls that nobody is listening any more. */
    if (a->http != NULL) {
        evhttp_free(a->http);
    }
    free(a->host);
    free(a);
}
