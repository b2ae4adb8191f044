/* test_problem.c: problem documents (RFC 9457) stay valid JSON in
 * UTF-8 whatever their resource holds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "../../policies/utf8.h"
#include "../../proxy/problem.h"

/* A problem document is valid UTF-8 whatever its resource holds, also
 * when the resource is cut to fit: never in the middle of a sequence. */
static void
test_problem_body_stays_utf8(void **state)
{
    char resource[5000];
    char body[PROBLEM_BODY_MAX];
    size_t n;

    (void)state;
    for (size_t i = 0; i + 1 < sizeof(resource); i += 2) {
        resource[i] = (char)0xc3;
        resource[i + 1] = (char)0xa9;
    }
    resource[sizeof(resource) - 1] = '\0';
    for (size_t cut = 0; cut < 64; cut++) {
        struct problem p = {
            .status = 409, .resource = resource + cut, .token = 1, .mark = 2};

        resource[sizeof(resource) - 2 - cut] = (char)0xff;
        n = problem_body(body, sizeof(body), &p);
        assert_true(n < sizeof(body));
        assert_true(n > PROBLEM_BODY_MAX - 100); /* it was cut */
        assert_true(utf8_valid(body, n));
        assert_int_equal(body[n - 2], '}');
    }
}

/* The whole answer, byte for byte: head fields, numbers at their limits,
 * and the body whose length the head gives. */
static void
test_problem_write_exact(void **state)
{
    struct evbuffer *out = evbuffer_new();
    struct problem stale = {.status = 409,
                            .resource = "docs/a\"b",
                            .token = INT64_MIN,
                            .mark = INT64_MAX};
    struct problem busy = {.status = 503, .retry_after = 7};
    const char *want_stale =
        "HTTP/1.1 409 Conflict\r\n"
        "Content-Type: application/problem+json\r\n"
        "Content-Length: 299\r\n"
        "Tidemark-Error: stale-token\r\n"
        "Fencing-High-Water: 9223372036854775807\r\n"
        "\r\n"
        "{\"type\":\"urn:tidemark:stale-token\",\"title\":\"Stale fencing "
        "token\",\"status\":409,\"detail\":\"a write with a higher token has "
        "been accepted for this resource; stop the work: retrying with this "
        "token fails the same way\",\"resource\":\"docs/a\\\"b\",\"token\":"
        "-9223372036854775808,\"high_water\":9223372036854775807}\n";
    const char *want_busy =
        "HTTP/1.1 503 Service Unavailable\r\n"
        "Content-Type: application/problem+json\r\n"
        "Content-Length: 129\r\n"
        "Tidemark-Error: store-unavailable\r\n"
        "Retry-After: 7\r\n"
        "Connection: close\r\n"
        "\r\n"
        "{\"type\":\"urn:tidemark:store-unavailable\",\"title\":\"Mark store "
        "unavailable\",\"status\":503,\"detail\":\"the mark store cannot be "
        "used\"}\n";
    size_t len;
    char *got;

    (void)state;
    assert_non_null(out);
    problem_write(out, &stale, false);
    len = evbuffer_get_length(out);
    got = (char *)evbuffer_pullup(out, -1);
    assert_int_equal(len, strlen(want_stale));
    assert_memory_equal(got, want_stale, len);
    evbuffer_drain(out, len);
    problem_write(out, &busy, true);
    len = evbuffer_get_length(out);
    got = (char *)evbuffer_pullup(out, -1);
    assert_int_equal(len, strlen(want_busy));
    assert_memory_equal(got, want_busy, len);
    evbuffer_free(out);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_problem_body_stays_utf8),
        cmocka_unit_test(test_problem_write_exact),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
