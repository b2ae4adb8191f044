/* main.c: the tidemark daemon: command line, signals, logging to stderr,
 * over the library in libtidemark.a. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "../conf/cfg.h"
#include "log.h"
#include "tidemark.h"

#define DRAIN_MS 10000

extern char **environ;

static void
log_stderr(void *arg, enum log_level level, const char *msg)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    struct timespec ts;
    struct tm tm;
    char when[32];

    (void)arg;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(stderr, "%s.%03ldZ %s %s\n", when, ts.tv_nsec / 1000000,
            names[level], msg);
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
    struct event_base *base;
    struct tm_proxy *px;
    bool stopping;
};

static void
drained(void *arg)
{
    struct daemon_state *d = arg;

    event_base_loopexit(d->base, NULL);
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct daemon_state *d = arg;

    (void)what;
    if (sig == SIGHUP) {
        log_warn("SIGHUP: reload is not supported yet; restart to apply "
                 "a new configuration");
        return;
    }
    if (d->stopping) {
        log_warn("second stop signal: exiting now");
        event_base_loopexit(d->base, NULL);
        return;
    }
    d->stopping = true;
    log_info("signal %d: draining (up to %d ms)", (int)sig, DRAIN_MS);
    tm_proxy_shutdown(d->px, DRAIN_MS, drained, d);
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
    log_set_sink(log_stderr, NULL, level < 0 ? LOG_INFO : level);
    signal(SIGPIPE, SIG_IGN);

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
