/* adm_reply.h: how the control port answers an evhttp request: a body
 * with its type, or a problem+json. Below adm.c and the lock service,
 * which both answer through it. */
#ifndef TM_ADM_REPLY_H
#define TM_ADM_REPLY_H

struct evbuffer;
struct evhttp_request;
struct problem;

/* Send body (may be NULL) with code, reason and Content-Type ctype. */
void adm_reply(struct evhttp_request *req, int code, const char *reason,
               const char *ctype, struct evbuffer *body);

/* Send p as application/problem+json (with Retry-After when set). */
void adm_reply_problem(struct evhttp_request *req, const struct problem *p);

#endif
