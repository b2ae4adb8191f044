/* lenframe.c: frames weighed by their length headers (lenframe.h). */
#include "lenframe.h"

bool
lenframe_pass(struct lenframe *f, const uint8_t *p, size_t n, uint32_t max,
              uint32_t *len)
{
    while (n > 0) {
        if (f->left > 0) {
            size_t k = n < f->left ? n : f->left;

            f->left -= (uint32_t)k;
            p += k;
            n -= k;
            continue;
        }
        f->head = f->head << 8 | *p++;
        n--;
        if (++f->have < 4) {
            continue;
        }
        if (f->head > max) {
            *len = f->head;
            return false;
        }
        f->left = f->head;
        f->head = 0;
        f->have = 0;
    }
    return true;
}
