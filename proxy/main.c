/* main.c: the tidemark daemon: command line, signals, logging to stderr,
 * over the library in libtidemark.a. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "../conf/cfg.h"
#include "evmem.h"
#include "log.h"
#include "problem.h"
#include "tidemark.h"

extern char **environ;

static const char *level_names[] = {"error", "warn", "info", "debug"};

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

static void
log_text(void *arg, enum log_level level, const char *msg)
{
    char when[48];

    (void)arg;
    timestamp(when, sizeof(when));
    fprintf(stderr, "%s %s %s\n", when, level_names[level], msg);
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
static void
log_json(void *arg, enum log_level level, const char *msg)
{
    char when[48];
    const char *p = msg;

    (void)arg;
    timestamp(when, sizeof(when));
    flockfile(stderr);
    fprintf(stderr, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"", when,
            level_names[level]);
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

/* Each client connection can hold an upstream connection too: ask for
 * room for both, up to the hard limit. Says so when it cannot. */
static void
raise_nofile(int max_connections)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)max_connections * 2 + 64;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want) {
        return;
    }
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want
                      ? want
                      : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < want) {
        log_warn("open files limited to %llu; max_connections = %d may "
                 "need %llu",
                 (unsigned long long)rl.rlim_cur, max_connections,
                 (unsigned long long)want);
    }
}

static void
usage(FILE *f)
{
    fprintf(f, "usage: tidemark -c FILE [--check]\n"
               "  -c, --config FILE  the configuration (INI)\n"
               "      --check        validate FILE and exit: 0 when fine,\n"
               "                     1 with one FILE:LINE: message per "
               "problem\n"
               "  -h, --help         this text\n");
}

struct daemon_state {
    const char *file;
    struct event_base *base;
    struct tm_proxy *px;
    int drain_ms;
    bool stopping;
};

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
    struct cfg_errors errs = {0};
    struct tm_config *cfg = calloc(1, sizeof(*cfg));
    int level;

    if (cfg == NULL) {
        log_error("reload refused: out of memory");
        return;
    }
    if (!cfg_load(cfg, d->file, environ, &errs)) {
        log_error("reload refused, the old configuration stays: %zu "
                  "problem%s in %s",
                  errs.n, errs.n == 1 ? "" : "s", d->file);
        for (size_t i = 0; i < errs.n; i++) {
            log_error("reload: %s", errs.msgs[i]);
        }
        cfg_errors_free(&errs);
        cfg_free(cfg);
        free(cfg);
        return;
    }
    cfg_errors_free(&errs);
    level = log_level_parse(cfg->proxy.log_level);
    log_set_sink(cfg->proxy.log_json ? log_json : log_text, NULL,
                 level < 0 ? LOG_INFO : level);
    d->drain_ms = cfg->proxy.drain_timeout_ms;
    tm_proxy_reload(d->px, cfg);
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
    if (d->stopping) {
        log_warn("second stop signal: exiting now");
        event_base_loopexit(d->base, NULL);
        return;
    }
    d->stopping = true;
    log_info("signal %d: draining (up to %d ms)", (int)sig, d->drain_ms);
    tm_proxy_shutdown(d->px, d->drain_ms, drained, d);
}

int
main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},
        {"check", no_argument, NULL, 'k'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *file = NULL;
    bool check = false;
    struct tm_config cfg;
    struct cfg_errors errs = {0};
    struct daemon_state d = {0};
    struct event *sigs[3];
    const int signos[3] = {SIGTERM, SIGINT, SIGHUP};
    char err[512];
    int opt, level;

    while ((opt = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            file = optarg;
            break;
        case 'k':
            check = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (file == NULL || optind != argc) {
        usage(stderr);
        return 2;
    }
    if (!cfg_load(&cfg, file, environ, &errs)) {
        for (size_t i = 0; i < errs.n; i++) {
            fprintf(stderr, "%s\n", errs.msgs[i]);
        }
        cfg_errors_free(&errs);
        cfg_free(&cfg);
        return 1;
    }
    cfg_errors_free(&errs);
    if (check) {
        fprintf(stderr, "%s: ok\n", file);
        cfg_free(&cfg);
        return 0;
    }
    level = log_level_parse(cfg.proxy.log_level);
    log_set_sink(cfg.proxy.log_json ? log_json : log_text, NULL,
                 level < 0 ? LOG_INFO : level);
    if (cfg.env_links != NULL) {
        log_info("env: ignored as Kubernetes service links: %s", cfg.env_links);
    }
    signal(SIGPIPE, SIG_IGN);
    raise_nofile(cfg.proxy.max_connections);
    /* Memory a burst of connections took can then go back (evmem.h). */
    evmem_install();

    d.drain_ms = cfg.proxy.drain_timeout_ms;
    d.file = file;
    d.base = event_base_new();
    if (d.base == NULL) {
        fprintf(stderr, "tidemark: cannot create the event loop\n");
        cfg_free(&cfg);
        return 1;
    }
    d.px = tm_proxy_new(d.base, &cfg, err, sizeof(err));
    if (d.px == NULL) {
        log_error("cannot start: %s", err);
        event_base_free(d.base);
        cfg_free(&cfg);
        return 1;
    }
    for (int i = 0; i < 3; i++) {
        sigs[i] = evsignal_new(d.base, signos[i], on_signal, &d);
        evsignal_add(sigs[i], NULL);
    }
    event_base_dispatch(d.base);
    for (int i = 0; i < 3; i++) {
        event_free(sigs[i]);
    }
    tm_proxy_free(d.px);
    event_base_free(d.base);
    cfg_free(&cfg);
    log_info("stopped");
    return 0;
}
