/* fuzz.h: what every libFuzzer target here shares. A target is one .c
 * file built together with the sources it tests (run.sh), so this header
 * holds static inline functions only. */
#ifndef TM_FUZZ_H
#define TM_FUZZ_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* An invariant is broken: say which, and abort (libFuzzer keeps the
 * input that did it). */
static inline void
fail(const char *what)
{
    fprintf(stderr, "invariant violated: %s\n", what);
    abort();
}

static inline void
check(bool ok, const char *what)
{
    if (!ok) {
        fail(what);
    }
}

#endif
