/* uploads.c: S3 upload ids bound to the resource their create was fenced
 * as, in a ring of UPLOADS_MAX bindings: a new one replaces the oldest.
 * Looked up by a scan: only requests with an uploadId do, and each
 * carries a part of at least 5 MiB or completes an upload. */
#include "uploads.h"

#include <stdlib.h>
#include <string.h>

#include "../../conf/cfg.h"
#include "../../policies/http_parse.h"
#include "../../policies/s3name.h"
#include "../../policies/screen.h"

struct binding {
    char *key; /* upstream name, '\n', upload id; NULL: free */
    size_t klen;
    char *res; /* the resource, NUL-terminated */
    int64_t expires_ms;
};

struct uploads {
    struct binding b[UPLOADS_MAX];
    size_t next; /* the oldest: replaced next */
};

struct uploads *
uploads_new(void)
{
    return calloc(1, sizeof(struct uploads));
}

static void
drop(struct binding *b)
{
    free(b->key);
    free(b->res);
    memset(b, 0, sizeof(*b));
}

void
uploads_free(struct uploads *u)
{
    if (u == NULL) {
        return;
    }
    for (size_t i = 0; i < UPLOADS_MAX; i++) {
        drop(&u->b[i]);
    }
    free(u);
}

/* Whether b is the binding of id on upstream up. */
static bool
is_of(const struct binding *b, const char *up, size_t ulen, const char *id,
      size_t id_len)
{
    return b->key != NULL && b->klen == ulen + 1 + id_len &&
           memcmp(b->key, up, ulen) == 0 && b->key[ulen] == '\n' &&
           memcmp(b->key + ulen + 1, id, id_len) == 0;
}

/* The binding of id on up, expired or not; NULL when there is none. */
static struct binding *
lookup(const struct uploads *u, const char *up, const char *id, size_t id_len)
{
    size_t ulen = strlen(up);

    for (size_t i = 0; i < UPLOADS_MAX; i++) {
        if (is_of(&u->b[i], up, ulen, id, id_len)) {
            return (struct binding *)&u->b[i];
        }
    }
    return NULL;
}

const char *
uploads_find(const struct uploads *u, const char *up, const char *id,
             size_t id_len, int64_t now_ms)
{
    const struct binding *b = lookup(u, up, id, id_len);

    return b != NULL && b->expires_ms > now_ms ? b->res : NULL;
}

/* Bind id on up to res, in place of an earlier binding of id or of the
 * oldest. false when out of memory. */
static bool
bind(struct uploads *u, const char *up, const char *id, size_t id_len,
     const char *res, int64_t now_ms)
{
    struct binding *b = lookup(u, up, id, id_len);
    size_t ulen = strlen(up);
    char *key = malloc(ulen + 1 + id_len), *r = strdup(res);

    if (key == NULL || r == NULL) {
        free(key);
        free(r);
        return false;
    }
    if (b == NULL) {
        b = &u->b[u->next];
        u->next = (u->next + 1) % UPLOADS_MAX;
    }
    drop(b);
    memcpy(key, up, ulen);
    key[ulen] = '\n';
    memcpy(key + ulen + 1, id, id_len);
    b->key = key;
    b->klen = ulen + 1 + id_len;
    b->res = r;
    b->expires_ms = now_ms + UPLOADS_TTL_MS;
    return true;
}

/* Whether addr (an upload's "/<bucket>/<key>", alen bytes) is where s
 * was fenced: its address, or, on an upstream that gets its own Host
 * (host = upstream) which names a bucket (bucket_endpoints), that bucket
 * and then its address. */
static bool
fenced_there(const struct cfg_upstream *cu, const struct screen *s,
             const char *addr, size_t alen)
{
    struct tm_slice host = {cu->host_header, strlen(cu->host_header)}, b;
    const char *why = NULL;

    if (alen == s->cpath.len && memcmp(addr, s->cpath.p, alen) == 0) {
        return true;
    }
    if (cu->host_preserve ||
        s3_host_read(host, cu->bucket_endpoints, &b, &why) != S3_HOST_BUCKET) {
        return false;
    }
    return alen == 1 + b.len + s->cpath.len &&
           memcmp(addr + 1, b.p, b.len) == 0 &&
           memcmp(addr + 1 + b.len, s->cpath.p, s->cpath.len) == 0;
}

bool
uploads_answer(struct uploads *u, const struct cfg_upstream *cu,
               const struct screen *s, const char *body, size_t len,
               bool chunked, int64_t now_ms, const char **why)
{
    char data[S3_ANSWER_MAX];
    struct s3_upload upl;
    char addr[3 * (S3_BUCKET_MAX + S3_KEY_MAX) + 8];
    size_t alen = 0;

    if (chunked && !http_chunked_body(body, len, data, sizeof(data), &len)) {
        *why = "a malformed or too long chunked answer";
        return false;
    }
    if (!s3_upload_parse(chunked ? data : body, len, &upl)) {
        *why = "an answer without one Bucket, Key and UploadId";
        return false;
    }
    if (!s3_upload_address(&upl, addr, sizeof(addr), &alen) ||
        !fenced_there(cu, s, addr, alen)) {
        *why = "an answer naming another key than the request";
        return false;
    }
    if (!bind(u, cu->name, upl.id, upl.id_len, s->resource, now_ms)) {
        *why = "out of memory";
        return false;
    }
    return true;
}
