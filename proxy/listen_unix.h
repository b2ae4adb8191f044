/* listen_unix.h: the proxy's Unix-domain socket (listen = unix:PATH):
 * a stale file of a dead process removed first, a path a live process
 * answers on refused, the file's mode and group set before anyone can
 * connect, the file removed again when tidemark stops listening. */
#ifndef TM_LISTEN_UNIX_H
#define TM_LISTEN_UNIX_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The prefix of a listen address that names a Unix socket (nginx's). */
/* The accept queue asked for, on either kind of listener: the kernel
 * caps it at net.core.somaxconn (4096 by default), so a burst of clients
 * dialing at once waits there instead of having its SYNs dropped. */
#define LISTEN_BACKLOG 65535

#define LISTEN_UNIX_PREFIX "unix:"

/* A socket file tidemark made: removed only while it is still that file
 * (a process started since may have put its own there). */
struct listen_unix {
    char *path; /* NULL: none */
    dev_t dev;
    ino_t ino;
};

/* Bind and listen on a new non-blocking socket at path with mode (octal
 * text, "0660") and group (a name or a number; empty: tidemark's own).
 * A socket file nobody answers on is removed first; a live one, or a
 * file that is not a socket, is an error. Returns the descriptor and
 * fills u, or -1 with "why" in err. */
int listen_unix_open(struct listen_unix *u, const char *path, const char *mode,
                     const char *group, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Remove u's socket file if it is still the one made, and forget it. */
void listen_unix_remove(struct listen_unix *u);

#endif
