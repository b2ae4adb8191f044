/* seed.h: a random seed for the hash tables of names that peers choose
 * (htab.h, the mark cache), so that no peer can aim its names at one
 * chain or bucket. */
#ifndef TM_SEED_H
#define TM_SEED_H

#include <stdint.h>

/* A new seed from getrandom, or from the clock and an address when the
 * kernel has no entropy to give yet. */
uint64_t tm_seed(const void *salt);

#endif
