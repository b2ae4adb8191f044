/* s3name.h: where an S3 server reads the bucket and the key of a request:
 * from the Host it gets (virtual-hosted addressing) or from the path, and
 * what a CreateMultipartUpload answer binds its upload id to. Pure: no
 * I/O, no globals, no allocation. */
#ifndef TM_S3NAME_H
#define TM_S3NAME_H

#include <stdbool.h>
#include <stddef.h>

#include "slice.h"

/* The longest bucket tidemark reads from a Host, bytes (a DNS name). */
#define S3_BUCKET_MAX 253
/* The longest upload id and key of a CreateMultipartUpload answer. */
#define S3_UPLOAD_ID_MAX 1024
#define S3_KEY_MAX 1024
/* The longest CreateMultipartUpload answer read, bytes. */
#define S3_ANSWER_MAX 16384

/* How an S3 server reads the Host it gets. */
enum s3_host {
    S3_HOST_PATH = 0, /* path-style: the bucket is the path's first segment */
    S3_HOST_BUCKET,   /* virtual-hosted: the bucket is named by the Host */
    S3_HOST_UNCLEAR,  /* servers differ, or it could be a CNAME bucket */
};

/* Whether list (the bucket_endpoints key: words separated by spaces,
 * each a lower-case DNS name whose labels may hold one '*' standing for
 * one or more characters of that label, the same after '=' (a name of
 * the server's own, path-style, with no bucket below it), or the word
 * "aws" for AWS's endpoint forms) is well formed; why says what is
 * not. */
bool s3_endpoints_valid(const char *list, const char **why);

/* Read host (a Host field value, port allowed) as an S3 server with the
 * endpoints list does: an IP literal or "localhost", or a Host that is
 * an endpoint or an "=name", is path-style; "<bucket>.<endpoint>" names the
 * bucket
 * (*bucket, a slice of host). Anything else could be a CNAME bucket (AWS
 * reads the whole Host as one), is read another way by another server
 * (upper-case letters, escapes, a trailing dot, an empty label) or
 * matches two endpoints with two buckets: S3_HOST_UNCLEAR with *why. */
enum s3_host s3_host_read(struct tm_slice host, const char *endpoints,
                          struct tm_slice *bucket, const char **why);

/* What a CreateMultipartUpload answer says: the upload id and where the
 * upload will land, decoded from XML. */
struct s3_upload {
    char id[S3_UPLOAD_ID_MAX + 1];
    size_t id_len;
    char bucket[S3_BUCKET_MAX + 1];
    size_t bucket_len;
    char key[S3_KEY_MAX + 1];
    size_t key_len;
};

/* Parse an InitiateMultipartUploadResult body (len bytes, at most
 * S3_ANSWER_MAX): exactly one Bucket, Key and UploadId element each,
 * text with XML's predefined and numeric character references, no
 * comment, CDATA or nested element in them, nothing over the bounds
 * above, an id of visible ASCII. false when any of that fails: the
 * answer binds nothing. */
bool s3_upload_parse(const char *body, size_t len, struct s3_upload *u)
    __attribute__((warn_unused_result));

/* Decode XML text t (XML's predefined and numeric character references;
 * no markup) into out (cap bytes, a NUL added after, so cap + 1 must
 * fit). false when it is empty, holds markup, a bad reference or a NUL,
 * or does not fit. */
bool s3_xml_text(struct tm_slice t, char *out, size_t cap, size_t *outlen)
    __attribute__((warn_unused_result));

/* The canonical path-style address "/<bucket>/<key>" (canon.h) of key
 * (klen bytes, at most S3_KEY_MAX) in bucket (raw bytes, no '/', at most
 * S3_BUCKET_MAX), every byte but unreserved ones and '/' percent-encoded
 * as an S3 client sends it, into out (outcap bytes, NUL-terminated).
 * false when it has no canonical form or leaves the bucket ("../"):
 * the key cannot be fenced by a path. */
bool s3_key_address(struct tm_slice bucket, const char *key, size_t klen,
                    char *out, size_t outcap, size_t *outlen)
    __attribute__((warn_unused_result));

/* The canonical path-style address "/<bucket>/<key>" (canon.h) of an
 * upload into out (outcap bytes, NUL-terminated). false when it has no
 * canonical form (the key cannot be fenced by a path). */
bool s3_upload_address(const struct s3_upload *u, char *out, size_t outcap,
                       size_t *outlen) __attribute__((warn_unused_result));

#endif
