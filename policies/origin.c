/* origin.c: the control port's Host, Origin and Sec-Fetch-Site rules
 * (origin.h): whether a request can come from a web page elsewhere. */
#include "origin.h"

#include <arpa/inet.h>
#include <string.h>
#include <strings.h>

/* A Host value taken apart: the host without brackets, the port (80
 * when the value names none: http's default). */
struct authority {
    struct tm_slice host;
    unsigned port;
};

#define HTTP_DEFAULT_PORT 80

static bool
is_alnum(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
           (c >= 'A' && c <= 'Z');
}

bool
origin_name_ok(const char *s, size_t n)
{
    if (n == 0 || n > 253) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '.' && s[i] != '_') {
            return false;
        }
    }
    return true;
}

/* 1..65535 in at most five digits; 0 when not a port. */
static unsigned
parse_port(const char *p, size_t n)
{
    unsigned v = 0;

    if (n == 0 || n > 5) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return 0;
        }
        v = v * 10 + (unsigned)(p[i] - '0');
    }
    return v <= 65535 ? v : 0;
}

/* The address in s, when s is an IPv4 dotted quad (af AF_INET, 4 bytes
 * into out) or an IPv6 literal (AF_INET6, 16 bytes); false otherwise. */
static bool
ip_literal(struct tm_slice s, int af, unsigned char *out)
{
    char text[64];

    if (s.len == 0 || s.len >= sizeof(text)) {
        return false;
    }
    memcpy(text, s.p, s.len);
    text[s.len] = '\0';
    return inet_pton(af, text, out) == 1;
}

/* "name", "name:port", "[v6]" or "[v6]:port"; false when malformed. */
static bool
split_host(struct tm_slice s, struct authority *a)
{
    unsigned char v6[16];
    const char *colon;

    memset(a, 0, sizeof(*a));
    a->port = HTTP_DEFAULT_PORT;
    if (s.len > 0 && s.p[0] == '[') {
        const char *end = memchr(s.p, ']', s.len);

        if (end == NULL) {
            return false;
        }
        a->host.p = s.p + 1;
        a->host.len = (size_t)(end - s.p) - 1;
        colon = end + 1 < s.p + s.len ? end + 1 : NULL;
        if (colon != NULL && *colon != ':') {
            return false;
        }
        /* An IP literal is an IPv6 address here (IPvFuture is not). */
        if (!ip_literal(a->host, AF_INET6, v6)) {
            return false;
        }
    } else {
        colon = memchr(s.p, ':', s.len);
        a->host.p = s.p;
        a->host.len = colon != NULL ? (size_t)(colon - s.p) : s.len;
        if (!origin_name_ok(a->host.p, a->host.len)) {
            return false;
        }
    }
    if (colon != NULL) {
        a->port = parse_port(colon + 1, (size_t)(s.p + s.len - colon - 1));
        if (a->port == 0) {
            return false;
        }
    }
    return true;
}

/* An IP literal of either family as 16 bytes (IPv4 mapped). */
static bool
any_literal(struct tm_slice s, unsigned char out[16])
{
    unsigned char v4[4];

    if (ip_literal(s, AF_INET, v4)) {
        memset(out, 0, 10);
        out[10] = 0xff;
        out[11] = 0xff;
        memcpy(out + 12, v4, 4);
        return true;
    }
    return ip_literal(s, AF_INET6, out);
}

static bool
all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != 0) {
            return false;
        }
    }
    return true;
}

/* 127.0.0.0/8 (also IPv4-mapped) or ::1. */
static bool
loopback_addr(const unsigned char a[16])
{
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0,    0,
                                             0, 0, 0, 0, 0xff, 0xff};

    if (memcmp(a, mapped, 12) == 0) {
        return a[12] == 127;
    }
    return all_zero(a, 15) && a[15] == 1;
}

/* The listen address is 0.0.0.0 or :: (every address of the machine). */
static bool
any_address(const unsigned char a[16])
{
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0,    0,
                                             0, 0, 0, 0, 0xff, 0xff};

    return all_zero(a, 16) ||
           (memcmp(a, mapped, 12) == 0 && all_zero(a + 12, 4));
}

/* One final dot dropped: "localhost." names localhost. */
static struct tm_slice
no_final_dot(struct tm_slice s)
{
    if (s.len > 1 && s.p[s.len - 1] == '.') {
        s.len--;
    }
    return s;
}

static bool
name_eq(struct tm_slice a, struct tm_slice b)
{
    a = no_final_dot(a);
    b = no_final_dot(b);
    return a.len == b.len && strncasecmp(a.p, b.p, a.len) == 0;
}

/* localhost and its subdomains (RFC 6761: they resolve to loopback). */
static bool
loopback_name(struct tm_slice h)
{
    static const char sfx[] = ".localhost";
    size_t n = sizeof(sfx) - 1;

    h = no_final_dot(h);
    if (slice_ieq(h, "localhost")) {
        return true;
    }
    return h.len > n && strncasecmp(h.p + h.len - n, sfx, n) == 0;
}

/* Whether h is one of the space-separated names of list. */
static bool
listed(const char *list, struct tm_slice h)
{
    const char *p = list;

    while (p != NULL && *p != '\0') {
        size_t n;

        p += strspn(p, " \t");
        n = strcspn(p, " \t");
        if (n > 0 && name_eq((struct tm_slice){p, n}, h)) {
            return true;
        }
        p += n;
    }
    return false;
}

static bool
host_is_ours(const struct origin_self *self, const struct authority *a)
{
    unsigned char addr[16], own[16];
    bool literal = any_literal(a->host, addr);
    bool own_literal = any_literal(self->host, own);

    if (literal) {
        if (loopback_addr(addr)) {
            return true;
        }
        if (own_literal) {
            return any_address(own) || memcmp(addr, own, 16) == 0;
        }
        return false;
    }
    if (loopback_name(a->host) || listed(self->allowed, a->host)) {
        return true;
    }
    /* listen = NAME:port: the operator's own name for it. */
    return !own_literal && name_eq(a->host, self->host);
}

/* Origin is exactly "http://" Host, ASCII case-insensitively. */
static bool
same_origin(struct tm_slice origin, struct tm_slice host)
{
    static const char scheme[] = "http://";
    size_t n = sizeof(scheme) - 1;

    return host.p != NULL && origin.len == n + host.len &&
           strncasecmp(origin.p, scheme, n) == 0 &&
           strncasecmp(origin.p + n, host.p, host.len) == 0;
}

enum origin_verdict
origin_check(const struct origin_self *self, bool http11, struct tm_slice host,
             struct tm_slice origin, struct tm_slice fetch_site)
{
    struct authority a;

    if (host.p == NULL && http11) {
        return ORIGIN_NO_HOST;
    }
    if (host.p != NULL) {
        host = slice_trim(host);
        if (!split_host(host, &a)) {
            return ORIGIN_BAD_HOST;
        }
        if (a.port != self->port) {
            return ORIGIN_WRONG_PORT;
        }
        if (!host_is_ours(self, &a)) {
            return ORIGIN_FOREIGN_HOST;
        }
    }
    if (origin.p != NULL && !same_origin(slice_trim(origin), host)) {
        return ORIGIN_CROSS_ORIGIN;
    }
    if (fetch_site.p != NULL) {
        fetch_site = slice_trim(fetch_site);
        if (!slice_ieq(fetch_site, "same-origin") &&
            !slice_ieq(fetch_site, "none")) {
            return ORIGIN_CROSS_FETCH;
        }
    }
    return ORIGIN_OK;
}

int
origin_status(enum origin_verdict v)
{
    switch (v) {
    case ORIGIN_OK:
        return 0;
    case ORIGIN_BAD_HOST:
    case ORIGIN_NO_HOST:
        return 400;
    case ORIGIN_FOREIGN_HOST:
    case ORIGIN_WRONG_PORT:
        return 421;
    case ORIGIN_CROSS_ORIGIN:
    case ORIGIN_CROSS_FETCH:
        return 403;
    }
    return 403;
}

const char *
origin_reason(enum origin_verdict v)
{
    switch (v) {
    case ORIGIN_OK:
        return "";
    case ORIGIN_BAD_HOST:
        return "the Host header is not host[:port]";
    case ORIGIN_NO_HOST:
        return "an HTTP/1.1 request needs a Host header";
    case ORIGIN_FOREIGN_HOST:
        return "the Host header names neither this control port's address, "
               "a loopback name nor a name of [admin] allowed_hosts";
    case ORIGIN_WRONG_PORT:
        return "the Host header's port is not this control port's (a Host "
               "without a port names port 80)";
    case ORIGIN_CROSS_ORIGIN:
        return "a web page of another origin may not call the control port "
               "(Origin is not this port's own)";
    case ORIGIN_CROSS_FETCH:
        return "a web page of another origin may not call the control port "
               "(Sec-Fetch-Site is not same-origin)";
    }
    return "refused";
}
