/* test_procstat.c: procstat_parse and procstat_btime against lines in
 * the kernel's format, names that hold spaces and parentheses, and
 * broken text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../policies/procstat.h"

/* Fields 3 to 52 of a real line, after "PID (NAME)". */
#define REST                                                                   \
    " S 1 18855 3533 0 -1 4194304 101 0 0 0 250 75 0 0 20 0 3 0 1316115 "      \
    "3133440 394 18446744073709551615 94921943117824 94921943137705 "          \
    "140724067413952 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 94921943153712 "         \
    "94921943155328 94922402197504 140724067420600 140724067420620 "           \
    "140724067420620 140724067422187 0\n"

struct stat_case {
    const char *in;
    bool ok;
};

static const struct stat_case cases[] = {
    {"18858 (tidemark)" REST, true},
    {"18858 (a b)" REST, true},
    {"18858 (x) S (y))" REST, true}, /* a name that ends in ')' */
    {"18858 ()" REST, true},
    {"18858 (tidemark)", false},
    {"18858 (tidemark) S 1 2 3", false},
    {"18858 tidemark" REST, false}, /* no ')' */
    {"", false},
    {"18858 (tidemark)  S 1 18855 3533 0 -1 4194304 101 0 0 0 250", false},
};

static void
test_stat_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct procstat st;
        bool ok = procstat_parse(cases[i].in, strlen(cases[i].in), &st);

        if (ok != cases[i].ok) {
            fail_msg("case %zu: %s", i, cases[i].in);
        }
        if (ok) {
            assert_int_equal(st.utime, 250);
            assert_int_equal(st.stime, 75);
            assert_int_equal(st.starttime, 1316115);
            assert_int_equal(st.vsize, 3133440);
            assert_int_equal(st.rss, 394);
        }
    }
}

static void
test_stat_bad_number(void **state)
{
    static const char text[] = "1 (t) S 1 18855 3533 0 -1 4194304 101 0 0 0 "
                               "2x0 75 0 0 20 0 3 0 1 2 3\n";
    static const char neg[] = "1 (t) S 1 18855 3533 0 -1 4194304 101 0 0 0 "
                              "250 75 0 0 20 0 3 0 1 2 -1\n";
    struct procstat st;

    (void)state;
    assert_false(procstat_parse(text, strlen(text), &st));
    /* A negative rss reads as 0; the line stops after field 24. */
    assert_true(procstat_parse(neg, strlen(neg), &st));
    assert_int_equal(st.rss, 0);
    assert_int_equal(st.vsize, 2);
}

static void
test_stat_not_terminated(void **state)
{
    char buf[sizeof("7 (t)" REST)];
    struct procstat st;
    size_t n = strlen("7 (t)" REST);

    (void)state;
    memcpy(buf, "7 (t)" REST, n);
    buf[n] = 'X';
    assert_true(procstat_parse(buf, n, &st));
    assert_int_equal(st.vsize, 3133440);
}

static void
test_btime(void **state)
{
    static const char text[] = "cpu  1 2 3\ncpu0 1 2 3\nintr 5 0\n"
                               "ctxt 99\nbtime 1796108299\nprocesses 7\n";
    static const char last[] = "cpu  1 2 3\nbtime 42";
    static const char none[] = "cpu  1 2 3\nbtimes 42\nxbtime 5\n";
    static const char bad[] = "btime 17x\n";
    uint64_t v = 0;

    (void)state;
    assert_true(procstat_btime(text, strlen(text), &v));
    assert_int_equal(v, 1796108299);
    assert_true(procstat_btime(last, strlen(last), &v));
    assert_int_equal(v, 42);
    assert_false(procstat_btime(none, strlen(none), &v));
    assert_false(procstat_btime(bad, strlen(bad), &v));
    assert_false(procstat_btime("", 0, &v));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stat_table),
        cmocka_unit_test(test_stat_bad_number),
        cmocka_unit_test(test_stat_not_terminated),
        cmocka_unit_test(test_btime),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
