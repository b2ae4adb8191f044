/* htab.h: a chained hash table for names that peers choose (resources,
 * lock names). Seeded, so that no client can aim its names at one chain,
 * and doubling as it fills, so that finding a name costs the same with
 * ten names in the table as with a million. Intrusive: an entry embeds a
 * struct hnode, and the table never allocates one. */
#ifndef TM_HTAB_H
#define TM_HTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct hnode {
    struct hnode *next; /* in its chain */
    uint64_t hash;      /* htab_key of the entry's name */
    const void *key;    /* the name, kept by the entry */
    size_t len;
};

struct htab {
    struct hnode **b;
    size_t mask; /* buckets - 1; buckets is a power of two */
    size_t n;    /* entries */
    uint64_t seed;
};

/* 64x64 -> 128 multiply folded to 64 bits: the mixing step of wyhash. */
static inline uint64_t
htab_mix(uint64_t a, uint64_t b)
{
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static inline uint64_t
htab_load64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* A seeded 64-bit hash of len bytes, 16 bytes a step; never 0.
 * Collisions only cost a comparison: tables compare names in full. */
static inline uint64_t
htab_hash(uint64_t seed, const void *key, size_t len)
{
    static const uint64_t p0 = 0xa0761d6478bd642full;
    static const uint64_t p1 = 0xe7037ed1a0b428dbull;
    static const uint64_t p2 = 0x8ebc6af09c88c6e3ull;
    const unsigned char *p = key;
    uint64_t h = seed ^ htab_mix(len ^ p0, p1);
    size_t n = len;

    while (n >= 16) {
        h = htab_mix(htab_load64(p) ^ p1, htab_load64(p + 8) ^ h);
        p += 16;
        n -= 16;
    }
    if (n > 0) {
        unsigned char tail[16] = {0};
        memcpy(tail, p, n);
        h = htab_mix(htab_load64(tail) ^ p2, htab_load64(tail + 8) ^ h);
    }
    h = htab_mix(h ^ p0, (uint64_t)len ^ p2);
    return h == 0 ? 1 : h;
}

/* An empty table of buckets chains (a power of two), hashing with seed.
 * false when out of memory. */
bool htab_init(struct htab *t, size_t buckets, uint64_t seed)
    __attribute__((warn_unused_result));

/* Free the chains' array; the entries are the caller's (htab_drain). */
void htab_fini(struct htab *t);

/* The hash of a name, as the table keeps it. */
static inline uint64_t
htab_key(const struct htab *t, const void *name, size_t len)
{
    return htab_hash(t->seed, name, len);
}

/* The entry named key (len bytes, hash h = htab_key), or NULL. */
struct hnode *htab_find(const struct htab *t, const void *key, size_t len,
                        uint64_t h);

/* Add e, named key (len bytes, which e's entry keeps as long as e is in
 * the table), under hash h. The table doubles when it holds more entries
 * than chains; if it cannot grow (out of memory) the chains only get
 * longer. */
void htab_add(struct htab *t, struct hnode *e, const void *key, size_t len,
              uint64_t h);

/* Take e (in the table) out of it. */
void htab_del(struct htab *t, struct hnode *e);

/* Take every entry out and give each to fn, which may free it. */
void htab_drain(struct htab *t, void (*fn)(struct hnode *e, void *arg),
                void *arg);

/* The entry that holds member (a struct hnode) of its type. */
#define HTAB_ENTRY(node, type, member)                                         \
    ((type *)(void *)((char *)(node)-offsetof(type, member)))

#endif
