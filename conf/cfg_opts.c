/* cfg_opts.c: the one table of options and its setters. A setter parses
 * one value into its field and returns NULL or a message; it never echoes
 * the value, which may hold a password. */
#include "cfg_opts.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "../policies/origin.h"
#include "../policies/route.h"
#include "../policies/token.h"

#define FIELD(obj, o, type) ((type *)(void *)((char *)(obj) + (o)->off))

static const char oom[] = "out of memory";

static bool
is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool
is_alnum(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

bool
cfg_name_ok(const char *s, size_t n)
{
    if (n == 0) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_alnum(s[i]) && strchr("_-.", s[i]) == NULL) {
            return false;
        }
    }
    return true;
}

/* A port: 1 to 65535 in decimal. */
static int
parse_port(const char *p, size_t n)
{
    int v = 0;

    if (n == 0 || n > 5) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(p[i])) {
            return 0;
        }
        v = v * 10 + (p[i] - '0');
    }
    return v <= 65535 ? v : 0;
}

/* Split s[0..n) into a host and an optional port: "host", "host:port",
 * "[v6]" or "[v6]:port". The host slice excludes the brackets. */
static bool
split_authority(const char *s, size_t n, struct tm_slice *host,
                struct tm_slice *port, bool *bracketed)
{
    const char *colon;

    port->p = NULL;
    port->len = 0;
    *bracketed = n > 0 && s[0] == '[';
    if (*bracketed) {
        const char *end = memchr(s, ']', n);

        if (end == NULL) {
            return false;
        }
        host->p = s + 1;
        host->len = (size_t)(end - s) - 1;
        colon = end + 1 < s + n ? end + 1 : NULL;
        if (colon != NULL && *colon != ':') {
            return false;
        }
        for (size_t i = 0; i < host->len; i++) {
            if (!is_alnum(host->p[i]) && strchr(":.%", host->p[i]) == NULL) {
                return false;
            }
        }
        if (memchr(host->p, ':', host->len) == NULL) {
            return false;
        }
    } else {
        colon = memchr(s, ':', n);
        host->p = s;
        host->len = colon != NULL ? (size_t)(colon - s) : n;
        for (size_t i = 0; i < host->len; i++) {
            if (!is_alnum(s[i]) && strchr("-._", s[i]) == NULL) {
                return false;
            }
        }
    }
    if (host->len == 0) {
        return false;
    }
    if (colon != NULL) {
        port->p = colon + 1;
        port->len = (size_t)(s + n - port->p);
        if (parse_port(port->p, port->len) == 0) {
            return false;
        }
    }
    return true;
}

bool
cfg_split_hostport(const char *s, char **host, char **port)
{
    struct tm_slice h, p;
    bool br;

    *host = NULL;
    *port = NULL;
    if (!split_authority(s, strlen(s), &h, &p, &br) || p.len == 0) {
        return false;
    }
    *host = strndup(h.p, h.len);
    *port = strndup(p.p, p.len);
    if (*host == NULL || *port == NULL) {
        free(*host);
        free(*port);
        *host = NULL;
        *port = NULL;
        return false;
    }
    return true;
}

/* Replace the string at *field by a copy of v. */
static const char *
store_str(char **field, const char *v)
{
    char *copy = strdup(v);

    if (copy == NULL) {
        return oom;
    }
    free(*field);
    *field = copy;
    return NULL;
}

static const char *
set_str(const struct cfg_opt *o, void *obj, const char *v, char *buf,
        size_t len)
{
    if (v[0] == '\0' && !(o->flags & CFG_EMPTY_OK)) {
        return "must not be empty";
    }
    return store_str(FIELD(obj, o, char *), v);
}

/* Index of v in o->choices, or an error in buf. */
static int
choice(const struct cfg_opt *o, const char *v, char *buf, size_t len)
{
    size_t n = 0;
    int w;

    for (n = 0; o->choices[n] != NULL; n++) {
        if (strcmp(o->choices[n], v) == 0) {
            return (int)n;
        }
    }
    w = snprintf(buf, len, "must be %s", n > 2 ? "one of " : "");
    for (size_t i = 0; i < n && w >= 0 && (size_t)w < len; i++) {
        const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";

        w += snprintf(buf + w, len - (size_t)w, "%s%s", sep, o->choices[i]);
    }
    return -1;
}

static const char *
set_choice_str(const struct cfg_opt *o, void *obj, const char *v, char *buf,
               size_t len)
{
    if (choice(o, v, buf, len) < 0) {
        return buf;
    }
    return store_str(FIELD(obj, o, char *), v);
}

/* Whether s[0..n) is an HTTP field name (RFC 9110 token). */
static bool
field_name_ok(const char *s, size_t n)
{
    if (n == 0) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(isalnum(c) || strchr("!#$%&'*+-.^_`|~", c) != NULL)) {
            return false;
        }
    }
    return true;
}

/* add_header lines "Name: value"; the values may hold secrets, so no
 * message repeats one. ${VAR} is expanded later, with the environment. */
static const char *
set_add_header(const struct cfg_opt *o, void *obj, const char *v, char *buf,
               size_t len)
{
    struct cfg_upstream *u = obj;
    const char *line = v;

    (void)o;
    (void)buf;
    (void)len;
    while (*line != '\0') {
        const char *eol = strchr(line, '\n'), *colon, *val;
        size_t n = eol != NULL ? (size_t)(eol - line) : strlen(line);
        struct cfg_header *h;

        colon = memchr(line, ':', n);
        if (colon == NULL || !field_name_ok(line, (size_t)(colon - line))) {
            return "must be NAME: VALUE with NAME a header name";
        }
        for (val = colon + 1; val < line + n && (*val == ' ' || *val == '\t');
             val++) {
        }
        h = realloc(u->add, (u->nadd + 1) * sizeof(*u->add));
        if (h == NULL) {
            return oom;
        }
        u->add = h;
        h = &u->add[u->nadd++];
        h->name = strndup(line, (size_t)(colon - line));
        h->value = strndup(val, (size_t)(line + n - val));
        if (h->name == NULL || h->value == NULL) {
            return oom;
        }
        line += n + (eol != NULL);
    }
    return NULL;
}

static const char *
set_strip_header(const struct cfg_opt *o, void *obj, const char *v, char *buf,
                 size_t len)
{
    struct cfg_upstream *u = obj;
    const char *line = v;

    (void)o;
    (void)buf;
    (void)len;
    while (*line != '\0') {
        const char *eol = strchr(line, '\n');
        size_t n = eol != NULL ? (size_t)(eol - line) : strlen(line);
        char **names;

        while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\t')) {
            n--;
        }
        if (!field_name_ok(line, n)) {
            return "must be a header name";
        }
        names = realloc(u->strip, (u->nstrip + 1) * sizeof(*u->strip));
        if (names == NULL) {
            return oom;
        }
        u->strip = names;
        u->strip[u->nstrip] = strndup(line, n);
        if (u->strip[u->nstrip++] == NULL) {
            return oom;
        }
        line += n;
        while (*line == ' ' || *line == '\t') {
            line++;
        }
        line += *line == '\n';
    }
    return NULL;
}

/* A two-way choice into a bool field: true for the second choice. */
static const char *
set_choice_bool(const struct cfg_opt *o, void *obj, const char *v, char *buf,
                size_t len)
{
    int i = choice(o, v, buf, len);

    if (i < 0) {
        return buf;
    }
    *FIELD(obj, o, bool) = i == 1;
    return NULL;
}

static const char *
set_mode(const struct cfg_opt *o, void *obj, const char *v, char *buf,
         size_t len)
{
    static const enum tm_mode modes[] = {TM_MODE_CORRECTNESS,
                                         TM_MODE_EFFICIENCY, TM_MODE_OFF};
    int i = choice(o, v, buf, len);

    if (i < 0) {
        return buf;
    }
    ((struct cfg_route *)obj)->mode = modes[i];
    return NULL;
}

static const char *
set_verify(const struct cfg_opt *o, void *obj, const char *v, char *buf,
           size_t len)
{
    static const enum tm_verify verifies[] = {TM_VERIFY_NONE, TM_VERIFY_HMAC};
    int i = choice(o, v, buf, len);

    if (i < 0) {
        return buf;
    }
    ((struct cfg_route *)obj)->verify = verifies[i];
    return NULL;
}

static const char *
set_bool(const struct cfg_opt *o, void *obj, const char *v, char *buf,
         size_t len)
{
    int i = choice(o, v, buf, len);

    if (i < 0) {
        return buf;
    }
    *FIELD(obj, o, bool) = i == 0;
    return NULL;
}

/* The key behind [tokens] key_file: a regular file nobody but its owner
 * and group may read, holding TOKEN_KEY_MIN to 4096 bytes (one final
 * newline is not part of the key). Messages name the problem, never the
 * key. */
/* Read a secret from path: a regular file nobody but its owner (and
 * group) may read, min to 4096 bytes, one final LF dropped. On success
 * *out is malloc'd (the caller frees) and NULL is returned; else a
 * message that never quotes the file. */
static const char *
read_secret(const char *path, const char *what, size_t min, unsigned char **out,
            size_t *outlen, char *buf, size_t len)
{
    unsigned char key[4097];
    struct stat st;
    size_t n = 0;
    ssize_t got;
    int fd;

    /* O_NONBLOCK: a FIFO named here must not hang the loader. */
    fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(buf, len, "cannot open the %s file: %s", what,
                 strerror(errno));
        return buf;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(buf, len, "the %s file is not a regular file", what);
        return buf;
    }
    if (st.st_mode & (S_IROTH | S_IWOTH)) {
        close(fd);
        snprintf(buf, len,
                 "the %s file is readable or writable by others: "
                 "chmod 600 it (or 640 for a group)",
                 what);
        return buf;
    }
    while (n < sizeof(key) && (got = read(fd, key + n, sizeof(key) - n)) != 0) {
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got < 0) {
            close(fd);
            explicit_bzero(key, sizeof(key));
            snprintf(buf, len, "cannot read the %s file", what);
            return buf;
        }
        n += (size_t)got;
    }
    close(fd);
    if (n > 0 && key[n - 1] == '\n') {
        n--;
    }
    if (n == 0) {
        snprintf(buf, len, "the %s file is empty", what);
        return buf;
    }
    if (n < min || n > 4096) {
        explicit_bzero(key, sizeof(key));
        snprintf(buf, len,
                 "the %s must be %zu to 4096 bytes (openssl rand "
                 "-hex 32 makes one)",
                 what, min);
        return buf;
    }
    *out = malloc(n);
    if (*out == NULL) {
        explicit_bzero(key, sizeof(key));
        return oom;
    }
    memcpy(*out, key, n);
    *outlen = n;
    explicit_bzero(key, sizeof(key));
    return NULL;
}

static const char *
set_key_file(const struct cfg_opt *o, void *obj, const char *v, char *buf,
             size_t len)
{
    struct cfg_tokens *t = obj;
    const char *msg;

    if (v[0] == '\0') {
        return "must name the file holding the signing key";
    }
    free(t->key);
    t->key = NULL;
    msg = read_secret(v, "key", TOKEN_KEY_MIN, &t->key, &t->key_len, buf, len);
    return msg != NULL ? msg : store_str(&t->key_file, v);
}

/* [admin] token_file: the bearer token the lock service and the marks
 * API require. Empty: none. */
static const char *
set_admin_token_file(const struct cfg_opt *o, void *obj, const char *v,
                     char *buf, size_t len)
{
    struct cfg_admin *a = obj;
    const char *msg;

    free(a->token);
    a->token = NULL;
    a->token_len = 0;
    if (v[0] == '\0') {
        return NULL;
    }
    msg = read_secret(v, "token", 16, &a->token, &a->token_len, buf, len);
    return msg != NULL ? msg : store_str(&a->token_file, v);
}

/* [admin] allowed_hosts: host names (no ports) separated by spaces,
 * kept as written; policies/origin.c reads the list. */
static const char *
set_allowed_hosts(const struct cfg_opt *o, void *obj, const char *v, char *buf,
                  size_t len)
{
    const char *p = v;

    (void)buf;
    (void)len;
    while (*p != '\0') {
        size_t n;

        p += strspn(p, " \t");
        n = strcspn(p, " \t");
        if (n > 0 && !origin_name_ok(p, n)) {
            return "must be host names (letters, digits, '-', '.', '_'; no "
                   "port) separated by spaces";
        }
        p += n;
    }
    return store_str(FIELD(obj, o, char *), v);
}

/* Decimal integer, optionally scaled by a binary suffix K, M, G or T. */
static bool
parse_int(const char *v, bool suffix, int64_t *out)
{
    char *end;
    long long n;
    int shift = 0;

    if (!is_digit(v[0]) && !(v[0] == '-' && is_digit(v[1]))) {
        return false;
    }
    errno = 0;
    n = strtoll(v, &end, 10);
    if (errno != 0) {
        return false;
    }
    if (suffix && *end != '\0' && end[1] == '\0') {
        static const char units[] = "kmgt";
        const char *u = memchr(units, end[0] | 0x20, 4);

        if (u == NULL) {
            return false;
        }
        shift = 10 * (int)(u - units + 1);
        end++;
    }
    if (*end != '\0') {
        return false;
    }
    if (shift > 0 && (n > (INT64_MAX >> shift) || n < -(INT64_MAX >> shift))) {
        return false;
    }
    *out = (int64_t)n * ((int64_t)1 << shift);
    return true;
}

/* v as an integer (a size, with a suffix, when size) within o's bounds
 * into *n; NULL, or a message (static, or in buf). */
static const char *
parse_bounded(const struct cfg_opt *o, const char *v, bool size, int64_t *n,
              char *buf, size_t len)
{
    if (!parse_int(v, size, n)) {
        return size ? "must be a size in bytes, like 1073741824 or 1G"
                    : "must be an integer";
    }
    if (*n < o->min || *n > o->max) {
        snprintf(buf, len, "must be between %lld and %lld", (long long)o->min,
                 (long long)o->max);
        return buf;
    }
    return NULL;
}

static const char *
set_int(const struct cfg_opt *o, void *obj, const char *v, char *buf,
        size_t len)
{
    int64_t n;
    const char *msg = parse_bounded(o, v, false, &n, buf, len);

    if (msg == NULL) {
        *FIELD(obj, o, int) = (int)n;
    }
    return msg;
}

static const char *
set_size(const struct cfg_opt *o, void *obj, const char *v, char *buf,
         size_t len)
{
    int64_t n;
    const char *msg = parse_bounded(o, v, true, &n, buf, len);

    if (msg == NULL) {
        *FIELD(obj, o, int64_t) = n;
    }
    return msg;
}

static const char *
set_listen(const struct cfg_opt *o, void *obj, const char *v, char *buf,
           size_t len)
{
    char *host, *port;
    size_t n = strlen(v);
    char probe[256];
    const char *check = v;

    if (v[0] == '\0') {
        return set_str(o, obj, v, buf, len);
    }
    /* Port 0: the system picks a free one when the listener binds (an
     * embedding program asks tm_proxy_port which). */
    if (n > 2 && n < sizeof(probe) && strcmp(v + n - 2, ":0") == 0) {
        snprintf(probe, sizeof(probe), "%.*s:1", (int)(n - 2), v);
        check = probe;
    }
    if (!cfg_split_hostport(check, &host, &port)) {
        return "must be host:port or [v6]:port";
    }
    free(host);

    free(port);
    return store_str(FIELD(obj, o, char *), v);
}

/* A header name is an RFC 9110 token. */
static const char *
set_header_name(const struct cfg_opt *o, void *obj, const char *v, char *buf,
                size_t len)
{
    if (v[0] == '\0') {
        return "must not be empty";
    }
    for (const char *p = v; *p != '\0'; p++) {
        if (!is_alnum(*p) && strchr("!#$%&'*+-.^_`|~", *p) == NULL) {
            return "must be a header name (letters, digits, '-')";
        }
    }
    return store_str(FIELD(obj, o, char *), v);
}

static const char *
set_upstream_url(const struct cfg_opt *o, void *obj, const char *v, char *buf,
                 size_t len)
{
    struct cfg_upstream *u = obj;
    struct tm_slice host, port;
    const char *a, *rest;
    size_t alen;
    bool tls, br;
    int pnum, pdef;

    if (strncasecmp(v, "http://", 7) == 0) {
        tls = false;
        a = v + 7;
    } else if (strncasecmp(v, "https://", 8) == 0) {
        tls = true;
        a = v + 8;
    } else {
        return "must start with http:// or https://";
    }
    alen = strcspn(a, "/?#");
    rest = a + alen;
    if (memchr(a, '@', alen) != NULL) {
        return "must not hold user info: put credentials elsewhere";
    }
    if (strpbrk(rest, "?#") != NULL) {
        return "must not have a query or a fragment";
    }
    if (rest[0] != '\0' && strcmp(rest, "/") != 0) {
        return "may have no path but \"/\": tidemark forwards the request "
               "path unchanged";
    }
    if (!split_authority(a, alen, &host, &port, &br)) {
        return "must be http://host[:port] or https://host[:port]";
    }
    pdef = tls ? 443 : 80;
    pnum = port.len > 0 ? parse_port(port.p, port.len) : pdef;

    free(u->url);
    free(u->host);
    free(u->port);
    free(u->host_header);
    u->tls = tls;
    u->url = strdup(v);
    u->host = strndup(host.p, host.len);
    u->port = malloc(6);
    u->host_header = malloc(host.len + 9);
    if (u->url == NULL || u->host == NULL || u->port == NULL ||
        u->host_header == NULL) {
        return oom;
    }
    snprintf(u->port, 6, "%d", pnum);
    /* Host as a client would send it: the port only when not default. */
    snprintf(u->host_header, host.len + 9, "%s%.*s%s", br ? "[" : "",
             (int)host.len, host.p, br ? "]" : "");
    if (pnum != pdef) {
        size_t n = strlen(u->host_header);

        snprintf(u->host_header + n, host.len + 9 - n, ":%d", pnum);
    }
    return NULL;
}

/* redis://[[user]:password@]host:port[/db] */
static bool
redis_url_ok(const char *v)
{
    const char *a, *at, *slash;
    struct tm_slice host, port;
    bool br;

    if (strncmp(v, "redis://", 8) != 0) {
        return false;
    }
    a = v + 8;
    slash = a + strcspn(a, "/?#");
    at = NULL;
    for (const char *p = a; p < slash; p++) {
        if (*p == '@') {
            at = p;
        }
    }
    if (at != NULL) {
        a = at + 1;
    }
    if (!split_authority(a, (size_t)(slash - a), &host, &port, &br) ||
        port.len == 0) {
        return false;
    }
    if (*slash == '\0') {
        return true;
    }
    if (*slash != '/' || slash[1] == '\0') {
        return false;
    }
    for (const char *p = slash + 1; *p != '\0'; p++) {
        if (!is_digit(*p)) {
            return false;
        }
    }
    return true;
}

static const char *
set_redis_url(const struct cfg_opt *o, void *obj, const char *v, char *buf,
              size_t len)
{
    if (v[0] != '\0' && !redis_url_ok(v)) {
        return "must be redis://host:port[/db]";
    }
    return store_str(FIELD(obj, o, char *), v);
}

/* libpq's parse error, first line only, with every quoted part but "="
 * replaced by "...": libpq quotes pieces of the string, which may be a
 * password. */
static void
dsn_error(char *buf, size_t len, const char *msg)
{
    size_t o = 0;

    o += (size_t)snprintf(buf, len, "not a libpq connection string: ");
    for (const char *p = msg; *p != '\0' && *p != '\n' && o + 8 < len;) {
        const char *q;

        if (*p != '"') {
            buf[o++] = *p++;
            continue;
        }
        q = strchr(p + 1, '"');
        if (q == NULL) {
            break;
        }
        if (q == p + 2 && p[1] == '=') {
            memcpy(buf + o, "\"=\"", 3);
            o += 3;
        } else {
            memcpy(buf + o, "\"...\"", 5);
            o += 5;
        }
        p = q + 1;
    }
    buf[o < len ? o : len - 1] = '\0';
}

/* A libpq connection string or URI, as libpq parses it (no I/O). */
static const char *
set_dsn(const struct cfg_opt *o, void *obj, const char *v, char *buf,
        size_t len)
{
    char *msg = NULL;
    PQconninfoOption *opts;

    if (v[0] != '\0') {
        opts = PQconninfoParse(v, &msg);
        if (opts == NULL) {
            dsn_error(buf, len, msg != NULL ? msg : "out of memory");
            PQfreemem(msg);
            return buf;
        }
        PQconninfoFree(opts);
    }
    return store_str(FIELD(obj, o, char *), v);
}

/* http://host:port[,http://host:port...]; spaces around commas. */
static const char *
set_endpoints(const struct cfg_opt *o, void *obj, const char *v, char *buf,
              size_t len)
{
    const char *p = v;

    while (v[0] != '\0') {
        size_t n = strcspn(p, ",");
        const char *next = p + n;
        struct tm_slice host, port;
        bool br;

        while (n > 0 && (*p == ' ' || *p == '\t')) {
            p++;
            n--;
        }
        while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) {
            n--;
        }
        if (n > 0 && p[n - 1] == '/') {
            n--;
        }
        if (n < 7 || strncmp(p, "http://", 7) != 0 ||
            !split_authority(p + 7, n - 7, &host, &port, &br) ||
            port.len == 0) {
            return "must be http://host:port, comma-separated";
        }
        if (*next == '\0') {
            break;
        }
        p = next + 1;
    }
    return store_str(FIELD(obj, o, char *), v);
}

static const char *
set_methods(const struct cfg_opt *o, void *obj, const char *v, char *buf,
            size_t len)
{
    struct cfg_route *r = obj;
    struct tm_methods m;

    if (!methods_parse(&m, v, buf, len)) {
        return buf;
    }
    methods_free(&r->methods);
    r->methods = m;
    return NULL;
}

static const char *
set_path(const struct cfg_opt *o, void *obj, const char *v, char *buf,
         size_t len)
{
    struct cfg_route *r = obj;

    tmpl_free(&r->path);
    if (!tmpl_compile(&r->path, v, buf, len)) {
        return buf;
    }
    return store_str(&r->path_src, v);
}

/* A resource template naming the path's captures, or the word "header".
 * Needs the path compiled first; a missing or bad path is reported on
 * its own, so nothing is said here then. */
static const char *
set_resource(const struct cfg_opt *o, void *obj, const char *v, char *buf,
             size_t len)
{
    struct cfg_route *r = obj;

    rtmpl_free(&r->resource);
    if (store_str(&r->resource_src, v) != NULL) {
        return oom;
    }
    r->resource_from_header = strcmp(v, "header") == 0;
    if (r->resource_from_header || r->path.nsegs == 0) {
        return NULL;
    }
    if (!rtmpl_compile(&r->resource, v, &r->path, buf, len)) {
        return buf;
    }
    return NULL;
}

static const char *
set_section_ref(const struct cfg_opt *o, void *obj, const char *v, char *buf,
                size_t len)
{
    if (!cfg_name_ok(v, strlen(v))) {
        return "must be the NAME of an [upstream NAME] section";
    }
    return store_str(FIELD(obj, o, char *), v);
}

static const char *const unmatched_choices[] = {"pass", "reject", NULL};
static const char *const level_choices[] = {"error", "warn", "info", "debug",
                                            NULL};
static const char *const type_choices[] = {"lmdb", "postgres", "redis", "etcd",
                                           NULL};
static const char *const mode_choices[] = {"correctness", "efficiency", "off",
                                           NULL};
static const char *const verify_choices[] = {"none", "hmac", NULL};
static const char *const bool_choices[] = {"yes", "no", NULL};
static const char *const lock_backend_choices[] = {"lmdb", "redis", "postgres",
                                                   NULL};
static const char *const host_choices[] = {"upstream", "preserve", NULL};
static const char *const log_format_choices[] = {"text", "json", NULL};

#define NONE 0, 0, NULL
#define INT(lo, hi) (lo), (hi), NULL
#define CHOICE(c) 0, 0, (c)

/* Each entry: section, key, default, setter, field offset, bounds or
 * choices, flags, help. */
const struct cfg_opt cfg_opts[] = {
    {CFG_PROXY, "listen", "127.0.0.1:7070", set_listen,
     offsetof(struct cfg_proxy, listen), NONE, CFG_RESTART,
     "host:port for application traffic"},
    {CFG_PROXY, "unmatched", "pass", set_choice_bool,
     offsetof(struct cfg_proxy, unmatched_reject), CHOICE(unmatched_choices), 0,
     "requests no route matches: pass | reject"},
    {CFG_PROXY, "token_header", "Fencing-Token", set_header_name,
     offsetof(struct cfg_proxy, token_header), NONE, 0,
     "request header carrying the fencing token"},
    {CFG_PROXY, "resource_header", "Fencing-Resource", set_header_name,
     offsetof(struct cfg_proxy, resource_header), NONE, 0,
     "request header naming the resource (routes with resource = header)"},
    {CFG_PROXY, "header_timeout_ms", "10000", set_int,
     offsetof(struct cfg_proxy, header_timeout_ms), INT(1, 3600000), 0,
     "a request head must arrive within this"},
    {CFG_PROXY, "idle_timeout_ms", "60000", set_int,
     offsetof(struct cfg_proxy, idle_timeout_ms), INT(1, 86400000), 0,
     "idle keep-alive client connections are closed after this"},
    {CFG_PROXY, "max_head", "16384", set_int,
     offsetof(struct cfg_proxy, max_head), INT(1024, 1048576), 0,
     "bytes of request line and headers (431 beyond)"},
    {CFG_PROXY, "max_uri", "8192", set_int, offsetof(struct cfg_proxy, max_uri),
     INT(256, 1048576 - CFG_URI_SLACK), 0,
     "bytes of request-target (414 beyond); at most max_head - 64"},
    {CFG_PROXY, "max_headers", "100", set_int,
     offsetof(struct cfg_proxy, max_headers), INT(1, 128), 0,
     "header fields in one request head"},
    {CFG_PROXY, "max_connections", "10000", set_int,
     offsetof(struct cfg_proxy, max_connections), INT(1, 1000000), 0,
     "client connections at once"},
    {CFG_PROXY, "order_grace_ms", "1000", set_int,
     offsetof(struct cfg_proxy, order_grace_ms), INT(0, 3600000), 0,
     "after a 504, the resource stays closed to higher tokens this long"},
    {CFG_PROXY, "min_body_rate", "0", set_int,
     offsetof(struct cfg_proxy, min_body_rate), INT(0, 1073741824), 0,
     "request bodies slower than this many bytes/s are cut off (408); 0: "
     "no minimum"},
    {CFG_PROXY, "body_rate_window_ms", "10000", set_int,
     offsetof(struct cfg_proxy, body_rate_window_ms), INT(100, 3600000), 0,
     "the window over which min_body_rate is measured"},
    {CFG_PROXY, "discard_limit", "65536", set_int,
     offsetof(struct cfg_proxy, discard_limit), INT(0, 1073741824), 0,
     "body bytes read and dropped after a refusal, to keep the connection"},
    {CFG_PROXY, "buffer_size", "65536", set_int,
     offsetof(struct cfg_proxy, buffer_size), INT(1024, 67108864), 0,
     "bytes buffered per direction before reading pauses"},
    {CFG_PROXY, "log_format", "text", set_choice_bool,
     offsetof(struct cfg_proxy, log_json), CHOICE(log_format_choices), 0,
     "text | json: one object a line, key=value pairs as fields"},
    {CFG_PROXY, "drain_timeout_ms", "10000", set_int,
     offsetof(struct cfg_proxy, drain_timeout_ms), INT(0, 3600000), 0,
     "on SIGTERM, how long in-flight requests may take"},
    {CFG_PROXY, "log_level", "info", set_choice_str,
     offsetof(struct cfg_proxy, log_level), CHOICE(level_choices), 0,
     "error | warn | info | debug"},

    {CFG_ADMIN, "listen", "127.0.0.1:7071", set_listen,
     offsetof(struct cfg_admin, listen), NONE, CFG_EMPTY_OK | CFG_RESTART,
     "host:port of the control port; empty: none"},
    {CFG_ADMIN, "token_file", "", set_admin_token_file, 0, NONE, CFG_EMPTY_OK,
     "file holding a bearer token the lock service and marks API require"},
    {CFG_ADMIN, "allowed_hosts", "", set_allowed_hosts,
     offsetof(struct cfg_admin, allowed_hosts), NONE, CFG_EMPTY_OK,
     "Host names the control port answers besides its address and "
     "loopback"},

    {CFG_STORE, "type", "lmdb", set_choice_str,
     offsetof(struct cfg_store, type), CHOICE(type_choices), CFG_RESTART,
     "lmdb | postgres | redis | etcd"},
    {CFG_STORE, "path", "./data/marks.lmdb", set_str,
     offsetof(struct cfg_store, path), NONE, CFG_EMPTY_OK | CFG_RESTART,
     "lmdb: the database file"},
    {CFG_STORE, "map_size", "1073741824", set_size,
     offsetof(struct cfg_store, map_size), INT(1048576, INT64_C(1) << 44),
     CFG_RESTART, "lmdb: largest database size in bytes (K, M, G, T suffixes)"},
    {CFG_STORE, "dsn", NULL, set_dsn, offsetof(struct cfg_store, dsn), NONE,
     CFG_EMPTY_OK | CFG_RESTART | CFG_SECRET,
     "postgres: a libpq connection string or URI"},
    {CFG_STORE, "url", NULL, set_redis_url, offsetof(struct cfg_store, url),
     NONE, CFG_EMPTY_OK | CFG_RESTART | CFG_SECRET,
     "redis: redis://host:port[/db]"},
    {CFG_STORE, "endpoints", NULL, set_endpoints,
     offsetof(struct cfg_store, endpoints), NONE, CFG_EMPTY_OK | CFG_RESTART,
     "etcd: http://host:port, comma-separated"},
    {CFG_STORE, "pool_size", "2", set_int,
     offsetof(struct cfg_store, pool_size), INT(1, 64), CFG_RESTART,
     "postgres, etcd: connections to the store"},
    {CFG_STORE, "wait_replicas", "0", set_int,
     offsetof(struct cfg_store, wait_replicas), INT(0, 64), CFG_RESTART,
     "redis: a raise is accepted once this many replicas have it (WAIT)"},
    {CFG_STORE, "cache_entries", "100000", set_int,
     offsetof(struct cfg_store, cache_entries), INT(16, 100000000), CFG_RESTART,
     "marks kept in memory"},
    {CFG_STORE, "timeout_ms", "2000", set_int,
     offsetof(struct cfg_store, timeout_ms), INT(1, 600000), CFG_RESTART,
     "one raise, end to end"},

    {CFG_LOCKS, "backend", "lmdb", set_choice_str,
     offsetof(struct cfg_locks, backend), CHOICE(lock_backend_choices),
     CFG_RESTART, "where leases live: lmdb | redis | postgres"},
    {CFG_LOCKS, "url", NULL, set_redis_url, offsetof(struct cfg_locks, url),
     NONE, CFG_EMPTY_OK | CFG_RESTART | CFG_SECRET,
     "redis: redis://host:port[/db]"},
    {CFG_LOCKS, "dsn", NULL, set_dsn, offsetof(struct cfg_locks, dsn), NONE,
     CFG_EMPTY_OK | CFG_RESTART | CFG_SECRET,
     "postgres: a libpq connection string or URI"},
    {CFG_LOCKS, "pool_size", "2", set_int,
     offsetof(struct cfg_locks, pool_size), INT(1, 64), CFG_RESTART,
     "postgres: connections to the lease table"},
    {CFG_LOCKS, "timeout_ms", "2000", set_int,
     offsetof(struct cfg_locks, timeout_ms), INT(1, 600000), CFG_RESTART,
     "redis, postgres: one lock operation, end to end"},
    {CFG_LOCKS, "path", "./data/locks.lmdb", set_str,
     offsetof(struct cfg_locks, path), NONE, CFG_RESTART,
     "lmdb: the lease file (not the [store] file)"},
    {CFG_LOCKS, "map_size", "268435456", set_size,
     offsetof(struct cfg_locks, map_size), INT(1048576, INT64_C(1) << 44),
     CFG_RESTART,
     "lmdb: largest lease file size in bytes (K, M, G, T suffixes)"},
    {CFG_LOCKS, "eager", "yes", set_bool, offsetof(struct cfg_locks, eager),
     CHOICE(bool_choices), CFG_RESTART,
     "yes: an acquire raises the resource's mark to the new fence"},
    {CFG_LOCKS, "max_ttl_ms", "3600000", set_int,
     offsetof(struct cfg_locks, max_ttl_ms), INT(1, 86400000), CFG_RESTART,
     "longest lease an acquire or extend may ask for"},
    {CFG_LOCKS, "max_wait_ms", "60000", set_int,
     offsetof(struct cfg_locks, max_wait_ms), INT(0, 3600000), CFG_RESTART,
     "longest ?wait_ms= an acquire may ask for"},

    {CFG_TOKENS, "key_file", NULL, set_key_file, 0, NONE, CFG_RESTART,
     "file holding the HMAC key that signs issued tokens (mode 600)"},

    {CFG_UPSTREAM, "url", NULL, set_upstream_url, 0, NONE, CFG_REQUIRED,
     "http://host[:port] or https://host[:port]"},
    {CFG_UPSTREAM, "connect_timeout_ms", "2000", set_int,
     offsetof(struct cfg_upstream, connect_timeout_ms), INT(1, 600000), 0,
     "connecting, TLS handshake included"},
    {CFG_UPSTREAM, "timeout_ms", "30000", set_int,
     offsetof(struct cfg_upstream, timeout_ms), INT(1, 86400000), 0,
     "waiting for the response head, and between body reads"},
    {CFG_UPSTREAM, "max_idle", "64", set_int,
     offsetof(struct cfg_upstream, max_idle), INT(0, 100000), 0,
     "idle keep-alive connections kept in the pool"},
    {CFG_UPSTREAM, "ca_file", "", set_str,
     offsetof(struct cfg_upstream, ca_file), NONE, CFG_EMPTY_OK,
     "https: PEM file of CAs to verify the upstream; empty: system CAs"},
    {CFG_UPSTREAM, "add_header", NULL, set_add_header, 0, NONE, CFG_REPEAT,
     "NAME: VALUE added to every forwarded request (repeatable; ${VAR} "
     "from the environment); replaces a client header of that name"},
    {CFG_UPSTREAM, "strip_header", NULL, set_strip_header, 0, NONE, CFG_REPEAT,
     "a client header removed before forwarding (repeatable)"},
    {CFG_UPSTREAM, "host", "upstream", set_choice_bool,
     offsetof(struct cfg_upstream, host_preserve), CHOICE(host_choices), 0,
     "upstream | preserve: the Host header sent upstream"},

    {CFG_ROUTE, "methods", "PUT POST PATCH DELETE", set_methods, 0, NONE, 0,
     "methods the route applies to, space-separated; * for every method"},
    {CFG_ROUTE, "path", NULL, set_path, 0, NONE, CFG_REQUIRED,
     "path template: {name} one segment, {name*} the rest"},
    {CFG_ROUTE, "resource", NULL, set_resource, 0, NONE, CFG_REQUIRED,
     "resource template naming the path's captures, or header"},
    {CFG_ROUTE, "mode", "correctness", set_mode, 0, CHOICE(mode_choices), 0,
     "correctness | efficiency | off"},
    {CFG_ROUTE, "verify", "none", set_verify, 0, CHOICE(verify_choices), 0,
     "none | hmac"},
    {CFG_ROUTE, "max_body", "0", set_size, offsetof(struct cfg_route, max_body),
     INT(0, INT64_MAX), 0,
     "largest request body in bytes (K M G T); 0: no limit"},
    {CFG_ROUTE, "upstream", "default", set_section_ref,
     offsetof(struct cfg_route, upstream), NONE, 0,
     "NAME of the [upstream NAME] requests are forwarded to"},
};

const size_t cfg_nopts = sizeof(cfg_opts) / sizeof(cfg_opts[0]);

/* ---- options as values: compare, copy, show (reload) -------------- */

/* The field type behind an option, told by its setter. */
enum opt_type {
    OT_OTHER = 0, /* parsed into several fields: not comparable */
    OT_INT,
    OT_SIZE,
    OT_BOOL_FIRST,  /* bool, true for the first choice (yes) */
    OT_BOOL_SECOND, /* bool, true for the second choice */
    OT_STR,
    OT_KEY, /* [tokens] key_file: the file's name and bytes */
};

static enum opt_type
opt_type(const struct cfg_opt *o)
{
    static const struct {
        cfg_set_fn set;
        enum opt_type type;
    } types[] = {
        {set_int, OT_INT},         {set_size, OT_SIZE},
        {set_bool, OT_BOOL_FIRST}, {set_choice_bool, OT_BOOL_SECOND},
        {set_str, OT_STR},         {set_choice_str, OT_STR},
        {set_listen, OT_STR},      {set_header_name, OT_STR},
        {set_redis_url, OT_STR},   {set_dsn, OT_STR},
        {set_endpoints, OT_STR},   {set_section_ref, OT_STR},
        {set_key_file, OT_KEY},
    };

    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (types[i].set == o->set) {
            return types[i].type;
        }
    }
    return OT_OTHER;
}

bool
cfg_opt_comparable(const struct cfg_opt *o)
{
    return opt_type(o) != OT_OTHER;
}

static bool
same_str(const char *a, const char *b)
{
    return (a == NULL && b == NULL) ||
           (a != NULL && b != NULL && strcmp(a, b) == 0);
}

bool
cfg_opt_same(const struct cfg_opt *o, const void *a, const void *b)
{
    const struct cfg_tokens *ta = a, *tb = b;

    switch (opt_type(o)) {
    case OT_INT:
        return *FIELD(a, o, const int) == *FIELD(b, o, const int);
    case OT_SIZE:
        return *FIELD(a, o, const int64_t) == *FIELD(b, o, const int64_t);
    case OT_BOOL_FIRST:
    case OT_BOOL_SECOND:
        return *FIELD(a, o, const bool) == *FIELD(b, o, const bool);
    case OT_STR:
        return same_str(*FIELD(a, o, char *const), *FIELD(b, o, char *const));
    case OT_KEY:
        return same_str(ta->key_file, tb->key_file) &&
               ta->key_len == tb->key_len &&
               (ta->key_len == 0 || memcmp(ta->key, tb->key, ta->key_len) == 0);
    case OT_OTHER:
        break;
    }
    return false;
}

/* *dst = a copy of n bytes at src (NULL stays NULL). */
static bool
dup_bytes(void *dst, const void *src, size_t n)
{
    void *copy = NULL;

    if (src != NULL && (copy = malloc(n + 1)) == NULL) {
        return false;
    }
    if (copy != NULL) {
        memcpy(copy, src, n);
        ((char *)copy)[n] = '\0';
    }
    *(void **)dst = copy;
    return true;
}

static const char *
copy_key(struct cfg_tokens *d, const struct cfg_tokens *s)
{
    if (d->key != NULL) {
        explicit_bzero(d->key, d->key_len);
    }
    free(d->key);
    free(d->key_file);
    d->key = NULL;
    d->key_file = NULL;
    d->key_len = 0;
    if (!dup_bytes(&d->key, s->key, s->key_len) ||
        !dup_bytes(&d->key_file, s->key_file,
                   s->key_file != NULL ? strlen(s->key_file) : 0)) {
        return oom;
    }
    d->key_len = s->key_len;
    return NULL;
}

const char *
cfg_opt_copy(const struct cfg_opt *o, void *dst, const void *src)
{
    char *const *from;
    char *copy;

    switch (opt_type(o)) {
    case OT_INT:
        *FIELD(dst, o, int) = *FIELD(src, o, const int);
        return NULL;
    case OT_SIZE:
        *FIELD(dst, o, int64_t) = *FIELD(src, o, const int64_t);
        return NULL;
    case OT_BOOL_FIRST:
    case OT_BOOL_SECOND:
        *FIELD(dst, o, bool) = *FIELD(src, o, const bool);
        return NULL;
    case OT_STR:
        from = FIELD(src, o, char *const);
        if (!dup_bytes(&copy, *from, *from != NULL ? strlen(*from) : 0)) {
            return oom;
        }
        free(*FIELD(dst, o, char *));
        *FIELD(dst, o, char *) = copy;
        return NULL;
    case OT_KEY:
        return copy_key(dst, src);
    case OT_OTHER:
        break;
    }
    return "cannot be copied";
}

void
cfg_opt_show(const struct cfg_opt *o, const void *obj, char *buf, size_t len)
{
    const char *s = NULL;

    switch (opt_type(o)) {
    case OT_INT:
        snprintf(buf, len, "%d", *FIELD(obj, o, const int));
        return;
    case OT_SIZE:
        snprintf(buf, len, "%lld", (long long)*FIELD(obj, o, const int64_t));
        return;
    case OT_BOOL_FIRST:
        s = o->choices[*FIELD(obj, o, const bool) ? 0 : 1];
        break;
    case OT_BOOL_SECOND:
        s = o->choices[*FIELD(obj, o, const bool) ? 1 : 0];
        break;
    case OT_STR:
        s = *FIELD(obj, o, char *const);
        break;
    case OT_KEY:
        s = ((const struct cfg_tokens *)obj)->key_file;
        break;
    case OT_OTHER:
        s = "?";
        break;
    }
    if ((o->flags & CFG_SECRET) && s != NULL && s[0] != '\0') {
        s = "(secret)";
    }
    snprintf(buf, len, "%s",
             s == NULL      ? "(none)"
             : s[0] == '\0' ? "(empty)"
                            : s);
}

void *
cfg_singleton(struct tm_config *c, enum cfg_sect s)
{
    switch (s) {
    case CFG_PROXY:
        return &c->proxy;
    case CFG_ADMIN:
        return &c->admin;
    case CFG_STORE:
        return &c->store;
    case CFG_LOCKS:
        return &c->locks;
    case CFG_TOKENS:
        return &c->tokens;
    default:
        return NULL;
    }
}

const char *
cfg_sect_name(enum cfg_sect s)
{
    static const char *const names[CFG_NSECT] = {
        "proxy", "admin", "store", "locks", "tokens", "upstream", "route",
    };

    return names[s];
}

bool
cfg_sect_named(enum cfg_sect s)
{
    return s == CFG_UPSTREAM || s == CFG_ROUTE;
}

const char *
cfg_check_locks(const struct cfg_locks *l, char *buf, size_t len)
{
    const char *need = NULL, *v = NULL;

    if (l->backend == NULL) {
        return NULL;
    }
    if (strcmp(l->backend, "redis") == 0) {
        need = "url";
        v = l->url;
    } else if (strcmp(l->backend, "postgres") == 0) {
        need = "dsn";
        v = l->dsn;
    }
    if (need != NULL && (v == NULL || !*v)) {
        snprintf(buf, len, "[locks] backend %s needs %s", l->backend, need);
        return buf;
    }
    return NULL;
}

const char *
cfg_check_proxy(const struct cfg_proxy *p, char *buf, size_t len)
{
    if (p->max_uri > p->max_head - CFG_URI_SLACK) {
        snprintf(buf, len,
                 "max_uri (%d) must be at most max_head - %d (%d): a longer "
                 "target would be refused as a large head (431), never as "
                 "a long target (414)",
                 p->max_uri, CFG_URI_SLACK, p->max_head - CFG_URI_SLACK);
        return buf;
    }
    return NULL;
}

const char *
cfg_check_store(const struct cfg_store *s, char *buf, size_t len)
{
    static const struct {
        const char *type;
        const char *key;
        size_t off;
    } needs[] = {
        {"lmdb", "path", offsetof(struct cfg_store, path)},
        {"postgres", "dsn", offsetof(struct cfg_store, dsn)},
        {"redis", "url", offsetof(struct cfg_store, url)},
        {"etcd", "endpoints", offsetof(struct cfg_store, endpoints)},
    };

    if (s->type == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < sizeof(needs) / sizeof(needs[0]); i++) {
        const char *v =
            *(char *const *)(const void *)((const char *)s + needs[i].off);

        if (strcmp(s->type, needs[i].type) == 0 && (v == NULL || !*v)) {
            snprintf(buf, len, "[store] type %s needs %s", needs[i].type,
                     needs[i].key);
            return buf;
        }
    }
    return NULL;
}
