/* conn.h: the client connections, as the process core drives them: a
 * new one, the end of a loop turn, idle ones closed. */
#ifndef TM_CONN_H
#define TM_CONN_H

#include <stdbool.h>
#include <stddef.h>

struct path_view;

/* A new client connection on fd. */
void client_accept(struct path_view *px, int fd);
/* Close every client connection that is between requests; when force,
 * close every connection. */
void client_close_idle(struct path_view *px, bool force);

/* What the end of a drain did to the connections still open. */
struct drain_end {
    size_t open;    /* connections still open, all closed */
    size_t refused; /* requests not forwarded to their upstream yet:
                     * answered 503 */
    size_t cut;     /* requests forwarded (even partly): closed without an
                     * answer, their outcome unknown */
};

/* The drain's time is up: answer 503 to each request that was not
 * forwarded (waiting for the store, its turn, an upstream connection or
 * a descriptor), with what the socket takes at once, and close every
 * connection; what it did goes into *end. Nothing of a refused request
 * is forwarded after (a raise already handed to the store may land). */
void client_drain_end(struct path_view *px, struct drain_end *end);

/* Close the connection that has waited longest for a request head with
 * nothing buffered, to make room for a new one. false when there is
 * none. */
bool client_evict_idle(struct path_view *px);

/* Write what this turn produced. */
void client_flush_all(struct path_view *px);

/* Free the connections closed during this turn. */
void client_reap(struct path_view *px);

#endif
