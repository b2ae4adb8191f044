/* lenframe.h: a stream of frames that each begin with their length (four
 * bytes, big-endian, the bytes after them), as ZooKeeper's server sends
 * its answers, weighed as it goes by: a frame that says it is longer than
 * a limit is found at its header, before a reader that would allocate
 * what the header says has it. The stream may come in pieces of any
 * size. Pure. */
#ifndef TM_LENFRAME_H
#define TM_LENFRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where the stream is: zero it to begin. */
struct lenframe {
    uint32_t left; /* bytes of the current frame still to come */
    uint32_t head; /* the next frame's length, as far as it has come */
    unsigned have; /* bytes of that length seen: 0 to 3 */
};

/* Pass the stream's next n bytes (p). true when no length among them
 * says more than max; false at the first that does (a length of 2^31 or
 * more, negative to a reader that takes it signed, does for any max
 * below 2^31), with its value in *len and the stream's state undefined:
 * the reader must not have these bytes, nor any after them. */
bool lenframe_pass(struct lenframe *f, const uint8_t *p, size_t n, uint32_t max,
                   uint32_t *len) __attribute__((warn_unused_result));

#endif
