/* queue.c: the bound on a request queue of the network stores and the
 * Postgres lock backend, with its one log line per run of refusals (the
 * FIFO itself is macros in queue.h). */
#include "queue.h"

#include "../log.h"

bool
queue_admit(size_t n, size_t max, bool *logged, const char *who,
            const char *what)
{
    if (n >= max) {
        if (!*logged) {
            log_error("%s: %zu %s: refusing more until the queue drains", who,
                      max, what);
            *logged = true;
        }
        return false;
    }
    *logged = false;
    return true;
}
