/* conn.c: one client connection: read a request head, decide, wait for
 * the store and the resource's turn, forward over a pooled upstream
 * connection, stream both bodies with back-pressure, answer in order. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "../policies/canon.h"
#include "../policies/decide.h"
#include "../policies/hname.h"
#include "../policies/profile.h"
#include "../policies/reqcheck.h"
#include "../policies/route.h"
#include "../policies/token.h"
#include "fence.h"
#include "log.h"
#include "metrics.h"
#include "order.h"
#include "problem.h"
#include "proxy_int.h"
#include "sendbuf.h"
#include "up.h"

#define LINGER_MS 2000 /* read and drop after a closing answer */
#define LINGER_BYTES (1 << 20)
#define MAX_RESPONSE_HEAD 65536

enum cstate {
    CS_HEAD = 0, /* waiting for a request head */
    CS_STORE,    /* waiting for the store's answer */
    CS_ORDER,    /* waiting for the resource's turn */
    CS_CONNECT,  /* waiting for an upstream connection */
    CS_FORWARD,  /* exchanging with the upstream */
    CS_DISCARD,  /* answered locally; dropping the request body */
    CS_CLOSING,  /* flushing the last answer, then lingering */
};

/* The current request: its parsed head and a copy of its bytes. Kept
 * per connection and reused while the connection stays busy. */
struct request {
    struct http_request h;
    struct tm_slice cpath; /* the canonical path (canon_path), in bytes[]
                            * after the head; "*" for OPTIONS * */
    size_t cap;            /* bytes[] capacity */
    char bytes[];
};

struct client {
    struct tm_proxy *px;
    struct client *next;
    struct client *prev;
    uint64_t id;
    struct bufferevent *bev;
    struct event *timer; /* idle, head, store and linger timeouts */
    struct event *kick;  /* deferred: the resource's turn came */
    enum cstate state;
    bool timer_is_head; /* the head timeout runs (not idle) */

    struct request *rq;
    bool have_rq;    /* rq holds the current request */
    struct gen *gen; /* the configuration the request runs under */
    const struct cfg_route *route;
    const char *route_name;
    enum tm_mode mode;
    char resource[TM_RESOURCE_MAX + 1];
    size_t rlen;
    int64_t token;
    int64_t mark; /* sent in Fencing-High-Water when > 0 */
    struct order_slot *slot;
    int order_wait; /* slots still queued */
    bool raise_res; /* resource's mark must still be asked */
    bool raise_src; /* src's mark must still be asked */
    /* A WebDAV MOVE or COPY fenced at its Destination: resource names
     * the Destination, src the source that a MOVE also writes (src_len
     * 0: none); dest_raw is the Destination's path and query as the
     * client wrote it, forwarded under the upstream's authority. */
    char src[TM_RESOURCE_MAX + 1];
    size_t src_len;
    int64_t src_mark;
    struct order_slot *src_slot;
    struct tm_slice dest_raw;
    struct fence_call *raise;
    struct up_pool *pool;
    struct up_conn *up;

    enum http_body req_kind;
    uint64_t req_left;
    struct http_chunked req_chunk;
    bool req_done;
    bool req_sent_whole;
    uint64_t max_body;     /* the route's limit; UINT64_MAX: none */
    struct timespec up_t0; /* the request went to the upstream */
    struct timespec t0;    /* the head was read */
    int resp_status;
    uint64_t body_seen;  /* chunked bytes forwarded so far */
    uint64_t body_moved; /* body bytes moved to the upstream */
    uint64_t body_mark;  /* body_moved when the rate window began */

    bool resp_started;
    enum http_body resp_kind;
    uint64_t resp_left;
    struct http_chunked resp_chunk;
    bool resp_keep_alive;

    uint64_t discard_left;
    size_t linger_left;
    bool close_after;
    bool client_eof; /* the client sent FIN */
    bool up_eof;     /* the upstream sent FIN */
    bool dead;       /* closed; freed at the end of the turn */
    bool read_tmo;   /* a read timeout is set on bev */
    size_t read_hi;  /* bev's read high watermark */
    bool served;     /* a request head was read: between requests now,
                      * the wait is idle_timeout_ms, not header_timeout_ms */
    bool idle;       /* on px's idle list: waiting for a head, nothing
                      * buffered either way (reclaimable) */
    struct client *idle_prev;
    struct client *idle_next;
    bool dirty;      /* has output to write this turn */
    bool bp_up;      /* client reads paused: upstream output full */
    bool bp_down;    /* upstream reads paused: client output full */
    bool bp_answers; /* client reads paused: answers not read */
    struct client *dirty_next;
};

static void client_pump(struct client *c);
static void client_close(struct client *c, int grace_ms);
static void pump_request_body(struct client *c);
static bool pump_response(struct client *c);
static void drained(struct client *c);

static void
ms_to_tv(int ms, struct timeval *tv)
{
    tv->tv_sec = ms / 1000;
    tv->tv_usec = (ms % 1000) * 1000;
}

static void
timer_arm(struct client *c, int ms)
{
    struct timeval tv;

    ms_to_tv(ms, &tv);
    evtimer_add(c->timer, &tv);
}

static struct evbuffer *
c_in(struct client *c)
{
    return bufferevent_get_input(c->bev);
}

static struct evbuffer *
c_out(struct client *c)
{
    return bufferevent_get_output(c->bev);
}

/* The [proxy] settings c works under: those of its request's generation
 * while a request runs, so that a reload changes nothing of a request
 * under way (token header, timeouts, limits); else the current ones. */
static const struct cfg_proxy *
pcfg(const struct client *c)
{
    return &(c->gen != NULL ? c->gen->cfg : c->px->cfg)->proxy;
}

/* ---- writing ----------------------------------------------------------
 * Output is written directly at the end of the loop turn, and EV_WRITE is
 * enabled on a bufferevent only while the kernel cannot take everything:
 * no epoll_ctl per answer in the common case. */

static void
flush_bev(struct bufferevent *bev, bool direct)
{
    struct evbuffer *out = bufferevent_get_output(bev);
    int n;

    if (evbuffer_get_length(out) == 0 ||
        (bufferevent_get_enabled(bev) & EV_WRITE)) {
        return;
    }
    if (!direct) {
        bufferevent_enable(bev, EV_WRITE);
        return;
    }
    /* A socket bufferevent keeps the front of its output frozen so that
     * only it drains the buffer; it thaws it to write, and so do we. */
    evbuffer_unfreeze(out, 1);
    n = sendbuf_write(out, bufferevent_getfd(bev));

    evbuffer_freeze(out, 1);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
        /* Let the bufferevent meet the error and report it. */
        bufferevent_enable(bev, EV_WRITE);
        return;
    }
    if (evbuffer_get_length(out) > 0) {
        bufferevent_enable(bev, EV_WRITE);
    }
}

static void
mark_dirty(struct client *c)
{
    struct tm_proxy *px = c->px;

    if (c->dirty) {
        return;
    }
    c->dirty = true;
    c->dirty_next = px->dirty;
    px->dirty = c;
    event_active(px->flusher, EV_TIMEOUT, 1);
}

void
client_flush_all(struct tm_proxy *px)
{
    while (px->dirty != NULL) {
        struct client *c = px->dirty;
        px->dirty = c->dirty_next;
        c->dirty = false;
        c->dirty_next = NULL;
        if (c->up != NULL && c->state == CS_FORWARD) {
            flush_bev(up_bev(c->up), !up_tls(c->up));
        }
        flush_bev(c->bev, true);
        if (c->bp_up || c->bp_down || c->bp_answers) {
            drained(c);
        }
    }
}

/* Called when a write event drained a buffer: back to direct writes. */
static void
written(struct bufferevent *bev)
{
    if (evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
        bufferevent_disable(bev, EV_WRITE);
    }
}

/* The client's bufferevent always has a write timeout (it only runs while
 * the kernel cannot take an answer); a read timeout only while a request
 * body is expected. Changed only when it changes: each change re-adds
 * libevent's events. */
static void
client_timeouts(struct client *c, bool read)
{
    struct timeval tv;

    if (c->read_tmo == read) {
        return;
    }
    c->read_tmo = read;
    ms_to_tv(pcfg(c)->idle_timeout_ms, &tv);
    bufferevent_set_timeouts(c->bev, read ? &tv : NULL, &tv);
}

static void
request_free(struct client *c)
{
    c->have_rq = false;
    if (c->gen != NULL) {
        gen_drop(c->px, c->gen);
        c->gen = NULL;
    }
}

/* ---- answers tidemark makes itself ---------------------------------- */

/* After a local answer the request's body may still be on its way; read
 * and drop it within discard_limit, or close. */
static void
after_local_answer(struct client *c)
{
    const struct http_request *h = &c->rq->h;
    uint64_t limit = (uint64_t)pcfg(c)->discard_limit;

    c->state = CS_HEAD;
    if (!c->close_after && h->expect_continue && h->body != HTTP_BODY_NONE) {
        /* The client may or may not send the body it announced. */
        c->close_after = true;
    }
    if (!c->close_after && h->body == HTTP_BODY_LENGTH &&
        h->content_length > 0) {
        if (h->content_length > limit) {
            c->close_after = true;
        } else {
            c->state = CS_DISCARD;
            c->req_kind = HTTP_BODY_LENGTH;
            c->discard_left = h->content_length;
        }
    } else if (!c->close_after && h->body == HTTP_BODY_CHUNKED) {
        c->state = CS_DISCARD;
        c->req_kind = HTTP_BODY_CHUNKED;
        http_chunked_init(&c->req_chunk);
        c->discard_left = limit;
    }
    request_free(c);
    if (c->close_after) {
        c->state = CS_CLOSING;
    }
}

/* Answer the current request locally (p describes the problem) and move
 * on: discard its body, or close. */
static void
answer(struct client *c, const struct problem *p)
{
    if (p->status == 400 || p->status == 431 || p->status == 414 ||
        p->status == 501 || p->status == 505 || p->status == 408) {
        c->close_after = true;
    }
    if (c->have_rq && !c->rq->h.keep_alive) {
        c->close_after = true;
    }
    problem_write(c_out(c), p, c->close_after);
    mark_dirty(c);
    if (c->have_rq) {
        after_local_answer(c);
    } else {
        c->state = CS_CLOSING;
    }
}

/* Answer p, log it once with its reason and keep it on the page. The
 * problem names c->resource unless it names one of its own. */
static void
refuse(struct client *c, struct problem *p, const char *reason)
{
    if (p->resource == NULL) {
        p->resource = c->rlen > 0 ? c->resource : NULL;
    }
    recent_refusal(&c->px->recent, p->status, reason, c->route_name,
                   p->resource, c->token, c->mark);
    /* Refusals of stale, missing and malformed tokens are the proxy doing
     * its job (info); the rest say something is wrong (warn). */
    log_at(p->status == 409 || p->status == 428 || p->status == 400 ||
                   p->status == 403
               ? TM_LOG_INFO
               : TM_LOG_WARN,
           "conn=%" PRIu64 " refused %d %s: route=%s resource=%s "
           "token=%" PRId64 " mark=%" PRId64 "%s%s",
           c->id, p->status, reason, c->route_name ? c->route_name : "-",
           p->resource != NULL ? p->resource : "-", c->token, c->mark,
           p->detail ? ": " : "", p->detail ? p->detail : "");
    answer(c, p);
}

static void
refuse_status(struct client *c, int status, const char *reason,
              const char *detail)
{
    struct problem p = {.status = status, .detail = detail};

    refuse(c, &p, reason);
}

/* ---- forwarding ------------------------------------------------------ */

static bool
is_header(struct tm_slice name, const char *cfgname)
{
    return slice_ieq(name, cfgname);
}

/* A client header the upstream must not get from the client: named by
 * strip_header, or one the sidecar sets itself with add_header, in any
 * spelling the upstream may read as that name (X_Forwarded_User behind
 * a CGI gateway is X-Forwarded-User: hname.h). */
static bool
upstream_drops(const struct cfg_upstream *u, struct tm_slice name)
{
    for (size_t i = 0; i < u->nstrip; i++) {
        if (hname_same(name.p, name.len, u->strip[i])) {
            return true;
        }
    }
    for (size_t i = 0; i < u->nadd; i++) {
        if (hname_same(name.p, name.len, u->add[i].name)) {
            return true;
        }
    }
    return false;
}

/* The Destination of a fenced COPY or MOVE as the upstream gets it: its
 * path and query as the client wrote them, under the upstream's scheme
 * and the Host the upstream gets, so that a server which checks that a
 * Destination is its own (Apache mod_dav, nginx) sees its own name. */
static void
write_destination(struct client *c, struct evbuffer *out, struct tm_slice host)
{
    struct tm_slice raw = c->dest_raw;

    evbuffer_add_printf(out, "Destination: %s://",
                        up_cfg(c->pool)->tls ? "https" : "http");
    evbuffer_add(out, host.p, host.len);
    if (raw.len == 0 || raw.p[0] != '/') {
        evbuffer_add(out, "/", 1);
    }
    evbuffer_add(out, raw.p, raw.len);
    evbuffer_add(out, "\r\n", 2);
}

/* Write the request head as the upstream gets it: origin-form target,
 * the upstream's Host, fencing and hop-by-hop headers removed, Via
 * added. */
static void
write_request_head(struct client *c, struct evbuffer *out)
{
    const struct http_request *h = &c->rq->h;
    const struct cfg_proxy *pc = pcfg(c);
    const struct cfg_upstream *u = up_cfg(c->pool);
    const char *target = h->target.p;
    size_t tlen = h->target.len;
    struct tm_slice host = {u->host_header, strlen(u->host_header)};
    int hi;

    if (tlen > 0 && target[0] != '/' && h->path.p != NULL) {
        /* absolute-form: send the path and query only */
        tlen -= (size_t)(h->path.p - target);
        target = h->path.p;
    }
    evbuffer_add(out, h->method.p, h->method.len);
    evbuffer_add(out, " ", 1);
    evbuffer_add(out, target, tlen);
    evbuffer_add(out, h->minor == 0 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n", 11);
    if (u->host_preserve &&
        (hi = http_find_header(h->headers, h->nheaders, 0, "Host")) >= 0) {
        host = h->headers[hi].value;
    }
    evbuffer_add(out, "Host: ", 6);
    evbuffer_add(out, host.p, host.len);
    evbuffer_add(out, "\r\n", 2);
    for (size_t i = 0; i < h->nheaders; i++) {
        const struct http_header *f = &h->headers[i];
        if (c->dest_raw.p != NULL && is_header(f->name, "Destination")) {
            write_destination(c, out, host);
            continue;
        }
        if (f->hop || is_header(f->name, "Host") ||
            (h->expect_continue && is_header(f->name, "Expect")) ||
            is_header(f->name, pc->token_header) ||
            is_header(f->name, pc->resource_header) ||
            ((u->nstrip > 0 || u->nadd > 0) && upstream_drops(u, f->name))) {
            continue;
        }
        evbuffer_add(out, f->name.p, f->name.len);
        evbuffer_add(out, ": ", 2);
        evbuffer_add(out, f->value.p, f->value.len);
        evbuffer_add(out, "\r\n", 2);
    }
    for (size_t i = 0; i < u->nadd; i++) {
        evbuffer_add(out, u->add[i].name, strlen(u->add[i].name));
        evbuffer_add(out, ": ", 2);
        evbuffer_add(out, u->add[i].value, strlen(u->add[i].value));
        evbuffer_add(out, "\r\n", 2);
    }
    if (h->body == HTTP_BODY_CHUNKED) {
        evbuffer_add(out, "Transfer-Encoding: chunked\r\n", 28);
    }
    if (h->minor == 0) {
        evbuffer_add(out, "Connection: keep-alive\r\n", 24);
    }
    evbuffer_add(out, "Via: 1.1 tidemark\r\n\r\n", 21);
}

static void up_read_cb(struct bufferevent *bev, void *arg);
static void up_write_cb(struct bufferevent *bev, void *arg);
static void up_event_cb(struct bufferevent *bev, short what, void *arg);

static void
attach(struct client *c, struct up_conn *uc)
{
    struct bufferevent *ub = up_bev(uc);
    const struct cfg_upstream *u = up_cfg(c->pool);
    size_t buf = (size_t)pcfg(c)->buffer_size;

    c->up = uc;
    c->state = CS_FORWARD;
    clock_gettime(CLOCK_MONOTONIC, &c->up_t0);
    c->resp_started = false;
    c->up_eof = false;
    c->req_kind = c->rq->h.body;
    c->req_left = c->rq->h.content_length;
    c->req_done = c->req_kind == HTTP_BODY_NONE ||
                  (c->req_kind == HTTP_BODY_LENGTH && c->req_left == 0);
    c->req_sent_whole = c->req_done;
    c->body_seen = 0;
    c->body_moved = c->body_mark = 0;
    if (!c->req_done && pcfg(c)->min_body_rate > 0) {
        timer_arm(c, pcfg(c)->body_rate_window_ms);
    }
    http_chunked_init(&c->req_chunk);
    c->req_chunk.forbid[0] = pcfg(c)->token_header;
    c->req_chunk.forbid[1] = pcfg(c)->resource_header;
    up_timeouts(uc, u->timeout_ms);
    bufferevent_setwatermark(ub, EV_READ, 0, buf);
    bufferevent_setwatermark(ub, EV_WRITE, buf / 2, 0);
    bufferevent_setcb(ub, up_read_cb, up_write_cb, up_event_cb, c);
    c->bp_up = c->bp_down = false;
    bufferevent_disable(ub, EV_WRITE);
    bufferevent_enable(ub, EV_READ);
    write_request_head(c, bufferevent_get_output(ub));
    if (c->rq->h.expect_continue && !c->req_done &&
        evbuffer_get_length(c_in(c)) == 0) {
        /* The decision is made and the upstream is ready: ask for the
         * body. The upstream gets no Expect, so sends no 100 of its own.
         * Like every answer tidemark makes itself, it says so. */
        static const char cont[] =
            "HTTP/1.1 100 Continue\r\n" PROBLEM_HEADER ": continue\r\n\r\n";

        evbuffer_add(c_out(c), cont, sizeof(cont) - 1);
    }
    mark_dirty(c);
    /* A client that stops sending its body or reading its answer must
     * not hold the upstream connection forever. */
    client_timeouts(c, !c->req_done);
    pump_request_body(c);
}

static void
up_ready(void *arg, struct up_conn *uc, bool ok)
{
    struct client *c = arg;

    if (!ok) {
        int err = errno;
        c->up = NULL;
        c->px->stats.upstream_errors++;
        metrics_upstream_error(c->px->metrics, up_cfg(c->pool)->name,
                               err == ETIMEDOUT);
        log_error("conn=%" PRIu64 " upstream %s: connect failed: %s", c->id,
                  up_cfg(c->pool)->name, strerror(err));
        refuse_status(c, 502, "upstream unreachable",
                      "the upstream could not be reached");
        client_pump(c);
        return;
    }
    attach(c, uc);
}

static void
start_forward(struct client *c)
{
    struct up_conn *uc = up_take_idle(c->pool);

    if (uc != NULL) {
        attach(c, uc);
        return;
    }
    c->state = CS_CONNECT;
    c->up = up_connect(c->pool, up_ready, c);
    if (c->up == NULL) {
        c->px->stats.upstream_errors++;
        metrics_upstream_error(c->px->metrics, up_cfg(c->pool)->name, false);
        refuse_status(c, 502, "upstream unreachable",
                      "cannot open a connection to the upstream");
        client_pump(c);
    }
}

/* One of the request's queued slots may go; it forwards once none is
 * queued. */
static void
order_go(void *arg)
{
    struct client *c = arg;

    if (--c->order_wait == 0) {
        event_active(c->kick, EV_TIMEOUT, 1);
    }
}

/* The request's writes are over (or never started): free its slots. */
static void
leave_order(struct client *c, int grace_ms)
{
    if (c->slot != NULL) {
        order_leave(c->px->order, c->slot, grace_ms);
        c->slot = NULL;
    }
    if (c->src_slot != NULL) {
        order_leave(c->px->order, c->src_slot, grace_ms);
        c->src_slot = NULL;
    }
    c->order_wait = 0;
}

static void
kick_cb(evutil_socket_t fd, short what, void *arg)
{
    struct client *c = arg;

    lib_enter(&c->px->log);
    (void)fd;
    (void)what;
    if (c->state == CS_ORDER) {
        start_forward(c);
    }
}

/* Count a decision, overall and for the request's route. */
static void
decision(struct client *c, enum outcome o)
{
    struct tm_stats *st = &c->px->stats;

    switch (o) {
    case OUT_ACCEPTED:
        st->accepted++;
        break;
    case OUT_STALE:
        st->stale++;
        break;
    case OUT_MISSING:
        st->missing++;
        break;
    case OUT_INVALID:
        st->invalid++;
        break;
    case OUT_FORBIDDEN:
        st->forbidden++;
        break;
    case OUT_STORE_ERROR:
        st->unavailable++;
        break;
    default:
        st->bypassed++;
        break;
    }
    metrics_decision(c->px->metrics, c->route_name, o);
}

static void stale_on(struct client *c, const char *res, int64_t mark);

/* A MOVE's second raise took a store round trip: a higher token may have
 * been accepted on its first resource meanwhile, and forwarding now
 * would reach the backend after that newer write. Stale then. (The
 * cached bound fence_check gives is the cached mark itself whenever that
 * is above the token.) */
static bool
overtaken(struct client *c)
{
    struct fence *f = c->px->fence;
    int64_t m = fence_check(f, c->resource, c->rlen, c->token);

    if (m > c->token) {
        stale_on(c, c->resource, m);
        return true;
    }
    m = c->src_len > 0 ? fence_check(f, c->src, c->src_len, c->token) : 0;
    if (m > c->token) {
        stale_on(c, c->src, m);
        return true;
    }
    return false;
}

/* Take the resource's turn in the ordering gate: one more slot queued
 * when it must wait. false when out of memory. */
static bool
enter_order(struct client *c, const char *res, size_t len,
            struct order_slot **slot)
{
    bool now = false;

    *slot = order_enter(c->px->order, res, len, c->token, order_go, c, &now);
    if (*slot != NULL && !now) {
        c->order_wait++;
    }
    return *slot != NULL;
}

/* The write is accepted on every resource it writes: wait for the turn
 * of each, then forward. */
static void
forward_fenced(struct client *c)
{
    if (c->src_len > 0 && overtaken(c)) {
        return;
    }
    decision(c, OUT_ACCEPTED);
    recent_mark(&c->px->recent, c->resource, c->mark);
    if (c->src_len > 0) {
        recent_mark(&c->px->recent, c->src, c->src_mark);
    }
    c->order_wait = 0;
    if (!enter_order(c, c->resource, c->rlen, &c->slot) ||
        (c->src_len > 0 && !enter_order(c, c->src, c->src_len, &c->src_slot))) {
        leave_order(c, 0);
        refuse_status(c, 503, "out of memory", "try again");
        client_pump(c);
        return;
    }
    if (c->order_wait == 0) {
        start_forward(c);
    } else {
        c->state = CS_ORDER;
    }
}

/* ---- the store ------------------------------------------------------- */

static void
unavailable(struct client *c, const char *why)
{
    struct problem p = {.status = 503, .detail = why, .retry_after = 1};

    decision(c, OUT_STORE_ERROR);
    refuse(c, &p, "unavailable");
}

/* 409: the token is below res's mark. */
static void
stale_on(struct client *c, const char *res, int64_t mark)
{
    struct problem p = {
        .status = 409, .token = c->token, .mark = mark, .resource = res};

    c->mark = mark;
    decision(c, OUT_STALE);
    refuse(c, &p, "stale");
}

static void
stale(struct client *c)
{
    stale_on(c, c->resource, c->mark);
}

static void start_raise(struct client *c, bool src);

/* Ask the store for the next mark that needs it (the Destination's
 * first, then a MOVE's source); forward once none does. */
static void
next_raise(struct client *c)
{
    if (c->raise_res) {
        start_raise(c, false);
    } else if (c->raise_src) {
        start_raise(c, true);
    } else {
        forward_fenced(c);
    }
}

static void
raise_done(void *arg, enum store_result res, int64_t mark)
{
    struct client *c = arg;
    /* The Destination's raise comes first; raise_res is cleared when it
     * is accepted, so a raise answered after that is the source's. */
    bool src = !c->raise_res;
    enum decision d;

    c->raise = NULL;
    evtimer_del(c->timer);
    if (res == STORE_ERROR) {
        c->px->stats.store_errors++;
    }
    d = decide_store(c->mode, res != STORE_ERROR, res == STORE_STALE);
    switch (d) {
    case DECIDE_ACCEPT:
        if (src) {
            c->src_mark = mark;
            c->raise_src = false;
        } else {
            c->mark = mark;
            c->raise_res = false;
        }
        next_raise(c);
        break;
    case DECIDE_STALE:
        stale_on(c, src ? c->src : c->resource, mark);
        break;
    case DECIDE_FORWARD:
        log_warn("conn=%" PRIu64 " store unavailable: route=%s resource=%s "
                 "token=%" PRId64 " forwarded unfenced (efficiency)",
                 c->id, c->route_name, c->resource, c->token);
        decision(c, OUT_BYPASSED);
        start_forward(c);
        break;
    default:
        unavailable(c, "the mark store cannot be used; try again");
        break;
    }
    client_pump(c);
}

/* Ask the store to raise the mark of c->resource, or of c->src. */
static void
start_raise(struct client *c, bool src)
{
    struct tm_proxy *px = c->px;
    const char *res = src ? c->src : c->resource;
    size_t len = src ? c->src_len : c->rlen;

    c->raise = fence_raise(px->fence, res, len, c->token, raise_done, c);
    if (c->raise == NULL) {
        unavailable(c, "out of memory");
        return;
    }
    c->state = CS_STORE;
    timer_arm(c, px->cfg->store.timeout_ms);
}

/* ---- a new request --------------------------------------------------- */

/* The first route for method on path (a canonical path, so captures are
 * canonical), or NULL. A route applies to the methods it lists and, when
 * it fences (mode is not off), to its profile's write methods: on an off
 * route they would pass unfenced the writes that a later, fenced route of
 * the same path would have caught. */
static const struct cfg_route *
match_route(const struct tm_config *cfg, struct tm_slice method,
            struct tm_slice path, struct tm_slice caps[TM_MAX_CAPTURES])
{
    for (size_t i = 0; i < cfg->nroutes; i++) {
        const struct cfg_route *r = &cfg->routes[i];
        if (!methods_has(&r->methods, method.p, method.len) &&
            (r->mode == TM_MODE_OFF ||
             !profile_write_method(r->profile, method))) {
            continue;
        }
        if (tmpl_match(&r->path, path.p, path.len, caps)) {
            return r;
        }
    }
    return NULL;
}

/* A request that could reach the backend as another method than the one
 * its routes were matched with: a lower-case method, a method override
 * header or a _method query parameter. NULL when clean, else the 400's
 * detail. */
static const char *
method_disguised(const struct http_request *h)
{
    const char *why = reqcheck_method(h->method.p, h->method.len);
    const char *q = h->path.p + h->path.len;
    const char *end = h->target.p + h->target.len;

    if (why != NULL) {
        return why;
    }
    for (size_t i = 0; i < h->nheaders; i++) {
        struct tm_slice n = h->headers[i].name;
        if (reqcheck_override_header(n.p, n.len)) {
            return REQCHECK_OVERRIDE_DETAIL;
        }
    }
    if (q < end && *q == '?' &&
        reqcheck_override_query(q + 1, (size_t)(end - q - 1))) {
        return REQCHECK_OVERRIDE_DETAIL;
    }
    return NULL;
}

/* Read the request path into its canonical form, after the head in
 * rq->bytes (read_head made room: it is never longer than the path).
 * "OPTIONS *" stays "*". NULL, or why the path is refused. */
static const char *
canonical_path(struct request *rq)
{
    const struct http_request *h = &rq->h;
    char *out = rq->bytes + h->head_len;
    size_t len = 0;
    const char *why = NULL;

    if (h->path.len == 1 && h->path.p[0] == '*') {
        rq->cpath = h->path;
        return NULL;
    }
    if (!canon_path(h->path.p, h->path.len, out, h->path.len + 1, &len, &why)) {
        return why;
    }
    rq->cpath.p = out;
    rq->cpath.len = len;
    return NULL;
}

static struct up_pool *
default_pool(const struct gen *g)
{
    const struct tm_config *cfg = g->cfg;

    for (size_t i = 0; i < cfg->nupstreams; i++) {
        if (strcmp(cfg->upstreams[i].name, "default") == 0) {
            return g->pools[i];
        }
    }
    return cfg->nupstreams > 0 ? g->pools[0] : NULL;
}

/* A request that tries to hide a fencing header: the token or resource
 * header named in Connection (a proxy would drop it, another might not).
 * NULL when clean. (The parser has refused the other spellings of these
 * names.) */
static const char *
smuggled_header(const struct cfg_proxy *pc, const struct http_request *h)
{
    for (size_t i = 0; i < h->nheaders; i++) {
        const struct http_header *f = &h->headers[i];
        if (f->hop && (is_header(f->name, pc->token_header) ||
                       is_header(f->name, pc->resource_header))) {
            return "a fencing header named in Connection";
        }
    }
    return NULL;
}

/* ---- requests that write elsewhere (profile = webdav | s3) ---------- */

static bool
fences(const struct cfg_route *r, enum tm_profile p)
{
    return r != NULL && r->profile == p && r->mode != TM_MODE_OFF;
}

/* The upstream a request on r (NULL: unmatched) goes to under g. */
static struct up_pool *
route_pool(const struct gen *g, const struct cfg_route *r)
{
    return r != NULL ? g->pools[r->upstream_idx] : default_pool(g);
}

/* Whether a route of profile p fences requests that go to pool. */
static bool
pool_fenced(const struct gen *g, enum tm_profile p, struct up_pool *pool)
{
    for (size_t i = 0; i < g->cfg->nroutes; i++) {
        const struct cfg_route *r = &g->cfg->routes[i];
        if (fences(r, p) && g->pools[r->upstream_idx] == pool) {
            return true;
        }
    }
    return false;
}

/* The request's query (after '?', without it); empty when none. */
static struct tm_slice
request_query(const struct http_request *h)
{
    const char *end = h->target.p + h->target.len;
    const char *q = h->path.p != NULL ? h->path.p + h->path.len : end;
    struct tm_slice v = {q, 0};

    if (q < end && *q == '?') {
        v.p = q + 1;
        v.len = (size_t)(end - v.p);
    }
    return v;
}

/* The request's own authority: an absolute-form target's, else Host's
 * (empty when there is none). */
static struct tm_slice
request_authority(const struct http_request *h)
{
    struct tm_slice a = {"", 0};
    const char *t = h->target.p;
    int hi;

    if (h->target.len > 0 && t[0] != '/' && t[0] != '*' && h->path.p != NULL) {
        const char *start = memchr(t, ':', h->target.len);
        if (start != NULL && start + 3 <= h->path.p) {
            a.p = start + 3; /* past "://" */
            a.len = (size_t)(h->path.p - a.p);
        }
        return a;
    }
    hi = http_find_header(h->headers, h->nheaders, 0, "Host");
    return hi >= 0 ? h->headers[hi].value : a;
}

/* Why an S3 request must be refused, or NULL: it writes keys its path
 * does not name (multi-object delete, form upload, rename) on an
 * upstream with fenced s3 routes, and its path is one such route's or
 * above it (the bucket), where the keys it names may be fenced. A
 * rename names its source key in a header: refused on the whole
 * upstream. */
static const char *
s3_refusal(const struct gen *g, const struct http_request *h,
           struct tm_slice path, struct up_pool *pool)
{
    struct tm_slice caps[TM_MAX_CAPTURES];
    bool form = false, rename = false;
    const char *why;

    if (!pool_fenced(g, TM_PROFILE_S3, pool)) {
        return NULL;
    }
    for (size_t i = 0; i < h->nheaders; i++) {
        const struct http_header *f = &h->headers[i];
        /* In any spelling a gateway may read as the header (hname.h). */
        if (hname_same(f->name.p, f->name.len, "Content-Type")) {
            form = form || media_is_form(f->value);
        } else if (hname_same(f->name.p, f->name.len, "x-amz-rename-source")) {
            rename = true;
        }
    }
    why = s3_elsewhere(h->method, request_query(h), form, rename);
    if (why == NULL || rename) {
        return why;
    }
    for (size_t i = 0; i < g->cfg->nroutes; i++) {
        const struct cfg_route *r = &g->cfg->routes[i];
        if (fences(r, TM_PROFILE_S3) && g->pools[r->upstream_idx] == pool &&
            (tmpl_above(&r->path, path.p, path.len) ||
             tmpl_match(&r->path, path.p, path.len, caps))) {
            return why;
        }
    }
    return NULL;
}

/* Take r as the request's route: its mode, upstream
 * and body limit. false when the request was refused (413). */
static bool
use_route(struct client *c, const struct cfg_route *r, enum tm_mode mode)
{
    const struct http_request *h = &c->rq->h;

    c->route = r;
    c->route_name = r->name;
    c->mode = mode;
    c->pool = c->gen->pools[r->upstream_idx];
    c->max_body = r->max_body > 0 ? (uint64_t)r->max_body : UINT64_MAX;
    if (h->body == HTTP_BODY_LENGTH && h->content_length > c->max_body) {
        struct problem p = {.status = 413};
        c->close_after = true;
        refuse(c, &p, "too large");
        return false;
    }
    return true;
}

/* The token's status for res under verify v; ti: the token header's
 * index, or -1. Sets c->token. */
static enum token_status
check_token(struct client *c, int ti, enum tm_verify v, const char *res,
            size_t len)
{
    const struct cfg_tokens *tk = c->px->tokens;
    const struct http_header *f;

    if (ti < 0) {
        return TOKEN_MISSING;
    }
    f = &c->rq->h.headers[ti];
    return token_check(v, tk->key, tk->key_len, res, len, f->value.p,
                       f->value.len, &c->token);
}

/* The decision for one resource before the store, on the cache's bound
 * (on a shared store, a token equal to the cached mark is asked). */
static enum decision
decide_one(struct client *c, enum token_status ts, const char *res, size_t len)
{
    return decide_request(c->mode, ts, c->token,
                          fence_check(c->px->fence, res, len, c->token));
}

static void act(struct client *c, enum decision d);

/* The Destination of a COPY or MOVE, parsed and canonicalized into path
 * (DAV_DEST_MAX bytes), and the route that matches it for the same
 * method. NULL with *why when there is no usable Destination. */
static const struct cfg_route *
dav_dest_route(struct client *c, char *path,
               struct tm_slice caps[TM_MAX_CAPTURES], const char **why)
{
    const struct http_request *h = &c->rq->h;
    int di = http_find_header(h->headers, h->nheaders, 0, "Destination");
    struct tm_slice dpath = {path, 0};

    if (di < 0) {
        *why = "a COPY or MOVE needs a Destination";
        return NULL;
    }
    if (http_find_header(h->headers, h->nheaders, (size_t)di + 1,
                         "Destination") >= 0) {
        *why = "more than one Destination header";
        return NULL;
    }
    if (!dav_destination(h->headers[di].value, request_authority(h), path,
                         DAV_DEST_MAX, &dpath.len, &c->dest_raw, why)) {
        c->dest_raw.p = NULL;
        return NULL;
    }
    *why = NULL;
    return match_route(c->gen->cfg, h->method, dpath, caps);
}

/* A COPY or MOVE on an upstream where WebDAV is fenced: fenced at its
 * Destination, and at its source too when r (the source's route) fences
 * it and either the request is a MOVE or r is no webdav route (to which
 * a COPY writes its own path); both marks checked with the same token
 * and raised, the Destination's first. false when it is none of
 * tidemark's business (go on as for any request); true when it was
 * answered or is under way. */
static bool
dav_request(struct client *c, const struct cfg_route *r,
            struct tm_slice caps[TM_MAX_CAPTURES], int ti)
{
    const struct gen *g = c->gen;
    struct up_pool *pool = route_pool(g, r);
    bool dav = fences(r, TM_PROFILE_WEBDAV);
    bool src = r != NULL && r->mode != TM_MODE_OFF &&
               (!dav || dav_method(c->rq->h.method) == DAV_MOVE);
    struct tm_slice dcaps[TM_MAX_CAPTURES];
    char path[DAV_DEST_MAX];
    const struct cfg_route *dr;
    const char *why = NULL;
    enum decision d1, d2, d;

    if (pool == NULL || (!dav && !pool_fenced(g, TM_PROFILE_WEBDAV, pool))) {
        return false;
    }
    dr = dav_dest_route(c, path, dcaps, &why);
    if (why == NULL && (dr == NULL || dr->mode == TM_MODE_OFF ||
                        g->pools[dr->upstream_idx] != pool)) {
        if (!dav) {
            c->dest_raw.p = NULL;
            return false; /* as any request on r, or unmatched */
        }
        why = "the Destination is not under a fenced route";
    }
    if (why == NULL &&
        (dr->resource_from_header || (src && r->resource_from_header))) {
        why = "a COPY or MOVE onto a fenced Destination from or to a route "
              "with resource = header";
    }
    if (why != NULL) {
        c->route_name = r != NULL ? r->name : NULL;
        decision(c, OUT_INVALID);
        refuse_status(c, 400, "invalid", why);
        return true;
    }
    /* The stricter mode of the two ends (correctness < efficiency). */
    if (!use_route(c, dav || src ? r : dr,
                   (dav || src) && r->mode < dr->mode ? r->mode : dr->mode)) {
        return true;
    }
    c->rlen =
        rtmpl_expand(&dr->resource, dcaps, c->resource, sizeof(c->resource));
    if (src) {
        c->src_len = rtmpl_expand(&r->resource, caps, c->src, sizeof(c->src));
        if (c->src_len == 0) {
            c->rlen = 0;
        } else if (c->src_len == c->rlen &&
                   memcmp(c->src, c->resource, c->rlen) == 0) {
            c->src_len = 0; /* one resource: one mark */
        }
    }
    if (c->rlen == 0) {
        decision(c, OUT_INVALID);
        refuse_status(c, 400, "invalid", "the resource name is too long");
        return true;
    }
    d1 = decide_one(c, check_token(c, ti, dr->verify, c->resource, c->rlen),
                    c->resource, c->rlen);
    d2 = c->src_len == 0
             ? d1
             : decide_one(c, check_token(c, ti, r->verify, c->src, c->src_len),
                          c->src, c->src_len);
    c->raise_res = d1 == DECIDE_RAISE;
    c->raise_src = c->src_len > 0 && d2 == DECIDE_RAISE;
    if (d1 == DECIDE_ACCEPT) {
        c->mark = c->token;
    }
    if (d2 == DECIDE_ACCEPT) {
        c->src_mark = c->token;
    }
    d = decide_pair(d1, d2);
    if (d != d1 && (d == DECIDE_STALE || d == DECIDE_FORBIDDEN)) {
        /* Refused for the source: the answer names it. */
        memcpy(c->resource, c->src, c->src_len + 1);
        c->rlen = c->src_len;
    }
    act(c, d);
    return true;
}

/* Do what the decision before the store says. */
static void
act(struct client *c, enum decision d)
{
    struct tm_proxy *px = c->px;

    switch (d) {
    case DECIDE_FORWARD:
        decision(c, OUT_BYPASSED);
        start_forward(c);
        break;
    case DECIDE_ACCEPT:
        c->mark = c->token;
        c->src_mark = c->token;
        forward_fenced(c);
        break;
    case DECIDE_RAISE:
        next_raise(c);
        break;
    case DECIDE_STALE:
        /* The token is below the cached mark, which fence_check gives as
         * is (it lowers only a mark equal to the token). */
        c->mark = fence_check(px->fence, c->resource, c->rlen, c->token);
        stale(c);
        break;
    case DECIDE_MISSING: {
        struct problem p = {.status = 428};
        decision(c, OUT_MISSING);
        refuse(c, &p, "missing");
        break;
    }
    case DECIDE_FORBIDDEN:
        decision(c, OUT_FORBIDDEN);
        refuse_status(c, 403, "forbidden",
                      "the token is unsigned, forged or issued for another "
                      "resource");
        break;
    case DECIDE_INVALID:
        decision(c, OUT_INVALID);
        refuse_status(c, 400, "invalid",
                      "the token must be decimal digits, 1 to "
                      "9223372036854775807");
        break;
    default:
        unavailable(c, "the mark store cannot be used; try again");
        break;
    }
}

/* Route, resource, token, decision. */
static void
handle_request(struct client *c)
{
    struct tm_proxy *px = c->px;
    const struct cfg_proxy *pc;
    const struct http_request *h = &c->rq->h;
    struct tm_slice caps[TM_MAX_CAPTURES];
    const struct cfg_route *r;
    int ti = -1, ri;
    enum decision d;
    const char *why;
    char detail[160];

    px->stats.requests++;
    /* Everything below reads the request's generation, to its end. */
    c->gen = gen_hold(px);
    pc = &c->gen->cfg->proxy;
    c->route = NULL;
    c->route_name = NULL;
    c->max_body = UINT64_MAX;
    c->rlen = 0;
    c->resource[0] = '\0';
    c->src_len = 0;
    c->src[0] = '\0';
    c->raise_res = c->raise_src = false;
    c->dest_raw.p = NULL;
    c->dest_raw.len = 0;
    c->token = 0;
    c->mark = 0;
    c->src_mark = 0;
    c->close_after = !h->keep_alive;

    if ((why = method_disguised(h)) != NULL) {
        decision(c, OUT_INVALID);
        refuse_status(c, 400, "invalid", why);
        return;
    }
    if ((why = canonical_path(c->rq)) != NULL) {
        snprintf(detail, sizeof(detail), "the request path: %s", why);
        decision(c, OUT_INVALID);
        refuse_status(c, 400, "invalid", detail);
        return;
    }
    if (slice_eq(h->method, "TRACE")) {
        /* TRACE would echo what tidemark adds, credentials included. */
        struct problem p = {.status = 405};
        refuse(c, &p, "method");
        return;
    }
    if ((why = smuggled_header(pc, h)) != NULL) {
        decision(c, OUT_INVALID);
        refuse_status(c, 400, "invalid", why);
        return;
    }
    ti = http_find_header(h->headers, h->nheaders, 0, pc->token_header);
    if (ti >= 0 && http_find_header(h->headers, h->nheaders, (size_t)ti + 1,
                                    pc->token_header) >= 0) {
        decision(c, OUT_INVALID);
        refuse_status(c, 400, "invalid", "more than one token header");
        return;
    }

    r = match_route(c->gen->cfg, h->method, c->rq->cpath, caps);
    if (route_pool(c->gen, r) != NULL &&
        (why = s3_refusal(c->gen, h, c->rq->cpath, route_pool(c->gen, r))) !=
            NULL) {
        c->route_name = r != NULL ? r->name : NULL;
        decision(c, OUT_INVALID);
        refuse_status(c, 400, "invalid", why);
        return;
    }
    if (dav_method(h->method) != DAV_NONE && dav_request(c, r, caps, ti)) {
        return;
    }
    if (r == NULL) {
        if (pc->unmatched_reject) {
            struct problem p = {.status = 404,
                                .detail = "no route matches this request"};
            refuse(c, &p, "unmatched");
            return;
        }
        c->pool = default_pool(c->gen);
        if (c->pool == NULL) {
            struct problem p = {.status = 404,
                                .detail = "no route matches this request"};
            refuse(c, &p, "unmatched");
            return;
        }
        c->mode = TM_MODE_OFF;
        decision(c, OUT_BYPASSED);
        start_forward(c);
        return;
    }
    if (!use_route(c, r, r->mode)) {
        return;
    }

    if (r->resource_from_header) {
        ri = http_find_header(h->headers, h->nheaders, 0, pc->resource_header);
        if (ri >= 0 && http_find_header(h->headers, h->nheaders, (size_t)ri + 1,
                                        pc->resource_header) >= 0) {
            refuse_status(c, 400, "invalid", "more than one resource header");
            return;
        }
        if (ri < 0) {
            snprintf(detail, sizeof(detail), "the resource header is missing");
        } else if (!canon_name(h->headers[ri].value.p, h->headers[ri].value.len,
                               c->resource, sizeof(c->resource), &c->rlen,
                               &why)) {
            snprintf(detail, sizeof(detail), "the resource header: %s", why);
        }
        if (c->rlen == 0 && r->mode != TM_MODE_OFF) {
            decision(c, OUT_INVALID);
            refuse_status(c, 400, "invalid", detail);
            return;
        }
    } else {
        c->rlen =
            rtmpl_expand(&r->resource, caps, c->resource, sizeof(c->resource));
        if (c->rlen == 0) {
            decision(c, OUT_INVALID);
            refuse_status(c, 400, "invalid", "the resource name is too long");
            return;
        }
    }
    d = decide_one(c, check_token(c, ti, r->verify, c->resource, c->rlen),
                   c->resource, c->rlen);
    c->raise_res = d == DECIDE_RAISE;
    act(c, d);
}

/* Rebase the parsed head's slices from the input buffer into copy. */
static void
rebase(struct http_request *h, const char *from, char *to)
{
#define REBASE(s)                                                              \
    do {                                                                       \
        if ((s).p != NULL) {                                                   \
            (s).p = to + ((s).p - from);                                       \
        }                                                                      \
    } while (0)
    REBASE(h->method);
    REBASE(h->target);
    REBASE(h->path);
    for (size_t i = 0; i < h->nheaders; i++) {
        REBASE(h->headers[i].name);
        REBASE(h->headers[i].value);
    }
#undef REBASE
}

static void
parse_error(struct client *c, enum http_rc rc, const char *why)
{
    struct problem p = {.status = 400};

    switch (rc) {
    case HTTP_HEAD_TOO_LARGE:
        p.status = 431;
        p.detail = "the request head is too large";
        break;
    case HTTP_URI_TOO_LONG:
        p.status = 414;
        p.detail = "the request target is too long";
        break;
    case HTTP_NOT_IMPL:
        p.status = 501;
        p.detail = "unsupported transfer coding";
        break;
    case HTTP_BAD_VERSION:
        p.status = 505;
        p.detail = "only HTTP/1.0 and HTTP/1.1 are served";
        break;
    default:
        p.detail = "malformed or ambiguous request";
        break;
    }
    c->px->stats.bad_requests++;
    c->have_rq = false;
    recent_refusal(&c->px->recent, p.status, "malformed", NULL, NULL, 0, 0);
    log_warn("conn=%" PRIu64 " refused %d: %s%s%s", c->id, p.status, p.detail,
             why != NULL ? ": " : "", why != NULL ? why : "");
    c->close_after = true;
    answer(c, &p);
}

/* ---- idle connections ------------------------------------------------
 * A connection waiting for a request head with nothing buffered, or
 * lingering after its last answer went out, can be closed without losing
 * anything: at max_connections the oldest such one makes room for a new
 * connection (as nginx reuses its keep-alive and waiting connections),
 * so silent or forgotten connections cannot lock real clients out.
 * px->idle_first is the oldest. */

static void
idle_enter(struct client *c)
{
    struct tm_proxy *px = c->px;

    if (c->idle) {
        return;
    }
    c->idle = true;
    c->idle_next = NULL;
    c->idle_prev = px->idle_last;
    if (px->idle_last != NULL) {
        px->idle_last->idle_next = c;
    } else {
        px->idle_first = c;
    }
    px->idle_last = c;
}

static void
idle_leave(struct client *c)
{
    struct tm_proxy *px = c->px;

    if (!c->idle) {
        return;
    }
    if (c->idle_prev != NULL) {
        c->idle_prev->idle_next = c->idle_next;
    } else {
        px->idle_first = c->idle_next;
    }
    if (c->idle_next != NULL) {
        c->idle_next->idle_prev = c->idle_prev;
    } else {
        px->idle_last = c->idle_prev;
    }
    c->idle = false;
    c->idle_prev = c->idle_next = NULL;
}

bool
client_evict_idle(struct tm_proxy *px)
{
    for (struct client *c = px->idle_first; c != NULL; c = c->idle_next) {
        /* An answer still on its way out is not given up. */
        if (evbuffer_get_length(c_out(c)) == 0 &&
            evbuffer_get_length(c_in(c)) == 0) {
            log_debug("conn=%" PRIu64 " closed while idle: max_connections "
                      "reached",
                      c->id);
            client_close(c, 0);
            return true;
        }
    }
    return false;
}

/* Between requests: read up to buffer_size, and at least a whole head,
 * as the current configuration says (a reload may change both). */
static void
read_watermark(struct client *c)
{
    size_t hi = (size_t)pcfg(c)->buffer_size;

    if (hi < c->px->limits.max_head + 1) {
        hi = c->px->limits.max_head + 1;
    }
    if (hi != c->read_hi) {
        c->read_hi = hi;
        bufferevent_setwatermark(c->bev, EV_READ, 0, hi);
    }
}

/* Make c->rq hold a head of len bytes (1 KiB at least). false when out
 * of memory. */
static bool
request_space(struct client *c, size_t len)
{
    struct request *rq;

    if (len < 1024) {
        len = 1024;
    }
    if (c->rq != NULL && c->rq->cap >= len) {
        return true;
    }
    rq = realloc(c->rq, sizeof(*c->rq) + len);
    if (rq == NULL) {
        return false;
    }
    c->rq = rq;
    c->rq->cap = len;
    return true;
}

/* In CS_HEAD: parse the next head if it is complete. */
static void
read_head(struct client *c)
{
    struct tm_proxy *px = c->px;
    struct evbuffer *in = c_in(c);
    size_t len = evbuffer_get_length(in);
    size_t n = len < px->limits.max_head + 1 ? len : px->limits.max_head + 1;
    const char *fence[2] = {px->cfg->proxy.token_header,
                            px->cfg->proxy.resource_header};
    struct http_request *h;
    enum http_rc rc;
    char *p;

    if (len == 0 && c->client_eof) {
        client_close(c, 0);
        return;
    }
    if (len == 0) {
        /* Before its first request a connection gets header_timeout_ms
         * to start one: a silent connection is not a keep-alive one. */
        if (c->timer_is_head || !evtimer_pending(c->timer, NULL)) {
            c->timer_is_head = false;
            timer_arm(c, c->served ? pcfg(c)->idle_timeout_ms
                                   : pcfg(c)->header_timeout_ms);
        }
        /* The head buffer is kept while requests follow each other
         * (pipelined), and given back while the connection waits: ten
         * thousand idle keep-alive connections hold no request space. */
        free(c->rq);
        c->rq = NULL;
        idle_enter(c);
        return;
    }
    idle_leave(c);
    if (!c->timer_is_head) {
        c->timer_is_head = true;
        timer_arm(c, pcfg(c)->header_timeout_ms);
        read_watermark(c);
    }
    /* Parse into the loop's scratch space: a connection holds request
     * space only once its head is complete. */
    h = px->scratch;
    p = (char *)evbuffer_pullup(in, (ev_ssize_t)n);
    rc = http_parse_request(p, n, &px->limits, fence, h);
    if (rc == HTTP_INCOMPLETE) {
        if (c->client_eof) {
            client_close(c, 0);
        }
        return;
    }
    if (rc != HTTP_OK) {
        parse_error(c, rc, h->error);
        return;
    }
    /* Room for the head and, after it, the canonical path. */
    if (!request_space(c, h->head_len + h->path.len + 1)) {
        client_close(c, 0);
        return;
    }
    c->rq->h = *h;
    h = &c->rq->h;
    memcpy(c->rq->bytes, p, h->head_len);
    rebase(h, p, c->rq->bytes);
    c->have_rq = true;
    c->served = true;
    if (log_get_level() >= TM_LOG_INFO) {
        clock_gettime(CLOCK_MONOTONIC, &c->t0);
    }
    evbuffer_drain(in, h->head_len);
    evtimer_del(c->timer);
    c->timer_is_head = false;
    handle_request(c);
}

/* Feed ch the bytes at the front of in that belong to its chunked body;
 * return how many they are, or (size_t)-1 on a framing error. */
static size_t
chunked_span(struct evbuffer *in, struct http_chunked *ch)
{
    size_t len = evbuffer_get_length(in), take = 0;
    struct evbuffer_ptr pos;

    evbuffer_ptr_set(in, &pos, 0, EVBUFFER_PTR_SET);
    while (take < len && !ch->done) {
        struct evbuffer_iovec v;
        size_t used;
        if (evbuffer_peek(in, -1, &pos, &v, 1) < 1) {
            break;
        }
        used = http_chunked_feed(ch, v.iov_base, v.iov_len);
        if (used == (size_t)-1) {
            return used;
        }
        take += used;
        evbuffer_ptr_set(in, &pos, used, EVBUFFER_PTR_ADD);
    }
    return take;
}

/* In CS_DISCARD: drop the body of a request answered locally. */
static void
discard_body(struct client *c)
{
    struct evbuffer *in = c_in(c);
    size_t len = evbuffer_get_length(in), n;

    if (c->req_kind == HTTP_BODY_LENGTH) {
        n = len < c->discard_left ? len : (size_t)c->discard_left;
        evbuffer_drain(in, n);
        c->discard_left -= n;
        if (c->discard_left == 0) {
            c->state = CS_HEAD;
        }
        return;
    }
    n = chunked_span(in, &c->req_chunk);
    if (n == (size_t)-1 || n > c->discard_left) {
        c->state = CS_CLOSING;
        return;
    }
    c->discard_left -= n;
    evbuffer_drain(in, n);
    if (c->req_chunk.done) {
        c->state = CS_HEAD;
    }
}

/* ---- closing --------------------------------------------------------- */

static void
linger_read(struct client *c)
{
    struct evbuffer *in = c_in(c);
    size_t len = evbuffer_get_length(in);

    evbuffer_drain(in, len);
    if (len >= c->linger_left) {
        client_close(c, 0);
        return;
    }
    c->linger_left -= len;
}

/* In CS_CLOSING: once the answer is out, stop sending and read what the
 * client still sends for a short while, so that the answer is not lost
 * to a reset. */
static void
closing(struct client *c)
{
    if (evbuffer_get_length(c_out(c)) > 0) {
        bufferevent_enable(c->bev, EV_WRITE);
        return;
    }
    if (c->client_eof) {
        client_close(c, 0);
        return;
    }
    if (c->linger_left == 0) {
        c->linger_left = LINGER_BYTES;
        shutdown(bufferevent_getfd(c->bev), SHUT_WR);
        bufferevent_setwatermark(c->bev, EV_READ, 0, 0);
        bufferevent_set_timeouts(c->bev, NULL, NULL);
        c->read_tmo = false;
        bufferevent_enable(c->bev, EV_READ);
        timer_arm(c, LINGER_MS);
        /* The answer is out: at max_connections, lingering gives way. */
        idle_enter(c);
    }
    linger_read(c);
}

/* Run the connection forward as far as it goes without waiting. */
static void
client_pump(struct client *c)
{
    size_t buf = (size_t)pcfg(c)->buffer_size;

    for (;;) {
        if (c->dead) {
            return;
        }
        switch (c->state) {
        case CS_HEAD:
            if (c->px->draining && evbuffer_get_length(c_in(c)) == 0) {
                idle_leave(c);
                c->close_after = true;
                c->state = CS_CLOSING;
                continue;
            }
            if (evbuffer_get_length(c_out(c)) >= buf) {
                /* The client is not reading its answers: wait. */
                c->bp_answers = true;
                bufferevent_disable(c->bev, EV_READ);
                return;
            }
            if (!c->client_eof) {
                bufferevent_enable(c->bev, EV_READ);
            }
            read_head(c);
            if (c->dead || c->state == CS_HEAD) {
                return;
            }
            continue;
        case CS_DISCARD:
            discard_body(c);
            if (c->state == CS_DISCARD) {
                if (c->client_eof) {
                    client_close(c, 0);
                }
                return;
            }
            continue;
        case CS_CLOSING:
            closing(c);
            return;
        default:
            return;
        }
    }
}

/* ---- the exchange with the upstream ---------------------------------- */

/* The upstream's answer is complete (or the exchange failed after the
 * answer began): release what the request held and go on. */
/* The access log: one line per forwarded request (refusals have theirs). */
static void
log_request(const struct client *c)
{
    const struct http_request *h = &c->rq->h;
    struct timespec t1;
    double ms;

    clock_gettime(CLOCK_MONOTONIC, &t1);
    ms = (double)(t1.tv_sec - c->t0.tv_sec) * 1e3 +
         (double)(t1.tv_nsec - c->t0.tv_nsec) / 1e6;
    log_info("conn=%" PRIu64 " request method=%.*s path=%.*s status=%d "
             "route=%s resource=%s token=%" PRId64 " mark=%" PRId64 " ms=%.3f",
             c->id, (int)h->method.len, h->method.p, (int)h->path.len,
             h->path.p, c->resp_status, c->route_name ? c->route_name : "-",
             c->rlen > 0 ? c->resource : "-", c->token, c->mark, ms);
}

static void
finish_exchange(struct client *c, bool up_ok)
{
    bool reuse = up_ok && c->resp_keep_alive && c->req_done &&
                 c->resp_kind != HTTP_BODY_CLOSE;
    uint64_t discard = (uint64_t)pcfg(c)->discard_limit; /* the request's */

    evtimer_del(c->timer);
    up_put(c->up, reuse);
    c->up = NULL;
    leave_order(c, 0);
    if (log_get_level() >= TM_LOG_INFO) {
        log_request(c);
    }
    request_free(c);
    c->bp_up = c->bp_down = false;
    client_timeouts(c, false);
    bufferevent_enable(c->bev, EV_READ);
    c->state = c->close_after ? CS_CLOSING : CS_HEAD;
    if (!c->req_done && !c->close_after) {
        /* The upstream answered before the whole body arrived: read the
         * rest and drop it (write_response_head made sure it is small). */
        c->state = CS_DISCARD;
        c->discard_left =
            c->req_kind == HTTP_BODY_LENGTH ? c->req_left : discard;
    }
    client_pump(c);
}

/* The exchange failed before an answer reached the client. */
static void
upstream_failed(struct client *c, int status, const char *why)
{
    struct problem p = {.status = status, .detail = why};
    bool timed_out = status == 504;
    int grace = timed_out ? pcfg(c)->order_grace_ms : 0;

    evtimer_del(c->timer);
    log_error("conn=%" PRIu64 " upstream %s: %s: route=%s resource=%s "
              "token=%" PRId64,
              c->id, up_cfg(c->pool)->name, why,
              c->route_name ? c->route_name : "-",
              c->rlen > 0 ? c->resource : "-", c->token);
    if (timed_out) {
        c->px->stats.upstream_timeouts++;
    } else {
        c->px->stats.upstream_errors++;
    }
    if (status == 502 || status == 504) {
        metrics_upstream_error(c->px->metrics, up_cfg(c->pool)->name,
                               timed_out);
    }
    up_put(c->up, false);
    c->up = NULL;
    leave_order(c, grace);
    client_timeouts(c, false);
    if (c->resp_started) {
        /* Part of the answer is out: only closing can tell the client. */
        client_close(c, 0);
        return;
    }
    if (!c->req_done) {
        c->close_after = true;
    }
    c->mark = 0;
    answer(c, &p);
    client_pump(c);
}

/* Back-pressure: a side stops reading while the other side's output holds
 * buffer_size bytes, and starts again once it is down to half. */
static void
pause_up(struct client *c)
{
    c->bp_up = true;
    bufferevent_disable(c->bev, EV_READ);
}

static void
pause_down(struct client *c)
{
    c->bp_down = true;
    bufferevent_disable(up_bev(c->up), EV_READ);
}

/* After output was written: resume what waited for room. */
static void
drained(struct client *c)
{
    size_t half = (size_t)pcfg(c)->buffer_size / 2;

    if (c->bp_up && c->up != NULL &&
        evbuffer_get_length(bufferevent_get_output(up_bev(c->up))) <= half) {
        c->bp_up = false;
        bufferevent_enable(c->bev, EV_READ);
        pump_request_body(c);
        if (c->dead) {
            return;
        }
    }
    if (c->bp_down && c->up != NULL && evbuffer_get_length(c_out(c)) <= half) {
        c->bp_down = false;
        bufferevent_enable(up_bev(c->up), EV_READ);
        pump_response(c);
        if (c->dead) {
            return;
        }
    }
    if (c->bp_answers && evbuffer_get_length(c_out(c)) <= half) {
        c->bp_answers = false;
        client_pump(c);
    }
}

/* Move request body bytes from the client to the upstream. */
static void
pump_request_body(struct client *c)
{
    struct bufferevent *ub = up_bev(c->up);
    struct evbuffer *in = c_in(c), *out = bufferevent_get_output(ub);
    size_t buf = (size_t)pcfg(c)->buffer_size;
    size_t len = evbuffer_get_length(in);

    if (c->req_done) {
        return;
    }
    if (c->req_kind == HTTP_BODY_LENGTH) {
        size_t n = len < c->req_left ? len : (size_t)c->req_left;
        evbuffer_remove_buffer(in, out, n);
        c->body_moved += n;
        c->req_left -= n;
        c->req_done = c->req_left == 0;
        mark_dirty(c);
    } else {
        size_t take = chunked_span(in, &c->req_chunk);
        if (take == (size_t)-1) {
            c->close_after = true;
            upstream_failed(c, 400,
                            c->req_chunk.error != NULL
                                ? c->req_chunk.error
                                : "malformed chunked request body");
            return;
        }
        c->body_seen += take;
        if (c->body_seen > c->max_body) {
            /* The upstream never gets the end of this body. */
            c->close_after = true;
            upstream_failed(c, 413, "chunked request body over max_body");
            return;
        }
        evbuffer_remove_buffer(in, out, take);
        c->body_moved += take;
        c->req_done = c->req_chunk.done;
        mark_dirty(c);
    }
    if (c->req_done) {
        c->req_sent_whole = true;
        evtimer_del(c->timer); /* the body rate check, if any */
        client_timeouts(c, false);
        if (c->client_eof) {
            bufferevent_disable(c->bev, EV_READ);
        }
        return;
    }
    if (evbuffer_get_length(out) >= buf) {
        pause_up(c);
    }
}

static void
up_write_cb(struct bufferevent *bev, void *arg)
{
    struct client *c = arg;

    lib_enter(&c->px->log);
    written(bev);
    drained(c);
}

/* Append "<prefix><v>\r\n" without printf: this runs per answer. */
static void
add_header_i64(struct evbuffer *out, const char *prefix, int64_t v)
{
    char buf[24];
    size_t n = sizeof(buf);
    uint64_t u = v < 0 ? 0 : (uint64_t)v;

    buf[--n] = '\n';
    buf[--n] = '\r';
    do {
        buf[--n] = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    evbuffer_add(out, prefix, strlen(prefix));
    evbuffer_add(out, buf + n, sizeof(buf) - n);
}

/* A header of the upstream's answer that only tidemark may set:
 * Tidemark-Error (which says tidemark answered) and Fencing-High-Water
 * (which says the fence accepted this write), in any spelling a client
 * may read as theirs. An upstream cannot fake either. */
static bool
ours_only(struct tm_slice name)
{
    return hname_same(name.p, name.len, PROBLEM_HEADER) ||
           hname_same(name.p, name.len, "Fencing-High-Water");
}

/* Write the response head as the client gets it. Fencing-High-Water
 * only on the final answer to a fenced write that was accepted (mark >
 * 0: set on acceptance only). */
static void
write_response_head(struct client *c, const struct http_response *r)
{
    struct evbuffer *out = c_out(c);
    bool final = r->status >= 200;
    char line[32] = "HTTP/1.1 ";

    /* Statuses are three digits (the parser checks). */
    line[9] = (char)('0' + r->status / 100);
    line[10] = (char)('0' + r->status / 10 % 10);
    line[11] = (char)('0' + r->status % 10);
    line[12] = ' ';
    evbuffer_add(out, line, 13);
    evbuffer_add(out, r->reason.p, r->reason.len);
    evbuffer_add(out, "\r\n", 2);
    for (size_t i = 0; i < r->nheaders; i++) {
        const struct http_header *f = &r->headers[i];
        if (f->hop || ours_only(f->name)) {
            continue;
        }
        evbuffer_add(out, f->name.p, f->name.len);
        evbuffer_add(out, ": ", 2);
        evbuffer_add(out, f->value.p, f->value.len);
        evbuffer_add(out, "\r\n", 2);
    }
    if (final && !c->req_done &&
        (c->req_kind != HTTP_BODY_LENGTH ||
         c->req_left > (uint64_t)pcfg(c)->discard_limit)) {
        /* An early answer: the rest of the body is too much to drop. */
        c->close_after = true;
    }
    if (final) {
        if (r->body == HTTP_BODY_CHUNKED) {
            evbuffer_add(out, "Transfer-Encoding: chunked\r\n", 28);
        }
        if (c->mark > 0) {
            add_header_i64(out, "Fencing-High-Water: ", c->mark);
        }
        if (c->close_after) {
            evbuffer_add(out, "Connection: close\r\n", 19);
        } else if (c->rq->h.minor == 0) {
            evbuffer_add(out, "Connection: keep-alive\r\n", 24);
        }
    }
    evbuffer_add(out, "Via: 1.1 tidemark\r\n\r\n", 21);
}

/* Parse response heads (1xx first) until the final one is out. false
 * when the exchange ended or the head is incomplete. */
static bool
read_response_head(struct client *c)
{
    struct bufferevent *ub = up_bev(c->up);
    struct evbuffer *in = bufferevent_get_input(ub);
    struct http_response *r = c->px->scratch_resp;
    struct http_limits lim = c->px->limits;

    lim.max_head = MAX_RESPONSE_HEAD;
    lim.max_headers = HTTP_MAX_HEADERS;
    while (!c->resp_started) {
        size_t len = evbuffer_get_length(in);
        size_t n = len < lim.max_head + 1 ? len : lim.max_head + 1;
        enum http_rc rc;
        char *p;

        if (len == 0) {
            return false;
        }
        p = (char *)evbuffer_pullup(in, (ev_ssize_t)n);
        rc = http_parse_response(p, n, &lim, slice_eq(c->rq->h.method, "HEAD"),
                                 r);
        if (rc == HTTP_INCOMPLETE) {
            return false;
        }
        if (rc != HTTP_OK || r->status == 101 ||
            (r->body == HTTP_BODY_CHUNKED && c->rq->h.minor == 0)) {
            upstream_failed(c, 502, "malformed or ambiguous answer");
            return false;
        }
        if (r->status < 200) {
            /* An HTTP/1.0 client gets no interim answer (RFC 9110
             * 15.2): it would read it as the final one. */
            if (c->rq->h.minor == 1) {
                mark_dirty(c);
                write_response_head(c, r);
            }
            evbuffer_drain(in, r->head_len);
            continue;
        }
        c->resp_started = true;
        c->resp_status = r->status;
        metrics_upstream_ok(c->px->metrics, up_cfg(c->pool)->name,
                            metrics_since(&c->up_t0));
        c->resp_kind = r->body;
        c->resp_left = r->content_length;
        c->resp_keep_alive = r->keep_alive;
        http_chunked_init(&c->resp_chunk);
        if (r->body == HTTP_BODY_CLOSE) {
            c->close_after = true;
        }
        write_response_head(c, r);
        evbuffer_drain(in, r->head_len);
    }
    return true;
}

/* Move response bytes from the upstream to the client. Returns false
 * when the exchange with this upstream connection is over. */
static bool
pump_response(struct client *c)
{
    struct bufferevent *ub = up_bev(c->up);
    struct evbuffer *in = bufferevent_get_input(ub), *out = c_out(c);
    size_t buf = (size_t)pcfg(c)->buffer_size;
    size_t len;
    bool done = false;

    if (!read_response_head(c)) {
        if (c->dead || c->up == NULL) {
            return false;
        }
        if (c->up_eof) {
            upstream_failed(c, 502,
                            "closed the connection before "
                            "answering");
            return false;
        }
        return true;
    }
    mark_dirty(c);
    len = evbuffer_get_length(in);
    switch (c->resp_kind) {
    case HTTP_BODY_NONE:
        done = true;
        break;
    case HTTP_BODY_LENGTH: {
        size_t n = len < c->resp_left ? len : (size_t)c->resp_left;
        evbuffer_remove_buffer(in, out, n);
        c->resp_left -= n;
        done = c->resp_left == 0;
        break;
    }
    case HTTP_BODY_CHUNKED: {
        size_t take = chunked_span(in, &c->resp_chunk);
        if (take == (size_t)-1) {
            upstream_failed(c, 502, "malformed chunked answer");
            return false;
        }
        evbuffer_remove_buffer(in, out, take);
        done = c->resp_chunk.done;
        break;
    }
    case HTTP_BODY_CLOSE:
        evbuffer_add_buffer(out, in);
        done = c->up_eof;
        break;
    }
    if (done) {
        finish_exchange(c, !c->up_eof && evbuffer_get_length(in) == 0);
        return false;
    }
    if (c->up_eof && evbuffer_get_length(in) == 0) {
        upstream_failed(c, 502, "closed the connection mid-answer");
        return false;
    }
    if (evbuffer_get_length(out) >= buf) {
        pause_down(c);
    }
    return true;
}

static void
up_read_cb(struct bufferevent *bev, void *arg)
{
    lib_enter(&((struct client *)arg)->px->log);
    (void)bev;
    pump_response(arg);
}

static void
up_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct client *c = arg;

    lib_enter(&c->px->log);
    (void)bev;
    if (what & BEV_EVENT_TIMEOUT) {
        upstream_failed(c, 504, "no answer in time (timeout_ms)");
        return;
    }
    if (what & BEV_EVENT_EOF) {
        /* What is still buffered may complete the answer. */
        c->up_eof = true;
        pump_response(c);
        return;
    }
    upstream_failed(c, 502, "connection error");
}

/* ---- client callbacks ------------------------------------------------ */

static void
client_read_cb(struct bufferevent *bev, void *arg)
{
    struct client *c = arg;

    lib_enter(&c->px->log);
    (void)bev;
    if (c->state == CS_FORWARD) {
        pump_request_body(c);
        return;
    }
    client_pump(c);
}

static void
client_write_cb(struct bufferevent *bev, void *arg)
{
    struct client *c = arg;

    lib_enter(&c->px->log);
    written(bev);
    if (c->bp_up || c->bp_down || c->bp_answers) {
        drained(c);
        return;
    }
    client_pump(c);
}

static void
client_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct client *c = arg;
    int grace = 0;

    lib_enter(&c->px->log);
    (void)bev;
    if (c->state == CS_CLOSING) {
        client_close(c, 0);
        return;
    }
    if ((what & BEV_EVENT_EOF) && (what & BEV_EVENT_READING) &&
        !(c->state == CS_FORWARD && !c->req_done)) {
        /* A half-close: answer what was asked, then close. */
        c->client_eof = true;
        c->close_after = true;
        if (c->state == CS_HEAD || c->state == CS_DISCARD) {
            client_pump(c);
        }
        return;
    }
    if (what & BEV_EVENT_TIMEOUT) {
        log_info("conn=%" PRIu64 " client %s timed out", c->id,
                 (what & BEV_EVENT_READING) ? "request body" : "answer");
    }
    if (c->state == CS_FORWARD && c->req_sent_whole && c->slot != NULL) {
        /* The upstream may still apply this write. */
        grace = pcfg(c)->order_grace_ms;
    }
    client_close(c, grace);
}

/* In CS_FORWARD, every body_rate_window_ms while the body comes in: a
 * client sending slower than min_body_rate is cut off. Windows in which
 * tidemark itself stopped reading (the upstream was slow) do not count. */
static void
body_rate_check(struct client *c)
{
    const struct cfg_proxy *pc = pcfg(c);
    uint64_t want =
        (uint64_t)pc->min_body_rate * (uint64_t)pc->body_rate_window_ms / 1000;

    if (c->req_done) {
        return;
    }
    if (!c->bp_up && c->body_moved - c->body_mark < want) {
        struct problem p = {.status = 408,
                            .detail = "the request body came too slowly"};
        log_info("conn=%" PRIu64 " request body under min_body_rate (%" PRIu64
                 " bytes in %d ms)",
                 c->id, c->body_moved - c->body_mark, pc->body_rate_window_ms);
        up_put(c->up, false);
        c->up = NULL;
        leave_order(c, 0);
        c->close_after = true;
        if (c->resp_started) {
            client_close(c, 0);
            return;
        }
        answer(c, &p);
        client_pump(c);
        return;
    }
    c->body_mark = c->body_moved;
    timer_arm(c, pc->body_rate_window_ms);
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct client *c = arg;

    lib_enter(&c->px->log);
    (void)fd;
    (void)what;
    switch (c->state) {
    case CS_HEAD:
        if (c->timer_is_head) {
            struct problem p = {.status = 408,
                                .detail = "the request head did not "
                                          "arrive in time"};
            log_info("conn=%" PRIu64 " header timeout", c->id);
            c->close_after = true;
            answer(c, &p);
            client_pump(c);
            return;
        }
        client_close(c, 0);
        return;
    case CS_STORE:
        fence_cancel(c->raise);
        c->raise = NULL;
        c->px->stats.store_errors++;
        log_error("conn=%" PRIu64 " store did not answer in %d ms", c->id,
                  c->px->cfg->store.timeout_ms);
        if (c->mode == TM_MODE_EFFICIENCY) {
            decision(c, OUT_BYPASSED);
            start_forward(c);
        } else {
            unavailable(c, "the mark store did not answer in time");
        }
        client_pump(c);
        return;
    case CS_CLOSING:
        client_close(c, 0);
        return;
    case CS_FORWARD:
        body_rate_check(c);
        return;
    default:
        return;
    }
}

/* ---- life cycle ------------------------------------------------------ */

void
client_accept(struct tm_proxy *px, int fd)
{
    const struct cfg_proxy *pc = &px->cfg->proxy;
    struct client *c;
    int one = 1;

    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        evutil_closesocket(fd);
        return;
    }
    /* An answer may leave in pieces (head, then body): Nagle's algorithm
     * against the client's delayed ACK would hold the last piece ~40 ms. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->px = px;
    c->id = ++px->next_id;
    c->bev = bufferevent_socket_new(px->base, fd, BEV_OPT_CLOSE_ON_FREE);
    c->timer = evtimer_new(px->base, timer_cb, c);
    c->kick = event_new(px->base, -1, 0, kick_cb, c);
    if (c->bev == NULL || c->timer == NULL || c->kick == NULL) {
        if (c->bev != NULL) {
            bufferevent_free(c->bev);
        } else {
            evutil_closesocket(fd);
        }
        if (c->timer != NULL) {
            event_free(c->timer);
        }
        if (c->kick != NULL) {
            event_free(c->kick);
        }
        free(c);
        return;
    }
    read_watermark(c);
    bufferevent_setwatermark(c->bev, EV_WRITE, (size_t)pc->buffer_size / 2, 0);
    bufferevent_setcb(c->bev, client_read_cb, client_write_cb, client_event_cb,
                      c);
    c->read_tmo = true; /* so that the call below sets the write one */
    client_timeouts(c, false);
    /* A new bufferevent has EV_WRITE enabled; writes go direct. */
    bufferevent_disable(c->bev, EV_WRITE);
    bufferevent_enable(c->bev, EV_READ);
    c->next = px->clients;
    if (px->clients != NULL) {
        px->clients->prev = c;
    }
    px->clients = c;
    if (++px->nclients > px->conn_peak) {
        px->conn_peak = px->nclients;
    }
    px->stats.conns_total++;
    client_pump(c);
}

static void
client_close(struct client *c, int grace_ms)
{
    struct tm_proxy *px = c->px;

    fence_cancel(c->raise);
    if (c->up != NULL) {
        up_put(c->up, false);
    }
    leave_order(c, grace_ms);
    c->raise = NULL;
    c->up = NULL;
    if (c->dirty) {
        struct client **pp = &px->dirty;
        while (*pp != c) {
            pp = &(*pp)->dirty_next;
        }
        *pp = c->dirty_next;
        c->dirty = false;
    }
    idle_leave(c);
    bufferevent_free(c->bev);
    event_free(c->timer);
    event_free(c->kick);
    c->bev = NULL;
    c->timer = c->kick = NULL;
    request_free(c);
    free(c->rq);
    c->rq = NULL;
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        px->clients = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    px->nclients--;
    /* Callers up the stack may still look at c->dead: free it later. */
    c->dead = true;
    c->prev = NULL;
    c->next = px->graveyard;
    px->graveyard = c;
    event_active(px->reaper, EV_TIMEOUT, 1);
}

void
client_reap(struct tm_proxy *px)
{
    while (px->graveyard != NULL) {
        struct client *c = px->graveyard;
        px->graveyard = c->next;
        free(c);
    }
}

void
client_close_idle(struct tm_proxy *px, bool force)
{
    struct client *c = px->clients, *next;

    for (; c != NULL; c = next) {
        next = c->next;
        if (force) {
            client_close(c, 0);
        } else if (c->state == CS_HEAD && evbuffer_get_length(c_in(c)) == 0) {
            c->close_after = true;
            c->state = CS_CLOSING;
            client_pump(c);
        }
    }
}
