/* fuzz_redis_slot.c: libFuzzer target for redis_slot and
 * redis_redirect_parse (a node's MOVED / ASK error text). Invariants
 * checked on every input:
 * - never reads past the input (ASan: an exact-size copy);
 * - a slot is below 16384, and a key holding a non-empty hash tag has
 *   the slot of the tag alone, so "lock:{N}" and "fence:{N}" agree for
 *   any N not empty and not beginning with '}';
 * - a parsed redirection has a slot below 16384, a port of 1..65535 and
 *   a host inside the input, and printing it again and parsing that
 *   gives the same redirection. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../policies/redis_slot.h"
#include "fuzz.h"

static void
check_slot(const char *p, size_t n)
{
    unsigned s = redis_slot(p, n);
    char *lock = malloc(n + 8), *fence = malloc(n + 9);

    check(s < REDIS_SLOTS, "slot range");
    if (lock == NULL || fence == NULL) {
        free(lock);
        free(fence);
        return;
    }
    memcpy(lock, "lock:{", 6);
    memcpy(lock + 6, p, n);
    lock[6 + n] = '}';
    memcpy(fence, "fence:{", 7);
    memcpy(fence + 7, p, n);
    fence[7 + n] = '}';
    if (n > 0 && p[0] != '}') {
        check(redis_slot(lock, n + 7) == redis_slot(fence, n + 8),
              "lock and fence share a slot");
    }
    free(lock);
    free(fence);
}

static void
check_redirect(const char *p, size_t n)
{
    struct redis_redirect r, again;
    enum redis_redirect_kind k = redis_redirect_parse(p, n, &r);
    char buf[128];
    int len;

    check(k == redis_redirect_parse(p, n, &again), "deterministic");
    if (k == REDIS_REDIRECT_NONE) {
        return;
    }
    check(r.kind == k, "kind");
    check(r.slot < REDIS_SLOTS, "redirect slot range");
    check(r.port >= 1 && r.port <= 65535, "port range");
    check(r.host.len <= n && r.host.p >= p && r.host.p + r.host.len <= p + n,
          "host inside the input");
    if (r.host.len > 64) {
        return;
    }
    len = snprintf(buf, sizeof(buf), "%s %u %.*s:%u",
                   k == REDIS_REDIRECT_MOVED ? "MOVED" : "ASK", r.slot,
                   (int)r.host.len, r.host.p, r.port);
    check(redis_redirect_parse(buf, (size_t)len, &again) == k &&
              again.slot == r.slot && again.port == r.port &&
              again.host.len == r.host.len &&
              memcmp(again.host.p, r.host.p, r.host.len) == 0,
          "round trip");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *p = malloc(size > 0 ? size : 1);

    if (p == NULL) {
        return 0;
    }
    memcpy(p, data, size);
    check_slot(p, size);
    check_redirect(p, size);
    free(p);
    return 0;
}
