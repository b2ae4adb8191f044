/* marks.c: the in-memory mark cache, a set-associative table (7 ways per
 * bucket, CLOCK eviction inside a bucket) that never allocates on get,
 * nor on put for a name of up to MARKS_KEY_INLINE bytes. */
#include "marks.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../../policies/htab.h"
#include "../seed.h"

/* Entries per bucket: a bucket is 8 cache lines, the first holding the
 * ways' hashes and the CLOCK's state, each other one way. A lookup that
 * misses reads one line; a hit two (the hashes, then the way's mark and
 * name), with 1,000 resources spread over the table as with one. */
#define MARKS_WAYS 7
/* Longer names are never cached: get answers 0, put is ignored. */
#define MARKS_KEY_MAX UINT16_MAX
/* A name of up to this many bytes is kept in its way's line; a longer
 * one gets a buffer of its own, in steps of MARKS_KEY_STEP bytes, which
 * the way keeps across evictions. */
#define MARKS_KEY_INLINE 44
#define MARKS_KEY_STEP 32

struct marks_way {
    _Alignas(64) int64_t mark;
    char *key;       /* NULL, or a buffer of its own for long names */
    uint16_t len;    /* bytes of the name */
    uint16_t keycap; /* bytes at key */
    char inl[MARKS_KEY_INLINE];
};

struct marks_bucket {
    uint64_t hash[MARKS_WAYS]; /* 0: the way is empty */
    uint8_t ref;               /* CLOCK reference bits, one a way */
    uint8_t hand;              /* next way the CLOCK looks at */
    struct marks_way way[MARKS_WAYS];
};

_Static_assert(sizeof(struct marks_way) == 64, "a way is one cache line");
_Static_assert(offsetof(struct marks_bucket, way) == 64,
               "the hashes and the CLOCK fill the first line");

struct marks {
    struct marks_bucket *buckets;
    size_t nbuckets;
    size_t count;
    uint64_t seed;
};

/* Bucket index without a division: (h * n) >> 64 maps h uniformly onto
 * [0, n) for any n (Lemire's multiply-shift range reduction). */
static inline struct marks_bucket *
bucket_of(const struct marks *m, uint64_t h)
{
    size_t i = (size_t)(((__uint128_t)h * m->nbuckets) >> 64);
    return &m->buckets[i];
}

/* The way's name: in its line when it fits, else in its own buffer
 * (kept across evictions, so it may be there while a short name is in
 * the line). */
static inline const char *
way_key(const struct marks_way *w)
{
    return w->len <= MARKS_KEY_INLINE ? w->inl : w->key;
}

/* The way of b holding res, or -1. */
static inline int
find_way(const struct marks_bucket *b, uint64_t h, const char *res, size_t len)
{
    for (int i = 0; i < MARKS_WAYS; i++) {
        if (b->hash[i] == h && b->way[i].len == len &&
            (len == 0 || memcmp(way_key(&b->way[i]), res, len) == 0)) {
            return i;
        }
    }
    return -1;
}

struct marks *
marks_new(size_t cap)
{
    struct marks *m;
    size_t nbuckets;

    if (cap < 16) {
        cap = 16;
    }
    /* Round down: the table never holds more than cap entries. */
    nbuckets = cap / MARKS_WAYS;
    if (nbuckets > SIZE_MAX / sizeof(struct marks_bucket)) {
        return NULL;
    }
    m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return NULL;
    }
    m->nbuckets = nbuckets;
    /* Zeroed (every way empty, with no buffer of its own) and resident
     * only as buckets fill: an anonymous mapping, page-aligned. */
    m->buckets =
        mmap(NULL, nbuckets * sizeof(struct marks_bucket),
             PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m->buckets == MAP_FAILED) {
        free(m);
        return NULL;
    }
    /* A per-process seed makes it hard to aim many names at one bucket
     * (which would only evict entries early, never give a wrong mark). */
    m->seed = tm_seed(m);
    return m;
}

void
marks_free(struct marks *m)
{
    if (m == NULL) {
        return;
    }
    for (size_t b = 0; b < m->nbuckets; b++) {
        for (int i = 0; i < MARKS_WAYS; i++) {
            free(m->buckets[b].way[i].key);
        }
    }
    munmap(m->buckets, m->nbuckets * sizeof(struct marks_bucket));
    free(m);
}

int64_t
marks_get(struct marks *m, const char *res, size_t len)
{
    struct marks_bucket *b;
    uint64_t h;
    int i;

    if (len > MARKS_KEY_MAX) {
        return 0;
    }
    h = htab_hash(m->seed, res, len);
    b = bucket_of(m, h);
    i = find_way(b, h, res, len);
    if (i < 0) {
        return 0;
    }
    if (!(b->ref & (1u << i))) {
        b->ref |= (uint8_t)(1u << i);
    }
    return b->way[i].mark;
}

/* The way to (re)use in b for a new entry: an empty one, else the first
 * whose reference bit is clear, clearing bits as the hand passes (CLOCK;
 * ends within two sweeps). */
static int
victim_way(struct marks_bucket *b)
{
    for (int i = 0; i < MARKS_WAYS; i++) {
        if (b->hash[i] == 0) {
            return i;
        }
    }
    for (;;) {
        int i = b->hand;
        b->hand = (uint8_t)((b->hand + 1) % MARKS_WAYS);
        if (!(b->ref & (1u << i))) {
            return i;
        }
        b->ref &= (uint8_t) ~(1u << i);
    }
}

void
marks_put(struct marks *m, const char *res, size_t len, int64_t mark)
{
    struct marks_bucket *b;
    struct marks_way *w;
    uint64_t h;
    int i;

    if (len > MARKS_KEY_MAX || mark <= 0) {
        return;
    }
    h = htab_hash(m->seed, res, len);
    b = bucket_of(m, h);
    i = find_way(b, h, res, len);
    if (i >= 0) {
        if (mark > b->way[i].mark) {
            b->way[i].mark = mark;
        }
        b->ref |= (uint8_t)(1u << i);
        return;
    }
    i = victim_way(b);
    w = &b->way[i];
    if (len > MARKS_KEY_INLINE && w->keycap < len) {
        size_t cap =
            (len + MARKS_KEY_STEP - 1) / MARKS_KEY_STEP * MARKS_KEY_STEP;
        char *key;
        if (cap > MARKS_KEY_MAX) {
            cap = MARKS_KEY_MAX;
        }
        key = malloc(cap);
        if (key == NULL) {
            /* Not caching is always safe: the store still answers. */
            return;
        }
        free(w->key);
        w->key = key;
        w->keycap = (uint16_t)cap;
    }
    if (b->hash[i] == 0) {
        m->count++;
    }
    if (len > 0) {
        memcpy(len <= MARKS_KEY_INLINE ? w->inl : w->key, res, len);
    }
    b->hash[i] = h;
    w->len = (uint16_t)len;
    w->mark = mark;
    /* A new entry starts unreferenced: the hand has just passed it, so it
     * is the last one looked at, and a get before then keeps it. */
    b->ref &= (uint8_t) ~(1u << i);
}

size_t
marks_count(const struct marks *m)
{
    return m->count;
}
