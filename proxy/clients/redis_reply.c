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

/* ---- weighing answers as hiredis builds them ------------------------- */

/* Count n more bytes of the answer t belongs to (its first object starts
 * the count, and is where an answer no command waits for is refused). */
static bool
weigh(const redisReadTask *t, size_t n)
{
    struct redis_weigher *w = t->privdata;

    if (t->parent == NULL) {
        if (t->type != REDIS_REPLY_ERROR && !w->asked(w->arg)) {
            w->refused = "an answer to no command";
            return false;
        }
        w->weight = 0;
    }
    if (n > REDIS_ANSWER_MAX - w->weight) {
        w->refused = "an answer larger than 64 MiB";
        return false;
    }
    w->weight += n;
    return true;
}

static void *
weigh_string(const redisReadTask *t, char *s, size_t len)
{
    struct redis_weigher *w = t->privdata;

    return weigh(t, len < SIZE_MAX - sizeof(redisReply) - 1
                        ? sizeof(redisReply) + len + 1
                        : SIZE_MAX)
               ? w->built->createString(t, s, len)
               : NULL;
}

static void *
weigh_array(const redisReadTask *t, int n)
{
    struct redis_weigher *w = t->privdata;
    size_t slots = n > 0 ? (size_t)n : 0;

    return weigh(t, slots <= (SIZE_MAX - sizeof(redisReply)) / sizeof(void *)
                        ? sizeof(redisReply) + slots * sizeof(void *)
                        : SIZE_MAX)
               ? w->built->createArray(t, n)
               : NULL;
}

static void *
weigh_integer(const redisReadTask *t, long long v)
{
    struct redis_weigher *w = t->privdata;

    return weigh(t, sizeof(redisReply)) ? w->built->createInteger(t, v) : NULL;
}

static void *
weigh_nil(const redisReadTask *t)
{
    struct redis_weigher *w = t->privdata;

    return weigh(t, sizeof(redisReply)) ? w->built->createNil(t) : NULL;
}

void
redis_weigher_set(redisReader *r, struct redis_weigher *w,
                  bool (*asked)(void *arg), void *arg)
{
    w->built = r->fn;
    w->fns = (redisReplyObjectFunctions){
        .createString = weigh_string,
        .createArray = weigh_array,
        .createInteger = weigh_integer,
        .createNil = weigh_nil,
        .freeObject = r->fn->freeObject,
    };
    w->weight = 0;
    w->asked = asked;
    w->arg = arg;
    w->refused = NULL;
    r->fn = &w->fns;
    r->privdata = w;
}
