/* up.h: upstream connection pools: connect with a timeout, keep idle
 * keep-alive connections, notice when an idle one is closed. */
#ifndef TM_UP_H
#define TM_UP_H

#include <stdbool.h>
#include <stddef.h>

struct event_base;
struct evdns_base;
struct metrics;
struct bufferevent;
struct sock;
struct cfg_upstream;
struct up_pool;
struct up_conn;

/* Called once when a connection is ready (ok) or could not be made. */
typedef void (*up_ready_cb)(void *arg, struct up_conn *uc, bool ok);

/* How pools look their hosts up. */
struct up_names {
    struct evdns_base *dns;  /* the proxy's resolver, for every lookup
                              * after the first */
    struct metrics *metrics; /* counts the failed lookups */
    bool first_blocking;     /* the first with getaddrinfo (the system's
                              * resolver), not through dns */
    unsigned long asked;     /* lookups started through dns: the pools
                              * count them */
};

/* A pool for cfg. Its host is looked up now (names says how) and again
 * every resolve_ms and after a failed connect; a name that does not
 * resolve leaves the pool down (up_down_why), requests failing, until it
 * does. NULL with err on failure (out of memory, TLS setup). */
struct up_pool *up_pool_new(struct event_base *base,
                            const struct cfg_upstream *cfg,
                            struct up_names *names, char *err, size_t errlen);
void up_pool_free(struct up_pool *p);

/* An idle pooled connection, most recently used first, or NULL. It is
 * the caller's until up_put. */
struct up_conn *up_take_idle(struct up_pool *p);

/* Get a connection for a request that found none idle. At the end of
 * the loop pass, one given back to the pool meanwhile serves it; else a
 * new one is opened: the host's addresses are tried in turn (the one
 * that connected last first), all within connect_timeout_ms, TLS
 * handshake included; each failed address is logged. cb runs later on
 * the loop, exactly once, unless the caller gives the returned handle
 * back with up_put first; cb's uc is the connection to use (it may be
 * another than the handle, which is then freed). When ok is false errno
 * says why (ETIMEDOUT: the deadline passed) and the pool frees the
 * connection after cb returns. cb may free the pool (the last request of
 * a generation a reload retired ends in it): the pool does nothing with
 * itself after. */
struct up_conn *up_connect(struct up_pool *p, up_ready_cb cb, void *arg);
/* A pool without an address (up_down_why) fails every request that
 * finds none idle, with EHOSTUNREACH, except that the requests that come
 * while a lookup is in flight wait for its answer. */

/* Give the connection back: to the pool when reusable, else closed. The
 * pool keeps max_idle; those beyond it stay one more loop pass for the
 * requests that come in it, then the oldest are closed. The caller's
 * callbacks on it are dropped. */
void up_put(struct up_conn *uc, bool reusable);

/* Its bufferevent writes; its sock reads (sock.h). */
struct bufferevent *up_bev(struct up_conn *uc);
/* "host:port" of the address uc is connected to (read once a
 * connection), or NULL. */
const char *up_peer(struct up_conn *uc);
struct sock *up_sock(struct up_conn *uc);
const struct cfg_upstream *up_cfg(const struct up_pool *p);
/* The credentials a signing upstream signs with (creds.h); NULL when it
 * does not sign. */
struct creds *up_creds(const struct up_pool *p);
/* p, new at a reload, takes over what old (the same upstream's pool in
 * the generation before) keeps: its temporary signing credentials, so
 * requests are signed while p fetches its own. */
void up_inherit(struct up_pool *p, const struct up_pool *old);
/* Set the read and write timeouts of a connection handed out, in ms (0:
 * none), unless they already are these. */
void up_timeouts(struct up_conn *uc, int read_ms, int write_ms);

/* True for TLS connections: their bytes go through OpenSSL, never
 * straight to the socket. */
bool up_tls(const struct up_conn *uc);
/* Log why uc's TLS failed, if it did (a refused certificate, a peer's
 * alert: TLS 1.3 brings a refused client certificate only after the
 * handshake), without a secret in sight. */
void up_tls_log_failure(struct up_conn *uc);
/* True when this connection had served a request before. */
bool up_reused(const struct up_conn *uc);

/* Why the pool has no address ("cannot resolve HOST: why", "looking
 * HOST up"), or NULL when it has one. */
const char *up_down_why(const struct up_pool *p);
/* The addresses its host resolves to now. */
size_t up_addr_count(const struct up_pool *p);

size_t up_idle_count(const struct up_pool *p);
/* Connections handed to requests and not given back yet. */
size_t up_busy_count(const struct up_pool *p);

#endif
