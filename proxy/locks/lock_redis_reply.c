/* lock_redis_reply.c: the lock scripts' replies, read
 * (lock_redis_reply.h). */
#include "lock_redis_reply.h"

#include <stdbool.h>

#include "../clients/redis_reply.h"

/* A decimal 1..INT64_MAX (0 too when zero_ok) from a reply string. */
static bool
parse_dec(const redisReply *rep, bool zero_ok, int64_t *out)
{
    int64_t v;

    if (rep == NULL || rep->type != REDIS_REPLY_STRING ||
        !redis_reply_dec(rep->str, rep->len, &v) || (v == 0 && !zero_ok)) {
        return false;
    }
    *out = v;
    return true;
}

struct rl_answer
rl_reply_read(enum rl_script op, const redisReply *rep, int64_t fence_in,
              int64_t ttl_ms)
{
    enum lock_result res = LOCK_ERROR;
    int64_t fence = 0, ttl = 0;

    if (rep->type == REDIS_REPLY_ERROR) {
        return (struct rl_answer){LOCK_ERROR, 0, 0};
    }
    switch (op) {
    case RL_S_ACQUIRE:
    case RL_S_STATUS:
        if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 2 ||
            rep->element[0]->type != REDIS_REPLY_INTEGER) {
            break;
        }
        if (rep->element[0]->integer == 1) {
            if (!parse_dec(rep->element[1], false, &fence)) {
                break;
            }
            res = LOCK_OK;
            ttl = ttl_ms;
            if (op == RL_S_STATUS) {
                if (rep->elements != 3 ||
                    rep->element[2]->type != REDIS_REPLY_INTEGER) {
                    res = LOCK_ERROR;
                    break;
                }
                ttl =
                    rep->element[2]->integer > 0 ? rep->element[2]->integer : 0;
            }
        } else if (op == RL_S_ACQUIRE) {
            /* Busy: the holder's fence and time left, best effort (the
             * key may hold something else if another program wrote it). */
            res = LOCK_BUSY;
            if (!parse_dec(rep->element[1], false, &fence)) {
                fence = 0;
            }
            if (rep->elements == 3 &&
                rep->element[2]->type == REDIS_REPLY_INTEGER &&
                rep->element[2]->integer > 0) {
                ttl = rep->element[2]->integer;
            }
        } else {
            res = LOCK_NONE;
            if (!parse_dec(rep->element[1], true, &fence)) {
                fence = 0;
            }
        }
        break;
    case RL_S_RELEASE:
    case RL_S_EXTEND:
        if (rep->type != REDIS_REPLY_INTEGER) {
            break;
        }
        res = rep->integer == 1 ? LOCK_OK : LOCK_LOST;
        fence = fence_in;
        ttl = op == RL_S_EXTEND && res == LOCK_OK ? ttl_ms : 0;
        break;
    }
    if (res == LOCK_ERROR) {
        return (struct rl_answer){LOCK_ERROR, 0, 0};
    }
    return (struct rl_answer){res, fence, ttl};
}
