/* evmem.h: libevent's tiny allocations in a region of their own. libevent
 * keeps a small slot for every descriptor number it has ever watched,
 * until the event base is freed; from the heap, those slots sit between a
 * burst's connection memory and keep its pages from going back to the
 * system once the connections have gone. */
#ifndef TM_EVMEM_H
#define TM_EVMEM_H

#include <stdbool.h>
#include <stddef.h>

/* Allocations of this many bytes or fewer come from the region. */
#define EVMEM_SLOT 32

/* Route libevent's allocations through evmem (event_set_mem_functions):
 * EVMEM_SLOT bytes or fewer from the region, the rest from malloc (with
 * up to 16 freed 4 KiB buffer chains kept for the next ones). This
 * changes process-wide state, so the library never calls it: the daemon
 * does, and an embedder may, before its first libevent call. Memory that
 * libevent returns must then be freed with libevent's own calls (as
 * libevent documents), never with free(). Calling it again does nothing.
 * false, with nothing changed, when the region cannot be reserved. */
bool evmem_install(void);

/* The allocator under evmem_install, for tests. evmem_init reserves a
 * region of bytes (address space only: pages are committed as slots are
 * handed out) and may be called once; before it, and once the region is
 * full, every call goes to malloc. Thread-safe. */
bool evmem_init(size_t bytes);
void *evmem_malloc(size_t n);
void *evmem_realloc(void *p, size_t n);
void evmem_free(void *p);
/* p is a slot of the region. */
bool evmem_owns(const void *p);

#endif
