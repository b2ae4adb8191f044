/* utf8.h: well-formed UTF-8 (RFC 3629), the one checker for problem
 * bodies, JSON logs, lock names and canonical resource names. Pure. */
#ifndef TM_UTF8_H
#define TM_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* The length (1 to 4) of the well-formed UTF-8 sequence s starts with
 * (RFC 3629: no overlongs, surrogates or code points past U+10FFFF), or
 * 0 when it starts with none or len is 0. */
size_t utf8_seq(const char *s, size_t len);

/* Whether all of s is well-formed UTF-8. */
bool utf8_valid(const char *s, size_t len);

#endif
