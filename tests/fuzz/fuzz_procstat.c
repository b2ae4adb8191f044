/* fuzz_procstat.c: libFuzzer target for procstat_parse and
 * procstat_btime: they read only the len bytes given, and what
 * procstat_parse accepts has a ')' followed by at least 22 fields. Any
 * disagreement aborts. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../policies/procstat.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly size bytes: ASan catches a read past the end. */
    char *s = malloc(size > 0 ? size : 1);
    struct procstat st;
    uint64_t bt;

    if (s == NULL) {
        return 0;
    }
    memcpy(s, data, size);
    if (procstat_parse(s, size, &st)) {
        const char *paren = memchr(s, ')', size);
        size_t spaces = 0;

        check(paren != NULL, "accepted without a ')'");
        for (const char *p = paren; p < s + size; p++) {
            spaces += *p == ' ';
        }
        check(spaces >= 22, "accepted with fewer than 22 fields");
    }
    (void)procstat_btime(s, size, &bt);
    free(s);
    return 0;
}
