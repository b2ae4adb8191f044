/* lmdb_worker.h: the writer thread of the LMDB mark store and the LMDB
 * lock backend: the jobs queued in the loop turns that end while the
 * writer is busy go to it as one batch, and come back answered to the
 * loop thread through an eventfd. */
#ifndef TM_LMDB_WORKER_H
#define TM_LMDB_WORKER_H

#include <stdbool.h>
#include <stddef.h>

#include <event2/event.h>

#include "queue.h"

/* A backend's request embeds this as its first member and casts back. */
struct lmdb_worker_job {
    struct lmdb_worker_job *next;
};

struct lmdb_worker_list {
    QUEUE_FIELDS(struct lmdb_worker_job);
};

/* What a backend does with its jobs; arg is the one given to
 * lmdb_worker_new. */
struct lmdb_worker_ops {
    /* Writer thread, lock not held: answer every job of batch, storing
     * the answers in the jobs. Returns how many milliseconds the writer
     * may then wait for the next batch before it calls idle; 0: as long
     * as it takes. */
    int (*run)(void *arg, struct lmdb_worker_list *batch);
    /* Writer thread, lock not held: the wait asked for passed with no
     * batch. Returns the next wait, as run does. NULL if run always
     * returns 0. */
    int (*idle)(void *arg);
    /* Writer thread, lock not held: the last call, once closing and
     * every queued job is answered. May be NULL. */
    void (*stop)(void *arg);
    /* Loop thread, lock not held: report the answers of every job of
     * answered (the callbacks) and free the jobs. May submit again. */
    void (*answer)(void *arg, struct lmdb_worker_list *answered);
};

struct lmdb_worker;

/* Set up the lock, the eventfd and the events on base; the writer does
 * not run yet, but the lock may be used. ops must outlive the worker.
 * NULL with err (prefixed with who, a string that must outlive the
 * worker) when that fails. */
struct lmdb_worker *lmdb_worker_new(struct event_base *base,
                                    const struct lmdb_worker_ops *ops,
                                    void *arg, const char *who, char *err,
                                    size_t errlen);

/* Start the writer thread with every signal blocked: signals stay with
 * the embedding program's threads. false with err. */
bool lmdb_worker_start(struct lmdb_worker *w, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Loop thread: refuse from now on (lmdb_worker_ready is false), let the
 * writer answer every queued job, join it, hand every answer to answer
 * (also those of jobs its callbacks submit meanwhile), and free w. A
 * worker never started is only freed; NULL is ignored. */
void lmdb_worker_close(struct lmdb_worker *w);

/* Loop thread: queue job for the writer, which takes it at the end of
 * this loop turn together with the other jobs of the turn (and of every
 * turn that ended while it was busy). false, job not taken, when max
 * jobs are submitted and not yet answered. The caller checks
 * lmdb_worker_ready first. */
bool lmdb_worker_submit(struct lmdb_worker *w, struct lmdb_worker_job *job,
                        size_t max) __attribute__((warn_unused_result));

/* Loop thread: hand job, answered already, to answer on the next pass of
 * the loop, without the writer. */
void lmdb_worker_answer_local(struct lmdb_worker *w,
                              struct lmdb_worker_job *job);

/* Neither closing nor failed. Loop thread. */
bool lmdb_worker_ready(struct lmdb_worker *w);

/* Writer thread: what is on disk is unknown; refuse until a restart.
 * Never undone. */
void lmdb_worker_fail(struct lmdb_worker *w);

/* Whether lmdb_worker_fail was called. Any thread. */
bool lmdb_worker_failed(struct lmdb_worker *w);

/* The lock that guards the queues; a backend may guard what its two
 * threads share with it too. Not held when the worker calls ops. */
void lmdb_worker_lock(struct lmdb_worker *w);
void lmdb_worker_unlock(struct lmdb_worker *w);

#endif
