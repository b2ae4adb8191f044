/* test_origin.c: the control port's Host, Origin and Sec-Fetch-Site rules
 * (policies/origin.c), one row per request a browser, curl or a probe
 * sends. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../policies/origin.h"

#define OK ORIGIN_OK
#define BAD ORIGIN_BAD_HOST
#define FOREIGN ORIGIN_FOREIGN_HOST
#define PORT ORIGIN_WRONG_PORT
#define XORIGIN ORIGIN_CROSS_ORIGIN
#define XFETCH ORIGIN_CROSS_FETCH
#define NOHOST ORIGIN_NO_HOST

struct origin_case {
    const char *listen; /* host of [admin] listen, port 7071 */
    const char *allowed;
    const char *host; /* NULL: absent */
    const char *origin;
    const char *fetch_site;
    enum origin_verdict want;
};

static const struct origin_case cases[] = {
    /* curl and probes: no Origin, no Sec-Fetch-*. */
    {"127.0.0.1", "", "127.0.0.1:7071", NULL, NULL, OK},
    {"127.0.0.1", "", "localhost:7071", NULL, NULL, OK},
    {"127.0.0.1", "", "LocalHost:7071", NULL, NULL, OK},
    {"127.0.0.1", "", "localhost.:7071", NULL, NULL, OK},
    {"127.0.0.1", "", "app.localhost:7071", NULL, NULL, OK},
    {"127.0.0.1", "", "127.9.8.7:7071", NULL, NULL, OK},
    {"127.0.0.1", "", "[::1]:7071", NULL, NULL, OK},
    {"127.0.0.1", "", "[::ffff:127.0.0.1]:7071", NULL, NULL, OK},
    {"127.0.0.1", "", " localhost:7071 ", NULL, NULL, OK},
    /* HTTP/1.1 needs a Host (RFC 9112 3.2); HTTP/1.0: cases10 below. */
    {"127.0.0.1", "", NULL, NULL, NULL, NOHOST},
    /* DNS rebinding: a name that is not ours. */
    {"127.0.0.1", "", "evil.example:7071", NULL, NULL, FOREIGN},
    {"127.0.0.1", "", "localhost.evil.example:7071", NULL, NULL, FOREIGN},
    {"127.0.0.1", "", "xlocalhost:7071", NULL, NULL, FOREIGN},
    {"127.0.0.1", "", "10.0.0.5:7071", NULL, NULL, FOREIGN},
    {"127.0.0.1", "", "[fd00::1]:7071", NULL, NULL, FOREIGN},
    /* ... unless the operator lists it. */
    {"127.0.0.1", "admin.example tm.internal", "tm.internal:7071", NULL, NULL,
     OK},
    {"127.0.0.1", " admin.example\ttm.internal ", "ADMIN.example:7071", NULL,
     NULL, OK},
    {"127.0.0.1", "admin.example", "admin.example.:7071", NULL, NULL, OK},
    {"127.0.0.1", "admin.example", "x.admin.example:7071", NULL, NULL, FOREIGN},
    {"127.0.0.1", "admin.example", "admin.exampl:7071", NULL, NULL, FOREIGN},
    /* The port is the control port's; a Host without one names port 80,
     * judged like "host:80" (a page on port 80 is another origin). */
    {"127.0.0.1", "", "localhost:7072", NULL, NULL, PORT},
    {"127.0.0.1", "", "127.0.0.1:80", NULL, NULL, PORT},
    {"127.0.0.1", "", "127.0.0.1", NULL, NULL, PORT},
    {"127.0.0.1", "", "localhost", NULL, NULL, PORT},
    {"127.0.0.1", "", "[::1]", NULL, NULL, PORT},
    {"127.0.0.1", "", "evil.example:7072", NULL, NULL, PORT},
    {"127.0.0.1", "", "evil.example", NULL, NULL, PORT},
    {"127.0.0.1", "", "127.0.0.1", "http://127.0.0.1", NULL, PORT},
    /* Malformed Host. */
    {"127.0.0.1", "", "", NULL, NULL, BAD},
    {"127.0.0.1", "", ":7071", NULL, NULL, BAD},
    {"127.0.0.1", "", "localhost:", NULL, NULL, BAD},
    {"127.0.0.1", "", "localhost:0", NULL, NULL, BAD},
    {"127.0.0.1", "", "localhost:65536", NULL, NULL, BAD},
    {"127.0.0.1", "", "localhost:7071:7071", NULL, NULL, BAD},
    {"127.0.0.1", "", "local host:7071", NULL, NULL, BAD},
    {"127.0.0.1", "", "user@localhost:7071", NULL, NULL, BAD},
    {"127.0.0.1", "", "[::1", NULL, NULL, BAD},
    {"127.0.0.1", "", "[]:7071", NULL, NULL, BAD},
    {"127.0.0.1", "", "[::1]x", NULL, NULL, BAD},
    {"127.0.0.1", "", "[localhost]:7071", NULL, NULL, BAD},
    {"127.0.0.1", "", "[abc]:7071", NULL, NULL, BAD},
    {"127.0.0.1", "", "[1:2:3]:7071", NULL, NULL, BAD},
    {"127.0.0.1", "", "[127.0.0.1]:7071", NULL, NULL, BAD},
    {"127.0.0.1", "", "[::1%lo]:7071", NULL, NULL, BAD},
    /* Listening on a pod address: that literal, and loopback. */
    {"10.1.2.3", "", "10.1.2.3:7071", NULL, NULL, OK},
    {"10.1.2.3", "", "10.1.2.4:7071", NULL, NULL, FOREIGN},
    {"10.1.2.3", "", "localhost:7071", NULL, NULL, OK},
    {"fd00::5", "", "[FD00:0::5]:7071", NULL, NULL, OK},
    /* On every address: any IP literal, names only from the lists. */
    {"0.0.0.0", "", "10.1.2.3:7071", NULL, NULL, OK},
    {"0.0.0.0", "", "[fd00::1]:7071", NULL, NULL, OK},
    {"::", "", "192.168.1.9:7071", NULL, NULL, OK},
    {"0.0.0.0", "", "pod.example:7071", NULL, NULL, FOREIGN},
    {"0.0.0.0", "pod.example", "pod.example:7071", NULL, NULL, OK},
    /* Listening on a name: that name. */
    {"tm-admin", "", "TM-ADMIN:7071", NULL, NULL, OK},
    {"tm-admin", "", "tm-admin2:7071", NULL, NULL, FOREIGN},
    /* The live page from its own origin. */
    {"127.0.0.1", "", "127.0.0.1:7071", NULL, "same-origin", OK},
    {"127.0.0.1", "", "127.0.0.1:7071", "http://127.0.0.1:7071", "same-origin",
     OK},
    {"127.0.0.1", "", "localhost:7071", "http://LOCALHOST:7071", NULL, OK},
    {"127.0.0.1", "", "[::1]:7071", "http://[::1]:7071", NULL, OK},
    /* Typed in the address bar. */
    {"127.0.0.1", "", "127.0.0.1:7071", NULL, "none", OK},
    /* Another port of the same host is another origin ("same-site"). */
    {"127.0.0.1", "", "127.0.0.1:7071", "http://127.0.0.1:8000", "same-site",
     XORIGIN},
    {"127.0.0.1", "", "127.0.0.1:7071", "http://127.0.0.1:8000", NULL, XORIGIN},
    {"127.0.0.1", "", "127.0.0.1:7071", NULL, "same-site", XFETCH},
    {"127.0.0.1", "", "127.0.0.1:7071", NULL, "cross-site", XFETCH},
    {"127.0.0.1", "", "127.0.0.1:7071", NULL, "", XFETCH},
    /* Another host name for the same address is another origin too. */
    {"127.0.0.1", "", "127.0.0.1:7071", "http://localhost:7071", NULL, XORIGIN},
    {"127.0.0.1", "", "127.0.0.1:7071", "https://127.0.0.1:7071", NULL,
     XORIGIN},
    {"127.0.0.1", "", "127.0.0.1:7071", "http://127.0.0.1:7071/", NULL,
     XORIGIN},
    {"127.0.0.1", "", "127.0.0.1:7071", "http://127.0.0.1", NULL, XORIGIN},
    {"127.0.0.1", "", "127.0.0.1:7071", "http://evil.example", "cross-site",
     XORIGIN},
    /* Sandboxed frames, file: pages, data: URLs. */
    {"127.0.0.1", "", "127.0.0.1:7071", "null", NULL, XORIGIN},
    {"127.0.0.1", "", "127.0.0.1:7071", "", NULL, XORIGIN},
    /* An Origin and no Host to compare it with. */
    {"127.0.0.1", "", NULL, "http://127.0.0.1:7071", NULL, NOHOST},
    /* Host is judged first. */
    {"127.0.0.1", "", "evil.example:7071", "http://evil.example:7071",
     "same-origin", FOREIGN},
};

/* The same rules over HTTP/1.0, which may leave Host out. */
static const struct origin_case cases10[] = {
    {"127.0.0.1", "", NULL, NULL, NULL, OK},
    {"127.0.0.1", "", "127.0.0.1:7071", NULL, NULL, OK},
    {"127.0.0.1", "", "evil.example:7071", NULL, NULL, FOREIGN},
    {"127.0.0.1", "", "localhost", NULL, NULL, PORT},
    {"127.0.0.1", "", NULL, "http://127.0.0.1:7071", NULL, XORIGIN},
    {"127.0.0.1", "", NULL, NULL, "cross-site", XFETCH},
};

static struct tm_slice
sl(const char *s)
{
    return (struct tm_slice){s, s != NULL ? strlen(s) : 0};
}

static void
run_table(const struct origin_case *table, size_t n, bool http11)
{
    for (size_t i = 0; i < n; i++) {
        const struct origin_case *c = &table[i];
        struct origin_self self = {sl(c->listen), 7071, c->allowed};
        enum origin_verdict got = origin_check(
            &self, http11, sl(c->host), sl(c->origin), sl(c->fetch_site));

        if (got != c->want) {
            fail_msg("case %zu (HTTP/1.%d, Host %s, Origin %s, "
                     "Sec-Fetch-Site %s): got %d, want %d",
                     i, http11 ? 1 : 0, c->host ? c->host : "-",
                     c->origin ? c->origin : "-",
                     c->fetch_site ? c->fetch_site : "-", (int)got,
                     (int)c->want);
        }
    }
}

static void
test_table(void **state)
{
    (void)state;
    run_table(cases, sizeof(cases) / sizeof(cases[0]), true);
    run_table(cases10, sizeof(cases10) / sizeof(cases10[0]), false);
}

/* The allowed list may be NULL (no [admin] allowed_hosts). */
static void
test_no_list(void **state)
{
    struct origin_self self = {sl("127.0.0.1"), 7071, NULL};

    (void)state;
    assert_int_equal(
        origin_check(&self, true, sl("localhost:7071"), sl(NULL), sl(NULL)),
        ORIGIN_OK);
    assert_int_equal(
        origin_check(&self, true, sl("x.example:7071"), sl(NULL), sl(NULL)),
        ORIGIN_FOREIGN_HOST);
}

/* A control port on port 80 is what a Host without a port names. */
static void
test_port_80(void **state)
{
    struct origin_self self = {sl("127.0.0.1"), 80, NULL};

    (void)state;
    assert_int_equal(
        origin_check(&self, true, sl("localhost"), sl(NULL), sl(NULL)),
        ORIGIN_OK);
    assert_int_equal(origin_check(&self, true, sl("127.0.0.1"),
                                  sl("http://127.0.0.1"), sl(NULL)),
                     ORIGIN_OK);
    assert_int_equal(
        origin_check(&self, true, sl("evil.example"), sl(NULL), sl(NULL)),
        ORIGIN_FOREIGN_HOST);
    assert_int_equal(
        origin_check(&self, true, sl("localhost:7071"), sl(NULL), sl(NULL)),
        ORIGIN_WRONG_PORT);
}

/* Values are slices, not strings: nothing past len is read. */
static void
test_slices(void **state)
{
    struct origin_self self = {{"127.0.0.1:7071", 9}, 7071, ""};
    const char host[] = "localhost:7071EXTRA";
    const char origin[] = "http://localhost:7071/path";

    (void)state;
    assert_int_equal(origin_check(&self, true, (struct tm_slice){host, 14},
                                  (struct tm_slice){origin, 21}, sl(NULL)),
                     ORIGIN_OK);
}

static void
test_status_and_reasons(void **state)
{
    (void)state;
    assert_int_equal(origin_status(ORIGIN_OK), 0);
    assert_int_equal(origin_status(ORIGIN_BAD_HOST), 400);
    assert_int_equal(origin_status(ORIGIN_NO_HOST), 400);
    assert_int_equal(origin_status(ORIGIN_FOREIGN_HOST), 421);
    assert_int_equal(origin_status(ORIGIN_WRONG_PORT), 421);
    assert_int_equal(origin_status(ORIGIN_CROSS_ORIGIN), 403);
    assert_int_equal(origin_status(ORIGIN_CROSS_FETCH), 403);
    assert_string_equal(origin_reason(ORIGIN_OK), "");
    for (int v = ORIGIN_BAD_HOST; v <= ORIGIN_CROSS_FETCH; v++) {
        assert_true(strlen(origin_reason((enum origin_verdict)v)) > 10);
    }
}

static void
test_name_ok(void **state)
{
    char long_name[254];

    (void)state;
    memset(long_name, 'a', sizeof(long_name));
    assert_true(origin_name_ok("admin.example", 13));
    assert_true(origin_name_ok("tm_1-a.b", 8));
    assert_true(origin_name_ok("10.0.0.5", 8));
    assert_false(origin_name_ok("", 0));
    assert_false(origin_name_ok("host:7071", 9));
    assert_false(origin_name_ok("[::1]", 5));
    assert_false(origin_name_ok("a/b", 3));
    assert_false(origin_name_ok("*.example", 9));
    assert_true(origin_name_ok(long_name, 253));
    assert_false(origin_name_ok(long_name, 254));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_no_list),
        cmocka_unit_test(test_port_80),
        cmocka_unit_test(test_slices),
        cmocka_unit_test(test_status_and_reasons),
        cmocka_unit_test(test_name_ok),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
