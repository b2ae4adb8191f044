/* sendbuf.h: writing an evbuffer to a socket without SIGPIPE. */
#ifndef TM_SENDBUF_H
#define TM_SENDBUF_H

#include <sys/types.h>

struct evbuffer;

/* Write what the kernel takes of out's front to the socket fd, as
 * evbuffer_write does, but with MSG_NOSIGNAL: a peer that has reset makes
 * it fail with EPIPE instead of raising SIGPIPE. Drains what was written;
 * returns its length, or -1 with errno (EAGAIN: nothing taken). */
ssize_t sendbuf_write(struct evbuffer *out, int fd);

#endif
