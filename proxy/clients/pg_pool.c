/* pg_pool.c: libpq async connections on the loop for the Postgres mark
 * store and lock backend: connect with backoff, setup and prepares at
 * each connect, one query in flight per connection with a deadline.
 *
 * From the moment libpq has sent its first message on a connection and
 * waits for the server's answer (before TLS, authentication and the
 * server's first messages), libpq reads and writes one end of a socket
 * pair in place of the server's socket, and the pool moves the bytes
 * between the pair and the server, counting what the server sends:
 * libpq keeps a whole result, a row until its last byte however long
 * the row says it is, and a notice or error of any length, reading on
 * for as long as the bytes keep coming, so what an answer may take is
 * weighed here, before libpq has the bytes. If libpq lets go of the
 * socket while connecting (to try another address, or again without
 * TLS), the relay ends with it and the next socket is relayed in turn. */
#include "pg_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/socket.h>
#include <sys/stat.h>

#include <event2/event.h>

#include "../log.h"
#include "coldq.h"
#include "dial.h"

#define PG_BACKOFF_MIN_MS 100
#define PG_BACKOFF_MAX_MS 2000
#define PG_CONNECT_MIN_MS 5000
/* What one answer may take: the bytes the server sent since the last one
 * ended (for the first, since libpq's first message on the socket: TLS,
 * authentication and the server's first messages count), counted as they
 * are moved to libpq, so libpq holds at most this and what the pair
 * buffers. No answer tidemark asks for comes near it. */
#define PG_ANSWER_MAX (16u << 20)
/* One move of bytes between the server and libpq. */
#define PG_RELAY_BUF 16384

enum pc_state {
    PC_DOWN,       /* waiting for retry_ev */
    PC_CONNECTING, /* PQconnectPoll */
    PC_SWAP,       /* the socket goes to the relay next turn */
    PC_SETUP,      /* the setup query, then the prepares, in flight */
    PC_IDLE,
    PC_BUSY, /* a query in flight */
};

struct pg_conn {
    struct pg_pool *s;
    int id;
    PGconn *pg;
    enum pc_state state;
    struct event *ev; /* the socket, for what `what` says */
    int ev_fd;
    short ev_what;
    struct event *timer; /* retry while down, deadline otherwise */
    int backoff_ms;
    int64_t connect_end; /* the connect deadline (dial_now_ms) */
    unsigned failures;
    bool has_work;     /* the owner has something of ours */
    PGresult *result;  /* the first result of the query in flight */
    size_t setup_step; /* 0 setup query, then one per prepare */
    /* The relay, from PC_SWAP's end until the connection is dropped. */
    int net_fd;     /* the server's socket; -1 when not relayed */
    int pair_fd;    /* our end of the pair libpq has in the socket's place */
    dev_t pair_dev; /* libpq's end, to see that it still has it */
    ino_t pair_ino;
    struct event *net_rd;
    struct event *net_wr; /* on while out holds bytes */
    unsigned gen;         /* bumped at each drop: a stale c is seen */
    int io_errno;         /* the relay's failure, for the log line */
    uint64_t answer;      /* bytes from the server since an answer ended */
    size_t out_off;
    size_t out_len; /* libpq's bytes not yet taken by the server */
    char out[PG_RELAY_BUF];
};

struct pg_pool {
    struct event_base *base;
    const struct tm_log *log; /* the proxy's, entered by callbacks */
    char *dsn;
    const char *what;
    int npool;
    int timeout_ms;
    const char *setup;
    const struct pg_pool_stmt *stmts;
    size_t nstmts;
    const struct pg_pool_ops *ops;
    void *owner;
    struct pg_conn *conns;
    struct event *kick_ev; /* end of turn: pg_pool_dispatch */
    struct coldq *cold;    /* calls waiting for the first connection */
    bool kick_armed;
    bool closing;
    bool ever_ready;
};

static void conn_start(struct pg_conn *c);
static void conn_read(struct pg_conn *c);
static void connect_poll(struct pg_conn *c);
static void conn_setup(struct pg_conn *c);
static void relay_stop(struct pg_conn *c);
static void on_conn_event(evutil_socket_t fd, short what, void *arg);

/* Free *ev, if any, and forget it. */
static void
drop_event(struct event **ev)
{
    if (*ev != NULL) {
        event_free(*ev);
        *ev = NULL;
    }
}

static bool
conn_up(const struct pg_conn *c)
{
    return c->state == PC_IDLE || c->state == PC_BUSY;
}

static bool
any_up(const struct pg_pool *s)
{
    for (int i = 0; i < s->npool; i++) {
        if (conn_up(&s->conns[i])) {
            return true;
        }
    }
    return false;
}

/* Watch the socket for what (EV_READ and/or EV_WRITE, persistent). */
static bool
conn_watch(struct pg_conn *c, short what)
{
    int fd = PQsocket(c->pg);

    if (c->ev != NULL && c->ev_fd == fd && c->ev_what == what) {
        return true;
    }
    drop_event(&c->ev);
    if (fd < 0) {
        return false;
    }
    c->ev = event_new(c->s->base, fd, what | EV_PERSIST, on_conn_event, c);
    if (c->ev == NULL || event_add(c->ev, NULL) != 0) {
        return false;
    }
    c->ev_fd = fd;
    c->ev_what = what;
    return true;
}

static void
conn_deadline(struct pg_conn *c, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

    evtimer_add(c->timer, &tv);
}

/* Drop the connection: answer what is in flight STORE_ERROR, retry
 * later. why is logged (the first failure in a row, then now and then). */
static void
conn_fail(struct pg_conn *c, const char *why)
{
    struct pg_pool *s = c->s;
    bool was_up = conn_up(c);

    if (!s->closing && (c->failures == 0 || c->failures % 30 == 0 || was_up)) {
        char msg[512];
        size_t n;

        snprintf(msg, sizeof(msg), "%s", why);
        n = strlen(msg);
        while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' ')) {
            msg[--n] = '\0';
        }
        log_error("postgres: connection %d (%s): %s; reconnecting", c->id,
                  s->what, LOG_STR(msg));
    }
    c->failures++;
    if (c->result != NULL) {
        PQclear(c->result);
        c->result = NULL;
    }
    drop_event(&c->ev);
    if (c->pg != NULL) {
        PQfinish(c->pg);
        c->pg = NULL;
    }
    relay_stop(c);
    evtimer_del(c->timer);
    c->state = PC_DOWN;
    if (c->has_work) {
        c->has_work = false;
        s->ops->failed(s->owner, c->id);
    }
    if (s->closing) {
        return;
    }
    conn_deadline(c, c->backoff_ms);
    c->backoff_ms *= 2;
    if (c->backoff_ms > PG_BACKOFF_MAX_MS) {
        c->backoff_ms = PG_BACKOFF_MAX_MS;
    }
    /* Work queued for a pool that is now all down: answer it. */
    if (!any_up(s)) {
        s->ops->all_down(s->owner);
    }
}

/* what, and why: the relay's failure if it had one, else libpq's. */
static void
conn_fail_pg(struct pg_conn *c, const char *what)
{
    char msg[512];

    snprintf(msg, sizeof(msg), "%s: %s", what,
             c->io_errno != 0 ? strerror(c->io_errno)
             : c->pg != NULL  ? PQerrorMessage(c->pg)
                              : "no connection");
    conn_fail(c, msg);
}

/* ---- the relay --------------------------------------------------------
 * libpq's bytes go to the server from the pair as they are flushed (what
 * the server does not take waits in c->out, net_wr on, and the pair is
 * not read meanwhile); the server's bytes are counted and written into
 * the pair, where libpq reads them as it read its socket before: c->ev
 * watches its end, and libpq reads at once whenever the pair is full
 * (conn_read, or connect_poll while connecting).
 * The server's close is passed on as the pair's. */

static bool
io_again(void)
{
    return errno == EAGAIN || errno == EWOULDBLOCK;
}

/* libpq's bytes to the server, as many as it takes. false: failed, with
 * c->io_errno set. A short read of the pair took all it had (libpq
 * writes only while it is flushed). */
static bool
relay_out(struct pg_conn *c)
{
    bool drained = false;

    for (;;) {
        ssize_t n;

        if (c->out_len == 0 && drained) {
            event_del(c->net_wr);
            return true;
        }
        if (c->out_len == 0) {
            n = recv(c->pair_fd, c->out, sizeof(c->out), 0);
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n < 0 && io_again()) {
                event_del(c->net_wr);
                return true;
            }
            if (n <= 0) {
                c->io_errno = n == 0 ? EPIPE : errno;
                return false;
            }
            c->out_off = 0;
            c->out_len = (size_t)n;
            drained = c->out_len < sizeof(c->out);
        }
        n = send(c->net_fd, c->out + c->out_off, c->out_len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && io_again()) {
            return event_add(c->net_wr, NULL) == 0;
        }
        if (n < 0) {
            c->io_errno = errno;
            return false;
        }
        c->out_off += (size_t)n;
        c->out_len -= (size_t)n;
    }
}

/* Send what libpq has buffered, through the pair to the server. */
static bool
conn_flush(struct pg_conn *c)
{
    for (;;) {
        int rc = PQflush(c->pg);

        if (rc < 0 || !relay_out(c)) {
            return false;
        }
        /* Done, or the server is full: net_wr goes on from here. */
        if (rc == 0 || c->out_len > 0) {
            return true;
        }
    }
}

/* n bytes from the server into the pair; libpq reads the pair each time
 * it is full. false: c was dropped meanwhile. */
static bool
relay_in(struct pg_conn *c, const char *buf, size_t n)
{
    unsigned gen = c->gen;

    while (n > 0) {
        ssize_t w = send(c->pair_fd, buf, n, MSG_NOSIGNAL);

        if (w > 0) {
            buf += w;
            n -= (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && io_again()) {
            if (c->state == PC_CONNECTING) {
                connect_poll(c);
            } else {
                conn_read(c);
            }
            if (c->gen != gen) {
                return false;
            }
        } else {
            c->io_errno = w < 0 ? errno : EPIPE;
            conn_fail_pg(c, "relaying");
            return false;
        }
    }
    return true;
}

static void
on_net_read(evutil_socket_t fd, short what, void *arg)
{
    struct pg_conn *c = arg;
    char buf[PG_RELAY_BUF];

    lib_enter(c->s->log);
    (void)what;
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof(buf), 0);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && io_again()) {
            break;
        }
        if (n < 0) {
            c->io_errno = errno;
            conn_fail_pg(c, "reading");
            return;
        }
        if (n == 0) {
            /* The server closed: libpq hears it from the pair. */
            event_del(c->net_rd);
            shutdown(c->pair_fd, SHUT_WR);
            return;
        }
        c->answer += (size_t)n;
        if (c->answer > PG_ANSWER_MAX) {
            conn_fail(c, "an answer larger than 16 MiB");
            return;
        }
        if (!relay_in(c, buf, (size_t)n)) {
            return;
        }
        if ((size_t)n < sizeof(buf)) {
            return; /* all there was: the watch says when more comes */
        }
    }
}

static void
on_net_write(evutil_socket_t fd, short what, void *arg)
{
    struct pg_conn *c = arg;

    lib_enter(c->s->log);
    (void)fd;
    (void)what;
    /* While connecting, libpq writes inside PQconnectPoll: only the pair
     * is to be emptied. */
    if (!(c->state == PC_CONNECTING ? relay_out(c) : conn_flush(c))) {
        conn_fail_pg(c, "writing");
    }
}

/* libpq's socket becomes one end of a pair, the server's socket ours.
 * Called a turn after the loop stopped watching the socket, so that no
 * watch of the number is left to apply to what it names now. */
static bool
relay_start(struct pg_conn *c)
{
    int fd = PQsocket(c->pg);
    int pair[2];
    struct stat st;

    if (fd < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
                   pair) != 0) {
        c->io_errno = fd < 0 ? EBADF : errno;
        return false;
    }
    c->pair_fd = pair[1];
    c->net_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (c->net_fd < 0 || dup3(pair[0], fd, O_CLOEXEC) < 0 ||
        fstat(pair[0], &st) != 0) {
        c->io_errno = errno;
        close(pair[0]);
        return false;
    }
    c->pair_dev = st.st_dev;
    c->pair_ino = st.st_ino;
    close(pair[0]);
    c->answer = 0;
    c->net_rd =
        event_new(c->s->base, c->net_fd, EV_READ | EV_PERSIST, on_net_read, c);
    c->net_wr = event_new(c->s->base, c->net_fd, EV_WRITE | EV_PERSIST,
                          on_net_write, c);
    if (c->net_rd == NULL || c->net_wr == NULL ||
        event_add(c->net_rd, NULL) != 0) {
        c->io_errno = ENOMEM;
        return false;
    }
    return true;
}

/* True while libpq's socket is the pair's end relay_start gave it: libpq
 * closes it to try another address or host, or to try again without
 * TLS, and makes a socket of its own. */
static bool
relay_holds_libpq(const struct pg_conn *c)
{
    struct stat st;
    int fd = PQsocket(c->pg);

    return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == c->pair_dev &&
           st.st_ino == c->pair_ino;
}

/* After PQfinish, or once libpq let go of the pair while connecting:
 * what libpq said last (its Terminate) goes to the server if it takes it
 * now, then both sockets close. */
static void
relay_stop(struct pg_conn *c)
{
    if (c->net_fd >= 0 && c->pair_fd >= 0 && c->net_wr != NULL) {
        (void)relay_out(c);
    }
    drop_event(&c->net_rd);
    drop_event(&c->net_wr);
    if (c->net_fd >= 0) {
        close(c->net_fd);
        c->net_fd = -1;
    }
    if (c->pair_fd >= 0) {
        close(c->pair_fd);
        c->pair_fd = -1;
    }
    c->out_len = 0;
    c->io_errno = 0;
    c->gen++;
}

static void
conn_ready(struct pg_conn *c)
{
    struct pg_pool *s = c->s;

    evtimer_del(c->timer);
    c->state = PC_IDLE;
    if (c->failures > 0 || !s->ever_ready) {
        log_info("postgres: connection %d (%s) ready", c->id, s->what);
    }
    c->failures = 0;
    c->backoff_ms = PG_BACKOFF_MIN_MS;
    s->ever_ready = true;
    coldq_up(s->cold);
    pg_pool_dispatch(s);
}

/* One result of the setup query; keeps the first error in c->result,
 * frees the rest. */
static void
setup_result(struct pg_conn *c, PGresult *res)
{
    ExecStatusType st = PQresultStatus(res);
    const char *code = PQresultErrorField(res, PG_DIAG_SQLSTATE);

    if (st == PGRES_TUPLES_OK && PQntuples(res) > 0) {
        log_warn("postgres: synchronous_commit is off on the server: set "
                 "to on for tidemark's %s sessions",
                 c->s->what);
    }
    /* Two sessions creating the table at once: one of them fails with a
     * unique violation on the catalog; the table exists. */
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK &&
        !(code != NULL &&
          (strcmp(code, "23505") == 0 || strcmp(code, "42P07") == 0)) &&
        c->result == NULL) {
        c->result = res;
        return;
    }
    PQclear(res);
}

/* The query in flight ended (PQgetResult gave NULL). */
static void
query_done(struct pg_conn *c)
{
    PGresult *res = c->result;
    struct pg_pool *s = c->s;

    c->result = NULL;
    if (c->state == PC_SETUP) {
        const struct pg_pool_stmt *st;

        if (res != NULL) {
            char msg[512];

            snprintf(msg, sizeof(msg), "setting up the %s table: %s", s->what,
                     PQresultErrorMessage(res));
            PQclear(res);
            conn_fail(c, msg);
            return;
        }
        /* Prepared once per connection: a query is then one Bind and
         * Execute, not a parse and plan. */
        if (c->setup_step >= s->nstmts) {
            conn_ready(c);
            return;
        }
        st = &s->stmts[c->setup_step++];
        if (!PQsendPrepare(c->pg, st->name, st->sql, st->nparams, st->types) ||
            !conn_flush(c)) {
            conn_fail_pg(c, "preparing");
        }
        return;
    }
    if (res == NULL) {
        log_error("postgres: connection %d (%s): no result", c->id, s->what);
    }
    evtimer_del(c->timer);
    /* A query can end on the connection's loss: libpq, out of step with
     * what the server sent, gives its error as the query's result and
     * closes its end. The result is handed on as any other, then the
     * connection dropped now, not left idle to fail at its next use. Its
     * watch goes first: what done does may open a socket on the closed
     * end's number. */
    if (PQstatus(c->pg) == CONNECTION_BAD) {
        drop_event(&c->ev);
        if (c->has_work) {
            c->has_work = false;
            s->ops->done(s->owner, c->id, res);
        }
        PQclear(res);
        conn_fail_pg(c, "connection lost");
        pg_pool_dispatch(s);
        return;
    }
    c->state = PC_IDLE;
    if (c->has_work) {
        c->has_work = false;
        s->ops->done(s->owner, c->id, res);
    }
    PQclear(res);
    pg_pool_dispatch(s);
}

/* libpq reads what the relay put in the pair, and the results it has
 * whole are taken. */
static void
conn_read(struct pg_conn *c)
{
    if (!PQconsumeInput(c->pg)) {
        conn_fail_pg(c, "reading");
        return;
    }
    while (c->state == PC_SETUP || c->state == PC_BUSY) {
        PGresult *res;

        if (PQisBusy(c->pg)) {
            break;
        }
        res = PQgetResult(c->pg);
        if (res == NULL) {
            c->answer = 0;
            query_done(c);
            return; /* c may be failed, or busy with new work */
        }
        if (c->state == PC_SETUP) {
            setup_result(c, res);
        } else if (c->result == NULL) {
            c->result = res;
        } else {
            PQclear(res);
        }
    }
    if (PQstatus(c->pg) == CONNECTION_BAD) {
        conn_fail_pg(c, "connection lost");
        return;
    }
    if (c->state == PC_IDLE) {
        /* Notices or a server going away while idle. */
        PGnotify *n;

        while ((n = PQnotifies(c->pg)) != NULL) {
            PQfreemem(n);
        }
    }
}

static void
connect_poll(struct pg_conn *c)
{
    PostgresPollingStatusType st = PQconnectPoll(c->pg);

    /* libpq moves on to the host's next address when one fails, on a new
     * socket that often has the old one's number: the kernel dropped the
     * old one from the poll set at close, so watch afresh each time. The
     * relay of a socket libpq let go of ends with it. */
    drop_event(&c->ev);
    if (c->net_fd >= 0 && !relay_holds_libpq(c)) {
        relay_stop(c);
    }
    /* What libpq wrote into the pair goes to the server. */
    if (c->net_fd >= 0 && st != PGRES_POLLING_FAILED && !relay_out(c)) {
        conn_fail_pg(c, "relaying");
        return;
    }
    switch (st) {
    case PGRES_POLLING_READING:
        /* libpq has said its first words (TLS or not) and waits for the
         * server's: from the first of them on, the server's bytes are
         * weighed. The watch just freed is let go of at the loop's next
         * turn; the socket's number changes hands after it. */
        if (c->net_fd < 0) {
            c->state = PC_SWAP;
            conn_deadline(c, 0);
        } else if (!conn_watch(c, EV_READ)) {
            conn_fail(c, "cannot watch the socket");
        }
        return;
    case PGRES_POLLING_WRITING:
        if (!conn_watch(c, EV_WRITE)) {
            conn_fail(c, "cannot watch the socket");
        }
        return;
    case PGRES_POLLING_OK:
        break;
    default:
        conn_fail_pg(c, "cannot connect");
        return;
    }
    if (c->net_fd >= 0) {
        conn_setup(c);
        return;
    }
    c->state = PC_SWAP; /* as above */
    conn_deadline(c, 0);
}

/* In the middle of connecting, and the loop no longer watches libpq's
 * socket: relay it, and go on connecting within what is left of the
 * deadline. */
static void
relay_connecting(struct pg_conn *c)
{
    int64_t left = c->connect_end - dial_now_ms();

    if (left <= 0) {
        conn_fail(c, "no connection within the deadline");
        return;
    }
    if (!relay_start(c) || !conn_watch(c, EV_READ)) {
        conn_fail_pg(c, "relaying");
        return;
    }
    c->state = PC_CONNECTING;
    conn_deadline(c, (int)left);
}

/* Connected, the socket relayed (or, if it is not yet, no longer watched
 * by the loop: relayed now): the setup query. */
static void
conn_setup(struct pg_conn *c)
{
    if ((c->net_fd < 0 && !relay_start(c)) || !conn_watch(c, EV_READ)) {
        conn_fail_pg(c, "relaying");
        return;
    }
    if (PQsetnonblocking(c->pg, 1) != 0 || !PQsendQuery(c->pg, c->s->setup)) {
        conn_fail_pg(c, "setting up");
        return;
    }
    c->state = PC_SETUP;
    c->setup_step = 0;
    conn_deadline(c, 2 * c->s->timeout_ms);
    if (!conn_flush(c)) {
        conn_fail_pg(c, "setting up");
    }
}

static void
on_conn_event(evutil_socket_t fd, short what, void *arg)
{
    struct pg_conn *c = arg;

    lib_enter(c->s->log);
    (void)fd;
    if (c->state == PC_CONNECTING) {
        connect_poll(c);
    } else if (what & EV_READ) {
        conn_read(c);
    }
}

static void
on_conn_timer(evutil_socket_t fd, short what, void *arg)
{
    struct pg_conn *c = arg;
    char msg[128];

    lib_enter(c->s->log);
    (void)fd;
    (void)what;
    switch (c->state) {
    case PC_DOWN:
        conn_start(c);
        return;
    case PC_SWAP:
        if (PQstatus(c->pg) == CONNECTION_OK) {
            conn_setup(c);
        } else {
            relay_connecting(c);
        }
        return;
    case PC_CONNECTING:
    case PC_SETUP:
        conn_fail(c, "no connection within the deadline");
        return;
    default:
        snprintf(msg, sizeof(msg), "no answer within %d ms",
                 2 * c->s->timeout_ms);
        conn_fail(c, msg);
        return;
    }
}

/* libpq's notice processor: a server's NOTICE or WARNING (CREATE TABLE IF
 * NOT EXISTS says one on every connection but the first) goes to the log
 * at debug, escaped, not to stderr as libpq's default would write it. */
static void
conn_notice(void *arg, const char *message)
{
    const struct pg_conn *c = arg;
    size_t n = strlen(message);

    while (n > 0 && (message[n - 1] == '\n' || message[n - 1] == ' ')) {
        n--;
    }
    log_debug("postgres: connection %d (%s): %s", c->id, c->s->what,
              LOG_ESC(message, n));
}

static void
conn_start(struct pg_conn *c)
{
    struct pg_pool *s = c->s;
    const char *const keys[] = {"dbname", "client_encoding",
                                "fallback_application_name", NULL};
    const char *const vals[] = {s->dsn, "UTF8", "tidemark", NULL};
    int ms = 2 * s->timeout_ms;

    /* The DSN comes first: client_encoding after it wins. */
    c->pg = PQconnectStartParams(keys, vals, 1);
    if (c->pg == NULL) {
        conn_fail(c, "out of memory");
        return;
    }
    PQsetNoticeProcessor(c->pg, conn_notice, c);
    if (PQstatus(c->pg) == CONNECTION_BAD) {
        conn_fail_pg(c, "cannot connect");
        return;
    }
    c->state = PC_CONNECTING;
    /* libpq leaves connect_timeout to the caller of PQconnectPoll: one
     * deadline for every address of the host, which libpq tries in turn
     * (a refused one costs nothing, a silent one all of it). */
    ms = ms > PG_CONNECT_MIN_MS ? ms : PG_CONNECT_MIN_MS;
    c->connect_end = dial_now_ms() + ms;
    conn_deadline(c, ms);
    if (!conn_watch(c, EV_WRITE)) {
        conn_fail(c, "cannot watch the socket");
    }
}

/* ---- the owner's side ------------------------------------------------ */

struct coldq *
pg_pool_coldq(struct pg_pool *p)
{
    return p->cold;
}

bool
pg_pool_any_up(const struct pg_pool *p)
{
    return !p->closing && any_up(p);
}

void
pg_pool_dispatch(struct pg_pool *s)
{
    for (int i = 0; i < s->npool && !s->closing; i++) {
        struct pg_conn *c = &s->conns[i];

        if (c->state != PC_IDLE) {
            continue;
        }
        switch (s->ops->take(s->owner, c->id, c->pg)) {
        case PG_TAKE_NONE:
            return;
        case PG_TAKE_SENT:
            c->state = PC_BUSY;
            c->has_work = true;
            if (!conn_flush(c)) {
                conn_fail_pg(c, "sending");
                continue;
            }
            conn_deadline(c, 2 * s->timeout_ms);
            break;
        case PG_TAKE_FAILED:
            c->state = PC_BUSY;
            c->has_work = true;
            conn_fail_pg(c, "sending");
            break;
        }
    }
}

static void
on_kick(evutil_socket_t fd, short what, void *arg)
{
    struct pg_pool *s = arg;

    lib_enter(s->log);
    (void)fd;
    (void)what;
    s->kick_armed = false;
    pg_pool_dispatch(s);
}

void
pg_pool_dispatch_soon(struct pg_pool *s)
{
    if (!s->kick_armed) {
        s->kick_armed = true;
        event_active(s->kick_ev, 0, 1);
    }
}

void
pg_pool_free(struct pg_pool *s)
{
    if (s == NULL) {
        return;
    }
    s->closing = true;
    coldq_free(s->cold);
    s->cold = NULL;
    for (int i = 0; s->conns != NULL && i < s->npool; i++) {
        struct pg_conn *c = &s->conns[i];

        if (c->pg != NULL || c->has_work) {
            conn_fail(c, "closing");
        }
        if (c->timer != NULL) {
            event_free(c->timer);
        }
    }
    if (s->kick_ev != NULL) {
        event_free(s->kick_ev);
    }
    free(s->conns);
    free(s->dsn);
    free(s);
}

bool
pg_pool_dsn_ok(const char *dsn, const char *who, char *err, size_t errlen)
{
    PQconninfoOption *opts;
    char *msg = NULL;

    if (dsn == NULL || dsn[0] == '\0') {
        snprintf(err, errlen, "%s dsn is not set", who);
        return false;
    }
    /* The config loader checked it; libpq's message is not repeated
     * here, it may quote a password. */
    opts = PQconninfoParse(dsn, &msg);
    PQfreemem(msg);
    if (opts == NULL) {
        snprintf(err, errlen, "%s dsn is not a libpq connection string", who);
        return false;
    }
    PQconninfoFree(opts);
    return true;
}

struct pg_pool *
pg_pool_new(struct event_base *base, const char *dsn, const char *what,
            int npool, int timeout_ms, const char *setup,
            const struct pg_pool_stmt *stmts, size_t nstmts,
            const struct pg_pool_ops *ops, void *owner, char *err,
            size_t errlen)
{
    struct pg_pool *s = calloc(1, sizeof(*s));

    if (s == NULL) {
        snprintf(err, errlen, "postgres: out of memory");
        return NULL;
    }
    s->base = base;
    s->log = log_current();
    s->what = what;
    s->npool = npool > 0 ? npool : 2;
    s->timeout_ms = timeout_ms > 0 ? timeout_ms : 2000;
    s->setup = setup;
    s->stmts = stmts;
    s->nstmts = nstmts;
    s->ops = ops;
    s->owner = owner;
    s->dsn = strdup(dsn);
    s->conns = calloc((size_t)s->npool, sizeof(*s->conns));
    s->kick_ev = event_new(base, -1, 0, on_kick, s);
    s->cold = coldq_new(base, s->timeout_ms);
    if (s->dsn == NULL || s->conns == NULL || s->kick_ev == NULL ||
        s->cold == NULL) {
        snprintf(err, errlen, "postgres: out of memory");
        pg_pool_free(s);
        return NULL;
    }
    for (int i = 0; i < s->npool; i++) {
        struct pg_conn *c = &s->conns[i];

        c->s = s;
        c->id = i;
        c->ev_fd = -1;
        c->net_fd = -1;
        c->pair_fd = -1;
        c->backoff_ms = PG_BACKOFF_MIN_MS;
        c->timer = evtimer_new(base, on_conn_timer, c);
        if (c->timer == NULL) {
            snprintf(err, errlen, "postgres: out of memory");
            pg_pool_free(s);
            return NULL;
        }
    }
    /* Unreachable now is an outage, not a configuration error: the
     * owner starts not ready and the pool connects when the server is
     * there. */
    for (int i = 0; i < s->npool; i++) {
        conn_start(&s->conns[i]);
    }
    return s;
}
