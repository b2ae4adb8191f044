/* nosync.c: an LD_PRELOAD shim for the bench (BENCH_FLUSH=off): fsync
 * and fdatasync return at once without flushing anything, so a run shows
 * what the rising path would do if a flush cost nothing. Nothing written
 * under it is durable: never use it outside a measurement. */
#include <unistd.h>

int
fsync(int fd)
{
    (void)fd;
    return 0;
}

int
fdatasync(int fd)
{
    (void)fd;
    return 0;
}
