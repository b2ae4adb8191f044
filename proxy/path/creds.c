/* creds.c: an upstream's signing credentials, from the source the AWS
 * SDKs' chain picks (botocore's and the Go SDK v2's order: environment,
 * web identity, shared credentials file, container endpoint, IMDSv2), and
 * kept current: a file read again when it changes, temporary credentials
 * renewed before they expire, a failure retried with backoff while the
 * old set serves until its own expiry. One set at a time, swapped whole on
 * the loop thread. */
#include "creds.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include <event2/event.h>
#include <openssl/crypto.h>

#include "../../conf/cfg.h"
#include "../../policies/awscreds.h"
#include "../clients/http_fetch.h"
#include "../clients/tls_client.h"
#include "../log.h"
#include "up.h"

/* Each fetch (connect, send, answer) within this. */
#define CREDS_FETCH_MS 5000
/* Failed fetches are tried again after 1 s, doubling up to this. */
#define CREDS_BACKOFF_MAX_MS 30000
/* A set is not used in its last second (a request signed now reaches
 * the upstream a little later). */
#define CREDS_MARGIN_S 1
/* How often a credentials file is looked at. */
#define CREDS_FILE_POLL_MS 1000
/* The longest web identity or container authorization token read. */
#define CREDS_TOKEN_MAX 16384
/* IMDSv2's session token: asked for with this lifetime, in seconds. */
#define IMDS_TOKEN_TTL "21600"
#define IMDS_TOKEN_MAX 512
#define IMDS_DEFAULT "http://169.254.169.254"
#define CONTAINER_HOST "http://169.254.170.2"

enum source {
    SRC_STATIC = 0,
    SRC_FILE,
    SRC_WEB,
    SRC_CONTAINER,
    SRC_IMDS,
    SRC_NONE,
};

static const char *const src_name[] = {
    "the environment",
    "the shared credentials file",
    "web identity (STS)",
    "the container credentials endpoint",
    "IMDSv2",
    "no source",
};

struct creds {
    struct event_base *base;
    struct up_names *names; /* looks the endpoints' hosts up */
    const struct tm_log *log;
    const struct cfg_upstream *u;
    enum source src;
    struct sigv4_creds cur;
    long long expires; /* seconds since the epoch; 0: never */
    struct event *timer;
    struct http_fetch *fetch;
    SSL_CTX *tls;
    int step; /* IMDS: 0 the session token, 1 the role, 2 the set */
    char imds_token[IMDS_TOKEN_MAX + 1];
    char role[AWSCREDS_ROLE_MAX + 1];
    int backoff_ms;
    char last_why[256]; /* the failure last logged: each is logged once */
    char file[1024];    /* SRC_FILE */
    const char *profile;
    struct stat seen;
    bool seen_ok;
};

static long long
now_s(void)
{
    struct timespec t;

    clock_gettime(CLOCK_REALTIME, &t);
    return (long long)t.tv_sec;
}

static void
arm(struct creds *c, long long ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};

    evtimer_add(c->timer, &tv);
}

/* "2026-12-02T08:00:00Z" for t, into buf (at least 21 bytes). */
static const char *
iso_time(long long t, char *buf, size_t len)
{
    time_t tt = (time_t)t;
    struct tm tm;

    gmtime_r(&tt, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

/* ---- outcomes --------------------------------------------------------- */

/* A fetch or a read failed (why): logged once per reason, tried again
 * after the backoff; the current set stays until it expires. */
static void
failed(struct creds *c, const char *why)
{
    char until[32];
    bool have = c->cur.key_id != NULL &&
                (c->expires == 0 || c->expires > now_s() + CREDS_MARGIN_S);

    if (strncmp(c->last_why, why, sizeof(c->last_why) - 1) != 0) {
        snprintf(c->last_why, sizeof(c->last_why), "%s", why);
        if (have && c->expires > 0) {
            log_warn("upstream %s: credentials from %s: %s; the current ones "
                     "serve until %s",
                     c->u->name, src_name[c->src], LOG_STR(why),
                     iso_time(c->expires, until, sizeof(until)));
        } else if (have) {
            log_warn("upstream %s: credentials from %s: %s; the last ones "
                     "read serve on",
                     c->u->name, src_name[c->src], LOG_STR(why));
        } else {
            log_error("upstream %s: credentials from %s: %s; requests get "
                      "503 until credentials come",
                      c->u->name, src_name[c->src], LOG_STR(why));
        }
    }
    if (c->src != SRC_FILE) {
        c->backoff_ms = c->backoff_ms == 0 ? 1000 : c->backoff_ms * 2;
        if (c->backoff_ms > CREDS_BACKOFF_MAX_MS) {
            c->backoff_ms = CREDS_BACKOFF_MAX_MS;
        }
        arm(c, c->backoff_ms);
    }
}

/* The next refresh of a set that expires at expires: sign_refresh_ms
 * before, or half way there when that is past; at least 1 s away. */
static long long
refresh_in_ms(const struct creds *c, long long expires)
{
    long long left = (expires - now_s()) * 1000;
    long long at = left - c->u->sign_refresh_ms;

    if (at < left / 2) {
        at = left / 2;
    }
    return at < 1000 ? 1000 : at;
}

/* A new whole set (taken): it replaces the current one at once.
 * expires 0: a file's set, which never expires; a fetched set's time
 * must be ahead (1970-01-01T00:00:00Z is no "never"). */
static void
got(struct creds *c, struct sigv4_creds *set, long long expires)
{
    char until[32];

    if (c->src != SRC_FILE && expires <= now_s() + CREDS_MARGIN_S) {
        sigv4_creds_free(set);
        failed(c, "the credentials given have already expired");
        return;
    }
    sigv4_creds_free(&c->cur);
    c->cur = *set;
    memset(set, 0, sizeof(*set));
    c->expires = expires;
    c->backoff_ms = 0;
    if (expires > 0) {
        log_info("upstream %s: credentials from %s, valid until %s%s",
                 c->u->name, src_name[c->src],
                 iso_time(expires, until, sizeof(until)),
                 c->last_why[0] != '\0' ? " (the source answers again)" : "");
        arm(c, refresh_in_ms(c, expires));
    } else {
        log_info("upstream %s: credentials read from %s%s", c->u->name,
                 src_name[c->src],
                 c->last_why[0] != '\0' ? " (readable again)" : "");
    }
    c->last_why[0] = '\0';
}

/* ---- the shared credentials file -------------------------------------- */

static bool
same_file(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev &&
           a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
           a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Read c->file's c->profile into *set. NULL or why not. */
static const char *
read_file(struct creds *c, struct sigv4_creds *set, char *buf, size_t len)
{
    char *text = NULL;
    size_t n = 0;
    const char *msg = cfg_read_private(c->file, &text, &n, buf, len);

    memset(set, 0, sizeof(*set));
    if (msg == NULL) {
        msg = sigv4_creds_parse(text, n, c->profile, set);
    }
    if (text != NULL) {
        OPENSSL_cleanse(text, n);
    }
    free(text);
    return msg;
}

/* The file, when it changed since it was last read: read again. */
static void
poll_file(struct creds *c)
{
    struct stat st;
    struct sigv4_creds set;
    char buf[256];
    const char *msg;

    if (stat(c->file, &st) != 0) {
        failed(c, "the credentials file cannot be found");
        return;
    }
    if (c->seen_ok && same_file(&st, &c->seen)) {
        return;
    }
    c->seen = st;
    c->seen_ok = true;
    msg = read_file(c, &set, buf, sizeof(buf));
    if (msg != NULL) {
        failed(c, msg);
        return;
    }
    got(c, &set, 0);
}

/* ---- fetching ----------------------------------------------------------- */

/* A small file (a token) into buf, its trailing white space cut. NULL
 * or why not. */
static const char *
read_token(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "re");
    size_t n;

    if (f == NULL) {
        return "the token file cannot be opened";
    }
    n = fread(buf, 1, cap, f);
    fclose(f);
    if (n == cap) {
        return "the token file is too long";
    }
    while (n > 0 && strchr(" \t\r\n", buf[n - 1]) != NULL) {
        n--;
    }
    buf[n] = '\0';
    if (n == 0 || strcspn(buf, "\r\n") != n || strlen(buf) != n) {
        return "the token file is empty or holds a line break or NUL";
    }
    return NULL;
}

/* s, form-encoded (application/x-www-form-urlencoded), appended at *n. */
static void
form_put(char *out, size_t cap, size_t *n, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";

    for (; *s != '\0' && *n + 4 < cap; s++) {
        unsigned char b = (unsigned char)*s;

        if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') ||
            (b >= '0' && b <= '9') || strchr("-_.~", b) != NULL) {
            out[(*n)++] = (char)b;
        } else {
            out[(*n)++] = '%';
            out[(*n)++] = hex[b >> 4];
            out[(*n)++] = hex[b & 15];
        }
    }
    out[*n] = '\0';
}

static void on_answer(void *arg, const struct http_fetch_answer *a);

static void
start(struct creds *c, const char *method, const char *url,
      const char *const *headers, const char *body)
{
    struct http_fetch_req rq = {method,
                                url,
                                headers,
                                body,
                                body != NULL ? strlen(body) : 0,
                                CREDS_FETCH_MS,
                                AWSCREDS_ANSWER_MAX,
                                c->tls,
                                c->names->dns,
                                &c->names->asked};
    char err[256];

    c->fetch = http_fetch_start(c->base, &rq, on_answer, c, err, sizeof(err));
    if (c->fetch == NULL) {
        failed(c, err);
    }
}

/* STS: AssumeRoleWithWebIdentity, its endpoint as the SDKs find it. */
static void
fetch_web(struct creds *c)
{
    char *const *env = c->u->sign_env;
    const char *region = env[AWS_ENV_REGION] != NULL ? env[AWS_ENV_REGION]
                         : env[AWS_ENV_DEFAULT_REGION] != NULL
                             ? env[AWS_ENV_DEFAULT_REGION]
                             : c->u->sign_region;
    const char *ep = env[AWS_ENV_ENDPOINT_STS] != NULL
                         ? env[AWS_ENV_ENDPOINT_STS]
                         : env[AWS_ENV_ENDPOINT];
    static const char *const hd[] = {"Content-Type",
                                     "application/x-www-form-urlencoded",
                                     "Accept", "application/xml", NULL};
    char url[1024], session[64], *token = malloc(CREDS_TOKEN_MAX);
    char *body = malloc(3 * CREDS_TOKEN_MAX + 4096);
    const char *msg =
        token != NULL && body != NULL
            ? read_token(env[AWS_ENV_TOKEN_FILE], token, CREDS_TOKEN_MAX)
            : "out of memory";
    size_t n = 0;

    if (ep != NULL) {
        snprintf(url, sizeof(url), "%s", ep);
    } else {
        snprintf(url, sizeof(url), "https://sts.%s.amazonaws.com/", region);
    }
    snprintf(session, sizeof(session), "tidemark-%lld", now_s());
    if (msg == NULL) {
        size_t cap = 3 * CREDS_TOKEN_MAX + 4096;

        n = (size_t)snprintf(body, cap,
                             "Action=AssumeRoleWithWebIdentity&Version="
                             "2011-06-15&RoleArn=");
        form_put(body, cap, &n, env[AWS_ENV_ROLE_ARN]);
        n += (size_t)snprintf(body + n, cap - n, "&RoleSessionName=");
        form_put(body, cap, &n,
                 env[AWS_ENV_SESSION_NAME] != NULL ? env[AWS_ENV_SESSION_NAME]
                                                   : session);
        n += (size_t)snprintf(body + n, cap - n, "&WebIdentityToken=");
        form_put(body, cap, &n, token);
        start(c, "POST", url, hd, body);
    } else {
        failed(c, msg);
    }
    if (token != NULL) {
        OPENSSL_cleanse(token, CREDS_TOKEN_MAX);
    }
    if (body != NULL) {
        OPENSSL_cleanse(body, 3 * CREDS_TOKEN_MAX + 4096);
    }
    free(token);
    free(body);
}

/* The container endpoint, with its authorization token (the file read
 * every time: the agent rotates it). */
static void
fetch_container(struct creds *c)
{
    char *const *env = c->u->sign_env;
    char url[2048], *token = malloc(CREDS_TOKEN_MAX);
    const char *hd[] = {"Authorization", NULL, NULL};
    const char *msg = token == NULL ? "out of memory" : NULL;

    if (env[AWS_ENV_FULL_URI] != NULL) {
        snprintf(url, sizeof(url), "%s", env[AWS_ENV_FULL_URI]);
    } else {
        snprintf(url, sizeof(url), "%s%s", CONTAINER_HOST,
                 env[AWS_ENV_RELATIVE_URI]);
    }
    if (msg == NULL && env[AWS_ENV_AUTH_FILE] != NULL) {
        msg = read_token(env[AWS_ENV_AUTH_FILE], token, CREDS_TOKEN_MAX);
        hd[1] = token;
    } else if (msg == NULL && env[AWS_ENV_AUTH] != NULL) {
        hd[1] = env[AWS_ENV_AUTH];
    }
    if (msg == NULL && hd[1] != NULL &&
        strcspn(hd[1], "\r\n") != strlen(hd[1])) {
        msg = "the authorization token holds a line break";
    }
    if (msg == NULL) {
        start(c, "GET", url, hd[1] != NULL ? hd : NULL, NULL);
    } else {
        failed(c, msg);
    }
    if (token != NULL) {
        OPENSSL_cleanse(token, CREDS_TOKEN_MAX);
    }
    free(token);
}

/* IMDSv2, step by step: a session token, the role, its credentials. */
static void
fetch_imds(struct creds *c)
{
    const char *ep = c->u->sign_env[AWS_ENV_IMDS_ENDPOINT] != NULL
                         ? c->u->sign_env[AWS_ENV_IMDS_ENDPOINT]
                         : IMDS_DEFAULT;
    size_t el = strlen(ep);
    const char *tok[] = {"X-aws-ec2-metadata-token", c->imds_token, NULL};
    char url[1024];

    el = el > 0 && ep[el - 1] == '/' ? el - 1 : el;
    if (c->step == 0) {
        static const char *const hd[] = {"X-aws-ec2-metadata-token-ttl-seconds",
                                         IMDS_TOKEN_TTL, NULL};

        snprintf(url, sizeof(url), "%.*s/latest/api/token", (int)el, ep);
        start(c, "PUT", url, hd, NULL);
        return;
    }
    snprintf(url, sizeof(url),
             "%.*s/latest/meta-data/iam/security-credentials/%s", (int)el, ep,
             c->step == 2 ? c->role : "");
    start(c, "GET", url, tok, NULL);
}

static void
fetch(struct creds *c)
{
    c->step = 0;
    switch (c->src) {
    case SRC_WEB:
        fetch_web(c);
        break;
    case SRC_CONTAINER:
        fetch_container(c);
        break;
    case SRC_IMDS:
        fetch_imds(c);
        break;
    default:
        break;
    }
}

/* An IMDS answer before the last: the token or the role; false when
 * it failed (reported). */
static bool
imds_step(struct creds *c, const struct http_fetch_answer *a)
{
    const char *msg = NULL;

    if (c->step == 0) {
        if (a->len == 0 || a->len > IMDS_TOKEN_MAX ||
            !sigv4_cred_ok(a->body, a->len)) {
            msg = "IMDS gave no usable session token";
        } else {
            memcpy(c->imds_token, a->body, a->len);
            c->imds_token[a->len] = '\0';
        }
    } else {
        msg = awscreds_imds_role(a->body, a->len, c->role);
    }
    if (msg != NULL) {
        failed(c, msg);
        return false;
    }
    c->step++;
    fetch_imds(c);
    return true;
}

/* An answer other than 200: why, with STS's error code. */
static void
refused(struct creds *c, const struct http_fetch_answer *a)
{
    char code[64] = "", why[160];

    if (c->src == SRC_WEB) {
        awscreds_sts_error(a->body, a->len, code, sizeof(code));
        if (strcmp(code, "unknown") == 0) {
            code[0] = '\0';
        }
    }
    snprintf(why, sizeof(why), "the endpoint answered %d%s%s%s", a->status,
             code[0] != '\0' ? " (" : "", code, code[0] != '\0' ? ")" : "");
    failed(c, why);
}

static void
on_answer(void *arg, const struct http_fetch_answer *a)
{
    struct creds *c = arg;
    const struct tm_log *prev = lib_enter(c->log);
    struct sigv4_creds set;
    long long expires = 0;
    const char *msg;

    c->fetch = NULL;
    if (a->status == 0) {
        failed(c, a->why);
    } else if (a->status != 200) {
        refused(c, a);
    } else if (c->src == SRC_IMDS && c->step < 2) {
        imds_step(c, a);
    } else {
        msg = c->src == SRC_WEB
                  ? awscreds_parse_sts(a->body, a->len, &set, &expires)
                  : awscreds_parse_json(a->body, a->len, &set, &expires);
        if (msg != NULL) {
            failed(c, msg);
        } else {
            got(c, &set, expires);
        }
    }
    lib_leave(prev);
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct creds *c = arg;
    const struct tm_log *prev = lib_enter(c->log);

    if (c->src == SRC_FILE) {
        poll_file(c);
        arm(c, CREDS_FILE_POLL_MS);
    } else if (c->fetch == NULL) {
        fetch(c);
    }
    lib_leave(prev);
}

/* ---- the chain ---------------------------------------------------------- */

/* The shared file the chain reads (AWS_SHARED_CREDENTIALS_FILE or
 * ~/.aws/credentials) into c->file and its profile; whether it exists. */
static bool
chain_file(struct creds *c)
{
    char *const *env = c->u->sign_env;
    struct stat st;

    if (env[AWS_ENV_SHARED_FILE] != NULL) {
        snprintf(c->file, sizeof(c->file), "%s", env[AWS_ENV_SHARED_FILE]);
    } else if (env[AWS_ENV_HOME] != NULL) {
        snprintf(c->file, sizeof(c->file), "%s/.aws/credentials",
                 env[AWS_ENV_HOME]);
    } else {
        return false;
    }
    c->profile = strcmp(c->u->sign_profile, "default") == 0 &&
                         env[AWS_ENV_PROFILE] != NULL
                     ? env[AWS_ENV_PROFILE]
                     : c->u->sign_profile;
    return stat(c->file, &st) == 0;
}

/* Whether the chain's shared file serves: it exists and holds the
 * profile's keys (read now). One that does not is passed over, as the
 * SDKs do, with a note of why. */
static bool
chain_file_serves(struct creds *c)
{
    struct sigv4_creds set;
    char buf[256];
    const char *msg;

    if (!chain_file(c)) {
        return false;
    }
    msg = read_file(c, &set, buf, sizeof(buf));
    if (msg != NULL) {
        log_warn("upstream %s: credentials: %s [%s] passed over: %s",
                 c->u->name, LOG_STR(c->file), LOG_STR(c->profile),
                 LOG_STR(msg));
        return false;
    }
    sigv4_creds_free(&set);
    return true;
}

/* The first source the chain has, in the SDKs' order. */
static enum source
pick(struct creds *c)
{
    const struct cfg_upstream *u = c->u;
    char *const *env = u->sign_env;
    const char *off = env[AWS_ENV_IMDS_DISABLED];

    if (u->sign_credentials_file != NULL && u->sign_credentials_file[0]) {
        snprintf(c->file, sizeof(c->file), "%s", u->sign_credentials_file);
        c->profile = u->sign_profile;
        return SRC_FILE;
    }
    if (u->sign_creds.key_id != NULL) {
        return SRC_STATIC;
    }
    if (env[AWS_ENV_ROLE_ARN] != NULL && env[AWS_ENV_TOKEN_FILE] != NULL) {
        return SRC_WEB;
    }
    if (chain_file_serves(c)) {
        return SRC_FILE;
    }
    if (env[AWS_ENV_FULL_URI] != NULL || env[AWS_ENV_RELATIVE_URI] != NULL) {
        return SRC_CONTAINER;
    }
    return off != NULL && strcasecmp(off, "true") == 0 ? SRC_NONE : SRC_IMDS;
}

static bool
copy_static(struct creds *c)
{
    const struct sigv4_creds *s = &c->u->sign_creds;

    c->cur.key_id = strdup(s->key_id);
    c->cur.secret = strdup(s->secret);
    c->cur.session = s->session != NULL ? strdup(s->session) : NULL;
    return c->cur.key_id != NULL && c->cur.secret != NULL &&
           (s->session == NULL || c->cur.session != NULL);
}

/* https endpoints (STS, a container FULL_URI) are checked against
 * AWS_CA_BUNDLE, else the system's CAs. */
static void
make_tls(struct creds *c)
{
    struct cfg_tls tc = {.ca_file = c->u->sign_env[AWS_ENV_CA_BUNDLE]};
    char who[160], err[256];

    snprintf(who, sizeof(who), "upstream %s credentials", c->u->name);
    c->tls = tls_client_ctx(&tc, who, err, sizeof(err));
    if (c->tls == NULL) {
        log_error("%s", LOG_STR(err));
    }
}

struct creds *
creds_new(struct event_base *base, const struct cfg_upstream *u,
          struct up_names *names)
{
    struct creds *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        return NULL;
    }
    c->base = base;
    c->names = names;
    c->log = log_current();
    c->u = u;
    c->timer = evtimer_new(base, on_timer, c);
    c->src = pick(c);
    if (c->timer == NULL || (c->src == SRC_STATIC && !copy_static(c))) {
        creds_free(c);
        return NULL;
    }
    if (c->src == SRC_WEB || c->src == SRC_CONTAINER) {
        make_tls(c);
    }
    if (c->src == SRC_NONE) {
        log_error("upstream %s: sign: no credentials: none in the "
                  "environment, no web identity, no shared file, no "
                  "container endpoint, and IMDS is disabled",
                  u->name);
    } else if (c->src == SRC_FILE) {
        poll_file(c);
        arm(c, CREDS_FILE_POLL_MS);
    } else if (c->src != SRC_STATIC) {
        log_info("upstream %s: sign: credentials from %s", u->name,
                 src_name[c->src]);
        arm(c, 0);
    }
    return c;
}

void
creds_inherit(struct creds *c, const struct creds *old)
{
    const struct sigv4_creds *s = old != NULL ? &old->cur : NULL;

    if (c == NULL || s == NULL || c->src != old->src || old->expires == 0 ||
        s->key_id == NULL || c->cur.key_id != NULL) {
        return;
    }
    c->cur.key_id = strdup(s->key_id);
    c->cur.secret = strdup(s->secret);
    c->cur.session = s->session != NULL ? strdup(s->session) : NULL;
    if (c->cur.key_id == NULL || c->cur.secret == NULL ||
        (s->session != NULL && c->cur.session == NULL)) {
        sigv4_creds_free(&c->cur);
        return;
    }
    c->expires = old->expires;
}

void
creds_free(struct creds *c)
{
    if (c == NULL) {
        return;
    }
    http_fetch_cancel(c->fetch);
    if (c->timer != NULL) {
        event_free(c->timer);
    }
    if (c->tls != NULL) {
        SSL_CTX_free(c->tls);
    }
    sigv4_creds_free(&c->cur);
    OPENSSL_cleanse(c->imds_token, sizeof(c->imds_token));
    free(c);
}

double
creds_expiry(struct creds *c)
{
    const char *why;

    if (creds_now(c, &why) == NULL) {
        return 0;
    }
    return c->expires == 0 ? INFINITY : (double)c->expires;
}

const struct sigv4_creds *
creds_now(struct creds *c, const char **why)
{
    if (c->cur.key_id == NULL) {
        *why = c->src == SRC_NONE
                   ? "the upstream signs requests and the credential chain "
                     "found no source"
                   : "the upstream signs requests and no credentials have "
                     "come yet from the credential source";
        return NULL;
    }
    if (c->expires != 0 && now_s() + CREDS_MARGIN_S >= c->expires) {
        *why = "the upstream's signing credentials expired and no new ones "
               "came from the credential source";
        return NULL;
    }
    return &c->cur;
}
