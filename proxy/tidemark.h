/* tidemark.h: the public interface of libtidemark, the fencing proxy as a
 * library. A program with its own libevent loop embeds tidemark through
 * these calls alone: load or build a configuration, start a proxy on its
 * event_base, reload, drain, free. Build with
 * `pkg-config --cflags --libs tidemark`.
 *
 * The library never exits, never installs signal handlers and logs only
 * through the sink each proxy is given. Every call, and every callback the
 * library runs, happens on the thread that runs the proxy's event_base.
 *
 * SIGPIPE: a peer that resets while the library writes to it must not
 * kill the program. The library's own writes use MSG_NOSIGNAL; the writes
 * libevent, OpenSSL and hiredis make on its behalf cannot, so the first
 * time the library runs on a thread it blocks SIGPIPE in that thread's
 * signal mask (pthread_sigmask) and leaves it blocked: a write to a
 * broken pipe or socket on that thread then fails with EPIPE. The
 * process's signal dispositions are not touched. A process started from
 * that thread inherits the mask across exec; unblock SIGPIPE in the child
 * (posix_spawnattr_setsigmask) when it matters. */
#ifndef TIDEMARK_H
#define TIDEMARK_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TM_API __attribute__((visibility("default")))
#define TM_MUST_USE __attribute__((warn_unused_result))
#else
#define TM_API
#define TM_MUST_USE
#endif

struct event_base;
struct tm_config;
struct tm_proxy;

/* ---- configuration ---------------------------------------------------- */

/* Read the INI file at path, then apply the TIDEMARK_<SECTION>_<KEY>
 * overrides found in envp (NULL-terminated "NAME=value" strings, such as
 * environ; NULL: none). Returns a configuration to give to tm_proxy_new or
 * tm_proxy_reload, or to free with tm_config_free; NULL when the file has
 * a problem, with every problem in err as a line "FILE:LINE: message"
 * (lines separated by '\n', cut at errlen). */
TM_API struct tm_config *tm_config_load(const char *path, char *const *envp,
                                        char *err, size_t errlen) TM_MUST_USE;

/* As tm_config_load, and also what starting would ask of the host (for
 * --check): an lmdb file ([store] or [locks] path) that cannot be
 * opened, its directory neither writable nor creatable, is a problem
 * (nothing is created); an upstream host name that does not resolve is
 * a warning (tm_config_warnings). */
TM_API struct tm_config *tm_config_check(const char *path, char *const *envp,
                                         char *err, size_t errlen) TM_MUST_USE;

/* As tm_config_load, from the INI text in text (NUL-terminated); name
 * stands for the file name in messages. */
TM_API struct tm_config *tm_config_from_string(const char *name,
                                               const char *text,
                                               char *const *envp, char *err,
                                               size_t errlen) TM_MUST_USE;

/* The value of [section] key in cfg as a file would write it ("2000",
 * "yes", "info"; "(secret)" for a password), into buf. false when there is
 * no such key in a section without a name ([proxy], [admin], [store],
 * [locks], [tokens]). */
TM_API bool tm_config_get(const struct tm_config *cfg, const char *section,
                          const char *key, char *buf, size_t len);

/* The configuration in effect, as an INI file would give it: every
 * section and key after defaults and environment overrides, secrets
 * written "(secret)". A string to free() (NULL when out of memory). */
TM_API char *tm_config_text(const struct tm_config *cfg) TM_MUST_USE;

/* What loads but does nothing (no [route], no [upstream]), as lines
 * "FILE: warning: message" separated by '\n'; NULL when there is none.
 * Owned by cfg. */
TM_API const char *tm_config_warnings(const struct tm_config *cfg);

/* What the loader chose for keys left to their defaults ("FILE: note:
 * max_connections = 480, ..." lines, for an info log); NULL: nothing. */
TM_API const char *tm_config_notes(const struct tm_config *cfg);

/* What only the start will find out (the AWS credential chain: "FILE:
 * note: [upstream s3]: sign: credentials from the chain at start"), for
 * --check to say and the start to log; NULL: nothing. */
TM_API const char *tm_config_check_notes(const struct tm_config *cfg);

/* Release a configuration no proxy has taken. NULL is fine. */
TM_API void tm_config_free(struct tm_config *cfg);

/* The library's version, "1.2.3". */
TM_API const char *tm_version(void);

/* What the library was built with, one "name version" a line: the
 * version, compiler, CFLAGS, sanitizers and each library it links.
 * Writes up to size bytes (NUL-terminated) like snprintf and returns
 * the length of the whole text. */
TM_API size_t tm_build_info(char *buf, size_t size);

/* ---- logging ----------------------------------------------------------- */

enum tm_log_level {
    TM_LOG_ERROR = 0,
    TM_LOG_WARN,
    TM_LOG_INFO,
    TM_LOG_DEBUG,
};

/* tm_options.log_level: follow the configuration's [proxy] log_level, at
 * start and at each reload. */
#define TM_LOG_FROM_CONFIG (-1)

/* "error", "warn", "info", "debug" to a level; -1 when unknown. */
TM_API int tm_log_level_parse(const char *name);
/* The name of a level ("info"). */
TM_API const char *tm_log_level_name(enum tm_log_level level);

/* Ready-made sinks for tm_options.log (arg unused): one line per message
 * on stderr with a UTC timestamp, as key=value text
 * ("ts=2025-01-31T12:00:00.000Z level=info msg=\"the message\"", its
 * quotes and backslashes escaped; an access line, msg "event=...", is
 * its words as they are) or as a JSON object (ts, level, msg, and each
 * key=value word of msg as a field of its own; an access line has its
 * fields and no msg). A line is built whole and handed to stderr in one
 * fwrite, under stderr's lock: one write(2) when stderr is unbuffered,
 * so a reader never gets it in pieces; or, while tm_log_stderr_buffer
 * runs, to its buffer. */
TM_API void tm_log_stderr_text(void *arg, enum tm_log_level level,
                               const char *msg);
TM_API void tm_log_stderr_json(void *arg, enum tm_log_level level,
                               const char *msg);

/* The smallest buffer tm_log_stderr_buffer takes: room for the longest
 * line tidemark writes. */
#define TM_LOG_BUFFER_MIN 65536

/* From now on the stderr sinks hand their lines to a buffer of `bytes`
 * and return; a thread of the library's writes them to stderr, many
 * lines a write (whole lines, at most PIPE_BUF bytes a write unless
 * stderr is a file or the line alone is longer). A stderr that blocks (a
 * full pipe to a log reader that stalled) then stops that thread alone,
 * not the caller's loop. A line that finds no room is dropped and
 * counted, and once stderr takes lines again the thread writes, in the
 * last line's form, a warning that says how many ("log: lines dropped:
 * ... dropped=N log_buffer=BYTES"). A line of any level waits at most
 * about 10 ms for others to go with it. Returns 0;
 * EINVAL when bytes < TM_LOG_BUFFER_MIN, EBUSY when a buffer runs (or
 * one's thread never ended), ENOMEM, or pthread_create's error. The
 * thread blocks every signal. */
TM_API int tm_log_stderr_buffer(size_t bytes);
/* Write what the buffer holds and end its thread, waiting up to
 * timeout_ms for stderr to take it; the sinks write each line themselves
 * again. Returns false when stderr did not take it all in time (what is
 * left is lost at exit, and no buffer can start again); true also when
 * none ran. */
TM_API bool tm_log_stderr_unbuffer(int timeout_ms);

/* ---- the proxy ---------------------------------------------------------- */

struct tm_options {
    /* Where this proxy's log lines go (one message, no newline); NULL:
     * nothing is logged. Called on the loop's thread. */
    void (*log)(void *arg, enum tm_log_level level, const char *msg);
    void *log_arg;
    /* The most verbose level formatted (TM_LOG_ERROR..TM_LOG_DEBUG), or
     * TM_LOG_FROM_CONFIG. Lines above it cost nothing. */
    int log_level;
};

/* Start a proxy for cfg on base: open the store, resolve the upstreams,
 * listen. Takes cfg, also on failure. opts may be NULL (no logging); it
 * is copied. NULL on failure, with the reason in err. Nothing runs until
 * the caller runs base. */
TM_API struct tm_proxy *tm_proxy_new(struct event_base *base,
                                     struct tm_config *cfg,
                                     const struct tm_options *opts, char *err,
                                     size_t errlen) TM_MUST_USE;

/* The TCP port the proxy listens on, as bound (listen = 127.0.0.1:0 lets
 * the system pick one); 0 when it does not listen any more (draining) or
 * listens on a Unix socket (listen = unix:PATH). */
TM_API int tm_proxy_port(const struct tm_proxy *px);

/* Apply a new configuration, whole or not at all; takes cfg. Routes,
 * upstreams, limits and modes apply to new requests; requests under way
 * finish under the configuration they started with. Keys that need a
 * restart (listen addresses, the store, the lock service, the token key,
 * cache size) keep their running values, each logged. false when refused
 * (logged, with why): the running configuration stays. cfg NULL (the
 * file could not be loaded: tm_config_load's NULL) is a refused reload
 * too. /metrics counts each attempt (tidemark_config_last_reload_*). */
TM_API bool tm_proxy_reload(struct tm_proxy *px, struct tm_config *cfg);

/* The most verbose level the proxy logs now (PUT /v1/log/level changes
 * it until a reload); -1 when it logs nothing. */
TM_API int tm_proxy_log_level(const struct tm_proxy *px);

/* Begin a graceful stop: stop accepting, let requests under way finish,
 * closing what is left after timeout_ms (negative: the configuration's
 * [proxy] drain_timeout_ms): a request not forwarded yet is answered 503
 * first, one forwarded is closed without an answer. done(arg) is called
 * once, from the loop, when no connection is left; then call
 * tm_proxy_free. done may be NULL. A call while draining (the control
 * port's PUT /v1/drain started it, or a second signal) keeps the first
 * drain and its timeout; its done is called too, when that drain ends. */
TM_API void tm_proxy_drain(struct tm_proxy *px, int timeout_ms,
                           void (*done)(void *arg), void *arg);

/* done(arg) is called once when a drain ends, whoever started it: the
 * embedding program learns of a drain started on the control port (PUT
 * /v1/drain). NULL: no one is told. */
TM_API void tm_proxy_on_drained(struct tm_proxy *px, void (*done)(void *arg),
                                void *arg);

/* Close every connection and release the proxy and its configurations.
 * Callbacks of store operations still pending run first. When upstream
 * names were looked up, it runs one non-blocking pass of the loop (the
 * resolver answers a cancelled lookup there). Call from the
 * loop's thread but not from within done or a log sink: for example once
 * done has stopped the loop. NULL is fine. */
TM_API void tm_proxy_free(struct tm_proxy *px);

/* ---- process-wide, optional ---------------------------------------------- */

/* Give libevent's smallest allocations (among them a slot per descriptor
 * number, which it keeps until its loop ends) a memory region of their
 * own, so that the memory a burst of connections took can go back to the
 * system once they have gone: otherwise those slots pin the heap pages
 * around them. Process-wide (event_set_mem_functions): call it once,
 * before any other libevent call, or not at all. false when the region
 * cannot be reserved; nothing changed then. */
TM_API bool tm_event_memory_install(void);

#ifdef __cplusplus
}
#endif

#endif
