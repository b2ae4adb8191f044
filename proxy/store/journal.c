/* journal.c: the embedded store's write-ahead journal: checksummed
 * records of (key, token) entries in a preallocated file, written in
 * order from its start, one fdatasync per group. */
#include "journal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../clients/lmdb_util.h"

/*
 * A record, all integers little-endian:
 *
 *   0  magic   "TMJ1"
 *   4  crc     CRC-32C of bytes 8 .. 24+len
 *   8  epoch   u64: the checkpoint this record follows
 *  16  len     u32: bytes of entries
 *  20  count   u32: entries
 *  24  entries count times: u16 key length, i64 token, the key
 *
 * Records follow each other from offset 0. A record is written only after
 * the one before it, so the first record that is torn (bad checksum), of
 * an older epoch (left over from before the last checkpoint), or never
 * written (zeros) ends the journal. Old records need no erasing: a
 * checkpoint moves the epoch on, which retires all of them at once.
 */

#define REC_MAGIC "TMJ1"
#define REC_HDR 24
#define REC_PAYLOAD_MAX ((size_t)64 << 10)
#define ENTRY_HDR 10

struct journal {
    int fd;
    size_t size;
    uint64_t epoch;
    size_t pos;         /* where the next record goes */
    unsigned char *buf; /* the record being built, or being replayed */
    size_t used;        /* bytes of buf in use; 0: no record open */
    uint32_t count;     /* entries in buf */
    bool unsynced;      /* records written since the last fdatasync */
};

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void
crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;

        for (int k = 0; k < 8; k++) {
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        }
        crc_table[i] = c;
    }
}

uint32_t
journal_crc32c(uint32_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;

    pthread_once(&crc_once, crc_init);
    crc = ~crc;
    while (len-- > 0) {
        crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    }
    return ~crc;
}

static void
put_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) {
        p[i] = (unsigned char)(v >> (8 * i));
    }
}

static uint64_t
get_le(const unsigned char *p, int n)
{
    uint64_t v = 0;

    for (int i = n - 1; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

/* 0, or errno (EIO for a short write that made no progress). */
static int
pwrite_all(int fd, const unsigned char *p, size_t n, size_t off)
{
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, (off_t)off);

        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return w < 0 ? errno : EIO;
        }
        p += w;
        n -= (size_t)w;
        off += (size_t)w;
    }
    return 0;
}

/* 0 with all n bytes read, ENODATA at the end of the file, or errno. */
static int
pread_all(int fd, unsigned char *p, size_t n, size_t off)
{
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)off);

        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            return errno;
        }
        if (r == 0) {
            return ENODATA;
        }
        p += r;
        n -= (size_t)r;
        off += (size_t)r;
    }
    return 0;
}

/* Extend the file with zeros to size and make that durable. */
static int
zero_fill(int fd, size_t from, size_t size)
{
    static const unsigned char zeros[64 << 10];

    while (from < size) {
        size_t n = size - from < sizeof(zeros) ? size - from : sizeof(zeros);
        int rc = pwrite_all(fd, zeros, n, from);

        if (rc != 0) {
            return rc;
        }
        from += n;
    }
    return fsync(fd) == 0 ? 0 : errno;
}

struct journal *
journal_open(const char *path, char *err, size_t errlen)
{
    struct journal *j = calloc(1, sizeof(*j));
    struct stat st;
    int rc;

    if (j == NULL) {
        snprintf(err, errlen, "journal: out of memory");
        return NULL;
    }
    j->buf = malloc(REC_HDR + REC_PAYLOAD_MAX);
    j->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
    if (j->buf == NULL) {
        snprintf(err, errlen, "journal: out of memory");
        goto fail;
    }
    if (j->fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        goto fail;
    }
    if (flock(j->fd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(err, errlen,
                 errno == EWOULDBLOCK
                     ? "%s is in use by another process (another tidemark "
                       "with the same [store] path?)"
                     : "cannot lock %s: %s",
                 path, strerror(errno));
        goto fail;
    }
    if (fstat(j->fd, &st) != 0) {
        snprintf(err, errlen, "cannot stat %s: %s", path, strerror(errno));
        goto fail;
    }
    j->size = (size_t)st.st_size;
    if (j->size < JOURNAL_SIZE) {
        rc = zero_fill(j->fd, j->size, JOURNAL_SIZE);
        if (rc != 0) {
            snprintf(err, errlen, "cannot write %s: %s", path, strerror(rc));
            goto fail;
        }
        if (!lmdb_sync_parent(path)) {
            snprintf(err, errlen, "cannot sync the directory of %s: %s", path,
                     strerror(errno));
            goto fail;
        }
        j->size = JOURNAL_SIZE;
    }
    return j;

fail:
    journal_close(j);
    return NULL;
}

void
journal_close(struct journal *j)
{
    if (j == NULL) {
        return;
    }
    if (j->fd >= 0) {
        close(j->fd);
    }
    free(j->buf);
    free(j);
}

/* Apply the entries of the record in buf (len bytes of them, count
 * entries). 0, fn's result, or EBADMSG when they do not parse. */
static int
replay_entries(struct journal *j, size_t len, uint32_t count, journal_fn fn,
               void *arg, size_t *entries)
{
    const unsigned char *p = j->buf + REC_HDR;
    const unsigned char *end = p + len;

    for (uint32_t i = 0; i < count; i++) {
        size_t klen;
        int rc;

        if ((size_t)(end - p) < ENTRY_HDR) {
            return EBADMSG;
        }
        klen = (size_t)get_le(p, 2);
        if (klen == 0 || klen > JOURNAL_KEY_MAX ||
            (size_t)(end - p) - ENTRY_HDR < klen) {
            return EBADMSG;
        }
        rc = fn(arg, p + ENTRY_HDR, klen, (int64_t)get_le(p + 2, 8));
        if (rc != 0) {
            return rc;
        }
        (*entries)++;
        p += ENTRY_HDR + klen;
    }
    return p == end ? 0 : EBADMSG;
}

int
journal_replay(struct journal *j, uint64_t epoch, journal_fn fn, void *arg,
               size_t *entries)
{
    size_t pos = 0;

    *entries = 0;
    while (pos + REC_HDR <= j->size) {
        unsigned char *h = j->buf;
        size_t len;
        uint32_t count;
        int rc = pread_all(j->fd, h, REC_HDR, pos);

        if (rc != 0) {
            return rc == ENODATA ? 0 : rc;
        }
        len = (size_t)get_le(h + 16, 4);
        count = (uint32_t)get_le(h + 20, 4);
        if (memcmp(h, REC_MAGIC, 4) != 0 || get_le(h + 8, 8) != epoch ||
            len > REC_PAYLOAD_MAX || len > j->size - pos - REC_HDR) {
            break;
        }
        rc = pread_all(j->fd, h + REC_HDR, len, pos + REC_HDR);
        if (rc != 0) {
            return rc == ENODATA ? 0 : rc;
        }
        if (journal_crc32c(0, h + 8, REC_HDR - 8 + len) !=
            (uint32_t)get_le(h + 4, 4)) {
            break; /* torn: the write that crashed */
        }
        rc = replay_entries(j, len, count, fn, arg, entries);
        if (rc != 0) {
            return rc;
        }
        pos += REC_HDR + len;
    }
    return 0;
}

void
journal_restart(struct journal *j, uint64_t epoch)
{
    j->epoch = epoch;
    j->pos = 0;
    j->used = 0;
    j->count = 0;
    j->unsynced = false;
}

bool
journal_fits(const struct journal *j, size_t len)
{
    size_t need = j->used + REC_HDR + ENTRY_HDR + len;

    return j->pos <= j->size && need <= j->size - j->pos;
}

/* Seal the open record and write it at pos. */
static int
write_record(struct journal *j)
{
    unsigned char *h = j->buf;
    int rc;

    memcpy(h, REC_MAGIC, 4);
    put_le(h + 8, j->epoch, 8);
    put_le(h + 16, j->used - REC_HDR, 4);
    put_le(h + 20, j->count, 4);
    put_le(h + 4, journal_crc32c(0, h + 8, j->used - 8), 4);
    rc = pwrite_all(j->fd, h, j->used, j->pos);
    /* Even a failed write may have reached the file: the space is spent. */
    j->pos += j->used;
    j->used = 0;
    j->count = 0;
    j->unsynced = true;
    return rc;
}

int
journal_add(struct journal *j, const void *key, size_t len, int64_t token)
{
    size_t need = ENTRY_HDR + len;
    unsigned char *p;

    if (j->used > 0 && j->used + need > REC_HDR + REC_PAYLOAD_MAX) {
        int rc = write_record(j);

        if (rc != 0) {
            return rc;
        }
    }
    if (j->used == 0) {
        j->used = REC_HDR;
    }
    p = j->buf + j->used;
    put_le(p, len, 2);
    put_le(p + 2, (uint64_t)token, 8);
    memcpy(p + ENTRY_HDR, key, len);
    j->used += need;
    j->count++;
    return 0;
}

int
journal_sync(struct journal *j)
{
    if (j->used > 0) {
        int rc = write_record(j);

        if (rc != 0) {
            return rc;
        }
    }
    if (!j->unsynced) {
        return 0;
    }
    if (fdatasync(j->fd) != 0) {
        return errno;
    }
    j->unsynced = false;
    return 0;
}

void
journal_drop(struct journal *j)
{
    j->used = 0;
    j->count = 0;
}
