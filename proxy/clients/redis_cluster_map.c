/* redis_cluster_map.c: a cluster's nodes (a redis_conn each, made when
 * the map first names them) and its slot map, read with CLUSTER SLOTS at
 * start, on a timer and whenever an answer proves it wrong. */
#include "redis_cluster_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../policies/redis_slot.h"
#include "dial.h"
#include "../log.h"
#include "coldq.h"
#include "redis_reply.h"

/* ---- nodes and the map ----------------------------------------------- */

/* The URL of node name:port with the seed's credentials (malloc, sized
 * from what it holds: a long password does not cut the host off). NULL
 * when out of memory. */
static char *
node_url(const char *auth, const char *name, bool v6, unsigned port)
{
    const char *fmt = "redis://%s%s%s%s:%u";
    int n =
        snprintf(NULL, 0, fmt, auth, v6 ? "[" : "", name, v6 ? "]" : "", port);
    char *url = n > 0 ? malloc((size_t)n + 1) : NULL;

    if (url != NULL) {
        snprintf(url, (size_t)n + 1, fmt, auth, v6 ? "[" : "", name,
                 v6 ? "]" : "", port);
    }
    return url;
}

/* The node at host:port, connected to if new. CL_NO_NODE when the table
 * is full or the connection cannot be set up (logged). */
uint16_t
rcl_node_get(struct redis_cluster *c, const char *host, size_t hlen,
             unsigned port)
{
    char name[256], addr[300], err[256];
    char *url;
    struct cl_node *nn;
    bool v6;

    if (hlen >= sizeof(name) || !redis_host_ok(host, hlen)) {
        return CL_NO_NODE;
    }
    /* host may point into the table that grows below. */
    memcpy(name, host, hlen);
    name[hlen] = '\0';
    v6 = strchr(name, ':') != NULL;
    snprintf(addr, sizeof(addr), "%s:%u", name, port);
    for (size_t i = 0; i < c->nnodes; i++) {
        if (strcmp(c->nodes[i].addr, addr) == 0) {
            return (uint16_t)i;
        }
    }
    if (c->nnodes >= CL_MAX_NODES) {
        log_error("redis %s: cluster: more than %d nodes: %s not used", c->what,
                  CL_MAX_NODES, LOG_STR(addr));
        return CL_NO_NODE;
    }
    nn = realloc(c->nodes, (c->nnodes + 1) * sizeof(*nn));
    if (nn == NULL) {
        return CL_NO_NODE;
    }
    c->nodes = nn;
    url = node_url(c->auth, name, v6, port);
    nn[c->nnodes].conn =
        url != NULL
            ? redis_conn_new(c->base, url, c->what, c->scripts, c->nscripts,
                             c->timeout_ms, err, sizeof(err))
            : NULL;
    if (url == NULL) {
        snprintf(err, sizeof(err), "out of memory");
    }
    free(url);
    if (nn[c->nnodes].conn == NULL) {
        log_error("redis %s: cluster node %s: %s", c->what, LOG_STR(addr),
                  LOG_STR(err));
        return CL_NO_NODE;
    }
    snprintf(nn[c->nnodes].addr, sizeof(nn[c->nnodes].addr), "%s", addr);
    return (uint16_t)c->nnodes++;
}

/* Every slot has a master, and every master is connected and ready. */
bool
rcl_map_ready(const struct redis_cluster *c)
{
    if (!c->complete) {
        return false;
    }
    for (size_t i = 0; i < c->nmasters; i++) {
        if (!redis_conn_ready(c->nodes[c->masters[i]].conn)) {
            return false;
        }
    }
    return true;
}

void
rcl_check_up(struct redis_cluster *c)
{
    if (!c->ever_ready && rcl_map_ready(c)) {
        c->ever_ready = true;
        coldq_up(c->cold);
    }
}

/* One range of a CLUSTER SLOTS reply (redis_reply_slots_range), its
 * master connected to if new, put in slots. An empty host is the
 * answering node's. false when the range does not read. */
static bool
read_range(struct redis_cluster *c, const redisReply *e, uint16_t *slots)
{
    struct redis_slots_range r;
    uint16_t n;

    if (!redis_reply_slots_range(e, &r)) {
        return false;
    }
    if (r.hlen == 0) {
        const char *a = c->nodes[c->asking].addr;

        r.host = a;
        r.hlen = (size_t)(strrchr(a, ':') - a);
    }
    n = rcl_node_get(c, r.host, r.hlen, r.port);
    if (n == CL_NO_NODE) {
        return false;
    }
    for (unsigned s = r.start; s <= r.end; s++) {
        slots[s] = n;
    }
    return true;
}

/* Take a map read into slots: count what moved, list the masters. */
static void
apply_map(struct redis_cluster *c, const uint16_t *slots)
{
    unsigned moved = 0, covered = 0;
    bool seen[CL_MAX_NODES] = {false};

    c->nmasters = 0;
    for (size_t s = 0; s < REDIS_SLOTS; s++) {
        if (slots[s] != c->slots[s]) {
            moved++;
        }
        c->slots[s] = slots[s];
        if (slots[s] == CL_NO_NODE) {
            continue;
        }
        covered++;
        if (!seen[slots[s]]) {
            seen[slots[s]] = true;
            c->masters[c->nmasters++] = slots[s];
        }
    }
    c->complete = covered == REDIS_SLOTS;
    if (moved > 0) {
        log_info("redis %s: cluster map from %s: %u of %d slots served by "
                 "%zu masters, %u slots moved",
                 c->what, LOG_STR(c->nodes[c->asking].addr), covered,
                 REDIS_SLOTS, c->nmasters, moved);
    }
}

static void
on_slots(redisAsyncContext *ac, void *reply, void *priv)
{
    struct redis_cluster *c = priv;
    redisReply *rep = reply;
    uint16_t *slots;

    (void)ac;
    lib_enter(c->log);
    c->refreshing = false;
    if (c->closing || rep == NULL) {
        return; /* the node is gone: the tick asks another */
    }
    redis_conn_replied(c->nodes[c->asking].conn);
    if (rep->type != REDIS_REPLY_ARRAY) {
        log_warn("redis %s: CLUSTER SLOTS on %s answered %s", c->what,
                 LOG_STR(c->nodes[c->asking].addr),
                 rep->type == REDIS_REPLY_ERROR ? LOG_ESC(rep->str, rep->len)
                                                : "no map");
        return;
    }
    slots = malloc(REDIS_SLOTS * sizeof(*slots));
    if (slots == NULL) {
        return;
    }
    for (size_t s = 0; s < REDIS_SLOTS; s++) {
        slots[s] = CL_NO_NODE;
    }
    for (size_t i = 0; i < rep->elements; i++) {
        if (!read_range(c, rep->element[i], slots)) {
            log_warn("redis %s: CLUSTER SLOTS on %s: a range that does not "
                     "read: map not taken",
                     c->what, LOG_STR(c->nodes[c->asking].addr));
            free(slots);
            return;
        }
    }
    apply_map(c, slots);
    free(slots);
    c->want = false;
    rcl_check_up(c);
}

/* Ask the next ready node for the map. */
void
rcl_read_map(struct redis_cluster *c)
{
    for (size_t k = 0; k < c->nnodes; k++) {
        size_t i = (c->next + k) % c->nnodes;
        redisAsyncContext *ac = redis_conn_ac(c->nodes[i].conn);

        if (ac == NULL || !redis_conn_ready(c->nodes[i].conn)) {
            continue;
        }
        if (redisAsyncCommand(ac, on_slots, c, "CLUSTER SLOTS") == REDIS_OK) {
            c->refreshing = true;
            c->asking = i;
            c->next = i + 1;
            c->last_ms = dial_now_ms();
        }
        return;
    }
}

void
rcl_want_map(struct redis_cluster *c)
{
    c->want = true;
    if (!c->refreshing && dial_now_ms() - c->last_ms >= CL_REFRESH_MIN_MS) {
        rcl_read_map(c);
    }
}
