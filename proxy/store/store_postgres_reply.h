/* store_postgres_reply.h: what the Postgres mark store's statements
 * answer, read into each raise's and get's answer (store_postgres.c
 * sends them). Pure: libpq's result accessors only, no I/O, so that a
 * hostile server's rows can be fuzzed. */
#ifndef TM_STORE_POSTGRES_REPLY_H
#define TM_STORE_POSTGRES_REPLY_H

#include <stdbool.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "batch.h"

/* A mark from a bigint column's text p, len bytes (PQgetlength): 0 to
 * INT64_MAX in 1 to 19 ASCII digits, as PostgreSQL writes one (leading
 * zeros pass; no sign, no space, no NUL, nothing after). false
 * otherwise, *out untouched. */
bool pg_marks_parse(const char *p, size_t len, int64_t *out)
    __attribute__((warn_unused_result));

/* Settle the get r (STORE_ERROR and mark 0, as batch_req_new leaves
 * it) from res, the result of "SELECT fence ... WHERE resource = $1":
 * a PGRES_TUPLES_OK result with no row is accepted with 0 (no mark,
 * whatever its columns); one with one row of one non-NULL column that
 * pg_marks_parse reads is accepted with that mark. Anything else (another
 * status, two rows or more, another column count, NULL, not a number)
 * leaves r as it was (STORE_ERROR, 0), logged once. Runs no callback. */
void pg_marks_answer_get(struct batch_req *r, const PGresult *res);

/* Settle the raises of batch (sorted by batch_sort, each STORE_ERROR
 * with mark 0) from res, the result of the upsert: rows (resource,
 * fence). Only a PGRES_TUPLES_OK result of exactly two columns settles
 * anything; any other leaves every raise as it was (refused), logged
 * once. Then each row in turn whose resource (column 0, its bytes and
 * its length; a NULL one is the empty name) is a key of batch, and
 * whose fence (column 1) reads with pg_marks_parse and is at least the
 * highest token the batch has for that key (the upsert's GREATEST
 * cannot answer less), settles the key's raises as batch_settle does:
 * a raise whose token is the fence is accepted with it, the others
 * stale with it. A row naming no key of batch is skipped; one whose
 * fence is not a number, or below that highest token, is logged and
 * settles nothing. A key that no such row names stays STORE_ERROR,
 * logged; a key two rows name is settled by the last (PostgreSQL
 * returns one row per key). Runs no callback: batch_answer does. */
void pg_marks_answer_raises(struct batch_list *batch, const PGresult *res);

#endif
