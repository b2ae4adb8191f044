/* fuzz_awscreds.c: libFuzzer target for policies/awscreds.c. The input
 * is read as STS's XML answer, as the container endpoint's (and IMDS's)
 * JSON answer, as an Expiration time, as an IMDS role listing and as a
 * container URL's host. What is accepted must be whole credentials of
 * printable ASCII without spaces, at most SIGV4_CRED_MAX bytes each (so
 * safe in a header); an accepted time must print back to itself in
 * seconds; a role name holds only IAM's characters. Refusals leave
 * nothing allocated (ASan's leak check). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../policies/awscreds.h"
#include "fuzz.h"

static void
check_set(const struct sigv4_creds *c)
{
    const char *f[] = {c->key_id, c->secret, c->session};

    for (int i = 0; i < 3; i++) {
        check(f[i] != NULL, "an accepted set has every field");
        check(sigv4_cred_ok(f[i], strlen(f[i])),
              "an accepted field is printable ASCII without spaces");
    }
}

static void
one(const char *(*parse)(const char *, size_t, struct sigv4_creds *,
                         long long *),
    const char *s, size_t n)
{
    struct sigv4_creds c;
    long long t = -1;

    if (parse(s, n, &c, &t) == NULL) {
        check_set(&c);
        check(t >= 0, "an accepted Expiration is after 1970");
        sigv4_creds_free(&c);
    } else {
        check(c.key_id == NULL && c.secret == NULL && c.session == NULL,
              "a refused answer keeps nothing");
    }
}

static void
time_back(const char *s, size_t n)
{
    long long t;
    char back[32];

    if (!awscreds_time(s, n, &t)) {
        return;
    }
    check(t >= -86400, "an accepted time is about 1970 or later");
    if (n == 20 && s[19] == 'Z' && s[10] == 'T' && s[17] != '6') {
        /* The plain form prints back to itself (a :60 leap second is
         * the next minute's :00). */
        time_t tt = (time_t)t;
        struct tm tm;

        gmtime_r(&tt, &tm);
        strftime(back, sizeof(back), "%Y-%m-%dT%H:%M:%SZ", &tm);
        check(memcmp(back, s, 20) == 0, "a plain time prints back whole");
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    char role[AWSCREDS_ROLE_MAX + 1], code[64], *host;

    one(awscreds_parse_sts, s, size);
    one(awscreds_parse_json, s, size);
    time_back(s, size);
    if (awscreds_imds_role(s, size, role) == NULL) {
        check(strlen(role) > 0 && strlen(role) <= AWSCREDS_ROLE_MAX &&
                  strspn(role, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS"
                               "TUVWXYZ0123456789+=,.@_-") == strlen(role),
              "a role name holds only IAM's characters");
    }
    awscreds_sts_error(s, size, code, sizeof(code));
    check(strlen(code) < sizeof(code), "the error code fits");
    host = strndup(s, size);
    if (host != NULL) {
        (void)awscreds_container_host_ok(host);
        free(host);
    }
    return 0;
}
