/* fuzz_pg_marks.c: libFuzzer target for what the Postgres mark store
 * makes of its statements' results (proxy/store/store_postgres_reply.c):
 * a batch of raises answered from the upsert's rows, and a get from the
 * select's. The input (a byte that is missing reads as 0):
 * - byte 0: the result's status (of 8, half PGRES_TUPLES_OK); byte 1:
 *   its columns (0 to 3); byte 2: the raises (1 to 64, low 6 bits), and
 *   bit 6 the get's shape (column 0 holds fences, not names); byte 3:
 *   its rows (0 to 63); byte 4: the distinct keys (1 to 8);
 * - each key: a class byte (empty, one byte, short, long of 255 to 4336
 *   bytes, the previous key less its last byte or plus one byte, the
 *   digest form "\x01sha256:" + 64 hex, raw), then its bytes;
 * - each raise: one byte, its key (low 3 bits) and its token (bits 3 to
 *   5, of 1, 2, 3, 5, 9, 10, INT64_MAX - 1, INT64_MAX); the batch is
 *   sorted by batch_sort, as the store sends it;
 * - each cell, row by row: one byte, 0 NULL, 1 raw (a length byte, then
 *   the bytes), else chosen by byte >> 3: a key (exact, less its last
 *   byte, or plus a NUL) in column 0, a fence's text (valid, signed,
 *   spaced, 19 and 20 digits, INT64_MAX + 1, ...) elsewhere.
 * Invariants, against an oracle written here (its own decimal reader):
 * - every raise and the get are answered exactly once;
 * - a raise is answered as the rows say: STORE_ERROR unless the result
 *   is PGRES_TUPLES_OK with 2 columns; then each row in order whose
 *   fence is 1 to 19 digits (all its bytes), at most INT64_MAX and at
 *   least the highest token of the raises it names, and whose name has
 *   the raise's key's bytes and length (NULL: empty), makes it accepted
 *   (fence == token) or stale (fence > token) with the fence;
 * - accepted has mark == token, stale mark > token, error mark 0;
 * - the get is accepted with 0 for no row, with the mark for one row of
 *   one non-NULL valid column, an error with 0 otherwise. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "../../policies/ascii.h"
#include "../../proxy/log.h"
#include "../../proxy/store/batch.h"
#include "../../proxy/store/store_postgres_reply.h"
#include "fuzz.h"

#define MAX_RAISES 64
#define MAX_ROWS 64
#define MAX_KEYS 8
#define MAX_COLS 3
#define DIGEST_PREFIX "\x01sha256:"
#define DIGEST_KEY_LEN (8 + 64)

static const ExecStatusType statuses[] = {
    PGRES_TUPLES_OK,  PGRES_TUPLES_OK,   PGRES_TUPLES_OK,   PGRES_TUPLES_OK,
    PGRES_COMMAND_OK, PGRES_FATAL_ERROR, PGRES_EMPTY_QUERY, PGRES_SINGLE_TUPLE,
};

static const int64_t tokens[] = {1, 2, 3, 5, 9, 10, INT64_MAX - 1, INT64_MAX};

static const size_t long_lens[] = {255, 256, 300, 1024, 4095, 4096, 4097, 4336};

/* The fences' text, with lengths: a NUL may be inside. */
static const struct {
    const char *s;
    size_t n;
} fences[32] = {
    {"0", 1},
    {"1", 1},
    {"2", 1},
    {"3", 1},
    {"5", 1},
    {"9", 1},
    {"10", 2},
    {"4", 1},
    {"9223372036854775806", 19},
    {"9223372036854775807", 19},
    {"9223372036854775808", 19},
    {"9999999999999999999", 19},
    {"18446744073709551615", 20},
    {"00000000000000000003", 20},
    {"0000000000000000003", 19},
    {"007", 3},
    {"-1", 2},
    {"+1", 2},
    {" 1", 2},
    {"1 ", 2},
    {"", 0},
    {"1a", 2},
    {"0x5", 3},
    {"3\0x", 3},
    {"\0"
     "3",
     2},
    {"-0", 2},
    {"5", 1},
    {"3", 1},
    {"1e3", 3},
    {"\xef\xbc\x99", 3},
    {"2", 1},
    {"10", 2},
};

/* The input, read a byte at a time; 0 past its end. */
struct input {
    const uint8_t *p;
    size_t n, off;
};

static uint8_t
next(struct input *in)
{
    return in->off < in->n ? in->p[in->off++] : 0;
}

/* Copy up to n bytes of the input to out; returns how many. */
static size_t
take(struct input *in, char *out, size_t n)
{
    size_t k = in->n - in->off < n ? in->n - in->off : n;

    memcpy(out, in->p + in->off, k);
    in->off += k;
    return k;
}

struct bytes {
    char *p; /* malloc'd; NULL for a NULL cell */
    size_t n;
};

static struct bytes
bytes_new(size_t n)
{
    struct bytes b = {malloc(n + 1), n};

    check(b.p != NULL, "out of memory");
    return b;
}

/* Key i of the table, of the class the input picks. */
static struct bytes
make_key(struct input *in, const struct bytes *keys, int i)
{
    uint8_t cls = next(in) % 8;
    const struct bytes *prev = i > 0 ? &keys[i - 1] : NULL;
    struct bytes k;
    size_t n;

    switch (cls) {
    case 0:
        return bytes_new(0);
    case 1:
        k = bytes_new(1);
        k.p[0] = (char)next(in);
        return k;
    case 2:
        n = next(in) % 16;
        k = bytes_new(n);
        k.n = take(in, k.p, n);
        return k;
    case 3:
        k = bytes_new(long_lens[next(in) % 8]);
        memset(k.p, next(in), k.n);
        k.p[k.n - 1] = (char)next(in);
        return k;
    case 4:
        n = prev != NULL && prev->n > 0 ? prev->n - 1 : 0;
        k = bytes_new(n);
        if (n > 0) {
            memcpy(k.p, prev->p, n);
        }
        return k;
    case 5:
        n = prev != NULL ? prev->n : 0;
        k = bytes_new(n + 1);
        if (n > 0) {
            memcpy(k.p, prev->p, n);
        }
        k.p[n] = (char)next(in);
        return k;
    case 6: {
        unsigned char d[32];

        for (size_t j = 0; j < sizeof(d); j++) {
            d[j] = next(in);
        }
        k = bytes_new(DIGEST_KEY_LEN);
        memcpy(k.p, DIGEST_PREFIX, 8);
        ascii_hex(d, sizeof(d), k.p + 8);
        return k;
    }
    default:
        n = next(in);
        k = bytes_new(n);
        k.n = take(in, k.p, n);
        return k;
    }
}

/* A cell's value: NULL, raw bytes, a key or a variant of one (column 0
 * of the raises' shape), or a fence. */
static struct bytes
make_cell(struct input *in, const struct bytes *keys, int nkeys, bool name)
{
    uint8_t v = next(in);
    unsigned idx = v >> 3;
    const struct bytes *k;
    struct bytes b;
    size_t n;

    if (v % 8 == 0) {
        return (struct bytes){NULL, 0};
    }
    if (v % 8 == 1) {
        n = next(in);
        b = bytes_new(n);
        b.n = take(in, b.p, n);
        return b;
    }
    if (!name) {
        b = bytes_new(fences[idx].n);
        memcpy(b.p, fences[idx].s, b.n);
        return b;
    }
    k = &keys[(idx & 7) % (unsigned)nkeys];
    switch (idx >> 3) {
    case 2: /* less its last byte */
        n = k->n > 0 ? k->n - 1 : 0;
        b = bytes_new(n);
        break;
    case 3: /* plus a NUL */
        n = k->n;
        b = bytes_new(n + 1);
        b.p[n] = '\0';
        break;
    default:
        n = k->n;
        b = bytes_new(n);
    }
    if (n > 0) {
        memcpy(b.p, k->p, n);
    }
    return b;
}

/* The oracle's decimal: what a bigint column's text may be, all of its
 * bytes: 1 to 19 ASCII digits, no sign, no space, no NUL, at most
 * INT64_MAX. */
static bool
oracle_fence(const struct bytes *c, int64_t *out)
{
    static const char max[] = "9223372036854775807";
    size_t n;
    uint64_t v = 0;

    if (c->p == NULL) {
        return false;
    }
    n = c->n;
    if (n == 0 || n > 19) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (c->p[i] < '0' || c->p[i] > '9') {
            return false;
        }
    }
    if (n == 19 && memcmp(c->p, max, 19) > 0) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        v = v * 10 + (uint64_t)(c->p[i] - '0');
    }
    *out = (int64_t)v;
    return true;
}

/* What each waiter was told, and what it should have been. */
struct waiter {
    int calls;
    enum store_result res, want_res;
    int64_t mark, want_mark;
    int64_t token;
    int key;
};

static struct waiter waiters[MAX_RAISES + 1]; /* the raises, then the get */

static void
on_answer(void *arg, enum store_result res, int64_t mark)
{
    struct waiter *w = &waiters[(intptr_t)arg];

    w->calls++;
    w->res = res;
    w->mark = mark;
}

static void
on_log(void *arg, enum tm_log_level level, const char *msg)
{
    check(msg != NULL, "a log line without text");
}

static const struct tm_log logger = {on_log, NULL, TM_LOG_DEBUG};

struct model {
    ExecStatusType status;
    int ncols, nrows, nkeys, nraises;
    bool get_shape;
    struct bytes keys[MAX_KEYS];
    struct bytes cells[MAX_ROWS][MAX_COLS];
};

static void
model_read(struct model *m, struct input *in)
{
    uint8_t b2;

    m->status = statuses[next(in) % 8];
    m->ncols = next(in) % 4;
    b2 = next(in);
    m->nraises = 1 + (b2 & 63);
    m->get_shape = (b2 & 64) != 0;
    m->nrows = next(in) % MAX_ROWS;
    if (m->ncols == 0) {
        m->nrows = 0; /* no column: no value to make a row of */
    }
    m->nkeys = 1 + next(in) % MAX_KEYS;
    for (int i = 0; i < m->nkeys; i++) {
        m->keys[i] = make_key(in, m->keys, i);
    }
    for (int i = 0; i < m->nraises; i++) {
        uint8_t v = next(in);

        waiters[i] = (struct waiter){.key = (v & 7) % m->nkeys,
                                     .token = tokens[(v >> 3) & 7]};
    }
    for (int r = 0; r < m->nrows; r++) {
        for (int c = 0; c < m->ncols; c++) {
            m->cells[r][c] =
                make_cell(in, m->keys, m->nkeys, c == 0 && !m->get_shape);
        }
    }
}

static void
model_free(struct model *m)
{
    for (int i = 0; i < m->nkeys; i++) {
        free(m->keys[i].p);
    }
    for (int r = 0; r < m->nrows; r++) {
        for (int c = 0; c < m->ncols; c++) {
            free(m->cells[r][c].p);
        }
    }
}

static PGresult *
build(const struct model *m)
{
    static const Oid types[MAX_COLS] = {25, 20, 20}; /* text, int8 */
    PGresAttDesc cols[MAX_COLS];
    PGresult *res = PQmakeEmptyPGresult(NULL, m->status);

    check(res != NULL, "out of memory");
    memset(cols, 0, sizeof(cols));
    for (int c = 0; c < m->ncols; c++) {
        cols[c].name = (char *)(c == 0 ? "resource" : "fence");
        cols[c].typid = types[c];
        cols[c].typlen = c == 0 ? -1 : 8;
        cols[c].atttypmod = -1;
    }
    if (m->ncols > 0) {
        check(PQsetResultAttrs(res, m->ncols, cols) != 0, "out of memory");
    }
    for (int r = 0; r < m->nrows; r++) {
        for (int c = 0; c < m->ncols; c++) {
            const struct bytes *v = &m->cells[r][c];

            check(PQsetvalue(res, r, c, v->p != NULL ? v->p : NULL,
                             v->p != NULL ? (int)v->n : -1) != 0,
                  "out of memory");
        }
    }
    check(PQntuples(res) == m->nrows && PQnfields(res) == m->ncols,
          "the result is not the one described");
    return res;
}

/* Whether a name cell is key k: the same bytes, the same length; a NULL
 * one reads as the empty name (libpq's "" of length 0). */
static bool
names(const struct bytes *c, const struct bytes *k)
{
    size_t n = c->p != NULL ? c->n : 0;

    return n == k->n && (n == 0 || memcmp(c->p, k->p, n) == 0);
}

/* What each raise should be answered, from the model alone. */
static void
oracle_raises(const struct model *m)
{
    for (int i = 0; i < m->nraises; i++) {
        waiters[i].want_res = STORE_ERROR;
        waiters[i].want_mark = 0;
    }
    if (m->status != PGRES_TUPLES_OK || m->ncols != 2) {
        return;
    }
    for (int r = 0; r < m->nrows; r++) {
        int64_t fence, top = INT64_MIN;

        if (!oracle_fence(&m->cells[r][1], &fence)) {
            continue;
        }
        for (int i = 0; i < m->nraises; i++) {
            if (names(&m->cells[r][0], &m->keys[waiters[i].key]) &&
                waiters[i].token > top) {
                top = waiters[i].token;
            }
        }
        if (fence < top) {
            continue; /* below what the key was asked to rise to */
        }
        for (int i = 0; i < m->nraises; i++) {
            struct waiter *w = &waiters[i];

            if (!names(&m->cells[r][0], &m->keys[w->key])) {
                continue;
            }
            if (fence == w->token) {
                w->want_res = STORE_ACCEPTED;
                w->want_mark = fence;
            } else if (fence > w->token) {
                w->want_res = STORE_STALE;
                w->want_mark = fence;
            }
        }
    }
}

static void
oracle_get(const struct model *m, struct waiter *w)
{
    int64_t mark;

    w->want_res = STORE_ERROR;
    w->want_mark = 0;
    if (m->status != PGRES_TUPLES_OK) {
        return;
    }
    if (m->nrows == 0) {
        w->want_res = STORE_ACCEPTED;
    } else if (m->nrows == 1 && m->ncols == 1 &&
               oracle_fence(&m->cells[0][0], &mark)) {
        w->want_res = STORE_ACCEPTED;
        w->want_mark = mark;
    }
}

static void
verdict(const struct waiter *w)
{
    check(w->calls == 1, "not answered exactly once");
    check(w->res == w->want_res, "not the answer the rows give");
    check(w->mark == w->want_mark, "not the mark the rows give");
    check(w->res != STORE_ERROR || w->mark == 0, "an error with a mark");
}

/* A request for key k: a digest key carries a name of its own, as the
 * store's do. */
static struct batch_req *
request(const struct bytes *k, int64_t token, bool is_get, intptr_t i)
{
    static const char odd[] = "odd\0name\xff\n\"";
    bool digest = k->n == DIGEST_KEY_LEN && memcmp(k->p, DIGEST_PREFIX, 8) == 0;
    struct batch_req *r =
        digest ? batch_req_new(odd, sizeof(odd) - 1, k->p, k->n, token, is_get,
                               on_answer, (void *)i)
               : batch_req_new(k->p, k->n, NULL, 0, token, is_get, on_answer,
                               (void *)i);

    check(r != NULL, "out of memory");
    return r;
}

static void
run_raises(const struct model *m, const PGresult *res)
{
    struct batch_list batch = {0};
    struct batch_req *scratch[MAX_RAISES];

    for (int i = 0; i < m->nraises; i++) {
        struct batch_req *r =
            request(&m->keys[waiters[i].key], waiters[i].token, false, i);

        QUEUE_PUSH(&batch, r);
    }
    batch_sort(&batch, scratch);
    oracle_raises(m);
    pg_marks_answer_raises(&batch, res);
    batch_answer(&batch);
    check(batch.head == NULL && batch.n == 0, "the batch is not empty");
    for (int i = 0; i < m->nraises; i++) {
        const struct waiter *w = &waiters[i];

        verdict(w);
        check(w->res != STORE_ACCEPTED || w->mark == w->token,
              "accepted with a mark that is not its token");
        check(w->res != STORE_STALE || w->mark > w->token,
              "stale with a mark not above its token");
    }
}

static void
run_get(const struct model *m, const PGresult *res)
{
    struct batch_list one = {0};
    struct waiter *w = &waiters[MAX_RAISES];
    struct batch_req *r = request(&m->keys[0], 0, true, MAX_RAISES);

    *w = (struct waiter){0};
    QUEUE_PUSH(&one, r);
    oracle_get(m, w);
    pg_marks_answer_get(one.head, res);
    batch_answer(&one);
    verdict(w);
    check(w->res != STORE_ACCEPTED || w->mark >= 0, "a negative mark");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct input in = {data, size, 0};
    struct model m;
    PGresult *res;

    if (log_current() == NULL) {
        lib_enter(&logger); /* format every line: names, odd bytes */
    }
    memset(&m, 0, sizeof(m));
    model_read(&m, &in);
    res = build(&m);
    run_raises(&m, res);
    run_get(&m, res);
    PQclear(res);
    model_free(&m);
    return 0;
}
