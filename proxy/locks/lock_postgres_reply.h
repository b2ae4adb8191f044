/* lock_postgres_reply.h: what the Postgres lock backend's statements
 * answer, read into a lock result (lock_postgres.c sends them). Pure: no
 * I/O (libpq's result accessors only), so that hostile rows can be
 * fuzzed. */
#ifndef TM_LOCK_POSTGRES_REPLY_H
#define TM_LOCK_POSTGRES_REPLY_H

#include <stdbool.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "lock.h"

/* The statements, in the order lock_postgres.c prepares them. */
enum pl_op {
    PL_ACQUIRE = 0,
    PL_RELEASE,
    PL_EXTEND,
    PL_GET,
};

/* What one operation answers its caller. */
struct pl_answer {
    enum lock_result res;
    int64_t fence;
    int64_t ttl_ms;
};

/* Read op's result res into *a. fence_in is the caller's fence (release,
 * extend), ttl_ms the TTL asked for (extend). Acquire: no row (busy,
 * holder unknown), or one row (1 taken | 0 busy, fence, time left);
 * release and extend: the rows changed; get: no row, or (fence, time
 * left). A lease said to be held has a fence of at least 1 and time
 * left of at least 1 ms. false when res does not fit (*a then says
 * nothing: LOCK_ERROR, 0, 0). */
bool pl_answer_read(enum pl_op op, const PGresult *res, int64_t fence_in,
                    int64_t ttl_ms, struct pl_answer *a)
    __attribute__((warn_unused_result));

#endif
