/* sock.c: reading a connection's socket: our own read event and one
 * readv per readable event for a plain socket, the bufferevent's reads
 * for a TLS one; writes and write timeouts stay the bufferevent's. */
#include "sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <event2/buffer.h>
#include <event2/event.h>

static void
ms_to_tv(int ms, struct timeval *tv)
{
    tv->tv_sec = ms / 1000;
    tv->tv_usec = (ms % 1000) * 1000;
}

static struct evbuffer *
input(const struct sock *s)
{
    return bufferevent_get_input(s->bev);
}

/* Add or remove the read event as the owner and the limit say. Adding
 * an event that is already added costs no system call; it restarts the
 * read timeout, as bufferevent_enable does. Without a timeout there is
 * nothing to restart, and an added event is left as it is: libevent
 * would take its lock to do nothing, several times a request. */
static void
arm(struct sock *s)
{
    struct timeval tv;

    if (s->reading && !s->suspended) {
        if (s->read_ms > 0) {
            ms_to_tv(s->read_ms, &tv);
            s->added = event_add(s->ev, &tv) == 0 || s->added;
        } else if (!s->added) {
            s->added = event_add(s->ev, NULL) == 0;
        }
    } else if (s->added) {
        event_del(s->ev);
        s->added = false;
    }
}

static void
suspend(struct sock *s)
{
    s->suspended = true;
    evbuffer_cb_set_flags(input(s), s->wm, EVBUFFER_CB_ENABLED);
    arm(s);
}

static void
unsuspend(struct sock *s)
{
    s->suspended = false;
    evbuffer_cb_clear_flags(input(s), s->wm, EVBUFFER_CB_ENABLED);
    arm(s);
}

/* The input changed while reading was suspended at hiwat. */
static void
input_changed(struct evbuffer *in, const struct evbuffer_cb_info *info,
              void *arg)
{
    struct sock *s = arg;

    if (info->n_deleted > 0 && evbuffer_get_length(in) < s->hiwat) {
        unsuspend(s);
    }
}

/* Read at most room bytes from fd onto in's end, in one readv. Returns
 * the bytes read, 0 at EOF, -1 with errno. */
static ssize_t
read_into(struct evbuffer *in, int fd, size_t room)
{
    struct evbuffer_iovec v[2];
    struct iovec iov[2];
    ssize_t n, left;
    int nv, used = 0;

    /* A socket bufferevent keeps the end of its input frozen so that
     * only it fills the buffer; it thaws it to read, and so do we. */
    evbuffer_unfreeze(in, 0);
    nv = evbuffer_reserve_space(in, (ev_ssize_t)room, v, 2);
    if (nv <= 0) {
        evbuffer_freeze(in, 0);
        errno = ENOMEM;
        return -1;
    }
    for (int i = 0; i < nv; i++) {
        iov[i].iov_base = v[i].iov_base;
        iov[i].iov_len = v[i].iov_len;
    }
    n = readv(fd, iov, nv);
    for (left = n; left > 0; used++) {
        if ((size_t)left < v[used].iov_len) {
            v[used].iov_len = (size_t)left;
        }
        left -= (ssize_t)v[used].iov_len;
    }
    evbuffer_commit_space(in, v, used);
    if (n <= 0 && evbuffer_get_length(in) == 0) {
        /* Give back the space reserved for nothing. */
        evbuffer_drain(in, 0);
    }
    evbuffer_freeze(in, 0);
    return n;
}

/* A read of room bytes brought n: size the next one. The read may bring
 * more than room: it fills the chain space reserved for it, which
 * libevent rounds up. */
static void
adapt(struct sock *s, size_t room, size_t n)
{
    if (n >= room && room == s->read_size && s->read_size < SOCK_READ_MAX) {
        s->read_size = (s->read_size + 128) * 2 - 128;
    } else if (n < (s->read_size + 128) / 4 && s->read_size > SOCK_READ_MIN) {
        s->read_size = (s->read_size + 128) / 2 - 128;
    }
}

/* Reading ended (what: EOF, ERROR or TIMEOUT): reading goes off, then
 * the owner hears of it. */
static void
read_end(struct sock *s, short what)
{
    s->reading = false;
    arm(s);
    if (s->event_cb != NULL) {
        s->event_cb(s->bev, BEV_EVENT_READING | what, s->arg);
    }
}

/* The socket is readable (or the read timeout ran out). The owner's
 * callback comes last: it may free s. */
static void
readable(evutil_socket_t fd, short what, void *arg)
{
    struct sock *s = arg;
    struct evbuffer *in = input(s);
    size_t len = evbuffer_get_length(in);
    size_t room = s->read_size;
    ssize_t n;

    if (what & EV_TIMEOUT) {
        read_end(s, BEV_EVENT_TIMEOUT);
        return;
    }
    if (s->hiwat > 0) {
        if (len >= s->hiwat) {
            suspend(s);
            return;
        }
        if (s->hiwat - len < room) {
            room = s->hiwat - len;
        }
    }
    n = read_into(in, fd, room);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        return;
    }
    if (n <= 0) {
        read_end(s, n == 0 ? BEV_EVENT_EOF : BEV_EVENT_ERROR);
        return;
    }
    adapt(s, room, (size_t)n);
    if (s->hiwat > 0 && len + (size_t)n >= s->hiwat) {
        suspend(s);
    }
    if (s->read_cb != NULL) {
        s->read_cb(s->bev, s->arg);
    }
}

bool
sock_init(struct sock *s, struct bufferevent *bev, bool tls)
{
    memset(s, 0, sizeof(*s));
    s->bev = bev;
    s->read_size = SOCK_READ_MIN;
    if (tls) {
        return true;
    }
    s->ev = event_new(bufferevent_get_base(bev), bufferevent_getfd(bev),
                      EV_READ | EV_PERSIST, readable, s);
    if (s->ev == NULL) {
        return false;
    }
    s->wm = evbuffer_add_cb(input(s), input_changed, s);
    if (s->wm == NULL) {
        event_free(s->ev);
        s->ev = NULL;
        return false;
    }
    evbuffer_cb_clear_flags(input(s), s->wm, EVBUFFER_CB_ENABLED);
    return true;
}

void
sock_fini(struct sock *s)
{
    if (s->ev != NULL) {
        event_free(s->ev);
        s->ev = NULL;
    }
    if (s->wm != NULL) {
        evbuffer_remove_cb_entry(input(s), s->wm);
        s->wm = NULL;
    }
}

void
sock_setcb(struct sock *s, bufferevent_data_cb read_cb,
           bufferevent_data_cb write_cb, bufferevent_event_cb event_cb,
           void *arg)
{
    s->read_cb = read_cb;
    s->event_cb = event_cb;
    s->arg = arg;
    bufferevent_setcb(s->bev, s->ev != NULL ? NULL : read_cb, write_cb,
                      event_cb, arg);
}

void
sock_read(struct sock *s, bool on)
{
    if (s->ev == NULL) {
        if (on) {
            bufferevent_enable(s->bev, EV_READ);
        } else {
            bufferevent_disable(s->bev, EV_READ);
        }
        return;
    }
    s->reading = on;
    arm(s);
}

void
sock_read_limit(struct sock *s, size_t hiwat)
{
    size_t len;

    if (s->ev == NULL) {
        bufferevent_setwatermark(s->bev, EV_READ, 0, hiwat);
        return;
    }
    s->hiwat = hiwat;
    len = evbuffer_get_length(input(s));
    if (s->suspended && (hiwat == 0 || len < hiwat)) {
        unsuspend(s);
    } else if (!s->suspended && hiwat > 0 && len >= hiwat) {
        suspend(s);
    }
}

void
sock_timeouts(struct sock *s, int read_ms, int write_ms)
{
    struct timeval rtv, wtv;

    ms_to_tv(read_ms, &rtv);
    ms_to_tv(write_ms, &wtv);
    if (s->ev == NULL) {
        bufferevent_set_timeouts(s->bev, read_ms > 0 ? &rtv : NULL,
                                 write_ms > 0 ? &wtv : NULL);
        return;
    }
    /* Set again only when it changes: each set takes the bufferevent's
     * lock and re-adds its events, twice a request. */
    if (write_ms != s->write_ms) {
        bufferevent_set_timeouts(s->bev, NULL, write_ms > 0 ? &wtv : NULL);
        s->write_ms = write_ms;
    }
    if (read_ms == s->read_ms) {
        return;
    }
    s->read_ms = read_ms;
    if (!s->added) {
        return; /* set when reading starts */
    }
    if (read_ms > 0) {
        event_add(s->ev, &rtv);
    } else {
        event_remove_timer(s->ev);
    }
}

_Static_assert(SOCK_HOST_MAX == INET6_ADDRSTRLEN, "sock.h: SOCK_HOST_MAX");

const char *
sock_peer_text(struct sock_peer_text *t, struct bufferevent *bev)
{
    char host[SOCK_HOST_MAX];
    unsigned port;
    int af;

    if (!t->read) {
        t->read = true;
        af = sock_peer(bufferevent_getfd(bev), host, &port);
        t->known = af != 0;
        if (af == AF_UNIX) {
            snprintf(t->s, sizeof(t->s), "%s", host);
        } else if (t->known) {
            snprintf(t->s, sizeof(t->s), af == AF_INET6 ? "[%s]:%u" : "%s:%u",
                     host, port);
        }
    }
    return t->known ? t->s : NULL;
}

int
sock_peer(evutil_socket_t fd, char host[SOCK_HOST_MAX], unsigned *port)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);

    if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &sl) != 0) {
        return 0;
    }
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;

        inet_ntop(AF_INET, &a->sin_addr, host, SOCK_HOST_MAX);
        *port = ntohs(a->sin_port);
        return AF_INET;
    }
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;

        *port = ntohs(a->sin6_port);
        if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
            inet_ntop(AF_INET, &a->sin6_addr.s6_addr[12], host, SOCK_HOST_MAX);
            return AF_INET;
        }
        inet_ntop(AF_INET6, &a->sin6_addr, host, SOCK_HOST_MAX);
        return AF_INET6;
    }
    if (ss.ss_family == AF_UNIX) {
        /* A Unix socket's client is nameless (nginx's "unix:"). */
        snprintf(host, SOCK_HOST_MAX, "%s", SOCK_UNIX_PEER);
        *port = 0;
        return AF_UNIX;
    }
    return 0;
}
