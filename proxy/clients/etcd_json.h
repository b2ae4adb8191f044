/* etcd_json.h: the encodings of etcd's v3 JSON gateway (base64 keys and
 * values, a prefix's range end, int64s as decimal strings). Pure: no I/O, so
 * that the reads of etcd's answers can be tested and fuzzed alone. */
#ifndef TM_ETCD_JSON_H
#define TM_ETCD_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* len bytes of data as a base64 JSON string (keys and values travel so);
 * NULL when out of memory. */
json_t *etcd_b64(const void *data, size_t len);

/* The key just after every key starting with prefix (etcd's range_end
 * for a prefix), base64; NULL when out of memory or prefix is empty. */
json_t *etcd_prefix_end(const char *prefix, size_t len);

/* Decode the base64 string s into out (cap bytes); the length, or -1. */
int etcd_unb64(const json_t *s, unsigned char *out, size_t cap);

/* The base64 string s decoded into a buffer sized from s's length
 * (malloc, the caller frees; a NUL after the *n bytes). NULL when s is
 * no base64 string or out of memory. */
unsigned char *etcd_unb64_dup(const json_t *s, size_t *n);

/* prefix, name and suffix as one key (malloc, the caller frees; *klen
 * bytes and a NUL), its size computed once from the three lengths. NULL
 * when out of memory. */
char *etcd_key_join(const char *prefix, size_t plen, const void *name,
                    size_t len, const char *suffix, size_t slen, size_t *klen);

/* Whether the base64 string s decodes to the klen bytes of key: decoded
 * into room sized from klen (a longer string is not key), so a key of
 * any length compares. */
bool etcd_key_is(const json_t *s, const void *key, size_t klen);

/* An int64 that the gateway sends as a decimal string (an optional '-',
 * then 1 to 19 digits, at most INT64_MAX, nothing else) or a number;
 * absent reads as 0 (proto3 leaves zero values out). false when
 * malformed. */
bool etcd_int(const json_t *obj, const char *key, int64_t *out)
    __attribute__((warn_unused_result));

/* A revision, read as etcd_int does, below INT64_MAX: the revision
 * after it is one too (watches start there). false when malformed or
 * INT64_MAX. */
bool etcd_rev(const json_t *obj, const char *key, int64_t *out)
    __attribute__((warn_unused_result));

/* A mark as the etcd store keeps it: 19 decimal digits, zero-padded so
 * that etcd's byte-wise VALUE compare orders marks as numbers, base64.
 * mark >= 0. NULL when out of memory. */
json_t *etcd_mark_json(int64_t mark);

/* The mark in kv's "value": base64 of exactly 19 decimal digits, at most
 * INT64_MAX (decoded into room for 24 bytes: a longer value is refused
 * before it is decoded). false otherwise. */
bool etcd_mark_read(const json_t *kv, int64_t *out)
    __attribute__((warn_unused_result));

/* The longest lease etcd grants, in seconds (its MaxLeaseTTL). */
#define ETCD_TTL_MAX INT64_C(9000000000)

/* A lease's TTL in seconds, read as etcd_int does, within
 * -ETCD_TTL_MAX..ETCD_TTL_MAX (-1: expired), so that it can be turned
 * into milliseconds without overflow. false when malformed or out of
 * that range. */
bool etcd_ttl(const json_t *obj, const char *key, int64_t *out)
    __attribute__((warn_unused_result));

#endif
