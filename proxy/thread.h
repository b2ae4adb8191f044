/* thread.h: what the library's own threads (the lmdb writer, the log
 * writer) share: starting one that takes no signal, and deadlines for
 * their waits on CLOCK_MONOTONIC. */
#ifndef TM_THREAD_H
#define TM_THREAD_H

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>

/* Start fn(arg) on a thread of its own with every signal blocked: the
 * signals are the loop's. The thread is named "tidemark-" who, as top -H
 * and ps -L show it (the kernel keeps 15 bytes: who has 6 at most).
 * pthread_create's answer. */
static inline int
thread_start_unsignalled(pthread_t *t, const char *who, void *(*fn)(void *),
                         void *arg)
{
    char name[16];
    sigset_t all, old;
    int rc;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0) {
        snprintf(name, sizeof(name), "tidemark-%s", who);
        (void)pthread_setname_np(*t, name);
    }
    return rc;
}

/* CLOCK_MONOTONIC ms from now, for a wait's deadline. */
static inline struct timespec
mono_after_ms(int ms)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

#endif
