/* test_store_postgres_reply.c: what the Postgres mark store answers each
 * raise and get from its statements' results (store_postgres_reply.c),
 * on results made with libpq's own constructors: rows that settle their
 * keys, results that refuse, the lengths and bytes of resource names,
 * and the text of fences. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <libpq-fe.h>
#include <openssl/sha.h>

#include "../../policies/ascii.h"
#include "../../policies/token.h"
#include "../../proxy/store/store_postgres_reply.h"
#include "batch_test.h"

#define OID_TEXT 25
#define OID_INT8 20

/* A value of a cell: its bytes; p NULL: SQL NULL. */
struct val {
    const char *p;
    size_t n;
};

#define V(s)                                                                   \
    {                                                                          \
        (s), sizeof(s) - 1                                                     \
    }
#define VNULL                                                                  \
    {                                                                          \
        NULL, 0                                                                \
    }

/* A result of status st with ncols columns and nrows rows of cells,
 * row by row, as a server would send it. */
static PGresult *
make_result(ExecStatusType st, int ncols, int nrows, const struct val *cells)
{
    PGresAttDesc cols[4];
    PGresult *res = PQmakeEmptyPGresult(NULL, st);

    assert_non_null(res);
    assert_true(ncols <= 4);
    memset(cols, 0, sizeof(cols));
    for (int c = 0; c < ncols; c++) {
        cols[c].name = (char *)(c == 0 && ncols == 2 ? "resource" : "fence");
        cols[c].typid = c == 0 && ncols == 2 ? OID_TEXT : OID_INT8;
        cols[c].typlen = c == 0 && ncols == 2 ? -1 : 8;
        cols[c].atttypmod = -1;
    }
    if (ncols > 0) {
        assert_true(PQsetResultAttrs(res, ncols, cols));
    }
    for (int r = 0; r < nrows; r++) {
        for (int c = 0; c < ncols; c++) {
            const struct val *v = &cells[r * ncols + c];

            assert_true(PQsetvalue(res, r, c, (char *)v->p,
                                   v->p != NULL ? (int)v->n : -1));
        }
    }
    return res;
}

/* The upsert's answer: rows (resource, fence). */
static PGresult *
upsert_rows(int nrows, const struct val *cells)
{
    return make_result(PGRES_TUPLES_OK, 2, nrows, cells);
}

/* Queue waiter i's raise of key (klen bytes), the digest key the store
 * keeps for the resource name (nlen bytes), to token. */
static void
raise_named(struct batch_list *b, const char *name, size_t nlen,
            const char *key, size_t klen, int64_t token, int i)
{
    struct batch_req *r = batch_req_new(name, nlen, key, klen, token, false,
                                        on_answer, (void *)(intptr_t)i);

    assert_non_null(r);
    QUEUE_PUSH(b, r);
}

/* Sort b as the store sends it, answer it from res, run its callbacks;
 * frees res. */
static void
answer(struct batch_list *b, PGresult *res)
{
    struct batch_req *scratch[MAX_WAITERS];

    assert_true(b->n <= MAX_WAITERS);
    batch_sort(b, scratch);
    pg_marks_answer_raises(b, res);
    batch_answer(b);
    assert_null(b->head);
    PQclear(res);
}

static struct answer
get_answer(PGresult *res)
{
    struct batch_list one = {0};

    reset();
    push_call(&one, "doc", 3, 0, true, 0);
    pg_marks_answer_get(one.head, res);
    batch_answer(&one);
    PQclear(res);
    assert_int_equal(answers[0].calls, 1);
    return answers[0];
}

/* ---- raises ---------------------------------------------------------- */

/* Several keys, several raises each, rows in another order than the
 * keys': a raise at the row's fence is accepted, one below it stale
 * with the fence. */
static void
test_raises_accepted_and_stale(void **state)
{
    const struct val rows[] = {
        V("c"), V("4"), V("a"), V("5"), V("b"), V("9"),
    };
    struct batch_list b = {0};

    reset();
    push_call(&b, "a", 1, 3, false, 0);
    push_call(&b, "b", 1, 2, false, 1);
    push_call(&b, "a", 1, 5, false, 2);
    push_call(&b, "c", 1, 4, false, 3);
    push_call(&b, "a", 1, 1, false, 4);
    push_call(&b, "b", 1, 7, false, 5);
    push_call(&b, "a", 1, 5, false, 6);
    answer(&b, upsert_rows(3, rows));
    told(0, STORE_STALE, 5);
    told(1, STORE_STALE, 9);
    told(2, STORE_ACCEPTED, 5);
    told(3, STORE_ACCEPTED, 4);
    told(4, STORE_STALE, 5);
    told(5, STORE_STALE, 9);
    told(6, STORE_ACCEPTED, 5);
}

/* A key the rows do not name is refused; the others are answered. */
static void
test_raise_missing_key_refused(void **state)
{
    const struct val rows[] = {V("a"), V("3")};
    struct batch_list b = {0};

    reset();
    push_call(&b, "a", 1, 3, false, 0);
    push_call(&b, "b", 1, 3, false, 1);
    push_call(&b, "b", 1, 1, false, 2);
    answer(&b, upsert_rows(1, rows));
    told(0, STORE_ACCEPTED, 3);
    told(1, STORE_ERROR, 0);
    told(2, STORE_ERROR, 0);
}

/* A fence that is not a number (or NULL) refuses its key only. */
static void
test_raise_bad_fence_refuses_its_key(void **state)
{
    const struct val rows[] = {
        V("a"), V("x1"), V("b"), V("4"), V("c"), VNULL,
    };
    struct batch_list b = {0};

    reset();
    push_call(&b, "a", 1, 4, false, 0);
    push_call(&b, "b", 1, 4, false, 1);
    push_call(&b, "c", 1, 4, false, 2);
    push_call(&b, "b", 1, 2, false, 3);
    answer(&b, upsert_rows(3, rows));
    told(0, STORE_ERROR, 0);
    told(1, STORE_ACCEPTED, 4);
    told(2, STORE_ERROR, 0);
    told(3, STORE_STALE, 4);
}

/* A fence below a raise's token cannot answer it: refused. Nor can a
 * fence below the highest token asked for its key answer the key's
 * lower raises, though one of them equals it: the upsert did not raise
 * the mark as asked, so every raise of the key is refused. */
static void
test_raise_fence_below_token_refused(void **state)
{
    const struct val rows[] = {V("a"), V("6")};
    const struct val below_top[] = {V("a"), V("5"), V("b"), V("9")};
    struct batch_list b = {0};

    reset();
    push_call(&b, "a", 1, 7, false, 0);
    answer(&b, upsert_rows(1, rows));
    told(0, STORE_ERROR, 0);

    reset();
    push_call(&b, "a", 1, 5, false, 0);
    push_call(&b, "a", 1, 9, false, 1);
    push_call(&b, "b", 1, 9, false, 2);
    answer(&b, upsert_rows(2, below_top));
    told(0, STORE_ERROR, 0);
    told(1, STORE_ERROR, 0);
    told(2, STORE_ACCEPTED, 9);
}

/* Another column count than (resource, fence) refuses every raise, even
 * with rows that would answer them. */
static void
test_raises_wrong_columns_refused(void **state)
{
    static const struct {
        int ncols, nrows;
        struct val cells[6];
    } cases[] = {
        {0, 0, {{0}}},
        {1, 2, {V("a"), V("b")}},
        {1, 1, {V("5")}},
        {3, 2, {V("a"), V("5"), V("5"), V("b"), V("5"), V("5")}},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct batch_list b = {0};

        reset();
        push_call(&b, "a", 1, 5, false, 0);
        push_call(&b, "b", 1, 5, false, 1);
        answer(&b, make_result(PGRES_TUPLES_OK, cases[i].ncols, cases[i].nrows,
                               cases[i].cells));
        told(0, STORE_ERROR, 0);
        told(1, STORE_ERROR, 0);
    }
}

/* A statement that did not return its rows refuses every raise. */
static void
test_raises_failed_status_refused(void **state)
{
    static const ExecStatusType statuses[] = {
        PGRES_COMMAND_OK,   PGRES_FATAL_ERROR,  PGRES_EMPTY_QUERY,
        PGRES_SINGLE_TUPLE, PGRES_BAD_RESPONSE,
    };
    const struct val rows[] = {V("a"), V("5")};

    for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
        struct batch_list b = {0};

        reset();
        push_call(&b, "a", 1, 5, false, 0);
        push_call(&b, "a", 1, 2, false, 1);
        answer(&b, make_result(statuses[i], 2, 1, rows));
        told(0, STORE_ERROR, 0);
        told(1, STORE_ERROR, 0);
    }
}

/* No row at all: every raise refused. */
static void
test_raises_no_rows_refused(void **state)
{
    struct batch_list b = {0};

    reset();
    push_call(&b, "a", 1, 5, false, 0);
    push_call(&b, "b", 1, 5, false, 1);
    answer(&b, upsert_rows(0, NULL));
    told(0, STORE_ERROR, 0);
    told(1, STORE_ERROR, 0);
}

/* ---- resource names: lengths and bytes -------------------------------- */

/* The keys a peer's resource names become, by length class and odd
 * bytes; the digest form is the store's for names it cannot keep as
 * text (here the name "a\0b"). */
struct key {
    const char *what;
    char *p;
    size_t n;
    bool digest;
};

static struct key keys[12];
static size_t nkeys;

static void
add_key(const char *what, const char *p, size_t n, bool digest)
{
    struct key *k = &keys[nkeys++];

    k->what = what;
    k->p = malloc(n + 1);
    assert_non_null(k->p);
    memcpy(k->p, p, n);
    k->n = n;
    k->digest = digest;
}

static void
add_filled(const char *what, size_t n)
{
    char *p = malloc(n);

    assert_non_null(p);
    for (size_t i = 0; i < n; i++) {
        p[i] = (char)('a' + i % 26);
    }
    add_key(what, p, n, false);
    free(p);
}

static int
keys_setup(void **state)
{
    unsigned char d[SHA256_DIGEST_LENGTH];
    char digest[8 + 2 * SHA256_DIGEST_LENGTH];

    nkeys = 0;
    add_key("1 byte", "k", 1, false);
    add_filled("21 bytes", 21);
    add_filled("300 bytes", 300);
    add_filled("TOKEN_RES_MAX bytes", TOKEN_RES_MAX);
    add_filled("TOKEN_RES_MAX + 1 bytes", TOKEN_RES_MAX + 1);
    SHA256((const unsigned char *)"a\0b", 3, d);
    memcpy(digest, "\x01sha256:", 8);
    ascii_hex(d, sizeof(d), digest + 8);
    add_key("digest", digest, sizeof(digest), true);
    add_key("NUL inside", "a\0b", 3, false);
    add_key("0xff", "\xff", 1, false);
    add_key("0xff inside",
            "doc\xff"
            "1",
            5, false);
    add_key("quotes", "\"doc\"'", 6, false);
    add_key("newline", "doc\nX-Fence: 9", 14, false);
    return 0;
}

static int
keys_teardown(void **state)
{
    for (size_t i = 0; i < nkeys; i++) {
        free(keys[i].p);
    }
    nkeys = 0;
    return 0;
}

static void
raise_key(struct batch_list *b, const struct key *k, int64_t token, int i)
{
    if (k->digest) {
        raise_named(b, "a\0b", 3, k->p, k->n, token, i);
    } else {
        push_call(b, k->p, k->n, token, false, i);
    }
}

/* Every class in one batch, each at its own token, the rows in reverse:
 * each key is answered by its own row, none by another's. */
static void
test_key_classes_answered(void **state)
{
    struct val rows[2 * 12];
    char fences[12][4];
    struct batch_list b = {0};

    reset();
    for (size_t i = 0; i < nkeys; i++) {
        size_t r = nkeys - 1 - i;
        int n = snprintf(fences[i], sizeof(fences[i]), "%zu", i + 1);

        raise_key(&b, &keys[i], (int64_t)i + 1, (int)i);
        raise_key(&b, &keys[i], (int64_t)i, (int)(nkeys + i));
        rows[2 * r] = (struct val){keys[i].p, keys[i].n};
        rows[2 * r + 1] = (struct val){fences[i], (size_t)n};
    }
    answer(&b, upsert_rows((int)nkeys, rows));
    for (size_t i = 0; i < nkeys; i++) {
        print_message("key %s\n", keys[i].what);
        told((int)i, STORE_ACCEPTED, (int64_t)i + 1);
        told((int)(nkeys + i), STORE_STALE, (int64_t)i + 1);
    }
}

/* A row that names the key less its last byte, or the key and one byte
 * more (a NUL, an 'x'), does not settle the key: it stays refused. */
static void
test_key_near_misses_refused(void **state)
{
    static const char extra[] = {'\0', 'x'};

    for (size_t i = 0; i < nkeys; i++) {
        const struct key *k = &keys[i];
        char *more = malloc(k->n + 1);

        assert_non_null(more);
        memcpy(more, k->p, k->n);
        print_message("key %s\n", k->what);
        for (size_t v = 0; v <= sizeof(extra); v++) {
            struct val rows[] = {{k->p, k->n - 1}, V("5")};
            struct batch_list b = {0};

            if (v < sizeof(extra)) {
                more[k->n] = extra[v];
                rows[0] = (struct val){more, k->n + 1};
            }
            reset();
            raise_key(&b, k, 5, 0);
            answer(&b, upsert_rows(1, rows));
            told(0, STORE_ERROR, 0);
        }
        free(more);
    }
}

/* ---- fences ---------------------------------------------------------- */

/* A fence's text, and what it answers a raise of "doc" to 1 and a get
 * of "doc". */
struct fence_case {
    struct val text;
    bool parses;
    int64_t value;
    enum store_result raise_res; /* its mark: value, or 0 when refused */
    enum store_result get_res;
};

static const struct fence_case fence_cases[] = {
    {V("0"), true, 0, STORE_ERROR, STORE_ACCEPTED}, /* below the token */
    {V("1"), true, 1, STORE_ACCEPTED, STORE_ACCEPTED},
    {V("01"), true, 1, STORE_ACCEPTED, STORE_ACCEPTED},
    {V("2"), true, 2, STORE_STALE, STORE_ACCEPTED},
    {V("1000000000000000000"), true, 1000000000000000000, STORE_STALE,
     STORE_ACCEPTED}, /* 19 digits */
    {V("0000000000000000001"), true, 1, STORE_ACCEPTED, STORE_ACCEPTED},
    {V("9223372036854775807"), true, INT64_MAX, STORE_STALE, STORE_ACCEPTED},
    {V("9223372036854775808"), false, 0, STORE_ERROR, STORE_ERROR},
    {V("9999999999999999999"), false, 0, STORE_ERROR, STORE_ERROR},
    {V("10000000000000000000"), false, 0, STORE_ERROR, STORE_ERROR},
    {V("00000000000000000001"), false, 0, STORE_ERROR, STORE_ERROR},
    {V("-1"), false, 0, STORE_ERROR, STORE_ERROR},
    {V("-0"), false, 0, STORE_ERROR, STORE_ERROR},
    {V("+1"), false, 0, STORE_ERROR, STORE_ERROR},
    {V(" 1"), false, 0, STORE_ERROR, STORE_ERROR},
    {V("1 "), false, 0, STORE_ERROR, STORE_ERROR},
    {V(""), false, 0, STORE_ERROR, STORE_ERROR},
    {V("1a"), false, 0, STORE_ERROR, STORE_ERROR},
    {V("0x1"), false, 0, STORE_ERROR, STORE_ERROR},
    {V("1e3"), false, 0, STORE_ERROR, STORE_ERROR},
    {{"5\0", 2}, false, 0, STORE_ERROR, STORE_ERROR},
    {{"5\0junk", 6}, false, 0, STORE_ERROR, STORE_ERROR},
    {VNULL, false, 0, STORE_ERROR, STORE_ERROR},
};

static void
test_fence_parse(void **state)
{
    for (size_t i = 0; i < sizeof(fence_cases) / sizeof(fence_cases[0]); i++) {
        const struct fence_case *c = &fence_cases[i];
        int64_t v = -5;

        if (c->text.p == NULL) {
            continue;
        }
        print_message("fence \"%s\"\n", c->text.p);
        assert_int_equal(pg_marks_parse(c->text.p, c->text.n, &v), c->parses);
        assert_true(v == (c->parses ? c->value : -5)); /* untouched */
    }
}

static void
test_fence_classes_raise(void **state)
{
    for (size_t i = 0; i < sizeof(fence_cases) / sizeof(fence_cases[0]); i++) {
        const struct fence_case *c = &fence_cases[i];
        const struct val rows[] = {V("doc"), c->text};
        struct batch_list b = {0};

        reset();
        push_call(&b, "doc", 3, 1, false, 0);
        print_message("fence \"%s\"\n", c->text.p ? c->text.p : "NULL");
        answer(&b, upsert_rows(1, rows));
        told(0, c->raise_res, c->raise_res == STORE_ERROR ? 0 : c->value);
    }
}

static void
test_fence_classes_get(void **state)
{
    for (size_t i = 0; i < sizeof(fence_cases) / sizeof(fence_cases[0]); i++) {
        const struct fence_case *c = &fence_cases[i];
        struct answer w;

        print_message("fence \"%s\"\n", c->text.p ? c->text.p : "NULL");
        w = get_answer(make_result(PGRES_TUPLES_OK, 1, 1, &c->text));
        assert_int_equal(w.res, c->get_res);
        assert_true(w.mark == (c->get_res == STORE_ERROR ? 0 : c->value));
    }
}

/* ---- gets ------------------------------------------------------------ */

/* No row: the resource has no mark, 0. */
static void
test_get_no_row(void **state)
{
    struct answer w = get_answer(make_result(PGRES_TUPLES_OK, 1, 0, NULL));

    assert_int_equal(w.res, STORE_ACCEPTED);
    assert_true(w.mark == 0);
}

/* One row, one column: its mark. */
static void
test_get_one_row(void **state)
{
    const struct val row[] = {V("42")};
    struct answer w = get_answer(make_result(PGRES_TUPLES_OK, 1, 1, row));

    assert_int_equal(w.res, STORE_ACCEPTED);
    assert_true(w.mark == 42);
}

/* A value that is not a number, NULL, two rows, two columns or a failed
 * statement: refused. */
static void
test_get_bad_answer(void **state)
{
    static const struct {
        ExecStatusType st;
        int ncols, nrows;
        struct val cells[4];
    } cases[] = {
        {PGRES_TUPLES_OK, 1, 1, {V("4x")}},
        {PGRES_TUPLES_OK, 1, 1, {VNULL}},
        {PGRES_TUPLES_OK, 1, 2, {V("4"), V("4")}},
        {PGRES_TUPLES_OK, 2, 1, {V("4"), V("4")}},
        {PGRES_TUPLES_OK, 2, 1, {V("doc"), V("4")}},
        {PGRES_FATAL_ERROR, 1, 1, {V("4")}},
        {PGRES_COMMAND_OK, 0, 0, {{0}}},
        {PGRES_SINGLE_TUPLE, 1, 1, {V("4")}},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct answer w = get_answer(make_result(
            cases[i].st, cases[i].ncols, cases[i].nrows, cases[i].cells));

        assert_int_equal(w.res, STORE_ERROR);
        assert_true(w.mark == 0);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raises_accepted_and_stale),
        cmocka_unit_test(test_raise_missing_key_refused),
        cmocka_unit_test(test_raise_bad_fence_refuses_its_key),
        cmocka_unit_test(test_raise_fence_below_token_refused),
        cmocka_unit_test(test_raises_wrong_columns_refused),
        cmocka_unit_test(test_raises_failed_status_refused),
        cmocka_unit_test(test_raises_no_rows_refused),
        cmocka_unit_test_setup_teardown(test_key_classes_answered, keys_setup,
                                        keys_teardown),
        cmocka_unit_test_setup_teardown(test_key_near_misses_refused,
                                        keys_setup, keys_teardown),
        cmocka_unit_test(test_fence_parse),
        cmocka_unit_test(test_fence_classes_raise),
        cmocka_unit_test(test_fence_classes_get),
        cmocka_unit_test(test_get_no_row),
        cmocka_unit_test(test_get_one_row),
        cmocka_unit_test(test_get_bad_answer),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
