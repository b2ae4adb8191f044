/* failsync.c: an LD_PRELOAD shim for tests. While the file named by
 * $FAILSYNC_TRIGGER exists, fsync and fdatasync fail with EIO
 * (as after a disk error); while the file named by $FAILSYNC_STALL
 * exists, they wait for it to go (a disk that stops answering);
 * otherwise they do what libc does. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int (*real_fsync)(int);
static int (*real_fdatasync)(int);

/* Resolved once, before any thread can call in. */
__attribute__((constructor)) static void
failsync_init(void)
{
    real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
}

/* True while the trigger file exists. Checked on every call, so a test
 * can switch failures on and off while the process runs. */
static int
failsync_on(void)
{
    const char *trigger = getenv("FAILSYNC_TRIGGER");
    int saved = errno;
    int on =
        trigger != NULL && trigger[0] != '\0' && access(trigger, F_OK) == 0;

    errno = saved;
    return on;
}

/* While $FAILSYNC_STALL names a file that exists, wait (polled every
 * 5 ms) until it is removed; <that name>.held exists meanwhile, so that
 * a test knows a sync is held. */
static void
failsync_stall(void)
{
    const char *stall = getenv("FAILSYNC_STALL");
    struct timespec step = {0, 5000000};
    char held[4096];
    int saved = errno;
    int fd;

    if (stall == NULL || stall[0] == '\0' || access(stall, F_OK) != 0 ||
        snprintf(held, sizeof(held), "%s.held", stall) >= (int)sizeof(held)) {
        errno = saved;
        return;
    }
    fd = open(held, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    while (access(stall, F_OK) == 0) {
        nanosleep(&step, NULL);
    }
    if (fd >= 0) {
        close(fd);
        unlink(held);
    }
    errno = saved;
}

int
fsync(int fd)
{
    failsync_stall();
    if (failsync_on()) {
        errno = EIO;
        return -1;
    }
    if (real_fsync == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return real_fsync(fd);
}

int
fdatasync(int fd)
{
    failsync_stall();
    if (failsync_on()) {
        errno = EIO;
        return -1;
    }
    if (real_fdatasync == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return real_fdatasync(fd);
}
