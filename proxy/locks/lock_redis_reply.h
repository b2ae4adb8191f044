/* lock_redis_reply.h: what the Redis lock backend's scripts answer,
 * read into a lock result (lock_redis.c sends them). Pure: no I/O, so
 * that hostile replies can be fuzzed. */
#ifndef TM_LOCK_REDIS_REPLY_H
#define TM_LOCK_REDIS_REPLY_H

#include <stdint.h>

#include <hiredis/hiredis.h>

#include "lock.h"

/* The scripts, in the order lock_redis.c loads them. */
enum rl_script {
    RL_S_ACQUIRE = 0,
    RL_S_RELEASE,
    RL_S_EXTEND,
    RL_S_STATUS,
};

/* What one operation answers its caller. */
struct rl_answer {
    enum lock_result res;
    int64_t fence;
    int64_t ttl_ms;
};

/* The answer to script op's reply rep (not NULL). fence_in is the
 * caller's fence (extend, release), ttl_ms the TTL asked for (acquire,
 * extend). Acquire and status: {1, fence[, pttl]} held, {0, fence[,
 * pttl]} busy or none; release and extend: 1 done, else lost. Anything
 * else, an error reply too, is LOCK_ERROR with fence and ttl_ms 0. */
struct rl_answer rl_reply_read(enum rl_script op, const redisReply *rep,
                               int64_t fence_in, int64_t ttl_ms);

#endif
