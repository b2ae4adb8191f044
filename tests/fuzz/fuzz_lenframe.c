/* fuzz_lenframe.c: libFuzzer target for the weighing of ZooKeeper's
 * frames (policies/lenframe.c), the glue between a server's bytes and
 * the buffer its client allocates. Byte 0 is the limit (255: 16 MiB, as
 * the relay's), byte 1 seeds the pieces; the rest is the stream.
 * Invariants, on every input:
 * - in one piece, a byte at a time, and in pieces of the sizes byte 1
 *   picks, the answer is the same: passed, or the same length found;
 * - that answer is the one a plain walk of the whole stream gives (each
 *   header read where the last frame ended): the first length over the
 *   limit, or none;
 * - a length found is over the limit. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../policies/lenframe.h"
#include "fuzz.h"

/* The first length over max in p, walked whole; -1 when none. */
static int64_t
walk(const uint8_t *p, size_t n, uint32_t max)
{
    size_t at = 0;

    while (n - at >= 4) {
        uint32_t len = (uint32_t)p[at] << 24 | (uint32_t)p[at + 1] << 16 |
                       (uint32_t)p[at + 2] << 8 | p[at + 3];

        if (len > max) {
            return len;
        }
        if (len > n - at - 4) {
            return -1;
        }
        at += 4 + len;
    }
    return -1;
}

/* Pieces of size step(i) for the i-th; -1 or the length found. */
static int64_t
in_pieces(const uint8_t *p, size_t n, uint32_t max, uint8_t seed, int how)
{
    struct lenframe f = {0};
    size_t off = 0;
    unsigned x = seed;

    while (off < n) {
        size_t k;
        uint32_t len = 0;

        if (how == 0) {
            k = n;
        } else if (how == 1) {
            k = 1;
        } else {
            x = x * 1103515245u + 12345u;
            k = 1 + (x >> 16) % 37;
        }
        k = k < n - off ? k : n - off;
        if (!lenframe_pass(&f, p + off, k, max, &len)) {
            check(len > max, "a length found within the limit");
            return len;
        }
        off += k;
    }
    return -1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t max;
    int64_t whole;

    if (size < 2) {
        return 0;
    }
    max = data[0] == 255 ? 16u << 20 : data[0];
    whole = in_pieces(data + 2, size - 2, max, data[1], 0);
    check(in_pieces(data + 2, size - 2, max, data[1], 1) == whole,
          "a byte at a time, another answer");
    check(in_pieces(data + 2, size - 2, max, data[1], 2) == whole,
          "in pieces, another answer");
    check(walk(data + 2, size - 2, max) == whole,
          "not the first length over the limit");
    return 0;
}
