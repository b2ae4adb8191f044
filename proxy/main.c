/* main.c: the tidemark daemon: command line, signals, logging to stderr
 * and systemd's readiness protocol (sd_notify), over libtidemark's public
 * interface (tidemark.h) alone. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "tidemark.h"

extern char **environ;

struct daemon_state {
    const char *file;
    struct event_base *base;
    struct tm_proxy *px;
    bool json;            /* [proxy] log_format = json */
    int level;            /* [proxy] log_level, for the daemon's own lines */
    int drain_ms;         /* [proxy] drain_timeout_ms, for the message */
    long long log_buffer; /* [proxy] log_buffer: bytes; 0: none */
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

/* Descriptors 0, 1 and 2 open, on /dev/null where the process was
 * started without them (`2>&-`, a supervisor that closes them): else the
 * first files and sockets opened would take their numbers, and the log,
 * written to descriptor 2, would go into the marks file, its journal or
 * a client's connection. False when one cannot be opened. */
static bool
std_fds_open(void)
{
    for (int fd = 0; fd <= 2; fd++) {
        int got;

        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) {
            continue;
        }
        got = open("/dev/null", O_RDWR);
        if (got != fd) {
            /* The lowest free number is fd: anything else is a failure
             * (no /dev/null, no descriptor) with nowhere to say so. */
            return false;
        }
    }
    return true;
}

/* How long the exit waits for stderr to take the lines buffered. */
#define LOG_EXIT_MS 5000

/* [proxy] log_buffer: lines go through a buffer a thread writes, so a
 * stderr that blocks does not stop the proxy. Without it (0, or when it
 * cannot start) each line is written by the thread that logs it. */
static void
start_log_buffer(const struct daemon_state *d)
{
    int rc;

    if (d->log_buffer == 0) {
        return;
    }
    rc = tm_log_stderr_buffer((size_t)d->log_buffer);
    if (rc != 0) {
        say(d, TM_LOG_WARN,
            "log_buffer: cannot start (%s): each line is written at once",
            strerror(rc));
    }
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
    if (tm_config_get(cfg, "proxy", "log_buffer", v, sizeof(v))) {
        d->log_buffer = atoll(v);
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
            "       tidemark -c FILE --health [--wait SECONDS]\n"
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
            "      --health       ask the control port of FILE's [admin]\n"
            "                     listen for /readyz: exit 0 when ready,\n"
            "                     1 when not or when nothing answers\n"
            "      --wait S       with --health: ask again until ready, for\n"
            "                     up to S seconds (0-3600)\n"
            "  -V, --version      print the version and exit\n"
            "  -v, --verbose      with --version: also the compiler, the\n"
            "                     build flags and each library's version\n"
            "  -h, --help         this text\n");
}

/* The seconds of --wait: 0 to 3600; -2 for anything else. */
static int
seconds_arg(const char *arg)
{
    char *end;
    long v = strtol(arg, &end, 10);

    return end != arg && *end == '\0' && v >= 0 && v <= 3600 ? (int)v : -2;
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

/* --health: how long the whole probe may take; the image's HEALTHCHECK
 * gives it 3 s. */
#define HEALTH_TIMEOUT_MS 2000

/* The address to probe for [admin] listen ("host:port", "[v6]:port"),
 * into host and port: a wildcard address is asked on loopback. false
 * when the value is no host:port that fits. */
static bool
health_target(const char *listen, char *host, size_t hostlen, char *port,
              size_t portlen)
{
    const char *colon = strrchr(listen, ':');
    size_t n;

    if (colon == NULL || colon[1] == '\0' || strlen(colon + 1) >= portlen) {
        return false;
    }
    n = (size_t)(colon - listen);
    if (n >= 2 && listen[0] == '[' && listen[n - 1] == ']') {
        listen++;
        n -= 2;
    }
    if (n >= hostlen) {
        return false;
    }
    memcpy(host, listen, n);
    host[n] = '\0';
    memcpy(port, colon + 1, strlen(colon + 1) + 1);
    if (n == 0 || strcmp(host, "0.0.0.0") == 0) {
        snprintf(host, hostlen, "127.0.0.1");
    } else if (strcmp(host, "::") == 0) {
        snprintf(host, hostlen, "::1");
    }
    return true;
}

static long long
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for events on fd until the deadline (CLOCK_MONOTONIC ms); false
 * when it passes first. */
static bool
wait_fd(int fd, short events, long long deadline)
{
    struct pollfd p = {.fd = fd, .events = events};
    int rc;

    do {
        long long left = deadline - now_ms();

        if (left <= 0) {
            return false;
        }
        rc = poll(&p, 1, (int)left);
    } while (rc < 0 && errno == EINTR);
    return rc > 0;
}

/* A connection to ai made before the deadline; -1 with the errno in
 * *err. */
static int
health_try(const struct addrinfo *ai, long long deadline, int *err)
{
    int fd =
        socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK, ai->ai_protocol);
    socklen_t len = sizeof(*err);

    *err = 0;
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
        *err = errno;
    } else if (!wait_fd(fd, POLLOUT, deadline)) {
        *err = ETIMEDOUT;
    } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, err, &len) != 0) {
        *err = errno;
    }
    if (*err != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A connection to host:port, each of its addresses in turn, before the
 * deadline; -1 with the reason in *why. */
static int
health_connect(const char *host, const char *port, long long deadline,
               const char **why)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int fd = -1, err = 0;
    int rc = getaddrinfo(host, port, &hints, &res);

    if (rc != 0) {
        *why = gai_strerror(rc);
        return -1;
    }
    for (const struct addrinfo *ai = res; ai != NULL && fd < 0;
         ai = ai->ai_next) {
        fd = health_try(ai, deadline, &err);
    }
    freeaddrinfo(res);
    if (fd < 0) {
        *why = strerror(err);
    }
    return fd;
}

/* Send the n bytes of req on fd before the deadline. */
static bool
health_send(int fd, const char *req, size_t n, long long deadline)
{
    while (n > 0) {
        ssize_t w = send(fd, req, n, MSG_NOSIGNAL);

        if (w > 0) {
            req += w;
            n -= (size_t)w;
        } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
            return false;
        } else if (!wait_fd(fd, POLLOUT, deadline)) {
            return false;
        }
    }
    return true;
}

/* The status code of the answer's first line ("HTTP/1.x NNN"), read on
 * fd before the deadline: 12 bytes at most; 0 when there is none. */
static int
health_status(int fd, long long deadline)
{
    char line[13] = {0};
    size_t got = 0;

    while (got < 12) {
        ssize_t r = recv(fd, line + got, 12 - got, 0);

        if (r > 0) {
            got += (size_t)r;
        } else if (r == 0 || (errno != EAGAIN && errno != EINTR) ||
                   !wait_fd(fd, POLLIN, deadline)) {
            return 0;
        }
    }
    if (memcmp(line, "HTTP/1.", 7) != 0 || line[8] != ' ' ||
        strspn(line + 9, "0123456789") != 3) {
        return 0;
    }
    return atoi(line + 9);
}

/* GET /readyz from host:port; the answer's status, or 0 with the reason
 * in *why. */
static int
health_ask(const char *host, const char *port, const char **why)
{
    long long deadline = now_ms() + HEALTH_TIMEOUT_MS;
    bool v6 = strchr(host, ':') != NULL;
    char req[512];
    int n = snprintf(req, sizeof(req),
                     "GET /readyz HTTP/1.0\r\nHost: %s%s%s:%s\r\n"
                     "User-Agent: tidemark-health\r\n\r\n",
                     v6 ? "[" : "", host, v6 ? "]" : "", port);
    int fd, status = 0;

    if (n < 0 || (size_t)n >= sizeof(req)) {
        *why = "address too long";
        return 0;
    }
    fd = health_connect(host, port, deadline, why);
    if (fd < 0) {
        return 0;
    }
    *why = "no HTTP answer in time";
    if (health_send(fd, req, (size_t)n, deadline)) {
        status = health_status(fd, deadline);
    }
    close(fd);
    return status;
}

/* health_ask until it answers 200 or wait_s seconds have passed, five
 * times a second; the last answer. */
static int
health_poll(const char *host, const char *port, int wait_s, const char **why)
{
    long long until = now_ms() + wait_s * 1000LL;
    int status = health_ask(host, port, why);

    while (status != 200 && now_ms() < until) {
        struct timespec pause = {.tv_nsec = 200 * 1000000L};

        nanosleep(&pause, NULL);
        status = health_ask(host, port, why);
    }
    return status;
}

/* --health [--wait S]: ask the control port cfg listens on for /readyz
 * (for up to S seconds); 0 when it answers 200, else 1, with one line
 * saying what it found. Frees cfg. */
static int
health(struct tm_config *cfg, int wait_s)
{
    char listen[300] = "", host[256], port[16];
    const char *why = "[admin] listen is empty";
    int status = 0;

    if (!tm_config_get(cfg, "admin", "listen", listen, sizeof(listen)) ||
        listen[0] == '\0') {
        listen[0] = '\0';
    } else if (!health_target(listen, host, sizeof(host), port, sizeof(port))) {
        why = "[admin] listen is not host:port";
    } else {
        status = health_poll(host, port, wait_s, &why);
    }
    tm_config_free(cfg);
    if (status == 0) {
        printf("tidemark: not ready: control port '%s': %s\n", listen, why);
        return 1;
    }
    printf("tidemark: /readyz on %s: %d\n", listen, status);
    return status == 200 ? 0 : 1;
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
        {"health", no_argument, NULL, 'H'},
        {"wait", required_argument, NULL, 'W'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *file = NULL;
    bool check = false, print = false, strict = false, probe = false;
    bool version = false, verbose = false;
    int wait_s = -1;
    const char *warnings;
    struct tm_config *cfg;
    struct daemon_state d = {0};
    struct tm_options opts = {daemon_log, &d, TM_LOG_FROM_CONFIG};
    const int signos[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2};
    struct event *sigs[sizeof(signos) / sizeof(signos[0])];
    char err[512];
    int opt;

    if (!std_fds_open()) {
        return 1;
    }
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
        case 'H':
            probe = true;
            break;
        case 'W':
            wait_s = seconds_arg(optarg);
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
    if (file == NULL || optind != argc || version || verbose ||
        (probe && (check || strict)) || (wait_s != -1 && !probe) ||
        wait_s == -2) {
        usage(stderr);
        return 2;
    }
    cfg = check ? tm_config_check(file, environ, errbuf, sizeof(errbuf))
                : tm_config_load(file, environ, errbuf, sizeof(errbuf));
    if (cfg == NULL) {
        fprintf(stderr, "%s\n", errbuf);
        return 1;
    }
    if (probe) {
        return health(cfg, wait_s < 0 ? 0 : wait_s);
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
    start_log_buffer(&d);
    d.px = tm_proxy_new(d.base, cfg, &opts, err, sizeof(err));
    if (d.px == NULL) {
        say(&d, TM_LOG_ERROR, "cannot start: %s", err);
        event_base_free(d.base);
        tm_log_stderr_unbuffer(LOG_EXIT_MS);
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
    tm_log_stderr_unbuffer(LOG_EXIT_MS);
    return 0;
}
