/* cfg_custom.c: the options that set several fields (add_header,
 * strip_header, a route's methods, path and resource, an upstream's url):
 * parse, free and show each. */
#include "cfg_set.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../policies/route.h"

/* Whether s[0..n) is an HTTP field name (RFC 9110 token). */
bool
cfg_field_name_ok(const char *s, size_t n)
{
    if (n == 0) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!cfg_is_alnum(s[i]) && strchr("!#$%&'*+-.^_`|~", s[i]) == NULL) {
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
        if (colon == NULL || !cfg_field_name_ok(line, (size_t)(colon - line))) {
            return "must be NAME: VALUE with NAME a header name";
        }
        for (val = colon + 1; val < line + n && (*val == ' ' || *val == '\t');
             val++) {
        }
        h = realloc(u->add, (u->nadd + 1) * sizeof(*u->add));
        if (h == NULL) {
            return CFG_OOM;
        }
        u->add = h;
        h = &u->add[u->nadd++];
        h->name = strndup(line, (size_t)(colon - line));
        h->value = strndup(val, (size_t)(line + n - val));
        if (h->name == NULL || h->value == NULL) {
            return CFG_OOM;
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

const struct cfg_ops cfg_add_header_ops = {NULL, set_add_header,
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
        if (!cfg_field_name_ok(line, n)) {
            return "must be a header name";
        }
        names = realloc(u->strip, (u->nstrip + 1) * sizeof(*u->strip));
        if (names == NULL) {
            return CFG_OOM;
        }
        u->strip = names;
        u->strip[u->nstrip] = strndup(line, n);
        if (u->strip[u->nstrip++] == NULL) {
            return CFG_OOM;
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

const struct cfg_ops cfg_strip_header_ops = {
    NULL, set_strip_header, drop_strip_header, show_strip_header};

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
    if (!cfg_split_authority(a, alen, &host, &port, &br)) {
        return "must be http://host[:port] or https://host[:port]";
    }
    pdef = tls ? 443 : 80;
    pnum = port.len > 0 ? cfg_parse_port(port.p, port.len) : pdef;

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
        return CFG_OOM;
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

const struct cfg_ops cfg_upstream_url_ops = {
    NULL, set_upstream_url, drop_upstream_url, show_upstream_url};

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

const struct cfg_ops cfg_methods_ops = {NULL, set_methods, drop_methods,
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
    return cfg_store_str(&r->path_src, v);
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

const struct cfg_ops cfg_path_ops = {NULL, set_path, drop_path, show_path};

/* A resource template naming the path's captures, or the word "header".
 * Needs the path compiled first; a missing or bad path is reported on
 * its own, so nothing is said here then. */
static const char *
set_resource(const struct cfg_opt *o, void *obj, const char *v, char *buf,
             size_t len)
{
    struct cfg_route *r = obj;

    rtmpl_free(&r->resource);
    if (cfg_store_str(&r->resource_src, v) != NULL) {
        return CFG_OOM;
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

const struct cfg_ops cfg_resource_ops = {NULL, set_resource, drop_resource,
                                         show_resource};
