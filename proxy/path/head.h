/* head.h: taking a request head off a client connection's input: parse
 * it where it lies, in the loop's scratch space, and copy a complete
 * one into request space of the connection's own. */
#ifndef TM_HEAD_H
#define TM_HEAD_H

#include <stdbool.h>

struct path_view;
struct evbuffer;
struct http_scan;
struct problem;
struct request;

enum head_rc {
    HEAD_WAIT = 0, /* no complete head yet: read more */
    HEAD_TAKEN,    /* *rq holds it; it is drained from in */
    HEAD_BAD,      /* refused: *p says the answer, *why the reason */
    HEAD_NOMEM,    /* no room for it */
};

/* Take the head at the front of in (at most max_head + 1 bytes are
 * looked at). sc: how far earlier calls searched in's front for the end
 * of this head (zero for a new head; zeroed again once a head is taken
 * or refused): only the bytes that came since are searched, and the head
 * is parsed once it may be whole (http_parse_request_more). final: no
 * more bytes will come (the client sent FIN). *rq grows as needed (NULL:
 * none yet) to hold the head and, after it, its canonical path; the
 * caller frees it. On HEAD_BAD the problem is 400, 414, 431, 501 or 505
 * and *why the parser's reason (static text or NULL). */
enum head_rc head_take(struct path_view *px, struct evbuffer *in,
                       struct http_scan *sc, bool final, struct request **rq,
                       struct problem *p, const char **why);

#endif
