/* screen.h: the checks a request head passes before any token is read:
 * how it is spelled, which route takes it, which resources it writes.
 * Pure: reads a configuration and a parsed head, does no I/O. */
#ifndef TM_SCREEN_H
#define TM_SCREEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cfg_model.h"
#include "http_parse.h"
#include "route.h"
#include "s3name.h"
#include "slice.h"

/* Bytes screen_request's path buffer needs beyond the request path's
 * length: the canonical path, and before it room for "/<bucket>" when
 * an S3 server reads the bucket from the Host. */
#define SCREEN_PATH_EXTRA (S3_BUCKET_MAX + 2)

/* What a request to an upstream that fenced s3 routes use does with a
 * multipart upload. */
enum screen_upload {
    SCREEN_UPLOAD_NONE = 0,
    SCREEN_UPLOAD_CREATE,   /* POST ?uploads: its answer names the upload id */
    SCREEN_UPLOAD_PART,     /* carries an uploadId: a part, the completion or
                             * the abort of that upload */
    SCREEN_UPLOAD_UNFENCED, /* carries an uploadId on a route that fences
                             * nothing: must not be a fenced key's upload */
};

enum screen_verdict {
    SCREEN_FENCE = 0, /* a route takes it: decide on its token */
    SCREEN_PASS,      /* no route takes it: forwarded unfenced */
    SCREEN_REFUSE,    /* answered locally: status, reason, detail */
};

/* What screen_request found. The slices point into the head and the
 * path buffer the caller gave. */
struct screen {
    enum screen_verdict verdict;
    /* SCREEN_REFUSE */
    int status;         /* 400, 404, 405 or 413 */
    const char *reason; /* one word for the log: invalid, method, ... */
    const char *detail; /* NULL, static text or detail_buf */
    bool invalid;       /* counted as an invalid token decision */
    bool close;         /* the connection closes after the answer */
    char detail_buf[160];
    /* The route (NULL: unmatched) and its name, set once known, also on
     * a refusal that follows. */
    const struct cfg_route *route;
    const char *route_name;
    enum tm_mode mode;
    size_t upstream;   /* index into cfg->upstreams (not on a refusal) */
    uint64_t max_body; /* the route's limit; UINT64_MAX: none */
    int token_idx;     /* index of the token header, or -1 */
    /* The canonical path as the route's upstream executes it: on an
     * upstream with fencing s3 routes that gets the client's Host,
     * "/<bucket>" + the path when the Host names the bucket; "*" for
     * OPTIONS *. plain is the canonical path as sent; addr_up the
     * upstream cpath was read for; pbuf the caller's path buffer. */
    struct tm_slice cpath;
    struct tm_slice plain;
    size_t addr_up;
    char *pbuf;
    /* What the request does with an upload, and the raw value of its
     * one uploadId parameter (SCREEN_UPLOAD_PART, _UNFENCED). */
    enum screen_upload upload;
    struct tm_slice upload_id;
    /* What a fenced request writes: resource (rlen 0: nothing, on an
     * off route with resource = header), and for a WebDAV MOVE or COPY
     * fenced at its Destination also src, the source it writes (src_len
     * 0: none). Each is checked with its own route's verify. */
    char resource[TM_RESOURCE_MAX + 1];
    size_t rlen;
    enum tm_verify verify;
    char src[TM_RESOURCE_MAX + 1];
    size_t src_len;
    enum tm_verify src_verify;
    /* Subtree marks (a webdav route with subtree = yes): tree and
     * src_tree say that resource's and src's collections keep the
     * highest mark below them, raised with each write; subtree, that
     * the request writes every member below resource and src (DELETE,
     * MOVE, COPY, LOCK unless Depth: 0), so its token is checked
     * against their subtree marks too. */
    bool tree;
    bool src_tree;
    bool subtree;
    /* The Destination's path and query as the client wrote it, to be
     * forwarded under the upstream's authority; p NULL: forward the
     * header as it is. */
    struct tm_slice dest_raw;
    /* An S3 multi-object delete on an upstream with fenced s3 routes:
     * its body (Content-Length bytes, at most multi_delete_max) names the
     * keys, each fenced as a DELETE of that key (screen_batch_key);
     * cpath is "/<bucket>". route is NULL until the keys are known. */
    bool batch;
};

/* How a key of a multi-object delete is fenced. */
enum screen_key {
    SCREEN_KEY_FENCED = 0, /* by route, with resource and verify */
    SCREEN_KEY_UNFENCED,   /* no route that fences it: a DELETE of it
                            * would be forwarded unfenced */
    SCREEN_KEY_REFUSED,    /* why says why (a DELETE of it is refused) */
};

struct screen_keyres {
    const struct cfg_route *route;
    char resource[TM_RESOURCE_MAX + 1];
    size_t rlen;
    enum tm_verify verify;
    const char *why; /* SCREEN_KEY_REFUSED: static text */
};

/* Screen the request head h under cfg. path_buf (h->path.len +
 * SCREEN_PATH_EXTRA bytes) receives the canonical path. Refuses, in this
 * order: a disguised method (lower case, override header or _method
 * parameter), a path that has no canonical form, TRACE, a fencing
 * header named in Connection, two token headers, a Host from which an
 * S3 upstream that gets it may read a bucket but which one cannot be
 * told (s3name.h), an S3 request that writes keys its
 * path does not name (profile = s3), a COPY or MOVE whose Destination
 * is unusable (profile = webdav), no route under unmatched = reject or
 * no upstream, a Content-Length over the route's max_body, two or a
 * bad resource header, a resource name too long. Returns s->verdict. */
enum screen_verdict screen_request(const struct tm_config *cfg,
                                   const struct http_request *h, char *path_buf,
                                   struct screen *s);

/* The key (klen bytes, decoded) of the multi-object delete s screened
 * (s->batch) as a DELETE of it would be fenced: at its path-style
 * address "/<bucket>/<key>" (s3name.h: s3_key_address), by the first
 * route of the request's upstream that takes a DELETE there, with that
 * route's resource. */
enum screen_key screen_batch_key(const struct tm_config *cfg,
                                 const struct http_request *h,
                                 const struct screen *s, const char *key,
                                 size_t klen, struct screen_keyres *out);

/* The Host upstream u gets for the request h: the client's with host =
 * preserve (when it sent one), else the upstream's own. */
struct tm_slice screen_upstream_host(const struct cfg_upstream *u,
                                     const struct http_request *h);

/* The first route for method on path (a canonical path, so captures are
 * canonical), or NULL. A route applies to the methods it lists and, when
 * it fences (mode is not off), to its profile's write methods. */
const struct cfg_route *screen_route(const struct tm_config *cfg,
                                     struct tm_slice method,
                                     struct tm_slice path,
                                     struct tm_slice caps[TM_MAX_CAPTURES]);

/* Whether some route of cfg keeps subtree marks (profile = webdav,
 * fenced, subtree = yes). */
bool screen_keeps_trees(const struct tm_config *cfg);

#endif
