/* call.c: a lock service call's life (held by its client or by a
 * callback in flight, freed when neither holds it), its answers, and the
 * reading of its query. */
#include "call.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "../../conf/cfg.h"
#include "../../policies/token.h"
#include "../adm_reply.h"
#include "../json.h"
#include "../log.h"
#include "../metrics.h"
#include "../problem.h"
#include "../recent.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

static void conn_closed(struct evhttp_connection *conn, void *arg);

/* conn's peer as ADDRESS:PORT ([ADDRESS]:PORT for IPv6), or "-". */
static void
holder_of(struct evhttp_connection *conn, char *buf, size_t len)
{
    char *addr = NULL; /* libevent's, not ours to free */
    uint16_t port = 0;

    evhttp_connection_get_peer(conn, &addr, &port);
    if (addr == NULL) {
        snprintf(buf, len, "-");
    } else if (strchr(addr, ':') != NULL) {
        snprintf(buf, len, "[%s]:%u", addr, port);
    } else {
        snprintf(buf, len, "%s:%u", addr, port);
    }
}

void
lock_log_lease(const char *what, const char *name, size_t len,
               const char *holder, int64_t fence, int64_t ttl_ms)
{
    log_info("locks: %s: name=%s holder=%s fence=%" PRId64 " ttl_ms=%" PRId64,
             what, LOG_ESC(name, len), LOG_STR(holder), fence, ttl_ms);
}

struct lock_call *
lock_call_new(struct lock_calls *set, struct lock_service *ls,
              struct evhttp_request *req, const char *name, size_t len)
{
    struct lock_call *c = calloc(1, sizeof(*c) + len + 1);

    if (c == NULL) {
        return NULL;
    }
    c->set = set;
    c->ls = ls;
    c->req = req;
    c->conn = evhttp_request_get_connection(req);
    holder_of(c->conn, c->holder, sizeof(c->holder));
    c->len = len;
    memcpy(c->name, name, len);
    c->next = set->head;
    if (set->head != NULL) {
        set->head->prev = c;
    }
    set->head = c;
    evhttp_connection_set_closecb(c->conn, conn_closed, c);
    return c;
}

void
lock_call_detach(struct lock_call *c)
{
    if (c->req != NULL) {
        evhttp_connection_set_closecb(c->conn, NULL, NULL);
        c->req = NULL;
    }
}

void
lock_call_finish(struct lock_call *c)
{
    if (c->in_flight || c->req != NULL) {
        return;
    }
    waiter_leave(&c->w, true);
    if (c->deadline != NULL) {
        event_free(c->deadline);
    }
    if (c->peer != NULL) {
        event_free(c->peer);
    }
    if (c->set != NULL) {
        if (c->prev != NULL) {
            c->prev->next = c->next;
        } else {
            c->set->head = c->next;
        }
        if (c->next != NULL) {
            c->next->prev = c->prev;
        }
    }
    free(c);
}

static void
conn_closed(struct evhttp_connection *conn, void *arg)
{
    struct lock_call *c = arg;

    lib_enter(c->set->log);
    (void)conn;
    c->req = NULL;
    lock_call_finish(c);
}

/* The waiting client's socket became readable. evhttp does not watch a
 * connection while its request waits for an answer, so a waiter that
 * hangs up would otherwise get the lock and hold it for its whole TTL:
 * on EOF, close the connection (conn_closed drops the call). */
static void
peer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct lock_call *c = arg;
    char byte;
    ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);

    lib_enter(c->set->log);
    (void)what;
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) {
        return; /* bytes of a next request: evhttp reads them later */
    }
    if (c->req != NULL) {
        evhttp_connection_free(c->conn);
    }
}

void
lock_call_watch_peer(struct lock_call *c)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(c->conn);
    evutil_socket_t fd = bev != NULL ? bufferevent_getfd(bev) : -1;

    if (c->peer != NULL || fd < 0) {
        return;
    }
    c->peer = event_new(c->set->base, fd, EV_READ, peer_cb, c);
    if (c->peer != NULL) {
        event_add(c->peer, NULL);
    }
}

/* ---- answers --------------------------------------------------------- */

void
lock_call_problem(struct lock_call *c, struct problem *p)
{
    if (c->req == NULL) {
        return;
    }
    p->resource = c->name;
    log_at(p->status == 423 || p->status == 404 ? TM_LOG_DEBUG
           : p->status >= 500                   ? TM_LOG_WARN
                                                : TM_LOG_INFO,
           "locks: refused %d: name=%s fence=%" PRId64 ": %s", p->status,
           LOG_STR(c->name), c->fence, LOG_STR(p->detail));
    adm_reply_problem(c->req, p);
    lock_call_detach(c);
}

void
lock_call_refuse(struct lock_call *c, int status, const char *detail)
{
    struct problem p = {.status = status, .detail = detail};

    lock_call_problem(c, &p);
}

void
lock_call_lost(struct lock_call *c)
{
    struct problem p = {
        .status = 409,
        .type = "urn:tidemark:lock-lost",
        .title = "Lock lost",
        .detail = "the lease is gone or belongs to another holder: stop "
                  "the work",
    };

    metrics_lock_call(c->set->metrics, LOCK_OUT_LOST);
    lock_log_lease("lost", c->name, c->len, c->holder, c->fence, 0);
    recent_lease_gone(c->set->recent, c->name, c->len, c->fence);
    lock_call_problem(c, &p);
}

void
lock_call_down(struct lock_call *c)
{
    struct problem p = {
        .status = 503,
        .type = "urn:tidemark:lock-backend-unavailable",
        .title = "Lock backend unavailable",
        .detail = "the lock backend cannot be used; no new work starts",
        .retry_after = 1,
    };

    metrics_lock_call(c->set->metrics, LOCK_OUT_ERROR);
    lock_call_problem(c, &p);
}

void
lock_call_busy(struct lock_call *c, int64_t fence, int64_t ttl_ms,
               const char *why)
{
    char extra[64];
    struct problem p = {.status = 423, .detail = why};

    if (fence > 0) {
        snprintf(extra, sizeof(extra),
                 "\"fence\":%" PRId64 ",\"ttl_ms\":%" PRId64, fence, ttl_ms);
        p.extra = extra;
        p.retry_after = (int)((ttl_ms + 999) / 1000);
    }
    metrics_lock_call(c->set->metrics, LOCK_OUT_BUSY);
    lock_call_problem(c, &p);
}

bool
lock_call_lease(struct lock_call *c, int code, int64_t ttl_ms)
{
    const struct cfg_tokens *tk = c->set->tokens;
    struct evbuffer *b;
    char token[TOKEN_SIGNED_MAX + 1];

    if (c->req == NULL) {
        return false;
    }
    if (tk->key != NULL) {
        if (token_sign(tk->key, tk->key_len, c->name, c->len, c->fence, token,
                       sizeof(token)) == 0) {
            lock_call_down(c);
            return false;
        }
    } else {
        snprintf(token, sizeof(token), "%" PRId64, c->fence);
    }
    b = evbuffer_new();
    if (b == NULL) {
        evhttp_send_error(c->req, 500, NULL);
        lock_call_detach(c);
        return false;
    }
    recent_lease(c->set->recent, c->name, c->len, c->fence, ttl_ms, c->holder);
    evbuffer_add(b, "{\"name\":\"", 9);
    json_escape(b, c->name, c->len);
    evbuffer_add_printf(b,
                        "\",\"token\":\"%s\",\"fence\":%" PRId64
                        ",\"ttl_ms\":%" PRId64 "}\n",
                        token, c->fence, ttl_ms);
    adm_reply(c->req, code, code == 201 ? "Created" : "OK", "application/json",
              b);
    evbuffer_free(b);
    lock_call_detach(c);
    return true;
}

void
lock_call_status(struct lock_call *c, int64_t fence, int64_t ttl_ms,
                 int64_t mark)
{
    struct evbuffer *b;
    char m[24] = "null";

    if (c->req == NULL) {
        return;
    }
    b = evbuffer_new();
    if (b == NULL) {
        lock_call_down(c);
        return;
    }
    evbuffer_add(b, "{\"name\":\"", 9);
    json_escape(b, c->name, c->len);
    if (mark >= 0) {
        snprintf(m, sizeof(m), "%" PRId64, mark);
    }
    evbuffer_add_printf(b,
                        "\",\"fence\":%" PRId64 ",\"ttl_ms\":%" PRId64
                        ",\"mark\":%s,\"below_mark\":%s}\n",
                        fence, ttl_ms, m,
                        mark < 0       ? "null"
                        : fence < mark ? "true"
                                       : "false");
    adm_reply(c->req, 200, "OK", "application/json", b);
    evbuffer_free(b);
    lock_call_detach(c);
}

void
lock_call_no_content(struct lock_call *c)
{
    if (c->req != NULL) {
        evhttp_send_reply(c->req, 204, "No Content", NULL);
        lock_call_detach(c);
    }
}

/* ---- the query ------------------------------------------------------ */

/* A decimal integer in [lo, hi]: 1 with *out set, 0 when absent, -1 when
 * malformed or out of range. */
static int
query_int(const struct evkeyvalq *q, const char *key, int64_t lo, int64_t hi,
          int64_t *out)
{
    const char *v = evhttp_find_header(q, key);
    int64_t n = 0;

    if (v == NULL) {
        return 0;
    }
    if (*v == '\0' || strlen(v) > 18) {
        return -1;
    }
    for (const char *p = v; *p != '\0'; p++) {
        if (*p < '0' || *p > '9') {
            return -1;
        }
        n = n * 10 + (*p - '0');
    }
    if (n < lo || n > hi) {
        return -1;
    }
    *out = n;
    return 1;
}

bool
lock_call_ttl(struct lock_call *c, const struct evkeyvalq *q)
{
    char why[128];
    int rc = query_int(q, "ttl_ms", 1, c->set->cfg->max_ttl_ms, &c->ttl_ms);

    if (rc == 1) {
        return true;
    }
    snprintf(why, sizeof(why),
             "ttl_ms is %s: milliseconds, 1 to %d ([locks] max_ttl_ms)",
             rc == 0 ? "required" : "malformed or out of range",
             c->set->cfg->max_ttl_ms);
    lock_call_refuse(c, 400, why);
    return false;
}

bool
lock_call_wait(struct lock_call *c, const struct evkeyvalq *q)
{
    char why[96];
    int rc = query_int(q, "wait_ms", 0, c->set->cfg->max_wait_ms, &c->wait_ms);

    if (rc >= 0) {
        return true;
    }
    snprintf(why, sizeof(why),
             "wait_ms is malformed or out of range: 0 to %d ([locks] "
             "max_wait_ms)",
             c->set->cfg->max_wait_ms);
    lock_call_refuse(c, 400, why);
    return false;
}

bool
lock_call_token(struct lock_call *c, const struct evkeyvalq *q)
{
    const struct cfg_tokens *tk = c->set->tokens;
    const char *v = evhttp_find_header(q, "token");
    enum token_status ts;

    if (v == NULL || *v == '\0') {
        lock_call_refuse(c, 400,
                         "token is required: the token the acquire returned");
        return false;
    }
    ts = token_check(tk->key != NULL ? TM_VERIFY_HMAC : TM_VERIFY_NONE, tk->key,
                     tk->key_len, c->name, c->len, v, strlen(v), &c->fence);
    if (ts == TOKEN_FORBIDDEN) {
        lock_call_refuse(c, 403,
                         "the token is unsigned, forged or issued for another "
                         "lock");
        return false;
    }
    if (ts == TOKEN_NO_KEY) {
        lock_call_refuse(c, 400,
                         "the token is signed, but no [tokens] key_file is "
                         "set to check its signature");
        return false;
    }
    if (ts != TOKEN_OK) {
        lock_call_refuse(c, 400, "the token is malformed");
        return false;
    }
    return true;
}
