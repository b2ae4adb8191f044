/* proxy_int.h: the whole proxy, for proxy.c, its generations (gen.c) and
 * the data path that runs inside it (the client connection and its
 * stages). The control port reads only what adm/proxy_view.h gives it. */
#ifndef TM_PROXY_INT_H
#define TM_PROXY_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../conf/cfg.h"
#include "../policies/http_parse.h"
#include "adm/proxy_view.h"
#include "log.h"
#include "recent.h"

struct event_base;
struct event;
struct evconnlistener;
struct fence;
struct order;
struct uploads;
struct up_pool;
struct adm;
struct client;
struct cio;
struct metrics;

/* One configuration and the upstream pools built from it. A request keeps
 * the generation it started under alive (refs) until it ends, so a reload
 * never pulls a route or a pool from under it. */
struct gen {
    struct tm_config *cfg;
    struct up_pool **pools; /* one per cfg->upstreams */
    size_t refs;            /* requests under way, +1 while current */
    bool owned;             /* cfg came from tm_proxy_reload */
    struct gen *next;       /* retired, waiting for refs to drop */
};

struct tm_proxy {
    struct event_base *base;
    struct tm_log log; /* this proxy's sink and level: lib_enter(&px->log) */
    bool log_from_cfg; /* the level follows [proxy] log_level */
    struct tm_config *first;     /* the configuration it started with: kept to
                                  * the end, restart-only parts point into it */
    const struct tm_config *cfg; /* gen->cfg: the current configuration */
    struct gen *gen;             /* current */
    struct gen *retired;
    const struct cfg_tokens *tokens; /* restart-only: signing and checks
                                      * must use one key */
    struct http_limits limits;
    struct evconnlistener *listener;
    struct fence *fence;        /* the mark store and its cache */
    struct watches *watches;    /* [watch] sections: eager fencing */
    struct lock_service *locks; /* the lock service, with a control port
                                 * or a [lease]; NULL otherwise */
    struct carriers *carriers;  /* [lease] sections: carried tokens */
    int carriers_stop;          /* draining: 0 not asked, 1 giving back
                                 * their leases, 2 done */
    struct order *order;
    struct uploads *uploads; /* S3 upload ids bound to their resource */
    struct up_pool **pools;  /* gen->pools */
    struct adm *adm;
    struct client *clients;    /* every open client connection */
    struct client *graveyard;  /* closed, freed at the end of the turn */
    struct event *reaper;      /* frees the graveyard */
    struct client *idle_first; /* waiting for a head, oldest first */
    struct client *idle_last;
    struct cio *dirty;            /* client connections with output to write */
    struct event *flusher;        /* writes it at the end of the turn */
    struct http_request *scratch; /* parse space, one loop thread */
    struct http_response *scratch_resp;
    size_t nclients;
    size_t conn_peak; /* most clients at once since memory was given back */
    struct event *trimmer; /* gives memory back after a burst has gone */
    uint64_t next_id;
    struct metrics *metrics; /* every counter /metrics shows */
    struct recent recent;    /* for the control port's page */
    bool draining;
    struct event *drain_timer;
    void (*drain_done)(void *arg);
    void *drain_arg;
};

/* conn.c: a new client connection on fd. */
void client_accept(struct tm_proxy *px, int fd);
/* conn.c: close every client connection that is between requests; when
 * force, close every connection. */
void client_close_idle(struct tm_proxy *px, bool force);

/* conn.c: close the connection that has waited longest for a request
 * head with nothing buffered, to make room for a new one. false when
 * there is none. */
bool client_evict_idle(struct tm_proxy *px);

/* conn.c: write what this turn produced. */
void client_flush_all(struct tm_proxy *px);

/* gen.c: a generation for cfg with its pools (owned: cfg is freed with
 * it). NULL with err on failure. */
struct gen *gen_new(struct event_base *base, struct tm_config *cfg, bool owned,
                    char *err, size_t errlen);
void gen_free(struct gen *g);
/* gen.c: take and drop a reference to the current generation; the last
 * drop of a retired one frees it. */
struct gen *gen_hold(struct tm_proxy *px);
void gen_drop(struct tm_proxy *px, struct gen *g);

/* conn.c: free the connections closed during this turn. */
void client_reap(struct tm_proxy *px);

#endif
