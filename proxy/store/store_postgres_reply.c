/* store_postgres_reply.c: the Postgres mark store's results, read into
 * the answers of its raises and gets (store_postgres_reply.h). */
#include "store_postgres_reply.h"

#include <inttypes.h>
#include <string.h>

#include "../../policies/ascii.h"
#include "../log.h"

bool
pg_marks_parse(const char *p, size_t len, int64_t *out)
{
    return ascii_dec_read(p, len, out);
}

void
pg_marks_answer_get(struct batch_req *r, const PGresult *res)
{
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        log_error("postgres: reading the mark of %s failed: %s",
                  LOG_ESC(r->name, r->nlen),
                  LOG_STR(PQresultErrorMessage(res)));
    } else if (PQntuples(res) == 0) {
        r->res = STORE_ACCEPTED;
        r->mark = 0;
    } else if (PQntuples(res) == 1 && PQnfields(res) == 1 &&
               !PQgetisnull(res, 0, 0) &&
               pg_marks_parse(PQgetvalue(res, 0, 0),
                              (size_t)PQgetlength(res, 0, 0), &r->mark)) {
        r->res = STORE_ACCEPTED;
    } else {
        log_error("postgres: the mark of %s is not a number",
                  LOG_ESC(r->name, r->nlen));
    }
}

void
pg_marks_answer_raises(struct batch_list *batch, const PGresult *res)
{
    struct batch_req *next = NULL; /* where the next row's key should be */
    int rows;

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        log_error("postgres: %zu raises refused: %s", batch->n,
                  LOG_STR(PQresultErrorMessage(res)));
        return;
    }
    rows = PQntuples(res);
    if (PQnfields(res) != 2) {
        log_error("postgres: the upsert answered %d columns: %zu raises "
                  "refused",
                  PQnfields(res), batch->n);
        return;
    }
    for (int i = 0; i < rows; i++) {
        const char *name = PQgetvalue(res, i, 0);
        size_t nlen = (size_t)PQgetlength(res, i, 0);
        struct batch_req *first = batch_find(batch, next, name, nlen), *end;
        int64_t fence, top;

        if (first == NULL) {
            continue; /* not asked */
        }
        end = batch_group(first, &top);
        next = end; /* the rows come in the batch's order */
        if (PQgetisnull(res, i, 1) ||
            !pg_marks_parse(PQgetvalue(res, i, 1),
                            (size_t)PQgetlength(res, i, 1), &fence)) {
            log_error("postgres: the upsert answered the fence %s for %s, "
                      "which is not a number",
                      PQgetisnull(res, i, 1)
                          ? "NULL"
                          : LOG_ESC(PQgetvalue(res, i, 1),
                                    (size_t)PQgetlength(res, i, 1)),
                      LOG_ESC(first->name, first->nlen));
        } else if (fence < top) {
            log_error("postgres: the upsert answered the fence %" PRId64
                      " for %s, below the %" PRId64 " it was asked to raise "
                      "it to",
                      fence, LOG_ESC(first->name, first->nlen), top);
        } else {
            batch_settle(first, end, fence, "postgres");
        }
    }
    for (struct batch_req *r = batch->head, *end; r != NULL; r = end) {
        int64_t top;

        end = batch_group(r, &top);
        if (r->res == STORE_ERROR) {
            log_error("postgres: the upsert answered no usable row for %s: "
                      "its raises refused",
                      LOG_ESC(r->name, r->nlen));
        }
    }
}
