/* proxy_int.h: the whole proxy, for the process core: proxy.c and the
 * views it gives the wings (proxy_view.c). The data path reads only its
 * part, path/view.h; the control port only what adm/proxy_view.h
 * gives it. */
#ifndef TM_PROXY_INT_H
#define TM_PROXY_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../conf/cfg.h"
#include "path/up.h"
#include "fdlimit.h"
#include "listen_unix.h"
#include "path/view.h"

struct event;
struct evconnlistener;
struct up_pool;
struct adm;

/* A done to call when the drain ends. */
struct drain_waiter {
    void (*done)(void *arg);
    void *arg;
    struct drain_waiter *next;
};

struct tm_proxy {
    struct path_view path;   /* what the data path sees: its parts, the
                              * current generation, its connections */
    bool log_from_cfg;       /* the level follows [proxy] log_level */
    struct tm_config *first; /* the configuration it started with: kept to
                              * the end, restart-only parts point into it */
    struct evconnlistener *listener;
    struct listen_rest rest;      /* its rests when accept() finds no fd */
    struct listen_unix unix_sock; /* listen = unix:PATH: its file */
    struct watches *watches;      /* [watch] sections: eager fencing */
    struct lock_service *locks;   /* the lock service, with a control port
                                   * or a [lease]; NULL otherwise */
    int carriers_stop;            /* draining: 0 not asked, 1 giving back
                                   * their leases, 2 done */
    struct up_pool **pools;       /* path.gen->pools */
    struct up_names names;        /* how pools look their hosts up */
    struct adm *adm;
    struct event *trimmer; /* gives memory back after a burst has gone */
    struct event *drain_timer;
    struct drain_waiter *drain_waiters; /* each tm_proxy_drain's done */
    void (*on_drained)(void *arg);      /* tm_proxy_on_drained's */
    void *on_drained_arg;
};

#endif
