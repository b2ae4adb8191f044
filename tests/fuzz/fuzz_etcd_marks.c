/* fuzz_etcd_marks.c: libFuzzer target for what the etcd mark store makes
 * of etcd's answers (proxy/store/store_etcd_reply.c, on batch.c and
 * etcd_json.c): each raise's answer from a transaction's, a get's from a
 * range's. The input:
 * - byte 0: the number of keys, 1 + (b & 7); byte 1: the number of
 *   raises, 1 + b % 32;
 * - each key: a length byte c, then c bytes of key (c < 0xf0), or, for
 *   c >= 0xf0, one fill byte making a long key of a length from a table
 *   (1 to 4,097 bytes); keys may repeat and hold any byte;
 * - each raise: one byte, the key (b & 7) % keys and a token from a small
 *   set (b >> 5), so that a key's group often holds raises below its
 *   top and several at it;
 * - the rest: etcd's answer, a JSON object (as etcd_http hands it: a
 *   body that does not parse as an object never reaches the store).
 * The raises are sorted with batch_sort, as the store sends them, and
 * answered as the store does (etcd_marks_answer_raises, then batch_answer,
 * or batch_fail on false); one get of the first key is answered from the
 * same body (etcd_marks_answer_get). Invariants, on every input:
 * - every call is answered exactly once;
 * - the answers are an oracle's, written apart from the code (its own
 *   sort, JSON walk, base64 and decimal): when body.succeeded is not true,
 *   all refused; else group u (the u-th distinct key in byte order, T its
 *   highest token) has the mark T when responses[u].response_txn
 *   succeeded or its responses[0].response_txn did, else the mark read
 *   from that one's responses[0].response_range.kvs[0]; a group with no
 *   such response refuses the whole batch, a mark missing, malformed or
 *   below T the group's raises only; a raise at its group's mark is
 *   accepted at it, one below stale with it;
 * - whatever the oracle: accepted only at the raise's own token, stale
 *   only with a mark above it, refused with mark 0;
 * - the get: no kvs[0], accepted at 0; a kvs[0] holding a mark, accepted
 *   at it; any other kvs[0], or a kvs that is no array, refused (the
 *   store fails the call). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../../proxy/store/batch.h"
#include "../../proxy/store/store_etcd_reply.h"
#include "fuzz.h"

#define MAX_KEYS 8
#define MAX_RAISES 32

/* The lengths of the long keys (c >= 0xf0): around the store's 1,024
 * and TOKEN_RES_MAX's 4,096. */
static const size_t long_lens[16] = {1,    2,    19,   20,   21,   255,
                                     256,  300,  1023, 1024, 1025, 2048,
                                     4095, 4096, 4097, 3};

/* Tokens: small ones close together (equal, lower and higher common) and
 * the top of int64. */
static const int64_t tokens[8] = {
    1, 2, 5, 7, 9, 1000000, INT64_MAX - 1, INT64_MAX,
};

/* What one call was told. */
struct rec {
    int calls;
    enum store_result res;
    int64_t mark;
};

struct key {
    const char *p;
    size_t len;
    char *own; /* a long key's bytes (malloc) */
};

static void
on_answer(void *arg, enum store_result res, int64_t mark)
{
    struct rec *r = arg;

    r->calls++;
    r->res = res;
    r->mark = mark;
}

/* ---- the oracle: jansson's getters only, each type checked here ------ */

static const json_t *
o_get(const json_t *o, const char *k)
{
    return json_is_object(o) ? json_object_get(o, k) : NULL;
}

static const json_t *
a_get(const json_t *a, size_t i)
{
    return json_is_array(a) && i < json_array_size(a) ? json_array_get(a, i)
                                                      : NULL;
}

/* o.responses[i].<type>, or NULL. */
static const json_t *
o_resp(const json_t *o, size_t i, const char *type)
{
    return o_get(a_get(o_get(o, "responses"), i), type);
}

static int
b64_val(char c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    if (c == '+') {
        return 62;
    }
    if (c == '/') {
        return 63;
    }
    return -1;
}

/* s (len bytes) as base64 into out (24 bytes): the decoded length, or
 * -1. The text is at most 32 bytes (the reader's room), a multiple of 4;
 * OpenSSL skips spaces and tabs before it; '=' only as the last one or
 * two, as padding. Only a 19-byte answer matters here: lengths that
 * cannot give 19 may be refused where the code reads them. */
static int
oracle_unb64(const char *s, size_t len, unsigned char *out)
{
    size_t w = 0, pad = 0, n = 0;

    if (len % 4 != 0 || len > 32) {
        return -1;
    }
    while (w < len && (s[w] == ' ' || s[w] == '\t')) {
        w++;
    }
    if ((len - w) % 4 != 0) {
        return -1;
    }
    if (len - w >= 1 && s[len - 1] == '=') {
        pad = len - w >= 2 && s[len - 2] == '=' ? 2 : 1;
    }
    for (size_t i = w; i < len; i += 4) {
        uint32_t v = 0;

        for (size_t k = 0; k < 4; k++) {
            int d = b64_val(s[i + k]);

            if (d < 0 && !(s[i + k] == '=' && i + k >= len - pad)) {
                return -1;
            }
            v = v << 6 | (uint32_t)(d < 0 ? 0 : d);
        }
        out[n++] = (unsigned char)(v >> 16);
        out[n++] = (unsigned char)(v >> 8);
        out[n++] = (unsigned char)v;
    }
    return (int)(n - pad);
}

/* The mark in kv's "value": base64 of exactly 19 ASCII digits, their
 * number at most INT64_MAX. */
static bool
oracle_mark(const json_t *kv, int64_t *out)
{
    const json_t *v = o_get(kv, "value");
    unsigned char raw[24];
    uint64_t n = 0;

    if (!json_is_string(v) ||
        oracle_unb64(json_string_value(v), json_string_length(v), raw) != 19) {
        return false;
    }
    for (size_t i = 0; i < 19; i++) {
        if (raw[i] < '0' || raw[i] > '9') {
            return false;
        }
        n = n * 10 + (uint64_t)(raw[i] - '0'); /* < 10^19 < 2^64 */
    }
    if (n > (uint64_t)INT64_MAX) {
        return false;
    }
    *out = (int64_t)n;
    return true;
}

/* Keys in byte order, a key before the longer ones it starts. */
static int
oracle_cmp(const struct key *a, const struct key *b)
{
    size_t n = a->len < b->len ? a->len : b->len;

    for (size_t i = 0; i < n; i++) {
        unsigned char x = (unsigned char)a->p[i], y = (unsigned char)b->p[i];

        if (x != y) {
            return x < y ? -1 : 1;
        }
    }
    return a->len < b->len ? -1 : a->len > b->len;
}

/* The group of each raise (the rank of its key among the distinct keys
 * the raises use), and the number of groups. */
static size_t
oracle_groups(const struct key *keys, size_t nkeys, const size_t *kidx,
              size_t n, size_t *group)
{
    size_t same[MAX_KEYS], rank[MAX_KEYS], ngroups = 0;
    bool used[MAX_KEYS] = {false};

    for (size_t k = 0; k < nkeys; k++) {
        same[k] = k; /* the first key with k's bytes */
        for (size_t j = 0; j < k && same[k] == k; j++) {
            if (oracle_cmp(&keys[j], &keys[k]) == 0) {
                same[k] = j;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        used[same[kidx[i]]] = true;
    }
    for (size_t k = 0; k < nkeys; k++) {
        rank[k] = 0;
        for (size_t j = 0; j < nkeys && used[k]; j++) {
            rank[k] += used[j] && oracle_cmp(&keys[j], &keys[k]) < 0;
        }
        ngroups += used[k];
    }
    for (size_t i = 0; i < n; i++) {
        group[i] = rank[same[kidx[i]]];
    }
    return ngroups;
}

/* Group u's mark from body, top its highest token: GROUP_MARK with
 * *mark; GROUP_REFUSED when the mark read back is missing, malformed or
 * below top (the group's raises refused, the others answered);
 * BATCH_REFUSED when a response the batch needs is missing. */
enum group_answer { BATCH_REFUSED, GROUP_REFUSED, GROUP_MARK };

static enum group_answer
oracle_group_mark(const json_t *body, size_t u, int64_t top, int64_t *mark)
{
    const json_t *rt = o_resp(body, u, "response_txn");
    const json_t *inner;

    if (rt == NULL) {
        return BATCH_REFUSED;
    }
    if (json_is_true(o_get(rt, "succeeded"))) {
        *mark = top; /* created */
        return GROUP_MARK;
    }
    inner = o_resp(rt, 0, "response_txn");
    if (inner == NULL) {
        return BATCH_REFUSED;
    }
    if (json_is_true(o_get(inner, "succeeded"))) {
        *mark = top; /* raised */
        return GROUP_MARK;
    }
    return oracle_mark(
               a_get(o_get(o_resp(inner, 0, "response_range"), "kvs"), 0),
               mark) &&
                   *mark >= top
               ? GROUP_MARK
               : GROUP_REFUSED;
}

/* ---- the calls ------------------------------------------------------- */

static void
answer_is_sane(const struct rec *r, int64_t token)
{
    check(r->calls == 1, "a call answered other than once");
    switch (r->res) {
    case STORE_ACCEPTED:
        check(r->mark == token, "accepted at a mark other than its token");
        break;
    case STORE_STALE:
        check(r->mark > token, "stale with a mark not above its token");
        break;
    case STORE_ERROR:
        check(r->mark == 0, "refused with a mark");
        break;
    default:
        fail("an answer that is none of accepted, stale, refused");
    }
}

static void
raises_match_oracle(const struct key *keys, size_t nkeys, const size_t *kidx,
                    const int64_t *tok, size_t n, const json_t *body)
{
    struct batch_list batch = {0};
    struct batch_req *scratch[MAX_RAISES];
    struct rec recs[MAX_RAISES] = {{0}};
    size_t group[MAX_RAISES];
    int64_t top[MAX_RAISES], mark[MAX_RAISES];
    bool answered[MAX_RAISES];
    size_t ngroups = oracle_groups(keys, nkeys, kidx, n, group);
    bool ok = json_is_true(o_get(body, "succeeded"));

    for (size_t i = 0; i < n; i++) {
        const struct key *k = &keys[kidx[i]];
        struct batch_req *r = batch_req_new(k->p, k->len, NULL, 0, tok[i],
                                            false, on_answer, &recs[i]);

        check(r != NULL, "out of memory");
        QUEUE_PUSH(&batch, r);
    }
    check(batch_sort(&batch, scratch) == ngroups,
          "batch_sort counts other keys than the oracle");
    for (size_t u = 0; u < ngroups; u++) {
        top[u] = INT64_MIN;
        for (size_t i = 0; i < n; i++) {
            if (group[i] == u && tok[i] > top[u]) {
                top[u] = tok[i];
            }
        }
        if (ok) {
            enum group_answer g = oracle_group_mark(body, u, top[u], &mark[u]);

            ok = g != BATCH_REFUSED;
            answered[u] = g == GROUP_MARK;
        }
    }
    if (etcd_marks_answer_raises(&batch, body)) {
        check(ok, "a batch answered that the oracle refuses");
        batch_answer(&batch);
    } else {
        check(!ok, "a batch refused that the oracle answers");
        batch_fail(&batch);
    }
    check(batch.head == NULL, "a call left in the batch");
    for (size_t i = 0; i < n; i++) {
        const struct rec *r = &recs[i];

        answer_is_sane(r, tok[i]);
        if (!ok) {
            check(r->res == STORE_ERROR, "a raise answered in a refused batch");
            continue;
        }
        if (!answered[group[i]]) {
            check(r->res == STORE_ERROR,
                  "a raise answered from a mark read back that is none");
            continue;
        }
        if (tok[i] == mark[group[i]]) {
            check(r->res == STORE_ACCEPTED && r->mark == tok[i],
                  "a raise at its group's mark not accepted");
        } else {
            check(tok[i] < mark[group[i]], "the oracle's mark below a token");
            check(r->res == STORE_STALE && r->mark == mark[group[i]],
                  "a raise below its group's mark not stale with it");
        }
    }
}

/* A get of key, answered as the store does: batch_fail on false. */
static void
get_matches_oracle(const struct key *key, const json_t *body)
{
    struct batch_list l = {0};
    struct rec rec = {0};
    const json_t *kvs = o_get(body, "kvs");
    const json_t *kv = a_get(kvs, 0);
    int64_t want = 0;
    bool ok = (kvs == NULL || json_is_array(kvs)) &&
              (kv == NULL || oracle_mark(kv, &want));
    struct batch_req *r =
        batch_req_new(key->p, key->len, NULL, 0, 0, true, on_answer, &rec);

    check(r != NULL, "out of memory");
    QUEUE_PUSH(&l, r);
    if (etcd_marks_answer_get(r, body)) {
        check(ok, "a get answered that the oracle refuses");
        batch_answer(&l);
    } else {
        check(!ok, "a get refused that the oracle answers");
        batch_fail(&l);
    }
    check(rec.calls == 1, "a get answered other than once");
    check(rec.res == STORE_ACCEPTED ? rec.mark >= 0
                                    : rec.res == STORE_ERROR && rec.mark == 0,
          "a get answered other than accepted at a mark, or refused");
    if (ok) {
        check(rec.res == STORE_ACCEPTED && rec.mark == want,
              "a get not accepted at the oracle's mark");
    } else {
        check(rec.res == STORE_ERROR, "a get answered from no mark");
    }
}

/* The keys from data at *at; false when the input ends first. */
static bool
read_keys(const uint8_t *data, size_t size, size_t *at, struct key *keys,
          size_t nkeys)
{
    for (size_t k = 0; k < nkeys; k++) {
        size_t c;

        if (*at >= size) {
            return false;
        }
        c = data[(*at)++];
        if (c < 0xf0) {
            c = c < size - *at ? c : size - *at;
            keys[k].p = (const char *)data + *at;
            keys[k].len = c;
            *at += c;
        } else {
            size_t len = long_lens[c - 0xf0];

            if (*at >= size) {
                return false;
            }
            keys[k].own = malloc(len);
            check(keys[k].own != NULL, "out of memory");
            memset(keys[k].own, data[(*at)++], len);
            keys[k].p = keys[k].own;
            keys[k].len = len;
        }
    }
    return true;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct key keys[MAX_KEYS] = {{0}};
    size_t kidx[MAX_RAISES];
    int64_t tok[MAX_RAISES];
    size_t nkeys, n, at = 2;
    json_t *body = NULL;

    if (size < 2) {
        return 0;
    }
    nkeys = 1 + (data[0] & 7);
    n = 1 + data[1] % MAX_RAISES;
    if (read_keys(data, size, &at, keys, nkeys) && size - at >= n) {
        for (size_t i = 0; i < n; i++) {
            uint8_t b = data[at++];

            kidx[i] = (size_t)(b & 7) % nkeys;
            tok[i] = tokens[b >> 5];
        }
        body = json_loadb((const char *)data + at, size - at, 0, NULL);
    }
    if (json_is_object(body)) {
        raises_match_oracle(keys, nkeys, kidx, tok, n, body);
        get_matches_oracle(&keys[0], body);
    }
    json_decref(body);
    for (size_t k = 0; k < nkeys; k++) {
        free(keys[k].own);
    }
    return 0;
}
