/* store_etcd_reply.c: etcd's answers to the mark store's transactions and
 * ranges, read into each call's answer (store_etcd_reply.h). */
#include "store_etcd_reply.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>

#include "../clients/etcd_json.h"
#include "../log.h"

/* o's responses[i].<type>, or NULL. */
static json_t *
resp_of(const json_t *o, size_t i, const char *type)
{
    return json_object_get(json_array_get(json_object_get(o, "responses"), i),
                           type);
}

/* The mark in rr, a range's answer (kvs[0]): at least top. */
static bool
read_back(const json_t *rr, int64_t top, int64_t *mark)
{
    return etcd_mark_read(json_array_get(json_object_get(rr, "kvs"), 0),
                          mark) &&
           *mark >= top;
}

bool
etcd_marks_answer_raises(struct batch_list *batch, const json_t *body)
{
    size_t u = 0;

    if (!json_is_true(json_object_get(body, "succeeded"))) {
        return false;
    }
    for (struct batch_req *first = batch->head; first != NULL;) {
        int64_t top, mark;
        struct batch_req *end = batch_group(first, &top);
        json_t *rt = resp_of(body, u, "response_txn");
        json_t *inner;
        bool known = true; /* the group's mark is etcd's answer */

        if (rt == NULL) {
            return false;
        }
        if (json_is_true(json_object_get(rt, "succeeded"))) {
            mark = top; /* created */
        } else {
            inner = resp_of(rt, 0, "response_txn");
            if (inner == NULL) {
                return false;
            }
            if (json_is_true(json_object_get(inner, "succeeded"))) {
                mark = top; /* raised */
            } else if (!read_back(resp_of(inner, 0, "response_range"), top,
                                  &mark)) {
                log_error("etcd [store]: the mark of %s read back is "
                          "missing, not a mark, or below %" PRId64 ": its "
                          "raises refused",
                          LOG_ESC(first->name, first->nlen), top);
                known = false; /* the raises stay STORE_ERROR */
            }
        }
        if (known) {
            batch_settle(first, end, mark, "etcd");
        }
        u++;
        first = end;
    }
    return true;
}

bool
etcd_marks_answer_get(struct batch_req *r, const json_t *body)
{
    json_t *kvs = json_object_get(body, "kvs");
    json_t *kv = json_array_get(kvs, 0);

    r->res = STORE_ACCEPTED;
    r->mark = 0;
    if (kvs != NULL && !json_is_array(kvs)) {
        return false; /* not a range's answer */
    }
    return kv == NULL || etcd_mark_read(kv, &r->mark);
}
