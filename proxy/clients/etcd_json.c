/* etcd_json.c: the gateway's encodings (etcd_json.h). */
#include "etcd_json.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "../../policies/ascii.h"

json_t *
etcd_b64(const void *data, size_t len)
{
    size_t cap = 4 * (len / 3 + 2) + 1;
    unsigned char *buf = len < (1u << 20) ? malloc(cap) : NULL;
    json_t *s;
    int n;

    if (buf == NULL) {
        return NULL;
    }
    n = EVP_EncodeBlock(buf, data, (int)len);
    s = json_stringn((const char *)buf, (size_t)n);
    free(buf);
    return s;
}

json_t *
etcd_prefix_end(const char *prefix, size_t len)
{
    unsigned char *end;
    json_t *s;
    size_t n = len;

    end = len > 0 && len < (1u << 20) ? malloc(len) : NULL;
    if (end == NULL) {
        return NULL;
    }
    memcpy(end, prefix, len);
    /* The last byte that can be raised, raised; what follows it cut. */
    while (n > 0 && end[n - 1] == 0xff) {
        n--;
    }
    if (n == 0) {
        free(end);
        return json_string("AA=="); /* "\0": to the end of the keys */
    }
    end[n - 1]++;
    s = etcd_b64(end, n);
    free(end);
    return s;
}

int
etcd_unb64(const json_t *s, unsigned char *out, size_t cap)
{
    const char *t = json_string_value(s);
    size_t len = t != NULL ? json_string_length(s) : 0;
    int n;

    if (t == NULL || len % 4 != 0 || len / 4 * 3 > cap) {
        return -1;
    }
    if (len == 0) {
        return 0;
    }
    /* '=' only as the padding of the last group. */
    if (memchr(t, '=', len - 2) != NULL ||
        (t[len - 2] == '=' && t[len - 1] != '=')) {
        return -1;
    }
    n = EVP_DecodeBlock(out, (const unsigned char *)t, (int)len);
    if (n < 0) {
        return -1;
    }
    /* EVP_DecodeBlock counts the padding as zero bytes. */
    if (t[len - 1] == '=') {
        n--;
    }
    if (t[len - 2] == '=') {
        n--;
    }
    return n;
}

unsigned char *
etcd_unb64_dup(const json_t *s, size_t *n)
{
    size_t len = json_string_length(s);
    /* three bytes a group of four, and the NUL */
    size_t cap = len / 4 * 3 + 1;
    unsigned char *buf = json_is_string(s) ? malloc(cap) : NULL;
    int got = buf != NULL ? etcd_unb64(s, buf, cap) : -1;

    if (got < 0) {
        free(buf);
        return NULL;
    }
    buf[got] = '\0';
    *n = (size_t)got;
    return buf;
}

char *
etcd_key_join(const char *prefix, size_t plen, const void *name, size_t len,
              const char *suffix, size_t slen, size_t *klen)
{
    size_t n = plen + len + slen;
    char *k = malloc(n + 1);

    if (k == NULL) {
        return NULL;
    }
    memcpy(k, prefix, plen);
    memcpy(k + plen, name, len);
    memcpy(k + plen + len, suffix, slen);
    k[n] = '\0';
    *klen = n;
    return k;
}

bool
etcd_key_is(const json_t *s, const void *key, size_t klen)
{
    /* etcd_unb64 wants room for three bytes a group: a base64 text of
     * klen bytes needs no more than klen + 2. */
    size_t cap = klen + 2;
    unsigned char *buf = malloc(cap);
    int n = buf != NULL ? etcd_unb64(s, buf, cap) : -1;
    bool same = n >= 0 && (size_t)n == klen && memcmp(buf, key, klen) == 0;

    free(buf);
    return same;
}

bool
etcd_int(const json_t *obj, const char *key, int64_t *out)
{
    json_t *v = json_object_get(obj, key);
    const char *p = json_string_value(v);
    size_t len = json_string_length(v);
    bool neg = p != NULL && len > 0 && *p == '-';
    uint64_t n;

    if (v == NULL) {
        *out = 0;
        return true;
    }
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return true;
    }
    if (p == NULL || !ascii_udec(p + neg, len - neg, 19, INT64_MAX, &n)) {
        return false;
    }
    *out = neg ? -(int64_t)n : (int64_t)n;
    return true;
}

bool
etcd_ttl(const json_t *obj, const char *key, int64_t *out)
{
    int64_t s = 0;

    if (!etcd_int(obj, key, &s) || s > ETCD_TTL_MAX || s < -ETCD_TTL_MAX) {
        return false;
    }
    *out = s;
    return true;
}

bool
etcd_rev(const json_t *obj, const char *key, int64_t *out)
{
    int64_t v = 0;

    if (!etcd_int(obj, key, &v) || v == INT64_MAX) {
        return false;
    }
    *out = v;
    return true;
}

json_t *
etcd_mark_json(int64_t mark)
{
    char v[20];

    snprintf(v, sizeof(v), "%019" PRId64, mark);
    return etcd_b64(v, 19);
}

bool
etcd_mark_read(const json_t *kv, int64_t *out)
{
    unsigned char raw[24];

    return etcd_unb64(json_object_get(kv, "value"), raw, sizeof(raw)) == 19 &&
           ascii_dec_read((const char *)raw, 19, out);
}
