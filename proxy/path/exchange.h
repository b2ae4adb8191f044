/* exchange.h: a request's exchange with its upstream: a pooled or new
 * connection, the request head, the request body from the client, the
 * response heads and body back, each direction with back-pressure. One
 * stage of a client connection: it ends once, through done. */
#ifndef TM_EXCHANGE_H
#define TM_EXCHANGE_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "../../policies/http_parse.h"

struct cio;
struct request;
struct up_conn;

enum xchg_end {
    XCHG_DONE = 0, /* the upstream's answer is out */
    XCHG_ANSWERED, /* failed before its answer began: tidemark answered */
    XCHG_CLOSE,    /* failed after its answer began: only closing the
                    * connection can tell the client */
};

/* grace_ms > 0: the upstream may still apply the write (timed out). */
typedef void (*xchg_done_cb)(void *arg, enum xchg_end end, int grace_ms);

struct exchange {
    struct cio *io; /* the client's */
    struct request *rq;
    struct up_conn *up; /* connecting or attached; NULL once ended */
    bool attached;      /* the request went out on up */
    bool up_eof;        /* the upstream sent FIN */
    bool bp_up;         /* client reads paused: upstream output full */
    bool bp_down;       /* upstream reads paused: client output full */
    bool resp_started;  /* the final response head went to the client */
    bool resp_keep_alive;
    enum http_body resp_kind;
    uint64_t resp_left;
    struct http_chunked resp_chunk;
    struct http_scan resp_scan; /* how far the next response head was
                                 * searched */
    int resp_status;
    uint64_t body_seen;    /* chunked request bytes forwarded so far */
    uint64_t body_moved;   /* request body bytes moved to the upstream */
    uint64_t body_mark;    /* body_moved when the rate window began */
    struct timespec up_t0; /* the request went to the upstream */
    /* The answer to an S3 CreateMultipartUpload, kept as it passes (at
     * most twice S3_ANSWER_MAX, framing included) to bind its upload id
     * (uploads.h); ans_on: being kept, ans_over: too long to bind. */
    char *ans;
    size_t ans_len;
    bool ans_on;
    bool ans_over;
    xchg_done_cb done;
    void *arg;
};

void exchange_init(struct exchange *ex, struct cio *io, xchg_done_cb done,
                   void *arg);

/* Send rq (admitted: rq->pool set, its order slots held) to its
 * upstream. done runs exactly once: maybe before this returns. */
void exchange_start(struct exchange *ex, struct request *rq);

/* The client sent more bytes: move what belongs to the body. */
void exchange_client_readable(struct exchange *ex);
/* Write the upstream's output now (end of the loop turn). */
void exchange_flush(struct exchange *ex);
/* Whether a side waits for room in the other's output. */
bool exchange_paused(const struct exchange *ex);
/* Output was written: resume what waited for room. */
void exchange_drained(struct exchange *ex);
/* The client's timer ran out: the body rate check. */
void exchange_timer(struct exchange *ex);
/* Whether the request went out whole and its answer may still come. */
bool exchange_sent_whole(const struct exchange *ex);
/* Whether the request went out and the rest of its body is still due. */
bool exchange_body_due(const struct exchange *ex);
/* Whether any of the request went to the upstream: its head was handed
 * to an upstream connection (it may be partly sent). false while it
 * waits for a connection or a descriptor: nothing of it left. */
bool exchange_forwarded(const struct exchange *ex);

/* The connection closes: drop the upstream connection, no done. */
void exchange_close(struct exchange *ex);

#endif
