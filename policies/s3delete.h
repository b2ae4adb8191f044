/* s3delete.h: the body of an S3 multi-object delete (DeleteObjects,
 * POST /<bucket>?delete): the keys it deletes, read as an S3 server reads
 * them. Pure: no I/O, no globals, no allocation. */
#ifndef TM_S3DELETE_H
#define TM_S3DELETE_H

#include <stdbool.h>
#include <stddef.h>

/* The most Object elements S3 takes in one request. */
#define S3_DELETE_MAX_OBJECTS 1000

/* Called with each key in document order: decoded, NUL-terminated, 1 to
 * S3_KEY_MAX bytes of well-formed UTF-8. false stops the parse (which
 * then fails with the why the callback left, or a generic one). */
typedef bool (*s3_delete_key_cb)(void *arg, const char *key, size_t len);

/* Read a DeleteObjects body (len bytes): an optional UTF-8 BOM and XML
 * declaration (version 1.0, encoding UTF-8 if named), then
 * <Delete attributes> holding, between whitespace, at most one
 * <Quiet>, and 1 to S3_DELETE_MAX_OBJECTS <Object> elements, each with
 * exactly one <Key> and at most one of <VersionId>, <ETag>,
 * <LastModifiedTime>, <Size>. Text is XML's: the predefined and numeric
 * character references decoded. Refused, so that no server can read a
 * key tidemark did not: a comment, CDATA, a processing instruction or
 * any declaration (DOCTYPE, ENTITY), any other element, a namespace
 * prefix, attributes below <Delete>, a raw CR or control character or
 * malformed UTF-8 in text, an empty key or one over S3_KEY_MAX bytes,
 * anything after </Delete> but whitespace. cb (NULL: none) gets each
 * key; *nkeys the number of Object elements. false with *why (static
 * text) when the body is refused. */
bool s3_delete_parse(const char *body, size_t len, s3_delete_key_cb cb,
                     void *arg, size_t *nkeys, const char **why)
    __attribute__((warn_unused_result));

#endif
