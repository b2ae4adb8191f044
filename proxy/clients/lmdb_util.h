/* lmdb_util.h: pieces shared by the LMDB mark store and the LMDB lock
 * backend: the key of a name, big-endian integers, creating and syncing
 * the file's directory. */
#ifndef TM_LMDB_UTIL_H
#define TM_LMDB_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <lmdb.h>
#include <openssl/sha.h>

#define LMDB_DIGEST_PREFIX "\0sha256:"
#define LMDB_DIGEST_PREFIX_LEN 8
#define LMDB_DIGEST_KEY_LEN (LMDB_DIGEST_PREFIX_LEN + SHA256_DIGEST_LENGTH)

/* The key a name is stored under: its bytes, except for names LMDB
 * cannot store as a key or that could be mistaken for a digest key
 * (empty, longer than maxkey, starting with NUL): those are stored under
 * "\0sha256:" and the name's SHA-256. buf holds LMDB_DIGEST_KEY_LEN
 * bytes and must outlive key. */
void lmdb_make_key(size_t maxkey, const char *name, size_t len,
                   unsigned char *buf, MDB_val *key);

void lmdb_put_be64(unsigned char *p, int64_t v);
int64_t lmdb_get_be64(const unsigned char *p);

/* mkdir -p of path's directory. false with errno set. */
bool lmdb_make_parents(const char *path) __attribute__((warn_unused_result));

/* fsync the directory holding path, so a newly created file survives a
 * crash; filesystems that cannot sync a directory count as success.
 * false with errno set. */
bool lmdb_sync_parent(const char *path) __attribute__((warn_unused_result));

/* Create or open the LMDB file at path (creating its directory) so that
 * commits reach the disk (no NOSYNC, NOMETASYNC or WRITEMAP; MDB_NOTLS),
 * clear readers a crashed process left (how many in *stale_readers), sync the
 * file and its directory, and open the unnamed database into *dbi. On failure
 * *env may be set (the caller closes it) and err says why, prefixed with who.
 */
bool lmdb_open_durable(const char *who, const char *path, int64_t map_size,
                       MDB_env **env, MDB_dbi *dbi, int *stale_readers,
                       char *err, size_t errlen)
    __attribute__((warn_unused_result));

#endif
