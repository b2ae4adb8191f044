/* profile.h: what a request writes besides its own path, as the route's
 * protocol reads it (profile = http | webdav | s3): WebDAV's Destination,
 * S3's keys named in a body. Pure: no I/O, no globals. */
#ifndef TM_PROFILE_H
#define TM_PROFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "route.h"
#include "slice.h"

enum tm_profile {
    TM_PROFILE_HTTP = 0, /* a method writes its own path, nothing else */
    TM_PROFILE_WEBDAV,   /* RFC 4918: COPY and MOVE write a Destination */
    TM_PROFILE_S3,       /* S3's REST API: some POSTs name keys in a body */
};

/* The WebDAV methods that write their Destination. */
enum dav_copymove {
    DAV_NONE = 0,
    DAV_COPY, /* writes the Destination; reads its own path */
    DAV_MOVE, /* writes the Destination and removes its own path */
};

/* The longest Destination path tidemark canonicalizes, bytes. */
#define DAV_DEST_MAX 4096

/* DAV_COPY or DAV_MOVE for those methods (case-sensitive, as RFC 9110
 * says), else DAV_NONE. */
enum dav_copymove dav_method(struct tm_slice method);

/* A collection's subtree mark: the highest mark of any resource below
 * it, kept under the collection's name followed by DAV_BELOW, which no
 * canonical name can spell (a canonical name has no ';'). */
#define DAV_BELOW ";below"
#define DAV_BELOW_LEN (sizeof(DAV_BELOW) - 1)

/* Whether a WebDAV method with this Depth header (p NULL: none) writes
 * every member below its resource, and its Destination's: DELETE, MOVE
 * and COPY always (a Destination's members are replaced, whatever the
 * Depth), LOCK unless Depth is 0 (infinity is LOCK's default). */
bool dav_subtree_method(struct tm_slice method, struct tm_slice depth);

/* The subtree mark's name of collection res (len bytes): res and
 * DAV_BELOW into out (cap bytes, NUL-terminated). Its length, or 0 when
 * it does not fit. */
size_t dav_below_name(const char *res, size_t len, char *out, size_t cap);

/* The length of the name of the collection that holds res (len bytes):
 * res up to its last '/' (trailing empty segments skipped), 0 when res
 * has no '/' before a non-empty segment. "dav/a/b" is in "dav/a", which
 * is in "dav", which is in none. */
size_t dav_parent_len(const char *res, size_t len);

/* Whether method is one of the profile's write methods, which a route
 * with that profile applies to whatever its methods key says: webdav
 * PUT POST PATCH DELETE MKCOL COPY MOVE PROPPATCH LOCK; s3 PUT POST
 * DELETE; http none. */
bool profile_write_method(enum tm_profile p, struct tm_slice method);

/* Parse a WebDAV Destination header value (RFC 4918 10.3): an
 * absolute-URI with scheme http or https, or a path-absolute, each with
 * an optional query; a fragment, userinfo, a network-path ("//host"),
 * an empty value or a byte outside 0x21-0x7e is refused. An absolute
 * URI's authority must name the request's own authority (its Host, or
 * the authority of an absolute-form target): hosts compared without
 * case, a missing or empty port standing for the Destination scheme's
 * default (80, 443) on both sides. The path (without the query; empty
 * after an authority means "/") goes through canon_path into out
 * (outcap bytes, NUL-terminated, length in *outlen). *raw is the
 * path-and-query as written, a slice of value, to forward. Returns
 * false with a static reason in *why. */
bool dav_destination(struct tm_slice value, struct tm_slice authority,
                     char *out, size_t outcap, size_t *outlen,
                     struct tm_slice *raw, const char **why)
    __attribute__((warn_unused_result));

/* Whether the query (the target after '?', without it) has a parameter
 * called name: parameters split on '&' and ';', names percent-decoded
 * ('+' as a space) and compared without case, with or without a value,
 * as any backend might read them. */
bool query_has_param(struct tm_slice query, const char *name);

/* How many parameters of the query are called name (read as
 * query_has_param reads names); *value is the raw value of the first
 * (empty without '='; p NULL when there is none). */
size_t query_param(struct tm_slice query, const char *name,
                   struct tm_slice *value);

/* A raw query value percent-decoded ('+' as a space) into out (cap
 * bytes, no NUL added). false on a '%' without two hex digits or when
 * it does not fit. */
bool query_value(struct tm_slice raw, char *out, size_t cap, size_t *outlen)
    __attribute__((warn_unused_result));

/* Whether a Content-Type value is multipart/form-data (case-insensitive,
 * parameters ignored): an HTML form upload, whose key is in the form. */
bool media_is_form(struct tm_slice content_type);

/* Why an S3 request writes keys that its path does not name, or NULL:
 * a multipart/form-data POST (browser-form upload: the key is a form
 * field), or a rename (x-amz-rename-source: the source key is removed).
 * form and rename say whether the request carries such a Content-Type
 * and such a header. (A multi-object delete names its keys in its body:
 * s3_batch_delete.) */
const char *s3_elsewhere(struct tm_slice method, struct tm_slice query,
                         bool form, bool rename);

/* Whether an S3 request is a multi-object delete: a POST with a "delete"
 * parameter (however spelled: query_param), its keys in the XML body
 * (s3delete.h). */
bool s3_batch_delete(struct tm_slice method, struct tm_slice query);

/* Whether path lies above what t matches: path's segments (a trailing
 * empty one dropped) are a proper prefix of the segments of some path t
 * matches. "/" lies above every template; "/bucket" above
 * "/bucket/{key*}" and "/{bucket}/{key*}", not above "/other/{key*}";
 * a path that reaches into a {name*} capture is matched, not above. */
bool tmpl_above(const struct tm_tmpl *t, const char *path, size_t len);

#endif
