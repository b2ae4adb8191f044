/* tidemark.h: the public interface of libtidemark. A program with its
 * own libevent loop embeds the fencing proxy through these calls. The
 * library never exits, never installs signal handlers and logs only
 * through the sink set with log_set_sink (log.h). */
#ifndef TIDEMARK_H
#define TIDEMARK_H

#include <stdbool.h>
#include <stddef.h>

struct event_base;
struct tm_config;
struct tm_proxy;

/* Build a proxy for cfg on base: open the store, resolve upstreams, bind
 * the listeners. cfg must outlive the proxy. NULL on failure, with the
 * reason in err. */
struct tm_proxy *tm_proxy_new(struct event_base *base,
                              const struct tm_config *cfg, char *err,
                              size_t errlen);

/* Apply a new configuration (taken: the proxy frees it with cfg_free and
 * free once no request uses it). Routes, upstreams, limits and modes take
 * effect for new requests; requests under way finish under the old one.
 * Keys that need a restart (listen addresses, the store, the lock service,
 * the token key, cache size) keep their old values and are logged. */
void tm_proxy_reload(struct tm_proxy *px, struct tm_config *cfg);

/* Begin a graceful stop: stop accepting, let in-flight requests finish
 * (closing what is left after drain_ms), commit pending raises. done is
 * called once, on the loop, when nothing is left; then tm_proxy_free. */
void tm_proxy_shutdown(struct tm_proxy *px, int drain_ms,
                       void (*done)(void *arg), void *arg);

/* Release everything. Pending store callbacks run first. */
void tm_proxy_free(struct tm_proxy *px);

#endif
