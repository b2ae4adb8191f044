/* log.c: writing to the current proxy's sink, blocking SIGPIPE on the
 * loop's thread, and the ready-made stderr sinks of tidemark.h. */
#include "log.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../policies/json.h"

_Thread_local const struct tm_log *log_cur;
_Thread_local bool lib_sigpipe_blocked;

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

static void
timestamp(char *buf, size_t len)
{
    struct timespec ts;
    struct tm tm;
    char when[32];

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%03ldZ", when, ts.tv_nsec / 1000000);
}

void
tm_log_stderr_text(void *arg, enum tm_log_level level, const char *msg)
{
    char when[48];

    (void)arg;
    timestamp(when, sizeof(when));
    fprintf(stderr, "%s %s %s\n", when, tm_log_level_name(level), msg);
}

/* Write s[0..n) as a JSON string's content; bytes that are not UTF-8
 * become U+FFFD. */
static void
json_str(FILE *f, const char *s, size_t n)
{
    while (n > 0) {
        char esc[8];
        size_t take;
        const char *e = json_piece(s, n, &take, esc);

        if (e != NULL) {
            fputs(e, f);
        } else {
            fwrite(s, 1, take, f);
        }
        s += take;
        n -= take;
    }
}

/* One JSON object a line: ts, level, msg, and every key=value word of the
 * message as a field of its own (conn=7 route=docs token=5 ...). */
void
tm_log_stderr_json(void *arg, enum tm_log_level level, const char *msg)
{
    char when[48];
    const char *p = msg;

    (void)arg;
    timestamp(when, sizeof(when));
    flockfile(stderr);
    fprintf(stderr, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"", when,
            tm_log_level_name(level));
    json_str(stderr, msg, strlen(msg));
    fputc('"', stderr);
    while (*p != '\0') {
        size_t w = strcspn(p, " "), k = strcspn(p, "= ");
        if (k < w && k > 0 && strncmp(p, "msg=", 4) != 0 &&
            strncmp(p, "ts=", 3) != 0 && strncmp(p, "level=", 6) != 0) {
            size_t vlen = w - k - 1;
            fputs(",\"", stderr);
            json_str(stderr, p, k);
            fputs("\":\"", stderr);
            json_str(stderr, p + k + 1,
                     vlen > 0 && p[w - 1] == ':' ? vlen - 1 : vlen);
            fputc('"', stderr);
        }
        p += w;
        while (*p == ' ') {
            p++;
        }
    }
    fputs("}\n", stderr);
    funlockfile(stderr);
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
