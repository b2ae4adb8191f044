/* client_io.c: a client connection's buffers, timer, socket timeouts,
 * request body framing and tidemark's own answers. */
#include "client_io.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "../log.h"
#include "../problem.h"
#include "../store/fence.h"
#include "access.h"
#include "request.h"
#include "sendbuf.h"
#include "view.h"

struct evbuffer *
cio_in(struct cio *io)
{
    return bufferevent_get_input(io->bev);
}

struct evbuffer *
cio_out(struct cio *io)
{
    return bufferevent_get_output(io->bev);
}

static int64_t
now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Add libevent's timer to run out in us microseconds, at due. */
static void
timer_add(struct cio *io, int64_t us, int64_t due)
{
    struct timeval tv = {.tv_sec = us / 1000000, .tv_usec = us % 1000000};

    io->timer_at = evtimer_add(io->timer, &tv) == 0 ? due : 0;
}

void
cio_timer_arm(struct cio *io, int ms)
{
    int64_t us = (int64_t)ms * 1000;

    io->timer_due = now_us() + us;
    io->timer_armed = true;
    if (io->timer_at != 0 && io->timer_at <= io->timer_due) {
        return; /* libevent's runs out first: cio_timer_due moves it on */
    }
    timer_add(io, us, io->timer_due);
}

void
cio_timer_stop(struct cio *io)
{
    io->timer_armed = false; /* libevent's may run out: nothing is due */
}

bool
cio_timer_armed(const struct cio *io)
{
    return io->timer_armed;
}

bool
cio_timer_due(struct cio *io)
{
    int64_t left;

    io->timer_at = 0; /* libevent's ran out */
    if (!io->timer_armed) {
        return false;
    }
    /* libevent reads its clock once a loop turn, we read ours at each
     * arm: a timer within a millisecond of due has run out. */
    left = io->timer_due - now_us();
    if (left > 1000) {
        timer_add(io, left, io->timer_due);
        return false;
    }
    io->timer_armed = false;
    return true;
}

/* ---- writing ---------------------------------------------------------- */

/* One write of out's front to fd. A socket bufferevent keeps the front of
 * its output frozen so that only it drains the buffer; it thaws it to
 * write, and so do we. */
static ssize_t
write_thawed(struct evbuffer *out, int fd)
{
    ssize_t n;

    evbuffer_unfreeze(out, 1);
    n = sendbuf_write(out, fd);
    evbuffer_freeze(out, 1);
    return n;
}

void
bev_flush(struct bufferevent *bev, bool direct)
{
    struct evbuffer *out = bufferevent_get_output(bev);
    ssize_t n;

    if (evbuffer_get_length(out) == 0 ||
        (bufferevent_get_enabled(bev) & EV_WRITE)) {
        return;
    }
    if (!direct) {
        bufferevent_enable(bev, EV_WRITE);
        return;
    }
    n = write_thawed(out, bufferevent_getfd(bev));
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
        /* Let the bufferevent meet the error and report it. */
        bufferevent_enable(bev, EV_WRITE);
        return;
    }
    if (evbuffer_get_length(out) > 0) {
        bufferevent_enable(bev, EV_WRITE);
    }
}

/* What cio_write_last reads and drops of the client's bytes at most. */
#define WRITE_LAST_DROP (1 << 20)

void
cio_write_last(struct cio *io)
{
    struct evbuffer *out = cio_out(io);
    int fd = bufferevent_getfd(io->bev);
    char sink[16384];
    size_t dropped = 0;
    ssize_t n;

    while (evbuffer_get_length(out) > 0 && write_thawed(out, fd) > 0) {
    }
    while (dropped < WRITE_LAST_DROP &&
           (n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT)) > 0) {
        dropped += (size_t)n;
    }
}

void
bev_written(struct bufferevent *bev)
{
    if (evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
        bufferevent_disable(bev, EV_WRITE);
    }
}

void
cio_mark_dirty(struct cio *io)
{
    struct path_view *px = io->px;

    if (io->dirty) {
        return;
    }
    io->dirty = true;
    io->dirty_next = px->dirty;
    px->dirty = io;
    event_active(px->flusher, EV_TIMEOUT, 1);
}

void
cio_unlist(struct cio *io)
{
    struct cio **pp = &io->px->dirty;

    if (!io->dirty) {
        return;
    }
    while (*pp != io) {
        pp = &(*pp)->dirty_next;
    }
    *pp = io->dirty_next;
    io->dirty = false;
    io->dirty_next = NULL;
}

void
cio_timeouts(struct cio *io, bool read, int idle_ms)
{
    if (io->read_tmo == read) {
        return;
    }
    io->read_tmo = read;
    sock_timeouts(&io->sk, read ? idle_ms : 0, idle_ms);
}

void
cio_no_timeouts(struct cio *io)
{
    sock_timeouts(&io->sk, 0, 0);
    io->read_tmo = false;
}

/* ---- the request body ------------------------------------------------- */

size_t
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

void
body_in_start(struct body_in *b, enum http_body kind, uint64_t len,
              const char *const *forbid)
{
    b->kind = kind;
    b->left = kind == HTTP_BODY_LENGTH ? len : 0;
    b->done = kind == HTTP_BODY_NONE || (kind == HTTP_BODY_LENGTH && len == 0);
    http_chunked_init(&b->chunk);
    if (forbid != NULL) {
        b->chunk.forbid[0] = forbid[0];
        b->chunk.forbid[1] = forbid[1];
    }
}

size_t
body_in_take(struct body_in *b, struct evbuffer *in)
{
    size_t len = evbuffer_get_length(in), n;

    if (b->done) {
        return 0;
    }
    if (b->kind == HTTP_BODY_LENGTH) {
        n = len < b->left ? len : (size_t)b->left;
        b->left -= n;
        b->done = b->left == 0;
        return n;
    }
    n = chunked_span(in, &b->chunk);
    b->done = n != (size_t)-1 && b->chunk.done;
    return n;
}

bool
body_in_whole(const struct body_in *b, struct evbuffer *in)
{
    return b->done ||
           (b->kind == HTTP_BODY_LENGTH && evbuffer_get_length(in) >= b->left);
}

/* ---- answers tidemark makes itself ------------------------------------ */

void
cio_continue(struct cio *io)
{
    /* Like every answer tidemark makes itself, it says so. */
    static const char cont[] =
        "HTTP/1.1 100 Continue\r\n" PROBLEM_HEADER ": continue\r\n\r\n";

    evbuffer_add(cio_out(io), cont, sizeof(cont) - 1);
    cio_mark_dirty(io);
}

size_t
cio_answer(struct cio *io, const struct problem *p, bool keep_alive)
{
    size_t before = evbuffer_get_length(cio_out(io));

    if (p->status == 400 || p->status == 431 || p->status == 414 ||
        p->status == 501 || p->status == 505 || p->status == 408 ||
        !keep_alive) {
        io->close_after = true;
    }
    problem_write(cio_out(io), p, io->close_after);
    cio_mark_dirty(io);
    return evbuffer_get_length(cio_out(io)) - before;
}

/* Reads of refusals' marks in flight at most: a flood of requests
 * without a token must not become a flood of store reads. */
#define MARK_READS_MAX 8

struct mark_read {
    struct path_view *px;
    uint64_t seq;
};

static void
mark_read_done(void *arg, enum store_result res, int64_t mark)
{
    struct mark_read *m = arg;

    m->px->mark_reads--;
    if (res == STORE_ACCEPTED) {
        recent_mark(&m->px->recent, m->seq, mark);
    }
    free(m);
}

/* A refusal that read no mark (no token, a bad one): the history shows
 * the resource's mark all the same, the cache's, else the store's. */
static void
refusal_mark(struct path_view *px, const char *res, uint64_t seq)
{
    size_t len = strlen(res);
    int64_t cached = fence_check(px->fence, res, len, 0);
    struct mark_read *m;

    if (cached > 0) {
        recent_mark(&px->recent, seq, cached);
        return;
    }
    if (px->mark_reads >= MARK_READS_MAX || (m = malloc(sizeof(*m))) == NULL) {
        return;
    }
    *m = (struct mark_read){.px = px, .seq = seq};
    if (!fence_get(px->fence, res, len, mark_read_done, m)) {
        free(m);
        return;
    }
    px->mark_reads++;
}

void
cio_refuse(struct cio *io, struct request *rq, struct problem *p,
           const char *reason)
{
    const struct screen *s = &rq->sc;
    struct recent_who who;
    uint64_t seq;

    if (p->resource == NULL) {
        p->resource = s->rlen > 0 ? s->resource : NULL;
    }
    if (rq->recent_seq != 0) {
        /* Accepted, then not forwarded: its event says what came of it. */
        recent_answered(&io->px->recent, rq->recent_seq, p->status, reason);
    } else {
        access_who(io, rq, s->route_name, &who);
        seq = recent_refusal(&io->px->recent, &who, p->status, reason,
                             p->resource, rq->token, rq->mark);
        if (rq->mark == 0 && p->resource != NULL) {
            refusal_mark(io->px, p->resource, seq);
        }
    }
    rq->bytes_out += cio_answer(io, p, rq->h.keep_alive);
    access_refused(io, rq, p, reason);
}
