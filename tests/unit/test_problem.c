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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_problem_body_stays_utf8),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
