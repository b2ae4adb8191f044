/* fsyncloop.c: the disk's pace, the raises set's floor: one thread
 * appending RECORD bytes to a preallocated, zero-filled file and
 * fdatasync()ing after each, as tidemark's journal does for a batch.
 * Usage: fsyncloop FILE SECONDS [RECORD]; prints "syncs/s N". */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* As large as tidemark's journal (journal.h). */
#define FILE_SIZE ((size_t)4 << 20)

static double
now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Zero-fill the file and make that durable, so that the loop's writes
 * change no file size and no extent. */
static int
prefill(int fd)
{
    static const char zeros[64 << 10];

    for (size_t off = 0; off < FILE_SIZE; off += sizeof(zeros)) {
        if (pwrite(fd, zeros, sizeof(zeros), (off_t)off) !=
            (ssize_t)sizeof(zeros)) {
            return -1;
        }
    }
    return fsync(fd);
}

int
main(int argc, char **argv)
{
    char rec[4096];
    size_t len = argc > 3 ? (size_t)atol(argv[3]) : 64;
    double secs = argc > 2 ? atof(argv[2]) : 0;
    double start, end;
    unsigned long n = 0;
    size_t off = 0;
    int fd;

    if (argc < 3 || secs <= 0 || len == 0 || len > sizeof(rec)) {
        fprintf(stderr, "usage: fsyncloop FILE SECONDS [RECORD 1..4096]\n");
        return 2;
    }
    fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || prefill(fd) != 0) {
        fprintf(stderr, "fsyncloop: %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    memset(rec, 'r', len);
    start = now();
    end = start + secs;
    do {
        if (off + len > FILE_SIZE) {
            off = 0;
        }
        if (pwrite(fd, rec, len, (off_t)off) != (ssize_t)len ||
            fdatasync(fd) != 0) {
            fprintf(stderr, "fsyncloop: %s: %s\n", argv[1], strerror(errno));
            return 1;
        }
        off += len;
        n++;
    } while (now() < end);
    printf("syncs/s %.0f\n", (double)n / (now() - start));
    close(fd);
    unlink(argv[1]);
    return 0;
}
