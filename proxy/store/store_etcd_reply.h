/* store_etcd_reply.h: etcd's answers to the etcd mark store's calls
 * (store_etcd.c sends them), read into each raise's and each get's answer.
 * Pure: no I/O (jansson values only), so that hostile answers can be
 * fuzzed. */
#ifndef TM_STORE_ETCD_REPLY_H
#define TM_STORE_ETCD_REPLY_H

#include <stdbool.h>

#include <jansson.h>

#include "batch.h"

/* Settle the raises of batch from body, etcd's answer (a JSON object,
 * borrowed) to the transaction store_etcd.c sends for it: batch sorted by
 * batch_sort, one compare-and-swap per distinct key in that order. Group
 * u (the u-th distinct key, T its highest token) is answered by body's
 * responses[u].response_txn, matched by position only (the keys in the
 * answer are not read): when it succeeded the key was created at T, when
 * its responses[0].response_txn succeeded it was raised to T, and either
 * way the mark is T; else the mark is the one read (etcd_mark_read) from
 * that inner txn's responses[0].response_range.kvs[0]. Each raise of the
 * group is then accepted when its token is the mark and stale with the
 * mark when below it (batch_settle). A read-back mark that is missing,
 * malformed or below T answers none of the group's raises: they stay
 * STORE_ERROR (logged), and the other groups are answered. Responses
 * after the last group are not read.
 *
 * false when body is no such answer: body.succeeded is not true, or a
 * group's response_txn or nested response_txn is missing. The groups
 * before that one are settled already then, so a false answer leaves the
 * batch half settled: the caller must fail the whole batch (batch_fail:
 * STORE_ERROR for every raise), never answer it. On true the caller
 * answers it (batch_answer). Runs no callback and frees nothing itself. */
bool etcd_marks_answer_raises(struct batch_list *batch, const json_t *body)
    __attribute__((warn_unused_result));

/* Settle r, a get, from body, etcd's answer (a JSON object, borrowed) to
 * a range of r's key: with no kvs[0] (kvs absent or empty: the key has
 * no mark yet) r is accepted at 0; with a kvs[0] whose value reads as a
 * mark (etcd_mark_read), accepted at that mark. false when kvs is there
 * and is no array, or kvs[0] is there and holds no mark; r then says
 * accepted at 0, which is no answer: the caller must fail it
 * (batch_fail), as for the raises. */
bool etcd_marks_answer_get(struct batch_req *r, const json_t *body)
    __attribute__((warn_unused_result));

#endif
