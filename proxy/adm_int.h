/* adm_int.h: what the control port's modules share (adm.c serves the
 * port, adm_locks.c the lock service on it). Include after proxy_int.h
 * and before event2/http.h, which defines HTTP_OK as a macro. */
#ifndef TM_ADM_INT_H
#define TM_ADM_INT_H

#include <stddef.h>

struct evbuffer;
struct evhttp_request;
struct problem;
struct tm_proxy;
struct adm_locks;

/* Send body (may be NULL) with code, reason and Content-Type ctype. */
void adm_reply(struct evhttp_request *req, int code, const char *reason,
               const char *ctype, struct evbuffer *body);

/* Send p as application/problem+json (with Retry-After when set). */
void adm_reply_problem(struct evhttp_request *req, const struct problem *p);

/* The lock service over px->cfg->locks: opens the backend. NULL with err
 * on failure. */
struct adm_locks *adm_locks_new(struct tm_proxy *px, char *err, size_t errlen);

/* Serve a call on /v1/locks/{name}: path is what follows "/v1/locks/"
 * (still percent-encoded), query the text after '?' or NULL. */
void adm_locks_serve(struct adm_locks *al, struct evhttp_request *req,
                     const char *path, const char *query);

/* Whether the lock backend can be used now. */
bool adm_locks_ready(struct adm_locks *al);

/* Prometheus lines for the lock service. */
void adm_locks_metrics(struct adm_locks *al, struct evbuffer *out);

/* Close the backend and drop every waiting call. After evhttp_free, so
 * no request is answered any more. */
void adm_locks_free(struct adm_locks *al);

#endif
