/* test_dial.c: the addresses of a host tried in order within one
 * deadline: the share of time each gets, numeric resolution, and a dial
 * on loopback that passes over a refused address. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>
#include <event2/event.h>

#include "../../proxy/clients/dial.h"

static void
test_share(void **state)
{
    (void)state;
    assert_int_equal(dial_share_ms(1000, 1), 1000);
    assert_int_equal(dial_share_ms(1000, 2), 500);
    assert_int_equal(dial_share_ms(1000, 3), 333);
    assert_int_equal(dial_share_ms(0, 2), 1);
    assert_int_equal(dial_share_ms(-50, 1), 1);
}

static void
test_resolve_numeric(void **state)
{
    struct dial_list l;
    char err[256];

    (void)state;
    assert_true(dial_resolve("127.0.0.1", 8080, &l, err, sizeof(err)));
    assert_int_equal(l.n, 1);
    assert_string_equal(l.a[0].ip, "127.0.0.1");
    assert_string_equal(l.a[0].text, "127.0.0.1:8080");
    assert_true(dial_resolve("::1", 6379, &l, err, sizeof(err)));
    assert_int_equal(l.n, 1);
    assert_string_equal(l.a[0].ip, "::1");
    assert_string_equal(l.a[0].text, "[::1]:6379");
}

/* Two lists of one set in another order are the same; one address more
 * or another port is another set. */
static void
test_same_set(void **state)
{
    struct dial_list a, b, c;
    char err[256], text[64];

    (void)state;
    assert_true(dial_resolve("::1", 80, &a, err, sizeof(err)));
    assert_true(dial_resolve("127.0.0.1", 80, &b, err, sizeof(err)));
    a.a[1] = b.a[0];
    a.n = 2;
    b.a[1] = a.a[0];
    b.n = 2;
    assert_true(dial_same(&a, &b));
    dial_list_text(&a, text, sizeof(text));
    assert_string_equal(text, "::1,127.0.0.1");
    dial_list_text(&a, text, 6);
    assert_string_equal(text, "::1,1");
    c = b;
    c.n = 1;
    assert_false(dial_same(&a, &c));
    assert_false(dial_same(&c, &a));
    assert_true(dial_resolve("127.0.0.1", 81, &c, err, sizeof(err)));
    c.a[1] = a.a[0];
    c.n = 2;
    assert_false(dial_same(&a, &c));
}

struct result {
    int fd;
    int err;
    size_t index;
    int calls;
};

static void
on_dialed(void *arg, int fd, int err, size_t index)
{
    struct result *r = arg;

    r->fd = fd;
    r->err = err;
    r->index = index;
    r->calls++;
}

/* A list of ::1 (no listener there) then 127.0.0.1 on port; lfd: a
 * listener on 127.0.0.1, its port in *port. */
static void
two_addresses(struct dial_list *l, int *lfd, int *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    struct dial_list v4;
    char err[256];

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    *lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(*lfd >= 0);
    assert_int_equal(bind(*lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(*lfd, 4), 0);
    assert_int_equal(getsockname(*lfd, (struct sockaddr *)&sa, &len), 0);
    *port = ntohs(sa.sin_port);
    assert_true(dial_resolve("::1", *port, l, err, sizeof(err)));
    assert_true(dial_resolve("127.0.0.1", *port, &v4, err, sizeof(err)));
    l->a[l->n++] = v4.a[0];
}

static void
test_dial_passes_over_a_refused_address(void **state)
{
    struct event_base *base = event_base_new();
    struct result r = {.fd = -2};
    struct dial_list l;
    struct dial *d;
    int lfd, port;

    (void)state;
    two_addresses(&l, &lfd, &port);
    d = dial_start(base, &l, 0, 2000, "test", on_dialed, &r);
    assert_non_null(d);
    assert_int_equal(r.calls, 0); /* never from inside dial_start */
    while (r.calls == 0) {
        event_base_loop(base, EVLOOP_ONCE);
    }
    assert_int_equal(r.calls, 1);
    assert_true(r.fd >= 0);
    assert_int_equal(r.index, 1);
    close(r.fd);
    close(lfd);
    event_base_free(base);
}

static void
test_dial_every_address_refused(void **state)
{
    struct event_base *base = event_base_new();
    struct result r = {.fd = -2};
    struct dial_list l;
    struct dial *d;
    int lfd, port;

    (void)state;
    two_addresses(&l, &lfd, &port);
    close(lfd); /* nobody listens now */
    d = dial_start(base, &l, 1, 2000, "test", on_dialed, &r);
    assert_non_null(d);
    while (r.calls == 0) {
        event_base_loop(base, EVLOOP_ONCE);
    }
    assert_int_equal(r.fd, -1);
    assert_int_equal(r.err, ECONNREFUSED);
    event_base_free(base);
}

static void
test_dial_cancel(void **state)
{
    struct event_base *base = event_base_new();
    struct result r = {.fd = -2};
    struct dial_list l;
    int lfd, port;

    (void)state;
    two_addresses(&l, &lfd, &port);
    dial_cancel(dial_start(base, &l, 1, 2000, "test", on_dialed, &r));
    event_base_loop(base, EVLOOP_NONBLOCK);
    assert_int_equal(r.calls, 0);
    close(lfd);
    event_base_free(base);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_share),
        cmocka_unit_test(test_resolve_numeric),
        cmocka_unit_test(test_same_set),
        cmocka_unit_test(test_dial_passes_over_a_refused_address),
        cmocka_unit_test(test_dial_every_address_refused),
        cmocka_unit_test(test_dial_cancel),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
