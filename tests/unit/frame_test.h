/* frame_test.h: what the tests of ZooKeeper's frames share: a frame's
 * length header, written as a server writes it (four bytes,
 * big-endian). */
#ifndef TM_FRAME_TEST_H
#define TM_FRAME_TEST_H

#include <stdint.h>

static inline void
put_len(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

#endif
