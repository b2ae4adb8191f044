/* test_awscreds.c: the answers of AWS's credential endpoints as
 * policies/awscreds.c reads them: STS's AssumeRoleWithWebIdentity XML,
 * the container endpoint's and IMDS's JSON (as AWS documents them), each
 * field in length classes (1 byte, tens, hundreds, the maximum, one
 * more), odd bytes, missing and doubled fields, and Expiration in every
 * form that is and is not ISO 8601. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../policies/awscreds.h"

/* 2019-11-09T13:34:41Z */
#define T_2019 1573306481LL

static const char sts_fmt[] =
    "<AssumeRoleWithWebIdentityResponse "
    "xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\n"
    "  <AssumeRoleWithWebIdentityResult>\n"
    "    <SubjectFromWebIdentityToken>amzn1.account.AF6RHO7KZU5XRVQJGXK6HB56"
    "KR2A</SubjectFromWebIdentityToken>\n"
    "    <Audience>client.5498841531868486423.1548@apps.example.com"
    "</Audience>\n"
    "    <AssumedRoleUser>\n"
    "      <Arn>arn:aws:sts::123456789012:assumed-role/FederatedWebIdentity"
    "Role/app1</Arn>\n"
    "    </AssumedRoleUser>\n"
    "    <Credentials>\n"
    "      <AccessKeyId>%s</AccessKeyId>\n"
    "      <SecretAccessKey>%s</SecretAccessKey>\n"
    "      <SessionToken>%s</SessionToken>\n"
    "      <Expiration>%s</Expiration>\n"
    "    </Credentials>\n"
    "  </AssumeRoleWithWebIdentityResult>\n"
    "</AssumeRoleWithWebIdentityResponse>\n";

static const char json_fmt[] =
    "{\"Code\":\"Success\",\"LastUpdated\":\"2019-11-09T07:34:41Z\","
    "\"Type\":\"AWS-HMAC\",\"AccessKeyId\":\"%s\",\"SecretAccessKey\":\"%s\","
    "\"Token\":\"%s\",\"Expiration\":\"%s\"}";

/* fmt (AccessKeyId, SecretAccessKey, token, Expiration in that order)
 * filled in, malloc'd. */
static char *
fill(const char *fmt, const char *key, const char *secret, const char *token,
     const char *exp)
{
    size_t n = strlen(fmt) + strlen(key) + strlen(secret) + strlen(token) +
               strlen(exp) + 1;
    char *s = malloc(n);

    assert_non_null(s);
    snprintf(s, n, fmt, key, secret, token, exp);
    return s;
}

static char *
sts(const char *key, const char *secret, const char *token, const char *exp)
{
    return fill(sts_fmt, key, secret, token, exp);
}

static char *
js(const char *key, const char *secret, const char *token, const char *exp)
{
    return fill(json_fmt, key, secret, token, exp);
}

typedef const char *(*parse_fn)(const char *, size_t, struct sigv4_creds *,
                                long long *);
typedef char *(*make_fn)(const char *, const char *, const char *,
                         const char *);

/* parse(make(...)): NULL and the fields back, or the message. */
static const char *
run(parse_fn parse, make_fn make, const char *key, const char *secret,
    const char *token, const char *exp)
{
    char *text = make(key, secret, token, exp);
    struct sigv4_creds c;
    long long t = -1;
    const char *msg = parse(text, strlen(text), &c, &t);

    if (msg == NULL) {
        assert_string_equal(c.key_id, key);
        assert_string_equal(c.secret, secret);
        assert_string_equal(c.session, token);
        assert_true(t >= 0);
        sigv4_creds_free(&c);
    } else {
        assert_null(c.key_id);
        assert_null(c.secret);
        assert_null(c.session);
    }
    free(text);
    return msg;
}

static void
test_documented_answers(void **state)
{
    static const char tok[] = "AQoDYXdzEE0a8ANXXXXXXXXNO1ewxE5TijQyp+IEXAMPLE";
    parse_fn parse[] = {awscreds_parse_sts, awscreds_parse_json};
    make_fn make[] = {sts, js};

    (void)state;
    for (int i = 0; i < 2; i++) {
        char *text = make[i]("ASgeIAIOSFODNN7EXAMPLE",
                             "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY", tok,
                             "2019-11-09T13:34:41Z");
        struct sigv4_creds c;
        long long t;

        assert_null(parse[i](text, strlen(text), &c, &t));
        assert_string_equal(c.key_id, "ASgeIAIOSFODNN7EXAMPLE");
        assert_string_equal(c.session, tok);
        assert_int_equal(t, T_2019);
        sigv4_creds_free(&c);
        free(text);
    }
}

static void
test_length_classes(void **state)
{
    static const size_t lens[] = {
        1, 20, 40, 300, 1200, SIGV4_CRED_MAX, SIGV4_CRED_MAX + 1};
    parse_fn parse[] = {awscreds_parse_sts, awscreds_parse_json};
    make_fn make[] = {sts, js};
    const char *exp = "2019-11-09T13:34:41Z";

    (void)state;
    for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
        char *v = malloc(lens[l] + 1);

        memset(v, 'A', lens[l]);
        v[lens[l]] = '\0';
        for (int i = 0; i < 2; i++) {
            bool ok = lens[l] <= SIGV4_CRED_MAX;

            assert_int_equal(run(parse[i], make[i], v, "s", "t", exp) == NULL,
                             ok);
            assert_int_equal(run(parse[i], make[i], "k", v, "t", exp) == NULL,
                             ok);
            assert_int_equal(run(parse[i], make[i], "k", "s", v, exp) == NULL,
                             ok);
        }
        free(v);
    }
}

static void
test_odd_bytes(void **state)
{
    /* Each refused in any field, in either format. */
    static const char *const odd[] = {"a b",         "a\tb",     "a\x01z",
                                      "caf\xc3\xa9", "\xff\xfe", "a\x7f"};
    const char *exp = "2019-11-09T13:34:41Z";

    (void)state;
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
        assert_non_null(run(awscreds_parse_sts, sts, odd[i], "s", "t", exp));
        assert_non_null(run(awscreds_parse_sts, sts, "k", odd[i], "t", exp));
        assert_non_null(run(awscreds_parse_json, js, "k", "s", odd[i], exp));
    }
    /* References other than XML's five named entities, a cut entity, a
     * NUL or a line break after JSON's escapes. */
    assert_non_null(run(awscreds_parse_sts, sts, "k", "s", "a&#65;", exp));
    assert_non_null(run(awscreds_parse_sts, sts, "k", "s", "a&amp", exp));
    assert_non_null(run(awscreds_parse_json, js, "k", "s", "a\\u0000b", exp));
    assert_non_null(run(awscreds_parse_json, js, "k", "s", "a\\\"b\\n", exp));
}

static void
test_entities_decoded(void **state)
{
    static const char text[] =
        "<Credentials><AccessKeyId>k</AccessKeyId><SecretAccessKey>a&amp;b"
        "&lt;&gt;&apos;&quot;</SecretAccessKey><SessionToken>t</SessionToken>"
        "<Expiration>2019-11-09T13:34:41Z</Expiration></Credentials>";
    struct sigv4_creds c;
    long long t;

    (void)state;
    assert_null(awscreds_parse_sts(text, strlen(text), &c, &t));
    assert_string_equal(c.secret, "a&b<>'\"");
    sigv4_creds_free(&c);
}

static void
test_missing_and_doubled(void **state)
{
    static const char *const bad_xml[] = {
        "",
        "<Credentials>",
        "<Credentials></Credentials>",
        "<Credentials><AccessKeyId>k</AccessKeyId><SecretAccessKey>s"
        "</SecretAccessKey><Expiration>2019-11-09T13:34:41Z</Expiration>"
        "</Credentials>",
        "<Credentials><AccessKeyId>k</AccessKeyId><AccessKeyId>j</AccessKeyId>"
        "<SecretAccessKey>s</SecretAccessKey><SessionToken>t</SessionToken>"
        "<Expiration>2019-11-09T13:34:41Z</Expiration></Credentials>",
        "<Credentials><AccessKeyId>k</AccessKeyId><SecretAccessKey>s"
        "</SecretAccessKey><SessionToken>t</SessionToken><Expiration>"
        "2019-11-09T13:34:41Z</Expiration></Credentials><Credentials>"
        "</Credentials>",
        "<ErrorResponse><Error><Code>InvalidIdentityToken</Code></Error>"
        "</ErrorResponse>",
    };
    static const char *const bad_json[] = {
        "",
        "[]",
        "{}",
        "null",
        "{\"AccessKeyId\":\"k\",\"SecretAccessKey\":\"s\",\"Token\":\"t\"}",
        "{\"AccessKeyId\":\"k\",\"SecretAccessKey\":\"s\",\"Token\":1,"
        "\"Expiration\":\"2019-11-09T13:34:41Z\"}",
        "{\"AccessKeyId\":\"k\",\"AccessKeyId\":\"j\",\"SecretAccessKey\":"
        "\"s\",\"Token\":\"t\",\"Expiration\":\"2019-11-09T13:34:41Z\"}",
        "{\"Code\":\"Failure\",\"AccessKeyId\":\"k\",\"SecretAccessKey\":"
        "\"s\",\"Token\":\"t\",\"Expiration\":\"2019-11-09T13:34:41Z\"}",
        "{\"AccessKeyId\":\"k\",\"SecretAccessKey\":\"s\",\"Token\":\"t\","
        "\"Expiration\":\"2019-11-09T13:34:41Z\"",
    };
    struct sigv4_creds c;
    long long t;

    (void)state;
    for (size_t i = 0; i < sizeof(bad_xml) / sizeof(bad_xml[0]); i++) {
        assert_non_null(
            awscreds_parse_sts(bad_xml[i], strlen(bad_xml[i]), &c, &t));
        assert_null(c.key_id);
    }
    for (size_t i = 0; i < sizeof(bad_json) / sizeof(bad_json[0]); i++) {
        assert_non_null(
            awscreds_parse_json(bad_json[i], strlen(bad_json[i]), &c, &t));
        assert_null(c.key_id);
    }
}

static void
test_too_long_answer(void **state)
{
    size_t n = AWSCREDS_ANSWER_MAX + 1;
    char *big = malloc(n);
    struct sigv4_creds c;
    long long t;

    (void)state;
    memset(big, ' ', n);
    assert_string_equal(awscreds_parse_sts(big, n, &c, &t),
                        "the answer is too long");
    assert_string_equal(awscreds_parse_json(big, n, &c, &t),
                        "the answer is too long");
    free(big);
}

static void
test_times(void **state)
{
    static const struct {
        const char *s;
        long long t; /* -1: refused */
    } v[] = {
        {"2019-11-09T13:34:41Z", T_2019},
        {"2019-11-09T13:34:41.123Z", T_2019},
        {"2019-11-09T13:34:41.123456789Z", T_2019},
        {"2019-11-09t13:34:41z", T_2019},
        {"2019-11-09T15:34:41+02:00", T_2019},
        {"2019-11-09T11:04:41-02:30", T_2019},
        {"1970-01-01T00:00:00Z", 0},
        {"2000-02-29T00:00:00Z", 951782400},
        {"2100-03-01T00:00:00Z", 4107542400LL},
        {"9999-12-31T23:59:59Z", 253402300799LL},
        {"2019-11-09T13:34:41", -1},
        {"2019-11-09 13:34:41Z", -1},
        {"2019-11-09T13:34Z", -1},
        {"19-11-09T13:34:41Z", -1},
        {"2019-13-09T13:34:41Z", -1},
        {"2019-02-29T13:34:41Z", -1},
        {"2100-02-29T00:00:00Z", -1},
        {"2019-04-31T00:00:00Z", -1},
        {"2019-11-09T24:00:00Z", -1},
        {"2019-11-09T13:60:00Z", -1},
        {"2019-11-09T13:34:41.Z", -1},
        {"2019-11-09T13:34:41.1234567890Z", -1},
        {"2019-11-09T13:34:41+0200", -1},
        {"2019-11-09T13:34:41+24:00", -1},
        {"1969-12-31T23:59:59Z", -1},
        {"2019-11-09T13:34:41ZZ", -1},
        {"+019-11-09T13:34:41Z", -1},
        {"2019-11-09T13:34:41Z\n", -1},
        {"1573306481", -1},
        {"", -1},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        long long t = -1;
        bool ok = awscreds_time(v[i].s, strlen(v[i].s), &t);

        if (ok != (v[i].t >= 0) || (ok && t != v[i].t)) {
            fail_msg("%s: got %d %lld", v[i].s, ok, t);
        }
        /* and inside an answer: a bad time is an error */
        assert_int_equal(run(awscreds_parse_json, js, "k", "s", "t", v[i].s) ==
                             NULL,
                         v[i].t >= 0);
    }
}

static void
test_sts_error_code(void **state)
{
    static const char err[] =
        "<ErrorResponse><Error><Type>Sender</Type><Code>"
        "InvalidIdentityToken</Code><Message>x</Message></Error>"
        "</ErrorResponse>";
    static const char odd[] =
        "<ErrorResponse><Error><Code>a\"b\x01</Code></Error></ErrorResponse>";
    char code[64];

    (void)state;
    awscreds_sts_error(err, strlen(err), code, sizeof(code));
    assert_string_equal(code, "InvalidIdentityToken");
    awscreds_sts_error(odd, strlen(odd), code, sizeof(code));
    assert_string_equal(code, "unknown");
    awscreds_sts_error("", 0, code, sizeof(code));
    assert_string_equal(code, "unknown");
    awscreds_sts_error(err, strlen(err), code, 8);
    assert_string_equal(code, "unknown");
}

static void
test_imds_role(void **state)
{
    char role[AWSCREDS_ROLE_MAX + 1], big[AWSCREDS_ROLE_MAX + 2];

    (void)state;
    assert_null(awscreds_imds_role("my-role\n", 8, role));
    assert_string_equal(role, "my-role");
    assert_null(awscreds_imds_role("a+=,.@_-9\r\nother", 17, role));
    assert_string_equal(role, "a+=,.@_-9");
    assert_non_null(awscreds_imds_role("", 0, role));
    assert_non_null(awscreds_imds_role("\n", 1, role));
    assert_non_null(awscreds_imds_role("../x", 4, role));
    assert_non_null(awscreds_imds_role("a b", 3, role));
    assert_non_null(awscreds_imds_role("a?b", 3, role));
    memset(big, 'r', sizeof(big));
    assert_null(awscreds_imds_role(big, AWSCREDS_ROLE_MAX, role));
    assert_non_null(awscreds_imds_role(big, AWSCREDS_ROLE_MAX + 1, role));
}

static void
test_container_hosts(void **state)
{
    static const char *const ok[] = {
        "127.0.0.1",     "127.1.2.3",      "localhost",    "::1",
        "169.254.170.2", "169.254.170.23", "fd00:ec2::23", "LOCALHOST"};
    static const char *const bad[] = {"10.0.0.1",       "169.254.169.254",
                                      "127.0.0.1.evil", "128.0.0.1",
                                      "127.0.0.256",    "example.com",
                                      "127.0.0.1 ",     "",
                                      "localhost.evil", "::2"};

    (void)state;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        assert_true(awscreds_container_host_ok(ok[i]));
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (awscreds_container_host_ok(bad[i])) {
            fail_msg("%s taken", bad[i]);
        }
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_documented_answers),
        cmocka_unit_test(test_length_classes),
        cmocka_unit_test(test_odd_bytes),
        cmocka_unit_test(test_entities_decoded),
        cmocka_unit_test(test_missing_and_doubled),
        cmocka_unit_test(test_too_long_answer),
        cmocka_unit_test(test_times),
        cmocka_unit_test(test_sts_error_code),
        cmocka_unit_test(test_imds_role),
        cmocka_unit_test(test_container_hosts),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
