/* canon.h: the one canonical form of a request path and of a resource
 * name, so that every way into a mark (route captures, the
 * Fencing-Resource header, the lock service, the marks API, eager fencing,
 * signatures) names a resource one way. Pure: no I/O, no globals, no
 * allocation. doc/guide.md, "Resource names", gives each rule and its reason.
 *
 * The canonical form is decoded text: segments of well-formed UTF-8
 * without control characters, ';', '+' or '/', none empty, "." or "..",
 * joined by '/'. Reading raw text into it: %XX escapes are decoded (hex
 * in either case); in each segment a ';' (raw or %3B) and everything
 * after it are dropped (a path parameter to Java servlet containers);
 * '+' (raw or %2B) reads as a space (S3 reads a '+' in a path as a space,
 * other backends as a plus: the two are one character here); empty and
 * "." segments are dropped and ".." removes the segment before it (RFC
 * 3986 5.2.4, after decoding, so "%2e%2E" counts); a trailing '/' is
 * dropped. Refused: a '%' without two hex digits, decoded bytes that are
 * not UTF-8 or are control characters (0x00-0x1f, 0x7f), ".." above the
 * root, a result that does not fit in out. Case is kept; no Unicode
 * normalization. */
#ifndef TM_CANON_H
#define TM_CANON_H

#include <stdbool.h>
#include <stddef.h>

/* Canonical form of a request path (raw, as sent, without the query).
 * Writes "/seg/seg" (no trailing slash except the root "/") into out
 * (NUL-terminated) and its length into *outlen. Returns false with a static
 * reason in *why when the path must be refused (400): besides the rules
 * above, a path that does not start with '/' and an encoded slash (%2F),
 * which backends read in different ways. The result is never longer than
 * raw, so outcap >= len + 1 always fits. */
bool canon_path(const char *raw, size_t len, char *out, size_t outcap,
                size_t *outlen, const char **why)
    __attribute__((warn_unused_result));

/* Canonical form of a resource name given as percent-encoded text (lock
 * and marks API path rest, Fencing-Resource header value, an expanded
 * resource template). Same rules as a path except that %2F decodes to '/'
 * (the name is ours, not a backend path) and there is no leading '/'.
 * An empty result is refused. */
bool canon_name(const char *raw, size_t len, char *out, size_t outcap,
                size_t *outlen, const char **why)
    __attribute__((warn_unused_result));

#endif
