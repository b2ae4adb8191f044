/* access.c: the access log's lines (one per request answered) and the
 * request id that ties a line to the upstream's own logs. */
#include "access.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <openssl/rand.h>

#include "../../policies/ascii.h"
#include "../../policies/logesc.h"
#include "../log.h"
#include "../problem.h"
#include "../recent.h"
#include "client_io.h"
#include "request.h"
#include "sock.h"

_Static_assert(sizeof(((struct request *)0)->upstream) >= SOCK_PEER_MAX,
               "request.h: upstream holds a peer's text");
_Static_assert(sizeof(((struct request *)0)->rid) == REQID_MAX + 1,
               "request.h: rid holds REQID_MAX bytes");

bool
reqid_sane(const char *v, size_t n)
{
    if (n == 0 || n > REQID_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = v[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || strchr("-_.:+/=@", c) != NULL)) {
            return false;
        }
    }
    return true;
}

/* Ids are made from a random key drawn once per process and a counter:
 * RAND_bytes per request would cost microseconds under load. */
static pthread_once_t reqid_once = PTHREAD_ONCE_INIT;
static uint64_t reqid_key[2];
static _Atomic uint64_t reqid_next;

static void
reqid_seed(void)
{
    if (RAND_bytes((unsigned char *)reqid_key, sizeof(reqid_key)) != 1) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        reqid_key[0] = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        reqid_key[1] = (uint64_t)getpid() << 32 ^ reqid_key[0];
    }
}

/* splitmix64's finalizer: a bijection, so distinct inputs stay
 * distinct. */
static uint64_t
mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* A fresh id: 32 hex digits, unique within the process (the counter)
 * and unlikely to repeat across processes (the key). */
static void
reqid_new(char *out)
{
    uint64_t n, v[2];
    unsigned char b[16];

    pthread_once(&reqid_once, reqid_seed);
    n = atomic_fetch_add(&reqid_next, 1);
    v[0] = mix(reqid_key[0] ^ n);
    v[1] = mix(reqid_key[1] + n);
    for (int i = 0; i < 16; i++) { /* big-endian: the digits read as v */
        b[i] = (unsigned char)(v[i / 8] >> (56 - 8 * (i % 8)));
    }
    ascii_hex(b, sizeof(b), out);
    out[32] = '\0';
}

void
access_begin(struct request *rq)
{
    const struct http_request *h = &rq->h;
    int i = http_find_header(h->headers, h->nheaders, 0, "X-Request-Id");

    clock_gettime(CLOCK_MONOTONIC, &rq->t0);
    rq->rid_client = i >= 0 &&
                     http_find_header(h->headers, h->nheaders, (size_t)i + 1,
                                      "X-Request-Id") < 0 &&
                     reqid_sane(h->headers[i].value.p, h->headers[i].value.len);
    if (rq->rid_client) {
        memcpy(rq->rid, h->headers[i].value.p, h->headers[i].value.len);
        rq->rid[h->headers[i].value.len] = '\0';
    } else {
        reqid_new(rq->rid);
    }
    rq->bytes_in = h->head_len;
    rq->bytes_out = 0;
    rq->up_us = -1;
    rq->upstream[0] = '\0';
}

/* ---- the line ---------------------------------------------------- */

struct line {
    char buf[4096];
    size_t n;
};

static void
put(struct line *l, const char *s, size_t n)
{
    size_t room = sizeof(l->buf) - 1 - l->n;

    n = n < room ? n : room;
    memcpy(l->buf + l->n, s, n);
    l->n += n;
}

/* " key=", then the value's text is the caller's. */
static void
put_key(struct line *l, const char *key)
{
    put(l, " ", 1);
    put(l, key, strlen(key));
    put(l, "=", 1);
}

/* Whether s, which logesc may leave bare, must be quoted all the same
 * to read back as a string: "-" (absent), a number, or a word ending in
 * ':' (log.c's json reads "key=value:" in prose as value). */
static bool
needs_quotes(const char *s, size_t n)
{
    bool number = n > 0;

    if (n == 1 && s[0] == '-') {
        return true;
    }
    for (size_t i = 0; i < n; i++) {
        number &= (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '-';
    }
    return number || (n > 0 && s[n - 1] == ':');
}

/* " key=value", value a string escaped by logesc in at most max bytes of
 * the line (cut there, and marked), or "-" when s is NULL. */
static void
put_str(struct line *l, const char *key, const char *s, size_t n, size_t max)
{
    size_t room;

    put_key(l, key);
    if (s == NULL) {
        put(l, "-", 1);
        return;
    }
    room = sizeof(l->buf) - l->n; /* logesc writes the NUL too */
    room = room < max + LOGESC_MIN ? room : max + LOGESC_MIN;
    if (room >= LOGESC_MIN) {
        l->n += logesc(l->buf + l->n, room, s, n,
                       needs_quotes(s, n) ? LOGESC_QUOTED : LOGESC_VALUE);
    }
}

static void
put_cstr(struct line *l, const char *key, const char *s, size_t max)
{
    put_str(l, key, s, s != NULL ? strlen(s) : 0, max);
}

/* " key=N", or "-" when the number is absent (absent). */
static void
put_num(struct line *l, const char *key, int64_t v, bool absent)
{
    char buf[ASCII_DEC_MAX];
    const char *num = ascii_dec(buf + sizeof(buf), v);

    put_key(l, key);
    put(l, absent ? "-" : num, absent ? 1 : (size_t)(buf + sizeof(buf) - num));
}

/* The client's address and port, or NULL. io's peer text is a cache,
 * filled on the first use for the connection; io is otherwise left as it
 * is. */
static const char *
peer(const struct cio *io)
{
    struct cio *m = (struct cio *)io;

    return sock_peer_text(&m->peer, io->bev);
}

void
access_who(const struct cio *io, const struct request *rq, const char *route,
           struct recent_who *w)
{
    w->route = route;
    w->client = peer(io);
    w->rid = rq != NULL ? rq->rid : NULL;
}

void
access_upstream(struct request *rq, const char *addr)
{
    /* What snprintf("%s") would keep, without its formatting engine:
     * this runs per request forwarded. */
    size_t n = addr != NULL ? strnlen(addr, sizeof(rq->upstream) - 1) : 0;

    if (n > 0) {
        memcpy(rq->upstream, addr, n);
    }
    rq->upstream[n] = '\0';
}

void
access_upstream_end(struct request *rq, const struct timespec *t0)
{
    struct timespec t1;

    clock_gettime(CLOCK_MONOTONIC, &t1);
    rq->up_us = (int64_t)(t1.tv_sec - t0->tv_sec) * 1000000 +
                (t1.tv_nsec - t0->tv_nsec) / 1000;
    rq->up_us = rq->up_us < 0 ? 0 : rq->up_us;
}

/* " key=MS.UUU": us microseconds as milliseconds, or "-" when absent. */
static void
put_us(struct line *l, const char *key, int64_t us, bool absent)
{
    char buf[ASCII_DEC_MAX], frac[4];
    const char *ms;
    int rest;

    if (absent) {
        put_num(l, key, 0, true);
        return;
    }
    us = us < 0 ? 0 : us;
    ms = ascii_dec(buf + sizeof(buf), us / 1000);
    rest = (int)(us % 1000);
    frac[0] = '.';
    frac[1] = (char)('0' + rest / 100);
    frac[2] = (char)('0' + rest / 10 % 10);
    frac[3] = (char)('0' + rest % 10);
    put_key(l, key);
    put(l, ms, (size_t)(buf + sizeof(buf) - ms));
    put(l, frac, sizeof(frac));
}

/* Microseconds since the request's start. */
static int64_t
since_start(const struct request *rq)
{
    struct timespec t1;
    int64_t us;

    clock_gettime(CLOCK_MONOTONIC, &t1);
    us = (int64_t)(t1.tv_sec - rq->t0.tv_sec) * 1000000 +
         (t1.tv_nsec - rq->t0.tv_nsec) / 1000;
    return us < 0 ? 0 : us;
}

/* What went where: upstream upstream_ms bytes_in bytes_out http ua. */
static void
put_transfer(struct line *l, const struct request *rq, uint64_t bytes_out)
{
    const struct http_request *h = rq != NULL ? &rq->h : NULL;
    int ua = h != NULL
                 ? http_find_header(h->headers, h->nheaders, 0, "User-Agent")
                 : -1;

    put_cstr(l, "upstream",
             rq != NULL && rq->upstream[0] != '\0' ? rq->upstream : NULL,
             sizeof(rq->upstream));
    put_us(l, "upstream_ms", rq != NULL ? rq->up_us : 0,
           rq == NULL || rq->up_us < 0);
    put_num(l, "bytes_in", rq != NULL ? (int64_t)rq->bytes_in : 0, rq == NULL);
    put_num(l, "bytes_out", (int64_t)bytes_out, false);
    put_cstr(l, "http", h == NULL ? NULL : h->minor == 0 ? "1.0" : "1.1", 8);
    put_str(l, "ua", ua >= 0 ? h->headers[ua].value.p : NULL,
            ua >= 0 ? h->headers[ua].value.len : 0, 256);
}

/* Everything from client to conn: the fields every line shares. */
static void
put_request(struct line *l, const struct cio *io, const struct request *rq,
            int status, const char *resource)
{
    const struct http_request *h = rq != NULL ? &rq->h : NULL;
    const char *q = NULL;
    size_t plen = 0;

    if (h != NULL && h->path.p != NULL) {
        const char *end = h->path.p + h->path.len;

        plen = h->path.len;
        q = end < h->target.p + h->target.len && *end == '?' ? end : NULL;
    }
    put_cstr(l, "id", rq != NULL ? rq->rid : NULL, REQID_MAX);
    put_cstr(l, "client", peer(io), SOCK_PEER_MAX);
    put_str(l, "method", h != NULL ? h->method.p : NULL,
            h != NULL ? h->method.len : 0, 32);
    put_str(l, "path", h != NULL ? h->path.p : NULL, plen, 1024);
    put_str(l, "query", q != NULL ? q + 1 : NULL,
            q != NULL ? (size_t)(h->target.p + h->target.len - q - 1) : 0,
            1024);
    put_num(l, "status", status, false);
    put_cstr(l, "route", rq != NULL ? rq->sc.route_name : NULL, 128);
    put_cstr(l, "resource", resource, 512);
    put_num(l, "token", rq != NULL ? rq->token : 0,
            rq == NULL || rq->token <= 0);
    put_num(l, "mark", rq != NULL ? rq->mark : 0, rq == NULL || rq->mark <= 0);
    put_us(l, "ms", rq != NULL ? since_start(rq) : 0, rq == NULL);
    put_num(l, "conn", (int64_t)io->id, false);
}

static void
emit(enum tm_log_level level, struct line *l)
{
    l->buf[l->n] = '\0';
    log_emit(level, l->buf);
}

void
access_request(const struct cio *io, const struct request *rq, int status)
{
    struct line l;

    if (log_get_level() < TM_LOG_INFO) {
        return;
    }
    l.n = 0; /* after the level test: buf is written before it is read */
    put(&l, "event=request", 13);
    put_request(&l, io, rq, status, rq->sc.rlen > 0 ? rq->sc.resource : NULL);
    put_transfer(&l, rq, rq->bytes_out);
    put(&l, " reason=- detail=-", 18);
    emit(TM_LOG_INFO, &l);
}

void
access_refused(const struct cio *io, const struct request *rq,
               const struct problem *p, const char *why)
{
    /* Refusals of stale, missing and malformed tokens are the proxy doing
     * its job (info); the rest say something is wrong (warn). */
    enum tm_log_level level = p->status == 409 || p->status == 428 ||
                                      p->status == 408 || p->status == 400 ||
                                      p->status == 403
                                  ? TM_LOG_INFO
                                  : TM_LOG_WARN;
    struct line l;

    if (log_get_level() < (int)level) {
        return;
    }
    l.n = 0;
    put(&l, "event=refused", 13);
    put_request(&l, io, rq, p->status, p->resource);
    put_transfer(&l, rq, rq->bytes_out);
    put_cstr(&l, "reason", why, 128);
    put_cstr(&l, "detail", p->detail, 512);
    emit(level, &l);
}

void
access_bad_head(const struct cio *io, int status, const char *detail,
                const char *why, size_t bytes_out)
{
    /* A head that never came whole is routine (scanners, idle peers). */
    enum tm_log_level level = status == 408 ? TM_LOG_INFO : TM_LOG_WARN;
    struct line l;
    char d[600];

    if (log_get_level() < (int)level) {
        return;
    }
    l.n = 0;
    snprintf(d, sizeof(d), "%s%s%s", detail != NULL ? detail : "",
             why != NULL ? ": " : "", why != NULL ? why : "");
    put(&l, "event=refused", 13);
    put_request(&l, io, NULL, status, NULL);
    put_transfer(&l, NULL, bytes_out);
    put_cstr(&l, "reason", "malformed", 128);
    put_cstr(&l, "detail", d, 512);
    emit(level, &l);
}
