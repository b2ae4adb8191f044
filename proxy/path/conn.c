/* conn.c: a client connection: accept it, read its request heads, run
 * each request through its stages (admit.c, then exchange.c), drop what
 * a request answered locally still sends, linger and close. Each stage
 * reports back through one completion here; the connection's state
 * changes in client_set_state only. */
#include "conn.h"

#include <assert.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "../log.h"
#include "../metrics.h"
#include "../problem.h"
#include "access.h"
#include "admit.h"
#include "client_io.h"
#include "exchange.h"
#include "gen.h"
#include "head.h"
#include "request.h"
#include "view.h"

#define LINGER_MS 2000 /* read and drop after a closing answer */
#define LINGER_BYTES (1 << 20)

/* The life of a connection: HEAD -> ADMIT -> EXCHANGE -> HEAD for each
 * request; a request answered locally goes on to DISCARD (its body) or
 * CLOSING; CLOSING ends in client_close. */
enum cstate {
    CS_HEAD = 0, /* waiting for a request head */
    CS_ADMIT,    /* admit.c: checks, the store, the resource's turn */
    CS_EXCHANGE, /* exchange.c: connecting, then exchanging */
    CS_DISCARD,  /* answered locally; dropping the request body */
    CS_CLOSING,  /* flushing the last answer, then lingering */
};

struct client {
    struct cio io; /* first: px->dirty links &c->io */
    struct client *next;
    struct client *prev;
    enum cstate state;
    bool timer_is_head; /* the head timeout runs (not idle) */
    bool served;        /* a request head was read: between requests now,
                         * the wait is idle_timeout_ms, not
                         * header_timeout_ms */
    bool idle;          /* on px's idle list: waiting for a head, nothing
                         * buffered either way (reclaimable) */
    bool bp_answers;    /* client reads paused: answers not read */
    bool pumping;       /* client_pump runs: completions leave the next
                         * step to it */
    bool have_rq;       /* rq holds the current request */
    struct http_scan head_scan; /* how far the next head was searched */
    struct request *rq;
    struct admit ad;
    struct exchange ex;
    uint64_t discard_left;
    size_t linger_left;
    size_t read_hi; /* bev's read high watermark */
    struct client *idle_prev;
    struct client *idle_next;
};

static void client_pump(struct client *c);
static void client_close(struct client *c, int grace_ms);

static struct client *
client_of(struct cio *io)
{
    return (struct client *)((char *)io - offsetof(struct client, io));
}

/* The [proxy] settings c works under: those of its request's generation
 * while a request runs, so that a reload changes nothing of a request
 * under way; else the current ones. */
static const struct cfg_proxy *
pcfg(const struct client *c)
{
    return c->have_rq ? c->rq->pc : &c->io.px->cfg->proxy;
}

/* The one place the state changes; the table is the machine. */
static void
client_set_state(struct client *c, enum cstate s)
{
    static const unsigned next[] = {
        [CS_HEAD] = 1u << CS_HEAD | 1u << CS_ADMIT | 1u << CS_CLOSING,
        [CS_ADMIT] = 1u << CS_EXCHANGE | 1u << CS_HEAD | 1u << CS_DISCARD |
                     1u << CS_CLOSING,
        [CS_EXCHANGE] = 1u << CS_HEAD | 1u << CS_DISCARD | 1u << CS_CLOSING,
        [CS_DISCARD] = 1u << CS_DISCARD | 1u << CS_HEAD | 1u << CS_CLOSING,
        [CS_CLOSING] = 1u << CS_CLOSING,
    };

    assert(next[c->state] & (1u << s));
    c->state = s;
}

/* A completion came: go on, unless client_pump is running already (it
 * takes the next step itself when the completion returns). */
static void
resume(struct client *c)
{
    if (!c->pumping) {
        client_pump(c);
    }
}

/* ---- the request -------------------------------------------------------- */

static void
request_end(struct client *c)
{
    if (c->have_rq) {
        c->have_rq = false;
        gen_drop(c->io.px, c->rq->gen);
        c->rq->gen = NULL;
    }
}

/* tidemark answered the current request itself: the body it announced
 * may still be on its way; read and drop it within discard_limit, or
 * close. */
static void
answered(struct client *c)
{
    const struct http_request *h;
    uint64_t limit;
    enum cstate s = CS_HEAD;

    if (!c->have_rq) {
        client_set_state(c, CS_CLOSING);
        return;
    }
    h = &c->rq->h;
    limit = (uint64_t)c->rq->pc->discard_limit;
    if (!c->io.close_after && h->expect_continue && h->body != HTTP_BODY_NONE) {
        /* The client may or may not send the body it announced. */
        c->io.close_after = true;
    }
    if (!c->io.close_after && h->body == HTTP_BODY_LENGTH &&
        h->content_length > 0) {
        if (h->content_length > limit) {
            c->io.close_after = true;
        } else {
            s = CS_DISCARD;
            body_in_start(&c->io.body, HTTP_BODY_LENGTH, h->content_length,
                          NULL);
            c->discard_left = h->content_length;
        }
    } else if (!c->io.close_after && h->body == HTTP_BODY_CHUNKED) {
        s = CS_DISCARD;
        body_in_start(&c->io.body, HTTP_BODY_CHUNKED, 0, NULL);
        c->discard_left = limit;
    }
    request_end(c);
    client_set_state(c, c->io.close_after ? CS_CLOSING : s);
}

/* The upstream's answer is out: the next request, or the rest of this
 * one's body to drop first (the upstream answered before it came). */
static void
exchanged_whole(struct client *c)
{
    uint64_t limit = (uint64_t)c->rq->pc->discard_limit; /* the request's */
    const struct body_in *b = &c->io.body;

    request_end(c);
    sock_read(&c->io.sk, true);
    if (c->io.close_after) {
        client_set_state(c, CS_CLOSING);
    } else if (!b->done) {
        /* write_response_head made sure what is left is small. */
        client_set_state(c, CS_DISCARD);
        c->discard_left = b->kind == HTTP_BODY_LENGTH ? b->left : limit;
    } else {
        client_set_state(c, CS_HEAD);
    }
}

/* admit.c's completion. */
static void
admitted(void *arg, enum admit_end end)
{
    struct client *c = arg;

    if (end == ADMIT_GO) {
        client_set_state(c, CS_EXCHANGE);
        exchange_start(&c->ex, c->rq);
    } else {
        answered(c);
    }
    resume(c);
}

/* exchange.c's completion: the upstream connection is given back. */
static void
exchanged(void *arg, enum xchg_end end, int grace_ms)
{
    struct client *c = arg;

    admit_leave(&c->ad, grace_ms);
    switch (end) {
    case XCHG_CLOSE:
        client_close(c, 0);
        return;
    case XCHG_ANSWERED:
        answered(c);
        break;
    default:
        exchanged_whole(c);
        break;
    }
    resume(c);
}

/* A head is in c->rq: run it through its stages. */
static void
request_begin(struct client *c)
{
    struct path_view *px = c->io.px;
    struct request *rq = c->rq;

    metrics_inc(px->metrics, MID_tidemark_requests_total);
    /* Everything below reads the request's generation, to its end. */
    rq->gen = gen_hold(px);
    rq->pc = &rq->gen->cfg->proxy;
    rq->pool = NULL;
    rq->token = rq->mark = rq->src_mark = 0;
    rq->carrier = NULL;
    rq->body_sha256[0] = '\0';
    rq->recent_seq = 0;
    c->have_rq = true;
    c->io.close_after = !rq->h.keep_alive;
    client_set_state(c, CS_ADMIT);
    admit_start(&c->ad, rq);
}

/* ---- request heads ------------------------------------------------------ */

/* The head was refused: answer p and close. */
static void
parse_error(struct client *c, struct problem *p, const char *why)
{
    struct recent_who who;

    metrics_inc(c->io.px->metrics, MID_tidemark_bad_requests_total);
    access_who(&c->io, NULL, NULL, &who);
    recent_refusal(&c->io.px->recent, &who, p->status, "malformed", NULL, 0, 0);
    c->io.close_after = true;
    access_bad_head(&c->io, p->status, p->detail, why,
                    cio_answer(&c->io, p, false));
    answered(c);
}

/* ---- idle connections ----------------------------------------------------
 * A connection waiting for a request head with nothing buffered, or
 * lingering after its last answer went out, can be closed without losing
 * anything: at max_connections the oldest such one makes room for a new
 * connection (as nginx reuses its keep-alive and waiting connections),
 * so silent or forgotten connections cannot lock real clients out.
 * px->idle_first is the oldest. */

static void
idle_enter(struct client *c)
{
    struct path_view *px = c->io.px;

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
    struct path_view *px = c->io.px;

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
client_evict_idle(struct path_view *px)
{
    for (struct client *c = px->idle_first; c != NULL; c = c->idle_next) {
        /* An answer still on its way out is not given up. */
        if (evbuffer_get_length(cio_out(&c->io)) == 0 &&
            evbuffer_get_length(cio_in(&c->io)) == 0) {
            log_debug("conn=%" PRIu64 " closed while idle: max_connections "
                      "reached",
                      c->io.id);
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

    if (hi < c->io.px->limits.max_head + 1) {
        hi = c->io.px->limits.max_head + 1;
    }
    if (hi != c->read_hi || c->io.read_raised) {
        c->read_hi = hi;
        c->io.read_raised = false;
        sock_read_limit(&c->io.sk, hi);
    }
}

/* Nothing buffered: wait for a head, and give the head space back. */
static void
await_head(struct client *c)
{
    /* Before its first request a connection gets header_timeout_ms to
     * start one: a silent connection is not a keep-alive one. */
    if (c->timer_is_head || !cio_timer_armed(&c->io)) {
        c->timer_is_head = false;
        cio_timer_arm(&c->io, c->served ? pcfg(c)->idle_timeout_ms
                                        : pcfg(c)->header_timeout_ms);
    }
    /* The head buffer is kept while requests follow each other
     * (pipelined), and given back while the connection waits: ten
     * thousand idle keep-alive connections hold no request space. */
    free(c->rq);
    c->rq = NULL;
    idle_enter(c);
}

/* In CS_HEAD: take the next head if it is complete and begin its
 * request. true when a head was taken. */
static bool
read_head(struct client *c)
{
    struct evbuffer *in = cio_in(&c->io);
    struct problem p;
    const char *why = NULL;

    if (evbuffer_get_length(in) == 0) {
        if (c->io.client_eof) {
            client_close(c, 0);
        } else {
            await_head(c);
        }
        return false;
    }
    idle_leave(c);
    if (!c->timer_is_head) {
        c->timer_is_head = true;
        cio_timer_arm(&c->io, pcfg(c)->header_timeout_ms);
        read_watermark(c);
    }
    switch (head_take(c->io.px, in, &c->head_scan, c->io.client_eof, &c->rq, &p,
                      &why)) {
    case HEAD_WAIT:
        if (c->io.client_eof) {
            client_close(c, 0);
        }
        return false;
    case HEAD_BAD:
        parse_error(c, &p, why);
        return false;
    case HEAD_NOMEM:
        client_close(c, 0);
        return false;
    default:
        break;
    }
    c->served = true;
    if (log_get_level() >= TM_LOG_INFO) {
        clock_gettime(CLOCK_MONOTONIC, &c->rq->t0);
    }
    cio_timer_stop(&c->io);
    c->timer_is_head = false;
    request_begin(c);
    return true;
}

/* In CS_DISCARD: drop the body of a request answered locally. */
static void
discard_body(struct client *c)
{
    struct evbuffer *in = cio_in(&c->io);
    size_t n = body_in_take(&c->io.body, in);

    if (n == (size_t)-1 || n > c->discard_left) {
        client_set_state(c, CS_CLOSING);
        return;
    }
    c->discard_left -= n;
    evbuffer_drain(in, n);
    if (c->io.body.done) {
        client_set_state(c, CS_HEAD);
    }
}

/* ---- closing ------------------------------------------------------------ */

static void
linger_read(struct client *c)
{
    struct evbuffer *in = cio_in(&c->io);
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
    struct bufferevent *bev = c->io.bev;

    if (evbuffer_get_length(cio_out(&c->io)) > 0) {
        bufferevent_enable(bev, EV_WRITE);
        return;
    }
    if (c->io.client_eof) {
        client_close(c, 0);
        return;
    }
    if (c->linger_left == 0) {
        c->linger_left = LINGER_BYTES;
        shutdown(bufferevent_getfd(bev), SHUT_WR);
        sock_read_limit(&c->io.sk, 0);
        cio_no_timeouts(&c->io);
        sock_read(&c->io.sk, true);
        cio_timer_arm(&c->io, LINGER_MS);
        /* The answer is out: at max_connections, lingering gives way. */
        idle_enter(c);
    }
    linger_read(c);
}

/* In CS_HEAD: one step; false when the connection must wait. */
static bool
head_step(struct client *c)
{
    if (c->io.px->draining && evbuffer_get_length(cio_in(&c->io)) == 0) {
        idle_leave(c);
        c->io.close_after = true;
        client_set_state(c, CS_CLOSING);
        return true;
    }
    if (evbuffer_get_length(cio_out(&c->io)) >= (size_t)pcfg(c)->buffer_size) {
        /* The client is not reading its answers: wait. */
        c->bp_answers = true;
        sock_read(&c->io.sk, false);
        return false;
    }
    if (!c->io.client_eof) {
        sock_read(&c->io.sk, true);
    }
    /* A request answered at once leaves the next pipelined head to
     * this loop. */
    return read_head(c) || c->state != CS_HEAD;
}

/* Run the connection forward as far as it goes without waiting. */
static void
client_pump(struct client *c)
{
    bool go = true;

    c->pumping = true;
    while (go && !c->io.dead) {
        switch (c->state) {
        case CS_HEAD:
            go = head_step(c);
            break;
        case CS_DISCARD:
            discard_body(c);
            if (c->state == CS_DISCARD) {
                if (c->io.client_eof) {
                    client_close(c, 0);
                }
                go = false;
            }
            break;
        case CS_CLOSING:
            closing(c);
            go = false;
            break;
        default:
            go = false; /* a stage runs; its completion resumes */
            break;
        }
    }
    c->pumping = false;
}

/* After output was written: resume what waited for room. */
static void
drained(struct client *c)
{
    size_t half = (size_t)pcfg(c)->buffer_size / 2;

    exchange_drained(&c->ex);
    if (c->io.dead) {
        return;
    }
    if (c->bp_answers && evbuffer_get_length(cio_out(&c->io)) <= half) {
        c->bp_answers = false;
        client_pump(c);
    }
}

void
client_flush_all(struct path_view *px)
{
    while (px->dirty != NULL) {
        struct cio *io = px->dirty;
        struct client *c = client_of(io);
        px->dirty = io->dirty_next;
        io->dirty = false;
        io->dirty_next = NULL;
        if (c->state == CS_EXCHANGE) {
            exchange_flush(&c->ex);
        }
        bev_flush(io->bev, true);
        if (c->bp_answers || exchange_paused(&c->ex)) {
            drained(c);
        }
    }
}

/* ---- the client's callbacks --------------------------------------------- */

static void
client_read_cb(struct bufferevent *bev, void *arg)
{
    struct client *c = arg;

    lib_enter(&c->io.px->log);
    (void)bev;
    if (c->state == CS_EXCHANGE) {
        exchange_client_readable(&c->ex);
        return;
    }
    if (c->state == CS_ADMIT) {
        admit_readable(&c->ad);
        return;
    }
    client_pump(c);
}

static void
client_write_cb(struct bufferevent *bev, void *arg)
{
    struct client *c = arg;

    lib_enter(&c->io.px->log);
    bev_written(bev);
    if (c->bp_answers || exchange_paused(&c->ex)) {
        drained(c);
        return;
    }
    client_pump(c);
}

static void
client_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct client *c = arg;
    bool body_due = c->state == CS_EXCHANGE && exchange_body_due(&c->ex);
    int grace = 0;

    lib_enter(&c->io.px->log);
    (void)bev;
    if (c->state == CS_CLOSING) {
        client_close(c, 0);
        return;
    }
    if ((what & BEV_EVENT_EOF) && (what & BEV_EVENT_READING) && !body_due) {
        /* A half-close: answer what was asked, then close. */
        c->io.client_eof = true;
        c->io.close_after = true;
        if (c->state == CS_HEAD || c->state == CS_DISCARD) {
            client_pump(c);
        } else if (c->state == CS_ADMIT) {
            admit_readable(&c->ad);
        }
        return;
    }
    if (what & BEV_EVENT_TIMEOUT) {
        log_info("conn=%" PRIu64 " client %s timed out", c->io.id,
                 (what & BEV_EVENT_READING) ? "request body" : "answer");
    }
    if (c->state == CS_EXCHANGE && exchange_sent_whole(&c->ex) &&
        admit_in_order(&c->ad)) {
        /* The upstream may still apply this write. */
        grace = pcfg(c)->order_grace_ms;
    }
    client_close(c, grace);
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct client *c = arg;

    (void)fd;
    (void)what;
    if (!cio_timer_due(&c->io)) {
        return; /* stopped, or armed again for later */
    }
    lib_enter(&c->io.px->log);
    switch (c->state) {
    case CS_HEAD:
        if (c->timer_is_head) {
            struct problem p = {.status = 408,
                                .detail = "the request head did not "
                                          "arrive in time"};
            c->io.close_after = true;
            access_bad_head(&c->io, 408, p.detail, "header timeout",
                            cio_answer(&c->io, &p, false));
            answered(c);
            client_pump(c);
            return;
        }
        client_close(c, 0);
        return;
    case CS_ADMIT:
        admit_timeout(&c->ad);
        return;
    case CS_EXCHANGE:
        exchange_timer(&c->ex);
        return;
    case CS_CLOSING:
        client_close(c, 0);
        return;
    default:
        return;
    }
}

/* ---- life cycle --------------------------------------------------------- */

/* Free what a client that never started holds; fd when it has no
 * bufferevent yet. */
static void
client_abort(struct client *c, int fd)
{
    if (c->io.bev != NULL) {
        sock_fini(&c->io.sk);
        bufferevent_free(c->io.bev);
    } else {
        evutil_closesocket(fd);
    }
    if (c->io.timer != NULL) {
        event_free(c->io.timer);
    }
    admit_fini(&c->ad, 0);
    free(c);
}

void
client_accept(struct path_view *px, int fd)
{
    const struct cfg_proxy *pc = &px->cfg->proxy;
    struct client *c;
    int one = 1;
    bool ok;

    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        evutil_closesocket(fd);
        return;
    }
    /* An answer may leave in pieces (head, then body): Nagle's algorithm
     * against the client's delayed ACK would hold the last piece ~40 ms. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->io.px = px;
    c->io.id = ++px->next_id;
    c->io.bev = bufferevent_socket_new(px->base, fd, BEV_OPT_CLOSE_ON_FREE);
    c->io.timer = evtimer_new(px->base, timer_cb, c);
    ok = admit_init(&c->ad, px, &c->io, admitted, c);
    exchange_init(&c->ex, &c->io, exchanged, c);
    if (c->io.bev != NULL && !sock_init(&c->io.sk, c->io.bev, false)) {
        ok = false;
    }
    if (c->io.bev == NULL || c->io.timer == NULL || !ok) {
        client_abort(c, fd);
        return;
    }
    read_watermark(c);
    bufferevent_setwatermark(c->io.bev, EV_WRITE, (size_t)pc->buffer_size / 2,
                             0);
    sock_setcb(&c->io.sk, client_read_cb, client_write_cb, client_event_cb, c);
    c->io.read_tmo = true; /* so that the call below sets the write one */
    cio_timeouts(&c->io, false, pc->idle_timeout_ms);
    /* A new bufferevent has EV_WRITE enabled; writes go direct. */
    bufferevent_disable(c->io.bev, EV_WRITE);
    sock_read(&c->io.sk, true);
    c->next = px->clients;
    if (px->clients != NULL) {
        px->clients->prev = c;
    }
    px->clients = c;
    if (++px->nclients > px->conn_peak) {
        px->conn_peak = px->nclients;
    }
    metrics_inc(px->metrics, MID_tidemark_connections_total);
    client_pump(c);
}

static void
client_close(struct client *c, int grace_ms)
{
    struct path_view *px = c->io.px;

    exchange_close(&c->ex);
    admit_fini(&c->ad, grace_ms);
    cio_unlist(&c->io);
    idle_leave(c);
    sock_fini(&c->io.sk);
    bufferevent_free(c->io.bev);
    event_free(c->io.timer);
    c->io.bev = NULL;
    c->io.timer = NULL;
    request_end(c);
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
    /* Callers up the stack may still look at io.dead: free it later. */
    c->io.dead = true;
    c->prev = NULL;
    c->next = px->graveyard;
    px->graveyard = c;
    event_active(px->reaper, EV_TIMEOUT, 1);
}

void
client_reap(struct path_view *px)
{
    while (px->graveyard != NULL) {
        struct client *c = px->graveyard;
        px->graveyard = c->next;
        free(c);
    }
}

/* The drain's time is up and c's request never left tidemark: answer
 * 503, write what the socket takes and close. client_close then cancels
 * the raise in flight and gives the order slots and the upstream
 * connection being waited for back, before the loop runs again: nothing
 * is forwarded after the answer. */
static void
refuse_stopping(struct client *c)
{
    struct problem p = {.status = 503,
                        .type = "urn:tidemark:stopping",
                        .title = "Proxy stopping",
                        .detail = "tidemark is stopping: this request was "
                                  "not forwarded to the upstream",
                        .retry_after = 1};

    c->io.close_after = true;
    cio_refuse(&c->io, c->rq, &p, "stopping");
    cio_write_last(&c->io);
    client_close(c, 0);
}

void
client_drain_end(struct path_view *px, struct drain_end *end)
{
    struct client *c = px->clients, *next;

    *end = (struct drain_end){.open = px->nclients};
    for (; c != NULL; c = next) {
        next = c->next;
        if (c->state == CS_ADMIT ||
            (c->state == CS_EXCHANGE && !exchange_forwarded(&c->ex))) {
            end->refused++;
            refuse_stopping(c);
            continue;
        }
        if (c->state == CS_EXCHANGE) {
            end->cut++;
        }
        client_close(c, 0);
    }
}

void
client_close_idle(struct path_view *px, bool force)
{
    struct client *c = px->clients, *next;

    for (; c != NULL; c = next) {
        next = c->next;
        if (force) {
            client_close(c, 0);
        } else if (c->state == CS_HEAD &&
                   evbuffer_get_length(cio_in(&c->io)) == 0) {
            c->io.close_after = true;
            client_set_state(c, CS_CLOSING);
            client_pump(c);
        }
    }
}
