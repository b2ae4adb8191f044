/* failsync.c: an LD_PRELOAD shim for tests. While the file named by
 * $FAILSYNC_TRIGGER exists, fsync and fdatasync fail with EIO
 * (as after a disk error); otherwise they do what libc does. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
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

int
fsync(int fd)
{
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
