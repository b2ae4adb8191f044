/* fuzz_pg_reply.c: libFuzzer target for what the Postgres lock backend
 * makes of its statements' results (proxy/locks/lock_postgres_reply.c).
 * The input builds a result with libpq's own constructors, as a hostile
 * server could make one: byte 0 picks its status, byte 1 its columns
 * (0 to 4), byte 2 its rows (0 to 3), the rest its values one a line (a
 * line that starts with 0xff is NULL). Invariants, for every statement:
 * - a result that fits answers one of the statement's results, and one
 *   that does not says nothing (LOCK_ERROR, 0, 0);
 * - a lease said held (acquire or get OK) has a fence of at least 1 and
 *   at least 1 ms left; acquire's fence is the row's second column; a
 *   busy acquire has time left; no lease (get NONE) has none;
 * - release and extend answer with the caller's fence, extend OK with
 *   the TTL asked, the others with none. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "../../proxy/locks/lock_postgres_reply.h"
#include "fuzz.h"

#define FENCE_IN 42
#define TTL_ASKED 30000

static const ExecStatusType statuses[] = {PGRES_TUPLES_OK, PGRES_COMMAND_OK,
                                          PGRES_FATAL_ERROR, PGRES_EMPTY_QUERY};

/* The result the input describes; NULL when it is too short. */
static PGresult *
build(const uint8_t *data, size_t size)
{
    PGresAttDesc cols[4];
    int ncols, nrows;
    size_t off = 3;
    PGresult *res;

    if (size < 3) {
        return NULL;
    }
    res = PQmakeEmptyPGresult(NULL, statuses[data[0] % 4]);
    check(res != NULL, "out of memory");
    ncols = data[1] % 5;
    nrows = data[2] % 4;
    memset(cols, 0, sizeof(cols));
    for (int c = 0; c < ncols; c++) {
        cols[c].name = (char *)"c";
        cols[c].format = 0;
        cols[c].typid = 20; /* int8 */
        cols[c].typlen = 8;
        cols[c].atttypmod = -1;
    }
    if (ncols > 0) {
        check(PQsetResultAttrs(res, ncols, cols) != 0, "out of memory");
    }
    for (int r = 0; r < nrows && ncols > 0; r++) {
        for (int c = 0; c < ncols; c++) {
            size_t n = 0;
            bool null;

            while (off + n < size && data[off + n] != '\n') {
                n++;
            }
            null = n > 0 && data[off] == 0xff;
            check(PQsetvalue(res, r, c, null ? NULL : (char *)data + off,
                             null ? -1 : (int)n) != 0,
                  "out of memory");
            off = off + n < size ? off + n + 1 : size;
        }
    }
    return res;
}

/* The decimal of row 0, column c, read apart from the code: strtoll's
 * (what a server's int8 text is); -1 when it is none. */
static int64_t
cell(const PGresult *res, int c)
{
    const char *v;
    char *e;
    long long n;

    if (PQntuples(res) < 1 || PQnfields(res) <= c || PQgetisnull(res, 0, c)) {
        return -1;
    }
    v = PQgetvalue(res, 0, c);
    n = strtoll(v, &e, 10);
    return *v != '\0' && *e == '\0' ? n : -1;
}

static void
answers(const PGresult *res)
{
    for (int op = PL_ACQUIRE; op <= PL_GET; op++) {
        struct pl_answer a = {LOCK_OK, 7, 7};
        bool ok = pl_answer_read(op, res, FENCE_IN, TTL_ASKED, &a);

        if (!ok) {
            check(a.res == LOCK_ERROR && a.fence == 0 && a.ttl_ms == 0,
                  "a result that does not fit says something");
            continue;
        }
        check(a.res != LOCK_ERROR, "a result that fits is an error");
        if (a.res == LOCK_OK && (op == PL_ACQUIRE || op == PL_GET)) {
            check(a.fence >= 1 && a.ttl_ms >= 1,
                  "a held lease without a fence or time left");
        }
        switch (op) {
        case PL_ACQUIRE:
            check(a.res == LOCK_OK || a.res == LOCK_BUSY, "acquire: no such");
            check(a.ttl_ms >= 1, "acquire: no time left");
            check(PQntuples(res) == 0 || a.fence == cell(res, 1),
                  "acquire: not the row's fence");
            break;
        case PL_GET:
            check(a.res == LOCK_OK || a.res == LOCK_NONE, "get: no such");
            check(a.res == LOCK_OK || a.ttl_ms == 0, "get: none, time left");
            break;
        default:
            check(a.res == LOCK_OK || a.res == LOCK_LOST, "release: no such");
            check(a.fence == FENCE_IN, "release: not the caller's fence");
            check(a.ttl_ms ==
                      (op == PL_EXTEND && a.res == LOCK_OK ? TTL_ASKED : 0),
                  "extend: not the TTL asked");
        }
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    PGresult *res = build(data, size);

    if (res != NULL) {
        answers(res);
        PQclear(res);
    }
    return 0;
}
