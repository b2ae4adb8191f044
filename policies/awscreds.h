/* awscreds.h: the answers of AWS's credential endpoints, read: STS's
 * AssumeRoleWithWebIdentity (XML), the container endpoint and the
 * instance metadata service (JSON), and their Expiration times. Pure: no
 * I/O, no globals. No message quotes a credential. */
#ifndef TM_AWSCREDS_H
#define TM_AWSCREDS_H

#include <stdbool.h>
#include <stddef.h>

#include "sigv4.h"

/* The longest answer read from a credential endpoint; longer is an
 * error. */
#define AWSCREDS_ANSWER_MAX 65536
/* The longest IMDS role name taken (IAM allows 64). */
#define AWSCREDS_ROLE_MAX 128

/* The environment variables the credential chain reads, captured at
 * load (so the chain and --check see one environment). */
enum awscreds_env {
    AWS_ENV_ROLE_ARN = 0,   /* AWS_ROLE_ARN */
    AWS_ENV_TOKEN_FILE,     /* AWS_WEB_IDENTITY_TOKEN_FILE */
    AWS_ENV_SESSION_NAME,   /* AWS_ROLE_SESSION_NAME */
    AWS_ENV_ENDPOINT_STS,   /* AWS_ENDPOINT_URL_STS */
    AWS_ENV_ENDPOINT,       /* AWS_ENDPOINT_URL */
    AWS_ENV_REGION,         /* AWS_REGION */
    AWS_ENV_DEFAULT_REGION, /* AWS_DEFAULT_REGION */
    AWS_ENV_SHARED_FILE,    /* AWS_SHARED_CREDENTIALS_FILE */
    AWS_ENV_PROFILE,        /* AWS_PROFILE */
    AWS_ENV_HOME,           /* HOME */
    AWS_ENV_FULL_URI,       /* AWS_CONTAINER_CREDENTIALS_FULL_URI */
    AWS_ENV_RELATIVE_URI,   /* AWS_CONTAINER_CREDENTIALS_RELATIVE_URI */
    AWS_ENV_AUTH_FILE,      /* AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE */
    AWS_ENV_AUTH,           /* AWS_CONTAINER_AUTHORIZATION_TOKEN: secret */
    AWS_ENV_IMDS_ENDPOINT,  /* AWS_EC2_METADATA_SERVICE_ENDPOINT */
    AWS_ENV_IMDS_DISABLED,  /* AWS_EC2_METADATA_DISABLED */
    AWS_ENV_CA_BUNDLE,      /* AWS_CA_BUNDLE */
    AWS_ENV_N,
};

/* The variable's name. */
const char *awscreds_env_name(enum awscreds_env e);

/* The time an ISO 8601 / RFC 3339 timestamp text[0..len) names, as
 * seconds since the epoch, into *t: YYYY-MM-DDTHH:MM:SS, an optional
 * fraction of a second (dropped), then Z or an offset +HH:MM / -HH:MM.
 * false for anything else (other forms, a day the month does not have,
 * a year before 1970). */
bool awscreds_time(const char *text, size_t len, long long *t)
    __attribute__((warn_unused_result));

/* STS's AssumeRoleWithWebIdentityResponse text[0..len): the
 * Credentials element's AccessKeyId, SecretAccessKey, SessionToken and
 * Expiration into *out (malloc'd: sigv4_creds_free) and *expires. NULL
 * on success, else a static message (nothing is kept in *out). */
const char *awscreds_parse_sts(const char *text, size_t len,
                               struct sigv4_creds *out, long long *expires);

/* STS's ErrorResponse text[0..len): its Error's Code into code (cap
 * bytes, NUL-terminated) when it is a plain name ([A-Za-z0-9.]), else
 * "unknown". */
void awscreds_sts_error(const char *text, size_t len, char *code, size_t cap);

/* The container endpoint's or IMDS's JSON object text[0..len):
 * AccessKeyId, SecretAccessKey, Token and Expiration into *out and
 * *expires (IMDS's Code, when present, must be "Success"). As
 * awscreds_parse_sts for the rest. */
const char *awscreds_parse_json(const char *text, size_t len,
                                struct sigv4_creds *out, long long *expires);

/* IMDS's security-credentials/ listing text[0..len): its first line, the
 * role name, into role (AWSCREDS_ROLE_MAX + 1 bytes). NULL on success,
 * else a static message: a name may hold only [A-Za-z0-9+=,.@_-]. */
const char *awscreds_imds_role(const char *text, size_t len, char *role);

/* Whether host (a URL's host, IPv6 without brackets) may serve container
 * credentials over plain http, as the SDKs allow: a loopback address or
 * localhost, 169.254.170.2 (ECS), 169.254.170.23 or fd00:ec2::23 (EKS
 * Pod Identity). */
bool awscreds_container_host_ok(const char *host);

#endif
