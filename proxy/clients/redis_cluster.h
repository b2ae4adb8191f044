/* redis_cluster.h: the Redis the mark store and the lock backend talk to,
 * one server (a redis_conn) or a Redis Cluster: the slot map read from
 * the nodes, each command sent to its key's slot master on that node's
 * redis_conn, MOVED and ASK followed, the map read again after a
 * redirection, a lost connection or a failover. */
#ifndef TM_REDIS_CLUSTER_H
#define TM_REDIS_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>

#include "redis_conn.h"

struct event_base;
struct redis_cluster;

/* Redirections followed for one command before it is answered as
 * failed (a map that keeps moving). */
#define REDIS_CLUSTER_MAX_REDIRECTS 5

/*
 * One server (cluster false): url is one redis://[[user]:password@]host:
 * port[/db], and everything goes to that server's redis_conn.
 *
 * A cluster (cluster true): url is one or more seed nodes, comma-separated
 * redis:// URLs without a /db other than 0; credentials are those of the
 * first URL, for every node. The slot map comes from CLUSTER SLOTS, asked
 * of any node that answers; nodes the map (or a MOVED) names are
 * connected to as they appear. Unreachable now is not an error. NULL with
 * a message in err on a bad url or out of memory.
 */
struct redis_cluster *
redis_cluster_new(struct event_base *base, const char *url, bool cluster,
                  const char *what, const char *const *scripts, size_t nscripts,
                  int timeout_ms, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* The calls that wait for the first connection (coldq.h): one server's
 * first connection, or a cluster's first full map with every master
 * connected. */
struct coldq *redis_cluster_coldq(struct redis_cluster *c);

/* One server: connected with its scripts loaded. A cluster: every slot
 * has a master in the map, and each master is connected with its scripts
 * loaded. */
bool redis_cluster_ready(const struct redis_cluster *c);

/* The one server's connection; NULL for a cluster (commands that are not
 * about a key, such as WAIT, have no node to go to). */
struct redis_conn *redis_cluster_single(const struct redis_cluster *c);

/* "host:port" of the one server, or "cluster <first seed>", for logs. */
const char *redis_cluster_peer(const struct redis_cluster *c);

/* As redis_conn_eval: argv is numkeys, the keys, then the arguments. In
 * a cluster the call goes to the master of the first key's slot, and
 * every key must hash to that slot (otherwise logged, and false). A
 * MOVED is followed (the map updated, a refresh asked) and an ASK sent
 * again to the node it names after ASKING, at most
 * REDIS_CLUSTER_MAX_REDIRECTS times; then the last error reply goes to
 * cb. A lost connection is a NULL reply, as from redis_conn, and the map
 * is read again: a script that may have run is never sent twice. false
 * (cb never called) when no connected master serves the slot: the
 * caller answers "unavailable". resent: as redis_conn_eval's (one
 * server only; NULL is fine). */
bool redis_cluster_eval(struct redis_cluster *c, size_t script, int argc,
                        const char **argv, const size_t *lens, redis_conn_cb cb,
                        redis_conn_resent_cb resent, void *priv)
    __attribute__((warn_unused_result));

/* A plain command (argv[0] the command, argv[1] its one key), routed and
 * redirected as redis_cluster_eval; argc at most 8. */
bool redis_cluster_command(struct redis_cluster *c, int argc, const char **argv,
                           const size_t *lens, redis_conn_cb cb, void *priv)
    __attribute__((warn_unused_result));

/* Drop every connection (commands in flight get a NULL reply) and free.
 * NULL is fine. */
void redis_cluster_free(struct redis_cluster *c);

#endif
