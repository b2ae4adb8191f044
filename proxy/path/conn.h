/* conn.h: the client connections, as the process core drives them: a
 * new one, the end of a loop turn, idle ones closed. */
#ifndef TM_CONN_H
#define TM_CONN_H

#include <stdbool.h>

struct path_view;

/* A new client connection on fd. */
void client_accept(struct path_view *px, int fd);
/* Close every client connection that is between requests; when force,
 * close every connection. */
void client_close_idle(struct path_view *px, bool force);

/* Close the connection that has waited longest for a request head with
 * nothing buffered, to make room for a new one. false when there is
 * none. */
bool client_evict_idle(struct path_view *px);

/* Write what this turn produced. */
void client_flush_all(struct path_view *px);

/* Free the connections closed during this turn. */
void client_reap(struct path_view *px);

#endif
