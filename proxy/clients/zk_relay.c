/* zk_relay.c: ZooKeeper's frames weighed on their way to the C client
 * (zk_relay.h).
 *
 * One thread, one poll loop: the ports (one for each server), a wake-up
 * eventfd, and up to ZK_RELAY_CONNS connections, each the client's end
 * and the server's. Each direction has one buffer of RELAY_BUF bytes: a
 * side is read only when what was read from it last has all been
 * written to the other, so a connection holds 2 x RELAY_BUF at most,
 * whatever either end sends. The server's bytes are weighed before any
 * of a read is written on. */
#include "zk_relay.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../policies/lenframe.h"
#include "../log.h"
#include "../thread.h"
#include "dial.h"

#define RELAY_BUF 16384
#define HOST_MAX 256 /* a host name's bytes, as DNS allows */
/* Why a server cannot be reached; the longest is dial_resolve's "cannot
 * resolve NAME: reason", NAME up to HOST_MAX. */
#define WHY_MAX (HOST_MAX + 128)
/* A port's connect-string item: "127.0.0.1:65535" at most ("[::1]:65535"
 * is shorter), and its NUL or, in the string, its comma. */
#define ITEM_MAX 16

/* Bytes read from one end, not yet all written to the other. */
struct leg {
    uint8_t b[RELAY_BUF];
    size_t off, len;
    bool eof; /* the end it is read from has closed */
};

struct conn {
    int cfd;    /* the client's connection; -1: the slot is free */
    int sfd;    /* the server's; -1 while none */
    size_t srv; /* the server, an index of hosts */
    bool connecting;
    struct dial_list addrs;
    size_t ai;       /* the address tried */
    int64_t end;     /* the connection's deadline */
    int64_t ai_end;  /* the address's */
    struct leg up;   /* client to server */
    struct leg down; /* server to client, weighed */
    struct lenframe frames;
};

struct server {
    char name[HOST_MAX];
    int port;
    int lfd;      /* the port the client connects to for it */
    bool failing; /* its last connection failed (logged once) */
};

struct zk_relay {
    const struct tm_log *log;
    char *who;
    int connect_ms;
    size_t nservers;
    struct server *servers;
    char *hosts; /* the client's connect string */
    int wake;    /* eventfd: stop */
    atomic_bool stopping;
    bool started;
    pthread_t thread;
    struct conn conns[ZK_RELAY_CONNS];
};

/* ---- the servers -------------------------------------------------------- */

/* The server item s..e (host:port or [v6]:port) into *sv; false when it
 * is none. */
static bool
server_parse(const char *s, const char *e, struct server *sv)
{
    const char *colon = NULL, *h = s, *he;
    long port = 0;

    for (const char *p = s; p < e; p++) {
        if (*p == ':') {
            colon = p;
        }
    }
    if (colon == NULL || colon + 1 == e || e - colon > 6) {
        return false;
    }
    for (const char *p = colon + 1; p < e; p++) {
        if (*p < '0' || *p > '9') {
            return false;
        }
        port = port * 10 + (*p - '0');
    }
    he = colon;
    if (*h == '[') {
        if (he - h < 3 || he[-1] != ']') {
            return false;
        }
        h++;
        he--;
    }
    if (he == h || (size_t)(he - h) >= sizeof(sv->name) || port < 1 ||
        port > 65535) {
        return false;
    }
    memcpy(sv->name, h, (size_t)(he - h));
    sv->name[he - h] = '\0';
    sv->port = (int)port;
    sv->lfd = -1;
    return true;
}

/* A listening socket on a loopback address, port chosen by the kernel:
 * IPv4's, or IPv6's where there is none. Its connect-string item goes to
 * item. -1 with errno. */
static int
loopback_listen(char *item, size_t len)
{
    struct sockaddr_in in4 = {.sin_family = AF_INET,
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6,
                               .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    struct sockaddr_storage got;
    socklen_t gl = sizeof(got);

    for (int v6 = 0; v6 < 2; v6++) {
        int fd = socket(v6 ? AF_INET6 : AF_INET,
                        SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        const struct sockaddr *sa =
            v6 ? (const struct sockaddr *)&in6 : (const struct sockaddr *)&in4;
        socklen_t sl = v6 ? sizeof(in6) : sizeof(in4);
        int e;

        if (fd < 0) {
            continue;
        }
        if (bind(fd, sa, sl) == 0 && listen(fd, ZK_RELAY_CONNS) == 0 &&
            getsockname(fd, (struct sockaddr *)&got, &gl) == 0) {
            int port = ntohs(v6 ? ((struct sockaddr_in6 *)&got)->sin6_port
                                : ((struct sockaddr_in *)&got)->sin_port);

            snprintf(item, len, v6 ? "[::1]:%d" : "127.0.0.1:%d", port);
            return fd;
        }
        e = errno;
        close(fd);
        errno = e;
    }
    return -1;
}

/* ---- the connections ---------------------------------------------------- */

static void
conn_close(struct conn *c)
{
    if (c->cfd >= 0) {
        close(c->cfd);
    }
    if (c->sfd >= 0) {
        close(c->sfd);
    }
    memset(c, 0, sizeof(*c));
    c->cfd = -1;
    c->sfd = -1;
}

static void
server_failed(struct zk_relay *r, struct conn *c, const char *why)
{
    struct server *sv = &r->servers[c->srv];

    if (!sv->failing) {
        log_warn("%s: cannot reach the server %s:%d: %s; the client tries "
                 "the next",
                 r->who, LOG_STR(sv->name), sv->port, LOG_STR(why));
    } else {
        log_debug("%s: cannot reach the server %s:%d: %s", r->who,
                  LOG_STR(sv->name), sv->port, LOG_STR(why));
    }
    sv->failing = true;
    conn_close(c);
}

static void
server_reached(struct zk_relay *r, struct conn *c)
{
    struct server *sv = &r->servers[c->srv];

    c->connecting = false;
    if (sv->failing) {
        log_info("%s: reached the server %s:%d (%s) again", r->who,
                 LOG_STR(sv->name), sv->port, c->addrs.a[c->ai].text);
    } else {
        log_debug("%s: connected to the server %s:%d (%s)", r->who,
                  LOG_STR(sv->name), sv->port, c->addrs.a[c->ai].text);
    }
    sv->failing = false;
}

/* No delay for small writes: the client and the server each write a
 * call or an answer at a time, and wait for the other's (the client sets
 * the same on its own socket). */
static void
no_delay(int fd)
{
    int one = 1;

    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Connect c to its addresses from ai on, each with its share of the time
 * left; the connection closes when none is left. */
static void
dial_from(struct zk_relay *r, struct conn *c, char *why, size_t whylen)
{
    for (; c->ai < c->addrs.n; c->ai++) {
        const struct dial_addr *a = &c->addrs.a[c->ai];
        int64_t now = dial_now_ms();

        if (c->sfd >= 0) {
            close(c->sfd);
            c->sfd = -1;
        }
        if (now >= c->end) {
            snprintf(why, whylen, "no answer in %d ms", r->connect_ms);
            break;
        }
        c->sfd = socket(a->sa.ss_family,
                        SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c->sfd < 0) {
            snprintf(why, whylen, "%s", strerror(errno));
            continue;
        }
        no_delay(c->sfd);
        if (connect(c->sfd, (const struct sockaddr *)&a->sa, a->len) == 0) {
            server_reached(r, c);
            return;
        }
        if (errno == EINPROGRESS) {
            c->connecting = true;
            c->ai_end = now + dial_share_ms(c->end - now, c->addrs.n - c->ai);
            return;
        }
        snprintf(why, whylen, "%s: %s", a->text, strerror(errno));
    }
    server_failed(r, c, why);
}

/* A connection to a server ended its wait (ok, refused, or out of time):
 * reached, or the next address. */
static void
dial_done(struct zk_relay *r, struct conn *c, bool timed_out)
{
    char why[WHY_MAX];
    int err = 0;
    socklen_t el = sizeof(err);

    if (!timed_out &&
        getsockopt(c->sfd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0) {
        server_reached(r, c);
        return;
    }
    snprintf(why, sizeof(why), "%s: %s", c->addrs.a[c->ai].text,
             timed_out ? "no answer" : strerror(err));
    c->ai++;
    dial_from(r, c, why, sizeof(why));
}

/* True when peer is the address of a socket this process holds (other
 * than skip): the client's end of a connection to one of the ports. A
 * process that cannot see its own descriptors lets every peer in. */
static bool
own_peer(const struct sockaddr_storage *peer, int skip)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    bool own = false;

    if (d == NULL) {
        return true;
    }
    while (!own && (de = readdir(d)) != NULL) {
        struct sockaddr_storage a;
        socklen_t al = sizeof(a);
        int fd = atoi(de->d_name);

        if (de->d_name[0] < '0' || de->d_name[0] > '9' || fd == skip ||
            fd == dirfd(d) ||
            getsockname(fd, (struct sockaddr *)&a, &al) != 0 ||
            a.ss_family != peer->ss_family) {
            continue;
        }
        if (a.ss_family == AF_INET) {
            const struct sockaddr_in *x = (const void *)&a,
                                     *y = (const void *)peer;

            own = x->sin_port == y->sin_port &&
                  x->sin_addr.s_addr == y->sin_addr.s_addr;
        } else if (a.ss_family == AF_INET6) {
            const struct sockaddr_in6 *x = (const void *)&a,
                                      *y = (const void *)peer;

            own = x->sin6_port == y->sin6_port &&
                  memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0;
        }
    }
    closedir(d);
    return own;
}

/* The client connected to server srv's port: a free slot takes it and
 * connects to the server. Another process's connection is closed: the
 * ports are the client's alone. */
static void
on_accept(struct zk_relay *r, size_t srv, struct conn *c)
{
    struct server *sv = &r->servers[srv];
    struct sockaddr_storage peer;
    socklen_t pl = sizeof(peer);
    char why[WHY_MAX] = "";
    int fd = accept4(sv->lfd, (struct sockaddr *)&peer, &pl,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);

    if (fd < 0) {
        return;
    }
    if (!own_peer(&peer, fd)) {
        log_debug("%s: a connection to the port for %s:%d not from this "
                  "process: closed",
                  r->who, LOG_STR(sv->name), sv->port);
        close(fd);
        return;
    }
    no_delay(fd);
    c->cfd = fd;
    c->srv = srv;
    c->end = dial_now_ms() + r->connect_ms;
    if (!dial_resolve(sv->name, sv->port, &c->addrs, why, sizeof(why))) {
        server_failed(r, c, why);
        return;
    }
    dial_from(r, c, why, sizeof(why));
}

/* Write what leg holds to fd; false when fd failed. */
static bool
leg_flush(struct leg *g, int fd)
{
    while (g->len > 0) {
        ssize_t n = send(fd, g->b + g->off, g->len, MSG_NOSIGNAL);

        if (n < 0) {
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
        }
        g->off += (size_t)n;
        g->len -= (size_t)n;
    }
    g->off = 0;
    return true;
}

/* Read into an empty leg from fd: false when fd failed. */
static bool
leg_fill(struct leg *g, int fd)
{
    ssize_t n = recv(fd, g->b, sizeof(g->b), 0);

    if (n < 0) {
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    }
    g->eof = n == 0;
    g->off = 0;
    g->len = (size_t)n;
    return true;
}

/* Move what can be moved each way; close the connection once an end has
 * closed and what it sent has been written on, or on an error, or on a
 * frame too long. */
static void
conn_io(struct zk_relay *r, struct conn *c, short crev, short srev)
{
    struct server *sv = &r->servers[c->srv];
    uint32_t len;

    if ((crev & (POLLIN | POLLHUP | POLLERR)) && c->up.len == 0 && !c->up.eof &&
        !leg_fill(&c->up, c->cfd)) {
        conn_close(c);
        return;
    }
    if ((srev & (POLLIN | POLLHUP | POLLERR)) && c->down.len == 0 &&
        !c->down.eof) {
        if (!leg_fill(&c->down, c->sfd)) {
            log_info("%s: the server %s:%d: %s; the client connects again",
                     r->who, LOG_STR(sv->name), sv->port, strerror(errno));
            conn_close(c);
            return;
        }
        if (!lenframe_pass(&c->frames, c->down.b, c->down.len, ZK_FRAME_MAX,
                           &len)) {
            log_warn("%s: the server %s:%d sent a frame of %" PRIu32
                     " bytes, more than %u: connection dropped before the "
                     "client read it; the client connects again",
                     r->who, LOG_STR(sv->name), sv->port, len, ZK_FRAME_MAX);
            conn_close(c);
            return;
        }
    }
    if (!leg_flush(&c->up, c->sfd) || !leg_flush(&c->down, c->cfd) ||
        (c->up.eof && c->up.len == 0) || (c->down.eof && c->down.len == 0)) {
        conn_close(c);
    }
}

/* ---- the thread --------------------------------------------------------- */

enum slot_kind { SLOT_WAKE, SLOT_PORT, SLOT_CLIENT, SLOT_SERVER };

struct slot {
    enum slot_kind kind;
    size_t i;
};

/* Watch one end, fd: readable when from (read from it) is empty,
 * writable when to (written to it) holds bytes. An end with nothing to
 * watch is left out (fd -1), so that a hang-up it reports while the
 * other end is slow does not wake the loop again and again. */
static void
watch_end(struct pollfd *p, int fd, const struct leg *from,
          const struct leg *to)
{
    short ev = (short)((from->len == 0 && !from->eof ? POLLIN : 0) |
                       (to->len > 0 ? POLLOUT : 0));

    *p = (struct pollfd){.fd = ev != 0 ? fd : -1, .events = ev};
}

/* The pollfds for this turn into pf and what each is into sl; their
 * number. The ports are watched while a connection slot is free. */
static size_t
watch_list(struct zk_relay *r, struct pollfd *pf, struct slot *sl)
{
    size_t n = 0;
    bool room = false;

    pf[n] = (struct pollfd){.fd = r->wake, .events = POLLIN};
    sl[n++] = (struct slot){SLOT_WAKE, 0};
    for (size_t i = 0; i < ZK_RELAY_CONNS; i++) {
        struct conn *c = &r->conns[i];

        if (c->cfd < 0) {
            room = true;
            continue;
        }
        if (c->connecting) {
            pf[n] = (struct pollfd){.fd = c->sfd, .events = POLLOUT};
            sl[n++] = (struct slot){SLOT_SERVER, i};
            continue;
        }
        watch_end(&pf[n], c->cfd, &c->up, &c->down);
        sl[n++] = (struct slot){SLOT_CLIENT, i};
        watch_end(&pf[n], c->sfd, &c->down, &c->up);
        sl[n++] = (struct slot){SLOT_SERVER, i};
    }
    for (size_t i = 0; room && i < r->nservers; i++) {
        pf[n] = (struct pollfd){.fd = r->servers[i].lfd, .events = POLLIN};
        sl[n++] = (struct slot){SLOT_PORT, i};
    }
    return n;
}

/* The ms until the nearest address's deadline; -1: none. */
static int
next_deadline(const struct zk_relay *r)
{
    int64_t now = dial_now_ms(), best = -1;

    for (size_t i = 0; i < ZK_RELAY_CONNS; i++) {
        const struct conn *c = &r->conns[i];

        if (c->cfd >= 0 && c->connecting) {
            int64_t left = c->ai_end > now ? c->ai_end - now : 0;

            best = best < 0 || left < best ? left : best;
        }
    }
    return best < 0 ? -1 : (int)best;
}

static struct conn *
free_conn(struct zk_relay *r)
{
    for (size_t i = 0; i < ZK_RELAY_CONNS; i++) {
        if (r->conns[i].cfd < 0) {
            return &r->conns[i];
        }
    }
    return NULL;
}

static void
turn(struct zk_relay *r, struct pollfd *pf, struct slot *sl, size_t n)
{
    short rev[ZK_RELAY_CONNS][2] = {{0}};
    int64_t now;

    for (size_t j = 0; j < n; j++) {
        struct conn *c;

        if (pf[j].revents == 0) {
            continue;
        }
        switch (sl[j].kind) {
        case SLOT_WAKE:
            break;
        case SLOT_PORT:
            if ((c = free_conn(r)) != NULL) {
                on_accept(r, sl[j].i, c);
            }
            break;
        case SLOT_CLIENT:
            rev[sl[j].i][0] = pf[j].revents;
            break;
        case SLOT_SERVER:
            rev[sl[j].i][1] = pf[j].revents;
            break;
        }
    }
    now = dial_now_ms();
    for (size_t i = 0; i < ZK_RELAY_CONNS; i++) {
        struct conn *c = &r->conns[i];

        if (c->cfd < 0 || (rev[i][0] == 0 && rev[i][1] == 0 &&
                           !(c->connecting && now >= c->ai_end))) {
            continue;
        }
        if (c->connecting) {
            dial_done(r, c, rev[i][1] == 0);
        } else {
            conn_io(r, c, rev[i][0], rev[i][1]);
        }
    }
}

static void *
run(void *arg)
{
    struct zk_relay *r = arg;
    size_t cap = 1 + r->nservers + 2 * ZK_RELAY_CONNS;
    struct pollfd *pf = calloc(cap, sizeof(*pf));
    struct slot *sl = calloc(cap, sizeof(*sl));

    lib_enter(r->log);
    while (pf != NULL && sl != NULL && !atomic_load(&r->stopping)) {
        size_t n = watch_list(r, pf, sl);
        int rc = poll(pf, n, next_deadline(r));

        if (rc < 0 && errno != EINTR) {
            log_error("%s: the relay stops: poll: %s", r->who, strerror(errno));
            break;
        }
        /* A connection just accepted is turned too: a new slot's rev is 0
         * but its deadline may already have passed. */
        turn(r, pf, sl, rc > 0 ? n : 0);
    }
    if (pf == NULL || sl == NULL) {
        log_error("%s: the relay stops: out of memory", r->who);
    }
    free(pf);
    free(sl);
    return NULL;
}

/* ---- the relay ---------------------------------------------------------- */

struct zk_relay *
zk_relay_new(const char *hosts, const char *who, int connect_ms, char *err,
             size_t errlen)
{
    struct zk_relay *r = calloc(1, sizeof(*r));
    size_t n = 1, used = 0, cap;
    const char *s = hosts;

    if (r != NULL) {
        r->wake = -1;
        for (size_t i = 0; i < ZK_RELAY_CONNS; i++) {
            r->conns[i].cfd = -1;
            r->conns[i].sfd = -1;
        }
    }
    for (const char *p = hosts; *p != '\0'; p++) {
        n += *p == ',';
    }
    cap = n * ITEM_MAX + 1;
    if (r == NULL || (r->servers = calloc(n, sizeof(*r->servers))) == NULL ||
        (r->hosts = malloc(cap)) == NULL || (r->who = strdup(who)) == NULL) {
        snprintf(err, errlen, "%s: out of memory", who);
        zk_relay_free(r);
        return NULL;
    }
    r->log = log_current();
    r->connect_ms = connect_ms;
    r->hosts[0] = '\0';
    for (;;) {
        const char *e = strchr(s, ',');
        struct server *sv = &r->servers[r->nservers];
        char item[ITEM_MAX];

        e = e != NULL ? e : s + strlen(s);
        if (!server_parse(s, e, sv)) {
            snprintf(err, errlen, "%s: not host:port: %.*s", who,
                     (int)(e - s > 256 ? 256 : e - s), s);
            zk_relay_free(r);
            return NULL;
        }
        r->nservers++;
        if ((sv->lfd = loopback_listen(item, sizeof(item))) < 0) {
            snprintf(err, errlen, "%s: cannot open a loopback port: %s", who,
                     strerror(errno));
            zk_relay_free(r);
            return NULL;
        }
        used += (size_t)snprintf(r->hosts + used, cap - used, "%s%s",
                                 used > 0 ? "," : "", item);
        log_debug("%s: the client reaches the server %s:%d through %s", who,
                  LOG_STR(sv->name), sv->port, item);
        if (*e == '\0') {
            break;
        }
        s = e + 1;
    }
    r->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (r->wake < 0 ||
        (errno = thread_start_unsignalled(&r->thread, "zkrel", run, r)) != 0) {
        snprintf(err, errlen, "%s: cannot start the relay: %s", who,
                 strerror(errno));
        zk_relay_free(r);
        return NULL;
    }
    r->started = true;
    return r;
}

const char *
zk_relay_hosts(const struct zk_relay *r)
{
    return r->hosts;
}

void
zk_relay_free(struct zk_relay *r)
{
    if (r == NULL) {
        return;
    }
    if (r->started) {
        uint64_t one = 1;
        ssize_t w;

        atomic_store(&r->stopping, true);
        w = write(r->wake, &one, sizeof(one));
        (void)w; /* the counter cannot be full: one write ever */
        pthread_join(r->thread, NULL);
    }
    for (size_t i = 0; i < ZK_RELAY_CONNS; i++) {
        conn_close(&r->conns[i]);
    }
    for (size_t i = 0; i < r->nservers; i++) {
        if (r->servers[i].lfd >= 0) {
            close(r->servers[i].lfd);
        }
    }
    if (r->wake >= 0) {
        close(r->wake);
    }
    free(r->servers);
    free(r->hosts);
    free(r->who);
    free(r);
}
