/* etcd_keys.c: the lock keys of a [watch] on etcd, read from etcd's
 * answers (etcd_keys.h). */
#include "etcd_keys.h"

#include <stdlib.h>
#include <string.h>

#include "../clients/etcd_json.h"

/* The longest lease in hex: an int64's 16 digits. */
#define EK_LEASE_MAX 16

bool
ek_name(const char *prefix, size_t plen, const unsigned char *k, size_t n,
        size_t *len)
{
    const unsigned char *slash;
    size_t rest;

    if (n <= plen + 2 || memcmp(k, prefix, plen) != 0) {
        return false;
    }
    slash = memrchr(k + plen, '/', n - plen);
    if (slash == NULL || slash == k + plen) {
        return false;
    }
    rest = n - (size_t)(slash + 1 - k);
    if (rest == 0 || rest > EK_LEASE_MAX) {
        return false;
    }
    for (const unsigned char *p = slash + 1; p < k + n; p++) {
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) {
            return false;
        }
    }
    *len = (size_t)(slash - (k + plen));
    return true;
}

/* The decoded key of kv and its lock name's length; NULL when kv's key
 * is no lock key (or out of memory). */
static unsigned char *
kv_lock_key(const char *prefix, size_t plen, const json_t *kv, size_t *len)
{
    size_t n = 0;
    unsigned char *k = etcd_unb64_dup(json_object_get(kv, "key"), &n);

    if (k != NULL && !ek_name(prefix, plen, k, n, len)) {
        free(k);
        return NULL;
    }
    return k;
}

/* Whether a kv of kvs before the i-th holds a key of the lock name (len
 * bytes). kvs are few: a linear look-back is enough. */
static bool
named_before(const char *prefix, size_t plen, const json_t *kvs, size_t i,
             const unsigned char *name, size_t len)
{
    bool seen = false;

    for (size_t j = 0; j < i && !seen; j++) {
        size_t olen = 0;
        unsigned char *other =
            kv_lock_key(prefix, plen, json_array_get(kvs, j), &olen);

        seen = other != NULL && olen == len &&
               memcmp(other + plen, name, len) == 0;
        free(other);
    }
    return seen;
}

/* Report kv's holder of name (len bytes) at rev, with its value. */
static void
report_one(const json_t *kv, const char *name, size_t len, int64_t rev,
           ek_holder_cb cb, void *arg)
{
    size_t wlen = 0;
    unsigned char *who = etcd_unb64_dup(json_object_get(kv, "value"), &wlen);

    cb(arg, name, len, rev, (const char *)who, who != NULL ? wlen : 0);
    free(who);
}

void
ek_holders(const char *prefix, size_t plen, const json_t *kvs,
           const struct ek_floor *f, ek_holder_cb cb, void *arg)
{
    size_t i;
    json_t *kv;

    json_array_foreach(kvs, i, kv)
    {
        size_t len = 0;
        int64_t rev = 0;
        unsigned char *key = kv_lock_key(prefix, plen, kv, &len);

        if (key != NULL && etcd_int(kv, "create_revision", &rev) &&
            !named_before(prefix, plen, kvs, i, key + plen, len)) {
            if (f->at > rev && rev > f->before) {
                rev = f->at;
            }
            report_one(kv, (const char *)key + plen, len, rev, cb, arg);
        }
        free(key);
    }
}

/* What a deletion ev says of the holders after it: a deletion (a
 * release, a lease's end) at R of a key created at C (its prev_kv) says
 * that a key created after C got the lock at R or later. Without its
 * prev_kv, it says nothing. */
static void
deletion_floor(const json_t *ev, struct ek_floor *f)
{
    if (!etcd_int(json_object_get(ev, "kv"), "mod_revision", &f->at) ||
        !etcd_int(json_object_get(ev, "prev_kv"), "create_revision",
                  &f->before)) {
        f->at = 0;
    }
}

bool
ek_event(const char *prefix, size_t plen, const json_t *ev, bool lock_rev,
         struct ek_event *e)
{
    json_t *kv = json_object_get(ev, "kv");
    size_t n = 0;

    *e = (struct ek_event){.n = -1};
    e->mod_ok = etcd_rev(kv, "mod_revision", &e->mod);
    if (!e->mod_ok) {
        e->mod = 0;
    }
    e->key = etcd_unb64_dup(json_object_get(kv, "key"), &n);
    if (e->key == NULL || n > INT32_MAX) {
        return false;
    }
    e->n = (int)n;
    if (!ek_name(prefix, plen, e->key, n, &e->len)) {
        return false;
    }
    /* etcd's JSON leaves out the default, PUT */
    e->type = json_string_value(json_object_get(ev, "type"));
    if (e->type == NULL) {
        e->type = "PUT";
    }
    if (lock_rev && strcmp(e->type, "DELETE") == 0) {
        deletion_floor(ev, &e->floor);
    }
    return true;
}

void
ek_event_free(struct ek_event *e)
{
    free(e->key);
    e->key = NULL;
}

json_t *
ek_prefix_range(const char *p, size_t n)
{
    return json_pack("{s:o,s:o,s:s,s:s}", "key", etcd_b64(p, n), "range_end",
                     etcd_prefix_end(p, n), "sort_target", "CREATE",
                     "sort_order", "ASCEND");
}

json_t *
ek_range(const char *prefix, size_t plen, const char *name, size_t len)
{
    size_t klen = 0;
    char *k = etcd_key_join(prefix, plen, name, len, "/", 1, &klen);
    json_t *q = k != NULL ? ek_prefix_range(k, klen) : NULL;

    free(k);
    return q;
}
