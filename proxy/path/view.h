/* view.h: the proxy as the data path sees it: the parts its stages use
 * and the lists of its client connections, and nothing else of struct
 * tm_proxy (proxy_int.h), which holds it. The process core (proxy.c)
 * fills it at start and keeps cfg, gen and draining current; conn.c and
 * client_io.c keep their lists in it. Plain fields, read where they are
 * used: no call between a stage and what it reads. */
#ifndef TM_PATH_VIEW_H
#define TM_PATH_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../policies/http_parse.h"
#include "../log.h"
#include "../recent.h"

struct carriers;
struct cfg_tokens;
struct cio;
struct client;
struct event;
struct event_base;
struct fence;
struct gen;
struct metrics;
struct order;
struct tm_config;
struct uploads;

struct path_view {
    /* For the proxy's whole life. */
    struct event_base *base;
    struct tm_log log; /* the proxy's sink and level: lib_enter(&px->log) */
    const struct cfg_tokens *tokens; /* restart-only: signing and checks
                                      * must use one key */
    struct http_limits limits;
    struct fence *fence;       /* the mark store and its cache */
    struct carriers *carriers; /* [lease] sections: carried tokens */
    struct order *order;
    struct uploads *uploads; /* S3 upload ids bound to their resource */
    struct metrics *metrics; /* every counter /metrics shows */
    struct recent recent;    /* for the control port's page */
    struct http_request_space *scratch_space; /* parse space, one loop */
    struct http_request *scratch;             /* its request */
    struct http_response *scratch_resp;
    /* Kept current by the core. */
    const struct tm_config *cfg; /* gen->cfg: the current configuration */
    struct gen *gen;             /* current (gen.h) */
    struct gen *retired;
    bool draining;
    /* The client connections (conn.c; dirty and flusher: client_io.c). */
    struct client *clients;    /* every open client connection */
    struct client *graveyard;  /* closed, freed at the end of the turn */
    struct event *reaper;      /* frees the graveyard */
    struct client *idle_first; /* waiting for a head, oldest first */
    struct client *idle_last;
    struct cio *dirty;     /* client connections with output to write */
    struct event *flusher; /* writes it at the end of the turn */
    size_t nclients;
    size_t conn_peak; /* most clients at once since memory was given back */
    uint64_t next_id;
    unsigned mark_reads; /* refusals' marks being read from the store */
};

#endif
