/* test_up.c: the upstream pool on loopback: a request that finds no idle
 * connection is served by one given back in the same loop pass, without
 * a new connection; one still waiting at the pass's end dials; and the
 * connections beyond max_idle are closed once idle a while (a burst
 * soon after reuses them); without a file descriptor to dial with, the
 * requests wait in line for connections given back, and the first gives
 * up at its connect timeout; its callback may free the pool. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <cmocka.h>
#include <event2/event.h>

#include "../../conf/cfg.h"
#include "../../proxy/metrics.h"
#include "../../proxy/path/up.h"

struct got {
    struct up_conn *uc;
    int calls;
};

static void
on_ready(void *arg, struct up_conn *uc, bool ok)
{
    struct got *g = arg;

    assert_true(ok);
    g->uc = uc;
    g->calls++;
}

/* A connection that could not be made: errno kept. */
static void
on_failed(void *arg, struct up_conn *uc, bool ok)
{
    struct got *g = arg;

    assert_false(ok);
    (void)uc;
    g->calls = errno;
}

/* A listening socket on a free loopback port; its port in *port. */
static int
listener(char *port, size_t len)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

    assert_true(fd >= 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(fd, 16), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    snprintf(port, len, "%d", ntohs(sa.sin_port));
    return fd;
}

/* Run the loop until g has its connection. */
static void
wait_ready(struct event_base *base, struct got *g)
{
    for (int i = 0; i < 1000 && g->calls == 0; i++) {
        event_base_loop(base, EVLOOP_ONCE);
    }
    assert_int_equal(g->calls, 1);
}

struct fixture {
    struct event_base *base;
    struct cfg_upstream cfg;
    struct up_pool *pool;
    char port[16];
    int lfd;
    int peer[8]; /* the accepted ends, open until teardown */
    int npeer;
};

/* The connections accepted since the last call. */
static int
accepted(struct fixture *f)
{
    int n = 0;
    int fd;

    while ((fd = accept(f->lfd, NULL, NULL)) >= 0) {
        assert_true(f->npeer < 8);
        f->peer[f->npeer++] = fd;
        n++;
    }
    assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
    return n;
}

static void
setup(struct fixture *f, int max_idle)
{
    static struct up_names names; /* an address: no lookup */
    char err[256];

    memset(f, 0, sizeof(*f));
    f->base = event_base_new();
    f->lfd = listener(f->port, sizeof(f->port));
    f->cfg.name = "t";
    f->cfg.host = "127.0.0.1";
    f->cfg.port = f->port;
    f->cfg.connect_timeout_ms = 5000;
    f->cfg.timeout_ms = 5000;
    f->cfg.max_idle = max_idle;
    f->pool = up_pool_new(f->base, &f->cfg, &names, err, sizeof(err));
    assert_non_null(f->pool);
}

static void
teardown(struct fixture *f)
{
    up_pool_free(f->pool);
    for (int i = 0; i < f->npeer; i++) {
        close(f->peer[i]);
    }
    close(f->lfd);
    event_base_free(f->base);
}

/* Dial n connections, all handed out at once. */
static void
dial_n(struct fixture *f, struct got *g, int n)
{
    for (int i = 0; i < n; i++) {
        memset(&g[i], 0, sizeof(g[i]));
        assert_non_null(up_connect(f->pool, on_ready, &g[i]));
    }
    for (int i = 0; i < n; i++) {
        wait_ready(f->base, &g[i]);
    }
    assert_int_equal(accepted(f), n);
    assert_int_equal(up_busy_count(f->pool), n);
}

static void
test_given_back_in_the_pass_serves_the_waiting(void **state)
{
    struct fixture f;
    struct got a, b;

    (void)state;
    setup(&f, 1);
    dial_n(&f, &a, 1);
    /* No idle connection: b waits; a comes back in the same pass. */
    memset(&b, 0, sizeof(b));
    assert_null(up_take_idle(f.pool));
    assert_non_null(up_connect(f.pool, on_ready, &b));
    up_put(a.uc, true);
    wait_ready(f.base, &b);
    assert_ptr_equal(b.uc, a.uc);
    assert_true(up_reused(b.uc));
    assert_int_equal(accepted(&f), 0);
    up_put(b.uc, false);
    teardown(&f);
}

static void
test_beyond_max_idle_closed_once_idle_a_while(void **state)
{
    struct fixture f;
    struct got g[3];
    struct up_conn *again[2];
    struct timespec t0, t1;

    (void)state;
    setup(&f, 1);
    dial_n(&f, g, 3);
    for (int i = 0; i < 3; i++) {
        up_put(g[i].uc, true);
    }
    /* A pass later all three are still there: the next burst takes two
     * back without dialing. */
    event_base_loop(f.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    assert_int_equal(up_idle_count(f.pool), 3);
    again[0] = up_take_idle(f.pool);
    again[1] = up_take_idle(f.pool);
    assert_ptr_equal(again[0], g[2].uc);
    assert_ptr_equal(again[1], g[1].uc);
    up_put(again[1], true);
    up_put(again[0], true);
    assert_int_equal(accepted(&f), 0);
    /* Idle beyond max_idle for a while, the two oldest are closed. */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 100 && up_idle_count(f.pool) > 1; i++) {
        event_base_loop(f.base, EVLOOP_ONCE);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_int_equal(up_idle_count(f.pool), 1);
    assert_true((t1.tv_sec - t0.tv_sec) * 1000 +
                    (t1.tv_nsec - t0.tv_nsec) / 1000000 >=
                50);
    /* The one kept is the most recently given back. */
    assert_ptr_equal(up_take_idle(f.pool), g[2].uc);
    up_put(g[2].uc, false);
    teardown(&f);
}

/* No descriptor can be opened until restore(). */
static void
exhaust(struct rlimit *saved)
{
    struct rlimit rl;
    int lowest = dup(0);

    assert_true(lowest >= 0);
    close(lowest);
    assert_int_equal(getrlimit(RLIMIT_NOFILE, saved), 0);
    rl = *saved;
    rl.rlim_cur = (rlim_t)lowest;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

static void
restore(const struct rlimit *saved)
{
    assert_int_equal(setrlimit(RLIMIT_NOFILE, saved), 0);
}

/* setup's, with a pool that counts into names and gives up dialing
 * after connect_timeout_ms. */
static void
setup_counted(struct fixture *f, struct up_names *names, int timeout_ms)
{
    char err[256];

    setup(f, 4);
    up_pool_free(f->pool);
    f->cfg.connect_timeout_ms = timeout_ms;
    f->pool = up_pool_new(f->base, &f->cfg, names, err, sizeof(err));
    assert_non_null(f->pool);
}

static void
test_no_descriptor_waits_for_one_given_back(void **state)
{
    static struct up_names names; /* counts the waits */
    struct fixture f;
    struct got a, b, c, d;
    struct rlimit saved;

    (void)state;
    names.metrics = metrics_new();
    setup_counted(&f, &names, 100);
    dial_n(&f, &a, 1);
    memset(&b, 0, sizeof(b));
    memset(&c, 0, sizeof(c));
    memset(&d, 0, sizeof(d));
    /* No descriptor: b and c wait, no failure at the first dial. */
    exhaust(&saved);
    assert_non_null(up_connect(f.pool, on_ready, &b));
    assert_non_null(up_connect(f.pool, on_ready, &c));
    for (int i = 0; i < 5; i++) {
        event_base_loop(f.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    }
    assert_int_equal(b.calls + c.calls, 0);
    /* The connection given back goes to the first in line. */
    up_put(a.uc, true);
    wait_ready(f.base, &b);
    assert_ptr_equal(b.uc, a.uc);
    assert_int_equal(c.calls, 0);
    /* A descriptor free again: the next in line dials. */
    restore(&saved);
    wait_ready(f.base, &c);
    assert_int_equal(accepted(&f), 1);
    up_put(b.uc, false);
    up_put(c.uc, false);
    /* Their sockets are closed on the next pass. */
    event_base_loop(f.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    /* With none given back, the wait ends at the connect timeout. */
    exhaust(&saved);
    assert_non_null(up_connect(f.pool, on_failed, &d));
    for (int i = 0; i < 1000 && d.calls == 0; i++) {
        event_base_loop(f.base, EVLOOP_ONCE);
    }
    restore(&saved);
    assert_int_equal(d.calls, EMFILE);
    teardown(&f);
    metrics_free(names.metrics);
}

/* The failure callback of the last request of a retired generation: it
 * frees the pool, as gen_drop does. */
struct last {
    struct up_pool **pool;
    int calls;
};

static void
on_failed_free_pool(void *arg, struct up_conn *uc, bool ok)
{
    struct last *l = arg;

    assert_false(ok);
    (void)uc;
    l->calls = errno;
    up_pool_free(*l->pool);
    *l->pool = NULL;
}

static void
test_the_last_to_give_up_may_free_the_pool(void **state)
{
    static struct up_names names;
    struct fixture f;
    struct last l = {&f.pool, 0};
    struct rlimit saved;

    (void)state;
    names.metrics = metrics_new();
    setup_counted(&f, &names, 50);
    /* It waits for a descriptor, gives up at its connect timeout, and
     * frees the pool in its callback: the pool must not be touched
     * after (an ASan build reports it, else the heap is corrupted). */
    exhaust(&saved);
    assert_non_null(up_connect(f.pool, on_failed_free_pool, &l));
    for (int i = 0; i < 1000 && l.calls == 0; i++) {
        event_base_loop(f.base, EVLOOP_ONCE);
    }
    restore(&saved);
    assert_int_equal(l.calls, EMFILE);
    assert_null(f.pool);
    /* No timer of the freed pool is left on the loop. */
    assert_int_equal(event_base_get_num_events(f.base, EVENT_BASE_COUNT_ADDED),
                     0);
    teardown(&f);
    metrics_free(names.metrics);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_given_back_in_the_pass_serves_the_waiting),
        cmocka_unit_test(test_beyond_max_idle_closed_once_idle_a_while),
        cmocka_unit_test(test_no_descriptor_waits_for_one_given_back),
        cmocka_unit_test(test_the_last_to_give_up_may_free_the_pool),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
