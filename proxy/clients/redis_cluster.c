/* redis_cluster.c: one Redis, or a Redis Cluster seen through its slot
 * map: a redis_conn per node (scripts, reconnects and the watchdog are
 * redis_conn's), each key's command sent to its slot's master, MOVED and
 * ASK followed, the map read again when it proves wrong. */
#include "redis_cluster_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "../../policies/redis_slot.h"
#include "../log.h"
#include "coldq.h"
#include "dial.h"

static bool send_req(struct cl_req *r);
static void req_done(struct cl_req *r, redisReply *rep);

/* Send the TRYAGAIN answers again, from the slot's master in the map. */
static void
send_again(struct redis_cluster *c)
{
    struct cl_req *r = c->again;

    c->again = NULL;
    while (r != NULL) {
        struct cl_req *next = r->next;

        r->next = NULL;
        r->node = c->slots[r->slot];
        r->asking = false;
        r->redirects = 0;
        if (r->node == CL_NO_NODE || !send_req(r)) {
            req_done(r, NULL);
        }
        r = next;
    }
}

static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct redis_cluster *c = arg;
    int64_t now = dial_now_ms();

    (void)fd;
    (void)what;
    lib_enter(c->log);
    send_again(c);
    if (!c->refreshing &&
        ((c->want || !c->complete) && now - c->last_ms >= CL_REFRESH_MIN_MS)) {
        rcl_read_map(c);
    } else if (!c->refreshing && now - c->last_ms >= CL_REFRESH_MS) {
        rcl_read_map(c);
    }
    rcl_check_up(c);
}

/* ---- commands -------------------------------------------------------- */

static void
req_done(struct cl_req *r, redisReply *rep)
{
    r->cb(r->priv, rep);
    free(r);
}

/* A reply for r from its node: a redirection is followed, anything else
 * (a NULL reply too) goes to the caller. */
static void
req_reply(struct cl_req *r, redisReply *rep)
{
    struct redis_cluster *c = r->c;
    struct redis_redirect rd;
    enum redis_redirect_kind k;
    uint16_t n;

    if (c->closing) {
        req_done(r, NULL);
        return;
    }
    if (rep == NULL) {
        rcl_want_map(c); /* the node may be gone */
        req_done(r, NULL);
        return;
    }
    if (rep->type != REDIS_REPLY_ERROR) {
        req_done(r, rep);
        return;
    }
    k = redis_redirect_parse(rep->str, rep->len, &rd);
    if (k == REDIS_REDIRECT_NONE) {
        if (strncmp(rep->str, "TRYAGAIN", 8) == 0 &&
            r->tries < CL_MAX_TRYAGAIN) {
            r->tries++;
            r->next = c->again;
            c->again = r;
            return;
        }
        if (strncmp(rep->str, "CLUSTERDOWN", 11) == 0) {
            rcl_want_map(c);
        }
        req_done(r, rep);
        return;
    }
    if (rd.host.len == 0) {
        const char *a = c->nodes[r->node].addr;

        rd.host.p = a;
        rd.host.len = (size_t)(strrchr(a, ':') - a);
    }
    if (r->redirects >= REDIS_CLUSTER_MAX_REDIRECTS) {
        log_error("redis %s: cluster: still redirected after %d tries "
                  "(%s): refused",
                  c->what, r->redirects, LOG_ESC(rep->str, rep->len));
        req_done(r, rep);
        return;
    }
    n = rcl_node_get(c, rd.host.p, rd.host.len, rd.port);
    if (n == CL_NO_NODE) {
        req_done(r, NULL);
        return;
    }
    r->redirects++;
    r->node = n;
    r->asking = k == REDIS_REDIRECT_ASK;
    if (k == REDIS_REDIRECT_MOVED) {
        c->slots[rd.slot] = n;
        rcl_want_map(c);
    }
    if (!send_req(r)) {
        req_done(r, NULL);
    }
}

static void
on_eval(void *priv, redisReply *rep)
{
    req_reply(priv, rep);
}

static void
on_command(redisAsyncContext *ac, void *reply, void *priv)
{
    struct cl_req *r = priv;

    (void)ac;
    lib_enter(r->c->log);
    if (!r->c->closing && r->node < r->c->nnodes) {
        redis_conn_replied(r->c->nodes[r->node].conn);
    }
    req_reply(r, reply);
}

/* Send r to its node (after ASKING when asked to). false when the node is
 * down. */
static bool
send_req(struct cl_req *r)
{
    struct redis_conn *conn = r->c->nodes[r->node].conn;
    redisAsyncContext *ac = redis_conn_ac(conn);

    if (ac == NULL) {
        rcl_want_map(r->c);
        return false;
    }
    if (r->asking && redisAsyncCommand(ac, NULL, NULL, "ASKING") != REDIS_OK) {
        return false;
    }
    if (r->is_eval) {
        return redis_conn_eval(conn, r->script, r->argc, r->argv, r->lens,
                               on_eval, NULL, r);
    }
    return redisAsyncCommandArgv(ac, on_command, r, r->argc, r->argv,
                                 r->lens) == REDIS_OK;
}

/* Send a new r; false when it cannot be sent (r is freed, and its
 * callback never runs). */
static bool
send_new(struct cl_req *r)
{
    if (!send_req(r)) {
        free(r);
        return false;
    }
    return true;
}

/* A request for the master of the slot of key (argv[key]), every key
 * from argv[key] to argv[key + nkeys) in that slot; NULL (logged when
 * the keys split) otherwise, or when no connected master serves it. */
static struct cl_req *
req_new(struct redis_cluster *c, int argc, const char **argv,
        const size_t *lens, int key, int nkeys)
{
    unsigned slot;
    uint16_t n;
    struct cl_req *r;
    size_t size;

    if (argc <= key || argc > CL_MAX_ARGS || nkeys < 1 || key + nkeys > argc) {
        return NULL;
    }
    slot = redis_slot(argv[key], lens[key]);
    for (int i = key + 1; i < key + nkeys; i++) {
        if (redis_slot(argv[i], lens[i]) != slot) {
            log_error("redis %s: cluster: the keys of one script are in "
                      "different slots (%s): refused",
                      c->what, LOG_ESC(argv[i], lens[i]));
            return NULL;
        }
    }
    n = c->slots[slot];
    if (n == CL_NO_NODE || redis_conn_ac(c->nodes[n].conn) == NULL) {
        rcl_want_map(c); /* no master, or a master that is down: look again */
        return NULL;
    }
    size = redis_argv_size(argc, lens);
    r = size > 0 ? malloc(sizeof(*r) + size) : NULL;
    if (r == NULL) {
        return NULL;
    }
    *r = (struct cl_req){.c = c, .slot = slot, .node = n, .argc = argc};
    redis_argv_copy(r->buf, argc, argv, lens, &r->argv, &r->lens);
    return r;
}

/* numkeys (argv[0]) as a count of 1..argc-1; 0 if it is not. */
static int
eval_keys(int argc, const char **argv, const size_t *lens)
{
    int n = 0;

    if (argc < 2 || lens[0] == 0 || lens[0] > 2) {
        return 0;
    }
    for (size_t i = 0; i < lens[0]; i++) {
        if (argv[0][i] < '0' || argv[0][i] > '9') {
            return 0;
        }
        n = n * 10 + (argv[0][i] - '0');
    }
    return n >= 1 && n < argc ? n : 0;
}

bool
redis_cluster_eval(struct redis_cluster *c, size_t script, int argc,
                   const char **argv, const size_t *lens, redis_conn_cb cb,
                   redis_conn_resent_cb resent, void *priv)
{
    struct cl_req *r;

    if (c->single != NULL) {
        return redis_conn_eval(c->single, script, argc, argv, lens, cb, resent,
                               priv);
    }
    if (c->closing) {
        return false;
    }
    r = req_new(c, argc, argv, lens, 1, eval_keys(argc, argv, lens));
    if (r == NULL) {
        return false;
    }
    r->is_eval = true;
    r->script = script;
    r->cb = cb;
    r->priv = priv;
    return send_new(r);
}

/* One server's plain command: the reply counted, handed on. */
static void
on_single(redisAsyncContext *ac, void *reply, void *priv)
{
    struct cl_req *r = priv;

    (void)ac;
    lib_enter(r->c->log);
    if (!r->c->closing) {
        redis_conn_replied(r->c->single);
    }
    req_done(r, reply);
}

bool
redis_cluster_command(struct redis_cluster *c, int argc, const char **argv,
                      const size_t *lens, redis_conn_cb cb, void *priv)
{
    struct cl_req *r;
    redisAsyncContext *ac;

    if (c->closing || argc < 2 || argc > 8) {
        return false;
    }
    if (c->single != NULL) {
        ac = redis_conn_ac(c->single);
        r = ac != NULL ? malloc(sizeof(*r)) : NULL;
        if (r == NULL) {
            return false;
        }
        *r = (struct cl_req){.c = c, .cb = cb, .priv = priv};
        if (redisAsyncCommandArgv(ac, on_single, r, argc, argv, lens) !=
            REDIS_OK) {
            free(r);
            return false;
        }
        return true;
    }
    r = req_new(c, argc, argv, lens, 1, 1);
    if (r == NULL) {
        return false;
    }
    r->cb = cb;
    r->priv = priv;
    return send_new(r);
}

/* ---- the rest -------------------------------------------------------- */

struct coldq *
redis_cluster_coldq(struct redis_cluster *c)
{
    return c->single != NULL ? redis_conn_coldq(c->single) : c->cold;
}

bool
redis_cluster_ready(const struct redis_cluster *c)
{
    if (c->single != NULL) {
        return redis_conn_ready(c->single);
    }
    return !c->closing && rcl_map_ready(c);
}

struct redis_conn *
redis_cluster_single(const struct redis_cluster *c)
{
    return c->single;
}

const char *
redis_cluster_peer(const struct redis_cluster *c)
{
    return c->single != NULL ? redis_conn_peer(c->single) : c->peer;
}

/* The credentials of a redis:// URL, "[user]:password@" or "". */
static char *
url_auth(const char *url)
{
    const char *a = url + 8;
    const char *end = a + strcspn(a, "/"), *at = NULL;

    for (const char *p = a; p < end; p++) {
        if (*p == '@') {
            at = p;
        }
    }
    return at != NULL ? strndup(a, (size_t)(at - a + 1)) : strdup("");
}

/* Connect to each comma-separated seed of url. false with err set. */
static bool
add_seeds(struct redis_cluster *c, const char *url, char *err, size_t errlen)
{
    const char *p = url;

    while (*p != '\0') {
        size_t n;
        char *one;
        const char *slash;
        struct redis_conn *conn;
        struct cl_node *nn;

        p += strspn(p, " \t,");
        n = strcspn(p, ",");
        while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) {
            n--;
        }
        if (n == 0) {
            break;
        }
        one = strndup(p, n);
        if (one == NULL) {
            snprintf(err, errlen, "redis: out of memory");
            return false;
        }
        slash = strncmp(one, "redis://", 8) == 0 ? strchr(one + 8, '/') : NULL;
        if (slash != NULL && strcmp(slash, "/") != 0 &&
            strspn(slash + 1, "0") != strlen(slash + 1)) {
            snprintf(err, errlen,
                     "redis: %s url: a cluster has only database 0", c->what);
            free(one);
            return false;
        }
        if (c->nnodes >= CL_MAX_NODES) {
            free(one);
            break;
        }
        conn = redis_conn_new(c->base, one, c->what, c->scripts, c->nscripts,
                              c->timeout_ms, err, errlen);
        free(one);
        nn = conn != NULL ? realloc(c->nodes, (c->nnodes + 1) * sizeof(*nn))
                          : NULL;
        if (nn == NULL) {
            redis_conn_free(conn);
            if (conn != NULL) {
                snprintf(err, errlen, "redis: out of memory");
            }
            return false;
        }
        c->nodes = nn;
        nn[c->nnodes].conn = conn;
        snprintf(nn[c->nnodes].addr, sizeof(nn[c->nnodes].addr), "%s",
                 redis_conn_peer(conn));
        c->nnodes++;
        p += n;
    }
    if (c->nnodes == 0) {
        snprintf(err, errlen, "redis: %s url names no node", c->what);
        return false;
    }
    return true;
}

struct redis_cluster *
redis_cluster_new(struct event_base *base, const char *url, bool cluster,
                  const char *what, const char *const *scripts, size_t nscripts,
                  int timeout_ms, char *err, size_t errlen)
{
    struct redis_cluster *c = calloc(1, sizeof(*c));
    struct timeval tv = {0, CL_TICK_MS * 1000};

    if (c == NULL) {
        snprintf(err, errlen, "redis: out of memory");
        return NULL;
    }
    c->base = base;
    c->log = log_current();
    c->what = what;
    c->scripts = scripts;
    c->nscripts = nscripts;
    c->timeout_ms = timeout_ms;
    if (!cluster) {
        c->single = redis_conn_new(base, url, what, scripts, nscripts,
                                   timeout_ms, err, errlen);
        if (c->single == NULL) {
            free(c);
            return NULL;
        }
        return c;
    }
    for (size_t s = 0; s < REDIS_SLOTS; s++) {
        c->slots[s] = CL_NO_NODE;
    }
    c->auth = strncmp(url, "redis://", 8) == 0 ? url_auth(url) : NULL;
    c->masters = calloc(CL_MAX_NODES, sizeof(*c->masters));
    c->tick_ev = event_new(base, -1, EV_PERSIST, on_tick, c);
    c->cold = coldq_new(base, timeout_ms > 0 ? timeout_ms : 2000);
    if (c->auth == NULL || c->masters == NULL || c->tick_ev == NULL ||
        c->cold == NULL) {
        snprintf(err, errlen, "redis: %s: cannot set up the cluster client",
                 what);
        redis_cluster_free(c);
        return NULL;
    }
    if (!add_seeds(c, url, err, errlen)) {
        redis_cluster_free(c);
        return NULL;
    }
    snprintf(c->peer, sizeof(c->peer), "cluster %s", c->nodes[0].addr);
    c->last_ms = dial_now_ms() - CL_REFRESH_MS;
    event_add(c->tick_ev, &tv);
    log_info("redis %s: a Redis Cluster, %zu seed nodes", what, c->nnodes);
    return c;
}

void
redis_cluster_free(struct redis_cluster *c)
{
    if (c == NULL) {
        return;
    }
    if (c->single != NULL) {
        c->closing = true;
        redis_conn_free(c->single); /* NULL replies to what is in flight */
        free(c);
        return;
    }
    c->closing = true;
    coldq_free(c->cold); /* answers the calls still waiting */
    c->cold = NULL;
    while (c->again != NULL) {
        struct cl_req *r = c->again;

        c->again = r->next;
        req_done(r, NULL);
    }
    if (c->tick_ev != NULL) {
        event_free(c->tick_ev);
    }
    /* Each answers its commands in flight with NULL replies. */
    for (size_t i = 0; i < c->nnodes; i++) {
        redis_conn_free(c->nodes[i].conn);
    }
    free(c->nodes);
    free(c->masters);
    free(c->auth);
    free(c);
}
