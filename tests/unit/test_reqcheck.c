/* test_reqcheck.c: lower-case methods and method overrides, against
 * tables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../policies/reqcheck.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

struct yes_no {
    const char *text;
    bool refused;
};

static const struct yes_no method_cases[] = {
    {"PUT", false}, {"PROPFIND", false}, {"X-1_~", false},
    {"", false},    {"put", true},       {"Put", true},
    {"PUt", true},  {"mkcol", true},     {"X-a", true},
};

static void
test_method(void **state)
{
    for (size_t i = 0; i < ARRAY_LEN(method_cases); i++) {
        const struct yes_no *c = &method_cases[i];
        const char *why = reqcheck_method(c->text, strlen(c->text));

        if ((why != NULL) != c->refused) {
            fail_msg("reqcheck_method(\"%s\"): %s", c->text,
                     why ? why : "accepted");
        }
    }
    /* A slice: the lower-case letter past len is not read. */
    assert_null(reqcheck_method("PUTx", 3));
}

static const struct yes_no header_cases[] = {
    {"X-HTTP-Method-Override", true},
    {"x-http-method-override", true},
    {"X_HTTP_METHOD_OVERRIDE", true},
    {"X-Http_Method-Override", true},
    {"X-HTTP-Method", true},
    {"x_http_method", true},
    {"X-Method-Override", true},
    {"X_METHOD_OVERRIDE", true},
    {"X-HTTP-Method-Overrides", false},
    {"X-HTTP-Methods", false},
    {"X-Method", false},
    {"Method", false},
    {"X-HTTP-Method-Overrid", false},
    {"Content-Type", false},
    {"", false},
};

static void
test_header(void **state)
{
    for (size_t i = 0; i < ARRAY_LEN(header_cases); i++) {
        const struct yes_no *c = &header_cases[i];

        if (reqcheck_override_header(c->text, strlen(c->text)) != c->refused) {
            fail_msg("reqcheck_override_header(\"%s\"): want %s", c->text,
                     c->refused ? "refused" : "accepted");
        }
    }
}

static const struct yes_no query_cases[] = {
    {"_method=PUT", true},        {"a=1&_method=DELETE", true},
    {"a=1;_method=DELETE", true}, {"_method", true},
    {"_method=", true},           {"_METHOD=put", true},
    {"_Method=PUT&b", true},      {"%5Fmethod=PUT", true},
    {"%5fmethod=PUT", true},      {"_%6Dethod=PUT", true},
    {"+method=PUT", true},        {"%20method=PUT", true},
    {".method=PUT", true},        {"[method=PUT", true},
    {"a&&_method=PUT", true},     {"", false},
    {"method=PUT", false},        {"x_method=PUT", false},
    {"_methods=PUT", false},      {"_method_=PUT", false},
    {"_metho=PUT", false},        {"a=_method", false},
    {"a=1&b=_method=PUT", false}, {"%5_method=PUT", false},
    {"_method%", false},
};

static void
test_query(void **state)
{
    for (size_t i = 0; i < ARRAY_LEN(query_cases); i++) {
        const struct yes_no *c = &query_cases[i];

        if (reqcheck_override_query(c->text, strlen(c->text)) != c->refused) {
            fail_msg("reqcheck_override_query(\"%s\"): want %s", c->text,
                     c->refused ? "refused" : "accepted");
        }
    }
    /* A slice: nothing past len is read. */
    assert_false(reqcheck_override_query("a=1&_method=PUT", 4));
    assert_true(reqcheck_override_query("_method=PUT&x", 7));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_method),
        cmocka_unit_test(test_header),
        cmocka_unit_test(test_query),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
