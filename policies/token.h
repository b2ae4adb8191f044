/* token.h: parsing fencing tokens from a header value. Pure. */
#ifndef TM_TOKEN_H
#define TM_TOKEN_H

#include <stddef.h>
#include <stdint.h>

enum token_status {
    TOKEN_OK = 0,
    TOKEN_MISSING,   /* no header */
    TOKEN_INVALID,   /* not 1..INT64_MAX in decimal digits */
};

/* Parse a token value: decimal digits only, 1 to 9223372036854775807,
 * no sign, no spaces (the HTTP parser has already trimmed OWS).
 * Returns TOKEN_OK with *out set, or TOKEN_INVALID. */
enum token_status token_parse(const char *s, size_t len, int64_t *out);

#endif
