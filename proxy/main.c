/* main.c: the tidemark daemon: command line, signals, logging to stderr
 * and systemd's readiness protocol (sd_notify), over libtidemark's public
 * interface (tidemark.h) alone. */
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "tidemark.h"

extern char **environ;

struct daemon_state {
    const char *file;
    struct event_base *base;
    struct tm_proxy *px;
    bool json;    /* [proxy] log_format = json */
    int level;    /* [proxy] log_level, for the daemon's own lines */
    int drain_ms; /* [proxy] drain_timeout_ms, for the message */
    bool stopping;
};

/* Problems found loading a file: one FILE:LINE: message per line. */
static char errbuf[65536];

/* The proxy's sink: text or JSON lines on stderr, as configured. */
static void
daemon_log(void *arg, enum tm_log_level level, const char *msg)
{
    const struct daemon_state *d = arg;

    if (d->json) {
        tm_log_stderr_json(NULL, level, msg);
    } else {
        tm_log_stderr_text(NULL, level, msg);
    }
}

static void say(const struct daemon_state *d, enum tm_log_level level,
                const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A line of the daemon's own, through the same sink. */
static void
say(const struct daemon_state *d, enum tm_log_level level, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    /* The proxy's level: the control port may have changed it. */
    if ((int)level > (d->px != NULL ? tm_proxy_log_level(d->px) : d->level)) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    daemon_log((void *)d, level, msg);
}

/* Each line of text (NULL: none) as a line of the log. */
static void
say_lines(const struct daemon_state *d, enum tm_log_level level,
          const char *text)
{
    for (const char *w = text; w != NULL && *w != '\0';) {
        size_t n = strcspn(w, "\n");

        say(d, level, "%.*s", (int)n, w);
        w += n + (w[n] == '\n');
    }
}

/* The [proxy] keys the daemon itself reads from cfg. */
static void
read_settings(struct daemon_state *d, const struct tm_config *cfg)
{
    char v[64];

    d->json = tm_config_get(cfg, "proxy", "log_format", v, sizeof(v)) &&
              strcmp(v, "json") == 0;
    d->level = tm_config_get(cfg, "proxy", "log_level", v, sizeof(v))
                   ? tm_log_level_parse(v)
                   : TM_LOG_INFO;
    if (d->level < 0) {
        d->level = TM_LOG_INFO;
    }
    if (tm_config_get(cfg, "proxy", "drain_timeout_ms", v, sizeof(v))) {
        d->drain_ms = atoi(v);
    }
}

/* Each client connection can hold an upstream connection too: ask for
 * room for both, up to the hard limit. Says so when it cannot (a
 * max_connections left to its default was sized to fit: see
 * tm_config_notes). */
static void
raise_nofile(const struct daemon_state *d, const struct tm_config *cfg)
{
    struct rlimit rl;
    char v[32];
    int max_connections;
    rlim_t want;

    if (!tm_config_get(cfg, "proxy", "max_connections", v, sizeof(v))) {
        return;
    }
    max_connections = atoi(v);
    want = (rlim_t)max_connections * 2 + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want) {
        return;
    }
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want
                      ? want
                      : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < want) {
        say(d, TM_LOG_WARN,
            "open files limited to %llu; max_connections = %d may need %llu",
            (unsigned long long)rl.rlim_cur, max_connections,
            (unsigned long long)want);
    }
}

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: tidemark -c FILE [--check [--print] [--strict]]\n"
            "       tidemark --version [--verbose]\n"
            "  -c, --config FILE  the configuration (INI)\n"
            "      --check        validate FILE and exit: 0 when fine,\n"
            "                     1 with one FILE:LINE: message per "
            "problem\n"
            "  -T, --print        with --check (implied): also print the\n"
            "                     configuration in effect, after defaults and\n"
            "                     TIDEMARK_* overrides, secrets redacted\n"
            "      --strict       with --check: warnings (no [route], no\n"
            "                     [upstream], an upstream host that does\n"
            "                     not resolve) fail too\n"
            "  -V, --version      print the version and exit\n"
            "  -v, --verbose      with --version: also the compiler, the\n"
            "                     build flags and each library's version\n"
            "  -h, --help         this text\n");
}

/* --version: one line; with --verbose, the build and its libraries. */
static int
print_version(bool verbose)
{
    char info[2048];

    if (!verbose) {
        printf("tidemark %s\n", tm_version());
        return 0;
    }
    (void)tm_build_info(info, sizeof(info));
    fputs(info, stdout);
    return 0;
}

/* Tell systemd (Type=notify) where the daemon is; nothing without
 * NOTIFY_SOCKET. */
static void
notify(const char *state)
{
    (void)sd_notify(0, state);
}

/* The reload's start as systemd 253 and later want it: with the
 * monotonic time, so that a reload is told from the next one. */
static void
notify_reloading(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    (void)sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu",
                     (unsigned long long)ts.tv_sec * 1000000ULL +
                         (unsigned long long)ts.tv_nsec / 1000ULL);
}

/* --check: say what is wrong or fine; print the configuration when
 * asked. Warnings fail under --strict. Frees cfg. */
static int
check_done(const char *file, struct tm_config *cfg, bool print, bool strict)
{
    const char *warnings = tm_config_warnings(cfg);
    const char *notes = tm_config_check_notes(cfg);
    int rc = strict && warnings != NULL ? 1 : 0;

    if (warnings != NULL) {
        fprintf(stderr, "%s\n", warnings);
    }
    if (notes != NULL) {
        fprintf(stderr, "%s\n", notes);
    }
    if (print) {
        char *text = tm_config_text(cfg);

        if (text == NULL) {
            fprintf(stderr, "tidemark: out of memory\n");
            tm_config_free(cfg);
            return 1;
        }
        printf("# %s, in effect: defaults and TIDEMARK_* overrides "
               "applied, secrets redacted\n%s",
               file, text);
        free(text);
    }
    fprintf(stderr, "%s: %s\n", file, rc == 0 ? "ok" : "warnings (--strict)");
    tm_config_free(cfg);
    return rc;
}

static void
drained(void *arg)
{
    struct daemon_state *d = arg;

    event_base_loopexit(d->base, NULL);
}

/* SIGHUP: read the file again; apply it whole, or nothing. */
static void
reload(struct daemon_state *d)
{
    struct tm_config *cfg =
        tm_config_load(d->file, environ, errbuf, sizeof(errbuf));
    struct daemon_state old = *d;
    size_t n = 1;

    notify_reloading();
    if (cfg == NULL) {
        for (const char *p = errbuf; (p = strchr(p, '\n')) != NULL; p++) {
            n++;
        }
        say(d, TM_LOG_ERROR,
            "reload refused, the old configuration stays: %zu problem%s in "
            "%s",
            n, n == 1 ? "" : "s", d->file);
        for (char *line = strtok(errbuf, "\n"); line != NULL;
             line = strtok(NULL, "\n")) {
            say(d, TM_LOG_ERROR, "reload: %s", line);
        }
        /* Counted as a refused reload; nothing else changes. */
        (void)tm_proxy_reload(d->px, NULL);
        notify("READY=1\nSTATUS=reload refused: the old configuration "
               "stays");
        return;
    }
    /* The proxy's lines about this reload come in the new format; a
     * refused configuration gives the old settings back. */
    read_settings(d, cfg);
    if (!tm_proxy_reload(d->px, cfg)) {
        *d = old;
        notify("READY=1\nSTATUS=reload refused: the old configuration "
               "stays");
        return;
    }
    notify("READY=1\nSTATUS=serving; configuration reloaded");
}

/* SIGUSR1 asks for the log file to be reopened (after logrotate): the
 * daemon writes to stderr, which whoever started it owns. SIGUSR2 has
 * no meaning. Neither stops the process, as their default would. */
static void
other_signal(const struct daemon_state *d, evutil_socket_t sig)
{
    if (sig == SIGUSR1) {
        say(d, TM_LOG_INFO,
            "SIGUSR1: nothing to reopen (the log goes to stderr)");
        return;
    }
    say(d, TM_LOG_INFO, "SIGUSR2: ignored");
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct daemon_state *d = arg;

    (void)what;
    if (sig == SIGHUP) {
        reload(d);
        return;
    }
    if (sig == SIGUSR1 || sig == SIGUSR2) {
        other_signal(d, sig);
        return;
    }
    if (d->stopping) {
        say(d, TM_LOG_WARN, "second stop signal: exiting now");
        event_base_loopexit(d->base, NULL);
        return;
    }
    d->stopping = true;
    notify("STOPPING=1\nSTATUS=draining");
    say(d, TM_LOG_INFO, "signal %d: draining (up to %d ms)", (int)sig,
        d->drain_ms);
    tm_proxy_drain(d->px, -1, NULL, NULL); /* drained() ends it */
}

/* A streamed body passes through 64 KiB buffers taken and freed in
 * turn: with glibc's default (a free top of the heap over 128 KiB goes
 * back at once) nearly every one costs a brk to give it back and page
 * faults to take it again (17 brk a MiB). Up to 1 MiB of free top is
 * kept; what is over goes back as before. Blocks under 1 MiB stay in
 * the heap, as glibc's own threshold would put them once it rose. */
static void
keep_heap_top(void)
{
    mallopt(M_MMAP_THRESHOLD, 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
}

/* The event loop. Its epoll changes wait for the loop's next wait, so
 * that two changes to one socket in a pass cost one epoll_ctl: a new
 * upstream connection's end of dial (its write wait off) and start of
 * reading (read on) become one change, not a delete and an add. libevent
 * cannot follow a dup()ed descriptor this way; the loop watches none. */
static struct event_base *
new_base(void)
{
    struct event_config *ec = event_config_new();
    struct event_base *base;

    if (ec == NULL) {
        return NULL;
    }
    event_config_set_flag(ec, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    base = event_base_new_with_config(ec);
    event_config_free(ec);
    return base;
}

int
main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},
        {"check", no_argument, NULL, 'k'},
        {"print", no_argument, NULL, 'T'},
        {"strict", no_argument, NULL, 's'},
        {"version", no_argument, NULL, 'V'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *file = NULL;
    bool check = false, print = false, strict = false;
    bool version = false, verbose = false;
    const char *warnings;
    struct tm_config *cfg;
    struct daemon_state d = {0};
    struct tm_options opts = {daemon_log, &d, TM_LOG_FROM_CONFIG};
    const int signos[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2};
    struct event *sigs[sizeof(signos) / sizeof(signos[0])];
    char err[512];
    int opt;

    while ((opt = getopt_long(argc, argv, "c:hTVv", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            file = optarg;
            break;
        case 'k':
            check = true;
            break;
        case 'T':
            check = print = true;
            break;
        case 's':
            strict = true;
            break;
        case 'V':
            version = true;
            break;
        case 'v':
            verbose = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (version && optind == argc) {
        return print_version(verbose);
    }
    if (file == NULL || optind != argc || version || verbose) {
        usage(stderr);
        return 2;
    }
    cfg = check ? tm_config_check(file, environ, errbuf, sizeof(errbuf))
                : tm_config_load(file, environ, errbuf, sizeof(errbuf));
    if (cfg == NULL) {
        fprintf(stderr, "%s\n", errbuf);
        return 1;
    }
    warnings = tm_config_warnings(cfg);
    if (check) {
        return check_done(file, cfg, print, strict);
    }
    if (strict) {
        usage(stderr);
        tm_config_free(cfg);
        return 2;
    }
    read_settings(&d, cfg);
    say_lines(&d, TM_LOG_WARN, warnings);
    say_lines(&d, TM_LOG_INFO, tm_config_notes(cfg));
    say_lines(&d, TM_LOG_INFO, tm_config_check_notes(cfg));
    raise_nofile(&d, cfg);
    keep_heap_top();
    /* Memory a burst of connections took can then go back. */
    if (!tm_event_memory_install()) {
        fprintf(stderr, "tidemark: libevent's small allocations stay in "
                        "the heap (no address space for their region)\n");
    }
    d.file = file;
    d.base = new_base();
    if (d.base == NULL) {
        fprintf(stderr, "tidemark: cannot create the event loop\n");
        tm_config_free(cfg);
        return 1;
    }
    d.px = tm_proxy_new(d.base, cfg, &opts, err, sizeof(err));
    if (d.px == NULL) {
        say(&d, TM_LOG_ERROR, "cannot start: %s", err);
        event_base_free(d.base);
        return 1;
    }
    /* Whoever drains (a signal, PUT /v1/drain), the daemon exits after. */
    tm_proxy_on_drained(d.px, drained, &d);
    for (size_t i = 0; i < sizeof(signos) / sizeof(signos[0]); i++) {
        sigs[i] = evsignal_new(d.base, signos[i], on_signal, &d);
        evsignal_add(sigs[i], NULL);
    }
    notify("READY=1\nSTATUS=serving");
    event_base_dispatch(d.base);
    for (size_t i = 0; i < sizeof(signos) / sizeof(signos[0]); i++) {
        event_free(sigs[i]);
    }
    d.level = tm_proxy_log_level(d.px); /* for the lines after it */
    tm_proxy_free(d.px);
    d.px = NULL;
    event_base_free(d.base);
    say(&d, TM_LOG_INFO, "stopped");
    return 0;
}
