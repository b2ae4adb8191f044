/* test_log.c: the ready-made stderr sinks of tidemark.h: a line of any
 * length (around the stack buffer a line is built in, and far past it)
 * reaches stderr whole in one write, exactly as the message asks, and
 * its time is the wall clock's, also just after the second changes.
 * stderr is a SOCK_SEQPACKET socket while a sink runs, so each write(2)
 * arrives as one record. */
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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lengths),
        cmocka_unit_test(test_time_follows_the_clock),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
