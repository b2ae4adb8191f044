/* proxy_view.h: what the control port reads of the proxy it serves, one
 * call a part (proxy_view.c), so that struct tm_proxy (proxy_int.h) stays
 * with the process core. Every call reads the value of now: the
 * configuration and the pools change on a reload. */
#ifndef TM_PROXY_VIEW_H
#define TM_PROXY_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../tidemark.h"

struct carriers;
struct event_base;
struct lock_service;
struct fence;
struct metrics;
struct order;
struct recent;
struct tm_config;
struct tm_log;
struct tm_proxy;
struct up_pool;
struct watches;

/* The loop and the log sink the proxy runs on (for its whole life). */
struct event_base *proxy_base(const struct tm_proxy *px);
const struct tm_log *proxy_log(const struct tm_proxy *px);
/* Set the level the proxy's logger formats (the control port's PUT
 * /v1/log/level); a reload sets it back to [proxy] log_level. */
void proxy_set_log_level(struct tm_proxy *px, enum tm_log_level level);

/* The configuration of now; its restart-only parts never change. */
const struct tm_config *proxy_cfg(const struct tm_proxy *px);

/* The pool of proxy_cfg(px)->upstreams[i]. */
struct up_pool *proxy_pool(const struct tm_proxy *px, size_t i);

/* The fence service, the ordering gates and the labelled counters
 * (for the proxy's whole life). */
struct fence *proxy_fence(const struct tm_proxy *px);
struct order *proxy_order(const struct tm_proxy *px);
struct metrics *proxy_metrics(const struct tm_proxy *px);

/* The [watch] sections at work (for the proxy's whole life). */
const struct watches *proxy_watches(const struct tm_proxy *px);

/* What the page shows: recent marks, refusals and live leases. */
struct recent *proxy_recent(struct tm_proxy *px);

/* The lock service (NULL: none) and the carriers ([lease] sections). */
struct lock_service *proxy_locks(const struct tm_proxy *px);
struct carriers *proxy_carriers(const struct tm_proxy *px);

/* Open client connections; whether the proxy drains. */
size_t proxy_clients(const struct tm_proxy *px);
bool proxy_draining(const struct tm_proxy *px);
/* Start draining as SIGTERM does (tm_proxy_drain): a no-op while
 * draining. */
void proxy_drain(struct tm_proxy *px);

#endif
