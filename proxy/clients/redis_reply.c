/* redis_reply.c: the scripts' replies and a cluster's slot ranges,
 * read (redis_reply.h). */
#include "redis_reply.h"

#include "../../policies/ascii.h"
#include "../../policies/redis_slot.h"

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

bool
redis_reply_slots_range(const redisReply *e, struct redis_slots_range *out)
{
    const redisReply *m;
    long long start, end, port;
    size_t hlen;

    if (e == NULL || e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
        e->element[0]->type != REDIS_REPLY_INTEGER ||
        e->element[1]->type != REDIS_REPLY_INTEGER ||
        e->element[2]->type != REDIS_REPLY_ARRAY) {
        return false;
    }
    m = e->element[2];
    start = e->element[0]->integer;
    end = e->element[1]->integer;
    if (start < 0 || start > end || end >= REDIS_SLOTS || m->elements < 2 ||
        m->element[0]->type != REDIS_REPLY_STRING ||
        m->element[1]->type != REDIS_REPLY_INTEGER) {
        return false;
    }
    port = m->element[1]->integer;
    hlen = m->element[0]->len;
    if (port <= 0 || port > 65535 || hlen > REDIS_HOST_MAX ||
        !redis_host_ok(m->element[0]->str, hlen)) {
        return false;
    }
    *out = (struct redis_slots_range){
        .start = (unsigned)start,
        .end = (unsigned)end,
        .host = m->element[0]->str,
        .hlen = hlen == 1 && m->element[0]->str[0] == '?' ? 0 : hlen,
        .port = (unsigned)port,
    };
    return true;
}
