/* clockjump.c: an LD_PRELOAD shim for the failure lab. The wall clock
 * (CLOCK_REALTIME, gettimeofday, time) of the process runs ahead by the
 * number of milliseconds written in the file named by $CLOCKJUMP_FILE,
 * read again on every call, so the lab can step one Redis node's clock
 * the way an NTP step or a manual change would. Monotonic clocks are left
 * alone.
 *
 * Debian's libfaketime cannot do this for redis-server: it clashes with
 * the jemalloc redis-server is built with (libfaketime's own issues #130
 * and #327: the process never starts). So this shim calls no allocator
 * and no dlsym: the real clock comes from the system call. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <stdlib.h>
#include <errno.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long
jump_ms(void)
{
    const char *path = getenv("CLOCKJUMP_FILE");
    char buf[32];
    long long v = 0;
    int neg = 0;
    ssize_t n, i = 0;
    int fd, saved = errno;

    if (path == NULL) {
        return 0;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        errno = saved;
        return 0;
    }
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    errno = saved;
    if (n > 0 && buf[0] == '-') {
        neg = 1;
        i = 1;
    }
    for (; i < n && buf[i] >= '0' && buf[i] <= '9'; i++) {
        v = v * 10 + (buf[i] - '0');
    }
    return neg ? -v : v;
}

static int
real_clock(clockid_t id, struct timespec *ts)
{
    return (int)syscall(SYS_clock_gettime, id, ts);
}

int
clock_gettime(clockid_t id, struct timespec *ts)
{
    int rc = real_clock(id, ts);
    long long ms;

    if (rc != 0 || (id != CLOCK_REALTIME && id != CLOCK_REALTIME_COARSE)) {
        return rc;
    }
    ms = jump_ms();
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000;
    if (ts->tv_nsec >= 1000000000) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000;
    } else if (ts->tv_nsec < 0) {
        ts->tv_sec--;
        ts->tv_nsec += 1000000000;
    }
    return 0;
}

int
gettimeofday(struct timeval *tv, void *tz)
{
    struct timespec ts;

    (void)tz;
    clock_gettime(CLOCK_REALTIME, &ts);
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

time_t
time(time_t *out)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    if (out != NULL) {
        *out = ts.tv_sec;
    }
    return ts.tv_sec;
}
