/* fdlimit.c: the process out of file descriptors. */
#include "fdlimit.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#include "log.h"

/* A listener without listen_rest_accepted logs a new rest once it has
 * not rested for this long. */
#define LISTEN_REST_QUIET_MS 10000

bool
fd_exhausted(int err)
{
    return err == EMFILE || err == ENFILE;
}

void
fd_limit_text(int err, char *buf, size_t len)
{
    struct rlimit rl;

    if (err == ENFILE) {
        snprintf(buf, len, "the system's limit, fs.file-max");
    } else if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
               rl.rlim_cur != RLIM_INFINITY) {
        snprintf(buf, len, "the process may open %llu: ulimit -n",
                 (unsigned long long)rl.rlim_cur);
    } else {
        snprintf(buf, len, "the process's limit: ulimit -n");
    }
}

static int64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
on_wake(evutil_socket_t fd, short what, void *arg)
{
    struct listen_rest *r = arg;

    (void)fd;
    (void)what;
    lib_enter(r->log);
    evconnlistener_enable(r->l);
}

bool
listen_rest_init(struct listen_rest *r, struct evconnlistener *l,
                 const char *who)
{
    memset(r, 0, sizeof(*r));
    r->wake = evtimer_new(evconnlistener_get_base(l), on_wake, r);
    if (r->wake == NULL) {
        return false;
    }
    r->log = log_current();
    r->l = l;
    snprintf(r->who, sizeof(r->who), "%s", who);
    return true;
}

void
listen_rest_fini(struct listen_rest *r)
{
    if (r->wake != NULL) {
        event_free(r->wake);
        r->wake = NULL;
    }
}

void
listen_rest_error(struct listen_rest *r)
{
    int err = EVUTIL_SOCKET_ERROR();
    struct timeval tv = {0, LISTEN_REST_MS * 1000};
    int64_t now = now_ms();

    if (!fd_exhausted(err) && err != ENOBUFS && err != ENOMEM) {
        log_error("%s: accept: %s", r->who, evutil_socket_error_to_string(err));
        return;
    }
    if (!r->told || now - r->last >= LISTEN_REST_QUIET_MS) {
        char limit[96] = "no memory";

        if (fd_exhausted(err)) {
            fd_limit_text(err, limit, sizeof(limit));
        }
        log_warn("%s: accept: %s (%s); new connections wait in the "
                 "backlog, tried again every %d ms",
                 r->who, evutil_socket_error_to_string(err), limit,
                 LISTEN_REST_MS);
        r->told = true;
    }
    r->last = now;
    evconnlistener_disable(r->l);
    evtimer_add(r->wake, &tv);
}

void
listen_rest_accepted(struct listen_rest *r)
{
    if (r->told) {
        r->told = false;
        log_info("%s: accepting connections again", r->who);
    }
}
