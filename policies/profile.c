/* profile.c: what a request writes besides its own path, per protocol:
 * the WebDAV Destination parser, S3's writes named in a body, and where
 * a template lies below a path. Pure: no I/O, no globals, no allocation. */
#include "profile.h"

#include "ascii.h"

#include <string.h>
#include <strings.h>

#include "canon.h"

enum dav_copymove
dav_method(struct tm_slice method)
{
    if (slice_eq(method, "COPY")) {
        return DAV_COPY;
    }
    if (slice_eq(method, "MOVE")) {
        return DAV_MOVE;
    }
    return DAV_NONE;
}

bool
profile_write_method(enum tm_profile p, struct tm_slice method)
{
    static const char *const webdav[] = {
        "PUT",  "POST", "PATCH",     "DELETE", "MKCOL",
        "COPY", "MOVE", "PROPPATCH", "LOCK",   NULL,
    };
    static const char *const s3[] = {"PUT", "POST", "DELETE", NULL};
    const char *const *list = p == TM_PROFILE_WEBDAV ? webdav
                              : p == TM_PROFILE_S3   ? s3
                                                     : NULL;

    for (size_t i = 0; list != NULL && list[i] != NULL; i++) {
        if (slice_eq(method, list[i])) {
            return true;
        }
    }
    return false;
}

bool
dav_subtree_method(struct tm_slice method, struct tm_slice depth)
{
    if (slice_eq(method, "DELETE") || dav_method(method) != DAV_NONE) {
        return true;
    }
    return slice_eq(method, "LOCK") &&
           !(depth.p != NULL && depth.len == 1 && depth.p[0] == '0');
}

size_t
dav_below_name(const char *res, size_t len, char *out, size_t cap)
{
    if (cap <= DAV_BELOW_LEN || len >= cap - DAV_BELOW_LEN) {
        return 0;
    }
    memcpy(out, res, len);
    memcpy(out + len, DAV_BELOW, DAV_BELOW_LEN + 1);
    return len + DAV_BELOW_LEN;
}

size_t
dav_parent_len(const char *res, size_t len)
{
    while (len > 0 && res[len - 1] == '/') {
        len--; /* a trailing empty segment belongs to the one before */
    }
    while (len > 0 && res[len - 1] != '/') {
        len--;
    }
    while (len > 0 && res[len - 1] == '/') {
        len--;
    }
    return len;
}

/* ---- Destination ------------------------------------------------------ */

/* host and port of an authority "host[:port]" or "[v6]:port". port.p
 * is NULL when absent; an empty port is kept empty (the default). false
 * when malformed. */
static bool
split_authority(struct tm_slice a, struct tm_slice *host, struct tm_slice *port)
{
    const char *end = a.p + a.len, *colon = NULL;

    port->p = NULL;
    port->len = 0;
    if (a.len == 0) {
        return false;
    }
    if (a.p[0] == '[') {
        const char *close = memchr(a.p, ']', a.len);
        if (close == NULL) {
            return false;
        }
        colon = close + 1 < end ? close + 1 : NULL;
        if (colon != NULL && *colon != ':') {
            return false;
        }
        host->p = a.p;
        host->len = (size_t)(close + 1 - a.p);
    } else {
        colon = memchr(a.p, ':', a.len);
        host->p = a.p;
        host->len = colon != NULL ? (size_t)(colon - a.p) : a.len;
    }
    if (host->len == 0) {
        return false;
    }
    if (colon != NULL) {
        port->p = colon + 1;
        port->len = (size_t)(end - port->p);
        for (size_t i = 0; i < port->len; i++) {
            if (port->p[i] < '0' || port->p[i] > '9') {
                return false;
            }
        }
    }
    return true;
}

/* The port's number, or dflt when absent or empty; -1 above 65535. */
static long
port_number(struct tm_slice port, long dflt)
{
    long n = 0;

    if (port.p == NULL || port.len == 0) {
        return dflt;
    }
    for (size_t i = 0; i < port.len; i++) {
        n = n * 10 + (port.p[i] - '0');
        if (n > 65535) {
            return -1;
        }
    }
    return n;
}

/* Whether the Destination's authority names the request's own. */
static bool
same_authority(struct tm_slice dest, struct tm_slice req, long dflt)
{
    struct tm_slice dh, dp, rh, rp;
    long dport, rport;

    if (!split_authority(dest, &dh, &dp) || !split_authority(req, &rh, &rp)) {
        return false;
    }
    dport = port_number(dp, dflt);
    rport = port_number(rp, dflt);
    return dport >= 0 && dport == rport && dh.len == rh.len &&
           strncasecmp(dh.p, rh.p, dh.len) == 0;
}

/* The scheme of an absolute URI ("http:" or "https:", any case): its
 * default port, with *skip the bytes up to the authority. 0 for any
 * other scheme; -1 when value has no scheme (a path). */
static long
uri_scheme(struct tm_slice v, size_t *skip)
{
    size_t i = 0;

    while (i < v.len && ((v.p[i] | 0x20) >= 'a' && (v.p[i] | 0x20) <= 'z')) {
        i++;
    }
    if (i == 0 || i >= v.len || v.p[i] != ':') {
        return -1;
    }
    *skip = i + 1;
    if (i == 4 && strncasecmp(v.p, "http", 4) == 0) {
        return 80;
    }
    if (i == 5 && strncasecmp(v.p, "https", 5) == 0) {
        return 443;
    }
    return 0;
}

static bool
refuse(const char **why, const char *reason)
{
    *why = reason;
    return false;
}

bool
dav_destination(struct tm_slice value, struct tm_slice authority, char *out,
                size_t outcap, size_t *outlen, struct tm_slice *raw,
                const char **why)
{
    struct tm_slice rest = value, auth;
    const char *q;
    size_t skip = 0, plen;
    long dflt;

    if (value.len == 0) {
        return refuse(why, "the Destination is empty");
    }
    for (size_t i = 0; i < value.len; i++) {
        unsigned char ch = (unsigned char)value.p[i];
        if (ch < 0x21 || ch > 0x7e) {
            return refuse(why, "the Destination holds a byte a URI cannot");
        }
    }
    if (memchr(value.p, '#', value.len) != NULL) {
        return refuse(why, "the Destination has a fragment");
    }
    dflt = uri_scheme(value, &skip);
    if (dflt == 0) {
        return refuse(why, "the Destination's scheme is not http or https");
    }
    if (dflt > 0) {
        rest.p += skip;
        rest.len -= skip;
        if (rest.len < 2 || rest.p[0] != '/' || rest.p[1] != '/') {
            return refuse(why, "the Destination has no authority");
        }
        auth.p = rest.p + 2;
        auth.len = 0;
        while (auth.len < rest.len - 2 && auth.p[auth.len] != '/' &&
               auth.p[auth.len] != '?') {
            auth.len++;
        }
        if (memchr(auth.p, '@', auth.len) != NULL) {
            return refuse(why, "the Destination has userinfo");
        }
        if (!same_authority(auth, authority, dflt)) {
            return refuse(why, "the Destination is on another host");
        }
        rest.p = auth.p + auth.len;
        rest.len = (size_t)(value.p + value.len - rest.p);
    } else if (value.p[0] != '/' || (value.len > 1 && value.p[1] == '/')) {
        return refuse(why, "the Destination is not an absolute URI or path");
    }
    *raw = rest;
    q = memchr(rest.p, '?', rest.len);
    plen = q != NULL ? (size_t)(q - rest.p) : rest.len;
    if (plen == 0) {
        /* "http://host" or "http://host?q": the root. */
        if (outcap < 2) {
            return refuse(why, "the Destination is too long");
        }
        out[0] = '/';
        out[1] = '\0';
        *outlen = 1;
        return true;
    }
    if (plen >= outcap) {
        return refuse(why, "the Destination is too long");
    }
    return canon_path(rest.p, plen, out, outcap, outlen, why);
}

/* ---- S3 ------------------------------------------------------------- */

/* The character at s[*i] of a query part, *i moved past it: %XX
 * decoded, '+' a space; -1 for a '%' without two hex digits (*i moved
 * past the '%' alone). */
static int
query_char(const char *s, size_t len, size_t *i)
{
    char c = s[(*i)++];

    if (c == '+') {
        return ' ';
    }
    if (c != '%') {
        return (unsigned char)c;
    }
    if (len - *i < 2 || ascii_hexval(s[*i]) < 0 ||
        ascii_hexval(s[*i + 1]) < 0) {
        return -1;
    }
    *i += 2;
    return ascii_hexval(s[*i - 2]) * 16 + ascii_hexval(s[*i - 1]);
}

/* Whether the raw name n (percent-encoded, '+' for space) decodes to
 * name, compared without case. */
static bool
param_name_is(const char *n, size_t len, const char *name)
{
    size_t j = 0, want = strlen(name);

    for (size_t i = 0; i < len; j++) {
        int c = query_char(n, len, &i);
        if (c < 0) {
            c = '%';
        }
        if (j >= want || ascii_lower((char)c) != ascii_lower(name[j])) {
            return false;
        }
    }
    return j == want;
}

size_t
query_param(struct tm_slice query, const char *name, struct tm_slice *value)
{
    size_t i = 0, count = 0;

    value->p = NULL;
    value->len = 0;
    while (i <= query.len && query.p != NULL) {
        size_t end = i;
        size_t nlen;
        while (end < query.len && query.p[end] != '&' && query.p[end] != ';') {
            end++;
        }
        nlen = 0;
        while (i + nlen < end && query.p[i + nlen] != '=') {
            nlen++;
        }
        if (param_name_is(query.p + i, nlen, name) && count++ == 0) {
            value->p = query.p + i + nlen + (i + nlen < end);
            value->len = end - (size_t)(value->p - query.p);
        }
        i = end + 1;
    }
    return count;
}

bool
query_has_param(struct tm_slice query, const char *name)
{
    struct tm_slice v;

    return query_param(query, name, &v) > 0;
}

bool
query_value(struct tm_slice raw, char *out, size_t cap, size_t *outlen)
{
    size_t n = 0;

    for (size_t i = 0; i < raw.len; n++) {
        int c = query_char(raw.p, raw.len, &i);
        if (c < 0 || n == cap) {
            return false;
        }
        out[n] = (char)c;
    }
    *outlen = n;
    return true;
}

bool
media_is_form(struct tm_slice ct)
{
    static const char form[] = "multipart/form-data";
    size_t n = sizeof(form) - 1, end = n;

    if (ct.len < n || strncasecmp(ct.p, form, n) != 0) {
        return false;
    }
    while (end < ct.len && (ct.p[end] == ' ' || ct.p[end] == '\t')) {
        end++;
    }
    return end == ct.len || ct.p[end] == ';';
}

const char *
s3_elsewhere(struct tm_slice method, struct tm_slice query, bool form,
             bool rename)
{
    if (rename) {
        return "an S3 rename (x-amz-rename-source) removes a key its path "
               "does not name";
    }
    if (!slice_eq(method, "POST")) {
        return NULL;
    }
    if (form) {
        return "an S3 form upload names its key in the form";
    }
    return NULL;
}

bool
s3_batch_delete(struct tm_slice method, struct tm_slice query)
{
    return slice_eq(method, "POST") && query_has_param(query, "delete");
}

/* ---- templates -------------------------------------------------------- */

bool
tmpl_above(const struct tm_tmpl *t, const char *path, size_t len)
{
    size_t pos = 1, i = 0;

    if (len == 0 || path[0] != '/' || t->nsegs == 0) {
        return false;
    }
    if (path[len - 1] == '/') {
        len--; /* a trailing empty segment: "/bucket/" is "/bucket" */
    }
    while (pos <= len && len > 0) {
        const char *slash = memchr(path + pos, '/', len - pos);
        size_t end = slash != NULL ? (size_t)(slash - path) : len;
        const struct tm_tmpl_seg *s;

        if (i >= t->nsegs || t->segs[i].rest) {
            return false;
        }
        s = &t->segs[i];
        if (s->lit != NULL ? end - pos != s->lit_len ||
                                 memcmp(path + pos, s->lit, s->lit_len) != 0
                           : end == pos) {
            return false;
        }
        i++;
        pos = end + 1;
    }
    return i < t->nsegs;
}
