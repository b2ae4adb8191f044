/* redis_reply.c: the scripts' replies, read (redis_reply.h). */
#include "redis_reply.h"

bool
redis_reply_dec(const char *p, size_t len, int64_t *out)
{
    uint64_t v = 0;

    if (len == 0 || len > 19) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return false;
        }
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    if (v > (uint64_t)INT64_MAX) {
        return false;
    }
    *out = (int64_t)v;
    return true;
}

bool
redis_reply_pair(const redisReply *rep, long long *flag, int64_t *mark)
{
    if (rep == NULL || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
        rep->element[0]->type != REDIS_REPLY_INTEGER ||
        rep->element[1]->type != REDIS_REPLY_STRING ||
        !redis_reply_dec(rep->element[1]->str, rep->element[1]->len, mark)) {
        return false;
    }
    *flag = rep->element[0]->integer;
    return true;
}
