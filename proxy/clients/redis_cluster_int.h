/* redis_cluster_int.h: a cluster client's state and what its two files
 * share: the requests (redis_cluster.c) and the nodes and the slot map
 * (redis_cluster_map.c). Internal to clients/. */
#ifndef TM_REDIS_CLUSTER_INT_H
#define TM_REDIS_CLUSTER_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <event2/event.h>

#include "../../policies/redis_slot.h"
#include "redis_cluster.h"

/*
 * The map is a guide, never the answer: a node that does not hold a slot
 * answers MOVED, so a stale map costs a redirection, not a wrong answer.
 * The map is read (CLUSTER SLOTS) at start, every REFRESH_MS, and soon
 * after a MOVED, a lost connection, CLUSTERDOWN or a command that found
 * no connected master (at most one read every REFRESH_MIN_MS). While the
 * cluster has not promoted a replica of a dead master, that master's
 * slots have no connected master: their commands fail at once (the
 * callers answer 503 with Retry-After) until a read shows the new one.
 */

#define CL_TICK_MS 100
#define CL_REFRESH_MS 1000
#define CL_REFRESH_MIN_MS 100
#define CL_MAX_NODES 256
#define CL_NO_NODE 0xffff
#define CL_MAX_ARGS 16
/* TRYAGAIN (a multi-key script on a slot being migrated, its keys split
 * or new): sent again at the next tick, this many times. */
#define CL_MAX_TRYAGAIN 5

struct cl_node {
    char addr[300]; /* "host:port", host without brackets */
    struct redis_conn *conn;
};

struct redis_cluster {
    struct event_base *base;
    const struct tm_log *log; /* the proxy's, entered by callbacks */
    const char *what;         /* "[store]", "[locks]" */
    const char *const *scripts;
    size_t nscripts;
    int timeout_ms;
    bool closing;
    char peer[320];

    struct redis_conn *single; /* one server; NULL for a cluster */

    /* A cluster. */
    char *auth; /* "[user]:password@" of the first seed, or "" */
    struct cl_node *nodes;
    size_t nnodes;
    uint16_t slots[REDIS_SLOTS]; /* node index, or CL_NO_NODE */
    uint16_t *masters;           /* the nodes the map names */
    size_t nmasters;
    bool complete;   /* every slot has a master in the map */
    bool refreshing; /* a CLUSTER SLOTS in flight */
    size_t asking;   /* the node it went to */
    bool want;       /* read the map again soon */
    int64_t last_ms; /* the last read sent */
    size_t next;     /* the node to ask next */
    bool ever_ready;
    struct event *tick_ev;
    struct coldq *cold;
    struct cl_req *again; /* TRYAGAIN: sent again at the next tick */
};

/* One command in flight, with its arguments kept to send it again. */
struct cl_req {
    struct redis_cluster *c;
    struct cl_req *next; /* on c->again */
    unsigned slot;
    int tries; /* TRYAGAIN answers so far */
    bool is_eval;
    size_t script;
    redis_conn_cb cb;
    void *priv;
    uint16_t node;
    bool asking; /* send ASKING first */
    int redirects;
    int argc;
    const char **argv; /* into buf */
    size_t *lens;
    char buf[];
};

/* ---- redis_cluster_map.c ---- */

/* The first time the map is ready: the calls parked for a cold start
 * go (coldq_up). */
void rcl_check_up(struct redis_cluster *c);

/* Every slot has a master, and every master is connected and ready. */
bool rcl_map_ready(const struct redis_cluster *c);

/* The node at host:port, connected to if new. CL_NO_NODE when the table
 * is full or the connection cannot be set up (logged). */
uint16_t rcl_node_get(struct redis_cluster *c, const char *host, size_t hlen,
                      unsigned port);

/* Ask the next ready node for the map. */
void rcl_read_map(struct redis_cluster *c);

/* The map proved wrong: read it again, now unless read in the last
 * CL_REFRESH_MIN_MS (then at the next tick). */
void rcl_want_map(struct redis_cluster *c);

#endif
