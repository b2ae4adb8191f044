/* s3batch.h: the keys of an S3 multi-object delete, read from its body
 * once it is all in: the distinct resources its keys are fenced by, each
 * as a DELETE of that key would be (screen_batch_key), and what the
 * store said of each. admit.c decides on them and raises them. */
#ifndef TM_S3BATCH_H
#define TM_S3BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../policies/cfg_model.h"
#include "../../policies/decide.h"
#include "../../policies/http_parse.h"
#include "../../policies/screen.h"

struct admit;
struct fence_call;
struct order_slot;

struct batch_key {
    struct batch *b;
    const char *res; /* NUL-terminated, len bytes */
    size_t len;
    enum tm_verify verify;
    enum decision d;          /* before the store */
    struct fence_call *raise; /* in flight */
    struct order_slot *slot;  /* its turn */
};

struct batch {
    const struct cfg_route *route; /* the first fenced key's; NULL: none */
    struct admit *a;               /* its request's; NULL once orphaned */
    size_t n;                      /* keys[] */
    size_t pending;                /* raises in flight */
    size_t gets;                   /* reads of marks in flight (these cannot
                                    * be cancelled: an orphaned batch is
                                    * freed by the last answer) */
    bool checking;                 /* the reads' answers are awaited */
    const struct batch_key *stale; /* the first the store answered stale */
    int64_t stale_mark;
    bool down;   /* a raise failed (correctness) */
    bool bypass; /* a raise failed (efficiency): forward unfenced */
    char *names; /* keys' res */
    struct batch_key keys[];
};

/* The keys of the multi-object delete s screened (s->batch) in body (len
 * bytes: all of it): one entry for each distinct resource, the keys no
 * route fences left out. NULL with *why (static text) when the body is
 * refused (400), *why NULL when out of memory. */
struct batch *batch_read(const struct tm_config *cfg,
                         const struct http_request *h, const struct screen *s,
                         const char *body, size_t len, const char **why)
    __attribute__((warn_unused_result));

/* Free b (NULL is fine); its raises, reads and turns must be over. */
void batch_free(struct batch *b);

#endif
