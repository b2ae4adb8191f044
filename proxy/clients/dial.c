/* dial.c: resolve a host to its list of addresses and connect to them in
 * order, non-blocking, each with its share of one deadline. */
#include "dial.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>

#include "../fdlimit.h"
#include "../log.h"

struct dial {
    const struct tm_log *log; /* the proxy's, entered by callbacks */
    struct dial_list list;    /* a copy: the owner may look the name up again */
    size_t first;
    size_t tried; /* addresses given up on */
    int64_t deadline;
    int fd;
    int err;
    dial_cb cb;
    void *arg;
    struct event *ev; /* the socket while connecting; the finish after */
    struct event_base *base;
    char who[96];
};

int64_t
dial_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool
dial_is_ip(const char *host)
{
    unsigned char ip[16];

    return inet_pton(AF_INET, host, ip) == 1 ||
           inet_pton(AF_INET6, host, ip) == 1;
}

int
dial_share_ms(int64_t left_ms, size_t n)
{
    int64_t share = n > 0 ? left_ms / (int64_t)n : left_ms;

    if (share < 1) {
        return 1;
    }
    return share > INT32_MAX ? INT32_MAX : (int)share;
}

static void
addr_text(struct dial_addr *d)
{
    const void *p;
    int port;

    if (d->sa.ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&d->sa;

        p = &s6->sin6_addr;
        port = ntohs(s6->sin6_port);
    } else {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)&d->sa;

        p = &s4->sin_addr;
        port = ntohs(s4->sin_port);
    }
    if (inet_ntop(d->sa.ss_family, p, d->ip, sizeof(d->ip)) == NULL) {
        snprintf(d->ip, sizeof(d->ip), "?");
    }
    snprintf(d->text, sizeof(d->text),
             d->sa.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", d->ip, port);
}

/* The IPv4 and IPv6 addresses of res into *out, the first
 * DIAL_MAX_ADDRS, in res's order; false when there is none. */
static bool
list_from(const struct addrinfo *res, struct dial_list *out)
{
    out->n = 0;
    for (const struct addrinfo *ai = res; ai != NULL && out->n < DIAL_MAX_ADDRS;
         ai = ai->ai_next) {
        struct dial_addr *d = &out->a[out->n];

        if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) ||
            ai->ai_addrlen > sizeof(d->sa)) {
            continue;
        }
        memset(d, 0, sizeof(*d));
        memcpy(&d->sa, ai->ai_addr, ai->ai_addrlen);
        d->len = ai->ai_addrlen;
        addr_text(d);
        out->n++;
    }
    return out->n > 0;
}

bool
dial_resolve(const char *host, int port, struct dial_list *out, char *err,
             size_t errlen)
{
    struct addrinfo hints, *res = NULL;
    char serv[16];
    int rc;
    bool ok;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    snprintf(serv, sizeof(serv), "%d", port);
    out->n = 0;
    rc = getaddrinfo(host, serv, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "cannot resolve %s: %s", host,
                 rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        return false;
    }
    ok = list_from(res, out);
    freeaddrinfo(res);
    if (!ok) {
        snprintf(err, errlen, "cannot resolve %s: no IPv4 or IPv6 address",
                 host);
    }
    return ok;
}

bool
dial_same(const struct dial_list *a, const struct dial_list *b)
{
    if (a->n != b->n) {
        return false;
    }
    for (size_t i = 0; i < a->n; i++) {
        size_t j = 0;

        while (j < b->n && strcmp(a->a[i].text, b->a[j].text) != 0) {
            j++;
        }
        if (j == b->n) {
            return false;
        }
    }
    return true;
}

void
dial_list_text(const struct dial_list *l, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < l->n && used < len; i++) {
        int w = snprintf(buf + used, len - used, "%s%s", i > 0 ? "," : "",
                         l->a[i].ip);

        used += w > 0 ? (size_t)w : 0;
    }
}

void
dial_log_failure(const char *who, const struct dial_list *list, size_t i,
                 const char *why, size_t next)
{
    if (list->n < 2) {
        return;
    }
    if (next < list->n) {
        log_warn("%s: connect to %s failed: %s; trying %s", who,
                 list->a[i].text, why, list->a[next].text);
    } else {
        log_warn("%s: connect to %s failed: %s; no address left", who,
                 list->a[i].text, why);
    }
}

static void dial_next(struct dial *d);

static void
on_finish(evutil_socket_t fd, short what, void *arg)
{
    struct dial *d = arg;
    dial_cb cb = d->cb;
    void *cbarg = d->arg;
    int sock = d->fd;
    int err = d->err;
    size_t index = (d->first + d->tried) % d->list.n;

    lib_enter(d->log);
    (void)fd;
    (void)what;
    event_free(d->ev);
    free(d);
    cb(cbarg, sock, err, index);
}

/* Run cb on the next pass of the loop: never inside dial_start. */
static void
finish(struct dial *d)
{
    event_del(d->ev);
    event_assign(d->ev, d->base, -1, 0, on_finish, d);
    event_active(d->ev, EV_TIMEOUT, 1);
}

/* The address being tried failed with err: on to the next one. */
static void
give_up_on(struct dial *d, int err)
{
    size_t n = d->list.n;
    size_t i = (d->first + d->tried) % n;
    bool more = d->tried + 1 < n && dial_now_ms() < d->deadline;

    close(d->fd);
    d->fd = -1;
    d->err = err;
    dial_log_failure(d->who, &d->list, i, strerror(err),
                     more ? (i + 1) % n : n);
    if (!more) {
        if (d->tried + 1 < n) {
            d->err = ETIMEDOUT; /* addresses left, but no time */
        }
        finish(d);
        return;
    }
    d->tried++;
    dial_next(d);
}

static void
on_socket(evutil_socket_t fd, short what, void *arg)
{
    struct dial *d = arg;
    int err = 0;
    socklen_t len = sizeof(err);

    lib_enter(d->log);
    (void)fd;
    if (what & EV_TIMEOUT) {
        err = ETIMEDOUT;
    } else if (getsockopt(d->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
        err = errno;
    }
    if (err == 0) {
        d->err = 0;
        finish(d);
        return;
    }
    give_up_on(d, err);
}

/* Open a non-blocking socket to the current address and wait for it,
 * up to its share of the time left. */
static void
dial_next(struct dial *d)
{
    size_t n = d->list.n;
    const struct dial_addr *a = &d->list.a[(d->first + d->tried) % n];
    int ms = dial_share_ms(d->deadline - dial_now_ms(), n - d->tried);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

    d->fd =
        socket(a->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (d->fd < 0) {
        d->err = errno;
        finish(d);
        return;
    }
    if (connect(d->fd, (const struct sockaddr *)&a->sa, a->len) == 0) {
        d->err = 0;
        finish(d);
        return;
    }
    if (errno != EINPROGRESS) {
        give_up_on(d, errno);
        return;
    }
    event_del(d->ev);
    event_assign(d->ev, d->base, d->fd, EV_WRITE, on_socket, d);
    if (event_add(d->ev, &tv) != 0) {
        give_up_on(d, ENOMEM);
    }
}

struct dial *
dial_start(struct event_base *base, const struct dial_list *list, size_t first,
           int timeout_ms, const char *who, dial_cb cb, void *arg)
{
    struct dial *d;

    if (list->n == 0) {
        errno = EHOSTUNREACH;
        return NULL;
    }
    d = calloc(1, sizeof(*d));
    if (d == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    d->ev = event_new(base, -1, 0, on_finish, d);
    if (d->ev == NULL) {
        free(d);
        errno = ENOMEM;
        return NULL;
    }
    d->base = base;
    d->log = log_current();
    d->list = *list;
    d->first = first % list->n;
    d->deadline = dial_now_ms() + (timeout_ms > 0 ? timeout_ms : 1);
    d->fd = -1;
    d->cb = cb;
    d->arg = arg;
    snprintf(d->who, sizeof(d->who), "%s", who);
    dial_next(d);
    if (d->fd < 0 && fd_exhausted(d->err)) {
        int err = d->err; /* no socket: the caller decides what waits */

        event_free(d->ev);
        free(d);
        errno = err;
        return NULL;
    }
    return d;
}

void
dial_cancel(struct dial *d)
{
    if (d == NULL) {
        return;
    }
    event_free(d->ev);
    if (d->fd >= 0) {
        close(d->fd);
    }
    free(d);
}

/* ---- looking a name up on the loop (evdns) ---------------------------- */

struct dial_lookup {
    const struct tm_log *log;
    struct evdns_getaddrinfo_request *req; /* NULL once answered */
    struct event *done;                    /* runs cb on a later pass */
    dial_lookup_cb cb;
    void *arg;
    bool ok;
    struct dial_list list;
    char host[256]; /* a DNS name has at most 253 */
    char why[320];
};

static void
on_lookup_done(evutil_socket_t fd, short what, void *arg)
{
    struct dial_lookup *l = arg;
    dial_lookup_cb cb = l->cb;
    void *cbarg = l->arg;

    lib_enter(l->log);
    (void)fd;
    (void)what;
    event_free(l->done);
    cb(cbarg, l->ok ? &l->list : NULL, l->why);
    free(l);
}

/* evdns's answer: kept, and handed on at the next pass (evdns may answer
 * inside evdns_getaddrinfo, from /etc/hosts). A cancelled lookup frees
 * itself here. */
static void
on_evdns(int result, struct evutil_addrinfo *res, void *arg)
{
    struct dial_lookup *l = arg;

    if (result == EVUTIL_EAI_CANCEL) {
        if (res != NULL) {
            evutil_freeaddrinfo(res);
        }
        free(l);
        return;
    }
    lib_enter(l->log);
    l->req = NULL;
    l->ok = result == 0 && list_from(res, &l->list);
    if (res != NULL) {
        evutil_freeaddrinfo(res);
    }
    if (!l->ok) {
        snprintf(l->why, sizeof(l->why), "cannot resolve %s: %s", l->host,
                 result != 0 ? evutil_gai_strerror(result)
                             : "no IPv4 or IPv6 address");
    }
    event_active(l->done, EV_TIMEOUT, 1);
}

struct dial_lookup *
dial_lookup_start(struct event_base *base, struct evdns_base *dns,
                  const char *host, int port, dial_lookup_cb cb, void *arg)
{
    struct evutil_addrinfo hints;
    struct dial_lookup *l = calloc(1, sizeof(*l));
    char serv[16];

    if (l == NULL) {
        return NULL;
    }
    l->done = event_new(base, -1, 0, on_lookup_done, l);
    if (l->done == NULL) {
        free(l);
        return NULL;
    }
    l->log = log_current();
    l->cb = cb;
    l->arg = arg;
    snprintf(l->host, sizeof(l->host), "%s", host);
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = EVUTIL_AI_NUMERICSERV;
    snprintf(serv, sizeof(serv), "%d", port);
    l->req = evdns_getaddrinfo(dns, host, serv, &hints, on_evdns, l);
    return l;
}

void
dial_lookup_cancel(struct dial_lookup *l)
{
    if (l == NULL) {
        return;
    }
    event_free(l->done);
    if (l->req != NULL) {
        evdns_getaddrinfo_cancel(l->req); /* on_evdns frees l */
        return;
    }
    free(l);
}
