/* head.h: taking a request head off a client connection's input: parse
 * it where it lies, in the loop's scratch space, and copy a complete
 * one into request space of the connection's own. */
#ifndef TM_HEAD_H
#define TM_HEAD_H

struct tm_proxy;
struct evbuffer;
struct problem;
struct request;

enum head_rc {
    HEAD_WAIT = 0, /* no complete head yet: read more */
    HEAD_TAKEN,    /* *rq holds it; it is drained from in */
    HEAD_BAD,      /* refused: *p says the answer, *why the reason */
    HEAD_NOMEM,    /* no room for it */
};

/* Take the head at the front of in (at most max_head + 1 bytes are
 * looked at). *rq grows as needed (NULL: none yet) to hold the head and,
 * after it, its canonical path; the caller frees it. On HEAD_BAD the
 * problem is 400, 414, 431, 501 or 505 and *why the parser's reason
 * (static text or NULL). */
enum head_rc head_take(struct tm_proxy *px, struct evbuffer *in,
                       struct request **rq, struct problem *p,
                       const char **why);

#endif
