/* request.h: the request a client connection is serving: its parsed
 * head and what the stages learned of it. Owned by the connection; the
 * stages read it and fill in their part. Data only. */
#ifndef TM_REQUEST_H
#define TM_REQUEST_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "../../policies/http_parse.h"
#include "../../policies/screen.h"

struct carrier;
struct gen;
struct cfg_proxy;
struct up_pool;

struct request {
    struct http_request h;      /* slices into bytes[] */
    struct screen sc;           /* route, mode, resources (admit fills it) */
    struct gen *gen;            /* the configuration it runs under, held */
    const struct cfg_proxy *pc; /* gen's [proxy]: a reload changes
                                 * nothing of a request under way */
    struct up_pool *pool;       /* where it goes (admit sets it) */
    int64_t token;
    /* The carrier whose fence token is (a route with lease = NAME), or
     * NULL: the write goes only while it still holds that fence. */
    struct carrier *carrier;
    int64_t mark; /* sent in Fencing-High-Water when > 0 */
    int64_t src_mark;
    /* The hex SHA-256 of a body read whole before it is forwarded (an
     * S3 multi-object delete), for the signature; "": not read. */
    char body_sha256[64 + 1];
    uint64_t recent_seq; /* its accepted event in the history; 0: none */
    struct timespec t0;  /* the head was read (access_begin) */
    char rid[128 + 1];   /* the request id (access.h: REQID_MAX) */
    bool rid_client;     /* rid is the client's X-Request-Id */
    /* For the access line (access.h): bytes read from the client (head
     * and body), bytes of the answer written to it, the upstream's
     * address and how long it took (from the request going out to the
     * answer's end; -1: not forwarded). */
    uint64_t bytes_in;
    uint64_t bytes_out;
    int64_t up_us;
    char upstream[64]; /* "": not forwarded */
    size_t cap;        /* bytes[] capacity */
    char bytes[];      /* the head, the canonical path, h's headers */
};

#endif
