/* metrics.c: labelled counters and histograms for /metrics. Labels are
 * route and upstream names: few, known from the configuration, kept in
 * short lists that only grow (a reload may add names; old ones stay). */
#include "metrics.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

static const double bounds[METRICS_BUCKETS] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
};

static const char *const outcome_names[OUT_N] = {
    "accepted",  "stale",       "missing",  "invalid",
    "forbidden", "store_error", "bypassed",
};

struct named {
    struct named *next;
    uint64_t n[OUT_N];    /* routes: decisions */
    struct histo latency; /* upstreams */
    uint64_t errors;
    uint64_t timeouts;
    char name[];
};

struct metrics {
    struct named *routes;
    struct named *upstreams;
    struct histo store;
    uint64_t store_errors;
};

struct metrics *
metrics_new(void)
{
    return calloc(1, sizeof(struct metrics));
}

static void
free_list(struct named *n)
{
    while (n != NULL) {
        struct named *next = n->next;
        free(n);
        n = next;
    }
}

void
metrics_free(struct metrics *m)
{
    if (m == NULL) {
        return;
    }
    free_list(m->routes);
    free_list(m->upstreams);
    free(m);
}

/* The entry for name, made on first use; NULL when out of memory. */
static struct named *
find(struct named **list, const char *name)
{
    struct named *n;
    size_t len = strlen(name);

    for (n = *list; n != NULL; n = n->next) {
        if (strcmp(n->name, name) == 0) {
            return n;
        }
    }
    n = calloc(1, sizeof(*n) + len + 1);
    if (n == NULL) {
        return NULL;
    }
    memcpy(n->name, name, len + 1);
    n->next = *list;
    *list = n;
    return n;
}

static void
observe(struct histo *h, double v)
{
    for (int i = 0; i < METRICS_BUCKETS; i++) {
        if (v <= bounds[i]) {
            h->le[i]++;
            break;
        }
    }
    h->count++;
    h->sum += v;
}

void
metrics_decision(struct metrics *m, const char *route, enum outcome o)
{
    struct named *n = find(&m->routes, route != NULL ? route : "");

    if (n != NULL) {
        n->n[o]++;
    }
}

void
metrics_store(struct metrics *m, double seconds, bool ok)
{
    observe(&m->store, seconds);
    if (!ok) {
        m->store_errors++;
    }
}

void
metrics_upstream_ok(struct metrics *m, const char *upstream, double seconds)
{
    struct named *n = find(&m->upstreams, upstream);

    if (n != NULL) {
        observe(&n->latency, seconds);
    }
}

void
metrics_upstream_error(struct metrics *m, const char *upstream, bool timeout)
{
    struct named *n = find(&m->upstreams, upstream);

    if (n != NULL) {
        n->errors += !timeout;
        n->timeouts += timeout;
    }
}

/* Label values are configuration names ([A-Za-z0-9_.-]): nothing to
 * escape. */
static void
write_histo(struct evbuffer *out, const char *name, const char *label,
            const char *value, const struct histo *h)
{
    uint64_t cum = 0;

    for (int i = 0; i < METRICS_BUCKETS; i++) {
        cum += h->le[i];
        evbuffer_add_printf(out, "%s_bucket{%s=\"%s\",le=\"%g\"} %" PRIu64 "\n",
                            name, label, value, bounds[i], cum);
    }
    evbuffer_add_printf(out,
                        "%s_bucket{%s=\"%s\",le=\"+Inf\"} %" PRIu64
                        "\n%s_sum{%s=\"%s\"} %.6f\n"
                        "%s_count{%s=\"%s\"} %" PRIu64 "\n",
                        name, label, value, h->count, name, label, value,
                        h->sum, name, label, value, h->count);
}

void
metrics_write(const struct metrics *m, const char *backend,
              struct evbuffer *out)
{
    const struct named *n;

    evbuffer_add_printf(out, "# HELP tidemark_decisions_total Requests by "
                             "route and outcome.\n# TYPE "
                             "tidemark_decisions_total counter\n");
    for (n = m->routes; n != NULL; n = n->next) {
        for (int o = 0; o < OUT_N; o++) {
            evbuffer_add_printf(out,
                                "tidemark_decisions_total{route=\"%s\","
                                "outcome=\"%s\"} %" PRIu64 "\n",
                                n->name, outcome_names[o], n->n[o]);
        }
    }
    evbuffer_add_printf(out, "# HELP tidemark_store_raise_seconds Time "
                             "from asking the store to its answer.\n"
                             "# TYPE tidemark_store_raise_seconds "
                             "histogram\n");
    write_histo(out, "tidemark_store_raise_seconds", "backend", backend,
                &m->store);
    evbuffer_add_printf(out,
                        "# HELP tidemark_store_raise_errors_total "
                        "Raises the store failed.\n# TYPE "
                        "tidemark_store_raise_errors_total counter\n"
                        "tidemark_store_raise_errors_total{backend="
                        "\"%s\"} %" PRIu64 "\n",
                        backend, m->store_errors);
    evbuffer_add_printf(out, "# HELP tidemark_upstream_response_seconds "
                             "Time from sending a request to the answer's "
                             "head.\n# TYPE "
                             "tidemark_upstream_response_seconds "
                             "histogram\n");
    for (n = m->upstreams; n != NULL; n = n->next) {
        write_histo(out, "tidemark_upstream_response_seconds", "upstream",
                    n->name, &n->latency);
    }
    evbuffer_add_printf(out, "# HELP tidemark_upstream_errors_total "
                             "Exchanges that failed, by kind.\n# TYPE "
                             "tidemark_upstream_errors_total counter\n");
    for (n = m->upstreams; n != NULL; n = n->next) {
        evbuffer_add_printf(out,
                            "tidemark_upstream_errors_total{upstream="
                            "\"%s\",kind=\"error\"} %" PRIu64 "\n"
                            "tidemark_upstream_errors_total{upstream="
                            "\"%s\",kind=\"timeout\"} %" PRIu64 "\n",
                            n->name, n->errors, n->name, n->timeouts);
    }
}

double
metrics_since(const void *t0)
{
    const struct timespec *a = t0;
    struct timespec b;

    clock_gettime(CLOCK_MONOTONIC, &b);
    return (double)(b.tv_sec - a->tv_sec) +
           (double)(b.tv_nsec - a->tv_nsec) / 1e9;
}
