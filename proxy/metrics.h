/* metrics.h: what /metrics exposes beyond plain counters: decisions by
 * route and outcome, store and upstream latency histograms, upstream
 * errors. Written in the Prometheus text format. */
#ifndef TM_METRICS_H
#define TM_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evbuffer;

enum outcome {
    OUT_ACCEPTED = 0,
    OUT_STALE,
    OUT_MISSING,
    OUT_INVALID,
    OUT_FORBIDDEN,
    OUT_STORE_ERROR,
    OUT_BYPASSED,
    OUT_N,
};

#define METRICS_BUCKETS 12

struct histo {
    uint64_t le[METRICS_BUCKETS]; /* cumulative when written, not here */
    uint64_t count;
    double sum;
};

struct metrics;

struct metrics *metrics_new(void);
void metrics_free(struct metrics *m);

/* route may be NULL: requests no route matched. */
void metrics_decision(struct metrics *m, const char *route, enum outcome o);
/* One raise took seconds; ok is false for a store error. */
void metrics_store(struct metrics *m, double seconds, bool ok);
/* One exchange with upstream: seconds to the answer's head when it came;
 * else an error (timeout or not). */
void metrics_upstream_ok(struct metrics *m, const char *upstream,
                         double seconds);
void metrics_upstream_error(struct metrics *m, const char *upstream,
                            bool timeout);

/* Append every family; backend names the store's label. */
void metrics_write(const struct metrics *m, const char *backend,
                   struct evbuffer *out);

/* Seconds between two CLOCK_MONOTONIC readings. */
double metrics_since(const void *t0 /* struct timespec */);

#endif
