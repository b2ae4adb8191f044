/* test_log.c: the ready-made stderr sinks of tidemark.h: a line of any
 * length (around the stack buffer a line is built in, and far past it)
 * reaches stderr whole in one write, exactly as the message asks, and
 * its time is the wall clock's, also just after the second changes.
 * stderr is a SOCK_SEQPACKET socket while a sink runs, so each write(2)
 * arrives as one record. Then the same lines through the buffer
 * (tm_log_stderr_buffer): in order, whole lines a write, the buffer
 * wrapped many times; a stderr that takes nothing does not stop the
 * sinks, and what they dropped is said once stderr takes lines again; a
 * write stderr took gives its room back at once; the lines a failing
 * stderr did not take are counted lost. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../proxy/log.h"
#include "../../proxy/tidemark.h"

typedef void sink_fn(void *, enum tm_log_level, const char *);

#define RECORD_MAX (1 << 20)

/* The records one call of sink writes to stderr: their count, and the
 * first in *line (NUL-terminated; malloc'd). */
static int
records(sink_fn *sink, enum tm_log_level level, const char *msg, char **line)
{
    int sv[2], saved, count = 0;
    int big = 4 << 20;
    char *buf = malloc(RECORD_MAX + 1);
    ssize_t n;

    assert_non_null(buf);
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    fflush(stderr);
    saved = dup(2);
    assert_true(saved >= 0);
    assert_int_equal(dup2(sv[1], 2), 2);
    sink(NULL, level, msg);
    assert_int_equal(dup2(saved, 2), 2);
    close(saved);
    close(sv[1]);
    *line = NULL;
    while ((n = recv(sv[0], buf, RECORD_MAX, MSG_TRUNC)) > 0) {
        assert_true(n <= RECORD_MAX);
        if (count++ == 0) {
            buf[n] = '\0';
            *line = strdup(buf);
        }
    }
    close(sv[0]);
    free(buf);
    return count;
}

/* Whether ts is "YYYY-MM-DDTHH:MM:SS.mmmZ"; its seconds since the epoch
 * into *sec. */
static bool
ts_sane(const char *ts, time_t *sec)
{
    struct tm tm = {0};
    const char *rest = strptime(ts, "%Y-%m-%dT%H:%M:%S", &tm);

    if (rest == NULL || rest != ts + 19 || rest[0] != '.' || rest[4] != 'Z') {
        return false;
    }
    for (int i = 1; i <= 3; i++) {
        if (rest[i] < '0' || rest[i] > '9') {
            return false;
        }
    }
    *sec = timegm(&tm);
    return true;
}

/* A message of n bytes, every kind of byte a sink must treat: plain
 * text, a quote, a backslash, a control byte, UTF-8 (é), repeated. */
static char *
message(size_t n)
{
    static const char unit[] = "ab\"c\\d\x01\xc3\xa9 ";
    char *m = malloc(n + 1);

    assert_non_null(m);
    for (size_t i = 0; i < n; i++) {
        m[i] = unit[i % (sizeof(unit) - 1)];
    }
    /* never end inside é: its lead byte alone is not UTF-8 */
    if (n > 0 && (unsigned char)m[n - 1] == 0xc3) {
        m[n - 1] = 'z';
    }
    m[n] = '\0';
    return m;
}

/* msg as the text sink writes it in msg="...", or the JSON sink in
 * "msg":"...". */
static char *
escaped(const char *msg, bool json)
{
    char *out = malloc(strlen(msg) * 6 + 1), *o = out;

    assert_non_null(out);
    for (const char *p = msg; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;

        if (c == '"' || c == '\\') {
            *o++ = '\\';
            *o++ = (char)c;
        } else if (c < 0x20) {
            o += sprintf(o, json ? "\\u%04x" : "\\x%02x", c);
        } else {
            *o++ = (char)c;
        }
    }
    *o = '\0';
    return out;
}

/* One message of each length class through both sinks: one record, one
 * line, the message exactly. 8146 and 8147 bytes of plain text make a
 * text line of 8192 and 8193 bytes: the stack buffer's size and one
 * past it. */
static void
test_lengths(void **state)
{
    static const size_t lens[] = {1, 60, 300, 1023, 8146, 8147, 100000};

    (void)state;
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        for (int json = 0; json <= 1; json++) {
            char *msg = lens[i] >= 8146 && lens[i] <= 8147
                            ? memset(calloc(lens[i] + 1, 1), 'a', lens[i])
                            : message(lens[i]);
            char *esc = escaped(msg, json), *line, *want;
            size_t wlen = strlen(esc) + 64;
            time_t sec;

            want = malloc(wlen);
            assert_non_null(want);
            assert_int_equal(
                records(json ? tm_log_stderr_json : tm_log_stderr_text,
                        TM_LOG_INFO, msg, &line),
                1);
            assert_non_null(line);
            if (json) {
                snprintf(want, wlen,
                         "{\"ts\":\"%.24s\",\"level\":\"info\","
                         "\"msg\":\"%s\"}\n",
                         line + 7, esc);
                assert_true(ts_sane(line + 7, &sec));
            } else {
                snprintf(want, wlen, "ts=%.24s level=info msg=\"%s\"\n",
                         line + 3, esc);
                assert_true(ts_sane(line + 3, &sec));
            }
            if (strcmp(line, want) != 0) {
                fail_msg("%zu bytes, %s: got %.200s", lens[i],
                         json ? "json" : "text", line);
            }
            if (!json && lens[i] >= 8146 && lens[i] <= 8147) {
                assert_int_equal(strlen(line), lens[i] + 46);
            }
            free(want);
            free(line);
            free(esc);
            free(msg);
        }
    }
}

/* A line's time is the clock's, to the second, on both sides of a
 * second's change (a sink keeps the second's text between lines). */
static void
test_time_follows_the_clock(void **state)
{
    struct timespec t0, t1;
    time_t sec;
    char *line;

    (void)state;
    for (int round = 0; round < 2; round++) {
        clock_gettime(CLOCK_REALTIME, &t0);
        assert_int_equal(records(tm_log_stderr_text, TM_LOG_WARN, "x", &line),
                         1);
        clock_gettime(CLOCK_REALTIME, &t1);
        assert_true(ts_sane(line + 3, &sec));
        assert_true(sec >= t0.tv_sec && sec <= t1.tv_sec);
        assert_string_equal(line + 27, " level=warn msg=\"x\"\n");
        free(line);
        /* Wait (spinning on the clock, at most a second) for the next
         * second, and log again. */
        do {
            clock_gettime(CLOCK_REALTIME, &t1);
        } while (t1.tv_sec == t0.tv_sec);
    }
}

/* ---- through the buffer ------------------------------------------------ */

/* What a reader thread got from stderr: the records (each write) as one
 * text, and whether every record was whole lines, a write of at most
 * PIPE_BUF bytes but for a line longer alone. */
struct got {
    int fd;
    pthread_mutex_t mu;
    pthread_cond_t more;
    char *text;
    size_t len, cap;
    bool whole;
    bool stop_at_drop; /* stop reading once a drop is said */
};

/* Wait until the reader got `bytes` in all; a line that never comes (a
 * drop the test did not mean) fails the test after 30 s, not hangs it,
 * with stderr put back to `saved` to say so. */
static void
got_wait(struct got *g, size_t bytes, int saved)
{
    struct timespec until;
    int rc = 0;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    pthread_mutex_lock(&g->mu);
    while (g->len < bytes && rc != ETIMEDOUT) {
        rc = pthread_cond_timedwait(&g->more, &g->mu, &until);
    }
    pthread_mutex_unlock(&g->mu);
    if (g->len < bytes) {
        dup2(saved, 2);
        fail_msg("stderr got %zu bytes in 30 s, not the %zu logged", g->len,
                 bytes);
    }
}

static void *
reader(void *arg)
{
    struct got *g = arg;
    char *rec = malloc(RECORD_MAX);
    ssize_t n;

    assert_non_null(rec);
    while ((n = recv(g->fd, rec, RECORD_MAX, 0)) > 0) {
        const char *nl = memchr(rec, '\n', (size_t)n);

        if (rec[n - 1] != '\n' || (n > 4096 && nl != rec + n - 1)) {
            g->whole = false;
        }
        pthread_mutex_lock(&g->mu);
        if (g->len + (size_t)n + 1 > g->cap) {
            g->cap = (g->len + (size_t)n + 1) * 2;
            g->text = realloc(g->text, g->cap);
            assert_non_null(g->text);
        }
        memcpy(g->text + g->len, rec, (size_t)n);
        g->len += (size_t)n;
        g->text[g->len] = '\0';
        pthread_cond_broadcast(&g->more);
        pthread_mutex_unlock(&g->mu);
        if (g->stop_at_drop && strstr(g->text, "dropped=") != NULL) {
            break;
        }
    }
    free(rec);
    return NULL;
}

/* stderr becomes one end of a SOCK_SEQPACKET pair (sndbuf bytes of
 * room); the other end is returned, and the old stderr in *saved. */
static int
stderr_to_socket(int sndbuf, int *saved)
{
    int sv[2];

    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &sndbuf, sizeof(sndbuf));
    fflush(stderr);
    *saved = dup(2);
    assert_true(*saved >= 0);
    assert_int_equal(dup2(sv[1], 2), 2);
    close(sv[1]);
    return sv[0];
}

static void
stderr_back(int saved)
{
    assert_int_equal(dup2(saved, 2), 2);
    close(saved);
}

/* Each message of lens[], and then 3,000 of 300 bytes (the 64 KiB buffer
 * wraps about fifteen times), through the text sink and the buffer while
 * a reader takes them: every line comes, in order, whole lines a write;
 * a line longer than the buffer is dropped and said so, last.
 *
 * No line may find the buffer full. A write the reader has got can still
 * hold its room until the writer thread runs again, so the lines logged
 * between two waits and the write before them must fit together: the test
 * waits for each line of lens[] (the 50,000-byte one and the 8,147-byte
 * one before it fit) and for the first short line, then for every 50
 * (17 KB). */
static void
test_buffer_keeps_order_and_lines(void **state)
{
    static const size_t lens[] = {1, 60, 300, 1023, 4096, 8147, 50000};
    struct got g = {.whole = true,
                    .mu = PTHREAD_MUTEX_INITIALIZER,
                    .more = PTHREAD_COND_INITIALIZER};
    pthread_t t;
    char *want = NULL, *huge, *p;
    size_t want_len = 0, lines = 0, sent = 0;
    int saved;

    (void)state;
    g.fd = stderr_to_socket(1 << 20, &saved);
    assert_int_equal(pthread_create(&t, NULL, reader, &g), 0);
    assert_int_equal(tm_log_stderr_buffer(TM_LOG_BUFFER_MIN - 1), EINVAL);
    assert_int_equal(tm_log_stderr_buffer(TM_LOG_BUFFER_MIN), 0);
    assert_int_equal(tm_log_stderr_buffer(TM_LOG_BUFFER_MIN), EBUSY);
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]) + 3000; i++) {
        size_t n = i < sizeof(lens) / sizeof(lens[0]) ? lens[i] : 300;
        char *msg = memset(calloc(n + 1, 1), 'a' + (int)(i % 26), n);

        tm_log_stderr_text(NULL, TM_LOG_INFO, msg);
        sent += 27 + 17 + n + 2;
        if (i <= sizeof(lens) / sizeof(lens[0]) || i % 50 == 0) {
            got_wait(&g, sent, saved);
        }
        want = realloc(want, want_len + n + 1);
        memcpy(want + want_len, msg, n);
        want_len += n;
        want[want_len++] = '|';
        free(msg);
    }
    huge = memset(calloc(TM_LOG_BUFFER_MIN + 1, 1), 'h', TM_LOG_BUFFER_MIN);
    tm_log_stderr_text(NULL, TM_LOG_INFO, huge); /* its line is longer */
    free(huge);
    assert_true(tm_log_stderr_unbuffer(5000));
    stderr_back(saved);
    pthread_join(t, NULL);
    close(g.fd);

    /* The messages, each in its line, then the drop. */
    assert_true(g.whole);
    p = g.text;
    for (size_t at = 0; at < want_len; lines++) {
        size_t n = strcspn(want + at, "|");
        char *end = strchr(p, '\n');

        assert_non_null(end);
        assert_memory_equal(p + 27, " level=info msg=\"", 17);
        assert_int_equal((size_t)(end - p), 27 + 17 + n + 1);
        assert_memory_equal(p + 44, want + at, n);
        p = end + 1;
        at += n + 1;
    }
    assert_int_equal(lines, sizeof(lens) / sizeof(lens[0]) + 3000);
    assert_string_equal(p + 27, " level=warn msg=\"log: lines dropped: "
                                "stderr took them slower than they came "
                                "and the buffer was full: dropped=1 "
                                "log_buffer=65536\"\n");
    free(g.text);
    free(want);
}

/* Lines a stderr that takes nothing cannot stop: 2,000 JSON lines while
 * stderr's socket is full return all the same; once it is read, the
 * lines that came and the count the warning gives (a JSON field) make
 * the 2,000. */
static void
test_a_full_stderr_does_not_stop_the_sinks(void **state)
{
    struct got g = {.whole = true,
                    .stop_at_drop = true,
                    .mu = PTHREAD_MUTEX_INITIALIZER,
                    .more = PTHREAD_COND_INITIALIZER};
    pthread_t t;
    char msg[320];
    const char *d;
    int saved, came = 0;
    long dropped;

    (void)state;
    g.fd = stderr_to_socket(4096, &saved);
    assert_int_equal(tm_log_stderr_buffer(TM_LOG_BUFFER_MIN), 0);
    memset(msg, 'j', sizeof(msg) - 1);
    msg[sizeof(msg) - 1] = '\0';
    memcpy(msg, "event=x n=1 ", 12);
    for (int i = 0; i < 2000; i++) {
        tm_log_stderr_json(NULL, TM_LOG_INFO, msg);
    }
    assert_int_equal(pthread_create(&t, NULL, reader, &g), 0);
    pthread_join(t, NULL);
    assert_true(tm_log_stderr_unbuffer(5000));
    stderr_back(saved);
    close(g.fd);

    assert_true(g.whole);
    for (const char *p = g.text; (p = strstr(p, "\"event\":\"x\"")) != NULL;
         p++) {
        came++;
    }
    d = strstr(g.text, "\"level\":\"warn\",\"msg\":\"log: lines dropped: ");
    assert_non_null(d);
    d = strstr(d, "\"dropped\":");
    assert_non_null(d);
    dropped = strtol(d + 10, NULL, 10);
    assert_true(dropped > 0);
    assert_int_equal(came + dropped, 2000);
    free(g.text);
}

/* The next records on fd, lines of the text sink, until got holds n:
 * the first letter of each message; it stops at a record that is not
 * such a line, or when nothing came in 30 s, and puts a 0 there. */
static void
take_lines(int fd, char *got, size_t n)
{
    for (size_t i = strlen(got); i < n; i++) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        char rec[8192];
        ssize_t k;

        got[i] = '\0';
        if (poll(&p, 1, 30000) != 1) {
            return;
        }
        k = recv(fd, rec, sizeof(rec), 0);
        if (k < 45 || rec[k - 1] != '\n' ||
            memcmp(rec + 27, " level=info msg=\"", 17) != 0) {
            return;
        }
        got[i] = rec[44];
    }
}

/* A slow stderr holds no more of the ring than the write it is in: 15
 * lines of 4,000 bytes (60 KB of the 64 KiB ring, one write each) wait
 * for a stderr that takes one at a time; once it has taken 10, 8 more
 * lines (32 KB) find room, however many of the 15 the writer had taken
 * at once. Every line comes, in order. */
static void
test_a_taken_write_frees_its_room(void **state)
{
    char msg[4001], got[24] = {0};
    int saved, fd;

    (void)state;
    fd = stderr_to_socket(4096, &saved);
    assert_int_equal(tm_log_stderr_buffer(TM_LOG_BUFFER_MIN), 0);
    msg[4000] = '\0';
    for (int i = 0; i < 23; i++) {
        if (i == 15) {
            take_lines(fd, got, 10);
        }
        memset(msg, 'A' + i, 4000);
        tm_log_stderr_text(NULL, TM_LOG_INFO, msg);
    }
    take_lines(fd, got, 23);
    stderr_back(saved);
    assert_string_equal(got, "ABCDEFGHIJKLMNOPQRSTUVW");
    assert_true(tm_log_stderr_unbuffer(5000));
    close(fd);
}

/* A stderr that fails (its socket shut for writing while lines wait for
 * room): what it did not take is counted lost in log_dropped_total, to
 * the line; what it took before comes whole. 10 lines of 1,000 bytes
 * (three a write) on a socket with room for a write or two, shut once
 * the first write is there, before any is read: the writer fails in the
 * middle of what it took. */
static void
test_lines_stderr_failed_to_take_are_counted(void **state)
{
    char msg[1001], rec[8192];
    int saved, fd, came = 0;
    uint64_t before = log_dropped_total();
    ssize_t n;

    (void)state;
    fd = stderr_to_socket(4096, &saved);
    assert_int_equal(tm_log_stderr_buffer(TM_LOG_BUFFER_MIN), 0);
    memset(msg, 'f', 1000);
    msg[1000] = '\0';
    for (int i = 0; i < 10; i++) {
        tm_log_stderr_text(NULL, TM_LOG_INFO, msg);
    }
    poll(&(struct pollfd){.fd = fd, .events = POLLIN}, 1, 30000);
    shutdown(2, SHUT_WR);
    assert_true(tm_log_stderr_unbuffer(5000));
    stderr_back(saved);
    while ((n = recv(fd, rec, sizeof(rec), MSG_DONTWAIT)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            came += rec[i] == '\n';
        }
    }
    close(fd);
    assert_in_range(came, 1, 9);
    assert_int_equal(log_dropped_total() - before, (uint64_t)(10 - came));
}

/* A stderr that never takes the lines: the unbuffer gives up at its
 * timeout and says so, and no buffer starts while that writer is still
 * in its write. Last of the buffer's tests for that reason. */
static void
test_unbuffer_gives_up_on_a_stuck_stderr(void **state)
{
    char msg[1000];
    int saved, fd;

    (void)state;
    fd = stderr_to_socket(4096, &saved);
    assert_int_equal(tm_log_stderr_buffer(TM_LOG_BUFFER_MIN), 0);
    memset(msg, 's', sizeof(msg) - 1);
    msg[sizeof(msg) - 1] = '\0';
    for (int i = 0; i < 100; i++) {
        tm_log_stderr_text(NULL, TM_LOG_WARN, msg);
    }
    assert_false(tm_log_stderr_unbuffer(50));
    assert_int_equal(tm_log_stderr_buffer(TM_LOG_BUFFER_MIN), EBUSY);
    stderr_back(saved);
    /* fd stays open: the writer stays in its write until the test's
     * process ends, and what it holds is never written. */
    (void)fd;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lengths),
        cmocka_unit_test(test_time_follows_the_clock),
        cmocka_unit_test(test_buffer_keeps_order_and_lines),
        cmocka_unit_test(test_a_full_stderr_does_not_stop_the_sinks),
        cmocka_unit_test(test_a_taken_write_frees_its_room),
        cmocka_unit_test(test_lines_stderr_failed_to_take_are_counted),
        cmocka_unit_test(test_unbuffer_gives_up_on_a_stuck_stderr),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
