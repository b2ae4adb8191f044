/* lmdb_util.c: pieces shared by the LMDB mark store and the LMDB lock
 * backend. */
#include "lmdb_util.h"

#include <errno.h>
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
