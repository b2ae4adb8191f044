/* client_io.h: the small pieces of a client connection that every stage
 * uses: its buffers and their direct writes, its one timer, its socket
 * timeouts, the framing of the request body coming in, and the answers
 * tidemark makes itself. Below the stages: it calls nothing above it. */
#ifndef TM_CLIENT_IO_H
#define TM_CLIENT_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../policies/http_parse.h"
#include "sock.h"

struct path_view;
struct bufferevent;
struct evbuffer;
struct event;
struct problem;
struct request;

/* The request body as it arrives on the client socket. */
struct body_in {
    enum http_body kind;
    uint64_t left; /* HTTP_BODY_LENGTH: bytes still to come */
    struct http_chunked chunk;
    bool done;
};

struct cio {
    struct path_view *px;
    uint64_t id;
    struct bufferevent *bev; /* writes */
    struct sock sk;          /* reads, socket timeouts */
    struct event *timer;     /* one timeout at a time; its owner's callback */
    int64_t timer_due;       /* when it runs out (monotonic us), if armed */
    int64_t timer_at;        /* when timer runs out in libevent, 0: not added */
    bool timer_armed;
    struct body_in body;
    bool close_after; /* close once the current answer is out */
    bool client_eof;  /* the client sent FIN */
    bool dead;        /* closed; freed at the end of the turn */
    bool read_tmo;    /* a read timeout is set on sk */
    bool dirty;       /* on px->dirty: has output to write this turn */
    bool read_raised; /* a stage raised sk's read limit for one request */
    struct sock_peer_text peer; /* the client, for logs and the page */
    struct cio *dirty_next;
};

struct evbuffer *cio_in(struct cio *io);
struct evbuffer *cio_out(struct cio *io);

/* The client's timer, kept lazily: arming it for later than libevent's
 * timer already runs out, or stopping it, does not touch libevent (which
 * would take its lock and move the timer in its heap, several times a
 * request); the owner's callback asks cio_timer_due first, which re-adds
 * libevent's timer when the timeout was moved on. */
void cio_timer_arm(struct cio *io, int ms);
void cio_timer_stop(struct cio *io);
/* Whether the timer is armed (and has not run out). */
bool cio_timer_armed(const struct cio *io);
/* In the timer's callback, first: whether the timeout ran out (the timer
 * is then stopped). false when it was stopped, or armed again for later
 * (libevent's timer is then added for what is left). */
bool cio_timer_due(struct cio *io);

/* Output is written directly at the end of the loop turn (px->flusher
 * walks px->dirty), and EV_WRITE is enabled on a bufferevent only while
 * the kernel cannot take everything: no epoll_ctl per answer in the
 * common case. */
void cio_mark_dirty(struct cio *io);
/* Take io off px->dirty (it is closing). */
void cio_unlist(struct cio *io);
/* Write what bev holds now: straight to the socket when direct (not
 * TLS), else by enabling EV_WRITE. */
void bev_flush(struct bufferevent *bev, bool direct);
/* A write event drained bev's output: back to direct writes. */
void bev_written(struct bufferevent *bev);
/* The last write before the connection closes, which never waits: what
 * the kernel takes of io's output now (the rest is lost), then up to
 * 1 MiB of what the client sent and tidemark did not read, read and
 * dropped, so that the close ends with a FIN rather than a reset (a
 * reset may destroy the answer before the client reads it). */
void cio_write_last(struct cio *io);

/* The client's socket always has a write timeout of idle_ms (it only
 * runs while the kernel cannot take an answer); a read timeout only
 * while a request body is expected (read). Changed only when it
 * changes. */
void cio_timeouts(struct cio *io, bool read, int idle_ms);
/* No socket timeouts at all (lingering). */
void cio_no_timeouts(struct cio *io);

/* Start reading a body of this kind (len: its Content-Length). forbid:
 * two trailer field names refused besides the framing ones, or NULL. */
void body_in_start(struct body_in *b, enum http_body kind, uint64_t len,
                   const char *const *forbid);
/* How many bytes at the front of in belong to the body; they count as
 * taken, and done is set when the body ends among them. (size_t)-1 on
 * a framing error. The caller moves or drops them. */
size_t body_in_take(struct body_in *b, struct evbuffer *in);
/* Whether the rest of the body is in in already (done, or a
 * Content-Length body that came with its head): the next body_in_take
 * ends it. */
bool body_in_whole(const struct body_in *b, struct evbuffer *in);

/* Feed ch the bytes at the front of in that belong to its chunked body;
 * return how many they are, or (size_t)-1 on a framing error. */
size_t chunked_span(struct evbuffer *in, struct http_chunked *ch);

/* Tell the client to send the body it announced with Expect:
 * 100-continue. */
void cio_continue(struct cio *io);

/* Write tidemark's own answer p. The connection closes after it on the
 * statuses that leave the stream unreadable (400, 408, 414, 431, 501,
 * 505) and when the client did not ask for keep-alive. Returns the
 * answer's length. */
size_t cio_answer(struct cio *io, const struct problem *p, bool keep_alive);

/* Answer p for rq, log it once with its reason and keep it on the
 * control port's page. The problem names rq's resource unless it names
 * one of its own. */
void cio_refuse(struct cio *io, struct request *rq, struct problem *p,
                const char *reason);

#endif
