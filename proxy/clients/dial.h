/* dial.h: the addresses of a host, tried in order within one deadline, so
 * that a name with several (localhost: ::1 and 127.0.0.1) reaches the one
 * that listens. Upstreams connect through dial_start; Redis and etcd,
 * whose client libraries make their own sockets, walk the same list. */
#ifndef TM_DIAL_H
#define TM_DIAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/socket.h>

#define DIAL_MAX_ADDRS 16

struct event_base;
struct evdns_base;

struct dial_addr {
    struct sockaddr_storage sa;
    socklen_t len;
    char ip[48];   /* "::1", "127.0.0.1": numeric, for a client library */
    char text[64]; /* "[::1]:8080", "127.0.0.1:8080": for log lines */
};

struct dial_list {
    size_t n;
    struct dial_addr a[DIAL_MAX_ADDRS];
};

/* Resolve host and port (a blocking getaddrinfo: any family, TCP) into
 * *out, in the resolver's order, the first DIAL_MAX_ADDRS. A numeric
 * host resolves to itself. false with "cannot resolve HOST: why" in err. */
bool dial_resolve(const char *host, int port, struct dial_list *out, char *err,
                  size_t errlen) __attribute__((warn_unused_result));

/* True when host is an IPv4 or IPv6 address (no brackets), not a name. */
bool dial_is_ip(const char *host);

/* True when a and b hold the same addresses, in any order. */
bool dial_same(const struct dial_list *a, const struct dial_list *b);

/* "::1,127.0.0.1": l's addresses, for a log line (cut to len). */
void dial_list_text(const struct dial_list *l, char *buf, size_t len);

struct dial_lookup;

/* The end of a dial_lookup_start: list is the name's addresses (the
 * callee's to copy), or NULL with why ("cannot resolve HOST: why"). */
typedef void (*dial_lookup_cb)(void *arg, const struct dial_list *list,
                               const char *why);

/* Look host up through dns without blocking the loop (evdns: its
 * nameservers, and /etc/hosts when it read the system's configuration).
 * cb runs exactly once, on a later pass of base's loop, unless
 * dial_lookup_cancel is called first. NULL when out of memory. */
struct dial_lookup *dial_lookup_start(struct event_base *base,
                                      struct evdns_base *dns, const char *host,
                                      int port, dial_lookup_cb cb, void *arg)
    __attribute__((warn_unused_result));

/* Stop a lookup whose cb has not run, and free it. */
void dial_lookup_cancel(struct dial_lookup *l);

/* The time in ms the next address gets: left_ms shared evenly among the
 * n addresses still to try (n >= 1), at least 1. A refused address gives
 * its unused share to the ones after it; a silent one cannot take the
 * others' time. */
int dial_share_ms(int64_t left_ms, size_t n);

/* Milliseconds on CLOCK_MONOTONIC, for deadlines. */
int64_t dial_now_ms(void);

/* Log that address i of list failed, why: "WHO: connect to A failed:
 * why; trying B" when next (the index tried next) is below list->n,
 * else "...; no address left". Silent for a list of one address: the
 * caller's own error line says it all. */
void dial_log_failure(const char *who, const struct dial_list *list, size_t i,
                      const char *why, size_t next);

struct dial;

/* The end of a dial_start: fd >= 0 is a connected non-blocking socket,
 * now the callee's, to address index of the list; fd -1: every address
 * failed, err the errno of the last one (ETIMEDOUT when the deadline
 * passed). */
typedef void (*dial_cb)(void *arg, int fd, int err, size_t index);

/* Connect to list's addresses one after the other, starting at first and
 * wrapping around, each given dial_share_ms of what is left of
 * timeout_ms; who prefixes the line logged for each failed address. cb
 * runs exactly once, on a later pass of base's loop, unless dial_cancel
 * is called first. The dial keeps a copy of list. NULL with errno:
 * ENOMEM, or EMFILE or ENFILE when the process or the system has no
 * file descriptor free for a socket now (one that runs out while an
 * address connects ends in cb with that err). */
struct dial *dial_start(struct event_base *base, const struct dial_list *list,
                        size_t first, int timeout_ms, const char *who,
                        dial_cb cb, void *arg)
    __attribute__((warn_unused_result));

/* Stop a dial whose cb has not run, closing its socket, and free it. */
void dial_cancel(struct dial *d);

#endif
