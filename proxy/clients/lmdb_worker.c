/* lmdb_worker.c: the writer thread the LMDB mark store and the LMDB lock
 * backend share: group a loop turn's jobs into one batch, run it off the
 * loop, hand the answers back through an eventfd. */
#include "lmdb_worker.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../log.h"
#include "../thread.h"

/*
 * The loop thread collects the jobs of a loop turn in turn (no lock)
 * and arms kick_ev; when the turn has run its callbacks, on_kick moves
 * them to pending under mu and wakes the writer only if it sleeps: a
 * writer busy with a batch finds pending when it is done, and neither
 * thread makes a system call for it. The wake-up is a futex, not a
 * condition variable: glibc's marks the mutex contended after every
 * wait, so that its next unlock costs a system call too. The writer
 * takes all of pending as one batch (the turns that ended while it
 * flushed share one commit), pushes the answered batch onto done, a
 * stack the two threads share without the lock, and writes the eventfd
 * only when done was empty (edge-triggered, the loop never reads it);
 * done_ev then hands done (and local, the jobs answered without the
 * writer) to the backend's answer, oldest first. libevent needs no
 * thread support. The writer runs as SCHED_BATCH, so that on a core it
 * shares with the loop its wake-ups wait for the loop's pass to end
 * instead of cutting it: pinned to one core, 8 to 128 clients raising
 * made 8 to 28% more raises a second that way, with about one context
 * switch a raise fewer.
 */

struct lmdb_worker {
    const struct lmdb_worker_ops *ops;
    void *arg;
    const char *who;
    const struct tm_log *log; /* the proxy's, entered by callbacks */

    /* Loop thread only. */
    struct event *done_ev;         /* efd readable, or activated for local */
    struct event *kick_ev;         /* end of the loop turn: wake the writer */
    struct lmdb_worker_list local; /* answered without the writer */
    struct lmdb_worker_list turn;  /* submitted in this loop turn */
    size_t queued;                 /* submitted, not yet answered */
    bool kick_armed;
    bool edge; /* done_ev is edge-triggered: efd is never read */
    bool closing;
    bool started;
    int efd;

    /* Shared: under mu. */
    pthread_t thread;
    pthread_mutex_t mu;
    struct lmdb_worker_list pending;
    bool stopping;

    /* Shared without the lock: 1 while the writer waits (a futex word),
     * set under mu, cleared by whoever wakes it. */
    atomic_int sleeping;

    /* Shared without the lock: answered jobs, newest first. */
    _Atomic(struct lmdb_worker_job *) done;
    atomic_bool failed; /* set once by the writer, never cleared */
};

/* Wake the loop thread: done_ev becomes readable. */
static void
notify_loop(struct lmdb_worker *w)
{
    uint64_t one = 1;

    /* EAGAIN means the counter is saturated: read, the loop will wake
     * anyway; edge-triggered, it grows by one a batch and never gets
     * there (2^64 - 2). */
    if (write(w->efd, &one, sizeof(one)) < 0) {
        return;
    }
}

/* Writer: push the answered batch b (oldest first) onto done, reversed,
 * so that done stays newest first; wake the loop if done was empty (else
 * a wake-up is on its way, or the loop is draining and takes b too). */
static void
publish_done(struct lmdb_worker *w, struct lmdb_worker_list *b)
{
    struct lmdb_worker_job *rev = NULL;
    struct lmdb_worker_job *last = b->head; /* the oldest: rev's end */
    struct lmdb_worker_job *old;

    for (struct lmdb_worker_job *j = b->head, *next; j != NULL; j = next) {
        next = j->next;
        j->next = rev;
        rev = j;
    }
    if (rev == NULL) {
        return;
    }
    old = atomic_load(&w->done);
    do {
        last->next = old;
    } while (!atomic_compare_exchange_weak(&w->done, &old, rev));
    if (old == NULL) {
        notify_loop(w);
    }
}

/* Wake the writer if it waits, once. Any thread. */
static void
wake_writer(struct lmdb_worker *w)
{
    if (atomic_exchange(&w->sleeping, 0) != 0) {
        syscall(SYS_futex, &w->sleeping, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    }
}

/* Under mu: wait for a batch or stopping; with idle_ms > 0, that long at
 * most. false when that time passed with no batch. */
static bool
wait_for_work(struct lmdb_worker *w, int idle_ms)
{
    struct timespec until;

    if (idle_ms > 0) {
        until = mono_after_ms(idle_ms);
    }
    while (w->pending.head == NULL && !w->stopping) {
        long rc;

        /* Set under mu: whoever fills pending after this sees it, and
         * the wait below returns at once if they cleared it already. */
        atomic_store(&w->sleeping, 1);
        pthread_mutex_unlock(&w->mu);
        rc = syscall(SYS_futex, &w->sleeping, FUTEX_WAIT_BITSET_PRIVATE, 1,
                     idle_ms > 0 ? &until : NULL, NULL, FUTEX_BITSET_MATCH_ANY);
        pthread_mutex_lock(&w->mu);
        if (rc != 0 && errno == ETIMEDOUT) {
            atomic_store(&w->sleeping, 0);
            return w->pending.head != NULL || w->stopping;
        }
    }
    atomic_store(&w->sleeping, 0);
    return true;
}

static void *
writer_main(void *arg)
{
    struct lmdb_worker *w = arg;
    int idle_ms = 0;

    /* SCHED_BATCH: a flush that ends does not preempt the loop thread
     * in the middle of its pass when the two share a core; the writer
     * runs when the loop waits (or on another core), and finds the
     * pass's raises pending by then. Unprivileged; if refused, the
     * writer only runs as before. */
    (void)pthread_setschedparam(pthread_self(), SCHED_BATCH,
                                &(struct sched_param){0});
    pthread_mutex_lock(&w->mu);
    for (;;) {
        struct lmdb_worker_list batch;

        /* pending holds whole loop turns, so that the jobs of a turn
         * share one commit; stopping takes whatever is left. */
        if (!wait_for_work(w, idle_ms)) {
            pthread_mutex_unlock(&w->mu);
            idle_ms = w->ops->idle(w->arg);
            pthread_mutex_lock(&w->mu);
            continue;
        }
        if (w->pending.head == NULL) {
            break; /* stopping, and every queued job is answered */
        }
        batch = w->pending;
        w->pending = (struct lmdb_worker_list){0};
        pthread_mutex_unlock(&w->mu);

        idle_ms = w->ops->run(w->arg, &batch);
        publish_done(w, &batch);

        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    if (w->ops->stop != NULL) {
        w->ops->stop(w->arg);
    }
    return NULL;
}

/* Loop thread: hand every answered job to the backend, oldest first. */
static void
drain(struct lmdb_worker *w)
{
    struct lmdb_worker_list todo = w->local;
    struct lmdb_worker_list done = {0};
    struct lmdb_worker_job *j = atomic_exchange(&w->done, NULL);

    w->local = (struct lmdb_worker_list){0};
    /* done is newest first: reversed, it runs oldest first. */
    while (j != NULL) {
        struct lmdb_worker_job *next = j->next;

        j->next = done.head;
        done.head = j;
        if (done.tail == NULL) {
            done.tail = j;
        }
        done.n++;
        j = next;
    }
    w->queued -= done.n;
    QUEUE_SPLICE(&todo, &done);
    w->ops->answer(w->arg, &todo);
}

static void
on_done(evutil_socket_t fd, short what, void *arg)
{
    struct lmdb_worker *w = arg;
    uint64_t n;
    ssize_t got;

    lib_enter(w->log);
    /* Edge-triggered, every write to efd is an event of its own, and the
     * counter (one a batch) is left to grow: no read. Else reset the
     * counter before taking the queue, so that a wake-up sent after the
     * take is not lost. Activated only for local answers (no EV_READ),
     * the counter is left: if the writer did signal, the next pass reads
     * it and finds done drained, or refilled. */
    if (!w->edge && (what & EV_READ)) {
        got = read(fd, &n, sizeof(n));
        (void)got;
    }
    drain(w);
}

static void
on_kick(evutil_socket_t fd, short what, void *arg)
{
    struct lmdb_worker *w = arg;

    lib_enter(w->log);
    (void)fd;
    (void)what;
    w->kick_armed = false;
    if (w->turn.head == NULL) {
        return;
    }
    pthread_mutex_lock(&w->mu);
    QUEUE_SPLICE(&w->pending, &w->turn);
    pthread_mutex_unlock(&w->mu);
    /* After the unlock: the woken writer does not wait for the mutex.
     * A busy writer takes pending when its batch is done. */
    wake_writer(w);
}

/* Release what new set up; the writer must not be running. */
static void
worker_free(struct lmdb_worker *w)
{
    if (w->done_ev != NULL) {
        event_free(w->done_ev);
    }
    if (w->kick_ev != NULL) {
        event_free(w->kick_ev);
    }
    if (w->efd >= 0) {
        close(w->efd);
    }
    pthread_mutex_destroy(&w->mu);
    free(w);
}

struct lmdb_worker *
lmdb_worker_new(struct event_base *base, const struct lmdb_worker_ops *ops,
                void *arg, const char *who, char *err, size_t errlen)
{
    struct lmdb_worker *w = calloc(1, sizeof(*w));

    if (w == NULL) {
        snprintf(err, errlen, "%s: out of memory", who);
        return NULL;
    }
    w->ops = ops;
    w->arg = arg;
    w->who = who;
    w->log = log_current();
    w->efd = -1;
    atomic_init(&w->done, NULL);
    atomic_init(&w->failed, false);
    atomic_init(&w->sleeping, 0);
    if (pthread_mutex_init(&w->mu, NULL) != 0) {
        snprintf(err, errlen, "%s: cannot set up a mutex", who);
        free(w);
        return NULL;
    }
    w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->efd < 0) {
        snprintf(err, errlen, "%s: eventfd: %s", who, strerror(errno));
        worker_free(w);
        return NULL;
    }
    w->edge = (event_base_get_features(base) & EV_FEATURE_ET) != 0;
    w->done_ev = event_new(
        base, w->efd, EV_READ | EV_PERSIST | (w->edge ? EV_ET : 0), on_done, w);
    w->kick_ev = event_new(base, -1, 0, on_kick, w);
    if (w->done_ev == NULL || w->kick_ev == NULL ||
        event_add(w->done_ev, NULL) != 0) {
        snprintf(err, errlen, "%s: cannot set up events", who);
        worker_free(w);
        return NULL;
    }
    return w;
}

bool
lmdb_worker_start(struct lmdb_worker *w, char *err, size_t errlen)
{
    int rc = thread_start_unsignalled(&w->thread, w->who, writer_main, w);

    if (rc != 0) {
        snprintf(err, errlen, "%s: cannot start the writer thread: %s", w->who,
                 strerror(rc));
        return false;
    }
    w->started = true;
    return true;
}

void
lmdb_worker_close(struct lmdb_worker *w)
{
    if (w == NULL) {
        return;
    }
    /* Jobs submitted from now on, by callbacks too, are refused. */
    w->closing = true;
    if (w->started) {
        pthread_mutex_lock(&w->mu);
        QUEUE_SPLICE(&w->pending, &w->turn);
        w->stopping = true;
        pthread_mutex_unlock(&w->mu);
        wake_writer(w);
        /* The writer leaves only once every queued job is answered. */
        pthread_join(w->thread, NULL);
        do {
            drain(w);
        } while (w->local.head != NULL);
    }
    worker_free(w);
}

bool
lmdb_worker_submit(struct lmdb_worker *w, struct lmdb_worker_job *job,
                   size_t max)
{
    if (w->queued >= max) {
        return false;
    }
    QUEUE_PUSH(&w->turn, job);
    w->queued++;
    /* The writer gets the jobs once the current loop turn has run its
     * callbacks, so that the jobs of one turn share one commit. */
    if (!w->kick_armed) {
        w->kick_armed = true;
        event_active(w->kick_ev, 0, 1);
    }
    return true;
}

void
lmdb_worker_answer_local(struct lmdb_worker *w, struct lmdb_worker_job *job)
{
    QUEUE_PUSH(&w->local, job);
    event_active(w->done_ev, EV_TIMEOUT, 1);
}

bool
lmdb_worker_ready(struct lmdb_worker *w)
{
    return !w->closing && !atomic_load(&w->failed);
}

void
lmdb_worker_fail(struct lmdb_worker *w)
{
    atomic_store(&w->failed, true);
}

bool
lmdb_worker_failed(struct lmdb_worker *w)
{
    return atomic_load(&w->failed);
}

void
lmdb_worker_lock(struct lmdb_worker *w)
{
    pthread_mutex_lock(&w->mu);
}

void
lmdb_worker_unlock(struct lmdb_worker *w)
{
    pthread_mutex_unlock(&w->mu);
}
