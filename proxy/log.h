/* log.h: the library's logging. Each proxy has its own sink and level
 * (struct tm_log, from tm_options); the macros write to the logger of the
 * proxy whose code runs on this thread, which every entry into the
 * library sets (lib_enter). The library never writes to a fixed place. */
#ifndef TM_LOG_H
#define TM_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../policies/logesc.h"
#include "tidemark.h"

struct tm_log {
    void (*fn)(void *arg, enum tm_log_level level, const char *msg);
    void *arg;
    /* Most verbose level formatted; -1: nothing. Atomic: the control
     * port sets it on the loop while other threads (the ZooKeeper
     * client's, the lmdb writer's) read it to log. */
    _Atomic int level;
};

/* The current logger: that of the proxy whose code runs on this thread;
 * NULL: nothing is logged. */
extern _Thread_local const struct tm_log *log_cur;
extern _Thread_local bool lib_sigpipe_blocked;

void lib_block_sigpipe(void);

/* Every entry into the library from its caller's loop starts here: an
 * API call, or a callback of libevent, hiredis or libpq that belongs to a
 * proxy's object. Makes l (the proxy's logger, which objects keep from
 * their creation: log_current) current, and the first time on a thread
 * blocks SIGPIPE there (tidemark.h says why). Returns the logger that
 * was current, for lib_leave. */
static inline const struct tm_log *
lib_enter(const struct tm_log *l)
{
    const struct tm_log *prev = log_cur;

    log_cur = l;
    if (!lib_sigpipe_blocked) {
        lib_block_sigpipe();
    }
    return prev;
}

/* At the end of an API call: the caller's logger is current again. */
static inline void
lib_leave(const struct tm_log *prev)
{
    log_cur = prev;
}

/* The current logger, for an object to keep and enter in its callbacks. */
static inline const struct tm_log *
log_current(void)
{
    return log_cur;
}

/* The most verbose level the current logger formats; -1 when none. */
static inline int
log_get_level(void)
{
    return log_cur == NULL ? -1 : log_cur->level;
}

/* An outside value (a name, a path, a header, a peer's answer: anything
 * a client, a peer or a file chose) for a "%s" of a log line, escaped by
 * logesc (policies/logesc.h) into LOG_VALUE_CAP bytes of the caller's
 * stack: a compound literal that lives until the log call ends. Written
 * as an argument of log_*, it is made only once the level passed, and
 * allocates nothing:
 *
 *   log_warn("lock %s: %s", LOG_ESC(r->name, r->len), LOG_STR(errmsg));
 *
 * A value longer than the room is cut, quoted and marked: "abc"... */
#define LOG_VALUE_CAP 256
#define LOG_ESC(s, n) log_esc((char[LOG_VALUE_CAP]){0}, (s), (n), LOGESC_WORD)
/* The same for a NUL-terminated s; NULL is "-". */
#define LOG_STR(s) log_esc_str((char[LOG_VALUE_CAP]){0}, (s), LOGESC_WORD)
/* The same, always quoted: for a value the text puts in quotes. */
#define LOG_QSTR(s) log_esc_str((char[LOG_VALUE_CAP]){0}, (s), LOGESC_QUOTED)

static inline const char *
log_esc(char *buf, const char *s, size_t n, enum logesc_form form)
{
    logesc(buf, LOG_VALUE_CAP, s, n, form);
    return buf;
}

static inline const char *
log_esc_str(char *buf, const char *s, enum logesc_form form)
{
    return s == NULL ? "-" : log_esc(buf, s, strlen(s), form);
}

/* Lines the stderr sinks dropped (tm_log_stderr_buffer full) or that
 * stderr failed to take, since the start: for /metrics. */
uint64_t log_dropped_total(void);

/* "Address already in use (EADDRINUSE)": errno e for a message that
 * names it, into buf. */
const char *errno_text(int e, char *buf, size_t len);

void log_write(enum tm_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Write msg, formatted already, to the current sink at level (the
 * caller checked the level). */
void log_emit(enum tm_log_level level, const char *msg);

/* Check the level before formatting anything. */
#define log_at(lvl, ...)                                                       \
    do {                                                                       \
        if ((int)(lvl) <= log_get_level()) {                                   \
            log_write((lvl), __VA_ARGS__);                                     \
        }                                                                      \
    } while (0)
#define log_error(...) log_at(TM_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_at(TM_LOG_WARN, __VA_ARGS__)
#define log_info(...) log_at(TM_LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_at(TM_LOG_DEBUG, __VA_ARGS__)

#endif
