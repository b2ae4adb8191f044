/* cfg_opts.c: the one table of options and its setters. A setter parses
 * one value into its field and returns NULL or a message; it never echoes
 * the value, which may hold a password. */
#include "cfg_opts.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "../policies/canon.h"
#include "../policies/origin.h"
#include "../policies/route.h"
#include "../policies/s3name.h"
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

/* CFG_T_STR: empty when CFG_EMPTY_OK allows it, else checked by the
 * entry's check. */
static const char *
set_str(const struct cfg_opt *o, void *obj, const char *v, char *buf,
        size_t len)
{
    const char *msg;

    if (v[0] == '\0' && !(o->flags & CFG_EMPTY_OK)) {
        return "must not be empty";
    }
    if (v[0] != '\0' && o->ops != NULL && o->ops->check != NULL &&
        (msg = o->ops->check(v, buf, len)) != NULL) {
        return msg;
    }
    return store_str(FIELD(obj, o, char *), v);
}

/* Index of v in choices, or an error in buf. */
static int
choice(const char *const *choices, const char *v, char *buf, size_t len)
{
    size_t n = 0;
    int w;

    for (n = 0; choices[n] != NULL; n++) {
        if (strcmp(choices[n], v) == 0) {
            return (int)n;
        }
    }
    w = snprintf(buf, len, "must be %s", n > 2 ? "one of " : "");
    for (size_t i = 0; i < n && w >= 0 && (size_t)w < len; i++) {
        const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";

        w += snprintf(buf + w, len - (size_t)w, "%s%s", sep, choices[i]);
    }
    return -1;
}

static const char *
set_choice_str(const struct cfg_opt *o, void *obj, const char *v, char *buf,
               size_t len)
{
    if (choice(o->choices, v, buf, len) < 0) {
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
        if (!is_alnum(s[i]) && strchr("!#$%&'*+-.^_`|~", s[i]) == NULL) {
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

static void
drop_add_header(void *obj)
{
    struct cfg_upstream *u = obj;

    for (size_t i = 0; i < u->nadd; i++) {
        free(u->add[i].name);
        free(u->add[i].value);
    }
    free(u->add);
    u->add = NULL;
    u->nadd = 0;
}

/* Names only: the values carry credentials. */
static void
show_add_header(const void *obj, char *buf, size_t len)
{
    const struct cfg_upstream *u = obj;
    size_t n = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < u->nadd && n < len; i++) {
        int w = snprintf(buf + n, len - n, "%s%s: (secret)", i > 0 ? "\n" : "",
                         u->add[i].name);
        n += w > 0 ? (size_t)w : 0;
    }
}

static const struct cfg_ops add_header_ops = {NULL, set_add_header,
                                              drop_add_header, show_add_header};

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

static void
drop_strip_header(void *obj)
{
    struct cfg_upstream *u = obj;

    for (size_t i = 0; i < u->nstrip; i++) {
        free(u->strip[i]);
    }
    free(u->strip);
    u->strip = NULL;
    u->nstrip = 0;
}

static void
show_strip_header(const void *obj, char *buf, size_t len)
{
    const struct cfg_upstream *u = obj;
    size_t n = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < u->nstrip && n < len; i++) {
        int w =
            snprintf(buf + n, len - n, "%s%s", i > 0 ? "\n" : "", u->strip[i]);
        n += w > 0 ? (size_t)w : 0;
    }
}

static const struct cfg_ops strip_header_ops = {
    NULL, set_strip_header, drop_strip_header, show_strip_header};

/* A two-way choice into a bool field: true for the second choice. */
static const char *
set_flag(const struct cfg_opt *o, void *obj, const char *v, char *buf,
         size_t len)
{
    int i = choice(o->choices, v, buf, len);

    if (i < 0) {
        return buf;
    }
    *FIELD(obj, o, bool) = i == 1;
    return NULL;
}

/* CFG_T_ENUM: the choice's index is the enum's value. */
static const char *
set_enum(const struct cfg_opt *o, void *obj, const char *v, char *buf,
         size_t len)
{
    int i = choice(o->choices, v, buf, len);

    if (i < 0) {
        return buf;
    }
    *FIELD(obj, o, int) = i;
    return NULL;
}

static const char *const yes_no[] = {"yes", "no", NULL};

static const char *
set_bool(const struct cfg_opt *o, void *obj, const char *v, char *buf,
         size_t len)
{
    int i = choice(yes_no, v, buf, len);

    if (i < 0) {
        return buf;
    }
    *FIELD(obj, o, bool) = i == 0;
    return NULL;
}

/* The largest secret a key file may hold (the table's max). */
#define SECRET_MAX 4096

/* Read a secret from path: a regular file nobody but its owner (and
 * group) may read, min to max (at most SECRET_MAX) bytes, one final LF
 * dropped. On success *out is malloc'd (the caller frees) and NULL is
 * returned; else a message that never quotes the file. */
static const char *
read_secret(const char *path, const char *what, size_t min, size_t max,
            unsigned char **out, size_t *outlen, char *buf, size_t len)
{
    unsigned char key[SECRET_MAX + 1];
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
    if (n < min || n > max) {
        explicit_bzero(key, sizeof(key));
        snprintf(buf, len,
                 "the %s must be %zu to %zu bytes (openssl rand "
                 "-hex 32 makes one)",
                 what, min, max);
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

/* CFG_T_KEYFILE's fields, after the file's name at o->off. */
struct keyfile_fields {
    char *file;
    unsigned char *bytes;
    size_t len;
};

#define KEYFILE_LAYOUT(type, f, b, n)                                          \
    _Static_assert(offsetof(type, b) - offsetof(type, f) ==                    \
                           offsetof(struct keyfile_fields, bytes) &&           \
                       offsetof(type, n) - offsetof(type, f) ==                \
                           offsetof(struct keyfile_fields, len),               \
                   #type ": " #f ", " #b ", " #n " out of order")
KEYFILE_LAYOUT(struct cfg_tokens, key_file, key, key_len);
KEYFILE_LAYOUT(struct cfg_admin, token_file, token, token_len);

static unsigned char **
keyfile_bytes(const struct cfg_opt *o, const void *obj)
{
    return (unsigned char **)(void *)((char *)obj + o->off +
                                      offsetof(struct keyfile_fields, bytes));
}

static size_t *
keyfile_len(const struct cfg_opt *o, const void *obj)
{
    return (size_t *)(void *)((char *)obj + o->off +
                              offsetof(struct keyfile_fields, len));
}

/* Wipe and free a key file's bytes and name. */
static void
drop_keyfile(const struct cfg_opt *o, void *obj)
{
    unsigned char **bytes = keyfile_bytes(o, obj);

    if (*bytes != NULL) {
        explicit_bzero(*bytes, *keyfile_len(o, obj));
    }
    free(*bytes);
    free(*FIELD(obj, o, char *));
    *bytes = NULL;
    *keyfile_len(o, obj) = 0;
    *FIELD(obj, o, char *) = NULL;
}

/* CFG_T_KEYFILE: read the secret the file holds (min to max bytes).
 * Empty: none, where CFG_EMPTY_OK allows it. Messages call the secret
 * by the key's name without "_file" (key_file: "the key file"). */
static const char *
set_keyfile(const struct cfg_opt *o, void *obj, const char *v, char *buf,
            size_t len)
{
    char what[32];
    const char *msg;

    snprintf(what, sizeof(what), "%.*s", (int)strcspn(o->key, "_"), o->key);
    drop_keyfile(o, obj);
    if (v[0] == '\0') {
        if (o->flags & CFG_EMPTY_OK) {
            return NULL;
        }
        snprintf(buf, len, "must name the file holding the %s", what);
        return buf;
    }
    msg = read_secret(v, what, (size_t)o->min, (size_t)o->max,
                      keyfile_bytes(o, obj), keyfile_len(o, obj), buf, len);
    return msg != NULL ? msg : store_str(FIELD(obj, o, char *), v);
}

/* [admin] allowed_hosts: host names (no ports) separated by spaces,
 * kept as written; policies/origin.c reads the list. */
static const char *
check_allowed_hosts(const char *v, char *buf, size_t len)
{
    const char *p = v;

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
    return NULL;
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
check_listen(const char *v, char *buf, size_t len)
{
    char *host, *port;
    size_t n = strlen(v);
    char probe[256];
    const char *check = v;

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
    return NULL;
}

/* A header name is an RFC 9110 token (empty: unset). */
static const char *
check_header_name(const char *v, char *buf, size_t len)
{
    if (v[0] != '\0' && !field_name_ok(v, strlen(v))) {
        return "must be a header name (letters, digits, '-')";
    }
    return NULL;
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

static void
drop_upstream_url(void *obj)
{
    struct cfg_upstream *u = obj;

    free(u->url);
    free(u->host);
    free(u->port);
    free(u->host_header);
    u->url = u->host = u->port = u->host_header = NULL;
}

static void
show_upstream_url(const void *obj, char *buf, size_t len)
{
    const char *url = ((const struct cfg_upstream *)obj)->url;

    snprintf(buf, len, "%s", url != NULL ? url : "");
}

static const struct cfg_ops upstream_url_ops = {
    NULL, set_upstream_url, drop_upstream_url, show_upstream_url};

/* Whether ok(p, n, arg) holds for each item (p, n bytes, maybe empty)
 * of the comma-separated list v, in order; false at the first that
 * fails. trim: the spaces and tabs around an item are not part of it. */
static bool
each_item(const char *v, bool trim,
          bool (*ok)(const char *p, size_t n, void *arg), void *arg)
{
    for (const char *p = v;;) {
        size_t n = strcspn(p, ",");
        const char *next = p + n;

        while (trim && n > 0 && (*p == ' ' || *p == '\t')) {
            p++;
            n--;
        }
        while (trim && n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) {
            n--;
        }
        if (!ok(p, n, arg)) {
            return false;
        }
        if (*next == '\0') {
            return true;
        }
        p = next + 1;
    }
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

/* The URLs of a list so far, and whether each has no database or
 * database 0 (a cluster has only that one). */
struct redis_list {
    int n;
    bool db0;
};

/* One item of a list of redis:// URLs. */
static bool
redis_item_ok(const char *p, size_t k, void *arg)
{
    struct redis_list *l = arg;
    char one[256];
    const char *slash;

    if (k == 0 || k >= sizeof(one)) {
        return false;
    }
    memcpy(one, p, k);
    one[k] = '\0';
    if (!redis_url_ok(one)) {
        return false;
    }
    slash = strchr(one + 8, '/');
    if (slash != NULL && strspn(slash + 1, "0") != strlen(slash + 1)) {
        l->db0 = false;
    }
    l->n++;
    return true;
}

/* The URLs of a comma-separated list (spaces around commas allowed);
 * -1 when one of them is not a redis:// URL. *db0 tells whether every
 * URL has no database or database 0 (a cluster has only that one). */
static int
redis_urls(const char *v, bool *db0)
{
    struct redis_list l = {.n = 0, .db0 = true};
    bool ok = each_item(v, true, redis_item_ok, &l);

    *db0 = l.db0;
    return ok ? l.n : -1;
}

static const char *
check_redis_url(const char *v, char *buf, size_t len)
{
    bool db0;

    return redis_urls(v, &db0) > 0
               ? NULL
               : "must be redis://host:port[/db] (with cluster = yes: "
                 "several, comma-separated)";
}

/* url and cluster together: several seeds need cluster = yes, and a
 * cluster has database 0 only. NULL when fine. */
static const char *
check_redis_pair(const char *sect, const char *url, bool cluster, char *buf,
                 size_t len)
{
    bool db0;
    int n;

    if (url == NULL || *url == '\0') {
        return NULL;
    }
    n = redis_urls(url, &db0);
    if (n > 1 && !cluster) {
        snprintf(buf, len,
                 "[%s] url names %d servers: several URLs are the seed "
                 "nodes of a Redis Cluster: set cluster = yes",
                 sect, n);
        return buf;
    }
    if (cluster && !db0) {
        snprintf(buf, len,
                 "[%s] url: a Redis Cluster has only database 0 (no /db)",
                 sect);
        return buf;
    }
    return NULL;
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
check_dsn(const char *v, char *buf, size_t len)
{
    char *msg = NULL;
    PQconninfoOption *opts = PQconninfoParse(v, &msg);

    if (opts == NULL) {
        dsn_error(buf, len, msg != NULL ? msg : "out of memory");
        PQfreemem(msg);
        return buf;
    }
    PQconninfoFree(opts);
    return NULL;
}

/* http://host:port[,http://host:port...]; spaces around commas. */
/* A [watch] backend: a lock store a source exists for
 * (proxy/locks/watch.c). */
static const char *
check_watch_backend(const char *v, char *buf, size_t len)
{
    (void)buf;
    (void)len;
    return strcmp(v, "etcd") == 0 || strcmp(v, "zookeeper") == 0
               ? NULL
               : "must be etcd or zookeeper";
}

/* A [watch] prefix: not empty (it would follow every key of etcd); for
 * zookeeper also a znode path (cfg_check_watch). */
static const char *
check_watch_prefix(const char *v, char *buf, size_t len)
{
    (void)buf;
    (void)len;
    return v[0] == '\0' ? "must not be empty" : NULL;
}

/* A [watch] resource template: {name} once or not at all, no other
 * braces. */
static const char *
check_watch_resource(const char *v, char *buf, size_t len)
{
    const char *at = strstr(v, "{name}");

    (void)buf;
    (void)len;
    if (at != NULL && strstr(at + 6, "{name}") != NULL) {
        return "may name {name} once";
    }
    for (const char *p = v; *p != '\0'; p++) {
        if ((*p == '{' || *p == '}') && (at == NULL || p < at || p >= at + 6)) {
            return "takes {name} and no other braces";
        }
    }
    return v[0] == '\0' ? "must not be empty" : NULL;
}

/* http://host:port, perhaps with a '/' after it. */
static bool
endpoint_ok(const char *p, size_t n, void *arg)
{
    struct tm_slice host, port;
    bool br;

    (void)arg;
    if (n > 0 && p[n - 1] == '/') {
        n--;
    }
    return n >= 7 && strncmp(p, "http://", 7) == 0 &&
           split_authority(p + 7, n - 7, &host, &port, &br) && port.len > 0;
}

static const char *
check_endpoints(const char *v, char *buf, size_t len)
{
    return each_item(v, true, endpoint_ok, NULL)
               ? NULL
               : "must be http://host:port, comma-separated";
}

/* A [lease] health_url: http://host:port/path, the path printable
 * ASCII (it goes on a request line as it is). */
static const char *
check_health_url(const char *v, char *buf, size_t len)
{
    const char *path =
        strncmp(v, "http://", 7) == 0 ? strchr(v + 7, '/') : NULL;
    struct tm_slice host, port;
    bool br;

    (void)buf;
    (void)len;
    if (path == NULL ||
        !split_authority(v + 7, (size_t)(path - v - 7), &host, &port, &br) ||
        port.len == 0) {
        return "must be http://host:port/path";
    }
    for (; *path != '\0'; path++) {
        if ((unsigned char)*path <= ' ' || (unsigned char)*path >= 0x7f) {
            return "must be http://host:port/path, the path printable "
                   "ASCII without spaces";
        }
    }
    return NULL;
}

/* host:port, nothing around it. */
static bool
zk_host_ok(const char *p, size_t n, void *arg)
{
    struct tm_slice host, port;
    bool br;

    (void)arg;
    return n > 0 && memchr(p, '/', n) == NULL &&
           split_authority(p, n, &host, &port, &br) && port.len > 0 &&
           host.len > 0;
}

/* ZooKeeper's connect string: host:port[,host:port...] (no chroot: the
 * lock nodes' place is [locks] root). */
static const char *
check_zk_hosts(const char *v, char *buf, size_t len)
{
    (void)buf;
    (void)len;
    return each_item(v, false, zk_host_ok, NULL)
               ? NULL
               : "must be host:port, comma-separated (no spaces)";
}

/* An absolute znode path: "/a/b", no empty, "." or ".." component, no
 * trailing slash, printable ASCII. */
static const char *
check_zk_root(const char *v, char *buf, size_t len)
{
    const char *p = v;

    (void)buf;
    (void)len;
    if (*p != '/' || p[1] == '\0') {
        return "must be an absolute znode path such as /tidemark/locks";
    }
    while (*p == '/') {
        size_t n = strcspn(p + 1, "/");

        if (n == 0 || (n == 1 && p[1] == '.') ||
            (n == 2 && p[1] == '.' && p[2] == '.')) {
            return "must be an absolute znode path: no empty, . or .. part";
        }
        for (size_t i = 1; i <= n; i++) {
            if (p[i] <= ' ' || p[i] > '~') {
                return "must be an absolute znode path of printable ASCII";
            }
        }
        p += n + 1;
    }
    return NULL;
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

static void
drop_methods(void *obj)
{
    methods_free(&((struct cfg_route *)obj)->methods);
}

static void
show_methods(const void *obj, char *buf, size_t len)
{
    const struct tm_methods *m = &((const struct cfg_route *)obj)->methods;
    size_t n = 0;

    snprintf(buf, len, "%s", m->n == 0 ? "*" : "");
    for (size_t i = 0; i < m->n && n < len; i++) {
        int w =
            snprintf(buf + n, len - n, "%s%s", i > 0 ? " " : "", m->v[i].name);
        n += w > 0 ? (size_t)w : 0;
    }
}

static const struct cfg_ops methods_ops = {NULL, set_methods, drop_methods,
                                           show_methods};

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

static void
drop_path(void *obj)
{
    struct cfg_route *r = obj;

    tmpl_free(&r->path);
    free(r->path_src);
    r->path_src = NULL;
}

static void
show_path(const void *obj, char *buf, size_t len)
{
    const char *src = ((const struct cfg_route *)obj)->path_src;

    snprintf(buf, len, "%s", src != NULL ? src : "");
}

static const struct cfg_ops path_ops = {NULL, set_path, drop_path, show_path};

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

static void
drop_resource(void *obj)
{
    struct cfg_route *r = obj;

    rtmpl_free(&r->resource);
    free(r->resource_src);
    r->resource_src = NULL;
}

static void
show_resource(const void *obj, char *buf, size_t len)
{
    const char *src = ((const struct cfg_route *)obj)->resource_src;

    snprintf(buf, len, "%s", src != NULL ? src : "");
}

static const struct cfg_ops resource_ops = {NULL, set_resource, drop_resource,
                                            show_resource};

static const char *
check_section_ref(const char *v, char *buf, size_t len)
{
    if (!cfg_name_ok(v, strlen(v))) {
        return "must be the NAME of an [upstream NAME] section";
    }
    return NULL;
}

/* A route's lease = NAME: a section name (the section itself is looked
 * for once every section is read). */
static const char *
check_carrier_ref(const char *v, char *buf, size_t len)
{
    (void)buf;
    (void)len;
    if (!cfg_name_ok(v, strlen(v))) {
        return "must be the NAME of a [lease NAME] or [follow NAME] section";
    }
    return NULL;
}

/* A [lease] name: a lock name in its canonical form (as /v1/locks/ and
 * every other way to a lock name it), so that every sidecar sharing
 * the lease names the same lock. */
static const char *
check_lease_lock(const char *v, char *buf, size_t len)
{
    size_t n = strlen(v), outlen = 0;
    char out[TM_RESOURCE_MAX + 1];
    const char *why = NULL;

    if (n == 0 || n > TM_RESOURCE_MAX ||
        !canon_name(v, n, out, sizeof(out), &outlen, &why)) {
        snprintf(buf, len, "must be a lock name: %s",
                 why != NULL ? why : "empty or too long");
        return buf;
    }
    if (outlen != n || memcmp(out, v, n) != 0) {
        snprintf(buf, len, "must be written in its canonical form: %.*s",
                 (int)(outlen < 200 ? outlen : 200), out);
        return buf;
    }
    return NULL;
}

/* An AWS region or service name: lower-case letters, digits, '-'. */
static const char *
check_aws_name(const char *v, char *buf, size_t len)
{
    size_t n = strlen(v);

    if (n > 64 || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789-") != n) {
        return "must be lower-case letters, digits and '-' (us-east-1, s3)";
    }
    return NULL;
}

static const char *
check_profile(const char *v, char *buf, size_t len)
{
    if (!cfg_name_ok(v, strlen(v))) {
        return "must be a profile name (letters, digits, '_', '-', '.')";
    }
    return NULL;
}

/* [upstream] bucket_endpoints: policies/s3name.c reads the list. */
static const char *
check_s3_endpoints(const char *v, char *buf, size_t len)
{
    const char *why = NULL;

    return s3_endpoints_valid(v, &why) ? NULL : why;
}

static const struct cfg_ops listen_ops = {.check = check_listen};
static const struct cfg_ops s3_endpoints_ops = {.check = check_s3_endpoints};
static const struct cfg_ops aws_name_ops = {.check = check_aws_name};
static const struct cfg_ops profile_ops = {.check = check_profile};
static const struct cfg_ops header_name_ops = {.check = check_header_name};
static const struct cfg_ops allowed_hosts_ops = {.check = check_allowed_hosts};
static const struct cfg_ops redis_url_ops = {.check = check_redis_url};
static const struct cfg_ops dsn_ops = {.check = check_dsn};
static const struct cfg_ops endpoints_ops = {.check = check_endpoints};
static const struct cfg_ops watch_prefix_ops = {.check = check_watch_prefix};
static const struct cfg_ops watch_backend_ops = {.check = check_watch_backend};
static const struct cfg_ops watch_resource_ops = {.check =
                                                      check_watch_resource};
static const struct cfg_ops zk_hosts_ops = {.check = check_zk_hosts};
static const struct cfg_ops zk_root_ops = {.check = check_zk_root};
static const struct cfg_ops section_ref_ops = {.check = check_section_ref};
static const struct cfg_ops carrier_ref_ops = {.check = check_carrier_ref};
static const struct cfg_ops lease_lock_ops = {.check = check_lease_lock};
static const struct cfg_ops health_url_ops = {.check = check_health_url};

static const char *const unmatched_choices[] = {"pass", "reject", NULL};
static const char *const level_choices[] = {"error", "warn", "info", "debug",
                                            NULL};
static const char *const type_choices[] = {"lmdb", "postgres", "redis", "etcd",
                                           NULL};
static const char *const mode_choices[] = {"correctness", "efficiency", "off",
                                           NULL};
static const char *const verify_choices[] = {"none", "hmac", NULL};
static const char *const profile_choices[] = {"http", "webdav", "s3", NULL};
static const char *const lock_backend_choices[] = {
    "lmdb", "redis", "postgres", "etcd", "zookeeper", NULL};
static const char *const host_choices[] = {"upstream", "preserve", NULL};
static const char *const sign_choices[] = {"none", "aws-sigv4", NULL};
static const char *const log_format_choices[] = {"text", "json", NULL};
static const char *const watch_token_choices[] = {"create_revision",
                                                  "lock_revision", NULL};

/* CFG_T_ENUM writes the choice's index as an int. */
_Static_assert(sizeof(enum tm_mode) == sizeof(int) &&
                   sizeof(enum tm_verify) == sizeof(int) &&
                   sizeof(enum tm_profile) == sizeof(int),
               "an enum option's field is an int");
_Static_assert(TM_MODE_CORRECTNESS == 0 && TM_MODE_EFFICIENCY == 1 &&
                   TM_MODE_OFF == 2 && TM_VERIFY_NONE == 0 &&
                   TM_VERIFY_HMAC == 1 && TM_PROFILE_HTTP == 0 &&
                   TM_PROFILE_WEBDAV == 1 && TM_PROFILE_S3 == 2,
               "mode_choices, verify_choices and profile_choices follow the "
               "enums");

#define OFF(sect, field) offsetof(struct sect, field)
#define NONE 0, 0, NULL, NULL
#define INT(lo, hi) (lo), (hi), NULL, NULL
#define CHOICE(c) 0, 0, (c), NULL
#define OPS(ops) 0, 0, NULL, &(ops)

/* Each entry: section, key, type, default, field offset, bounds (or
 * choices, or ops), flags, help. */
const struct cfg_opt cfg_opts[] = {
    {CFG_PROXY, "listen", CFG_T_STR, "127.0.0.1:7070", OFF(cfg_proxy, listen),
     OPS(listen_ops), CFG_RESTART, "host:port for application traffic"},
    {CFG_PROXY, "unmatched", CFG_T_FLAG, "pass",
     OFF(cfg_proxy, unmatched_reject), CHOICE(unmatched_choices), 0,
     "requests no route matches: pass | reject"},
    {CFG_PROXY, "token_header", CFG_T_STR, "Fencing-Token",
     OFF(cfg_proxy, token_header), OPS(header_name_ops), 0,
     "request header carrying the fencing token"},
    {CFG_PROXY, "resource_header", CFG_T_STR, "Fencing-Resource",
     OFF(cfg_proxy, resource_header), OPS(header_name_ops), 0,
     "request header naming the resource (routes with resource = header)"},
    {CFG_PROXY, "header_timeout_ms", CFG_T_INT, "10000",
     OFF(cfg_proxy, header_timeout_ms), INT(1, 3600000), 0,
     "a request head must arrive within this"},
    {CFG_PROXY, "idle_timeout_ms", CFG_T_INT, "60000",
     OFF(cfg_proxy, idle_timeout_ms), INT(1, 86400000), 0,
     "idle keep-alive client connections are closed after this"},
    {CFG_PROXY, "max_head", CFG_T_INT, "16384", OFF(cfg_proxy, max_head),
     INT(1024, 1048576), 0, "bytes of request line and headers (431 beyond)"},
    {CFG_PROXY, "max_uri", CFG_T_INT, "8192", OFF(cfg_proxy, max_uri),
     INT(256, 1048576 - CFG_URI_SLACK), 0,
     "bytes of request-target (414 beyond); at most max_head - 64"},
    {CFG_PROXY, "max_headers", CFG_T_INT, "100", OFF(cfg_proxy, max_headers),
     INT(1, 128), 0, "header fields in one request head"},
    {CFG_PROXY, "max_connections", CFG_T_INT, "10000",
     OFF(cfg_proxy, max_connections), INT(1, 1000000), 0,
     "client connections at once"},
    {CFG_PROXY, "order_grace_ms", CFG_T_INT, "1000",
     OFF(cfg_proxy, order_grace_ms), INT(0, 3600000), 0,
     "after a 504, the resource stays closed to higher tokens this long"},
    {CFG_PROXY, "min_body_rate", CFG_T_INT, "0", OFF(cfg_proxy, min_body_rate),
     INT(0, 1073741824), 0,
     "request bodies slower than this many bytes/s are cut off (408); 0: "
     "no minimum"},
    {CFG_PROXY, "body_rate_window_ms", CFG_T_INT, "10000",
     OFF(cfg_proxy, body_rate_window_ms), INT(100, 3600000), 0,
     "the window over which min_body_rate is measured"},
    {CFG_PROXY, "discard_limit", CFG_T_INT, "65536",
     OFF(cfg_proxy, discard_limit), INT(0, 1073741824), 0,
     "body bytes read and dropped after a refusal, to keep the connection"},
    {CFG_PROXY, "buffer_size", CFG_T_INT, "65536", OFF(cfg_proxy, buffer_size),
     INT(1024, 67108864), 0,
     "bytes buffered per direction before reading pauses"},
    {CFG_PROXY, "log_format", CFG_T_FLAG, "text", OFF(cfg_proxy, log_json),
     CHOICE(log_format_choices), 0,
     "text | json: one object a line, key=value pairs as fields"},
    {CFG_PROXY, "drain_timeout_ms", CFG_T_INT, "10000",
     OFF(cfg_proxy, drain_timeout_ms), INT(0, 3600000), 0,
     "on SIGTERM, how long in-flight requests may take"},
    {CFG_PROXY, "log_level", CFG_T_CHOICE, "info", OFF(cfg_proxy, log_level),
     CHOICE(level_choices), 0, "error | warn | info | debug"},

    {CFG_ADMIN, "listen", CFG_T_STR, "127.0.0.1:7071", OFF(cfg_admin, listen),
     OPS(listen_ops), CFG_EMPTY_OK | CFG_RESTART,
     "host:port of the control port; empty: none"},
    {CFG_ADMIN, "token_file", CFG_T_KEYFILE, "", OFF(cfg_admin, token_file),
     INT(16, SECRET_MAX), CFG_EMPTY_OK,
     "file holding a bearer token the lock service and marks API require"},
    {CFG_ADMIN, "allowed_hosts", CFG_T_STR, "", OFF(cfg_admin, allowed_hosts),
     OPS(allowed_hosts_ops), CFG_EMPTY_OK,
     "Host names the control port answers besides its address and "
     "loopback"},

    {CFG_STORE, "type", CFG_T_CHOICE, "lmdb", OFF(cfg_store, type),
     CHOICE(type_choices), CFG_RESTART, "lmdb | postgres | redis | etcd"},
    {CFG_STORE, "path", CFG_T_STR, "./data/marks.lmdb", OFF(cfg_store, path),
     NONE, CFG_EMPTY_OK | CFG_RESTART, "lmdb: the database file"},
    {CFG_STORE, "map_size", CFG_T_SIZE, "1G", OFF(cfg_store, map_size),
     INT(1048576, INT64_C(1) << 44), CFG_RESTART,
     "lmdb: largest database size in bytes (K, M, G, T suffixes)"},
    {CFG_STORE, "dsn", CFG_T_STR, NULL, OFF(cfg_store, dsn), OPS(dsn_ops),
     CFG_EMPTY_OK | CFG_RESTART | CFG_SECRET,
     "postgres: a libpq connection string or URI"},
    {CFG_STORE, "url", CFG_T_STR, NULL, OFF(cfg_store, url), OPS(redis_url_ops),
     CFG_EMPTY_OK | CFG_RESTART | CFG_SECRET,
     "redis: redis://host:port[/db]; a cluster's seed nodes, comma-separated"},
    {CFG_STORE, "cluster", CFG_T_BOOL, "no", OFF(cfg_store, cluster), NONE,
     CFG_RESTART,
     "redis: yes: url names seed nodes of a Redis Cluster (slots, MOVED)"},
    {CFG_STORE, "endpoints", CFG_T_STR, NULL, OFF(cfg_store, endpoints),
     OPS(endpoints_ops), CFG_EMPTY_OK | CFG_RESTART,
     "etcd: http://host:port, comma-separated"},
    {CFG_STORE, "pool_size", CFG_T_INT, "2", OFF(cfg_store, pool_size),
     INT(1, 64), CFG_RESTART, "postgres, etcd: connections to the store"},
    {CFG_STORE, "wait_replicas", CFG_T_INT, "0", OFF(cfg_store, wait_replicas),
     INT(0, 64), CFG_RESTART,
     "redis: a raise is accepted once this many replicas have it (WAIT)"},
    {CFG_STORE, "cache_entries", CFG_T_INT, "100000",
     OFF(cfg_store, cache_entries), INT(16, 100000000), CFG_RESTART,
     "marks kept in memory"},
    {CFG_STORE, "timeout_ms", CFG_T_INT, "2000", OFF(cfg_store, timeout_ms),
     INT(1, 600000), CFG_RESTART, "one raise, end to end"},

    {CFG_LOCKS, "backend", CFG_T_CHOICE, "lmdb", OFF(cfg_locks, backend),
     CHOICE(lock_backend_choices), CFG_RESTART,
     "where leases live: lmdb | redis | postgres | etcd | zookeeper"},
    {CFG_LOCKS, "url", CFG_T_STR, NULL, OFF(cfg_locks, url), OPS(redis_url_ops),
     CFG_EMPTY_OK | CFG_RESTART | CFG_SECRET,
     "redis: redis://host:port[/db]; a cluster's seed nodes, comma-separated"},
    {CFG_LOCKS, "cluster", CFG_T_BOOL, "no", OFF(cfg_locks, cluster), NONE,
     CFG_RESTART,
     "redis: yes: url names seed nodes of a Redis Cluster (slots, MOVED)"},
    {CFG_LOCKS, "dsn", CFG_T_STR, NULL, OFF(cfg_locks, dsn), OPS(dsn_ops),
     CFG_EMPTY_OK | CFG_RESTART | CFG_SECRET,
     "postgres: a libpq connection string or URI"},
    {CFG_LOCKS, "endpoints", CFG_T_STR, NULL, OFF(cfg_locks, endpoints),
     OPS(endpoints_ops), CFG_EMPTY_OK | CFG_RESTART,
     "etcd: http://host:port, comma-separated"},
    {CFG_LOCKS, "prefix", CFG_T_STR, "tidemark/locks/", OFF(cfg_locks, prefix),
     NONE, CFG_EMPTY_OK | CFG_RESTART,
     "etcd: the keys of lock NAME are PREFIX NAME // lease"},
    {CFG_LOCKS, "pool_size", CFG_T_INT, "2", OFF(cfg_locks, pool_size),
     INT(1, 64), CFG_RESTART,
     "postgres: connections to the lease table; etcd: per endpoint"},
    {CFG_LOCKS, "timeout_ms", CFG_T_INT, "2000", OFF(cfg_locks, timeout_ms),
     INT(1, 600000), CFG_RESTART,
     "redis, postgres, etcd: one lock operation, end to end"},
    {CFG_LOCKS, "path", CFG_T_STR, "./data/locks.lmdb", OFF(cfg_locks, path),
     NONE, CFG_RESTART, "lmdb: the lease file (not the [store] file)"},
    {CFG_LOCKS, "map_size", CFG_T_SIZE, "256M", OFF(cfg_locks, map_size),
     INT(1048576, INT64_C(1) << 44), CFG_RESTART,
     "lmdb: largest lease file size in bytes (K, M, G, T suffixes)"},
    {CFG_LOCKS, "eager", CFG_T_BOOL, "yes", OFF(cfg_locks, eager), NONE,
     CFG_RESTART,
     "yes: an acquire raises the resource's mark to the new fence"},
    {CFG_LOCKS, "max_ttl_ms", CFG_T_INT, "3600000", OFF(cfg_locks, max_ttl_ms),
     INT(1, 86400000), CFG_RESTART,
     "longest lease an acquire or extend may ask for"},
    {CFG_LOCKS, "max_wait_ms", CFG_T_INT, "60000", OFF(cfg_locks, max_wait_ms),
     INT(0, 3600000), CFG_RESTART, "longest ?wait_ms= an acquire may ask for"},
    {CFG_LOCKS, "hosts", CFG_T_STR, NULL, OFF(cfg_locks, zk_hosts),
     OPS(zk_hosts_ops), CFG_EMPTY_OK | CFG_RESTART,
     "zookeeper: host:port, comma-separated (the ensemble)"},
    {CFG_LOCKS, "root", CFG_T_STR, "/tidemark/locks", OFF(cfg_locks, zk_root),
     OPS(zk_root_ops), CFG_RESTART,
     "zookeeper: the znode under which every lock has its own"},
    {CFG_LOCKS, "session_timeout_ms", CFG_T_INT, "10000",
     OFF(cfg_locks, zk_sess_ms), INT(1000, 600000), CFG_RESTART,
     "zookeeper: the session asked for; a dead tidemark's locks end with "
     "it"},

    /* [watch] sections are read at start as a whole: a reload keeps
     * them (cfg_keep_restart_only), so no key is marked CFG_RESTART. */
    {CFG_WATCH, "backend", CFG_T_STR, "etcd", OFF(cfg_watch, backend),
     OPS(watch_backend_ops), 0, "where the lock lives: etcd | zookeeper"},
    {CFG_WATCH, "endpoints", CFG_T_STR, NULL, OFF(cfg_watch, endpoints),
     OPS(endpoints_ops), CFG_EMPTY_OK,
     "etcd: http://host:port, comma-separated"},
    {CFG_WATCH, "hosts", CFG_T_STR, NULL, OFF(cfg_watch, zk_hosts),
     OPS(zk_hosts_ops), CFG_EMPTY_OK,
     "zookeeper: host:port, comma-separated (the ensemble)"},
    {CFG_WATCH, "prefix", CFG_T_STR, NULL, OFF(cfg_watch, prefix),
     OPS(watch_prefix_ops), CFG_REQUIRED,
     "etcd: lock NAME's keys are PREFIX NAME / lease (etcdctl lock PREFIX "
     "NAME); zookeeper: lock NAME is the znode PREFIX/NAME (kazoo "
     "Lock(PREFIX/NAME), Curator InterProcessMutex)"},
    {CFG_WATCH, "resource", CFG_T_STR, "{name}", OFF(cfg_watch, resource),
     OPS(watch_resource_ops), 0, "the resource whose mark follows lock {name}"},
    {CFG_WATCH, "token", CFG_T_CHOICE, "create_revision", OFF(cfg_watch, token),
     CHOICE(watch_token_choices), 0,
     "etcd: what holders send: create_revision (their key's) | "
     "lock_revision (etcdctl lock's ETCD_LOCK_REV)"},
    {CFG_WATCH, "timeout_ms", CFG_T_INT, "2000", OFF(cfg_watch, timeout_ms),
     INT(1, 600000), 0, "etcd: one call to the lock's store"},
    {CFG_WATCH, "idle_timeout_ms", CFG_T_INT, "660000", OFF(cfg_watch, idle_ms),
     INT(1000, 86400000), 0,
     "etcd: a watch stream silent this long (no event, no progress notice, "
     "which etcd sends every 10 min by default) has broken: opened again"},
    {CFG_WATCH, "session_timeout_ms", CFG_T_INT, "10000",
     OFF(cfg_watch, zk_sess_ms), INT(1000, 600000), 0,
     "zookeeper: tidemark's session; after a longer outage every lock is "
     "read again"},
    {CFG_WATCH, "required", CFG_T_BOOL, "yes", OFF(cfg_watch, required), NONE,
     0,
     "/readyz is 503 while the watch cannot follow its locks (a paused "
     "holder's writes pass until the next holder writes)"},

    {CFG_TOKENS, "key_file", CFG_T_KEYFILE, NULL, OFF(cfg_tokens, key_file),
     INT(TOKEN_KEY_MIN, SECRET_MAX), CFG_RESTART,
     "file holding the HMAC key that signs issued tokens (mode 600)"},

    {CFG_UPSTREAM, "url", CFG_T_CUSTOM, NULL, 0, OPS(upstream_url_ops),
     CFG_REQUIRED, "http://host[:port] or https://host[:port]"},
    {CFG_UPSTREAM, "connect_timeout_ms", CFG_T_INT, "2000",
     OFF(cfg_upstream, connect_timeout_ms), INT(1, 600000), 0,
     "connecting, TLS handshake included"},
    {CFG_UPSTREAM, "timeout_ms", CFG_T_INT, "30000",
     OFF(cfg_upstream, timeout_ms), INT(1, 86400000), 0,
     "waiting for the response head, and between body reads"},
    {CFG_UPSTREAM, "max_idle", CFG_T_INT, "64", OFF(cfg_upstream, max_idle),
     INT(0, 100000), 0, "idle keep-alive connections kept in the pool"},
    {CFG_UPSTREAM, "ca_file", CFG_T_STR, "", OFF(cfg_upstream, ca_file), NONE,
     CFG_EMPTY_OK,
     "https: PEM file of CAs to verify the upstream; empty: system CAs"},
    {CFG_UPSTREAM, "add_header", CFG_T_CUSTOM, NULL, 0, OPS(add_header_ops),
     CFG_REPEAT | CFG_SECRET,
     "NAME: VALUE added to every forwarded request (repeatable; ${VAR} "
     "from the environment); replaces a client header of that name"},
    {CFG_UPSTREAM, "strip_header", CFG_T_CUSTOM, NULL, 0, OPS(strip_header_ops),
     CFG_REPEAT, "a client header removed before forwarding (repeatable)"},
    {CFG_UPSTREAM, "host", CFG_T_FLAG, "upstream",
     OFF(cfg_upstream, host_preserve), CHOICE(host_choices), 0,
     "upstream | preserve: the Host header sent upstream"},
    {CFG_UPSTREAM, "bucket_endpoints", CFG_T_STR, "aws",
     OFF(cfg_upstream, bucket_endpoints), OPS(s3_endpoints_ops), CFG_EMPTY_OK,
     "host = preserve, s3 routes: names below which the server reads the "
     "bucket from the Host (aws: AWS's; '*' one label's characters)"},
    {CFG_UPSTREAM, "sign", CFG_T_ENUM, "none", OFF(cfg_upstream, sign),
     CHOICE(sign_choices), 0,
     "none | aws-sigv4: sign every forwarded request (AWS Signature V4, "
     "payload UNSIGNED-PAYLOAD), replacing the client's Authorization"},
    {CFG_UPSTREAM, "sign_region", CFG_T_STR, "", OFF(cfg_upstream, sign_region),
     OPS(aws_name_ops), CFG_EMPTY_OK,
     "aws-sigv4: the region signed for (us-east-1); required with sign"},
    {CFG_UPSTREAM, "sign_service", CFG_T_STR, "s3",
     OFF(cfg_upstream, sign_service), OPS(aws_name_ops), 0,
     "aws-sigv4: the service signed for"},
    {CFG_UPSTREAM, "sign_credentials_file", CFG_T_STR, "",
     OFF(cfg_upstream, sign_credentials_file), NONE, CFG_EMPTY_OK,
     "aws-sigv4: an AWS shared-credentials file (mode 600), read at start "
     "and reload; empty: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, "
     "AWS_SESSION_TOKEN from the environment"},
    {CFG_UPSTREAM, "sign_profile", CFG_T_STR, "default",
     OFF(cfg_upstream, sign_profile), OPS(profile_ops), 0,
     "aws-sigv4: the [profile] of sign_credentials_file"},

    {CFG_ROUTE, "methods", CFG_T_CUSTOM, "PUT POST PATCH DELETE", 0,
     OPS(methods_ops), 0,
     "methods the route applies to, space-separated; * for every method"},
    {CFG_ROUTE, "path", CFG_T_CUSTOM, NULL, 0, OPS(path_ops), CFG_REQUIRED,
     "path template: {name} one segment, {name*} the rest"},
    {CFG_ROUTE, "resource", CFG_T_CUSTOM, NULL, 0, OPS(resource_ops),
     CFG_REQUIRED, "resource template naming the path's captures, or header"},
    {CFG_ROUTE, "mode", CFG_T_ENUM, "correctness", OFF(cfg_route, mode),
     CHOICE(mode_choices), 0, "correctness | efficiency | off"},
    {CFG_ROUTE, "verify", CFG_T_ENUM, "none", OFF(cfg_route, verify),
     CHOICE(verify_choices), 0, "none | hmac"},
    {CFG_ROUTE, "profile", CFG_T_ENUM, "http", OFF(cfg_route, profile),
     CHOICE(profile_choices), 0,
     "http | webdav | s3: the backend's protocol, which says what a request "
     "writes besides its path"},
    {CFG_ROUTE, "subtree", CFG_T_BOOL, "yes", OFF(cfg_route, subtree), NONE, 0,
     "profile = webdav: each collection keeps the highest mark below it, "
     "and DELETE, MOVE, COPY and LOCK of a collection need a token not "
     "below it"},
    {CFG_ROUTE, "max_body", CFG_T_SIZE, "0", OFF(cfg_route, max_body),
     INT(0, INT64_MAX), 0,
     "largest request body in bytes (K M G T); 0: no limit"},
    {CFG_ROUTE, "upstream", CFG_T_STR, "default", OFF(cfg_route, upstream),
     OPS(section_ref_ops), 0,
     "NAME of the [upstream NAME] requests are forwarded to"},
    {CFG_ROUTE, "lease", CFG_T_STR, NULL, OFF(cfg_route, lease),
     OPS(carrier_ref_ops), 0,
     "NAME of the [lease NAME] or [follow NAME] section whose fence this "
     "sidecar sends for the route's writes (they carry no token)"},

    /* [lease] sections are read at start as a whole, as [watch]. */
    {CFG_LEASE, "name", CFG_T_STR, NULL, OFF(cfg_lease, lock),
     OPS(lease_lock_ops), CFG_REQUIRED,
     "the lock's name in the lock service ([locks] backend)"},
    {CFG_LEASE, "ttl_ms", CFG_T_INT, "10000", OFF(cfg_lease, ttl_ms),
     INT(100, 3600000), 0,
     "the lease's TTL, asked on each acquire and renewal"},
    {CFG_LEASE, "renew_ms", CFG_T_INT, "0", OFF(cfg_lease, renew_ms),
     INT(0, 3600000), 0,
     "how often the holder renews, and a standby tries; 0: ttl_ms / 3"},
    {CFG_LEASE, "health_url", CFG_T_STR, NULL, OFF(cfg_lease, health_url),
     OPS(health_url_ops), 0,
     "http://host:port/path: renew (or try to win) only while the "
     "application answers 2xx here; unset: the lease stays while tidemark "
     "runs"},
    {CFG_LEASE, "ready", CFG_T_BOOL, "no", OFF(cfg_lease, ready), NONE, 0,
     "yes: /readyz is 503 while this sidecar does not hold the lease"},
};

const size_t cfg_nopts = sizeof(cfg_opts) / sizeof(cfg_opts[0]);

/* ---- options as values: set, drop, compare, copy, show ------------ */

const char *
cfg_opt_set(const struct cfg_opt *o, void *obj, const char *v, char *buf,
            size_t len)
{
    switch (o->type) {
    case CFG_T_CUSTOM:
        return o->ops->set(o, obj, v, buf, len);
    case CFG_T_INT:
        return set_int(o, obj, v, buf, len);
    case CFG_T_SIZE:
        return set_size(o, obj, v, buf, len);
    case CFG_T_BOOL:
        return set_bool(o, obj, v, buf, len);
    case CFG_T_FLAG:
        return set_flag(o, obj, v, buf, len);
    case CFG_T_ENUM:
        return set_enum(o, obj, v, buf, len);
    case CFG_T_CHOICE:
        return set_choice_str(o, obj, v, buf, len);
    case CFG_T_STR:
        return set_str(o, obj, v, buf, len);
    case CFG_T_KEYFILE:
        return set_keyfile(o, obj, v, buf, len);
    }
    return "has no type";
}

void
cfg_opt_drop(const struct cfg_opt *o, void *obj)
{
    switch (o->type) {
    case CFG_T_CUSTOM:
        if (o->ops->drop != NULL) {
            o->ops->drop(obj);
        }
        break;
    case CFG_T_CHOICE:
    case CFG_T_STR:
        free(*FIELD(obj, o, char *));
        *FIELD(obj, o, char *) = NULL;
        break;
    case CFG_T_KEYFILE:
        drop_keyfile(o, obj);
        break;
    case CFG_T_INT:
    case CFG_T_SIZE:
    case CFG_T_BOOL:
    case CFG_T_FLAG:
    case CFG_T_ENUM:
        break;
    }
}

bool
cfg_opt_comparable(const struct cfg_opt *o)
{
    return o->type != CFG_T_CUSTOM;
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
    switch (o->type) {
    case CFG_T_INT:
    case CFG_T_ENUM:
        return *FIELD(a, o, const int) == *FIELD(b, o, const int);
    case CFG_T_SIZE:
        return *FIELD(a, o, const int64_t) == *FIELD(b, o, const int64_t);
    case CFG_T_BOOL:
    case CFG_T_FLAG:
        return *FIELD(a, o, const bool) == *FIELD(b, o, const bool);
    case CFG_T_CHOICE:
    case CFG_T_STR:
        return same_str(*FIELD(a, o, char *const), *FIELD(b, o, char *const));
    case CFG_T_KEYFILE:
        return same_str(*FIELD(a, o, char *const), *FIELD(b, o, char *const)) &&
               *keyfile_len(o, a) == *keyfile_len(o, b) &&
               (*keyfile_len(o, a) == 0 ||
                memcmp(*keyfile_bytes(o, a), *keyfile_bytes(o, b),
                       *keyfile_len(o, a)) == 0);
    case CFG_T_CUSTOM:
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
copy_keyfile(const struct cfg_opt *o, void *dst, const void *src)
{
    const char *file = *FIELD(src, o, char *const);
    size_t n = *keyfile_len(o, src);

    drop_keyfile(o, dst);
    if (!dup_bytes(keyfile_bytes(o, dst), *keyfile_bytes(o, src), n) ||
        !dup_bytes(FIELD(dst, o, char *), file,
                   file != NULL ? strlen(file) : 0)) {
        return oom;
    }
    *keyfile_len(o, dst) = n;
    return NULL;
}

const char *
cfg_opt_copy(const struct cfg_opt *o, void *dst, const void *src)
{
    char *const *from;
    char *copy;

    switch (o->type) {
    case CFG_T_INT:
    case CFG_T_ENUM:
        *FIELD(dst, o, int) = *FIELD(src, o, const int);
        return NULL;
    case CFG_T_SIZE:
        *FIELD(dst, o, int64_t) = *FIELD(src, o, const int64_t);
        return NULL;
    case CFG_T_BOOL:
    case CFG_T_FLAG:
        *FIELD(dst, o, bool) = *FIELD(src, o, const bool);
        return NULL;
    case CFG_T_CHOICE:
    case CFG_T_STR:
        from = FIELD(src, o, char *const);
        if (!dup_bytes(&copy, *from, *from != NULL ? strlen(*from) : 0)) {
            return oom;
        }
        free(*FIELD(dst, o, char *));
        *FIELD(dst, o, char *) = copy;
        return NULL;
    case CFG_T_KEYFILE:
        return copy_keyfile(o, dst, src);
    case CFG_T_CUSTOM:
        break;
    }
    return "cannot be copied";
}

void
cfg_opt_show(const struct cfg_opt *o, const void *obj, char *buf, size_t len)
{
    const char *s = NULL;

    switch (o->type) {
    case CFG_T_INT:
        snprintf(buf, len, "%d", *FIELD(obj, o, const int));
        return;
    case CFG_T_SIZE:
        snprintf(buf, len, "%lld", (long long)*FIELD(obj, o, const int64_t));
        return;
    case CFG_T_BOOL:
        s = yes_no[*FIELD(obj, o, const bool) ? 0 : 1];
        break;
    case CFG_T_FLAG:
        s = o->choices[*FIELD(obj, o, const bool) ? 1 : 0];
        break;
    case CFG_T_ENUM:
        s = o->choices[*FIELD(obj, o, const int)];
        break;
    case CFG_T_CHOICE:
    case CFG_T_STR:
    case CFG_T_KEYFILE:
        s = *FIELD(obj, o, char *const);
        break;
    case CFG_T_CUSTOM:
        o->ops->show(obj, buf, len);
        return;
    }
    if ((o->flags & CFG_SECRET) && s != NULL && s[0] != '\0') {
        s = "(secret)";
    }
    snprintf(buf, len, "%s",
             s == NULL      ? "(none)"
             : s[0] == '\0' ? "(empty)"
                            : s);
}

/* The name of a named section's object: [upstream NAME], [route NAME]. */
static const char *
sect_obj_name(enum cfg_sect s, const void *obj)
{
    switch (s) {
    case CFG_UPSTREAM:
        return ((const struct cfg_upstream *)obj)->name;
    case CFG_WATCH:
        return ((const struct cfg_watch *)obj)->name;
    case CFG_LEASE:
        return ((const struct cfg_lease *)obj)->name;
    default:
        return ((const struct cfg_route *)obj)->name;
    }
}

/* Whether o's value in obj is unset: a text option never given. */
static bool
opt_unset(const struct cfg_opt *o, const void *obj)
{
    switch (o->type) {
    case CFG_T_CHOICE:
    case CFG_T_STR:
    case CFG_T_KEYFILE:
        return *FIELD(obj, o, char *const) == NULL;
    default:
        return false;
    }
}

void
cfg_print(const struct tm_config *c, void (*emit)(void *arg, const char *line),
          void *arg)
{
    struct tm_config *cc = (struct tm_config *)c;
    char value[4096];
    char line[4352];

    for (enum cfg_sect s = 0; s < CFG_NSECT; s++) {
        const void *obj;

        for (size_t j = 0; (obj = cfg_sect_obj(cc, s, j)) != NULL; j++) {
            if (cfg_sect_named(s)) {
                snprintf(line, sizeof(line), "[%s %s]", cfg_sect_name(s),
                         sect_obj_name(s, obj));
            } else {
                snprintf(line, sizeof(line), "[%s]", cfg_sect_name(s));
            }
            emit(arg, line);
            for (size_t i = 0; i < cfg_nopts; i++) {
                const struct cfg_opt *o = &cfg_opts[i];
                char *v;

                if (o->sect != s || opt_unset(o, obj)) {
                    continue;
                }
                cfg_opt_show(o, obj, value, sizeof(value));
                if ((o->flags & CFG_REPEAT) && value[0] == '\0') {
                    continue; /* a repeatable option never given */
                }
                if (strcmp(value, "(empty)") == 0) {
                    value[0] = '\0';
                }
                v = value;
                do {
                    char *eol = strchr(v, '\n');

                    if (eol != NULL) {
                        *eol = '\0';
                    }
                    snprintf(line, sizeof(line), "%s =%s%s", o->key,
                             v[0] != '\0' ? " " : "", v);
                    emit(arg, line);
                    v = eol != NULL ? eol + 1 : NULL;
                } while (v != NULL);
            }
            emit(arg, "");
        }
    }
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

void *
cfg_sect_obj(struct tm_config *c, enum cfg_sect s, size_t i)
{
    switch (s) {
    case CFG_UPSTREAM:
        return i < c->nupstreams ? &c->upstreams[i] : NULL;
    case CFG_ROUTE:
        return i < c->nroutes ? &c->routes[i] : NULL;
    case CFG_WATCH:
        return i < c->nwatches ? &c->watches[i] : NULL;
    case CFG_LEASE:
        return i < c->nleases ? &c->leases[i] : NULL;
    default:
        return i == 0 ? cfg_singleton(c, s) : NULL;
    }
}

const char *
cfg_sect_name(enum cfg_sect s)
{
    static const char *const names[CFG_NSECT] = {
        "proxy",    "admin", "store", "locks", "tokens",
        "upstream", "route", "watch", "lease",
    };

    return names[s];
}

bool
cfg_sect_named(enum cfg_sect s)
{
    return s == CFG_UPSTREAM || s == CFG_ROUTE || s == CFG_WATCH ||
           s == CFG_LEASE;
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
    } else if (strcmp(l->backend, "etcd") == 0) {
        need = "endpoints";
        v = l->endpoints;
    } else if (strcmp(l->backend, "zookeeper") == 0) {
        need = "hosts";
        v = l->zk_hosts;
    }
    if (need != NULL && (v == NULL || !*v)) {
        snprintf(buf, len, "[locks] backend %s needs %s", l->backend, need);
        return buf;
    }
    if (strcmp(l->backend, "redis") == 0) {
        return check_redis_pair("locks", l->url, l->cluster, buf, len);
    }
    return NULL;
}

const char *
cfg_check_lease(const struct cfg_lease *l, char *buf, size_t len)
{
    if (l->renew_ms >= l->ttl_ms) {
        snprintf(buf, len,
                 "[lease %s] renew_ms (%d) must be below ttl_ms (%d): a "
                 "lease renewed after its end is lost",
                 l->name, l->renew_ms, l->ttl_ms);
        return buf;
    }
    return NULL;
}

const char *
cfg_check_watch(const struct cfg_watch *w, char *buf, size_t len)
{
    const char *v = NULL, *need = NULL, *msg;

    if (w->backend == NULL || w->prefix == NULL) {
        return NULL; /* reported already */
    }
    if (strcmp(w->backend, "etcd") == 0) {
        need = "endpoints";
        v = w->endpoints;
    } else if (strcmp(w->backend, "zookeeper") == 0) {
        need = "hosts";
        v = w->zk_hosts;
    }
    if (need != NULL && (v == NULL || !*v)) {
        snprintf(buf, len, "[watch %s] backend %s needs %s", w->name,
                 w->backend, need);
        return buf;
    }
    if (strcmp(w->backend, "zookeeper") == 0 &&
        (msg = check_zk_root(w->prefix, buf, len)) != NULL) {
        snprintf(buf, len, "prefix: %s", msg);
        return buf;
    }
    if (strcmp(w->backend, "zookeeper") == 0 && w->token != NULL &&
        strcmp(w->token, "lock_revision") == 0) {
        snprintf(buf, len,
                 "token: lock_revision is for backend etcd (a "
                 "ZooKeeper lock's token is its node's czxid)");
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
    if (strcmp(s->type, "redis") == 0) {
        if (s->cluster && s->wait_replicas > 0) {
            snprintf(buf, len,
                     "[store] wait_replicas needs one Redis server: with "
                     "cluster = yes a raise goes to its slot's master, and "
                     "WAIT is not supported there");
            return buf;
        }
        return check_redis_pair("store", s->url, s->cluster, buf, len);
    }
    return NULL;
}
