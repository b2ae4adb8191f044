/* access.h: the access log (one line per request answered: forwarded,
 * or refused by tidemark) and the request id. Every line has the same
 * keys, in this order, so that a line parses the same in text and in
 * json (log.c):
 *
 *   event id client method path query status route resource token mark
 *   ms conn upstream upstream_ms bytes_in bytes_out http ua reason detail
 *
 * ms is the time since the head was read; upstream the address:port the
 * request went to, upstream_ms from its going out to its answer's end;
 * bytes_in what was read of the client for it (head and body), bytes_out
 * the answer written to the client; http the client's version (1.0,
 * 1.1); ua its User-Agent.
 *
 * A value that is absent is "-" (null in json); a string goes through
 * logesc (policies/logesc.h): quoted ("...") when it holds a space or
 * anything escaped (control bytes, '"', '\', bytes that are not UTF-8),
 * or could read as a number, "-" or a word ending in ':'; numbers are
 * bare. */
#ifndef TM_ACCESS_H
#define TM_ACCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <event2/util.h>

struct cio;
struct problem;
struct recent_who;
struct request;

/* The longest X-Request-Id passed through. */
#define REQID_MAX 128

/* Whether v[0..n) is an X-Request-Id tidemark passes through: 1 to
 * REQID_MAX characters, letters, digits and - _ . : + / = @. */
bool reqid_sane(const char *v, size_t n);

/* At the start of a request: its start time, and its id: the client's
 * X-Request-Id when there is exactly one and it is sane (forwarded as it
 * is), else 32 random hex digits (sent upstream in X-Request-Id). */
void access_begin(struct request *rq);

/* The request went out to addr (NULL: unknown), for the line. */
void access_upstream(struct request *rq, const char *addr);
/* The upstream's part ended: its time since t0 (the request went out). */
void access_upstream_end(struct request *rq, const struct timespec *t0);
/* Who sent rq (NULL: a head that was no request) on io, for the page's
 * history: route (NULL: none), the client's address (io's, read once a
 * connection) and the request id. */
void access_who(const struct cio *io, const struct request *rq,
                const char *route, struct recent_who *w);

/* The line of a request answered by its upstream (or failed after it
 * was forwarded, with the status the client got): event=request. */
void access_request(const struct cio *io, const struct request *rq, int status);

/* The line of a request tidemark refused: event=refused, with why and
 * p's detail. */
void access_refused(const struct cio *io, const struct request *rq,
                    const struct problem *p, const char *why);

/* The line of a request refused before it was one (a malformed or
 * incomplete head): no method, path, route; bytes_out: the answer's. */
void access_bad_head(const struct cio *io, int status, const char *detail,
                     const char *why, size_t bytes_out);

#endif
