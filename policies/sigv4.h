/* sigv4.h: AWS Signature Version 4 over a request as tidemark forwards
 * it (the canonical request, the string to sign, the signature and the
 * Authorization value), and the AWS shared-credentials file format.
 * Pure: no I/O, no globals; OpenSSL for SHA-256 and HMAC. */
#ifndef TM_SIGV4_H
#define TM_SIGV4_H

#include <stdbool.h>
#include <stddef.h>

/* One header to sign: its name in any case, its value as sent. */
struct sigv4_header {
    const char *name;
    size_t nlen;
    const char *value;
    size_t vlen;
};

/* What is signed. Every header in headers is signed (the caller picks
 * them: Host, x-amz-date, ...); a name given twice is signed as one
 * header whose values are joined by ",", in the order given. */
struct sigv4_request {
    const char *method;
    size_t mlen;
    const char *path; /* the path as sent, percent-encoded, no query */
    size_t plen;
    const char *query; /* after '?', as sent; may be empty */
    size_t qlen;
    const struct sigv4_header *headers;
    size_t nheaders;
    const char *payload_hash; /* hex SHA-256, or UNSIGNED-PAYLOAD */
    /* S3 (and the services that follow it) sign the path as it is sent,
     * its escapes normalized; every other service encodes it again. */
    bool s3;
};

struct sigv4_key {
    const char *key_id;
    const char *secret;
    const char *region;
    const char *service;
};

/* Most headers and query parameters one request may have signed. */
#define SIGV4_MAX_HEADERS 128
#define SIGV4_MAX_PARAMS 1024
/* An x-amz-date value: YYYYMMDD'T'HHMMSS'Z' (16 characters). */
#define SIGV4_DATE_LEN 16
/* The signature in hex. */
#define SIGV4_SIG_LEN 64

/* The canonical request (AWS's CanonicalRequest: method, URI, query,
 * headers, signed header names, payload hash, joined by LF), malloc'd
 * and NUL-terminated: the caller frees. NULL when out of memory, or
 * when the request has more than SIGV4_MAX_HEADERS headers or
 * SIGV4_MAX_PARAMS query parameters, a header name that is empty, or a
 * header value with a CR or LF. *signed_names (when not NULL) gets the
 * SignedHeaders list, malloc'd too. */
char *sigv4_canonical_request(const struct sigv4_request *rq,
                              char **signed_names);

/* The signature (SIGV4_SIG_LEN hex digits and a NUL into sig) of the
 * canonical request creq at date (an x-amz-date value) under key.
 * false when the date is malformed or a digest cannot be computed. */
bool sigv4_signature(const char *creq, const char *date,
                     const struct sigv4_key *key, char *sig)
    __attribute__((warn_unused_result));

/* Sign rq: the Authorization header's value into out (cap bytes),
 * NUL-terminated. Returns its length; 0 when rq cannot be signed (see
 * sigv4_canonical_request and sigv4_signature) or out is too small. */
size_t sigv4_authorization(const struct sigv4_request *rq, const char *date,
                           const struct sigv4_key *key, char *out, size_t cap);

/* The x-amz-date value for the time t (seconds since the epoch, UTC)
 * into out (at least SIGV4_DATE_LEN + 1 bytes). */
void sigv4_date(long long t, char *out);

/* Credentials from an AWS shared-credentials file. */
struct sigv4_creds {
    char *key_id;  /* aws_access_key_id */
    char *secret;  /* aws_secret_access_key */
    char *session; /* aws_session_token; NULL: none */
};

/* The longest credential value (a session token runs to about 2 KiB). */
#define SIGV4_CRED_MAX 4096

/* Whether v[0..n) can be a credential: 1 to SIGV4_CRED_MAX bytes of
 * printable ASCII without spaces (so it is safe in a header, and never
 * needs escaping). */
bool sigv4_cred_ok(const char *v, size_t n);

/* Read profile's credentials from text[0..len) in the AWS
 * shared-credentials format ([profile] sections of key = value lines,
 * comments from # or ; at a line's start). On success fills *out
 * (malloc'd strings: sigv4_creds_free) and returns NULL; else a static
 * message that never quotes the text. */
const char *sigv4_creds_parse(const char *text, size_t len, const char *profile,
                              struct sigv4_creds *out);

/* Wipe and free what sigv4_creds_parse filled in. */
void sigv4_creds_free(struct sigv4_creds *c);

#endif
