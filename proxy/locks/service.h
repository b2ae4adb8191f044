/* service.h: the lock service the control port serves on
 * /v1/locks/{name}: leases from the configured lock backend, waiters in
 * arrival order, eager fencing through the fence service. */
#ifndef TM_LOCK_SERVICE_H
#define TM_LOCK_SERVICE_H

#include <stdbool.h>
#include <stddef.h>

struct event_base;
struct evbuffer;
struct evhttp_request;
struct fence;
struct metrics;
struct recent;
struct tm_config;
struct tm_log;
struct lock_op;
struct lock_service;

/* The lock service over cfg->locks and cfg->tokens (cfg outlives it),
 * on base, logging to log, raising marks through fence, counting calls
 * in metrics and telling recent (the page) of live leases (all three
 * outlive it): opens the backend. NULL with err on failure. */
struct lock_service *
lock_service_new(struct event_base *base, const struct tm_log *log,
                 struct fence *fence, struct metrics *metrics,
                 struct recent *recent, const struct tm_config *cfg, char *err,
                 size_t errlen);

/* Serve a call on /v1/locks/{name}: path is what follows "/v1/locks/"
 * (still percent-encoded), query the text after '?' or NULL. */
void lock_service_serve(struct lock_service *ls, struct evhttp_request *req,
                        const char *path, const char *query);

/* Start op on the service's backend, for a lease this process holds
 * itself (proxy/carry/lease.c): the same backend handle, so that an LMDB file
 * is opened once. op->cb runs once, as lock_ops.submit says. */
void lock_service_submit(struct lock_service *ls, const struct lock_op *op);

/* Whether the lock backend can be used now. */
bool lock_service_ready(struct lock_service *ls);

/* Prometheus lines for the lock service. */
void lock_service_metrics(struct lock_service *ls, struct evbuffer *out);

/* Close the backend and drop every waiting call. After evhttp_free, so
 * no request is answered any more. */
void lock_service_free(struct lock_service *ls);

#endif
