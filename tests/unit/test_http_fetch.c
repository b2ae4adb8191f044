/* test_http_fetch.c: a fetch's host name is looked up without blocking
 * the loop: a resolver that never answers ends the fetch at its deadline
 * with "cannot resolve", a cancel while the lookup is in flight runs no
 * callback and leaks nothing, and an IP address is not looked up. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>
#include <event2/dns.h>
#include <event2/event.h>

#include "../../proxy/clients/dial.h"
#include "../../proxy/clients/http_fetch.h"

struct result {
    int calls;
    int status;
    char why[320];
};

static void
on_answer(void *arg, const struct http_fetch_answer *a)
{
    struct result *r = arg;

    r->calls++;
    r->status = a->status;
    snprintf(r->why, sizeof(r->why), "%s", a->why != NULL ? a->why : "");
}

/* A UDP socket on loopback that is never read: a nameserver that never
 * answers. Its port in *port. */
static int
silent_udp(int *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    *port = ntohs(sa.sin_port);
    return fd;
}

/* An evdns base asking only the silent nameserver, as [proxy] resolver
 * sets it up (2 tries of 2 s). */
static struct evdns_base *
silent_dns(struct event_base *base, int *fd)
{
    struct evdns_base *dns = evdns_base_new(base, 0);
    char ns[32];
    int port;

    assert_non_null(dns);
    *fd = silent_udp(&port);
    snprintf(ns, sizeof(ns), "127.0.0.1:%d", port);
    assert_int_equal(evdns_base_nameserver_ip_add(dns, ns), 0);
    evdns_base_set_option(dns, "timeout:", "2");
    evdns_base_set_option(dns, "attempts:", "2");
    return dns;
}

static struct http_fetch *
get(struct event_base *base, struct evdns_base *dns, const char *url,
    unsigned long *asked, struct result *r)
{
    struct http_fetch_req rq = {"GET", url,  NULL, NULL, 0,
                                300,   1024, NULL, dns,  asked};
    char err[256];
    struct http_fetch *f =
        http_fetch_start(base, &rq, on_answer, r, err, sizeof(err));

    assert_non_null(f);
    assert_int_equal(r->calls, 0); /* never from inside http_fetch_start */
    return f;
}

static void
end(struct event_base *base, struct evdns_base *dns, int fd)
{
    event_base_loop(base, EVLOOP_NONBLOCK); /* cancelled lookups end */
    evdns_base_free(dns, 0);
    close(fd);
    event_base_free(base);
}

static void
test_a_silent_resolver_ends_the_fetch_at_its_deadline(void **state)
{
    struct event_base *base = event_base_new();
    struct result r = {0};
    unsigned long asked = 0;
    int fd;
    struct evdns_base *dns = silent_dns(base, &fd);
    int64_t t0 = dial_now_ms(), took;

    (void)state;
    (void)get(base, dns, "http://sts.example.test:8080/", &asked, &r);
    assert_int_equal(asked, 1);
    while (r.calls == 0) {
        event_base_loop(base, EVLOOP_ONCE);
    }
    took = dial_now_ms() - t0;
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.why, "cannot resolve sts.example.test: no answer "
                               "within 300 ms");
    assert_true(took >= 290 && took < 1900); /* 300 ms, not evdns's 4 s */
    end(base, dns, fd);
}

static void
test_a_cancel_during_the_lookup_runs_no_callback(void **state)
{
    struct event_base *base = event_base_new();
    struct result r = {0};
    unsigned long asked = 0;
    int fd;
    struct evdns_base *dns = silent_dns(base, &fd);

    (void)state;
    http_fetch_cancel(get(base, dns, "http://sts.example.test/", &asked, &r));
    assert_int_equal(asked, 1);
    end(base, dns, fd);
    assert_int_equal(r.calls, 0);
}

/* An address, and localhost (/etc/hosts), are not asked of the
 * resolver: the fetch goes straight to the connection (refused). */
static void
test_an_address_is_not_looked_up(void **state)
{
    static const char *const hosts[] = {"127.0.0.1", "[::1]", "localhost"};
    struct event_base *base = event_base_new();
    unsigned long asked = 0;
    int fd, port;
    struct evdns_base *dns = silent_dns(base, &fd);
    int closed = silent_udp(&port); /* no TCP listener on this port */
    char url[64];

    (void)state;
    for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
        struct result r = {0};

        snprintf(url, sizeof(url), "http://%s:%d/", hosts[i], port);
        (void)get(base, dns, url, &asked, &r);
        while (r.calls == 0) {
            event_base_loop(base, EVLOOP_ONCE);
        }
        assert_int_equal(r.status, 0);
        assert_null(strstr(r.why, "resolve"));
    }
    assert_int_equal(asked, 0);
    close(closed);
    end(base, dns, fd);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_silent_resolver_ends_the_fetch_at_its_deadline),
        cmocka_unit_test(test_a_cancel_during_the_lookup_runs_no_callback),
        cmocka_unit_test(test_an_address_is_not_looked_up),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
