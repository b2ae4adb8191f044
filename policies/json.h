/* json.h: JSON string content (RFC 8259) from arbitrary bytes: quotes,
 * backslashes, control bytes, DEL, C1 controls and U+2028/U+2029
 * escaped, bytes that are not UTF-8 written as U+FFFD, so the output is
 * always valid JSON and one line to any reader. Pure. */
#ifndef TM_JSON_H
#define TM_JSON_H

#include <stddef.h>

/* How JSON string content writes the byte or sequence at s (len >= 1
 * bytes left): *take bytes of input, as themselves (NULL) or as the
 * escape returned (in esc, or a constant). The one rule of every JSON
 * writer here. */
const char *json_piece(const char *s, size_t len, size_t *take, char esc[8]);

/* Append the NUL-terminated s to buf at *n as JSON string content,
 * leaving one byte of cap free; a piece that does not fit is left out
 * whole, and so is everything after it. *n moves past what was
 * written; no NUL is written. */
void json_escape_into(char *buf, size_t cap, size_t *n, const char *s);

#endif
