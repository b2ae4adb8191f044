/* backend.c: the registry lookup, deferred answers and parked calls that
 * the mark stores and the lock backends share (backend.h). */
#include "backend.h"

#include <stdlib.h>
#include <string.h>

#include "../log.h"

const void *
backend_find(const void *const *table, size_t n, const char *name)
{
    if (name == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        const char *const *entry = table[i];

        if (strcmp(*entry, name) == 0) {
            return table[i];
        }
    }
    return NULL;
}

static void
backend_answer_run(struct defer_item *it)
{
    struct backend_answer *a = (struct backend_answer *)it;

    a->call(a);
    free(a);
}

void
backend_defer(struct defer *d, const struct backend_answer *a, const char *lost)
{
    struct backend_answer *copy = malloc(sizeof(*copy));

    if (copy == NULL) {
        log_error("%s", lost);
        return;
    }
    *copy = *a;
    copy->it.run = backend_answer_run;
    defer_push(d, &copy->it);
}

void *
backend_park_alloc(const struct coldq *q, size_t size, size_t len)
{
    if (!coldq_waiting(q) || len > BACKEND_PARK_MAX) {
        return NULL;
    }
    return calloc(1, size);
}

bool
backend_park(struct coldq *q, coldq_fn fn, void *rec)
{
    if (!coldq_park(q, fn, rec)) {
        free(rec);
        return false;
    }
    return true;
}
