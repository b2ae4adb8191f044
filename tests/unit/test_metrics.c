/* test_metrics.c: the registry against its table: every family but the
 * OWNER ones is written once, HELP then TYPE, in the table's order; the
 * counters and gauges show what was recorded; status classes; the one
 * sample format. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "../../proxy/metrics.h"

static const enum metric_source sources[MID_N] = {
#define SOURCE(name, type, source, help) METRIC_##source,
    TM_METRICS(SOURCE)
#undef SOURCE
};

/* What metrics_write wrote, NUL-terminated (malloc'd). */
static char *
written(const struct metrics *m)
{
    struct evbuffer *b = evbuffer_new();
    size_t n;
    char *text;

    assert_non_null(b);
    metrics_write(m, "lmdb", b);
    n = evbuffer_get_length(b);
    text = malloc(n + 1);
    assert_non_null(text);
    evbuffer_remove(b, text, n);
    text[n] = '\0';
    evbuffer_free(b);
    return text;
}

/* Whether text has the line line. */
static bool
has_line(const char *text, const char *line)
{
    size_t n = strlen(line);

    for (const char *p = text; (p = strstr(p, line)) != NULL; p++) {
        if ((p == text || p[-1] == '\n') && p[n] == '\n') {
            return true;
        }
    }
    return false;
}

static void
test_every_family_once_in_order(void **state)
{
    struct metrics *m = metrics_new();
    char *text;
    const char *at;
    char head[256];

    (void)state;
    assert_non_null(m);
    text = written(m);
    at = text;
    for (int i = 0; i < MID_N; i++) {
        const char *found;

        snprintf(head, sizeof(head), "# HELP %s ", metrics_name(i));
        found = strstr(text, head);
        if (sources[i] == METRIC_OWNER) {
            assert_null(found);
            continue;
        }
        if (found == NULL) {
            fail_msg("no HELP for %s", metrics_name(i));
        }
        assert_true(found >= at);
        assert_null(strstr(found + 1, head));
        snprintf(head, sizeof(head), "\n# TYPE %s ", metrics_name(i));
        assert_non_null(strstr(found, head));
        at = found;
    }
    free(text);
    metrics_free(m);
}

static void
test_counts(void **state)
{
    struct metrics *m = metrics_new();
    char *text;

    (void)state;
    metrics_inc(m, MID_tidemark_requests_total);
    metrics_inc(m, MID_tidemark_requests_total);
    metrics_decision(m, "docs", OUT_STALE);
    metrics_decision(m, NULL, OUT_BYPASSED);
    metrics_upstream_answer(m, "up", 200, 0.001);
    metrics_upstream_answer(m, "up", 299, 0.001);
    metrics_upstream_answer(m, "up", 100, 0.001);
    metrics_upstream_answer(m, "up", 599, 0.001);
    metrics_upstream_answer(m, "up", 600, 0.001); /* no class */
    metrics_upstream_error(m, "up", true);
    metrics_lock_call(m, LOCK_OUT_LOST);
    metrics_store(m, 0.002, false);
    text = written(m);
    assert_true(has_line(text, "tidemark_requests_total 2"));
    assert_true(has_line(text, "tidemark_bad_requests_total 0"));
    assert_true(has_line(
        text, "tidemark_decisions_total{route=\"docs\",outcome=\"stale\"} 1"));
    assert_true(has_line(
        text, "tidemark_decisions_total{route=\"\",outcome=\"bypassed\"} 1"));
    assert_true(has_line(text, "tidemark_upstream_responses_total{upstream="
                               "\"up\",class=\"2xx\"} 2"));
    assert_true(has_line(text, "tidemark_upstream_responses_total{upstream="
                               "\"up\",class=\"1xx\"} 1"));
    assert_true(has_line(text, "tidemark_upstream_responses_total{upstream="
                               "\"up\",class=\"5xx\"} 1"));
    assert_true(has_line(text, "tidemark_upstream_response_seconds_count{"
                               "upstream=\"up\"} 5"));
    assert_true(has_line(text, "tidemark_upstream_errors_total{upstream="
                               "\"up\",kind=\"timeout\"} 1"));
    assert_true(
        has_line(text, "tidemark_lock_calls_total{outcome=\"lost\"} 1"));
    assert_true(has_line(
        text, "tidemark_store_raise_errors_total{backend=\"lmdb\"} 1"));
    free(text);
    metrics_free(m);
}

/* The value of the sample line "name v". */
static double
kept(const char *text, const char *name)
{
    char line[128];
    const char *p;

    snprintf(line, sizeof(line), "\n%s ", name);
    p = strstr(text, line);
    assert_non_null(p);
    return strtod(p + strlen(line), NULL);
}

static void
test_reload(void **state)
{
    /* The wall clock around the load, with a few seconds' slack: this
     * clock may be stepped while the test runs (it once failed with the
     * clock read after the load and a second's slack). */
    time_t t0 = time(NULL);
    struct metrics *m = metrics_new();
    time_t t1 = time(NULL);
    char *text;
    double ts;

    (void)state;
    text = written(m);
    assert_true(kept(text, "tidemark_config_last_reload_successful") == 1);
    ts = kept(text, "tidemark_config_last_reload_success_timestamp_seconds");
    assert_true(ts >= (double)t0 - 5 && ts <= (double)t1 + 5);
    free(text);
    metrics_reload(m, false);
    text = written(m);
    assert_true(kept(text, "tidemark_config_last_reload_successful") == 0);
    assert_true(kept(text, "tidemark_config_last_reload_success_"
                           "timestamp_seconds") == ts);
    free(text);
    metrics_free(m);
}

static void
test_sample_format(void **state)
{
    struct evbuffer *b = evbuffer_new();
    char text[512];
    size_t n;

    (void)state;
    metrics_head(b, MID_tidemark_connections);
    metrics_value(b, MID_tidemark_connections, 3);
    metrics_sample(b, MID_tidemark_upstream_connections, 1234567890123.0,
                   "upstream=\"%s\"", "a");
    metrics_value(b, MID_tidemark_order_start_hold_seconds, 0.25);
    n = evbuffer_remove(b, text, sizeof(text) - 1);
    text[n] = '\0';
    assert_string_equal(text,
                        "# HELP tidemark_connections Open client "
                        "connections.\n# TYPE tidemark_connections gauge\n"
                        "tidemark_connections 3\n"
                        "tidemark_upstream_connections{upstream=\"a\"} "
                        "1234567890123\n"
                        "tidemark_order_start_hold_seconds 0.25\n");
    evbuffer_free(b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_family_once_in_order),
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_reload),
        cmocka_unit_test(test_sample_format),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
