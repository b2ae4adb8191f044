/* metrics.h: the one registry of what /metrics shows, in the Prometheus
 * text format. TM_METRICS lists every family once (twemproxy's
 * nc_stats.h): the ids call sites name (MID_<name>), the plain counters'
 * storage, the HELP and TYPE lines and the README's list all come from
 * it. */
#ifndef TM_METRICS_H
#define TM_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evbuffer;

/* X(name, type, source, help), in the order /metrics writes them.
 * source says who has the values:
 *   KEPT   one number the registry keeps (metrics_inc, metrics_reload);
 *   LABELS series the registry keeps under labels (metrics_decision,
 *          metrics_store, metrics_upstream_*, metrics_lock_call,
 *          metrics_reload);
 *   PROC   the process, read from /proc/self when /metrics is asked;
 *   OWNER  the module that owns the value, read when /metrics is asked
 *          and written with metrics_head and metrics_sample (the control
 *          port, the stores' and lock backends' metrics ops).
 * The process_ family has the names and help of Prometheus' own clients. */
#define TM_METRICS(X)                                                          \
    X(process_cpu_seconds_total, COUNTER, PROC,                                \
      "Total user and system CPU time spent in seconds.")                      \
    X(process_open_fds, GAUGE, PROC, "Number of open file descriptors.")       \
    X(process_max_fds, GAUGE, PROC,                                            \
      "Maximum number of open file descriptors.")                              \
    X(process_virtual_memory_bytes, GAUGE, PROC,                               \
      "Virtual memory size in bytes.")                                         \
    X(process_resident_memory_bytes, GAUGE, PROC,                              \
      "Resident memory size in bytes.")                                        \
    X(process_start_time_seconds, GAUGE, PROC,                                 \
      "Start time of the process since unix epoch in seconds.")                \
    X(tidemark_log_lines_dropped_total, COUNTER, PROC,                         \
      "Log lines dropped: log_buffer was full, or stderr failed.")             \
    X(tidemark_build_info, GAUGE, LABELS,                                      \
      "The version tidemark was built from (label version); always 1.")        \
    X(tidemark_config_last_reload_successful, GAUGE, KEPT,                     \
      "Whether the last configuration reload attempt was successful.")         \
    X(tidemark_config_last_reload_success_timestamp_seconds, GAUGE, KEPT,      \
      "Timestamp of the last successful configuration load (start or "         \
      "reload).")                                                              \
    X(tidemark_requests_total, COUNTER, KEPT, "Requests read.")                \
    X(tidemark_bad_requests_total, COUNTER, KEPT, "Malformed requests.")       \
    X(tidemark_connections_total, COUNTER, KEPT,                               \
      "Client connections accepted.")                                          \
    X(tidemark_decisions_total, COUNTER, LABELS,                               \
      "Requests by route and outcome.")                                        \
    X(tidemark_store_raise_seconds, HISTOGRAM, LABELS,                         \
      "Time from asking the store to its answer.")                             \
    X(tidemark_store_raise_errors_total, COUNTER, LABELS,                      \
      "Raises the store failed.")                                              \
    X(tidemark_upstream_response_seconds, HISTOGRAM, LABELS,                   \
      "Time from sending a request to the answer's head.")                     \
    X(tidemark_upstream_responses_total, COUNTER, LABELS,                      \
      "Final answers from upstreams by status class.")                         \
    X(tidemark_upstream_errors_total, COUNTER, LABELS,                         \
      "Exchanges that failed, by kind.")                                       \
    X(tidemark_upstream_resolve_failures_total, COUNTER, LABELS,               \
      "Lookups of an upstream's host name that failed.")                       \
    X(tidemark_upstream_dial_deferred_total, COUNTER, LABELS,                  \
      "Requests that waited for a connection because the process had no "      \
      "file descriptor free.")                                                 \
    X(tidemark_lock_calls_total, COUNTER, LABELS,                              \
      "Lock service calls by outcome (lost: the lease was gone or "            \
      "another's; error: backend or mark store unusable).")                    \
    X(tidemark_connections, GAUGE, OWNER, "Open client connections.")          \
    X(tidemark_order_start_hold_seconds, GAUGE, OWNER,                         \
      "Seconds left during which fenced writes wait after start (writes of "   \
      "the previous process may be in flight).")                               \
    X(tidemark_order_waiting, GAUGE, OWNER,                                    \
      "Fenced writes waiting for a lower token's write in flight on their "    \
      "resource, or for the hold after start.")                                \
    X(tidemark_upstream_connections, GAUGE, OWNER,                             \
      "Pooled upstream connections by state.")                                 \
    X(tidemark_upstream_addresses, GAUGE, OWNER,                               \
      "Addresses an upstream's host resolves to now (0: down).")               \
    X(tidemark_sign_credentials_expiry_timestamp_seconds, GAUGE, OWNER,        \
      "When the credentials a signing upstream signs with expire (+Inf: "      \
      "never; 0: it has none it may use).")                                    \
    X(tidemark_lock_backend_up, GAUGE, OWNER,                                  \
      "Whether the lock backend can be used (1) or not (0).")                  \
    X(tidemark_lock_waiting, GAUGE, OWNER,                                     \
      "Lock calls waiting in this process's queues for a lock another "        \
      "holds (?wait_ms=).")                                                    \
    X(tidemark_lmdb_journal_syncs_total, COUNTER, OWNER,                       \
      "Groups of raises written to the journal and synced.")                   \
    X(tidemark_lmdb_checkpoints_total, COUNTER, OWNER,                         \
      "LMDB commits that retired the journal.")                                \
    X(tidemark_lmdb_map_used_bytes, GAUGE, OWNER,                              \
      "Bytes of the mark store's LMDB file in use.")                           \
    X(tidemark_lmdb_map_size_bytes, GAUGE, OWNER,                              \
      "The mark store's [store] map_size: the most it may use.")               \
    X(tidemark_lock_lmdb_map_used_bytes, GAUGE, OWNER,                         \
      "Bytes of the lock backend's LMDB file in use.")                         \
    X(tidemark_lock_lmdb_map_size_bytes, GAUGE, OWNER,                         \
      "The lock backend's [locks] map_size: the most it may use.")             \
    X(tidemark_watch_state, GAUGE, OWNER,                                      \
      "1 for the state each [watch] is in: starting, ok or failing.")          \
    X(tidemark_watch_errors_total, COUNTER, OWNER,                             \
      "Failed reads of a [watch]'s store (and streams or sessions lost).")     \
    X(tidemark_watch_last_event_age_seconds, GAUGE, OWNER,                     \
      "Seconds since a [watch]'s store last told of a change (since its "      \
      "start until the first).")                                               \
    X(tidemark_watch_last_read_age_seconds, GAUGE, OWNER,                      \
      "Seconds since a [watch]'s store last answered (since its start until "  \
      "the first).")                                                           \
    X(tidemark_carrier_state, GAUGE, OWNER,                                    \
      "1 for the state each [lease] or [follow] is in: starting, holding, "    \
      "standby or lost.")                                                      \
    X(tidemark_carrier_changes_total, COUNTER, OWNER,                          \
      "State changes of a [lease] or [follow] since the start.")

enum metric_type {
    METRIC_COUNTER = 0,
    METRIC_GAUGE,
    METRIC_HISTOGRAM,
};

enum metric_source {
    METRIC_KEPT = 0,
    METRIC_LABELS,
    METRIC_PROC,
    METRIC_OWNER,
};

enum metric_id {
#define METRIC_ID(name, type, source, help) MID_##name,
    TM_METRICS(METRIC_ID)
#undef METRIC_ID
        MID_N,
};

/* Decisions: the outcome label of tidemark_decisions_total. */
enum outcome {
    OUT_ACCEPTED = 0,
    OUT_STALE,
    OUT_MISSING,
    OUT_INVALID,
    OUT_FORBIDDEN,
    OUT_STORE_ERROR,
    OUT_BYPASSED,
    OUT_NOT_HOLDER, /* a bound route while its carrier does not hold */
    OUT_N,
};

/* Lock service calls: the outcome label of tidemark_lock_calls_total. */
enum lock_outcome {
    LOCK_OUT_ACQUIRED = 0,
    LOCK_OUT_BUSY,
    LOCK_OUT_EXTENDED,
    LOCK_OUT_RELEASED,
    LOCK_OUT_LOST,
    LOCK_OUT_ERROR,
    LOCK_OUT_N,
};

#define METRICS_BUCKETS 12

struct histo {
    uint64_t le[METRICS_BUCKETS]; /* cumulative when written, not here */
    uint64_t count;
    double sum;
};

struct metrics;

/* A registry whose configuration was loaded now (the reload gauges say
 * so). NULL when out of memory. */
struct metrics *metrics_new(void);
void metrics_free(struct metrics *m);

/* ---- what happened ------------------------------------------------------ */

/* Add one to the KEPT counter id. */
void metrics_inc(struct metrics *m, enum metric_id id);

/* A configuration was loaded (ok) or refused: the reload gauges. */
void metrics_reload(struct metrics *m, bool ok);

/* route may be NULL: requests no route matched. */
void metrics_decision(struct metrics *m, const char *route, enum outcome o);
/* One raise took seconds; ok is false for a store error. */
void metrics_store(struct metrics *m, double seconds, bool ok);
/* One exchange with upstream: its final answer's status came after
 * seconds; else an error (timeout or not). */
void metrics_upstream_answer(struct metrics *m, const char *upstream,
                             int status, double seconds);
void metrics_upstream_error(struct metrics *m, const char *upstream,
                            bool timeout);
/* A lookup of upstream's host name failed. */
void metrics_upstream_resolve_failure(struct metrics *m, const char *upstream);
/* A request to upstream waits for a connection: the process had no file
 * descriptor free to dial with. */
void metrics_upstream_dial_deferred(struct metrics *m, const char *upstream);
void metrics_lock_call(struct metrics *m, enum lock_outcome o);

/* ---- writing /metrics ---------------------------------------------------- */

/* Append every family but the OWNER ones; backend names the store's
 * label. */
void metrics_write(const struct metrics *m, const char *backend,
                   struct evbuffer *out);

/* The HELP and TYPE lines of id. */
void metrics_head(struct evbuffer *out, enum metric_id id);
/* One sample of id without labels. */
void metrics_value(struct evbuffer *out, enum metric_id id, double v);
/* One sample of id with labels: fmt is a printf format for what goes
 * between the braces (label values are configuration names: nothing to
 * escape). */
void metrics_sample(struct evbuffer *out, enum metric_id id, double v,
                    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The name of id. */
const char *metrics_name(enum metric_id id);

/* Seconds between two CLOCK_MONOTONIC readings. */
double metrics_since(const void *t0 /* struct timespec */);

#endif
