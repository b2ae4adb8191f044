/* uploads.h: the S3 multipart uploads created through this sidecar on
 * fenced s3 routes, each upload id bound to the resource its create was
 * fenced as, so that its parts and its completion are fenced by that
 * resource and by no other. A bounded table in memory: UPLOADS_MAX
 * bindings, the oldest replaced first, each good for UPLOADS_TTL_MS. */
#ifndef TM_UPLOADS_H
#define TM_UPLOADS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UPLOADS_MAX 8192
#define UPLOADS_TTL_MS (7LL * 24 * 3600 * 1000) /* seven days */

struct uploads;
struct screen;
struct cfg_upstream;

/* An empty table; NULL when out of memory. */
struct uploads *uploads_new(void);
void uploads_free(struct uploads *u);

/* A CreateMultipartUpload on a fenced s3 route of upstream cu was
 * answered 200 with body (len bytes; chunked: still in its chunked
 * framing). Bind its upload id to s->resource when the answer parses
 * (s3name.h: s3_upload_parse) and names the key the request addressed
 * (s->cpath, after the bucket an upstream's own Host names); otherwise
 * bind nothing. false, with *why, when nothing was bound. */
bool uploads_answer(struct uploads *u, const struct cfg_upstream *cu,
                    const struct screen *s, const char *body, size_t len,
                    bool chunked, int64_t now_ms, const char **why);

/* The resource upload id (id_len bytes, decoded) of upstream up is bound
 * to, NUL-terminated; NULL when unknown or expired. */
const char *uploads_find(const struct uploads *u, const char *up,
                         const char *id, size_t id_len, int64_t now_ms);

#endif
