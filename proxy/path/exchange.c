/* exchange.c: one request's exchange with its upstream: take a pooled
 * connection or open one, write the request head as the upstream gets
 * it, move the request body and the response back with back-pressure,
 * and end once, through one path, whatever ends it. */
#include "exchange.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "../carry/carry.h"
#include "../clients/dial.h"
#include "../log.h"
#include "../metrics.h"
#include "../problem.h"
#include "access.h"
#include "admit.h"
#include "client_io.h"
#include "request.h"
#include "rewrite.h"
#include "sign.h"
#include "up.h"
#include "uploads.h"
#include "view.h"

#define MAX_RESPONSE_HEAD 65536
/* The most of an S3 CreateMultipartUpload answer kept, framing included. */
#define ANSWER_RAW_MAX (2 * S3_ANSWER_MAX)

static void pump_request_body(struct exchange *ex);
static bool pump_response(struct exchange *ex);

void
exchange_init(struct exchange *ex, struct cio *io, xchg_done_cb done, void *arg)
{
    memset(ex, 0, sizeof(*ex));
    ex->io = io;
    ex->done = done;
    ex->arg = arg;
}

static size_t
buffer_size(const struct exchange *ex)
{
    return (size_t)ex->rq->pc->buffer_size;
}

/* ---- an S3 upload's create answer ------------------------------------- */

static void
drop_answer(struct exchange *ex)
{
    free(ex->ans);
    ex->ans = NULL;
    ex->ans_len = 0;
    ex->ans_on = ex->ans_over = false;
}

/* Keep a copy of the first n bytes of in, the next of the answer. */
static void
keep_answer(struct exchange *ex, struct evbuffer *in, size_t n)
{
    if (!ex->ans_on || ex->ans_over || n == 0) {
        return;
    }
    if (ex->ans == NULL) {
        ex->ans = malloc(ANSWER_RAW_MAX);
    }
    if (ex->ans == NULL || n > ANSWER_RAW_MAX - ex->ans_len) {
        ex->ans_over = true;
        return;
    }
    if (evbuffer_copyout(in, ex->ans + ex->ans_len, n) != (ev_ssize_t)n) {
        ex->ans_over = true;
        return;
    }
    ex->ans_len += n;
}

/* The whole answer to a CreateMultipartUpload is in: bind its upload id
 * to the resource the create was fenced as, or say why not (its parts
 * will be refused). */
static void
bind_upload(struct exchange *ex)
{
    struct request *rq = ex->rq;
    const char *why = "an answer over the bound";

    if (ex->ans_over ||
        !uploads_answer(ex->io->px->uploads, up_cfg(rq->pool), &rq->sc,
                        ex->ans != NULL ? ex->ans : "", ex->ans_len,
                        ex->resp_kind == HTTP_BODY_CHUNKED, dial_now_ms(),
                        &why)) {
        log_warn("conn=%" PRIu64 " S3 upload not bound (%s): route=%s "
                 "resource=%s; its parts will be refused",
                 ex->io->id, why, rq->sc.route_name, LOG_STR(rq->sc.resource));
    }
}

/* ---- the end ----------------------------------------------------------- */

/* The one way out: give the upstream connection back (to the pool when
 * reuse), stop the client's timeouts of the exchange and report. */
static void
end(struct exchange *ex, enum xchg_end how, bool reuse, int grace_ms)
{
    struct cio *io = ex->io;

    cio_timer_stop(io);
    if (ex->up != NULL) {
        up_put(ex->up, reuse);
    }
    ex->up = NULL;
    ex->attached = false;
    ex->bp_up = ex->bp_down = false;
    drop_answer(ex);
    cio_timeouts(io, false, ex->rq->pc->idle_timeout_ms);
    ex->done(ex->arg, how, grace_ms);
}

void
exchange_close(struct exchange *ex)
{
    drop_answer(ex);
    if (ex->up != NULL) {
        up_put(ex->up, false);
    }
    ex->up = NULL;
    ex->attached = false;
}

/* The upstream's answer is complete; up_ok: its connection may serve
 * another request. */
static void
finish(struct exchange *ex, bool up_ok)
{
    bool reuse = up_ok && ex->resp_keep_alive && ex->io->body.done &&
                 ex->resp_kind != HTTP_BODY_CLOSE;

    if (ex->ans_on) {
        bind_upload(ex);
    }
    access_upstream_end(ex->rq, &ex->up_t0);
    access_request(ex->io, ex->rq, ex->resp_status);
    end(ex, XCHG_DONE, reuse, 0);
}

/* The exchange failed: answer status (why) unless the answer began. */
static void
fail(struct exchange *ex, int status, const char *why)
{
    struct request *rq = ex->rq;
    struct path_view *px = ex->io->px;
    struct problem p = {.status = status, .detail = why};
    bool timed_out = status == 504;
    const char *name = up_cfg(rq->pool)->name;

    log_error("conn=%" PRIu64 " upstream %s: %s: route=%s resource=%s "
              "token=%" PRId64,
              ex->io->id, name, why,
              rq->sc.route_name ? rq->sc.route_name : "-",
              rq->sc.rlen > 0 ? LOG_STR(rq->sc.resource) : "-", rq->token);
    if (status == 502 || status == 504) {
        metrics_upstream_error(px->metrics, name, timed_out);
    }
    if (ex->attached) {
        access_upstream_end(rq, &ex->up_t0);
    }
    if (ex->resp_started) {
        /* Part of the answer is out: only closing can tell the client. */
        access_request(ex->io, rq, ex->resp_status);
        end(ex, XCHG_CLOSE, false, timed_out ? rq->pc->order_grace_ms : 0);
        return;
    }
    if (!ex->io->body.done) {
        ex->io->close_after = true;
    }
    rq->mark = 0;
    recent_answered(&px->recent, rq->recent_seq, status,
                    timed_out ? "upstream timeout" : "upstream failed");
    rq->bytes_out += cio_answer(ex->io, &p, rq->h.keep_alive);
    access_request(ex->io, rq, status);
    end(ex, XCHG_ANSWERED, false, timed_out ? rq->pc->order_grace_ms : 0);
}

/* No upstream connection could be had: 502. */
static void
unreachable(struct exchange *ex, const char *detail)
{
    struct problem p = {.status = 502, .detail = detail};

    cio_refuse(ex->io, ex->rq, &p, "upstream unreachable");
    end(ex, XCHG_ANSWERED, false, 0);
}

/* A signing upstream whose credentials expired since admission: 503,
 * nothing forwarded. false when the request may go. */
static bool
no_creds(struct exchange *ex)
{
    const char *why;
    struct problem p;

    if (sign_ready(ex->rq->pool, &why)) {
        return false;
    }
    sign_problem(&p, why);
    cio_refuse(ex->io, ex->rq, &p, "no signing credentials");
    end(ex, XCHG_ANSWERED, false, 0);
    return true;
}

/* A write sent with its carrier's fence (lease = NAME) goes out only
 * while the carrier still holds that fence: the lease may have ended
 * since the write was admitted (it waited for its turn, or the process
 * was paused between the check and here), and the holder after it may
 * have written since. So before the head, and before each piece of the
 * body (a request cut short is applied by no backend), it is asked
 * again: 503 then, and nothing more forwarded. false when the request
 * may go on. */
static bool
lease_ended(struct exchange *ex)
{
    struct request *rq = ex->rq;
    struct carry_verdict v;
    struct problem p;
    char type[ADMIT_TYPE_MAX];
    int64_t fence;
    enum carry_state st;

    if (rq->carrier == NULL) {
        return false;
    }
    st = carry_now(rq->carrier, &fence);
    if (st == CARRY_HOLDING && fence == rq->token) {
        return false;
    }
    v = decide_carried(st == CARRY_HOLDING ? CARRY_LOST : st, false);
    v.detail = "this sidecar's lease ended after the write was admitted "
               "and before it was forwarded whole: the backend does not get "
               "it; try again";
    log_warn("conn=%" PRIu64 " route=%s resource=%s token=%" PRId64
             ": lease %s is %s%s since the write was admitted: refused, "
             "%s",
             ex->io->id, rq->sc.route_name ? rq->sc.route_name : "-",
             rq->sc.rlen > 0 ? LOG_STR(rq->sc.resource) : "-", rq->token,
             carry_name(rq->carrier), carry_state_name(st),
             st == CARRY_HOLDING ? " with a newer fence" : "",
             ex->attached ? "its body cut short" : "not forwarded");
    admit_carried_problem(&v, &p, type);
    if (ex->attached) {
        /* The upstream connection closes with the body unfinished, and
         * the client's connection with it: the rest is not read. */
        ex->io->close_after = true;
    }
    cio_refuse(ex->io, rq, &p, v.kind);
    end(ex, XCHG_ANSWERED, false, 0);
    return true;
}

/* ---- the request head ------------------------------------------------- */

/* ---- the start --------------------------------------------------------- */

static void up_read_cb(struct bufferevent *bev, void *arg);
static void up_write_cb(struct bufferevent *bev, void *arg);
static void up_event_cb(struct bufferevent *bev, short what, void *arg);

/* The upstream must take the request's bytes within timeout_ms each;
 * it is waited for (its answer, and then each read of it) within
 * timeout_ms only once the request body is taken whole (whole), as nginx
 * arms proxy_read_timeout: a body that takes longer to stream than
 * timeout_ms is no 504. A client that stops sending is the client's
 * timeouts'. */
static void
up_wait(struct exchange *ex, bool whole)
{
    int ms = up_cfg(ex->rq->pool)->timeout_ms;

    up_timeouts(ex->up, whole ? ms : 0, ms);
}

/* Write the request head on ub: with the client's address when its
 * upstream's forwarded option asks for it. */
static void
forward(struct exchange *ex, struct bufferevent *ub)
{
    const struct cfg_upstream *u = up_cfg(ex->rq->pool);
    char host[SOCK_HOST_MAX] = "";
    unsigned port;
    int af = u->forwarded != CFG_FWD_NONE
                 ? sock_peer(bufferevent_getfd(ex->io->bev), host, &port)
                 : 0;

    rewrite_request(bufferevent_get_output(ub), ex->rq, u, host, af);
}

/* The upstream connection uc is ready: send the request on it. */
static void
attach(struct exchange *ex, struct up_conn *uc)
{
    struct request *rq = ex->rq;
    struct cio *io = ex->io;
    struct bufferevent *ub = up_bev(uc);
    const char *forbid[2] = {rq->pc->token_header, rq->pc->resource_header};
    size_t buf = buffer_size(ex);
    bool whole;

    ex->up = uc;
    if (no_creds(ex) || lease_ended(ex)) {
        return;
    }
    ex->attached = true;
    clock_gettime(CLOCK_MONOTONIC, &ex->up_t0);
    access_upstream(rq, up_peer(uc));
    ex->resp_started = false;
    ex->up_eof = false;
    memset(&ex->resp_scan, 0, sizeof(ex->resp_scan));
    body_in_start(&io->body, rq->h.body, rq->h.content_length, forbid);
    ex->body_seen = 0;
    ex->body_moved = ex->body_mark = 0;
    /* A body that came with its head is taken whole below: the
     * timeouts are set for after it now, not for during it and then
     * again (each change moves a timer in libevent). */
    whole = body_in_whole(&io->body, cio_in(io));
    if (!whole && rq->pc->min_body_rate > 0) {
        cio_timer_arm(io, rq->pc->body_rate_window_ms);
    }
    up_wait(ex, whole);
    sock_read_limit(up_sock(uc), buf);
    bufferevent_setwatermark(ub, EV_WRITE, buf / 2, 0);
    sock_setcb(up_sock(uc), up_read_cb, up_write_cb, up_event_cb, ex);
    ex->bp_up = ex->bp_down = false;
    if (bufferevent_get_enabled(ub) & EV_WRITE) {
        /* A new connection's (a pooled one's is off): writes go direct. */
        bufferevent_disable(ub, EV_WRITE);
    }
    sock_read(up_sock(uc), true);
    forward(ex, ub);
    if (rq->h.expect_continue && !io->body.done &&
        evbuffer_get_length(cio_in(io)) == 0) {
        /* The decision is made and the upstream is ready: ask for the
         * body. The upstream gets no Expect, so sends no 100 of its own. */
        cio_continue(io);
    }
    cio_mark_dirty(io);
    /* A client that stops sending its body or reading its answer must
     * not hold the upstream connection forever. */
    cio_timeouts(io, !whole, rq->pc->idle_timeout_ms);
    pump_request_body(ex);
}

static void
up_ready(void *arg, struct up_conn *uc, bool ok)
{
    struct exchange *ex = arg;

    if (!ok) {
        int err = errno;
        struct path_view *px = ex->io->px;
        const char *name = up_cfg(ex->rq->pool)->name;
        const char *down = up_down_why(ex->rq->pool);
        char detail[400];

        ex->up = NULL; /* the pool frees it */
        metrics_upstream_error(px->metrics, name, err == ETIMEDOUT);
        if (down != NULL) {
            /* The pool logged when it went down; the access line says
             * the rest. */
            snprintf(detail, sizeof(detail), "upstream %s: %s", name, down);
            unreachable(ex, detail);
            return;
        }
        log_error("conn=%" PRIu64 " upstream %s: connect failed: %s",
                  ex->io->id, name, strerror(err));
        unreachable(ex, "the upstream could not be reached");
        return;
    }
    attach(ex, uc);
}

void
exchange_start(struct exchange *ex, struct request *rq)
{
    struct up_conn *uc = up_take_idle(rq->pool);
    struct path_view *px = ex->io->px;

    ex->rq = rq;
    ex->attached = false;
    if (uc != NULL) {
        attach(ex, uc);
        return;
    }
    ex->up = up_connect(rq->pool, up_ready, ex);
    if (ex->up == NULL) {
        metrics_upstream_error(px->metrics, up_cfg(rq->pool)->name, false);
        unreachable(ex, "cannot open a connection to the upstream");
    }
}

/* ---- back-pressure -----------------------------------------------------
 * A side stops reading while the other side's output holds buffer_size
 * bytes, and starts again once it is down to half. */

static void
pause_up(struct exchange *ex)
{
    ex->bp_up = true;
    sock_read(&ex->io->sk, false);
}

static void
pause_down(struct exchange *ex)
{
    ex->bp_down = true;
    sock_read(up_sock(ex->up), false);
}

bool
exchange_paused(const struct exchange *ex)
{
    return ex->bp_up || ex->bp_down;
}

void
exchange_drained(struct exchange *ex)
{
    struct cio *io = ex->io;
    size_t half;

    if (ex->up == NULL) {
        return;
    }
    half = buffer_size(ex) / 2;
    if (ex->bp_up &&
        evbuffer_get_length(bufferevent_get_output(up_bev(ex->up))) <= half) {
        ex->bp_up = false;
        sock_read(&io->sk, true);
        pump_request_body(ex);
        if (io->dead || ex->up == NULL) {
            return;
        }
    }
    if (ex->bp_down && evbuffer_get_length(cio_out(io)) <= half) {
        ex->bp_down = false;
        sock_read(up_sock(ex->up), true);
        pump_response(ex);
    }
}

void
exchange_flush(struct exchange *ex)
{
    if (ex->attached) {
        bev_flush(up_bev(ex->up), !up_tls(ex->up));
    }
}

/* ---- the request body -------------------------------------------------- */

/* Move request body bytes from the client to the upstream. */
static void
pump_request_body(struct exchange *ex)
{
    struct cio *io = ex->io;
    struct body_in *b = &io->body;
    struct evbuffer *in = cio_in(io);
    struct evbuffer *out = bufferevent_get_output(up_bev(ex->up));
    size_t n;

    if (b->done || (!ex->resp_started && lease_ended(ex))) {
        return;
    }
    n = body_in_take(b, in);
    if (n == (size_t)-1) {
        io->close_after = true;
        fail(ex, 400,
             b->chunk.error != NULL ? b->chunk.error
                                    : "malformed chunked request body");
        return;
    }
    if (b->kind == HTTP_BODY_CHUNKED) {
        ex->body_seen += n;
        if (ex->body_seen > ex->rq->sc.max_body) {
            /* The upstream never gets the end of this body. */
            b->done = false;
            io->close_after = true;
            fail(ex, 413, "chunked request body over max_body");
            return;
        }
    }
    evbuffer_remove_buffer(in, out, n);
    ex->body_moved += n;
    ex->rq->bytes_in += n;
    cio_mark_dirty(io);
    if (b->done) {
        up_wait(ex, true);
        cio_timer_stop(io); /* the body rate check, if any */
        cio_timeouts(io, false, ex->rq->pc->idle_timeout_ms);
        if (io->client_eof) {
            sock_read(&io->sk, false);
        }
        return;
    }
    if (evbuffer_get_length(out) >= buffer_size(ex)) {
        pause_up(ex);
    }
}

void
exchange_client_readable(struct exchange *ex)
{
    if (ex->attached) {
        pump_request_body(ex);
    }
}

bool
exchange_sent_whole(const struct exchange *ex)
{
    return ex->attached && ex->io->body.done;
}

bool
exchange_body_due(const struct exchange *ex)
{
    return ex->attached && !ex->io->body.done;
}

bool
exchange_forwarded(const struct exchange *ex)
{
    return ex->attached;
}

/* Every body_rate_window_ms while the body comes in: a client sending
 * slower than min_body_rate is cut off. Windows in which tidemark itself
 * stopped reading (the upstream was slow) do not count. */
void
exchange_timer(struct exchange *ex)
{
    const struct cfg_proxy *pc;
    uint64_t want;

    if (!ex->attached || ex->io->body.done) {
        return;
    }
    pc = ex->rq->pc;
    want =
        (uint64_t)pc->min_body_rate * (uint64_t)pc->body_rate_window_ms / 1000;
    if (!ex->bp_up && ex->body_moved - ex->body_mark < want) {
        struct problem p = {.status = 408,
                            .detail = "the request body came too slowly"};
        ex->io->close_after = true;
        if (!ex->resp_started) {
            ex->rq->bytes_out += cio_answer(ex->io, &p, ex->rq->h.keep_alive);
        }
        access_refused(ex->io, ex->rq, &p, "under min_body_rate");
        /* Once part of the answer is out, only closing tells the client. */
        end(ex, ex->resp_started ? XCHG_CLOSE : XCHG_ANSWERED, false, 0);
        return;
    }
    ex->body_mark = ex->body_moved;
    cio_timer_arm(ex->io, pc->body_rate_window_ms);
}

/* ---- the response ------------------------------------------------------ */

/* Write the response head r as the client gets it. A final answer that
 * comes before the request body was read whole closes the connection
 * unless the rest is small enough to drop. Fencing-High-Water only on
 * the final answer to a fenced write that was accepted (mark > 0: set on
 * acceptance only). */
static void
write_response_head(struct exchange *ex, const struct http_response *r)
{
    struct cio *io = ex->io;
    const struct body_in *b = &io->body;

    if (r->status >= 200 && !b->done &&
        (b->kind != HTTP_BODY_LENGTH ||
         b->left > (uint64_t)ex->rq->pc->discard_limit)) {
        io->close_after = true;
    }
    size_t before = evbuffer_get_length(cio_out(io));

    rewrite_response(cio_out(io), r, ex->rq->mark, io->close_after,
                     ex->rq->h.minor);
    ex->rq->bytes_out += evbuffer_get_length(cio_out(io)) - before;
}

/* The final response head is in r: keep its framing, pass it on. */
static void
start_response(struct exchange *ex, const struct http_response *r)
{
    ex->resp_started = true;
    ex->resp_status = r->status;
    recent_answered(&ex->io->px->recent, ex->rq->recent_seq, r->status, NULL);
    metrics_upstream_answer(ex->io->px->metrics, up_cfg(ex->rq->pool)->name,
                            r->status, metrics_since(&ex->up_t0));
    ex->resp_kind = r->body;
    ex->resp_left = r->content_length;
    ex->resp_keep_alive = r->keep_alive;
    ex->ans_on = ex->rq->sc.upload == SCREEN_UPLOAD_CREATE && r->status == 200;
    http_chunked_init(&ex->resp_chunk);
    if (r->body == HTTP_BODY_CLOSE) {
        ex->io->close_after = true;
    }
    write_response_head(ex, r);
}

/* Parse response heads (1xx first) until the final one is out. false
 * when the exchange ended, the head is incomplete, or interim answers
 * wait for the client to read them (paused: an upstream that sends them
 * without end is read no faster than the client takes them). */
static bool
read_response_head(struct exchange *ex)
{
    struct evbuffer *in = bufferevent_get_input(up_bev(ex->up));
    struct http_response *r = ex->io->px->scratch_resp;
    struct http_limits lim = ex->io->px->limits;
    const struct http_request *h = &ex->rq->h;

    lim.max_head = MAX_RESPONSE_HEAD;
    lim.max_headers = HTTP_MAX_HEADERS;
    while (!ex->resp_started) {
        size_t len = evbuffer_get_length(in);
        size_t n = len < lim.max_head + 1 ? len : lim.max_head + 1;
        enum http_rc rc;
        char *p;

        if (len == 0) {
            return false;
        }
        p = (char *)evbuffer_pullup(in, (ev_ssize_t)n);
        rc = http_parse_response_more(&ex->resp_scan, p, n, ex->up_eof, &lim,
                                      slice_eq(h->method, "HEAD"), r);
        if (rc == HTTP_INCOMPLETE) {
            return false;
        }
        memset(&ex->resp_scan, 0, sizeof(ex->resp_scan)); /* the next's */
        if (rc != HTTP_OK || r->status == 101 ||
            (r->body == HTTP_BODY_CHUNKED && h->minor == 0)) {
            fail(ex, 502, "malformed or ambiguous answer");
            return false;
        }
        if (r->status < 200) {
            /* An HTTP/1.0 client gets no interim answer (RFC 9110
             * 15.2): it would read it as the final one. */
            if (h->minor == 1) {
                cio_mark_dirty(ex->io);
                write_response_head(ex, r);
            }
            evbuffer_drain(in, r->head_len);
            if (evbuffer_get_length(cio_out(ex->io)) >= buffer_size(ex)) {
                pause_down(ex);
                return false;
            }
            continue;
        }
        start_response(ex, r);
        evbuffer_drain(in, r->head_len);
    }
    return true;
}

/* Move response body bytes from in to out; true when the body is whole,
 * false with the exchange ended on a framing error (*failed). */
static bool
move_response_body(struct exchange *ex, struct evbuffer *in,
                   struct evbuffer *out, bool *failed)
{
    size_t len = evbuffer_get_length(in);

    switch (ex->resp_kind) {
    case HTTP_BODY_NONE:
        return true;
    case HTTP_BODY_LENGTH: {
        size_t n = len < ex->resp_left ? len : (size_t)ex->resp_left;
        keep_answer(ex, in, n);
        evbuffer_remove_buffer(in, out, n);
        ex->rq->bytes_out += n;
        ex->resp_left -= n;
        return ex->resp_left == 0;
    }
    case HTTP_BODY_CHUNKED: {
        size_t take = chunked_span(in, &ex->resp_chunk);
        if (take == (size_t)-1) {
            *failed = true;
            fail(ex, 502, "malformed chunked answer");
            return false;
        }
        keep_answer(ex, in, take);
        evbuffer_remove_buffer(in, out, take);
        ex->rq->bytes_out += take;
        return ex->resp_chunk.done;
    }
    case HTTP_BODY_CLOSE:
        keep_answer(ex, in, len);
        ex->rq->bytes_out += len;
        evbuffer_add_buffer(out, in);
        return ex->up_eof;
    }
    return false;
}

/* Move response bytes from the upstream to the client. Returns false
 * when the exchange with this upstream connection is over. */
static bool
pump_response(struct exchange *ex)
{
    struct evbuffer *in = bufferevent_get_input(up_bev(ex->up));
    struct evbuffer *out = cio_out(ex->io);
    bool failed = false;

    if (!read_response_head(ex)) {
        if (ex->io->dead || ex->up == NULL) {
            return false;
        }
        if (ex->up_eof && !ex->bp_down) {
            fail(ex, 502, "closed the connection before answering");
            return false;
        }
        return true;
    }
    cio_mark_dirty(ex->io);
    if (move_response_body(ex, in, out, &failed)) {
        finish(ex, !ex->up_eof && evbuffer_get_length(in) == 0);
        return false;
    }
    if (failed) {
        return false;
    }
    if (ex->up_eof && evbuffer_get_length(in) == 0) {
        fail(ex, 502, "closed the connection mid-answer");
        return false;
    }
    if (evbuffer_get_length(out) >= buffer_size(ex)) {
        pause_down(ex);
    }
    return true;
}

/* ---- the upstream's callbacks ------------------------------------------ */

static void
up_read_cb(struct bufferevent *bev, void *arg)
{
    struct exchange *ex = arg;

    lib_enter(&ex->io->px->log);
    (void)bev;
    pump_response(ex);
}

static void
up_write_cb(struct bufferevent *bev, void *arg)
{
    struct exchange *ex = arg;

    lib_enter(&ex->io->px->log);
    bev_written(bev);
    exchange_drained(ex);
}

static void
up_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct exchange *ex = arg;

    lib_enter(&ex->io->px->log);
    (void)bev;
    if (what & BEV_EVENT_TIMEOUT) {
        fail(ex, 504, "no answer in time (timeout_ms)");
        return;
    }
    if (what & BEV_EVENT_EOF) {
        /* What is still buffered may complete the answer. */
        ex->up_eof = true;
        pump_response(ex);
        return;
    }
    up_tls_log_failure(ex->up);
    fail(ex, 502, "connection error");
}
