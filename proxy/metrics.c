/* metrics.c: the registry's values and the one printer of the Prometheus
 * text format. Labels are route and upstream names: few, known from the
 * configuration, kept in short lists that only grow (a reload may add
 * names; old ones stay). */
#include "metrics.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "../policies/procstat.h"
#include "log.h"

/* The version the Makefile passes (packaging/debian/changelog's). */
#ifndef TM_VERSION
#define TM_VERSION "unknown"
#endif

struct metric_def {
    const char *name;
    enum metric_type type;
    enum metric_source source;
    const char *help;
};

static const struct metric_def defs[MID_N] = {
#define METRIC_DEF(name, type, source, help)                                   \
    {#name, METRIC_##type, METRIC_##source, help},
    TM_METRICS(METRIC_DEF)
#undef METRIC_DEF
};

static const char *const type_names[] = {"counter", "gauge", "histogram"};

static const double bounds[METRICS_BUCKETS] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
};

static const char *const outcome_names[OUT_N] = {
    "accepted",  "stale",       "missing",  "invalid",
    "forbidden", "store_error", "bypassed", "not_holder",
};

static const char *const lock_outcome_names[LOCK_OUT_N] = {
    "acquired", "busy", "extended", "released", "lost", "error",
};

/* Status classes 1xx to 5xx: the class label of
 * tidemark_upstream_responses_total. */
#define CLASSES 5

struct named {
    struct named *next;
    uint64_t n[OUT_N];    /* routes: decisions */
    struct histo latency; /* upstreams */
    uint64_t classes[CLASSES];
    uint64_t errors;
    uint64_t timeouts;
    uint64_t resolve_failures;
    uint64_t dial_deferred;
    char name[];
};

struct metrics {
    double kept[MID_N]; /* the KEPT families */
    struct named *routes;
    struct named *upstreams;
    struct histo store;
    uint64_t store_errors;
    uint64_t lock_calls[LOCK_OUT_N];
};

struct metrics *
metrics_new(void)
{
    struct metrics *m = calloc(1, sizeof(struct metrics));

    if (m != NULL) {
        metrics_reload(m, true);
    }
    return m;
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

/* ---- what happened ------------------------------------------------------ */

void
metrics_inc(struct metrics *m, enum metric_id id)
{
    m->kept[id]++;
}

void
metrics_reload(struct metrics *m, bool ok)
{
    struct timespec now;

    m->kept[MID_tidemark_config_last_reload_successful] = ok;
    if (ok) {
        /* To the millisecond. */
        clock_gettime(CLOCK_REALTIME, &now);
        m->kept[MID_tidemark_config_last_reload_success_timestamp_seconds] =
            (double)now.tv_sec + (double)(now.tv_nsec / 1000000) / 1e3;
    }
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
metrics_upstream_answer(struct metrics *m, const char *upstream, int status,
                        double seconds)
{
    struct named *n = find(&m->upstreams, upstream);

    if (n != NULL) {
        observe(&n->latency, seconds);
        /* The parser takes 100 to 599 only. */
        if (status >= 100 && status < 100 * (CLASSES + 1)) {
            n->classes[status / 100 - 1]++;
        }
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

void
metrics_upstream_resolve_failure(struct metrics *m, const char *upstream)
{
    struct named *n = find(&m->upstreams, upstream);

    if (n != NULL) {
        n->resolve_failures++;
    }
}

void
metrics_upstream_dial_deferred(struct metrics *m, const char *upstream)
{
    struct named *n = find(&m->upstreams, upstream);

    if (n != NULL) {
        n->dial_deferred++;
    }
}

void
metrics_lock_call(struct metrics *m, enum lock_outcome o)
{
    m->lock_calls[o]++;
}

/* ---- the printer --------------------------------------------------------- */

const char *
metrics_name(enum metric_id id)
{
    return defs[id].name;
}

void
metrics_head(struct evbuffer *out, enum metric_id id)
{
    const struct metric_def *d = &defs[id];

    evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", d->name, d->help,
                        d->name, type_names[d->type]);
}

/* A value as Prometheus reads it: whole numbers without a fraction,
 * exactly up to 10^15. */
static void
add_value(struct evbuffer *out, double v)
{
    if (isinf(v)) {
        evbuffer_add_printf(out, " %sInf\n", v > 0 ? "+" : "-");
        return;
    }
    evbuffer_add_printf(out, " %.15g\n", v);
}

void
metrics_value(struct evbuffer *out, enum metric_id id, double v)
{
    evbuffer_add_printf(out, "%s", defs[id].name);
    add_value(out, v);
}

void
metrics_sample(struct evbuffer *out, enum metric_id id, double v,
               const char *fmt, ...)
{
    va_list ap;

    evbuffer_add_printf(out, "%s{", defs[id].name);
    va_start(ap, fmt);
    evbuffer_add_vprintf(out, fmt, ap);
    va_end(ap);
    evbuffer_add(out, "}", 1);
    add_value(out, v);
}

static void
write_histo(struct evbuffer *out, enum metric_id id, const char *label,
            const char *value, const struct histo *h)
{
    const char *name = defs[id].name;
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

/* ---- the process, from /proc/self ------------------------------------- */

struct proc {
    bool stat_ok;
    struct procstat st;
    bool btime_ok;
    uint64_t btime;
    long fds; /* -1: unknown */
    double max_fds;
};

/* Read path whole into buf (NUL-terminated); its length, or -1. */
static ssize_t
read_file(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t n = 0;
    ssize_t got = 0;

    if (fd < 0) {
        return -1;
    }
    while (n < size - 1 && (got = read(fd, buf + n, size - 1 - n)) > 0) {
        n += (size_t)got;
    }
    close(fd);
    if (got < 0) {
        return -1;
    }
    buf[n] = '\0';
    return (ssize_t)n;
}

/* The boot time from /proc/stat, read a line at a time: the file holds
 * a line per CPU and per interrupt before it. */
static bool
read_btime(uint64_t *out)
{
    FILE *f = fopen("/proc/stat", "re");
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    bool ok = false;

    if (f == NULL) {
        return false;
    }
    while (!ok && (n = getline(&line, &cap, f)) > 0) {
        ok = procstat_btime(line, (size_t)n, out);
    }
    free(line);
    fclose(f);
    return ok;
}

/* Open descriptors: the entries of /proc/self/fd but the one reading it. */
static long
count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    long n = 0;

    if (d == NULL) {
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d)) {
            n++;
        }
    }
    closedir(d);
    return n;
}

static void
proc_read(struct proc *p)
{
    char buf[8192];
    ssize_t n;
    struct rlimit rl;

    memset(p, 0, sizeof(*p));
    n = read_file("/proc/self/stat", buf, sizeof(buf));
    p->stat_ok = n > 0 && procstat_parse(buf, (size_t)n, &p->st);
    p->btime_ok = read_btime(&p->btime);
    p->fds = count_fds();
    p->max_fds = -1;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        p->max_fds = rl.rlim_cur == RLIM_INFINITY ? -1 : (double)rl.rlim_cur;
    }
}

/* The value of a PROC family; false when it cannot be read. */
static bool
proc_value(const struct proc *p, enum metric_id id, double *v)
{
    double tick = (double)sysconf(_SC_CLK_TCK);
    double page = (double)sysconf(_SC_PAGESIZE);

    switch (id) {
    case MID_process_cpu_seconds_total:
        *v = (double)(p->st.utime + p->st.stime) / tick;
        return p->stat_ok && tick > 0;
    case MID_process_open_fds:
        *v = (double)p->fds;
        return p->fds >= 0;
    case MID_process_max_fds:
        *v = p->max_fds;
        return p->max_fds >= 0;
    case MID_process_virtual_memory_bytes:
        *v = (double)p->st.vsize;
        return p->stat_ok;
    case MID_process_resident_memory_bytes:
        *v = (double)p->st.rss * page;
        return p->stat_ok && page > 0;
    case MID_process_start_time_seconds:
        *v = (double)p->btime + (double)p->st.starttime / tick;
        return p->stat_ok && p->btime_ok && tick > 0;
    case MID_tidemark_log_lines_dropped_total:
        *v = (double)log_dropped_total();
        return true;
    default:
        return false;
    }
}

/* ---- the families the registry keeps ---------------------------------- */

static void
write_labelled(const struct metrics *m, enum metric_id id, const char *backend,
               struct evbuffer *out)
{
    const struct named *n;

    switch (id) {
    case MID_tidemark_build_info:
        metrics_sample(out, id, 1, "version=\"%s\"", TM_VERSION);
        break;
    case MID_tidemark_decisions_total:
        for (n = m->routes; n != NULL; n = n->next) {
            for (int o = 0; o < OUT_N; o++) {
                metrics_sample(out, id, (double)n->n[o],
                               "route=\"%s\",outcome=\"%s\"", n->name,
                               outcome_names[o]);
            }
        }
        break;
    case MID_tidemark_store_raise_seconds:
        write_histo(out, id, "backend", backend, &m->store);
        break;
    case MID_tidemark_store_raise_errors_total:
        metrics_sample(out, id, (double)m->store_errors, "backend=\"%s\"",
                       backend);
        break;
    case MID_tidemark_upstream_response_seconds:
        for (n = m->upstreams; n != NULL; n = n->next) {
            write_histo(out, id, "upstream", n->name, &n->latency);
        }
        break;
    case MID_tidemark_upstream_responses_total:
        for (n = m->upstreams; n != NULL; n = n->next) {
            for (int c = 0; c < CLASSES; c++) {
                metrics_sample(out, id, (double)n->classes[c],
                               "upstream=\"%s\",class=\"%dxx\"", n->name,
                               c + 1);
            }
        }
        break;
    case MID_tidemark_upstream_errors_total:
        for (n = m->upstreams; n != NULL; n = n->next) {
            metrics_sample(out, id, (double)n->errors,
                           "upstream=\"%s\",kind=\"error\"", n->name);
            metrics_sample(out, id, (double)n->timeouts,
                           "upstream=\"%s\",kind=\"timeout\"", n->name);
        }
        break;
    case MID_tidemark_upstream_resolve_failures_total:
        for (n = m->upstreams; n != NULL; n = n->next) {
            metrics_sample(out, id, (double)n->resolve_failures,
                           "upstream=\"%s\"", n->name);
        }
        break;
    case MID_tidemark_upstream_dial_deferred_total:
        for (n = m->upstreams; n != NULL; n = n->next) {
            metrics_sample(out, id, (double)n->dial_deferred, "upstream=\"%s\"",
                           n->name);
        }
        break;
    case MID_tidemark_lock_calls_total:
        for (int o = 0; o < LOCK_OUT_N; o++) {
            metrics_sample(out, id, (double)m->lock_calls[o], "outcome=\"%s\"",
                           lock_outcome_names[o]);
        }
        break;
    default:
        break;
    }
}

void
metrics_write(const struct metrics *m, const char *backend,
              struct evbuffer *out)
{
    struct proc p;
    double v;

    proc_read(&p);
    for (int i = 0; i < MID_N; i++) {
        enum metric_id id = (enum metric_id)i;

        switch (defs[id].source) {
        case METRIC_KEPT:
            metrics_head(out, id);
            metrics_value(out, id, m->kept[id]);
            break;
        case METRIC_LABELS:
            metrics_head(out, id);
            write_labelled(m, id, backend, out);
            break;
        case METRIC_PROC:
            /* Left out when /proc cannot tell, as the Go and Python
             * clients do. */
            if (proc_value(&p, id, &v)) {
                metrics_head(out, id);
                metrics_value(out, id, v);
            }
            break;
        case METRIC_OWNER:
            break;
        }
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
