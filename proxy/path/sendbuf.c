/* sendbuf.c: an evbuffer's front to a socket in one sendmsg, with
 * MSG_NOSIGNAL. */
#include "sendbuf.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <event2/buffer.h>

/* As many pieces as one call sends: libevent's own writev takes 128. */
#define SENDBUF_IOV 64

ssize_t
sendbuf_write(struct evbuffer *out, int fd)
{
    struct evbuffer_iovec vec[SENDBUF_IOV];
    struct iovec iov[SENDBUF_IOV];
    struct msghdr mh = {0};
    int n = evbuffer_peek(out, -1, NULL, vec, SENDBUF_IOV);
    ssize_t sent;

    if (n <= 0) {
        return 0;
    }
    if (n > SENDBUF_IOV) {
        n = SENDBUF_IOV;
    }
    for (int i = 0; i < n; i++) {
        iov[i].iov_base = vec[i].iov_base;
        iov[i].iov_len = vec[i].iov_len;
    }
    mh.msg_iov = iov;
    mh.msg_iovlen = (size_t)n;
    sent = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
        evbuffer_drain(out, (size_t)sent);
    }
    return sent;
}
