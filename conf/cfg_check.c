/* cfg_check.c: the checks of text options (addresses, URLs, a libpq
 * connection string, znode paths, names): each says whether a value is
 * well formed, without echoing it. */
#include "cfg_set.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <arpa/inet.h>

#include <libpq-fe.h>

#include "../policies/canon.h"
#include "../policies/origin.h"
#include "../policies/s3name.h"

bool
cfg_name_ok(const char *s, size_t n)
{
    if (n == 0) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!cfg_is_alnum(s[i]) && strchr("_-.", s[i]) == NULL) {
            return false;
        }
    }
    return true;
}

/* A port: 1 to 65535 in decimal. */
int
cfg_parse_port(const char *p, size_t n)
{
    int v = 0;

    if (n == 0 || n > 5) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (!cfg_is_digit(p[i])) {
            return 0;
        }
        v = v * 10 + (p[i] - '0');
    }
    return v <= 65535 ? v : 0;
}

/* Split s[0..n) into a host and an optional port: "host", "host:port",
 * "[v6]" or "[v6]:port". The host slice excludes the brackets. */
bool
cfg_split_authority(const char *s, size_t n, struct tm_slice *host,
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
            if (!cfg_is_alnum(host->p[i]) &&
                strchr(":.%", host->p[i]) == NULL) {
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
            if (!cfg_is_alnum(s[i]) && strchr("-._", s[i]) == NULL) {
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
        if (cfg_parse_port(port->p, port->len) == 0) {
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
    if (!cfg_split_authority(s, strlen(s), &h, &p, &br) || p.len == 0) {
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

/* [proxy] listen: host:port, or unix:PATH with PATH 1 to 107 bytes (what
 * sun_path holds with its NUL). */
static const char *
check_proxy_listen(const char *v, char *buf, size_t len)
{
    const size_t max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;
    size_t n;

    if (strncmp(v, "unix:", 5) != 0) {
        return check_listen(v, buf, len);
    }
    n = strlen(v + 5);
    if (n == 0) {
        return "unix: needs a socket path (unix:/run/tidemark/app.sock)";
    }
    if (n > max) {
        snprintf(buf, len,
                 "the socket path is %zu bytes; a Unix socket path holds at "
                 "most %zu",
                 n, max);
        return buf;
    }
    return NULL;
}

/* listen_mode: octal permission bits, 0 to 0777. */
static const char *
check_listen_mode(const char *v, char *buf, size_t len)
{
    size_t n = strspn(v, "01234567");

    if (n == 0 || v[n] != '\0' || n > 4 || strtoul(v, NULL, 8) > 0777) {
        return "must be octal permission bits, 0000 to 0777 (0660)";
    }
    return NULL;
}

/* A header name is an RFC 9110 token (empty: unset). */
static const char *
check_header_name(const char *v, char *buf, size_t len)
{
    if (v[0] != '\0' && !cfg_field_name_ok(v, strlen(v))) {
        return "must be a header name (letters, digits, '-')";
    }
    return NULL;
}

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
    if (!cfg_split_authority(a, (size_t)(slash - a), &host, &port, &br) ||
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
        if (!cfg_is_digit(*p)) {
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
const char *
cfg_check_redis_pair(const char *sect, const char *url, bool cluster, char *buf,
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

/* http://host:port or https://host:port, perhaps with a '/' after it,
 * in the scheme of the list's first (*arg: 0 not seen yet, 1 http, 2
 * https, 3 mixed). */
static bool
endpoint_ok(const char *p, size_t n, void *arg)
{
    int *scheme = arg;
    struct tm_slice host, port;
    size_t skip = n >= 8 && strncmp(p, "https://", 8) == 0  ? 8
                  : n >= 7 && strncmp(p, "http://", 7) == 0 ? 7
                                                            : 0;
    int this = skip == 8 ? 2 : 1;
    bool br;

    if (n > 0 && p[n - 1] == '/') {
        n--;
    }
    if (skip == 0 ||
        !cfg_split_authority(p + skip, n - skip, &host, &port, &br) ||
        port.len == 0) {
        return false;
    }
    if (*scheme != 0 && *scheme != this) {
        *scheme = 3;
        return false;
    }
    *scheme = this;
    return true;
}

static const char *
check_endpoints(const char *v, char *buf, size_t len)
{
    int scheme = 0;

    if (each_item(v, true, endpoint_ok, &scheme)) {
        return NULL;
    }
    return scheme == 3 ? "mixes http:// and https:// endpoints: one "
                         "scheme for all"
                       : "must be http://host:port or https://host:port, "
                         "comma-separated";
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
        !cfg_split_authority(v + 7, (size_t)(path - v - 7), &host, &port,
                             &br) ||
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
           cfg_split_authority(p, n, &host, &port, &br) && port.len > 0 &&
           host.len > 0;
}

/* A nameserver: an IPv4 or IPv6 address, with an optional port
 * ("10.0.0.2", "10.0.0.2:5353", "[::1]:53", "::1"). */
static bool
nameserver_ok(const char *p, size_t n, void *arg)
{
    struct tm_slice host, port;
    unsigned char ip[16];
    char text[64];
    bool br;
    long num = 0;

    (void)arg;
    if (n == 0 || n >= sizeof(text)) {
        return false;
    }
    if (memchr(p, ':', n) != memrchr(p, ':', n) && p[0] != '[') {
        host = (struct tm_slice){p, n}; /* a bare IPv6 address */
        port = (struct tm_slice){p + n, 0};
    } else if (!cfg_split_authority(p, n, &host, &port, &br)) {
        return false;
    }
    for (size_t i = 0; i < port.len; i++) {
        if (port.p[i] < '0' || port.p[i] > '9' || num > 65535) {
            return false;
        }
        num = num * 10 + (port.p[i] - '0');
    }
    if (port.len > 0 && (num < 1 || num > 65535)) {
        return false;
    }
    memcpy(text, host.p, host.len);
    text[host.len] = '\0';
    return inet_pton(AF_INET, text, ip) == 1 ||
           inet_pton(AF_INET6, text, ip) == 1;
}

/* [proxy] resolver: nameservers, comma-separated (empty: the system's). */
static const char *
check_resolver(const char *v, char *buf, size_t len)
{
    (void)buf;
    (void)len;
    return v[0] == '\0' || each_item(v, true, nameserver_ok, NULL)
               ? NULL
               : "must be IP addresses with an optional port (10.0.0.2, "
                 "127.0.0.1:5353, [::1]:53), comma-separated";
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

const struct cfg_ops cfg_listen_ops = {.check = check_listen};
const struct cfg_ops cfg_proxy_listen_ops = {.check = check_proxy_listen};
const struct cfg_ops cfg_listen_mode_ops = {.check = check_listen_mode};
const struct cfg_ops cfg_s3_endpoints_ops = {.check = check_s3_endpoints};
const struct cfg_ops cfg_aws_name_ops = {.check = check_aws_name};
const struct cfg_ops cfg_profile_ops = {.check = check_profile};
const struct cfg_ops cfg_header_name_ops = {.check = check_header_name};
const struct cfg_ops cfg_allowed_hosts_ops = {.check = check_allowed_hosts};
const struct cfg_ops cfg_redis_url_ops = {.check = check_redis_url};
const struct cfg_ops cfg_dsn_ops = {.check = check_dsn};
const struct cfg_ops cfg_endpoints_ops = {.check = check_endpoints};
const struct cfg_ops cfg_watch_prefix_ops = {.check = check_watch_prefix};
const struct cfg_ops cfg_watch_backend_ops = {.check = check_watch_backend};
const struct cfg_ops cfg_watch_resource_ops = {.check = check_watch_resource};
const struct cfg_ops cfg_zk_hosts_ops = {.check = check_zk_hosts};
const struct cfg_ops cfg_resolver_ops = {.check = check_resolver};
const struct cfg_ops cfg_zk_root_ops = {.check = check_zk_root};
const struct cfg_ops cfg_section_ref_ops = {.check = check_section_ref};
const struct cfg_ops cfg_carrier_ref_ops = {.check = check_carrier_ref};
const struct cfg_ops cfg_lease_lock_ops = {.check = check_lease_lock};
const struct cfg_ops cfg_health_url_ops = {.check = check_health_url};
