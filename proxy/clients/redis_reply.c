/* redis_reply.c: the scripts' replies, read (redis_reply.h). */
#include "redis_reply.h"

#include "../../policies/ascii.h"

bool
redis_reply_dec(const char *p, size_t len, int64_t *out)
{
    return ascii_dec_read(p, len, out);
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
