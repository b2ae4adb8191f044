/* token.h: parsing fencing tokens from a header value, and the signed
 * form <fence>.<signature> (HMAC-SHA256). Pure: no I/O, no globals. */
#ifndef TM_TOKEN_H
#define TM_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "route.h"

enum token_status {
    TOKEN_OK = 0,
    TOKEN_MISSING,   /* no header */
    TOKEN_INVALID,   /* not 1..INT64_MAX in decimal digits */
    TOKEN_FORBIDDEN, /* signature wrong (forged or borrowed), or unsigned
                      * under verify = hmac */
    TOKEN_NO_KEY,    /* signed, but no key to check the signature with */
};

/* Parse a token value: decimal digits only, 1 to 9223372036854775807,
 * no sign, no spaces (the HTTP parser has already trimmed OWS).
 * Returns TOKEN_OK with *out set, or TOKEN_INVALID. */
enum token_status token_parse(const char *s, size_t len, int64_t *out);

/*
 * Signed tokens. The signature is HMAC-SHA256 under the key over the
 * message  resource "\n" fence  (the resource name's bytes, one LF, the
 * fence in decimal without leading zeros), encoded as base64url without
 * padding: always TOKEN_SIG_LEN characters. A signed token is
 * <fence> "." <signature>, the fence without leading zeros, at most
 * TOKEN_SIGNED_MAX bytes.
 */
#define TOKEN_SIG_LEN 43
#define TOKEN_SIGNED_MAX (19 + 1 + TOKEN_SIG_LEN)
#define TOKEN_KEY_MIN 16
/* Longest resource name a token can be signed for. */
#define TOKEN_RES_MAX 4096

/* Write the signed token for (res, fence >= 1) into out (cap >
 * TOKEN_SIGNED_MAX), NUL-terminated. Returns its length, 0 when the
 * HMAC cannot be computed. */
size_t token_sign(const unsigned char *key, size_t keylen, const char *res,
                  size_t rlen, int64_t fence, char *out, size_t cap)
    __attribute__((warn_unused_result));

/* Parse and check a token value for resource res under a route's verify
 * rule: the one reader of tokens, for the data path and the lock service
 * alike. key may be NULL (no [tokens] key_file). A token is read
 * strictly: a signature part is never ignored.
 *  - "<fence>.<43 base64url chars>" is TOKEN_OK only when the signature
 *    is the one for (res, fence) under key (compared in constant time);
 *    else TOKEN_FORBIDDEN (forged, or signed for another resource). With
 *    no key it cannot be checked: TOKEN_NO_KEY under TM_VERIFY_NONE
 *    (TOKEN_FORBIDDEN under TM_VERIFY_HMAC, where nothing verifies).
 *  - A bare "<fence>" is TOKEN_OK under TM_VERIFY_NONE, TOKEN_FORBIDDEN
 *    (unsigned) under TM_VERIFY_HMAC.
 * Malformed values are TOKEN_INVALID. TOKEN_OK sets *fence; no other
 * status touches it. */
enum token_status token_check(enum tm_verify verify, const unsigned char *key,
                              size_t keylen, const char *res, size_t rlen,
                              const char *s, size_t len, int64_t *fence)
    __attribute__((warn_unused_result));

#endif
