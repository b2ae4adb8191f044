/* json.h: JSON string content appended to an evbuffer, by the rule of
 * policies/json.h (the control port's answers, the lock service's). */
#ifndef TM_JSON_BUF_H
#define TM_JSON_BUF_H

#include <stddef.h>

struct evbuffer;

/* Append s as the inside of a JSON string. Bytes that are not UTF-8
 * become U+FFFD, so the output is always valid JSON. */
void json_escape(struct evbuffer *out, const char *s, size_t len);

#endif
