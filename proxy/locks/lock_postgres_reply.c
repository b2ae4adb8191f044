/* lock_postgres_reply.c: the lock statements' results, read
 * (lock_postgres_reply.h). */
#include "lock_postgres_reply.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A bigint column; false when NULL or not a number. */
static bool
col_int(const PGresult *res, int row, int col, int64_t *out)
{
    const char *p;
    char *end;
    long long v;

    if (PQgetisnull(res, row, col)) {
        return false;
    }
    p = PQgetvalue(res, row, col);
    errno = 0;
    v = strtoll(p, &end, 10);
    if (*p == '\0' || errno != 0 || *end != '\0') {
        return false;
    }
    *out = (int64_t)v;
    return true;
}

/* Acquire: no row, or (taken, fence, time left). */
static bool
read_acquire(const PGresult *res, struct pl_answer *a)
{
    int64_t flag = 0;

    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) > 1 ||
        (PQntuples(res) == 1 && PQnfields(res) != 3)) {
        return false;
    }
    if (PQntuples(res) == 0) {
        /* The holder committed after our snapshot: busy, its fence
         * unknown; a waiter looks again in a moment. */
        *a = (struct pl_answer){LOCK_BUSY, 0, 1};
        return true;
    }
    if (!col_int(res, 0, 0, &flag) || !col_int(res, 0, 1, &a->fence) ||
        !col_int(res, 0, 2, &a->ttl_ms)) {
        return false;
    }
    a->res = flag == 1 ? LOCK_OK : LOCK_BUSY;
    if (a->res == LOCK_BUSY && a->ttl_ms <= 0) {
        a->ttl_ms = 1;
    }
    return a->fence >= 1 && a->ttl_ms >= 1;
}

/* Get: no row, or (fence, time left). */
static bool
read_get(const PGresult *res, struct pl_answer *a)
{
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) > 1) {
        return false;
    }
    if (PQntuples(res) == 0) {
        *a = (struct pl_answer){LOCK_NONE, 0, 0};
        return true;
    }
    if (PQnfields(res) != 2 || !col_int(res, 0, 0, &a->fence) ||
        !col_int(res, 0, 1, &a->ttl_ms)) {
        return false;
    }
    if (a->ttl_ms <= 0) {
        a->res = LOCK_NONE;
        a->ttl_ms = 0;
        return true;
    }
    a->res = LOCK_OK;
    return a->fence >= 1;
}

bool
pl_answer_read(enum pl_op op, const PGresult *res, int64_t fence_in,
               int64_t ttl_ms, struct pl_answer *a)
{
    bool ok = false;

    *a = (struct pl_answer){LOCK_ERROR, 0, 0};
    switch (op) {
    case PL_ACQUIRE:
        ok = read_acquire(res, a);
        break;
    case PL_RELEASE:
    case PL_EXTEND:
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
            break;
        }
        a->res = strcmp(PQcmdTuples((PGresult *)res), "1") == 0 ? LOCK_OK
                                                                : LOCK_LOST;
        a->fence = fence_in;
        a->ttl_ms = op == PL_EXTEND && a->res == LOCK_OK ? ttl_ms : 0;
        ok = true;
        break;
    case PL_GET:
        ok = read_get(res, a);
        break;
    }
    if (!ok) {
        *a = (struct pl_answer){LOCK_ERROR, 0, 0};
    }
    return ok;
}
