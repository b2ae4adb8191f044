/* awscreds.c: reading what AWS's credential endpoints answer: STS's XML,
 * the container endpoint's and IMDS's JSON, their timestamps. Pure: no
 * I/O, no globals. */
#include "awscreds.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "slice.h"

const char *
awscreds_env_name(enum awscreds_env e)
{
    static const char *const names[AWS_ENV_N] = {
        "AWS_ROLE_ARN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_SESSION_NAME",
        "AWS_ENDPOINT_URL_STS",
        "AWS_ENDPOINT_URL",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_PROFILE",
        "HOME",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN",
        "AWS_EC2_METADATA_SERVICE_ENDPOINT",
        "AWS_EC2_METADATA_DISABLED",
        "AWS_CA_BUNDLE",
    };

    return (unsigned)e < AWS_ENV_N ? names[e] : "";
}

/* ---- timestamps ------------------------------------------------------ */

/* n digits at s as a number, or -1. */
static int
digits(const char *s, size_t n)
{
    int v = 0;

    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -1;
        }
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

static int
month_days(int y, int m)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

    return m == 2 && leap ? 29 : days[m - 1];
}

/* Days from 1970-01-01 to y-m-d (Howard Hinnant's days_from_civil). */
static long long
civil_days(int y, int m, int d)
{
    long long yy = m <= 2 ? y - 1 : y;
    long long era = yy / 400;
    long long yoe = yy - era * 400;
    long long doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    long long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

    return era * 146097 + doe - 719468;
}

/* The zone at s[0..n): Z, or +HH:MM / -HH:MM, as seconds east of UTC. */
static bool
zone(const char *s, size_t n, long long *off)
{
    int h, m;

    if (n == 1 && (s[0] == 'Z' || s[0] == 'z')) {
        *off = 0;
        return true;
    }
    if (n != 6 || (s[0] != '+' && s[0] != '-') || s[3] != ':') {
        return false;
    }
    h = digits(s + 1, 2);
    m = digits(s + 4, 2);
    if (h < 0 || h > 23 || m < 0 || m > 59) {
        return false;
    }
    *off = (s[0] == '-' ? -1 : 1) * (h * 3600LL + m * 60LL);
    return true;
}

bool
awscreds_time(const char *s, size_t n, long long *t)
{
    int y, mo, d, h, mi, se;
    size_t i = 19;
    long long off;

    if (n < 20 || s[4] != '-' || s[7] != '-' ||
        (s[10] != 'T' && s[10] != 't') || s[13] != ':' || s[16] != ':') {
        return false;
    }
    y = digits(s, 4);
    mo = digits(s + 5, 2);
    d = digits(s + 8, 2);
    h = digits(s + 11, 2);
    mi = digits(s + 14, 2);
    se = digits(s + 17, 2);
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > month_days(y, mo) ||
        h < 0 || h > 23 || mi < 0 || mi > 59 || se < 0 || se > 60) {
        return false;
    }
    if (s[i] == '.') {
        size_t f = ++i;

        while (i < n && i - f < 9 && s[i] >= '0' && s[i] <= '9') {
            i++;
        }
        if (i == f) {
            return false;
        }
    }
    if (!zone(s + i, n - i, &off)) {
        return false;
    }
    *t = civil_days(y, mo, d) * 86400 + h * 3600LL + mi * 60LL + se - off;
    return true;
}

/* ---- taking a set ---------------------------------------------------- */

/* A field's value v[0..n) as a malloc'd credential into *f: refused
 * unless sigv4_cred_ok. */
static const char *
take(char **f, const char *v, size_t n, const char *bad)
{
    if (!sigv4_cred_ok(v, n)) {
        return bad;
    }
    *f = strndup(v, n);
    return *f == NULL ? "out of memory" : NULL;
}

/* The three values and the expiration's text, checked and copied into
 * out and *expires; out is empty again on failure. */
static const char *
take_set(const struct tm_slice f[4], struct sigv4_creds *out,
         long long *expires)
{
    static const char *const bad[] = {
        "AccessKeyId is empty, too long or not printable ASCII",
        "SecretAccessKey is empty, too long or not printable ASCII",
        "the session token is empty, too long or not printable ASCII"};
    char **dst[] = {&out->key_id, &out->secret, &out->session};
    const char *msg = NULL;

    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < 3 && msg == NULL; i++) {
        msg = take(dst[i], f[i].p, f[i].len, bad[i]);
    }
    if (msg == NULL && !awscreds_time(f[3].p, f[3].len, expires)) {
        msg = "Expiration is not an ISO 8601 time (YYYY-MM-DDTHH:MM:SSZ)";
    }
    if (msg != NULL) {
        sigv4_creds_free(out);
    }
    return msg;
}

/* ---- STS's XML ------------------------------------------------------- */

/* Where "<name>...</name>" is in s[0..n): its content into *v; 0 when
 * absent, 1 once, 2 when twice or more (ambiguous: refused). */
static int
element(const char *s, size_t n, const char *name, struct tm_slice *v)
{
    char open[48], close[48];
    size_t ol = (size_t)snprintf(open, sizeof(open), "<%s>", name);
    size_t cl = (size_t)snprintf(close, sizeof(close), "</%s>", name);
    const char *a = memmem(s, n, open, ol), *b;

    if (a == NULL) {
        return 0;
    }
    a += ol;
    b = memmem(a, n - (size_t)(a - s), close, cl);
    if (b == NULL) {
        return 0;
    }
    *v = (struct tm_slice){a, (size_t)(b - a)};
    return memmem(b, n - (size_t)(b - s), open, ol) != NULL ? 2 : 1;
}

/* XML's whitespace around v. */
static struct tm_slice
xml_trim(struct tm_slice v)
{
    while (v.len > 0 && strchr(" \t\r\n", v.p[0]) != NULL && v.p[0] != 0) {
        v.p++;
        v.len--;
    }
    while (v.len > 0 && strchr(" \t\r\n", v.p[v.len - 1]) != NULL &&
           v.p[v.len - 1] != 0) {
        v.len--;
    }
    return v;
}

/* v with XML's five named entities decoded into buf (cap bytes; the
 * decoded text is never longer); NULL for any other '&'. */
static const char *
xml_decode(struct tm_slice v, char *buf, size_t *len)
{
    static const char *const ent[] = {"&amp;", "&lt;", "&gt;", "&quot;",
                                      "&apos;"};
    static const char chr[] = "&<>\"'";
    size_t o = 0, i = 0;

    while (i < v.len) {
        size_t k = 0;

        if (v.p[i] != '&') {
            buf[o++] = v.p[i++];
            continue;
        }
        while (k < 5 && (v.len - i < strlen(ent[k]) ||
                         memcmp(v.p + i, ent[k], strlen(ent[k])) != 0)) {
            k++;
        }
        if (k == 5) {
            return NULL;
        }
        buf[o++] = chr[k];
        i += strlen(ent[k]);
    }
    *len = o;
    return buf;
}

const char *
awscreds_parse_sts(const char *text, size_t len, struct sigv4_creds *out,
                   long long *expires)
{
    static const char *const names[] = {"AccessKeyId", "SecretAccessKey",
                                        "SessionToken", "Expiration"};
    struct tm_slice cr, raw, f[4];
    char *buf[4] = {NULL, NULL, NULL, NULL};
    size_t cap[4] = {0, 0, 0, 0};
    const char *msg = NULL;

    memset(out, 0, sizeof(*out));
    if (len > AWSCREDS_ANSWER_MAX) {
        return "the answer is too long";
    }
    if (element(text, len, "Credentials", &cr) != 1) {
        return "the answer has not one Credentials element";
    }
    for (size_t i = 0; i < 4 && msg == NULL; i++) {
        int got;

        raw = (struct tm_slice){"", 0};
        got = element(cr.p, cr.len, names[i], &raw);
        raw = xml_trim(raw);
        cap[i] = raw.len + 1;
        buf[i] = got == 1 ? malloc(cap[i]) : NULL;
        f[i] = (struct tm_slice){"", 0};
        if (got != 1) {
            msg = "the Credentials lack a field, or have one twice";
        } else if (buf[i] == NULL) {
            msg = "out of memory";
        } else if (xml_decode(raw, buf[i], &f[i].len) == NULL) {
            msg = "a field holds an XML reference other than a named entity";
        } else {
            f[i].p = buf[i];
        }
    }
    if (msg == NULL) {
        msg = take_set(f, out, expires);
    }
    for (size_t i = 0; i < 4; i++) {
        if (buf[i] != NULL) {
            OPENSSL_cleanse(buf[i], cap[i]);
        }
        free(buf[i]);
    }
    return msg;
}

/* [A-Za-z0-9] and the bytes of extra. */
static bool
plain_name(const char *s, size_t n, const char *extra)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || (c != 0 && strchr(extra, c)))) {
            return false;
        }
    }
    return n > 0;
}

void
awscreds_sts_error(const char *text, size_t len, char *code, size_t cap)
{
    struct tm_slice err, c;

    if (len <= AWSCREDS_ANSWER_MAX && element(text, len, "Error", &err) == 1 &&
        element(err.p, err.len, "Code", &c) == 1 &&
        plain_name(c.p, c.len, ".") && c.len < cap) {
        memcpy(code, c.p, c.len);
        code[c.len] = '\0';
        return;
    }
    snprintf(code, cap, "unknown");
}

/* ---- the container endpoint's and IMDS's JSON ------------------------- */

/* obj's member name as a string slice into *v; false when absent or not
 * a string. */
static bool
member(json_t *obj, const char *name, struct tm_slice *v)
{
    json_t *m = json_object_get(obj, name);

    if (!json_is_string(m)) {
        return false;
    }
    *v = (struct tm_slice){json_string_value(m), json_string_length(m)};
    return true;
}

static const char *
json_set(json_t *obj, struct sigv4_creds *out, long long *expires)
{
    static const char *const names[] = {"AccessKeyId", "SecretAccessKey",
                                        "Token", "Expiration"};
    struct tm_slice f[4], code;

    if (!json_is_object(obj)) {
        return "the answer is not one JSON object";
    }
    if (member(obj, "Code", &code) && !slice_eq(code, "Success")) {
        return "the answer's Code is not Success";
    }
    for (size_t i = 0; i < 4; i++) {
        if (!member(obj, names[i], &f[i])) {
            return "the answer lacks a field, or one is not a string";
        }
    }
    return take_set(f, out, expires);
}

const char *
awscreds_parse_json(const char *text, size_t len, struct sigv4_creds *out,
                    long long *expires)
{
    json_t *obj;
    json_error_t je;
    const char *msg;

    memset(out, 0, sizeof(*out));
    if (len > AWSCREDS_ANSWER_MAX) {
        return "the answer is too long";
    }
    obj = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (obj == NULL) {
        return "the answer is not valid JSON (or names a field twice)";
    }
    msg = json_set(obj, out, expires);
    json_decref(obj);
    return msg;
}

const char *
awscreds_imds_role(const char *text, size_t len, char *role)
{
    const char *nl = memchr(text, '\n', len);
    size_t n = nl != NULL ? (size_t)(nl - text) : len;

    if (n > 0 && text[n - 1] == '\r') {
        n--;
    }
    if (n == 0) {
        return "the instance has no IAM role";
    }
    if (n > AWSCREDS_ROLE_MAX || !plain_name(text, n, "+=,.@_-")) {
        return "the role name is too long or holds bytes IAM never uses";
    }
    memcpy(role, text, n);
    role[n] = '\0';
    return NULL;
}

/* ---- container endpoint hosts --------------------------------------- */

bool
awscreds_container_host_ok(const char *host)
{
    static const char *const ok[] = {"localhost", "::1", "169.254.170.2",
                                     "169.254.170.23", "fd00:ec2::23"};
    int a, b, c, d;
    char end;

    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        if (strcasecmp(host, ok[i]) == 0) {
            return true;
        }
    }
    /* 127.0.0.0/8, written as a dotted quad */
    return sscanf(host, "%3d.%3d.%3d.%3d%c", &a, &b, &c, &d, &end) == 4 &&
           a == 127 && b >= 0 && b <= 255 && c >= 0 && c <= 255 && d >= 0 &&
           d <= 255 && plain_name(host, strlen(host), ".");
}
