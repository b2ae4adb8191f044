/* fuzz_etcd_keys.c: libFuzzer target for what a [watch] on etcd makes of
 * etcd's answers (proxy/locks/etcd_keys.c, on etcd_json.c). The input is
 * a prefix (its length the first byte, mod 40) and then one JSON object
 * standing for etcd: "events" as a watch answer's, "kvs" as a range
 * answer's. Invariants, on every input:
 * - an event read as a lock's names a non-empty name right after the
 *   prefix, followed by '/' and 1 to 16 digits of lower-case hex that
 *   end the key; a floor is read only from a DELETE, at its revision;
 *   an event's revision, when read, has one after it (no overflow);
 * - the holders reported for kvs (with each event's floor, and none) are
 *   exactly, in order, the first key of each lock name whose key and
 *   create revision read (an oracle written apart from the code), each
 *   name once, at its key's revision or at the floor's when the floor
 *   says so; each name is copied into room of its own length, and so is
 *   each holder's value (ASan);
 * - the range that reads a name (each reported name, and the rest of the
 *   input as one name of any length) decodes to prefix, name, '/', whole,
 *   with the range end just after it; etcd_key_is finds the key;
 * - the etcd store's mark is read from a kv's "value" (each of "kvs",
 *   the object itself, and the rest of the input as a value) exactly when
 *   it decodes to 19 ASCII digits at most INT64_MAX, as their number. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../../proxy/clients/etcd_json.h"
#include "../../proxy/locks/etcd_keys.h"
#include "fuzz.h"

#define MAX_REPORTS 256

struct run {
    const char *prefix;
    size_t plen;
    const json_t *kvs;
    struct ek_floor f;
    size_t nrep;
    char *names[MAX_REPORTS];
    size_t lens[MAX_REPORTS];
    int64_t revs[MAX_REPORTS];
};

/* Whether k (n bytes) is prefix, a name of at least one byte, '/', and
 * 1 to 16 of [0-9a-f]; the name's length in *len. Written apart from
 * ek_name on purpose. */
static bool
oracle_name(const char *prefix, size_t plen, const unsigned char *k, size_t n,
            size_t *len)
{
    size_t tail = 0;

    if (n < plen || memcmp(k, prefix, plen) != 0) {
        return false;
    }
    while (tail < n - plen && k[n - 1 - tail] != '/') {
        unsigned char c = k[n - 1 - tail];

        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return false;
        }
        tail++;
    }
    if (tail == n - plen || tail == 0 || tail > 16) {
        return false; /* no '/', or nothing after it */
    }
    *len = n - plen - tail - 1;
    return *len > 0;
}

/* The i-th kv's key decoded (malloc) and its name length; NULL when it is
 * no lock key. */
static unsigned char *
oracle_key(const struct run *r, const json_t *kv, size_t *len)
{
    size_t n = 0;
    unsigned char *k = etcd_unb64_dup(json_object_get(kv, "key"), &n);

    if (k != NULL && !oracle_name(r->prefix, r->plen, k, n, len)) {
        free(k);
        return NULL;
    }
    return k;
}

static void
on_holder(void *arg, const char *name, size_t len, int64_t rev, const char *who,
          size_t wlen)
{
    struct run *r = arg;
    char *copy = malloc(len + 1);
    char *value = malloc(wlen + 1);

    check(copy != NULL && value != NULL, "out of memory");
    check(who != NULL || wlen == 0, "no value has no bytes");
    if (who != NULL) {
        memcpy(value, who, wlen); /* ASan: the value really has wlen bytes */
    }
    free(value);
    check(r->nrep < MAX_REPORTS, "more holders than kvs");
    memcpy(copy, name, len); /* ASan: name really has len bytes */
    r->names[r->nrep] = copy;
    r->lens[r->nrep] = len;
    r->revs[r->nrep] = rev;
    r->nrep++;
}

static void
holders_match_oracle(struct run *r)
{
    size_t i, k = 0;
    json_t *kv;

    r->nrep = 0;
    ek_holders(r->prefix, r->plen, r->kvs, &r->f, on_holder, r);
    json_array_foreach(r->kvs, i, kv)
    {
        size_t len = 0;
        int64_t rev = 0;
        unsigned char *key = oracle_key(r, kv, &len);
        bool first = key != NULL;

        for (size_t j = 0; first && j < i; j++) {
            size_t ol = 0;
            unsigned char *o = oracle_key(r, json_array_get(r->kvs, j), &ol);

            first = !(o != NULL && ol == len &&
                      memcmp(o + r->plen, key + r->plen, len) == 0);
            free(o);
        }
        if (first && etcd_int(kv, "create_revision", &rev)) {
            int64_t want = r->f.at > rev && rev > r->f.before ? r->f.at : rev;

            check(k < r->nrep, "a lock's holder was not reported");
            check(r->lens[k] == len &&
                      memcmp(r->names[k], key + r->plen, len) == 0,
                  "a holder's name is not its key's");
            check(r->revs[k] == want, "a holder's fence is not its key's");
            k++;
        }
        free(key);
    }
    check(k == r->nrep, "a holder was reported that is no lock's first");
    for (size_t a = 0; a < r->nrep; a++) {
        for (size_t b = a + 1; b < r->nrep; b++) {
            check(r->lens[a] != r->lens[b] ||
                      memcmp(r->names[a], r->names[b], r->lens[a]) != 0,
                  "a lock reported twice in one answer");
        }
    }
}

/* The range for name: its key is prefix name '/', whole; its end the
 * key with its last byte ('/') raised. */
static void
range_is_whole(const struct run *r, const char *name, size_t len)
{
    json_t *q = ek_range(r->prefix, r->plen, name, len);
    size_t kn = 0, en = 0, want = r->plen + len + 1;
    unsigned char *k, *e;

    if (q == NULL) {
        return; /* out of memory */
    }
    k = etcd_unb64_dup(json_object_get(q, "key"), &kn);
    e = etcd_unb64_dup(json_object_get(q, "range_end"), &en);
    check(k != NULL && e != NULL, "a range's key does not decode");
    check(kn == want, "a range's key is not prefix, name and '/'");
    check(memcmp(k, r->prefix, r->plen) == 0 &&
              memcmp(k + r->plen, name, len) == 0 && k[kn - 1] == '/',
          "a range's key is not prefix, name and '/'");
    check(en == kn && memcmp(e, k, kn - 1) == 0 && e[en - 1] == '/' + 1,
          "a range's end is not just after its key");
    check(etcd_key_is(json_object_get(q, "key"), k, kn),
          "a range's own key is not found");
    free(k);
    free(e);
    json_decref(q);
}

static void
event_reads(const struct run *r, const json_t *ev, struct ek_event *e)
{
    int64_t mod = 0;
    bool lock = ek_event(r->prefix, r->plen, ev, true, e);

    /* a watch starts again at mod + 1 */
    check(!e->mod_ok || e->mod < INT64_MAX, "a revision with none after it");
    if (!lock) {
        check(e->floor.at == 0 && e->floor.before == 0,
              "a floor from an event that is no lock's");
        return;
    }
    check(e->n >= 0 && (size_t)e->n >= r->plen + 3, "a lock key too short");
    check(e->len >= 1 && r->plen + e->len + 2 <= (size_t)e->n,
          "a lock name past its key");
    check(memcmp(e->key, r->prefix, r->plen) == 0 &&
              e->key[r->plen + e->len] == '/',
          "a lock name not between the prefix and a '/'");
    check(e->type != NULL, "an event without a type");
    if (e->floor.at != 0) {
        check(strcmp(e->type, "DELETE") == 0 &&
                  etcd_int(json_object_get(ev, "kv"), "mod_revision", &mod) &&
                  mod == e->floor.at,
              "a floor not at a deletion's revision");
    }
}

/* The etcd store's mark in kv's "value": read only when the value
 * decodes (into room of its own length) to exactly 19 ASCII digits at
 * most INT64_MAX, and then as their number. */
static void
mark_reads(const json_t *kv)
{
    size_t n = 0;
    unsigned char *raw = etcd_unb64_dup(json_object_get(kv, "value"), &n);
    bool digits = raw != NULL && n == 19;
    int64_t got = -1;
    bool ok = etcd_mark_read(kv, &got);

    for (size_t k = 0; digits && k < n; k++) {
        digits = raw[k] >= '0' && raw[k] <= '9';
    }
    /* 19 digits are below 10^19 < 2^64: strtoull does not overflow. */
    if (digits && strtoull((const char *)raw, NULL, 10) > INT64_MAX) {
        digits = false;
    }
    check(ok == digits, "a mark is read exactly from 19 digits <= INT64_MAX");
    if (ok) {
        check(got >= 0 &&
                  (uint64_t)got == strtoull((const char *)raw, NULL, 10),
              "the mark is the digits' number");
    }
    free(raw);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct run r = {0};
    size_t plen, i;
    json_t *root, *ev;
    const char *rest;
    size_t rlen;

    if (size < 1) {
        return 0;
    }
    plen = data[0] % 40;
    if (plen > size - 1) {
        plen = size - 1;
    }
    r.prefix = (const char *)data + 1;
    r.plen = plen;
    rest = (const char *)data + 1 + plen;
    rlen = size - 1 - plen;
    range_is_whole(&r, rest, rlen);
    root = json_loadb(rest, rlen, JSON_ALLOW_NUL, NULL);
    if (root == NULL) {
        return 0;
    }
    r.kvs = json_object_get(root, "kvs");
    if (json_array_size(r.kvs) > MAX_REPORTS) {
        json_decref(root);
        return 0;
    }
    holders_match_oracle(&r);
    mark_reads(root);
    json_array_foreach(r.kvs, i, ev)
    {
        mark_reads(ev);
    }
    /* The rest of the input as a value of any length, as etcd could send
     * it: a string of those bytes. */
    {
        json_t *kv = json_object();

        json_object_set_new(kv, "value", json_stringn_nocheck(rest, rlen));
        mark_reads(kv);
        json_decref(kv);
    }
    for (size_t k = 0; k < r.nrep; k++) {
        range_is_whole(&r, r.names[k], r.lens[k]);
        free(r.names[k]);
    }
    json_array_foreach(json_object_get(root, "events"), i, ev)
    {
        struct ek_event e;

        event_reads(&r, ev, &e);
        r.f = e.floor;
        ek_event_free(&e);
        holders_match_oracle(&r);
        for (size_t k = 0; k < r.nrep; k++) {
            free(r.names[k]);
        }
    }
    json_decref(root);
    return 0;
}
