/* origin.h: who may call the control port. A web page in a browser on the
 * same machine must not drive it: not from another origin (Origin,
 * Sec-Fetch-Site), not through DNS rebinding (Host). Pure: no I/O. */
#ifndef TM_ORIGIN_H
#define TM_ORIGIN_H

#include <stdbool.h>
#include <stddef.h>

#include "slice.h"

/* What the control port calls its own. */
struct origin_self {
    struct tm_slice host; /* [admin] listen's host, without brackets */
    unsigned port;        /* [admin] listen's port */
    const char *allowed;  /* [admin] allowed_hosts: names separated by
                           * spaces or tabs; NULL or "": none */
};

enum origin_verdict {
    ORIGIN_OK = 0,
    ORIGIN_BAD_HOST,     /* 400: Host is not host[:port] */
    ORIGIN_NO_HOST,      /* 400: an HTTP/1.1 request without Host */
    ORIGIN_FOREIGN_HOST, /* 421: a name or address that is not ours */
    ORIGIN_WRONG_PORT,   /* 421: a port that is not the control port's */
    ORIGIN_CROSS_ORIGIN, /* 403: Origin of another page, or "null" */
    ORIGIN_CROSS_FETCH,  /* 403: Sec-Fetch-Site other than same-origin or
                          * none */
};

/*
 * Judge one request by its Host, Origin and Sec-Fetch-Site values (a
 * slice with p == NULL: the header is absent; surrounding spaces are
 * ignored); http11 is true for an HTTP/1.1 request. In this order:
 *
 * - Host is present when http11 (RFC 9112 section 3.2; an HTTP/1.0
 *   client may leave it out, and no browser does).
 * - Host, when present, is host[:port]; its port is the control port's,
 *   a Host without one naming port 80 (RFC 9110 section 4.2.1: what a
 *   browser sends for http://host/, so a page served on port 80, or a
 *   forwarder from port 80, is judged as another port); its host is the
 *   listen address (any IP literal when listening on 0.0.0.0 or [::]:
 *   rebinding needs a name), a loopback name (localhost, *.localhost,
 *   127.0.0.0/8, [::1]) or a name in allowed. Names compare ASCII
 *   case-insensitively, one final dot ignored.
 * - Origin, when present, is "http://" followed by the Host value (so a
 *   page on another port of the same host is refused); "null", or an
 *   Origin without a Host, is refused.
 * - Sec-Fetch-Site, when present, is "same-origin" or "none".
 *
 * An HTTP/1.0 request with none of the three (probes, scripts) passes.
 */
enum origin_verdict origin_check(const struct origin_self *self, bool http11,
                                 struct tm_slice host, struct tm_slice origin,
                                 struct tm_slice fetch_site);

/* The HTTP status for a refusal (400, 421 or 403), 0 for ORIGIN_OK. */
int origin_status(enum origin_verdict v);

/* A sentence for the problem body and the log; "" for ORIGIN_OK. */
const char *origin_reason(enum origin_verdict v);

/* Whether s[0..n) is one name allowed_hosts may list: letters, digits,
 * '-', '.' and '_', at most 253 bytes, no port. */
bool origin_name_ok(const char *s, size_t n);

#endif
