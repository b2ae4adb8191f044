/* redis_reply.h: the reads of Redis's replies that tidemark's scripts
 * answer (decimal fences and marks, the mark store's {accepted, mark}),
 * for the mark store and the lock backend alike. Pure: no I/O, so that
 * hostile replies can be fuzzed (hiredis's reader makes them). */
#ifndef TM_REDIS_REPLY_H
#define TM_REDIS_REPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

/* A decimal 0..INT64_MAX from p[0..len), a reply string: 1 to 19
 * digits and nothing else (the scripts' fences and marks). false
 * otherwise, *out untouched. */
bool redis_reply_dec(const char *p, size_t len, int64_t *out)
    __attribute__((warn_unused_result));

/* The mark store script's reply {flag, mark}: an array of exactly an
 * integer and a decimal string. false when rep is not one (*flag and
 * *mark then untouched). */
bool redis_reply_pair(const redisReply *rep, long long *flag, int64_t *mark)
    __attribute__((warn_unused_result));

#endif
