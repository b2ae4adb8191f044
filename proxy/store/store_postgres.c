/* store_postgres.c: marks in a Postgres table through libpq's async API
 * on the proxy's loop: a small connection pool, the raises of a loop turn
 * in one upsert (one round trip, one commit), reconnect with backoff. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <libpq-fe.h>
#include <openssl/sha.h>

#include "../../conf/cfg.h"
#include "../log.h"
#include "store.h"
#include "store_defer.h"

/*
 * The table: tidemark_marks (resource text PRIMARY KEY, fence bigint NOT
 * NULL), created if absent at each connect.
 *
 * One batch is one statement: the distinct resources of the batch, sorted
 * by their bytes, each with the highest token the batch has for it:
 *
 *   INSERT ... SELECT FROM unnest($1::text[], $2::bigint[]) ... ORDER BY
 *   ON CONFLICT (resource) DO UPDATE SET fence = GREATEST(m.fence,
 *   EXCLUDED.fence) RETURNING resource, fence
 *
 * ON CONFLICT DO UPDATE works on the latest committed row and locks it,
 * so under READ COMMITTED the returned fence is max(mark, highest token)
 * whatever runs concurrently; and every statement locks its rows in one
 * byte order, so two batches (or two sidecars) cannot deadlock. Each raise
 * of the batch is then answered from the returned fence F: accepted when
 * its token equals F, stale with F otherwise (F is never below a token).
 * That is the answer of one serial order of the batch's raises, all of
 * which were in flight together: the highest token first, the rest after
 * it. Accepted means committed: autocommit, and synchronous_commit is set
 * back to on for the session when the server's default is off.
 *
 * Names the table cannot hold as text (a NUL byte, invalid UTF-8) are
 * stored as "\x01sha256:" and the hex SHA-256 of the name; valid names
 * never start with \x01 in practice, and the prefix keeps them apart.
 */

#define PG_BATCH_MAX 512
#define PG_QUEUE_MAX 65536
#define PG_BACKOFF_MIN_MS 100
#define PG_BACKOFF_MAX_MS 2000
#define PG_CONNECT_MIN_MS 5000
#define PG_DIGEST_PREFIX "\x01sha256:"
#define PG_DIGEST_PREFIX_LEN 8
#define PG_DIGEST_KEY_LEN (PG_DIGEST_PREFIX_LEN + 2 * SHA256_DIGEST_LENGTH)
#define PG_LOG_NAME_MAX 200
#define OID_TEXT 25
#define OID_INT8 20
#define OID_TEXT_ARRAY 1009
#define OID_INT8_ARRAY 1016

#define PG_SETUP_SQL                                                        \
    "SELECT set_config('synchronous_commit', 'on', false) "                 \
    "WHERE current_setting('synchronous_commit') = 'off';"                  \
    "CREATE TABLE IF NOT EXISTS tidemark_marks ("                           \
    "resource text PRIMARY KEY, fence bigint NOT NULL)"

#define PG_RAISE_SQL                                                        \
    "INSERT INTO tidemark_marks AS m (resource, fence) "                    \
    "SELECT r, t FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY "    \
    "AS x(r, t, i) ORDER BY i "                                             \
    "ON CONFLICT (resource) DO UPDATE "                                     \
    "SET fence = GREATEST(m.fence, EXCLUDED.fence) "                        \
    "RETURNING resource, fence"

#define PG_GET_SQL "SELECT fence FROM tidemark_marks WHERE resource = $1"
#define PG_RAISE_STMT "tidemark_raise"
#define PG_GET_STMT "tidemark_get"

struct pg_req {
    struct pg_req *next;
    store_cb cb;
    void *arg;
    int64_t token;          /* raise: the token; get: 0 */
    bool is_get;
    enum store_result res;
    int64_t mark;
    size_t nlen;            /* the resource name, for log lines */
    const char *name;
    size_t klen;            /* the key stored in the table */
    char key[];             /* key, then name when they differ */
};

struct req_list {
    struct pg_req *head;
    struct pg_req *tail;
    size_t n;
};

enum pc_state {
    PC_DOWN,        /* waiting for retry_ev */
    PC_CONNECTING,  /* PQconnectPoll */
    PC_SETUP,       /* the setup query, then the prepares, in flight */
    PC_IDLE,
    PC_BUSY,        /* a batch or a get in flight */
};

struct pg_conn {
    struct pg_store *s;
    int id;
    PGconn *pg;
    enum pc_state state;
    struct event *ev;       /* the socket, for what `what` says */
    int ev_fd;
    short ev_what;
    struct event *timer;    /* retry while down, deadline otherwise */
    int backoff_ms;
    unsigned failures;
    struct req_list batch;  /* in flight */
    PGresult *result;       /* the first result of the query in flight */
    int setup_step;         /* 0 setup query, 1 prepare raise, 2 get */
};

struct pg_store {
    struct event_base *base;
    char *dsn;
    int npool;
    int timeout_ms;
    struct pg_conn *conns;
    struct req_list pending;
    struct event *kick_ev;  /* end of turn: dispatch pending */
    bool kick_armed;
    struct store_defer *defer;
    bool closing;
    bool full_logged;
    bool ever_ready;
    /* Scratch for one batch's parameters. */
    char *buf;
    size_t bufcap;
    struct pg_req **sorted;
};

static struct pg_store *
to_pg(struct store *s)
{
    return (struct pg_store *)s;
}

static int
log_name_len(size_t len)
{
    return len > PG_LOG_NAME_MAX ? PG_LOG_NAME_MAX : (int)len;
}

static void
list_push(struct req_list *l, struct pg_req *r)
{
    r->next = NULL;
    if (l->tail == NULL) {
        l->head = r;
    } else {
        l->tail->next = r;
    }
    l->tail = r;
    l->n++;
}

static struct pg_req *
list_pop(struct req_list *l)
{
    struct pg_req *r = l->head;

    if (r != NULL) {
        l->head = r->next;
        if (l->head == NULL) {
            l->tail = NULL;
        }
        l->n--;
        r->next = NULL;
    }
    return r;
}

/* Answer and free every request of l. */
static void
list_answer(struct req_list *l)
{
    struct pg_req *r;

    while ((r = list_pop(l)) != NULL) {
        r->cb(r->arg, r->res, r->mark);
        free(r);
    }
}

static void
list_fail(struct req_list *l)
{
    for (struct pg_req *r = l->head; r != NULL; r = r->next) {
        r->res = STORE_ERROR;
        r->mark = 0;
    }
    list_answer(l);
}

/* A name is stored verbatim when it is valid UTF-8 without NUL bytes. */
static bool
text_ok(const unsigned char *p, size_t n)
{
    size_t i = 0;

    while (i < n) {
        unsigned char c = p[i];
        size_t k;
        uint32_t cp;

        if (c == 0) {
            return false;
        }
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf) {
            k = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            k = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            k = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (i + k >= n) {
            return false;
        }
        for (size_t j = 1; j <= k; j++) {
            if ((p[i + j] & 0xc0) != 0x80) {
                return false;
            }
            cp = (cp << 6) | (p[i + j] & 0x3f);
        }
        if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
            return false;
        }
        i += k + 1;
    }
    return true;
}

static struct pg_req *
req_new(const char *res, size_t len, int64_t token, bool is_get,
        store_cb cb, void *arg)
{
    bool verbatim = text_ok((const unsigned char *)res, len);
    size_t klen = verbatim ? len : PG_DIGEST_KEY_LEN;
    struct pg_req *r;

    if (len > SIZE_MAX / 2 - sizeof(*r) - PG_DIGEST_KEY_LEN) {
        return NULL;
    }
    r = malloc(sizeof(*r) + klen + (verbatim ? 0 : len) + 1);
    if (r == NULL) {
        return NULL;
    }
    r->next = NULL;
    r->cb = cb;
    r->arg = arg;
    r->token = token;
    r->is_get = is_get;
    r->res = STORE_ERROR;
    r->mark = 0;
    r->klen = klen;
    r->nlen = len;
    if (verbatim) {
        if (len > 0) {
            memcpy(r->key, res, len);
        }
        r->name = r->key;
    } else {
        unsigned char d[SHA256_DIGEST_LENGTH];

        SHA256((const unsigned char *)res, len, d);
        memcpy(r->key, PG_DIGEST_PREFIX, PG_DIGEST_PREFIX_LEN);
        for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) {
            static const char hex[] = "0123456789abcdef";

            r->key[PG_DIGEST_PREFIX_LEN + 2 * i] = hex[d[i] >> 4];
            r->key[PG_DIGEST_PREFIX_LEN + 2 * i + 1] = hex[d[i] & 15];
        }
        if (len > 0) {
            memcpy(r->key + klen, res, len);
        }
        r->name = r->key + klen;
    }
    r->key[klen + (verbatim ? 0 : len)] = '\0';
    return r;
}

/* A decimal int64 from a text column; false otherwise. */
static bool
parse_mark(const char *p, int64_t *out)
{
    char *end;
    long long v;

    if (*p == '\0' || *p == '-' || *p == '+' || *p == ' ') {
        return false;
    }
    errno = 0;
    v = strtoll(p, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0) {
        return false;
    }
    *out = (int64_t)v;
    return true;
}

/* ---- connections ----------------------------------------------------- */

static void conn_start(struct pg_conn *c);
static void dispatch(struct pg_store *s);
static void on_conn_event(evutil_socket_t fd, short what, void *arg);

static bool
conn_up(const struct pg_conn *c)
{
    return c->state == PC_IDLE || c->state == PC_BUSY;
}

static bool
any_up(const struct pg_store *s)
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
    if (c->ev != NULL) {
        event_free(c->ev);
        c->ev = NULL;
    }
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
    struct pg_store *s = c->s;
    bool was_up = conn_up(c);

    if (!s->closing &&
        (c->failures == 0 || c->failures % 30 == 0 || was_up)) {
        char msg[512];
        size_t n;

        snprintf(msg, sizeof(msg), "%s", why);
        n = strlen(msg);
        while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' ')) {
            msg[--n] = '\0';
        }
        log_error("postgres: connection %d: %s; reconnecting", c->id, msg);
    }
    c->failures++;
    if (c->result != NULL) {
        PQclear(c->result);
        c->result = NULL;
    }
    if (c->ev != NULL) {
        event_free(c->ev);
        c->ev = NULL;
    }
    if (c->pg != NULL) {
        PQfinish(c->pg);
        c->pg = NULL;
    }
    evtimer_del(c->timer);
    c->state = PC_DOWN;
    list_fail(&c->batch);
    if (s->closing) {
        return;
    }
    conn_deadline(c, c->backoff_ms);
    c->backoff_ms *= 2;
    if (c->backoff_ms > PG_BACKOFF_MAX_MS) {
        c->backoff_ms = PG_BACKOFF_MAX_MS;
    }
    /* Raises queued for a pool that is now all down: answer them. */
    if (!any_up(s)) {
        list_fail(&s->pending);
    }
}

static void
conn_fail_pg(struct pg_conn *c, const char *what)
{
    char msg[512];

    snprintf(msg, sizeof(msg), "%s: %s", what,
             c->pg != NULL ? PQerrorMessage(c->pg) : "no connection");
    conn_fail(c, msg);
}

/* Send what is buffered; watch for writability while some is left. */
static bool
conn_flush(struct pg_conn *c)
{
    int rc = PQflush(c->pg);

    if (rc < 0) {
        return false;
    }
    return conn_watch(c, rc == 1 ? EV_READ | EV_WRITE : EV_READ);
}

static void
conn_ready(struct pg_conn *c)
{
    struct pg_store *s = c->s;

    evtimer_del(c->timer);
    c->state = PC_IDLE;
    if (c->failures > 0 || !s->ever_ready) {
        log_info("postgres: connection %d ready", c->id);
    }
    c->failures = 0;
    c->backoff_ms = PG_BACKOFF_MIN_MS;
    s->ever_ready = true;
    dispatch(s);
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
                 "to on for tidemark's sessions");
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

static void
answer_get(struct pg_conn *c, PGresult *res)
{
    struct pg_req *r = c->batch.head;

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        log_error("postgres: reading the mark of %.*s failed: %s",
                  log_name_len(r->nlen), r->name, PQresultErrorMessage(res));
    } else if (PQntuples(res) == 0) {
        r->res = STORE_ACCEPTED;
        r->mark = 0;
    } else if (PQntuples(res) == 1 && PQnfields(res) == 1 &&
               !PQgetisnull(res, 0, 0) &&
               parse_mark(PQgetvalue(res, 0, 0), &r->mark)) {
        r->res = STORE_ACCEPTED;
    } else {
        log_error("postgres: the mark of %.*s is not a number",
                  log_name_len(r->nlen), r->name);
    }
}

static int
key_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);

    if (c != 0) {
        return c;
    }
    return alen < blen ? -1 : alen > blen;
}

static int
req_cmp(const void *x, const void *y)
{
    const struct pg_req *a = *(const struct pg_req *const *)x;
    const struct pg_req *b = *(const struct pg_req *const *)y;

    return key_cmp(a->key, a->klen, b->key, b->klen);
}

/* Answer the raises of the batch from the rows (resource, fence). The
 * batch's distinct keys are in s->sorted order, one row each. */
static void
answer_raises(struct pg_conn *c, PGresult *res)
{
    struct pg_store *s = c->s;
    int rows;

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        log_error("postgres: %zu raises refused: %s", c->batch.n,
                  PQresultErrorMessage(res));
        return;
    }
    rows = PQntuples(res);
    if (PQnfields(res) != 2) {
        log_error("postgres: the upsert answered %d columns: %zu raises "
                  "refused", PQnfields(res), c->batch.n);
        return;
    }
    for (int i = 0; i < rows; i++) {
        const char *k = PQgetvalue(res, i, 0);
        size_t klen = (size_t)PQgetlength(res, i, 0);
        int64_t fence;

        if (PQgetisnull(res, i, 1) || !parse_mark(PQgetvalue(res, i, 1),
                                                  &fence)) {
            log_error("postgres: the upsert answered a fence that is not "
                      "a number");
            continue;
        }
        for (struct pg_req *r = c->batch.head; r != NULL; r = r->next) {
            if (key_cmp(r->key, r->klen, k, klen) != 0) {
                continue;
            }
            if (fence == r->token) {
                r->res = STORE_ACCEPTED;
                r->mark = fence;
            } else if (fence > r->token) {
                r->res = STORE_STALE;
                r->mark = fence;
            } else {
                log_error("postgres: raise of %.*s to %" PRId64 ": the "
                          "upsert answered %" PRId64 ", below it: refused",
                          log_name_len(r->nlen), r->name, r->token, fence);
            }
        }
    }
    (void)s;
}

/* The query in flight ended (PQgetResult gave NULL). */
static void
query_done(struct pg_conn *c)
{
    PGresult *res = c->result;
    struct req_list done;

    c->result = NULL;
    if (c->state == PC_SETUP) {
        static const Oid raise_types[2] = {OID_TEXT_ARRAY, OID_INT8_ARRAY};
        static const Oid get_types[1] = {OID_TEXT};
        int ok;

        if (res != NULL) {
            char msg[512];

            snprintf(msg, sizeof(msg), "setting up the marks table: %s",
                     PQresultErrorMessage(res));
            PQclear(res);
            conn_fail(c, msg);
            return;
        }
        /* Prepared once per connection: a batch is then one Bind and
         * Execute, not a parse and plan. */
        switch (c->setup_step++) {
        case 0:
            ok = PQsendPrepare(c->pg, PG_RAISE_STMT, PG_RAISE_SQL, 2,
                               raise_types);
            break;
        case 1:
            ok = PQsendPrepare(c->pg, PG_GET_STMT, PG_GET_SQL, 1,
                               get_types);
            break;
        default:
            conn_ready(c);
            return;
        }
        if (!ok || !conn_flush(c)) {
            conn_fail_pg(c, "preparing");
        }
        return;
    }
    if (res == NULL) {
        log_error("postgres: connection %d: no result", c->id);
    } else if (c->batch.head != NULL && c->batch.head->is_get) {
        answer_get(c, res);
    } else {
        answer_raises(c, res);
    }
    PQclear(res);
    evtimer_del(c->timer);
    done = c->batch;
    c->batch = (struct req_list){0};
    c->state = PC_IDLE;
    list_answer(&done);
    dispatch(c->s);
}

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
            query_done(c);
            return;  /* c may be failed, or busy with a new batch */
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
    switch (PQconnectPoll(c->pg)) {
    case PGRES_POLLING_READING:
        if (!conn_watch(c, EV_READ)) {
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
    if (PQsetnonblocking(c->pg, 1) != 0 ||
        !PQsendQuery(c->pg, PG_SETUP_SQL)) {
        conn_fail_pg(c, "setting up");
        return;
    }
    c->state = PC_SETUP;
    c->setup_step = 0;
    if (!conn_flush(c)) {
        conn_fail_pg(c, "setting up");
    }
}

static void
on_conn_event(evutil_socket_t fd, short what, void *arg)
{
    struct pg_conn *c = arg;

    (void)fd;
    if (c->state == PC_CONNECTING) {
        connect_poll(c);
        return;
    }
    if ((what & EV_WRITE) && !conn_flush(c)) {
        conn_fail_pg(c, "writing");
        return;
    }
    if (what & EV_READ) {
        conn_read(c);
    }
}

static void
on_conn_timer(evutil_socket_t fd, short what, void *arg)
{
    struct pg_conn *c = arg;
    char msg[128];

    (void)fd;
    (void)what;
    switch (c->state) {
    case PC_DOWN:
        conn_start(c);
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

static void
conn_start(struct pg_conn *c)
{
    struct pg_store *s = c->s;
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
    if (PQstatus(c->pg) == CONNECTION_BAD) {
        conn_fail_pg(c, "cannot connect");
        return;
    }
    c->state = PC_CONNECTING;
    /* libpq leaves connect_timeout to the caller of PQconnectPoll. */
    conn_deadline(c, ms > PG_CONNECT_MIN_MS ? ms : PG_CONNECT_MIN_MS);
    if (!conn_watch(c, EV_WRITE)) {
        conn_fail(c, "cannot watch the socket");
    }
}

/* ---- batches --------------------------------------------------------- */

static bool
buf_reserve(struct pg_store *s, size_t n)
{
    char *nb;

    if (n <= s->bufcap) {
        return true;
    }
    nb = realloc(s->buf, n);
    if (nb == NULL) {
        return false;
    }
    s->buf = nb;
    s->bufcap = n;
    return true;
}

static char *
put32(char *p, uint32_t v)
{
    p[0] = (char)(v >> 24);
    p[1] = (char)(v >> 16);
    p[2] = (char)(v >> 8);
    p[3] = (char)v;
    return p + 4;
}

static char *
array_head(char *p, uint32_t elem_oid, uint32_t n)
{
    p = put32(p, 1);        /* dimensions */
    p = put32(p, 0);        /* no NULLs */
    p = put32(p, elem_oid);
    p = put32(p, n);
    return put32(p, 1);     /* lower bound */
}

/* Send the raises of c->batch as one upsert. */
static bool
send_raises(struct pg_conn *c)
{
    struct pg_store *s = c->s;
    size_t n = 0, uniq = 0, tbytes = 20, ibytes;
    const char *values[2];
    int lengths[2];
    const int formats[2] = {1, 1};
    char *p, *ints;

    for (struct pg_req *r = c->batch.head; r != NULL; r = r->next) {
        s->sorted[n++] = r;
    }
    qsort(s->sorted, n, sizeof(s->sorted[0]), req_cmp);
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || req_cmp(&s->sorted[i - 1], &s->sorted[i]) != 0) {
            tbytes += 4 + s->sorted[i]->klen;
            uniq++;
        }
    }
    ibytes = 20 + uniq * 12;
    if (!buf_reserve(s, tbytes + ibytes)) {
        log_error("postgres: out of memory: %zu raises refused", n);
        return false;
    }
    p = array_head(s->buf, OID_TEXT, (uint32_t)uniq);
    ints = array_head(s->buf + tbytes, OID_INT8, (uint32_t)uniq);
    for (size_t i = 0; i < n;) {
        struct pg_req *first = s->sorted[i];
        int64_t top = first->token;
        size_t j = i + 1;

        while (j < n && req_cmp(&s->sorted[i], &s->sorted[j]) == 0) {
            if (s->sorted[j]->token > top) {
                top = s->sorted[j]->token;
            }
            j++;
        }
        p = put32(p, (uint32_t)first->klen);
        memcpy(p, first->key, first->klen);
        p += first->klen;
        ints = put32(ints, 8);
        ints = put32(ints, (uint32_t)((uint64_t)top >> 32));
        ints = put32(ints, (uint32_t)top);
        i = j;
    }
    values[0] = s->buf;
    lengths[0] = (int)tbytes;
    values[1] = s->buf + tbytes;
    lengths[1] = (int)ibytes;
    return PQsendQueryPrepared(c->pg, PG_RAISE_STMT, 2, values, lengths,
                               formats, 0) == 1;
}

static bool
send_get(struct pg_conn *c)
{
    struct pg_req *r = c->batch.head;
    const char *values[1] = {r->key};
    int lengths[1] = {(int)r->klen};
    const int formats[1] = {1};

    return PQsendQueryPrepared(c->pg, PG_GET_STMT, 1, values, lengths,
                               formats, 0) == 1;
}

/* Give queued requests to idle connections: a get alone, or up to
 * PG_BATCH_MAX raises. */
static void
dispatch(struct pg_store *s)
{
    for (int i = 0; i < s->npool && s->pending.head != NULL; i++) {
        struct pg_conn *c = &s->conns[i];
        bool ok;

        if (c->state != PC_IDLE) {
            continue;
        }
        if (s->pending.head->is_get) {
            list_push(&c->batch, list_pop(&s->pending));
            ok = send_get(c);
        } else {
            while (s->pending.head != NULL && !s->pending.head->is_get &&
                   c->batch.n < PG_BATCH_MAX) {
                list_push(&c->batch, list_pop(&s->pending));
            }
            ok = send_raises(c);
        }
        c->state = PC_BUSY;
        if (!ok || !conn_flush(c)) {
            conn_fail_pg(c, "sending");
            continue;
        }
        conn_deadline(c, 2 * s->timeout_ms);
    }
}

static void
on_kick(evutil_socket_t fd, short what, void *arg)
{
    struct pg_store *s = arg;

    (void)fd;
    (void)what;
    s->kick_armed = false;
    dispatch(s);
}

static void
enqueue(struct pg_store *s, const char *res, size_t len, int64_t token,
        bool is_get, store_cb cb, void *arg)
{
    struct pg_req *r;

    if (s->closing || !any_up(s)) {
        store_defer(s->defer, cb, arg, STORE_ERROR, 0);
        return;
    }
    if (s->pending.n >= PG_QUEUE_MAX) {
        if (!s->full_logged) {
            log_error("postgres: %d requests are waiting for a connection: "
                      "refusing more until the queue drains", PG_QUEUE_MAX);
            s->full_logged = true;
        }
        store_defer(s->defer, cb, arg, STORE_ERROR, 0);
        return;
    }
    s->full_logged = false;
    r = req_new(res, len, token, is_get, cb, arg);
    if (r == NULL) {
        store_defer(s->defer, cb, arg, STORE_ERROR, 0);
        return;
    }
    list_push(&s->pending, r);
    /* Dispatch at the end of the loop turn, so that the raises of one
     * turn share a statement and a commit. */
    if (!s->kick_armed) {
        s->kick_armed = true;
        event_active(s->kick_ev, 0, 1);
    }
}

static void
pg_raise(struct store *st, const char *res, size_t len, int64_t token,
         store_cb cb, void *arg)
{
    enqueue(to_pg(st), res, len, token, false, cb, arg);
}

static void
pg_get(struct store *st, const char *res, size_t len, store_cb cb,
       void *arg)
{
    enqueue(to_pg(st), res, len, 0, true, cb, arg);
}

static bool
pg_ready(struct store *st)
{
    struct pg_store *s = to_pg(st);

    return !s->closing && any_up(s);
}

/* ---- life cycle ------------------------------------------------------ */

static void
pg_free(struct pg_store *s)
{
    for (int i = 0; s->conns != NULL && i < s->npool; i++) {
        struct pg_conn *c = &s->conns[i];

        if (c->pg != NULL || c->batch.head != NULL) {
            conn_fail(c, "closing");
        }
        if (c->timer != NULL) {
            event_free(c->timer);
        }
    }
    list_fail(&s->pending);
    if (s->kick_ev != NULL) {
        event_free(s->kick_ev);
    }
    store_defer_free(s->defer);
    free(s->conns);
    free(s->sorted);
    free(s->buf);
    free(s->dsn);
    free(s);
}

static struct store *
pg_open(struct event_base *base, const struct cfg_store *cfg, char *err,
        size_t errlen)
{
    struct pg_store *s;
    PQconninfoOption *opts;
    char *msg = NULL;

    if (cfg->dsn == NULL || cfg->dsn[0] == '\0') {
        snprintf(err, errlen, "postgres: [store] dsn is not set");
        return NULL;
    }
    /* The config loader checked it; libpq's message is not repeated
     * here, it may quote a password. */
    opts = PQconninfoParse(cfg->dsn, &msg);
    PQfreemem(msg);
    if (opts == NULL) {
        snprintf(err, errlen, "postgres: [store] dsn is not a libpq "
                              "connection string");
        return NULL;
    }
    PQconninfoFree(opts);
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "postgres: out of memory");
        return NULL;
    }
    s->base = base;
    s->npool = cfg->pool_size > 0 ? cfg->pool_size : 2;
    s->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 2000;
    s->dsn = strdup(cfg->dsn);
    s->conns = calloc((size_t)s->npool, sizeof(*s->conns));
    s->sorted = calloc(PG_BATCH_MAX, sizeof(*s->sorted));
    s->kick_ev = event_new(base, -1, 0, on_kick, s);
    s->defer = store_defer_new(base);
    if (s->dsn == NULL || s->conns == NULL || s->sorted == NULL ||
        s->kick_ev == NULL || s->defer == NULL) {
        snprintf(err, errlen, "postgres: out of memory");
        pg_free(s);
        return NULL;
    }
    for (int i = 0; i < s->npool; i++) {
        struct pg_conn *c = &s->conns[i];

        c->s = s;
        c->id = i;
        c->ev_fd = -1;
        c->backoff_ms = PG_BACKOFF_MIN_MS;
        c->timer = evtimer_new(base, on_conn_timer, c);
        if (c->timer == NULL) {
            snprintf(err, errlen, "postgres: out of memory");
            pg_free(s);
            return NULL;
        }
    }
    /* Unreachable now is an outage, not a configuration error: tidemark
     * starts not ready and connects when the server is there. */
    for (int i = 0; i < s->npool; i++) {
        conn_start(&s->conns[i]);
    }
    log_info("postgres: %d connections, batches of up to %d raises",
             s->npool, PG_BATCH_MAX);
    return (struct store *)s;
}

static void
pg_close(struct store *st)
{
    struct pg_store *s = to_pg(st);

    if (s == NULL) {
        return;
    }
    s->closing = true;
    pg_free(s);
}

const struct store_ops store_postgres_ops = {
    .name = "postgres",
    .shared = true,
    .open = pg_open,
    .raise = pg_raise,
    .get = pg_get,
    .ready = pg_ready,
    .close = pg_close,
};
