/* lmdb_util.c: pieces shared by the LMDB mark store and the LMDB lock
 * backend. */
#include "lmdb_util.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void
lmdb_make_key(size_t maxkey, const char *res, size_t len, unsigned char *buf,
              MDB_val *key)
{
    if (len == 0 || len > maxkey || res[0] == '\0') {
        memcpy(buf, LMDB_DIGEST_PREFIX, LMDB_DIGEST_PREFIX_LEN);
        SHA256((const unsigned char *)res, len, buf + LMDB_DIGEST_PREFIX_LEN);
        key->mv_data = buf;
        key->mv_size = LMDB_DIGEST_KEY_LEN;
    } else {
        key->mv_data = (void *)res;
        key->mv_size = len;
    }
}

void
lmdb_put_be64(unsigned char *p, int64_t v)
{
    uint64_t u = (uint64_t)v;
    for (int i = 7; i >= 0; i--) {
        p[i] = (unsigned char)(u & 0xff);
        u >>= 8;
    }
}

int64_t
lmdb_get_be64(const unsigned char *p)
{
    uint64_t u = 0;
    for (int i = 0; i < 8; i++) {
        u = (u << 8) | p[i];
    }
    return (int64_t)u;
}

/* Create the directories above path that are missing (mkdir -p of its
 * dirname). false with errno set on failure. */
bool
lmdb_make_parents(const char *path)
{
    char *dir = strdup(path);
    bool ok = true;

    if (dir == NULL) {
        return false;
    }
    for (char *p = dir + 1; *p != '\0'; p++) {
        if (*p != '/') {
            continue;
        }
        *p = '\0';
        if (mkdir(dir, 0750) != 0 && errno != EEXIST) {
            ok = false;
            break;
        }
        *p = '/';
    }
    free(dir);
    return ok;
}

/* fsync the directory holding path, so a newly created file survives a
 * crash. Filesystems that cannot sync a directory count as success. */
bool
lmdb_sync_parent(const char *path)
{
    char *dir = strdup(path);
    char *slash;
    int fd;
    bool ok = true;

    if (dir == NULL) {
        return false;
    }
    slash = strrchr(dir, '/');
    if (slash == NULL) {
        strcpy(dir, ".");
    } else if (slash == dir) {
        dir[1] = '\0';
    } else {
        *slash = '\0';
    }
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        ok = false;
    } else {
        if (fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP) {
            ok = false;
        }
        int saved = errno;
        close(fd);
        errno = saved;
    }
    free(dir);
    return ok;
}

bool
lmdb_open_durable(const char *who, const char *path, int64_t map_size,
                  MDB_env **env, MDB_dbi *dbi, int *stale_readers, char *err,
                  size_t errlen)
{
    MDB_txn *txn;
    int rc;

    *stale_readers = 0;
    if (!lmdb_make_parents(path)) {
        snprintf(err, errlen, "%s: cannot create the directory of %s: %s", who,
                 path, strerror(errno));
        return false;
    }
    rc = mdb_env_create(env);
    if (rc != 0) {
        *env = NULL;
        snprintf(err, errlen, "%s: lmdb: %s", who, mdb_strerror(rc));
        return false;
    }
    rc = mdb_env_set_mapsize(*env, (size_t)map_size);
    if (rc == 0) {
        /* MDB_NOTLS: a read transaction is tied to its handle, not the
         * thread. No NOSYNC, NOMETASYNC or WRITEMAP: commits must reach
         * the disk. */
        rc = mdb_env_open(*env, path, MDB_NOSUBDIR | MDB_NOTLS, 0640);
    }
    if (rc != 0) {
        snprintf(err, errlen, "%s: cannot open %s: %s", who, path,
                 mdb_strerror(rc));
        return false;
    }
    /* Reader slots left by a crashed process would pin old pages. */
    if (mdb_reader_check(*env, stale_readers) != 0) {
        *stale_readers = 0;
    }
    /* Start from a state that is on disk: the file's name (it may have
     * just been created) and whatever of it the page cache holds. */
    if (!lmdb_sync_parent(path)) {
        snprintf(err, errlen, "%s: cannot sync the directory of %s: %s", who,
                 path, strerror(errno));
        return false;
    }
    rc = mdb_env_sync(*env, 1);
    if (rc != 0) {
        snprintf(err, errlen, "%s: cannot sync %s: %s", who, path,
                 mdb_strerror(rc));
        return false;
    }
    rc = mdb_txn_begin(*env, NULL, 0, &txn);
    if (rc == 0) {
        rc = mdb_dbi_open(txn, NULL, 0, dbi);
        if (rc == 0) {
            rc = mdb_txn_commit(txn);
        } else {
            mdb_txn_abort(txn);
        }
    }
    if (rc != 0) {
        snprintf(err, errlen, "%s: cannot open the database in %s: %s", who,
                 path, mdb_strerror(rc));
        return false;
    }
    return true;
}
