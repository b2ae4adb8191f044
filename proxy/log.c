/* log.c: writing to the current proxy's sink, blocking SIGPIPE on the
 * loop's thread, the ready-made stderr sinks of tidemark.h and the
 * buffer their lines may go through (tm_log_stderr_buffer). */
#include "log.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "../policies/ascii.h"
#include "../policies/json.h"
#include "../policies/logesc.h"
#include "thread.h"

_Thread_local const struct tm_log *log_cur;
_Thread_local bool lib_sigpipe_blocked;

/* "2026-12-03T03:31:12.345Z": a line's time, to the millisecond, UTC. */
#define TS_LEN 24

/* The bytes of a line built on the stack; a longer one is built in
 * memory of its own (of tidemark's lines, only a JSON access line whose
 * values are mostly bytes JSON escapes in six). */
#define LINE_STACK 8192

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void
lib_block_sigpipe(void)
{
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    lib_sigpipe_blocked = true;
}

void
log_write(enum tm_log_level level, const char *fmt, ...)
{
    const struct tm_log *l = log_cur;
    char buf[1024];
    va_list ap;

    if (l == NULL || l->fn == NULL) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    l->fn(l->arg, level, buf);
}

void
log_emit(enum tm_log_level level, const char *msg)
{
    const struct tm_log *l = log_cur;

    if (l != NULL && l->fn != NULL) {
        l->fn(l->arg, level, msg);
    }
}

int
tm_log_level_parse(const char *name)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, level_names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

const char *
tm_log_level_name(enum tm_log_level level)
{
    return (unsigned)level < 4 ? level_names[level] : "?";
}

/* The wall clock as "2026-12-03T03:31:12.345Z" into buf (25 bytes and
 * the NUL). The part to the second is made once a second per thread:
 * gmtime_r and strftime cost more than the rest of a line. */
static void
timestamp(char buf[TS_LEN + 1])
{
    static _Thread_local time_t sec = -1;
    static _Thread_local char upto_sec[20 + 1]; /* "2026-12-03T03:31:12" */
    struct timespec ts;
    int ms;

    clock_gettime(CLOCK_REALTIME, &ts);
    if (ts.tv_sec != sec) {
        struct tm tm;

        if (gmtime_r(&ts.tv_sec, &tm) == NULL ||
            strftime(upto_sec, sizeof(upto_sec), "%Y-%m-%dT%H:%M:%S", &tm) !=
                19) {
            memcpy(upto_sec, "0000-00-00T00:00:00", 20);
        }
        sec = ts.tv_sec;
    }
    ms = (int)(ts.tv_nsec / 1000000);
    memcpy(buf, upto_sec, 19);
    buf[19] = '.';
    buf[20] = (char)('0' + ms / 100);
    buf[21] = (char)('0' + ms / 10 % 10);
    buf[22] = (char)('0' + ms % 10);
    buf[23] = 'Z';
    buf[24] = '\0';
}

/* A line being built: in the caller's stack buffer, then in memory of
 * its own when it outgrows it. Without that memory, what is built so far
 * goes to stderr (locked from then until the line ends) and the rest
 * follows as it is built: the line is still whole among this process's
 * lines, though a reader may get it in more than one piece. */
struct out {
    char *p;
    size_t n, cap;
    bool heap;    /* p was malloc'd */
    bool spilled; /* writing straight to stderr, which is locked */
};

static void
out_spill(struct out *o)
{
    if (!o->spilled) {
        flockfile(stderr);
        o->spilled = true;
    }
    fwrite(o->p, 1, o->n, stderr);
    o->n = 0;
}

/* Room for n more bytes at the end of o, made by moving the line to
 * memory of its own (the size doubled until they fit); false without
 * it. */
static bool
out_grow(struct out *o, size_t n)
{
    size_t cap = o->cap;
    char *p;

    while (cap - o->n < n) {
        if (cap > SIZE_MAX / 2) {
            return false;
        }
        cap *= 2;
    }
    p = o->heap ? realloc(o->p, cap) : malloc(cap);
    if (p == NULL) {
        return false;
    }
    if (!o->heap) {
        memcpy(p, o->p, o->n);
    }
    o->p = p;
    o->cap = cap;
    o->heap = true;
    return true;
}

static void
out_put(struct out *o, const char *s, size_t n)
{
    if (n > o->cap - o->n && (o->spilled || !out_grow(o, n))) {
        out_spill(o);
        if (n > o->cap) {
            fwrite(s, 1, n, stderr);
            return;
        }
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
}

static void
out_str(struct out *o, const char *s)
{
    out_put(o, s, strlen(s));
}

static void
out_c(struct out *o, char c)
{
    out_put(o, &c, 1);
}

/* s with each control byte as \xNN and, if quotes, '"' and '\\'
 * backslashed (the content of a quoted value). The values in s came
 * escaped by logesc; this keeps the line one line whatever a message
 * holds. Runs of bytes that need nothing are written whole. */
static void
escaped(struct out *o, const char *s, bool quotes)
{
    for (;;) {
        size_t n = 0;
        unsigned char c;

        while ((c = (unsigned char)s[n]) >= 0x20 && c != 0x7f &&
               !(quotes && (c == '"' || c == '\\'))) {
            n++;
        }
        out_put(o, s, n);
        s += n;
        if (c == '\0') {
            return;
        }
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};

            out_put(o, esc, 2);
        } else {
            char esc[4] = {'\\', 'x'};

            ascii_hex(&c, 1, esc + 2);
            out_put(o, esc, 4);
        }
        s++;
    }
}

/* A sink's way of writing one line, without its newline. */
typedef void line_fn(struct out *o, const char *when, enum tm_log_level level,
                     const char *msg);

static bool lb_put(line_fn *fn, const char *line, size_t n);

/* One line on stderr, built whole in memory and handed to the buffer
 * when one runs, else to stderr in one fwrite: an unbuffered stderr
 * writes it with one write(2), so a reader (a pipe, journald's socket, a
 * file other processes append to) never gets a line in pieces, and a
 * line costs one system call, not one a word or a byte. Lines up to
 * LINE_STACK bytes allocate nothing. */
static void
line_write(line_fn *fn, enum tm_log_level level, const char *msg)
{
    char when[TS_LEN + 1], stack[LINE_STACK];
    struct out o = {.p = stack, .cap = sizeof(stack)};

    timestamp(when);
    fn(&o, when, level, msg);
    out_c(&o, '\n');
    if (o.spilled || !lb_put(fn, o.p, o.n)) {
        if (!o.spilled) {
            flockfile(stderr);
        }
        fwrite(o.p, 1, o.n, stderr);
        funlockfile(stderr);
    }
    if (o.heap) {
        free(o.p);
    }
}

/* Every line is key=value words: ts, level, then an access line's own
 * fields (event=...), or msg="..." holding a message of prose. */
static void
text_line(struct out *o, const char *when, enum tm_log_level level,
          const char *msg)
{
    out_put(o, "ts=", 3);
    out_put(o, when, TS_LEN);
    out_put(o, " level=", 7);
    out_str(o, tm_log_level_name(level));
    if (strncmp(msg, "event=", 6) == 0) {
        out_c(o, ' ');
        escaped(o, msg, false); /* logesc escaped its values */
    } else {
        out_put(o, " msg=\"", 6);
        escaped(o, msg, true);
        out_c(o, '"');
    }
}

void
tm_log_stderr_text(void *arg, enum tm_log_level level, const char *msg)
{
    (void)arg;
    line_write(text_line, level, msg);
}

/* Write s[0..n) as a JSON string's content; bytes that are not UTF-8
 * become U+FFFD. Runs of printable ASCII are written whole. */
static void
json_str(struct out *o, const char *s, size_t n)
{
    while (n > 0) {
        char esc[8];
        size_t take = ascii_plain_run(s, n);
        const char *e = NULL;

        if (take == 0) {
            e = json_piece(s, n, &take, esc);
        }
        if (e != NULL) {
            out_str(o, e);
        } else {
            out_put(o, s, take);
        }
        s += take;
        n -= take;
    }
}

/* Whether s[0..n) is a JSON number as the access log writes them:
 * -?(0|[1-9][0-9]*)(.[0-9]+)?, its whole part at most INT64_MAX (a token
 * is), so that every JSON reader takes it; a longer run of digits, from a
 * peer's word in prose, stays a string. */
static bool
json_number(const char *s, size_t n)
{
    size_t i = 0, d;

    i += n > 0 && s[0] == '-';
    d = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
        i++;
    }
    if (i == d || (s[d] == '0' && i - d > 1) || i - d > 19 ||
        (i - d == 19 && memcmp(s + d, "9223372036854775807", 19) > 0)) {
        return false;
    }
    if (i < n && s[i] == '.') {
        d = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            i++;
        }
        if (i == d) {
            return false;
        }
    }
    return i == n;
}

/* A quoted value at p (logesc's "..."): its content, unescaped, as a
 * JSON string into f, so a value is escaped once in each form (the
 * text's \n is the field's \n, not \\n); returns the length of the
 * quoted text, closing quote included (or to the end when it has none).
 * A byte that is not UTF-8 (\xff in the text) becomes U+FFFD here: the
 * text form keeps the byte. A value of more than 4 KiB
 * (no line of ours) is decoded in pieces. */
static size_t
json_quoted(struct out *o, const char *p)
{
    char buf[4096]; /* a whole access line: one pass for any line of ours */
    size_t i = 1;

    out_c(o, '"');
    for (;;) {
        size_t len = strnlen(p + i, sizeof(buf)), used;
        size_t n = logesc_decode(p + i, len, buf, &used);

        json_str(o, buf, n);
        i += used;
        if (used < len || p[i] == '\0') {
            break;
        }
    }
    out_c(o, '"');
    return p[i] == '"' ? i + 1 : i;
}

/* One key=value word's value: quoted, a string; bare, "-" is null, a
 * number is a number, anything else a string (a trailing ':' dropped).
 * Returns how much of p it took. */
static size_t
json_value(struct out *o, const char *p)
{
    size_t w, vlen;

    if (*p == '"') {
        return json_quoted(o, p);
    }
    w = strcspn(p, " ");
    vlen = w > 0 && p[w - 1] == ':' ? w - 1 : w;
    if (vlen == 1 && p[0] == '-') {
        out_put(o, "null", 4);
    } else if (json_number(p, vlen)) {
        out_put(o, p, vlen);
    } else {
        out_c(o, '"');
        json_str(o, p, vlen);
        out_c(o, '"');
    }
    return w;
}

/* The most keys of one line whose cut values a JSON line lists. */
#define JSON_CUT_MAX 32

/* One JSON object a line: ts, level, msg, and every key=value word of the
 * message as a field of its own (conn=7 route=docs token=5 ...): a quoted
 * value ("...") is a string, a bare number a number, a bare "-" null
 * (access.h writes its lines so). An access line (event=...) is all
 * key=value: its fields, and no msg repeating them. A value cut to fit
 * the line (logesc's "abc"...) is the string as cut, and its key is
 * listed in a last field, "cut":["query"], which a line with no cut
 * value does not have. */
static void
json_line(struct out *o, const char *when, enum tm_log_level level,
          const char *msg)
{
    const char *p = msg;
    const char *cut[JSON_CUT_MAX];
    size_t cut_len[JSON_CUT_MAX], ncut = 0;

    out_put(o, "{\"ts\":\"", 7);
    out_put(o, when, TS_LEN);
    out_put(o, "\",\"level\":\"", 11);
    out_str(o, tm_log_level_name(level));
    out_c(o, '"');
    if (strncmp(msg, "event=", 6) != 0) {
        /* Prose keeps its text; an access line is its fields. */
        out_put(o, ",\"msg\":\"", 8);
        json_str(o, msg, strlen(msg));
        out_c(o, '"');
    }
    while (*p != '\0') {
        size_t w = 0, k = 0;

        /* The word runs to a space; its key to its first '='. */
        while (p[w] != '\0' && p[w] != ' ') {
            k += k == w && p[w] != '=';
            w++;
        }
        if (k < w && k > 0 && !(k == 3 && memcmp(p, "msg", 3) == 0) &&
            !(k == 2 && memcmp(p, "ts", 2) == 0) &&
            !(k == 5 && memcmp(p, "level", 5) == 0)) {
            out_put(o, ",\"", 2);
            json_str(o, p, k);
            out_put(o, "\":", 2);
            w = k + 1 + json_value(o, p + k + 1);
            if (p[k + 1] == '"' && strncmp(p + w, "...", 3) == 0) {
                if (ncut < JSON_CUT_MAX) {
                    cut[ncut] = p;
                    cut_len[ncut++] = k;
                }
                w += 3;
            }
        } else if (*p == '"') {
            /* A quoted phrase in free text: skip it whole. */
            const char *q = strchr(p + 1, '"');
            w = q != NULL ? (size_t)(q - p) + 1 : strlen(p);
        }
        p += w;
        while (*p == ' ') {
            p++;
        }
    }
    for (size_t i = 0; i < ncut; i++) {
        out_str(o, i == 0 ? ",\"cut\":[\"" : ",\"");
        json_str(o, cut[i], cut_len[i]);
        out_c(o, '"');
    }
    out_str(o, ncut > 0 ? "]}" : "}");
}

void
tm_log_stderr_json(void *arg, enum tm_log_level level, const char *msg)
{
    (void)arg;
    line_write(json_line, level, msg);
}

/* ---- the buffer between the stderr sinks and stderr ------------------- */

/* How long a line may wait for others to go out with it in one write (a
 * buffer a quarter full goes at once). Every level waits alike: a line
 * that went at once would wake the writer for each line of a storm of
 * warnings (a 502 a request while an upstream is down), which cost 45%
 * more CPU a request than the loop's own write did. */
#define LB_GATHER_MS 10

/* The stderr sinks' lines, while tm_log_stderr_buffer runs: a ring the
 * sinks append whole lines to under mu, and a thread that writes what it
 * holds to stderr. The writer takes ring[head, head + len) and writes it
 * without the lock; the sinks append only past it, so neither waits for
 * stderr but the writer. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t more; /* to the writer: lines, or stop */
    pthread_cond_t done; /* to tm_log_stderr_unbuffer: the writer ended */
    pthread_t thread;
    char *ring; /* NULL: no buffer (or one whose writer never ended) */
    size_t cap, head, len;
    /* The most bytes a write: a pipe takes PIPE_BUF bytes at once, so
     * that another process writing to it cannot come between a line's
     * pieces; a file, any. */
    size_t max_write;
    uint64_t dropped; /* lines, since the writer last said so */
    line_fn *form;    /* the last line's, for the writer's own */
    bool on, stopping, ended;
} lb = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .more = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
};

/* Lines dropped or lost (a full buffer, a stderr that failed), for
 * /metrics; read without the lock. */
static _Atomic uint64_t lb_dropped_total;

uint64_t
log_dropped_total(void)
{
    return atomic_load_explicit(&lb_dropped_total, memory_order_relaxed);
}

/* n bytes into the ring past its lines, wrapping at its end (mu held;
 * the caller checked the room). */
static void
lb_append(const char *s, size_t n)
{
    size_t at = (lb.head + lb.len) % lb.cap;
    size_t first = n < lb.cap - at ? n : lb.cap - at;

    memcpy(lb.ring + at, s, first);
    memcpy(lb.ring, s + first, n - first);
    lb.len += n;
}

/* Whether the buffer took the line (or dropped it, counted): false when
 * no buffer runs, or its writer has ended (a stop is under way), and the
 * caller writes it. */
static bool
lb_put(line_fn *fn, const char *line, size_t n)
{
    pthread_mutex_lock(&lb.mu);
    if (!lb.on || lb.ended) {
        pthread_mutex_unlock(&lb.mu);
        return false;
    }
    lb.form = fn;
    if (n <= lb.cap - lb.len) {
        size_t before = lb.len;

        lb_append(line, n);
        /* The writer waits unwoken for a first line, then for a gather's
         * end or a quarter of the buffer: wake it as each begins. */
        if (before == 0 || (before < lb.cap / 4 && lb.len >= lb.cap / 4)) {
            pthread_cond_signal(&lb.more);
        }
    } else {
        lb.dropped++;
        atomic_fetch_add_explicit(&lb_dropped_total, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&lb.mu);
    return true;
}

/* The lines in the two pieces of iov to fd 2, as far as it takes them. A
 * stderr made non-blocking by whoever shares it is waited for. Returns
 * the bytes it did not take (an error: EPIPE, EIO, ENOSPC). */
static size_t
lb_write(struct iovec iov[2])
{
    int i = 0;

    while (i < 2) {
        ssize_t w = writev(STDERR_FILENO, iov + i, 2 - i);
        size_t took;

        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w < 0 && errno == EAGAIN) {
            struct pollfd p = {.fd = STDERR_FILENO, .events = POLLOUT};

            poll(&p, 1, -1);
            continue;
        }
        if (w < 0) {
            return iov[i].iov_len + (i == 0 ? iov[1].iov_len : 0);
        }
        took = (size_t)w;
        while (i < 2 && took >= iov[i].iov_len) {
            took -= iov[i].iov_len;
            iov[i++].iov_len = 0;
        }
        if (i < 2) {
            iov[i].iov_base = (char *)iov[i].iov_base + took;
            iov[i].iov_len -= took;
        }
    }
    return 0;
}

/* How many of the n bytes at `at` in the ring one write takes: all
 * when they fit lb.max_write, else the lines that fit (the first alone
 * when it is longer). */
static size_t
lb_chunk(size_t at, size_t n)
{
    size_t i;

    if (n <= lb.max_write) {
        return n;
    }
    for (i = lb.max_write; i > 0; i--) {
        if (lb.ring[(at + i - 1) % lb.cap] == '\n') {
            return i;
        }
    }
    for (i = lb.max_write + 1; i < n; i++) {
        if (lb.ring[(at + i - 1) % lb.cap] == '\n') {
            return i;
        }
    }
    return n;
}

/* The lines of the last n bytes before end in the ring (what stderr
 * failed to take), counted as lost. */
static void
lb_count_lost(size_t end, size_t n)
{
    uint64_t lines = 0;

    for (size_t i = 1; i <= n; i++) {
        lines += lb.ring[(end + lb.cap - i) % lb.cap] == '\n';
    }
    atomic_fetch_add_explicit(&lb_dropped_total, lines, memory_order_relaxed);
}

/* The ring's n bytes at `at` to stderr, whole lines a write (mu not
 * held), each write's room given back to the sinks as soon as stderr
 * took it: a slow stderr holds no more of the ring than the write it is
 * in. What stderr did not take is counted lost and given back too. */
static void
lb_write_lines(size_t at, size_t n)
{
    while (n > 0) {
        size_t k = lb_chunk(at, n), left;
        struct iovec iov[2];

        iov[0].iov_base = lb.ring + at;
        iov[0].iov_len = k < lb.cap - at ? k : lb.cap - at;
        iov[1].iov_base = lb.ring;
        iov[1].iov_len = k - iov[0].iov_len;
        left = lb_write(iov);
        pthread_mutex_lock(&lb.mu);
        if (left > 0) {
            lb_count_lost((at + n) % lb.cap, n - k + left);
            k = n;
        }
        lb.head = (at + k) % lb.cap;
        lb.len -= k;
        pthread_mutex_unlock(&lb.mu);
        at = (at + k) % lb.cap;
        n -= k;
    }
}

/* The writer's own line, when lines were dropped since it last said so,
 * in the form of the last line (mu held). */
static void
lb_say_dropped(void)
{
    char msg[256], when[TS_LEN + 1], stack[1024];
    struct out o = {.p = stack, .cap = sizeof(stack)};

    snprintf(msg, sizeof(msg),
             "log: lines dropped: stderr took them slower than they came "
             "and the buffer was full: dropped=%llu log_buffer=%zu",
             (unsigned long long)lb.dropped, lb.cap);
    timestamp(when);
    lb.form(&o, when, TM_LOG_WARN, msg);
    out_c(&o, '\n');
    if (o.n <= lb.cap - lb.len) {
        lb_append(o.p, o.n);
        lb.dropped = 0;
    }
    if (o.heap) {
        free(o.p);
    }
}

/* Wait on cv (mu held) until signalled or until; false at until. */
static bool
lb_wait(pthread_cond_t *cv, const struct timespec *until)
{
    return pthread_cond_clockwait(cv, &lb.mu, CLOCK_MONOTONIC, until) !=
           ETIMEDOUT;
}

static void *
lb_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lb.mu);
    for (;;) {
        size_t head, n;

        while (lb.len == 0 && lb.dropped == 0 && !lb.stopping) {
            pthread_cond_wait(&lb.more, &lb.mu);
        }
        if (lb.dropped > 0) {
            lb_say_dropped();
        }
        if (lb.len == 0) {
            break; /* stopping, all written */
        }
        if (!lb.stopping && lb.len < lb.cap / 4) {
            struct timespec until = mono_after_ms(LB_GATHER_MS);

            while (!lb.stopping && lb.len < lb.cap / 4 &&
                   lb_wait(&lb.more, &until)) {
            }
        }
        head = lb.head;
        n = lb.len;
        pthread_mutex_unlock(&lb.mu);
        lb_write_lines(head, n);
        pthread_mutex_lock(&lb.mu);
    }
    lb.ended = true;
    pthread_cond_broadcast(&lb.done);
    pthread_mutex_unlock(&lb.mu);
    return NULL;
}

int
tm_log_stderr_buffer(size_t bytes)
{
    struct stat st;
    char *ring;
    int rc;

    if (bytes < TM_LOG_BUFFER_MIN) {
        return EINVAL;
    }
    ring = malloc(bytes);
    if (ring == NULL) {
        return ENOMEM;
    }
    pthread_mutex_lock(&lb.mu);
    if (lb.ring != NULL) {
        pthread_mutex_unlock(&lb.mu);
        free(ring);
        return EBUSY;
    }
    lb.ring = ring;
    lb.cap = bytes;
    lb.head = lb.len = 0;
    lb.dropped = 0;
    lb.form = NULL;
    lb.max_write = fstat(STDERR_FILENO, &st) == 0 && S_ISREG(st.st_mode)
                       ? SIZE_MAX
                       : PIPE_BUF;
    lb.stopping = lb.ended = false;
    rc = thread_start_unsignalled(&lb.thread, "log", lb_main, NULL);
    if (rc != 0) {
        lb.ring = NULL;
        pthread_mutex_unlock(&lb.mu);
        free(ring);
        return rc;
    }
    lb.on = true;
    pthread_mutex_unlock(&lb.mu);
    return 0;
}

bool
tm_log_stderr_unbuffer(int timeout_ms)
{
    struct timespec until = mono_after_ms(timeout_ms < 0 ? 0 : timeout_ms);
    bool ended;

    pthread_mutex_lock(&lb.mu);
    if (!lb.on) {
        pthread_mutex_unlock(&lb.mu);
        return true;
    }
    lb.stopping = true;
    pthread_cond_signal(&lb.more);
    while (!lb.ended && lb_wait(&lb.done, &until)) {
    }
    ended = lb.ended;
    lb.on = false; /* from now on a line is written by its caller */
    pthread_mutex_unlock(&lb.mu);
    if (!ended) {
        /* Still in a write stderr does not take: its ring stays (and no
         * new buffer starts); what it holds is lost at exit. */
        pthread_detach(lb.thread);
        return false;
    }
    pthread_join(lb.thread, NULL);
    pthread_mutex_lock(&lb.mu);
    free(lb.ring);
    lb.ring = NULL;
    pthread_mutex_unlock(&lb.mu);
    return true;
}

const char *
errno_text(int e, char *buf, size_t len)
{
    const char *name = strerrorname_np(e);

    if (name != NULL) {
        snprintf(buf, len, "%s (%s)", strerror(e), name);
    } else {
        snprintf(buf, len, "%s (errno %d)", strerror(e), e);
    }
    return buf;
}
