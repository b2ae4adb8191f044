/* etcd_keys.h: the keys of the locks etcdctl lock and etcd's
 * concurrency.Mutex take (<prefix><name>/<lease in hex>), read back from
 * etcd's answers for a [watch] source: each key's lock name, each lock's
 * holder in a range answer, what a watched event says, and the range
 * that reads one lock. Pure (no I/O): watch_etcd.c does the calls, and a
 * fuzz target drives these with hostile answers. */
#ifndef TM_ETCD_KEYS_H
#define TM_ETCD_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* What a watched deletion says of the holders after it: one whose key
 * was created after `before` got the lock at `at` or later. */
struct ek_floor {
    int64_t before;
    int64_t at; /* 0: no deletion, nothing said */
};

/* The lock name in key k (n bytes) under prefix (plen bytes): the part
 * between the prefix and the last '/', when what follows that '/' is a
 * lease in hex (1 to 16 of [0-9a-f]). The name starts at k + plen and
 * has *len bytes (at least one). false when k is no such key. */
bool ek_name(const char *prefix, size_t plen, const unsigned char *k, size_t n,
             size_t *len);

/* A lock's holder: name (len bytes, borrowed for the call) at fence rev;
 * who (wlen bytes, borrowed, not NUL-terminated; NULL when its key has
 * no value) is its key's value: an election's proposal, the holder's
 * identity. */
typedef void (*ek_holder_cb)(void *arg, const char *name, size_t len,
                             int64_t rev, const char *who, size_t wlen);

/* Report the holder of each lock among kvs (a range answer's "kvs",
 * oldest first): the first key of each name, once per name, at f->at
 * when its key was created after f->before and f->at is later than its
 * create revision. Keys that are no lock key, or whose revision does not
 * read, are passed over. Each key and each holder's value is decoded
 * into room sized from its own length: a name or a value of any length
 * is reported. */
void ek_holders(const char *prefix, size_t plen, const json_t *kvs,
                const struct ek_floor *f, ek_holder_cb cb, void *arg);

/* One event of a watch answer, read. */
struct ek_event {
    unsigned char *key; /* its kv's key, decoded (malloc: ek_event_free) */
    int n;              /* key's bytes; -1 when it did not decode */
    size_t len;         /* the lock name's, at key + plen (ek_event true) */
    const char *type;   /* "PUT" (etcd's JSON leaves the default out),
                         * "DELETE"...: borrowed from ev */
    int64_t mod;        /* its kv's mod_revision */
    bool mod_ok;        /* mod read (absent reads as 0), and below INT64_MAX */
    struct ek_floor floor; /* lock_rev and a DELETE: what it says */
};

/* Read event ev of a watch over prefix into e. true when its key is a
 * lock key (then e->key + plen is the name, e->len bytes); e->mod and
 * e->mod_ok whatever the key. lock_rev: read a deletion's floor (its
 * mod_revision and its prev_kv's create_revision). Call ek_event_free
 * after, in either case. */
bool ek_event(const char *prefix, size_t plen, const json_t *ev, bool lock_rev,
              struct ek_event *e);

void ek_event_free(struct ek_event *e);

/* The range request that reads every key starting with p (n bytes),
 * oldest first. NULL when out of memory. */
json_t *ek_prefix_range(const char *p, size_t n);

/* The range request that reads lock name's keys (every key starting
 * with prefix name '/'), oldest first. NULL when out of memory. */
json_t *ek_range(const char *prefix, size_t plen, const char *name, size_t len);

#endif
