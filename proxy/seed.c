/* seed.c: seeds for the tables keyed by peers' names. */
#include "seed.h"

#include <sys/random.h>
#include <sys/types.h>
#include <time.h>

uint64_t
tm_seed(const void *salt)
{
    uint64_t seed;
    struct timespec ts;

    if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) ==
        (ssize_t)sizeof(seed)) {
        return seed;
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^
           (uint64_t)(uintptr_t)salt;
}
