/* route.h: path templates, resource templates and route matching.
 * Pure functions: no I/O, no globals. */
#ifndef TM_ROUTE_H
#define TM_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "slice.h"

#define TM_MAX_CAPTURES 8
#define TM_RESOURCE_MAX 512 /* longest resource name, bytes */

enum tm_mode {
    TM_MODE_CORRECTNESS = 0,
    TM_MODE_EFFICIENCY,
    TM_MODE_OFF,
};

enum tm_verify {
    TM_VERIFY_NONE = 0,
    TM_VERIFY_HMAC,
};

#define TM_METHOD_MAX 32 /* longest method token a route names */

/* One method a route names: an RFC 9110 token, upper case. */
struct tm_method {
    size_t len;
    char name[TM_METHOD_MAX + 1];
};

/* The methods a route applies to, as the backend sees them. n == 0:
 * every method. */
struct tm_methods {
    struct tm_method *v;
    size_t n;
};

/* One piece of a compiled template: a literal, or a capture. */
struct tm_tmpl_seg {
    char *lit; /* literal text (path: one whole segment), or NULL */
    size_t lit_len;
    int capture; /* index into the path template's names, or -1 */
    bool rest;   /* {name*}: matches the rest of the path */
};

/* A compiled path template, "/v1/documents/{doc}" or "/files/{key*}". */
struct tm_tmpl {
    struct tm_tmpl_seg *segs;
    size_t nsegs;
    char *names[TM_MAX_CAPTURES];
    size_t nnames;
};

/* A compiled resource template, "documents/{doc}": literal text and
 * references to the path template's captures. */
struct tm_rtmpl {
    struct tm_tmpl_seg *segs;
    size_t nsegs;
};

/* Compile a path template. It must start with '/' and be in canonical
 * form (canon.h: requests are matched in that form, so "/a/", "/a//b"
 * or "/a%20b" could never match as written); "{name}" stands for a whole
 * segment, "{name*}" for the rest of the path and only last; names are
 * [A-Za-z0-9_]+ and unique. Returns false with a message in err. */
bool tmpl_compile(struct tm_tmpl *t, const char *src, char *err, size_t errlen)
    __attribute__((warn_unused_result));
void tmpl_free(struct tm_tmpl *t);

/* Match a request path (without the query; the daemon passes the
 * canonical path, canon_path) against t. On a match, caps[i] is the text
 * of capture i (slices into path). A "{name}" capture matches one
 * non-empty segment; "{name*}" one or more characters. */
bool tmpl_match(const struct tm_tmpl *t, const char *path, size_t len,
                struct tm_slice caps[TM_MAX_CAPTURES]);

/* Compile a resource template against the path template whose captures
 * it may name. Unknown names, unbalanced braces, empty text, text not in
 * canonical form (canon_name: "a//{x}", "{x}/", "a%20{x}"): false. The
 * expansion of a canonical template with canonical captures is a
 * canonical name. */
bool rtmpl_compile(struct tm_rtmpl *r, const char *src,
                   const struct tm_tmpl *path, char *err, size_t errlen)
    __attribute__((warn_unused_result));
void rtmpl_free(struct tm_rtmpl *r);

/* Write the resource name into out (NUL-terminated). Returns its length,
 * or 0 when it would not fit in outlen. */
size_t rtmpl_expand(const struct tm_rtmpl *r,
                    const struct tm_slice caps[TM_MAX_CAPTURES], char *out,
                    size_t outlen);

/* Parse a route's methods: RFC 9110 method tokens separated by spaces
 * or tabs, upper case only (a backend may run "put" as PUT, so a
 * lower-case method in the config is a mistake), or "*" alone for every
 * method. Returns false with a message in err. Allocates: methods_free. */
bool methods_parse(struct tm_methods *m, const char *src, char *err,
                   size_t errlen) __attribute__((warn_unused_result));
void methods_free(struct tm_methods *m);

/* Whether the request method name[0..len) is one of m (case-sensitive,
 * as RFC 9110 says; every method when m is empty). No allocation. */
bool methods_has(const struct tm_methods *m, const char *name, size_t len);

#endif
