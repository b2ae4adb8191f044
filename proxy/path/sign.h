/* sign.h: signing a request head as the upstream gets it (sign =
 * aws-sigv4): the headers the signature needs, written after the rest of
 * the head, from the upstream's credentials. */
#ifndef TM_SIGN_H
#define TM_SIGN_H

#include <stdbool.h>

#include "../../policies/slice.h"

struct evbuffer;
struct cfg_upstream;
struct http_header;
struct request;
struct up_pool;
struct problem;

/* Whether the client's field f of rq goes to u: the caller's rule
 * (rewrite_forwards), so that what is signed is what is forwarded. */
typedef bool (*sign_forwards_fn)(const struct request *rq,
                                 const struct cfg_upstream *u,
                                 const struct http_header *f);

/* Whether a client header named name is dropped because u signs: the
 * client's Authorization and the x-amz-date, x-amz-content-sha256 and
 * x-amz-security-token the signer sets itself, in any spelling. */
bool sign_replaces(const struct cfg_upstream *u, struct tm_slice name);

/* Whether requests to pool can go: it does not sign, or it has a whole
 * unexpired set of credentials now. When not, why (a constant) says so
 * for a 503's detail; nothing may be forwarded to it. */
bool sign_ready(const struct up_pool *pool, const char **why);

/* The 503 for a request sign_ready refused (why), into *p. */
void sign_problem(struct problem *p, const char *why);

/* Write x-amz-date, x-amz-content-sha256, x-amz-security-token (with a
 * session token) and Authorization for rq as u gets it: target is the
 * path and query forwarded, host the Host forwarded. The signed headers
 * are Host, Content-Type, Content-MD5 and every x-amz-* header
 * forwarded (by forwards); the payload is UNSIGNED-PAYLOAD unless the client
 * sent a payload hash (64 hex digits) or a STREAMING-* marker, which is kept.
 * A request that cannot be signed (too many headers or parameters) is
 * forwarded without Authorization, for the upstream to refuse, and
 * logged. */
void sign_request(struct evbuffer *out, const struct request *rq,
                  const struct cfg_upstream *u, struct tm_slice target,
                  struct tm_slice host, sign_forwards_fn forwards);

#endif
