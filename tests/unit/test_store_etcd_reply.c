/* test_store_etcd_reply.c: etcd's answers to the etcd mark store, read
 * into each raise's and each get's answer, without etcd: a batch answered
 * from created, raised and read-back keys, the answers that refuse it
 * whole, the mark values a peer can send, at each length and with odd
 * bytes, and keys of each length matched by position. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../policies/token.h"
#include "../../proxy/clients/etcd_json.h"
#include "../../proxy/store/store_etcd_reply.h"
#include "batch_test.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* told, for the table's row what: named when it fails. */
static void
told_row(const char *what, bool ok, bool want_ok, int i, enum store_result res,
         int64_t mark)
{
    if (ok != want_ok || answers[i].calls != 1 || answers[i].res != res ||
        answers[i].mark != mark) {
        print_message("  %s: read %s, told %d with %lld\n", what,
                      ok ? "true" : "false", (int)answers[i].res,
                      (long long)answers[i].mark);
    }
    assert_int_equal(ok, want_ok);
    told(i, res, mark);
}

/* ---- etcd's answers, as the gateway writes them ---------------------- */

/* A 19-digit (or any) value as etcd sends it: base64. */
static json_t *
b64(const char *s, size_t len)
{
    json_t *v = etcd_b64(s, len);

    assert_non_null(v);
    return v;
}

static json_t *
b64s(const char *s)
{
    return b64(s, strlen(s));
}

/* The key was missing: created at the batch's top. */
static json_t *
created(void)
{
    return json_pack("{s:{s:b,s:[{s:{}}]}}", "response_txn", "succeeded", 1,
                     "responses", "response_put");
}

/* The key was below the top: raised to it. */
static json_t *
raised(void)
{
    return json_pack("{s:{s:[{s:{s:b,s:[{s:{}}]}}]}}", "response_txn",
                     "responses", "response_txn", "succeeded", 1, "responses",
                     "response_put");
}

/* The key was at or above the top: read back as kv (stolen). */
static json_t *
read_kv(json_t *kv)
{
    return json_pack("{s:{s:[{s:{s:[{s:{s:[o]}}]}}]}}", "response_txn",
                     "responses", "response_txn", "responses", "response_range",
                     "kvs", kv);
}

/* The key read back with value (stolen; NULL: no "value"). */
static json_t *
read_back(json_t *value)
{
    json_t *kv = json_pack("{s:s}", "key", "dGlkZW1hcmsvbWFya3Mvcg==");

    if (value != NULL) {
        json_object_set_new(kv, "value", value);
    }
    return read_kv(kv);
}

/* The outer transaction's answer: responses (stolen), in group order. */
static json_t *
txn(json_t *responses)
{
    return json_pack("{s:{s:s},s:b,s:o}", "header", "revision", "7",
                     "succeeded", 1, "responses", responses);
}

/* Answer batch from body (stolen) as store_etcd.c does: sorted, then
 * answered, or failed whole on false. Returns what the reader said. */
static bool
answer(struct batch_list *batch, json_t *body)
{
    struct batch_req *scratch[MAX_WAITERS];
    bool ok;

    assert_non_null(body);
    batch_sort(batch, scratch);
    ok = etcd_marks_answer_raises(batch, body);
    if (ok) {
        batch_answer(batch);
    } else {
        batch_fail(batch);
    }
    assert_null(batch->head);
    json_decref(body);
    return ok;
}

/* A get answered from body (stolen) as store_etcd.c does. */
static bool
answer_get(json_t *body)
{
    struct batch_list l = {0};
    struct batch_req *r =
        batch_req_new("r", 1, NULL, 0, 0, true, on_answer, (void *)0);
    bool ok;

    assert_non_null(r);
    assert_non_null(body);
    QUEUE_PUSH(&l, r);
    ok = etcd_marks_answer_get(r, body);
    if (ok) {
        batch_answer(&l);
    } else {
        batch_fail(&l);
    }
    json_decref(body);
    return ok;
}

/* ---- raises ---------------------------------------------------------- */

/* Three keys, several raises each: a created at its top, b raised to
 * its top, c read back at 9 (above its top), d read back at its top. */
static void
test_raises_created_raised_read_back(void **state)
{
    struct batch_list batch = {0};

    (void)state;
    reset();
    push_call(&batch, "c", 1, 5, false, 0);
    push_call(&batch, "a", 1, 2, false, 1);
    push_call(&batch, "b", 1, 7, false, 2);
    push_call(&batch, "a", 1, 3, false, 3);
    push_call(&batch, "d", 1, 4, false, 4);
    push_call(&batch, "c", 1, 1, false, 5);
    push_call(&batch, "b", 1, 7, false, 6);
    push_call(&batch, "b", 1, 6, false, 7);
    push_call(&batch, "d", 1, 2, false, 8);
    assert_true(
        answer(&batch, txn(json_pack("[o,o,o,o]", created(), raised(),
                                     read_back(b64s("0000000000000000009")),
                                     read_back(b64s("0000000000000000004"))))));
    told(1, STORE_STALE, 3); /* a: created at 3 */
    told(3, STORE_ACCEPTED, 3);
    told(2, STORE_ACCEPTED, 7); /* b: raised to 7, twice */
    told(6, STORE_ACCEPTED, 7);
    told(7, STORE_STALE, 7);
    told(0, STORE_STALE, 9); /* c: at 9 already */
    told(5, STORE_STALE, 9);
    told(4, STORE_ACCEPTED, 4); /* d: at 4 already */
    told(8, STORE_STALE, 4);
}

/* A key read back below its group's top cannot be etcd's answer to the
 * transaction: that key's raises are refused, every one of them; the
 * keys before and after it are answered (a mark held by one resource
 * does not refuse the resources batched with it). */
static void
test_range_below_top_refuses_its_key(void **state)
{
    struct batch_list batch = {0};

    (void)state;
    reset();
    push_call(&batch, "a", 1, 5, false, 0);
    push_call(&batch, "b", 1, 8, false, 1);
    push_call(&batch, "b", 1, 2, false, 2);
    push_call(&batch, "c", 1, 1, false, 3);
    assert_true(answer(
        &batch,
        txn(json_pack("[o,o,o]", created(),
                      read_back(b64s("0000000000000000007")), created()))));
    told(0, STORE_ACCEPTED, 5);
    told(1, STORE_ERROR, 0);
    told(2, STORE_ERROR, 0);
    told(3, STORE_ACCEPTED, 1);
}

/* Fewer responses than keys: every raise is refused. */
static void
test_missing_response_refuses_batch(void **state)
{
    struct batch_list batch = {0};

    (void)state;
    reset();
    push_call(&batch, "a", 1, 5, false, 0);
    push_call(&batch, "b", 1, 6, false, 1);
    push_call(&batch, "c", 1, 7, false, 2);
    assert_false(answer(&batch, txn(json_pack("[o,o]", created(), created()))));
    for (int i = 0; i < 3; i++) {
        told(i, STORE_ERROR, 0);
    }
}

/* A key's response without its nested transaction: every raise is
 * refused. */
static void
test_missing_nested_response_refuses_batch(void **state)
{
    struct batch_list batch = {0};

    (void)state;
    reset();
    push_call(&batch, "a", 1, 5, false, 0);
    push_call(&batch, "b", 1, 6, false, 1);
    assert_false(answer(
        &batch, txn(json_pack("[o,{s:{s:[{s:{}}]}}]", created(), "response_txn",
                              "responses", "response_range"))));
    told(0, STORE_ERROR, 0);
    told(1, STORE_ERROR, 0);
}

/* The outer transaction did not succeed (proto3 leaves false out): every
 * raise is refused, whatever the responses say. */
static void
test_outer_not_succeeded_refuses_all(void **state)
{
    struct batch_list batch = {0};

    (void)state;
    reset();
    push_call(&batch, "a", 1, 5, false, 0);
    push_call(&batch, "a", 1, 4, false, 1);
    assert_false(answer(&batch, json_pack("{s:[o]}", "responses", created())));
    told(0, STORE_ERROR, 0);
    told(1, STORE_ERROR, 0);
    reset();
    push_call(&batch, "a", 1, 5, false, 0);
    assert_false(answer(&batch, json_pack("{s:b,s:[o]}", "succeeded", 0,
                                          "responses", created())));
    told(0, STORE_ERROR, 0);
}

/* ---- gets ------------------------------------------------------------ */

static void
test_get_no_kvs_is_zero(void **state)
{
    (void)state;
    reset();
    assert_true(answer_get(json_pack("{s:{s:s}}", "header", "revision", "7")));
    told(0, STORE_ACCEPTED, 0);
    reset();
    assert_true(answer_get(json_pack("{s:[]}", "kvs")));
    told(0, STORE_ACCEPTED, 0);
}

static void
test_get_mark(void **state)
{
    (void)state;
    reset();
    assert_true(answer_get(json_pack("{s:[{s:s,s:o}]}", "kvs", "key", "cg==",
                                     "value", b64s("0000000000000000042"))));
    told(0, STORE_ACCEPTED, 42);
}

static void
test_get_bad_value_refused(void **state)
{
    (void)state;
    reset();
    assert_false(answer_get(json_pack("{s:[{s:s,s:o}]}", "kvs", "key",
                                      "cg==", "value", b64s("42"))));
    told(0, STORE_ERROR, 0);
}

/* kvs that is no array is no range's answer: the get is refused, not
 * read as a key with no mark yet. */
static void
test_get_kvs_not_array_refused(void **state)
{
    (void)state;
    reset();
    assert_false(answer_get(json_pack("{s:{s:s}}", "kvs", "key", "cg==")));
    told(0, STORE_ERROR, 0);
    reset();
    assert_false(answer_get(json_pack("{s:s}", "kvs", "")));
    told(0, STORE_ERROR, 0);
    reset();
    assert_false(answer_get(json_pack("{s:n}", "kvs")));
    told(0, STORE_ERROR, 0);
}

/* ---- what etcd may send as a mark ------------------------------------ */

enum value_kind {
    V_B64 = 0, /* raw, base64 */
    V_TEXT,    /* raw as it is: no base64 */
    V_NUMBER,
    V_NULL,
    V_OBJECT,
    V_NONE, /* no "value" */
};

static const struct {
    const char *what;
    enum value_kind kind;
    const char *raw;
    size_t len;
    int64_t get;   /* the get's mark; -1: refused */
    int64_t raise; /* the raise of 5's mark (with one of 2); -1: refused */
} values[] = {
    {"0 digits", V_B64, "", 0, -1, -1},
    {"1 digit", V_B64, "9", 1, -1, -1},
    {"18 digits", V_B64, "000000000000000009", 18, -1, -1},
    {"19 digits", V_B64, "0000000000000000009", 19, 9, 9},
    {"19 digits, the top", V_B64, "0000000000000000005", 19, 5, 5},
    {"19 digits, below the top", V_B64, "0000000000000000004", 19, 4, -1},
    {"19 zeros", V_B64, "0000000000000000000", 19, 0, -1},
    {"20 digits", V_B64, "00000000000000000009", 20, -1, -1},
    {"INT64_MAX", V_B64, "9223372036854775807", 19, INT64_MAX, INT64_MAX},
    {"INT64_MAX + 1", V_B64, "9223372036854775808", 19, -1, -1},
    {"19 nines", V_B64, "9999999999999999999", 19, -1, -1},
    {"a letter", V_B64, "000000000000000000x", 19, -1, -1},
    {"a sign", V_B64, "-000000000000000009", 19, -1, -1},
    {"a plus", V_B64, "+000000000000000009", 19, -1, -1},
    {"a blank", V_B64, " 000000000000000009", 19, -1, -1},
    {"a NUL", V_B64,
     "000000000"
     "\0"
     "000000009",
     19, -1, -1},
    {"a 0xff", V_B64,
     "000000000"
     "\xff"
     "000000009",
     19, -1, -1},
    {"a newline", V_B64, "000000000000000009\n", 19, -1, -1},
    {"not base64", V_TEXT, "0000000000000000009", 19, -1, -1},
    {"base64 with a bad byte", V_TEXT, "MDAwMDAwMDAw!DAwMDAwMDAwOQ==", 28, -1,
     -1},
    {"base64 unpadded", V_TEXT, "MDAwMDAwMDAwMDAwMDAwMDAwOQ", 26, -1, -1},
    {"base64 padded inside", V_TEXT, "MDAwMDAwMD==MDAwMDAwMDAwOQ==", 28, -1,
     -1},
    {"a number", V_NUMBER, NULL, 0, -1, -1},
    {"null", V_NULL, NULL, 0, -1, -1},
    {"an object", V_OBJECT, NULL, 0, -1, -1},
    {"no value", V_NONE, NULL, 0, -1, -1},
};

static json_t *
value_of(size_t i)
{
    switch (values[i].kind) {
    case V_B64:
        return b64(values[i].raw, values[i].len);
    case V_TEXT:
        return json_stringn(values[i].raw, values[i].len);
    case V_NUMBER:
        return json_integer(9);
    case V_NULL:
        return json_null();
    case V_OBJECT:
        return json_pack("{s:s}", "value", "MDAwMDAwMDAwMDAwMDAwMDAwOQ==");
    case V_NONE:
        return NULL;
    }
    return NULL;
}

/* A key read back with each value: raises of 5 and 2 on it. */
static void
test_read_back_values(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(values); i++) {
        struct batch_list batch = {0};
        int64_t m = values[i].raise;
        bool ok;

        reset();
        push_call(&batch, "r", 1, 5, false, 0);
        push_call(&batch, "r", 1, 2, false, 1);
        ok = answer(&batch, txn(json_pack("[o]", read_back(value_of(i)))));
        if (m < 0) {
            told_row(values[i].what, ok, true, 0, STORE_ERROR, 0);
            told_row(values[i].what, ok, true, 1, STORE_ERROR, 0);
            continue;
        }
        told_row(values[i].what, ok, true, 0,
                 m == 5 ? STORE_ACCEPTED : STORE_STALE, m);
        told_row(values[i].what, ok, true, 1, STORE_STALE, m);
    }
}

/* A get's key read with each value. */
static void
test_get_values(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(values); i++) {
        json_t *kv = json_pack("{s:s}", "key", "cg==");
        json_t *v = value_of(i);
        int64_t m = values[i].get;
        bool ok;

        if (v != NULL) {
            json_object_set_new(kv, "value", v);
        }
        reset();
        ok = answer_get(json_pack("{s:[o]}", "kvs", kv));
        told_row(values[i].what, ok, m >= 0, 0,
                 m >= 0 ? STORE_ACCEPTED : STORE_ERROR, m >= 0 ? m : 0);
    }
}

/* A value far longer than a mark is refused (before it is decoded). */
static void
test_long_value_refused(void **state)
{
    size_t n = 4096;
    char *raw = malloc(n);
    struct batch_list batch = {0};

    (void)state;
    assert_non_null(raw);
    memset(raw, '9', n);
    reset();
    assert_false(
        answer_get(json_pack("{s:[{s:o}]}", "kvs", "value", b64(raw, n))));
    told(0, STORE_ERROR, 0);
    reset();
    push_call(&batch, "r", 1, 5, false, 0);
    assert_true(answer(&batch, txn(json_pack("[o]", read_back(b64(raw, n))))));
    told(0, STORE_ERROR, 0);
    free(raw);
}

/* ---- keys ------------------------------------------------------------ */

/* Keys of 1, 20, 300, TOKEN_RES_MAX and one more bytes, with NUL, 0xff
 * and newline bytes, queued out of order: each key's raises get the
 * answer at its position in byte order (the keys in etcd's answer are not
 * read), whatever the key's bytes. In byte order: k20 (NUL first), k1
 * ("\n"), k300 ("\n" then NUL), kmax (0xff), kmax1 (0xff, then NUL). */
static void
test_keys_matched_by_position(void **state)
{
    static char k1[1] = {'\n'};
    static char k20[20], k300[300], kmax[TOKEN_RES_MAX];
    static char kmax1[TOKEN_RES_MAX + 1];
    struct batch_list batch = {0};

    (void)state;
    memset(k20, '\xff', sizeof(k20));
    k20[0] = '\0';
    k20[10] = '\n';
    memset(k300, '\0', sizeof(k300));
    k300[0] = '\n';
    k300[299] = '\xff';
    memset(kmax, '\xff', sizeof(kmax));
    kmax[100] = '\n';
    memcpy(kmax1, kmax, sizeof(kmax));
    kmax1[TOKEN_RES_MAX] = '\0';
    reset();
    push_call(&batch, kmax1, sizeof(kmax1), 50, false, 0);
    push_call(&batch, k300, sizeof(k300), 30, false, 1);
    push_call(&batch, k1, sizeof(k1), 20, false, 2);
    push_call(&batch, kmax, sizeof(kmax), 40, false, 3);
    push_call(&batch, k20, sizeof(k20), 10, false, 4);
    push_call(&batch, k300, sizeof(k300), 31, false, 5);
    push_call(&batch, kmax1, sizeof(kmax1), 49, false, 6);
    push_call(&batch, k1, sizeof(k1), 20, false, 7);
    assert_true(answer(
        &batch,
        txn(json_pack("[o,o,o,o,o]", read_back(b64s("0000000000000000011")),
                      created(), read_back(b64s("0000000000000000032")),
                      raised(), read_back(b64s("0000000000000000050"))))));
    told(4, STORE_STALE, 11);    /* k20: read back at 11 */
    told(2, STORE_ACCEPTED, 20); /* k1: created at 20 */
    told(7, STORE_ACCEPTED, 20);
    told(1, STORE_STALE, 32); /* k300: read back at 32 */
    told(5, STORE_STALE, 32);
    told(3, STORE_ACCEPTED, 40); /* kmax: raised to 40 */
    told(0, STORE_ACCEPTED, 50); /* kmax1: read back at its top */
    told(6, STORE_STALE, 50);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raises_created_raised_read_back),
        cmocka_unit_test(test_range_below_top_refuses_its_key),
        cmocka_unit_test(test_missing_response_refuses_batch),
        cmocka_unit_test(test_missing_nested_response_refuses_batch),
        cmocka_unit_test(test_outer_not_succeeded_refuses_all),
        cmocka_unit_test(test_get_no_kvs_is_zero),
        cmocka_unit_test(test_get_mark),
        cmocka_unit_test(test_get_bad_value_refused),
        cmocka_unit_test(test_get_kvs_not_array_refused),
        cmocka_unit_test(test_read_back_values),
        cmocka_unit_test(test_get_values),
        cmocka_unit_test(test_long_value_refused),
        cmocka_unit_test(test_keys_matched_by_position),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
