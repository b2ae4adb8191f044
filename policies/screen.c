/* screen.c: the request checks before any token is read: the method as
 * every backend reads it, the path, the headers tidemark owns, the
 * route, and what WebDAV and S3 requests write besides their path. */
#include "screen.h"

#include <stdio.h>
#include <string.h>

#include "canon.h"
#include "hname.h"
#include "profile.h"
#include "reqcheck.h"

#define NO_UPSTREAM ((size_t)-1)

/* Refuse with status; invalid: counted as an invalid token decision. */
static enum screen_verdict
refuse(struct screen *s, int status, const char *reason, const char *detail,
       bool invalid)
{
    s->verdict = SCREEN_REFUSE;
    s->status = status;
    s->reason = reason;
    s->detail = detail;
    s->invalid = invalid;
    return SCREEN_REFUSE;
}

static enum screen_verdict
invalid(struct screen *s, const char *detail)
{
    return refuse(s, 400, "invalid", detail, true);
}

/* Whether route r applies to method: the methods it lists and, when it
 * fences, its profile's write methods. */
static bool
route_applies(const struct cfg_route *r, struct tm_slice method)
{
    return methods_has(&r->methods, method.p, method.len) ||
           (r->mode != TM_MODE_OFF && profile_write_method(r->profile, method));
}

const struct cfg_route *
screen_route(const struct tm_config *cfg, struct tm_slice method,
             struct tm_slice path, struct tm_slice caps[TM_MAX_CAPTURES])
{
    for (size_t i = 0; i < cfg->nroutes; i++) {
        const struct cfg_route *r = &cfg->routes[i];
        if (route_applies(r, method) &&
            tmpl_match(&r->path, path.p, path.len, caps)) {
            return r;
        }
    }
    return NULL;
}

struct tm_slice
screen_upstream_host(const struct cfg_upstream *u, const struct http_request *h)
{
    struct tm_slice host = {u->host_header, strlen(u->host_header)};
    int hi;

    if (u->host_preserve &&
        (hi = http_find_header(h->headers, h->nheaders, 0, "Host")) >= 0) {
        host = h->headers[hi].value;
    }
    return host;
}

/* A request that could reach the backend as another method than the one
 * its routes were matched with: a lower-case method, a method override
 * header or a _method query parameter. NULL when clean, else the 400's
 * detail. */
static const char *
method_disguised(const struct http_request *h)
{
    const char *why = reqcheck_method(h->method.p, h->method.len);
    const char *q = h->path.p + h->path.len;
    const char *end = h->target.p + h->target.len;

    if (why != NULL) {
        return why;
    }
    for (size_t i = 0; i < h->nheaders; i++) {
        struct tm_slice n = h->headers[i].name;
        if (reqcheck_override_header(n.p, n.len)) {
            return REQCHECK_OVERRIDE_DETAIL;
        }
    }
    if (q < end && *q == '?' &&
        reqcheck_override_query(q + 1, (size_t)(end - q - 1))) {
        return REQCHECK_OVERRIDE_DETAIL;
    }
    return NULL;
}

/* Read the request path into its canonical form in out (path.len + 1
 * bytes: it is never longer). "OPTIONS *" stays "*". NULL, or why the
 * path is refused. */
static const char *
canonical_path(const struct http_request *h, char *out, struct tm_slice *cp)
{
    size_t len = 0;
    const char *why = NULL;

    if (h->path.len == 1 && h->path.p[0] == '*') {
        *cp = h->path;
        return NULL;
    }
    if (!canon_path(h->path.p, h->path.len, out, h->path.len + 1, &len, &why)) {
        return why;
    }
    cp->p = out;
    cp->len = len;
    return NULL;
}

/* A request that tries to hide a fencing header: the token or resource
 * header named in Connection (a proxy would drop it, another might not).
 * NULL when clean. (The parser has refused the other spellings of these
 * names.) */
static const char *
smuggled_header(const struct cfg_proxy *pc, const struct http_request *h)
{
    for (size_t i = 0; i < h->nheaders; i++) {
        const struct http_header *f = &h->headers[i];
        if (f->hop && (slice_ieq(f->name, pc->token_header) ||
                       slice_ieq(f->name, pc->resource_header))) {
            return "a fencing header named in Connection";
        }
    }
    return NULL;
}

/* Index of the only header named name, -1 when there is none, -2 when
 * there are more. One pass: the token header is looked for in every
 * request. */
static int
only_header(const struct http_request *h, const char *name)
{
    size_t len = strlen(name);
    int found = -1;

    for (size_t i = 0; i < h->nheaders; i++) {
        struct tm_slice n = h->headers[i].name;

        if (n.len == len && strncasecmp(n.p, name, len) == 0) {
            if (found >= 0) {
                return -2;
            }
            found = (int)i;
        }
    }
    return found;
}

/* ---- requests that write elsewhere (profile = webdav | s3) ---------- */

/* The Depth header's value; p NULL when there is none, or more than one
 * (read as infinity: the wider write). */
static struct tm_slice
depth_header(const struct http_request *h)
{
    struct tm_slice v = {NULL, 0};
    int i = only_header(h, "Depth");

    return i >= 0 ? h->headers[i].value : v;
}

static bool
fences(const struct cfg_route *r, enum tm_profile p)
{
    return r != NULL && r->profile == p && r->mode != TM_MODE_OFF;
}

/* Whether r keeps subtree marks for the collections above its
 * resources. */
static bool
keeps_tree(const struct cfg_route *r)
{
    return fences(r, TM_PROFILE_WEBDAV) && r->subtree;
}

bool
screen_keeps_trees(const struct tm_config *cfg)
{
    for (size_t i = 0; i < cfg->nroutes; i++) {
        if (keeps_tree(&cfg->routes[i])) {
            return true;
        }
    }
    return false;
}

/* The upstream of "default", else the first; NO_UPSTREAM when none. */
static size_t
default_upstream(const struct tm_config *cfg)
{
    for (size_t i = 0; i < cfg->nupstreams; i++) {
        if (strcmp(cfg->upstreams[i].name, "default") == 0) {
            return i;
        }
    }
    return cfg->nupstreams > 0 ? 0 : NO_UPSTREAM;
}

/* The upstream a request on r (NULL: unmatched) goes to. */
static size_t
route_upstream(const struct tm_config *cfg, const struct cfg_route *r)
{
    return r != NULL ? r->upstream_idx : default_upstream(cfg);
}

/* Whether a route of profile p fences requests that go to upstream u. */
static bool
upstream_fenced(const struct tm_config *cfg, enum tm_profile p, size_t u)
{
    for (size_t i = 0; i < cfg->nroutes; i++) {
        const struct cfg_route *r = &cfg->routes[i];
        if (fences(r, p) && r->upstream_idx == u) {
            return true;
        }
    }
    return false;
}

/* The request's query (after '?', without it); empty when none. */
static struct tm_slice
request_query(const struct http_request *h)
{
    const char *end = h->target.p + h->target.len;
    const char *q = h->path.p != NULL ? h->path.p + h->path.len : end;
    struct tm_slice v = {q, 0};

    if (q < end && *q == '?') {
        v.p = q + 1;
        v.len = (size_t)(end - v.p);
    }
    return v;
}

/* The request's own authority: an absolute-form target's, else Host's
 * (empty when there is none). */
static struct tm_slice
request_authority(const struct http_request *h)
{
    struct tm_slice a = {"", 0};
    const char *t = h->target.p;
    int hi;

    if (h->target.len > 0 && t[0] != '/' && t[0] != '*' && h->path.p != NULL) {
        const char *start = memchr(t, ':', h->target.len);
        if (start != NULL && start + 3 <= h->path.p) {
            a.p = start + 3; /* past "://" */
            a.len = (size_t)(h->path.p - a.p);
        }
        return a;
    }
    hi = http_find_header(h->headers, h->nheaders, 0, "Host");
    return hi >= 0 ? h->headers[hi].value : a;
}

/* Whether the query q names no part of an upload, or one part number S3
 * takes: 1 to 10000, digits only. A server may file a part under its
 * number as written (s3rver joins it to a path: a part numbered
 * "../../KEY._S3rver_object" wrote over KEY), so no other reaches an
 * upstream with fenced s3 routes, through any route. */
static bool
part_number_ok(struct tm_slice q)
{
    struct tm_slice v;
    char num[8];
    size_t n = query_param(q, "partNumber", &v), len = 0;
    unsigned long val = 0;

    if (n == 0 || !query_has_param(q, "uploadId")) {
        return true;
    }
    if (n > 1 || !query_value(v, num, sizeof(num), &len) || len == 0 ||
        len > 5) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (num[i] < '0' || num[i] > '9') {
            return false;
        }
        val = val * 10 + (unsigned long)(num[i] - '0');
    }
    return val >= 1 && val <= 10000;
}

/* Why an S3 request must be refused, or NULL: it writes keys its path
 * does not name (multi-object delete, form upload, rename) on an
 * upstream with fenced s3 routes, and its path is one such route's or
 * above it (the bucket), where the keys it names may be fenced. A
 * rename names its source key in a header: refused on the whole
 * upstream. */
static const char *
s3_refusal(const struct tm_config *cfg, const struct http_request *h,
           struct tm_slice path, size_t up)
{
    struct tm_slice caps[TM_MAX_CAPTURES];
    bool form = false, rename = false;
    const char *why;

    if (!upstream_fenced(cfg, TM_PROFILE_S3, up)) {
        return NULL;
    }
    if (!part_number_ok(request_query(h))) {
        return "the partNumber of an upload's part must be one number from "
               "1 to 10000";
    }
    for (size_t i = 0; i < h->nheaders; i++) {
        const struct http_header *f = &h->headers[i];
        /* In any spelling a gateway may read as the header (hname.h). */
        if (hname_same(f->name.p, f->name.len, "Content-Type")) {
            form = form || media_is_form(f->value);
        } else if (hname_same(f->name.p, f->name.len, "x-amz-rename-source")) {
            rename = true;
        }
    }
    why = s3_elsewhere(h->method, request_query(h), form, rename);
    if (why == NULL || rename) {
        return why;
    }
    for (size_t i = 0; i < cfg->nroutes; i++) {
        const struct cfg_route *r = &cfg->routes[i];
        if (fences(r, TM_PROFILE_S3) && r->upstream_idx == up &&
            (tmpl_above(&r->path, path.p, path.len) ||
             tmpl_match(&r->path, path.p, path.len, caps))) {
            return why;
        }
    }
    return NULL;
}

/* Take r as the request's route: its mode, upstream and body limit.
 * false when the request is refused (413). */
static bool
use_route(struct screen *s, const struct http_request *h,
          const struct cfg_route *r, enum tm_mode mode)
{
    s->route = r;
    s->route_name = r->name;
    s->mode = mode;
    s->upstream = r->upstream_idx;
    s->max_body = r->max_body > 0 ? (uint64_t)r->max_body : UINT64_MAX;
    if (h->body == HTTP_BODY_LENGTH && h->content_length > s->max_body) {
        refuse(s, 413, "too large", NULL, false);
        s->close = true;
        return false;
    }
    return true;
}

/* The Destination of a COPY or MOVE, parsed and canonicalized into path
 * (DAV_DEST_MAX bytes), and the route that matches it for the same
 * method. NULL with *why when there is no usable Destination. */
static const struct cfg_route *
dav_dest_route(const struct tm_config *cfg, const struct http_request *h,
               struct screen *s, char *path,
               struct tm_slice caps[TM_MAX_CAPTURES], const char **why)
{
    int di = only_header(h, "Destination");
    struct tm_slice dpath = {path, 0};

    if (di == -1) {
        *why = "a COPY or MOVE needs a Destination";
        return NULL;
    }
    if (di == -2) {
        *why = "more than one Destination header";
        return NULL;
    }
    if (!dav_destination(h->headers[di].value, request_authority(h), path,
                         DAV_DEST_MAX, &dpath.len, &s->dest_raw, why)) {
        s->dest_raw.p = NULL;
        return NULL;
    }
    *why = NULL;
    return screen_route(cfg, h->method, dpath, caps);
}

/* A COPY or MOVE on an upstream where WebDAV is fenced: fenced at its
 * Destination, and at its source too when r (the source's route) fences
 * it and either the request is a MOVE or r is no webdav route (to which
 * a COPY writes its own path); both marks are checked with the same
 * token and raised, the Destination's first. false when it is none of
 * tidemark's business (go on as for any request); true when s says what
 * to do. */
static bool
dav_request(const struct tm_config *cfg, const struct http_request *h,
            const struct cfg_route *r, struct tm_slice caps[TM_MAX_CAPTURES],
            struct screen *s)
{
    size_t up = route_upstream(cfg, r);
    bool dav = fences(r, TM_PROFILE_WEBDAV);
    bool src = r != NULL && r->mode != TM_MODE_OFF &&
               (!dav || dav_method(h->method) == DAV_MOVE);
    struct tm_slice dcaps[TM_MAX_CAPTURES];
    char path[DAV_DEST_MAX];
    const struct cfg_route *dr;
    const char *why = NULL;

    if (up == NO_UPSTREAM ||
        (!dav && !upstream_fenced(cfg, TM_PROFILE_WEBDAV, up))) {
        return false;
    }
    dr = dav_dest_route(cfg, h, s, path, dcaps, &why);
    if (why == NULL &&
        (dr == NULL || dr->mode == TM_MODE_OFF || dr->upstream_idx != up)) {
        if (!dav) {
            s->dest_raw.p = NULL;
            return false; /* as any request on r, or unmatched */
        }
        why = "the Destination is not under a fenced route";
    }
    if (why == NULL &&
        (dr->resource_from_header || (src && r->resource_from_header))) {
        why = "a COPY or MOVE onto a fenced Destination from or to a route "
              "with resource = header";
    }
    if (why != NULL) {
        s->route_name = r != NULL ? r->name : NULL;
        invalid(s, why);
        return true;
    }
    /* The stricter mode of the two ends (correctness < efficiency). */
    if (!use_route(s, h, dav || src ? r : dr,
                   (dav || src) && r->mode < dr->mode ? r->mode : dr->mode)) {
        return true;
    }
    s->rlen =
        rtmpl_expand(&dr->resource, dcaps, s->resource, sizeof(s->resource));
    s->verify = dr->verify;
    s->tree = keeps_tree(dr);
    if (src) {
        s->src_len = rtmpl_expand(&r->resource, caps, s->src, sizeof(s->src));
        s->src_verify = r->verify;
        s->src_tree = keeps_tree(r);
        if (s->src_len == 0) {
            s->rlen = 0;
        } else if (s->src_len == s->rlen &&
                   memcmp(s->src, s->resource, s->rlen) == 0) {
            s->src_len = 0; /* one resource: one mark */
        }
    }
    if (s->rlen == 0) {
        invalid(s, "the resource name is too long");
        return true;
    }
    s->verdict = SCREEN_FENCE;
    return true;
}

/* ---- the address an upstream executes -------------------------------- */

/* Make s->cpath the path upstream up executes the request at: an S3
 * server that gets the client's Host (host = preserve) and reads a
 * bucket from it executes "/<bucket>" + the path; every other upstream
 * the canonical path as sent. Only upstreams that fenced s3 routes use
 * are read so. false, refused (400), when that Host could name a bucket
 * but which one cannot be told. */
static bool
use_address(const struct tm_config *cfg, const struct http_request *h,
            size_t up, struct screen *s)
{
    const struct cfg_upstream *u;
    struct tm_slice bucket;
    const char *why = NULL;
    char *at;

    if (up == s->addr_up) {
        return true;
    }
    s->addr_up = up;
    s->cpath = s->plain;
    if (up == NO_UPSTREAM || s->plain.p[0] != '/') {
        return true;
    }
    u = &cfg->upstreams[up];
    if (!u->s3_fenced || !u->host_preserve) {
        return true;
    }
    switch (s3_host_read(screen_upstream_host(u, h), u->bucket_endpoints,
                         &bucket, &why)) {
    case S3_HOST_PATH:
        return true;
    case S3_HOST_BUCKET:
        break;
    default:
        invalid(s, why);
        return false;
    }
    at = s->pbuf + S3_BUCKET_MAX - bucket.len;
    at[0] = '/';
    memcpy(at + 1, bucket.p, bucket.len);
    s->cpath.p = at;
    s->cpath.len = bucket.len + 1 + (s->plain.len > 1 ? s->plain.len : 0);
    return true;
}

/* The first route for the request, each matched against the address its
 * upstream executes (use_address). NULL with s->verdict SCREEN_REFUSE
 * when the address of a route's upstream cannot be told. */
static const struct cfg_route *
match_route(const struct tm_config *cfg, const struct http_request *h,
            struct screen *s, struct tm_slice caps[TM_MAX_CAPTURES])
{
    for (size_t i = 0; i < cfg->nroutes; i++) {
        const struct cfg_route *r = &cfg->routes[i];
        if (!route_applies(r, h->method)) {
            continue;
        }
        if (!use_address(cfg, h, r->upstream_idx, s)) {
            s->route_name = r->name;
            return NULL;
        }
        if (tmpl_match(&r->path, s->cpath.p, s->cpath.len, caps)) {
            return r;
        }
    }
    return NULL;
}

/* ---- multipart uploads (profile = s3) -------------------------------- */

/* Note what a request on a fenced s3 route r does with an upload: an
 * uploadId (however spelled: query_param) makes it a part, completion or
 * abort of that upload, which the daemon fences by the resource the
 * upload was created for; two are refused (which one would the server
 * take?). A POST with "uploads" creates one. On any other route (or
 * none) to an upstream that fenced s3 routes use, an uploadId is noted
 * too: the server would complete a fenced key's upload there as well,
 * which the daemon refuses. */
static enum screen_verdict
s3_upload(const struct tm_config *cfg, const struct http_request *h,
          const struct cfg_route *r, struct screen *s)
{
    struct tm_slice q = request_query(h), v;
    size_t n;
    bool fenced = s->verdict == SCREEN_FENCE && fences(r, TM_PROFILE_S3);

    if (s->verdict == SCREEN_REFUSE || s->upstream == NO_UPSTREAM ||
        !cfg->upstreams[s->upstream].s3_fenced) {
        return s->verdict;
    }
    n = query_param(q, "uploadId", &v);
    if (n > 1) {
        return invalid(s, "more than one uploadId parameter");
    }
    if (n == 1) {
        s->upload = fenced ? SCREEN_UPLOAD_PART : SCREEN_UPLOAD_UNFENCED;
        s->upload_id = v;
    } else if (fenced && slice_eq(h->method, "POST") &&
               query_has_param(q, "uploads")) {
        s->upload = SCREEN_UPLOAD_CREATE;
    }
    return s->verdict;
}

/* ---- multi-object deletes (profile = s3) ----------------------------- */

static enum screen_verdict name_resource(const struct cfg_proxy *pc,
                                         const struct http_request *h,
                                         const struct cfg_route *r,
                                         struct tm_slice caps[TM_MAX_CAPTURES],
                                         struct screen *s);

/* A multi-object delete to upstream up, which fenced s3 routes use: its
 * keys are in the body, read whole before any is fenced, so it must be
 * sent to a bucket with a Content-Length within multi_delete_max. */
static enum screen_verdict
s3_batch(const struct cfg_proxy *pc, const struct http_request *h, size_t up,
         struct screen *s)
{
    const char *slash = memchr(s->cpath.p + 1, '/', s->cpath.len - 1);

    if (s->cpath.len < 2 || s->cpath.p[0] != '/' || slash != NULL) {
        return invalid(s, "an S3 multi-object delete is sent to its "
                          "bucket: POST /<bucket>?delete");
    }
    if (h->body == HTTP_BODY_NONE ||
        (h->body == HTTP_BODY_LENGTH && h->content_length == 0)) {
        return invalid(s, "an S3 multi-object delete names its keys in its "
                          "body, and this one has none");
    }
    if (h->body != HTTP_BODY_LENGTH) {
        return refuse(s, 411, "length",
                      "an S3 multi-object delete must give its "
                      "Content-Length",
                      false);
    }
    if (h->content_length > (uint64_t)pc->multi_delete_max) {
        snprintf(s->detail_buf, sizeof(s->detail_buf),
                 "an S3 multi-object delete body is read whole to fence "
                 "its keys: at most %d bytes (multi_delete_max)",
                 pc->multi_delete_max);
        s->close = true;
        return refuse(s, 413, "too large", s->detail_buf, false);
    }
    s->batch = true;
    s->upstream = up;
    s->mode = TM_MODE_CORRECTNESS;
    s->max_body = h->content_length;
    s->verdict = SCREEN_FENCE;
    return SCREEN_FENCE;
}

enum screen_key
screen_batch_key(const struct tm_config *cfg, const struct http_request *h,
                 const struct screen *s, const char *key, size_t klen,
                 struct screen_keyres *out)
{
    char path[3 * (S3_BUCKET_MAX + S3_KEY_MAX) + 8];
    struct tm_slice caps[TM_MAX_CAPTURES],
        bucket = {s->cpath.p + 1, s->cpath.len - 1};
    struct tm_slice p = {path, 0}, del = {"DELETE", 6};
    struct screen *one = &(struct screen){.verdict = SCREEN_FENCE};

    out->route = NULL;
    out->rlen = 0;
    if (!s3_key_address(bucket, key, klen, path, sizeof(path), &p.len)) {
        out->why = "a key has no canonical address (a control character, "
                   "or \"..\" above its bucket)";
        return SCREEN_KEY_REFUSED;
    }
    for (size_t i = 0; i < cfg->nroutes && out->route == NULL; i++) {
        const struct cfg_route *r = &cfg->routes[i];
        if (r->upstream_idx == s->upstream && route_applies(r, del) &&
            tmpl_match(&r->path, p.p, p.len, caps)) {
            out->route = r;
        }
    }
    if (out->route == NULL) {
        out->why = "a key matches no route (unmatched = reject)";
        return cfg->proxy.unmatched_reject ? SCREEN_KEY_REFUSED
                                           : SCREEN_KEY_UNFENCED;
    }
    if (out->route->mode == TM_MODE_OFF) {
        return SCREEN_KEY_UNFENCED;
    }
    /* The resource exactly as a DELETE of the key would have it. */
    if (name_resource(&cfg->proxy, h, out->route, caps, one) != SCREEN_FENCE) {
        out->why = "a key's resource name is too long, or the resource "
                   "header is missing or malformed";
        return SCREEN_KEY_REFUSED;
    }
    memcpy(out->resource, one->resource, one->rlen + 1);
    out->rlen = one->rlen;
    out->verify = one->verify;
    return SCREEN_KEY_FENCED;
}

/* ---- the resource of a route ------------------------------------------ */

/* Name the resource of a request on r: from the resource header or the
 * route's template. */
static enum screen_verdict
name_resource(const struct cfg_proxy *pc, const struct http_request *h,
              const struct cfg_route *r, struct tm_slice caps[TM_MAX_CAPTURES],
              struct screen *s)
{
    const char *why;
    int ri;

    s->verify = r->verify;
    s->tree = keeps_tree(r);
    if (!r->resource_from_header) {
        s->rlen =
            rtmpl_expand(&r->resource, caps, s->resource, sizeof(s->resource));
        if (s->rlen == 0) {
            return invalid(s, "the resource name is too long");
        }
        return SCREEN_FENCE;
    }
    ri = only_header(h, pc->resource_header);
    if (ri == -2) {
        return refuse(s, 400, "invalid", "more than one resource header",
                      false);
    }
    if (ri < 0) {
        snprintf(s->detail_buf, sizeof(s->detail_buf),
                 "the resource header is missing");
    } else if (!canon_name(h->headers[ri].value.p, h->headers[ri].value.len,
                           s->resource, sizeof(s->resource), &s->rlen, &why)) {
        snprintf(s->detail_buf, sizeof(s->detail_buf),
                 "the resource header: %s", why);
    }
    if (s->rlen == 0 && r->mode != TM_MODE_OFF) {
        return invalid(s, s->detail_buf);
    }
    return SCREEN_FENCE;
}

/* The checks of how the request is written, before any route. */
static enum screen_verdict
screen_head(const struct cfg_proxy *pc, const struct http_request *h,
            char *path_buf, struct screen *s)
{
    const char *why;

    if ((why = method_disguised(h)) != NULL) {
        return invalid(s, why);
    }
    s->pbuf = path_buf;
    if ((why = canonical_path(h, path_buf + S3_BUCKET_MAX + 1, &s->plain)) !=
        NULL) {
        snprintf(s->detail_buf, sizeof(s->detail_buf), "the request path: %s",
                 why);
        return invalid(s, s->detail_buf);
    }
    if (slice_eq(h->method, "TRACE")) {
        /* TRACE would echo what tidemark adds, credentials included. */
        return refuse(s, 405, "method", NULL, false);
    }
    if ((why = smuggled_header(pc, h)) != NULL) {
        return invalid(s, why);
    }
    s->token_idx = only_header(h, pc->token_header);
    if (s->token_idx == -2) {
        return invalid(s, "more than one token header");
    }
    return SCREEN_FENCE;
}

enum screen_verdict
screen_request(const struct tm_config *cfg, const struct http_request *h,
               char *path_buf, struct screen *s)
{
    const struct cfg_proxy *pc = &cfg->proxy;
    struct tm_slice caps[TM_MAX_CAPTURES];
    const struct cfg_route *r;
    size_t up;
    const char *why;

    memset(s, 0, offsetof(struct screen, resource));
    s->max_body = UINT64_MAX;
    s->token_idx = -1;
    s->resource[0] = '\0';
    s->rlen = 0;
    s->verify = TM_VERIFY_NONE;
    s->src[0] = '\0';
    s->src_len = 0;
    s->src_verify = TM_VERIFY_NONE;
    s->tree = s->src_tree = s->subtree = false;
    s->dest_raw.p = NULL;
    s->dest_raw.len = 0;
    s->batch = false;
    s->upstream = NO_UPSTREAM;
    s->addr_up = NO_UPSTREAM;
    if (screen_head(pc, h, path_buf, s) == SCREEN_REFUSE) {
        return SCREEN_REFUSE;
    }
    s->cpath = s->plain;
    r = match_route(cfg, h, s, caps);
    up = route_upstream(cfg, r);
    if (s->verdict == SCREEN_REFUSE || !use_address(cfg, h, up, s)) {
        return SCREEN_REFUSE;
    }
    if (up != NO_UPSTREAM && (why = s3_refusal(cfg, h, s->cpath, up)) != NULL) {
        s->route_name = r != NULL ? r->name : NULL;
        return invalid(s, why);
    }
    if (up != NO_UPSTREAM && upstream_fenced(cfg, TM_PROFILE_S3, up) &&
        s3_batch_delete(h->method, request_query(h))) {
        return s3_batch(pc, h, up, s);
    }
    /* Only a LOCK's Depth counts: other methods search no header. */
    s->subtree = dav_subtree_method(h->method, slice_eq(h->method, "LOCK")
                                                   ? depth_header(h)
                                                   : (struct tm_slice){0});
    if (dav_method(h->method) != DAV_NONE && dav_request(cfg, h, r, caps, s)) {
        return s->verdict;
    }
    if (r == NULL) {
        if (pc->unmatched_reject || up == NO_UPSTREAM) {
            return refuse(s, 404, "unmatched", "no route matches this request",
                          false);
        }
        s->mode = TM_MODE_OFF;
        s->upstream = up;
        s->verdict = SCREEN_PASS;
        return s3_upload(cfg, h, NULL, s);
    }
    if (!use_route(s, h, r, r->mode)) {
        return SCREEN_REFUSE;
    }
    s->verdict = name_resource(pc, h, r, caps, s);
    return s3_upload(cfg, h, r, s);
}
