/* redis_reply.h: the reads of Redis's replies that tidemark's scripts
 * answer (decimal fences and marks, the mark store's {accepted, mark}),
 * for the mark store and the lock backend alike, and of a cluster's
 * CLUSTER SLOTS answer; and the weighing of every answer as hiredis's
 * reader builds it. Pure: no I/O, so that hostile replies can be fuzzed
 * (hiredis's reader makes them). */
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

/* The longest host a CLUSTER SLOTS range may name (a DNS name's 253,
 * and room). */
#define REDIS_HOST_MAX 255

/* One range of a CLUSTER SLOTS answer: slots start..end, served by the
 * master at host (hlen bytes, borrowed from the reply; hlen 0: the
 * node that answered, which Redis names "" or "?") and port. */
struct redis_slots_range {
    unsigned start, end;
    const char *host;
    size_t hlen;
    unsigned port;
};

/* Read e, one element of a CLUSTER SLOTS answer: an array of the first
 * slot, the last, then the master as [host, port, id...] (replicas after
 * it are not read). false when it is no such range: start above end,
 * end at REDIS_SLOTS or more, a port outside 1..65535, a host longer
 * than REDIS_HOST_MAX or that redis_host_ok refuses; *out untouched. */
bool redis_reply_slots_range(const redisReply *e, struct redis_slots_range *out)
    __attribute__((warn_unused_result));

/* What one answer may take as hiredis builds it. The largest tidemark
 * asks for is a cluster's CLUSTER SLOTS: 1.2 KB a range with two
 * replicas, 19 MB if all 16,384 slots were ranges of their own. */
#define REDIS_ANSWER_MAX (64u << 20)

/* Weighs the replies a hiredis reader builds, and refuses to build one
 * past REDIS_ANSWER_MAX: each reply, array slot and string byte of an
 * answer counted (hiredis's redisReply, its slot table, its string and
 * NUL), from the answer's first object. An answer no command waits for
 * (asked(arg) false at its first object) is refused too, unless it is an
 * error: hiredis stops the process on one (an assert), but reads an error
 * as the server's last word. A refusal makes the reader fail (hiredis's
 * "Out of memory"), with refused saying why. */
struct redis_weigher {
    redisReplyObjectFunctions fns;    /* the reader's, weighing */
    redisReplyObjectFunctions *built; /* hiredis's, building */
    size_t weight;                    /* of the answer being read */
    bool (*asked)(void *arg);
    void *arg;
    const char *refused; /* NULL: nothing refused */
};

/* Give r's replies to w (r's privdata is w's from now on). */
void redis_weigher_set(redisReader *r, struct redis_weigher *w,
                       bool (*asked)(void *arg), void *arg);

#endif
