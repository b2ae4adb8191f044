/* fuzz_journal.c: the LMDB store's journal as tidemark reads it back at
 * start (journal_replay). The file may hold what a crash tore, what the
 * disk damaged, or records of an older epoch. The first byte picks how
 * the input becomes the file:
 *
 *   even: entries written by the journal itself (journal_add, and
 *     journal_sync where the input says), then bytes of the written
 *     records flipped where the input says. Replay must feed back a
 *     prefix of the entries written, in order and each exactly as
 *     written; with nothing flipped, all of them.
 *   odd: records built from the input, with checksums that pass, whose
 *     counts and entries say anything (a file the journal did not
 *     write). Replay must feed only keys of 1 to JOURNAL_KEY_MAX bytes,
 *     each read at its place in its record, and answer 0 (every record
 *     read whole) or EBADMSG.
 *
 * Every input writes under an epoch of its own, as a checkpoint moves
 * the epoch on: the records earlier inputs left further on in the file
 * must never be fed. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../proxy/store/journal.h"
#include "fuzz.h"

#define REC_HDR 24
#define ENTRY_HDR 10
#define PAYLOAD_MAX ((size_t)64 << 10)

static struct journal *jnl;
static int raw_fd = -1; /* the same file, written behind the journal */
static uint64_t epoch;

struct entry {
    const uint8_t *key;
    size_t len;
    int64_t token;
};

/* A crafted record: its payload (in the input) and the entries it
 * claims. */
struct rec {
    const uint8_t *payload;
    size_t len;
    uint32_t count;
};

struct fed {
    const struct entry *want; /* the entries written, or NULL */
    size_t nwant;
    const struct rec *recs; /* the records crafted, or NULL */
    size_t nrecs;
    size_t r, off; /* where the next entry must come from */
    uint32_t k;    /* entries fed from recs[r] */
    size_t n;
};

/* A crafted file's entry must be the next one of its records' payloads,
 * read at its place: never bytes past its payload, nor left over in a
 * buffer from an earlier record. */
static void
check_crafted(struct fed *f, const unsigned char *key, size_t len,
              int64_t token)
{
    const struct rec *c;
    const uint8_t *e;
    int64_t t = 0;

    while (f->r < f->nrecs && f->k == f->recs[f->r].count) {
        check(f->off == f->recs[f->r].len,
              "a record's entries fill its payload before the next's come");
        f->r++;
        f->off = 0;
        f->k = 0;
    }
    check(f->r < f->nrecs, "no entry beyond the records crafted");
    c = &f->recs[f->r];
    check(c->len - f->off >= ENTRY_HDR + len,
          "an entry inside its record's payload");
    e = c->payload + f->off;
    check((size_t)(e[0] | e[1] << 8) == len, "the length the entry says");
    for (int i = 7; i >= 0; i--) {
        t = (int64_t)((uint64_t)t << 8 | e[2 + i]);
    }
    check(t == token && memcmp(e + ENTRY_HDR, key, len) == 0,
          "the key and token at the entry's place");
    f->off += ENTRY_HDR + len;
    f->k++;
}

static void
setup(void)
{
    char dir[] = "/tmp/fuzz_journal.XXXXXX";
    char path[64];
    char err[256];

    if (mkdtemp(dir) == NULL) {
        fail("mkdtemp");
    }
    snprintf(path, sizeof(path), "%s/j", dir);
    jnl = journal_open(path, err, sizeof(err));
    raw_fd = open(path, O_RDWR | O_CLOEXEC);
    if (jnl == NULL || raw_fd < 0) {
        fail("journal_open");
    }
    /* The file stays until the process ends: unlinked, it is gone then. */
    unlink(path);
    rmdir(dir);
}

static uint64_t
take(const uint8_t **p, size_t *left, int n)
{
    const uint8_t *q = *p;
    size_t have = *left < (size_t)n ? *left : (size_t)n;
    uint64_t v = 0;

    for (size_t i = 0; i < have; i++) {
        v |= (uint64_t)q[i] << (8 * i);
    }
    *p = q + have;
    *left -= have;
    return v;
}

static void
put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static int
on_entry(void *arg, const unsigned char *key, size_t len, int64_t token)
{
    struct fed *f = arg;

    check(len >= 1 && len <= JOURNAL_KEY_MAX, "a key of 1 to 1024 bytes");
    if (f->recs != NULL) {
        check_crafted(f, key, len, token);
    }
    if (f->want != NULL) {
        const struct entry *e;

        check(f->n < f->nwant, "no entry beyond those written");
        e = &f->want[f->n];
        check(len == e->len && memcmp(key, e->key, len) == 0 &&
                  token == e->token,
              "each entry fed as it was written, in order");
    }
    f->n++;
    return 0;
}

/* Even: the journal writes the input's entries; then the input's flips. */
static void
written(const uint8_t *p, size_t left)
{
    struct entry *want = calloc(left / 4 + 1, sizeof(*want));
    size_t n = 0, end = 0;
    struct fed f = {0};
    int rc;

    if (want == NULL) {
        fail("calloc");
    }
    /* Entries: u16 length (1 to JOURNAL_KEY_MAX), u8 flags (bit 0: sync
     * after it; bit 1: stop adding, the rest are flips), u64 token, the
     * key's bytes. */
    while (left >= 11) {
        size_t len = 1 + (size_t)take(&p, &left, 2) % JOURNAL_KEY_MAX;
        unsigned flags = (unsigned)take(&p, &left, 1);
        int64_t token = (int64_t)take(&p, &left, 8);

        if ((flags & 2) || len > left || !journal_fits(jnl, len)) {
            break;
        }
        want[n] = (struct entry){.key = p, .len = len, .token = token};
        if (journal_add(jnl, p, len, token) != 0) {
            fail("journal_add");
        }
        p += len;
        left -= len;
        n++;
        if (flags & 1) {
            if (journal_sync(jnl) != 0) {
                fail("journal_sync");
            }
        }
    }
    if (journal_sync(jnl) != 0) {
        fail("journal_sync");
    }
    {
        struct fed all = {.want = want, .nwant = n};
        size_t got;

        rc = journal_replay(jnl, epoch, on_entry, &all, &got);
        check(rc == 0 && got == n && all.n == n,
              "every entry written is fed back when nothing is damaged");
    }
    for (size_t i = 0; i < n; i++) {
        end += ENTRY_HDR + want[i].len;
    }
    /* Each record adds a header, at most one an entry: end is at or past
     * where the records end (a flip past it hits zeros or an older
     * epoch's records, which end the replay as well). */
    end += REC_HDR * n;
    /* Flips: u32 offset (inside what was written), u8 xor. */
    while (left >= 5 && end > 0) {
        uint8_t b;
        off_t off = (off_t)(take(&p, &left, 4) % end);
        uint8_t x = (uint8_t)take(&p, &left, 1);

        if (pread(raw_fd, &b, 1, off) != 1) {
            fail("pread");
        }
        b ^= x;
        if (pwrite(raw_fd, &b, 1, off) != 1) {
            fail("pwrite");
        }
    }
    f.want = want;
    f.nwant = n;
    {
        size_t got;

        rc = journal_replay(jnl, epoch, on_entry, &f, &got);
        /* A flip that left a checksum passing (2^-32) could make
         * EBADMSG. */
        check(rc == 0 || rc == EBADMSG, "replay answers 0 or EBADMSG");
        check(got == f.n && got <= n, "a prefix of the entries written");
    }
    free(want);
}

/* Odd: records with passing checksums, made of the input. */
static void
crafted(const uint8_t *p, size_t left)
{
    uint8_t *rec = malloc(REC_HDR + PAYLOAD_MAX);
    struct rec *recs = calloc(left / 7 + 1, sizeof(*recs));
    uint64_t claimed = 0;
    size_t pos = 0, got;
    struct fed f = {0};
    bool older = false;
    int rc;

    if (rec == NULL || recs == NULL) {
        fail("malloc");
    }
    /* Records: u32 count, u16 payload length, u8 flags (bit 0: another
     * epoch, an older one), the payload. */
    while (left >= 7) {
        uint32_t count = (uint32_t)take(&p, &left, 4);
        size_t len = (size_t)take(&p, &left, 2);
        unsigned flags = (unsigned)take(&p, &left, 1);

        if (len > left) {
            len = left;
        }
        memcpy(rec, "TMJ1", 4);
        put_le(rec + 8, (flags & 1) ? epoch - 1 : epoch, 8);
        put_le(rec + 16, len, 4);
        put_le(rec + 20, count, 4);
        memcpy(rec + REC_HDR, p, len);
        put_le(rec + 4, journal_crc32c(0, rec + 8, REC_HDR - 8 + len), 4);
        if (pwrite(raw_fd, rec, REC_HDR + len, (off_t)pos) !=
            (ssize_t)(REC_HDR + len)) {
            fail("pwrite");
        }
        /* Replay ends at the first record of an older epoch. */
        older = older || (flags & 1);
        if (!older) {
            recs[f.nrecs++] =
                (struct rec){.payload = p, .len = len, .count = count};
            claimed += count;
        }
        pos += REC_HDR + len;
        p += len;
        left -= len;
    }
    /* The end: a header of zeros, as the file holds where nothing was
     * written. */
    memset(rec, 0, REC_HDR);
    if (pwrite(raw_fd, rec, REC_HDR, (off_t)pos) != REC_HDR) {
        fail("pwrite");
    }
    f.recs = recs;
    rc = journal_replay(jnl, epoch, on_entry, &f, &got);
    check(rc == 0 || rc == EBADMSG, "replay answers 0 or EBADMSG");
    check(got == f.n && got <= claimed, "no more entries than claimed");
    /* 0 only when every record was read whole. */
    for (; rc == 0 && f.r < f.nrecs; f.r++, f.off = 0, f.k = 0) {
        check(f.k == recs[f.r].count && f.off == recs[f.r].len,
              "0 only when every entry claimed is fed and fills its payload");
    }
    free(recs);
    free(rec);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (jnl == NULL) {
        setup();
    }
    if (size == 0) {
        return 0;
    }
    /* An epoch of this input's own: what earlier inputs wrote is older. */
    epoch++;
    journal_restart(jnl, epoch);
    if (data[0] % 2 == 0) {
        written(data + 1, size - 1);
    } else {
        crafted(data + 1, size - 1);
    }
    return 0;
}
