/* log.c: writing to the current proxy's sink, blocking SIGPIPE on the
 * loop's thread, and the ready-made stderr sinks of tidemark.h. */
#include "log.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../policies/json.h"
#include "../policies/logesc.h"

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

/* s with each control byte as \xNN and, if quotes, '"' and '\\'
 * backslashed (the content of a quoted value). The values in s came
 * escaped by logesc; this keeps the line one line whatever a message
 * holds. Runs of bytes that need nothing are written whole. */
static void
escaped(FILE *f, const char *s, bool quotes)
{
    for (;;) {
        size_t n = 0;
        unsigned char c;

        while ((c = (unsigned char)s[n]) >= 0x20 && c != 0x7f &&
               !(quotes && (c == '"' || c == '\\'))) {
            n++;
        }
        fwrite(s, 1, n, f);
        s += n;
        if (c == '\0') {
            return;
        }
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc(c, f);
        } else {
            fprintf(f, "\\x%02x", c);
        }
        s++;
    }
}

/* A sink's way of writing one line, without its newline, into f. */
typedef void line_fn(FILE *f, const char *when, enum tm_log_level level,
                     const char *msg);

/* One line on stderr, built whole in memory and handed to stderr in one
 * fwrite: an unbuffered stderr writes it with one write(2), so a reader
 * (a pipe, journald's socket, a file other processes append to) never
 * gets a line in pieces, and a line costs one system call, not one a
 * word or a byte. Without the memory to build it, the line is written as
 * it is built, still whole among this process's lines (stderr is locked
 * meanwhile). */
static void
line_write(line_fn *fn, enum tm_log_level level, const char *msg)
{
    char when[48], *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    timestamp(when, sizeof(when));
    if (f != NULL) {
        fn(f, when, level, msg);
        fputc('\n', f);
        if (fclose(f) != 0) {
            free(buf);
            buf = NULL;
        }
    }
    flockfile(stderr);
    if (buf != NULL) {
        fwrite(buf, 1, len, stderr);
    } else {
        fn(stderr, when, level, msg);
        fputc('\n', stderr);
    }
    funlockfile(stderr);
    free(buf);
}

/* Every line is key=value words: ts, level, then an access line's own
 * fields (event=...), or msg="..." holding a message of prose. */
static void
text_line(FILE *f, const char *when, enum tm_log_level level, const char *msg)
{
    fprintf(f, "ts=%s level=%s ", when, tm_log_level_name(level));
    if (strncmp(msg, "event=", 6) == 0) {
        escaped(f, msg, false); /* logesc escaped its values */
    } else {
        fputs("msg=\"", f);
        escaped(f, msg, true);
        fputc('"', f);
    }
}

void
tm_log_stderr_text(void *arg, enum tm_log_level level, const char *msg)
{
    (void)arg;
    line_write(text_line, level, msg);
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
json_quoted(FILE *f, const char *p)
{
    char buf[4096]; /* a whole access line: one pass for any line of ours */
    size_t i = 1;

    fputc('"', f);
    for (;;) {
        size_t len = strnlen(p + i, sizeof(buf)), used;
        size_t n = logesc_decode(p + i, len, buf, &used);

        json_str(f, buf, n);
        i += used;
        if (used < len || p[i] == '\0') {
            break;
        }
    }
    fputc('"', f);
    return p[i] == '"' ? i + 1 : i;
}

/* One key=value word's value: quoted, a string; bare, "-" is null, a
 * number is a number, anything else a string (a trailing ':' dropped).
 * Returns how much of p it took. */
static size_t
json_value(FILE *f, const char *p)
{
    size_t w, vlen;

    if (*p == '"') {
        return json_quoted(f, p);
    }
    w = strcspn(p, " ");
    vlen = w > 0 && p[w - 1] == ':' ? w - 1 : w;
    if (vlen == 1 && p[0] == '-') {
        fputs("null", f);
    } else if (json_number(p, vlen)) {
        fwrite(p, 1, vlen, f);
    } else {
        fputc('"', f);
        json_str(f, p, vlen);
        fputc('"', f);
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
json_line(FILE *f, const char *when, enum tm_log_level level, const char *msg)
{
    const char *p = msg;
    const char *cut[JSON_CUT_MAX];
    size_t cut_len[JSON_CUT_MAX], ncut = 0;

    fprintf(f, "{\"ts\":\"%s\",\"level\":\"%s\"", when,
            tm_log_level_name(level));
    if (strncmp(msg, "event=", 6) != 0) {
        /* Prose keeps its text; an access line is its fields. */
        fputs(",\"msg\":\"", f);
        json_str(f, msg, strlen(msg));
        fputc('"', f);
    }
    while (*p != '\0') {
        size_t w = strcspn(p, " "), k = strcspn(p, "= ");

        if (k < w && k > 0 && strncmp(p, "msg=", 4) != 0 &&
            strncmp(p, "ts=", 3) != 0 && strncmp(p, "level=", 6) != 0) {
            fputs(",\"", f);
            json_str(f, p, k);
            fputs("\":", f);
            w = k + 1 + json_value(f, p + k + 1);
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
        fputs(i == 0 ? ",\"cut\":[\"" : ",\"", f);
        json_str(f, cut[i], cut_len[i]);
        fputc('"', f);
    }
    fputs(ncut > 0 ? "]}" : "}", f);
}

void
tm_log_stderr_json(void *arg, enum tm_log_level level, const char *msg)
{
    (void)arg;
    line_write(json_line, level, msg);
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
