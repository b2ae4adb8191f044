/* evmem.c: a pool of EVMEM_SLOT-byte slots in one reserved region, for
 * libevent's tiny allocations (see evmem.h). A freed slot goes on a free
 * list for the next tiny allocation; the region is never given back: it
 * holds about 32 bytes per descriptor number ever used. A few freed
 * buffer chains of a first read's size are kept for the next read. */
#include "evmem.h"

#include "tidemark.h"

#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <event2/event.h>

/* Read-write pages are added to the region this many bytes at a time. */
#define EVMEM_STEP (64 * 1024)

/* What the daemon reserves: two million slots, far more descriptors than
 * a process gets; only what is used costs memory. */
#define EVMEM_REGION (64 * 1024 * 1024)

/* libevent's buffer chain for a first read of a socket (sock.h's
 * SOCK_READ_MIN and the chain's header: libevent rounds it up to a
 * power of two) is malloc'd and freed twice a request: a freed one is
 * kept for the next, up to EVMEM_CHAINS of them. glibc's per-thread
 * cache takes no block this big, and its slower path cost ten times
 * as much. */
#define EVMEM_CHAIN 4096
#define EVMEM_CHAINS 16

static struct {
    pthread_mutex_t lock;
    char *lo, *hi; /* the region; set once, before any slot is handed out */
    char *next;    /* first slot never handed out */
    char *ready;   /* end of the read-write part */
    void *free;    /* slots given back; each holds the next */
    void *chains[EVMEM_CHAINS]; /* freed chains, from malloc */
    size_t nchains;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

bool
evmem_init(size_t bytes)
{
    void *p;

    if (pool.lo != NULL) {
        return false;
    }
    bytes = (bytes + EVMEM_STEP - 1) / EVMEM_STEP * EVMEM_STEP;
    /* Address space only: PROT_NONE pages are not committed memory. */
    p = mmap(NULL, bytes, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        return false;
    }
    pool.lo = pool.next = pool.ready = p;
    pool.hi = pool.lo + bytes;
    return true;
}

bool
evmem_owns(const void *p)
{
    uintptr_t a = (uintptr_t)p;

    return a >= (uintptr_t)pool.lo && a < (uintptr_t)pool.hi;
}

/* A slot, or NULL when the region is full. Under the lock. */
static void *
slot_take(void)
{
    void *s = pool.free;

    if (s != NULL) {
        memcpy(&pool.free, s, sizeof(void *));
        return s;
    }
    if (pool.next == pool.ready) {
        if (pool.ready == pool.hi ||
            mprotect(pool.ready, EVMEM_STEP, PROT_READ | PROT_WRITE) != 0) {
            return NULL;
        }
        pool.ready += EVMEM_STEP;
    }
    s = pool.next;
    pool.next += EVMEM_SLOT;
    return s;
}

/* A kept chain, or NULL. */
static void *
chain_take(void)
{
    void *p = NULL;

    pthread_mutex_lock(&pool.lock);
    if (pool.nchains > 0) {
        p = pool.chains[--pool.nchains];
    }
    pthread_mutex_unlock(&pool.lock);
    return p;
}

/* Keep p (from malloc) for a next chain: true when it is a chain's size
 * and there is room. */
static bool
chain_keep(void *p)
{
    size_t n = malloc_usable_size(p);
    bool kept = false;

    if (n < EVMEM_CHAIN || n >= EVMEM_CHAIN + 64) {
        return false;
    }
    pthread_mutex_lock(&pool.lock);
    if (pool.nchains < EVMEM_CHAINS) {
        pool.chains[pool.nchains++] = p;
        kept = true;
    }
    pthread_mutex_unlock(&pool.lock);
    return kept;
}

void *
evmem_malloc(size_t n)
{
    void *s;

    if (n == EVMEM_CHAIN && pool.lo != NULL && (s = chain_take()) != NULL) {
        return s;
    }
    if (n > EVMEM_SLOT || pool.lo == NULL) {
        return malloc(n);
    }
    pthread_mutex_lock(&pool.lock);
    s = slot_take();
    pthread_mutex_unlock(&pool.lock);
    return s != NULL ? s : malloc(n);
}

void
evmem_free(void *p)
{
    if (!evmem_owns(p)) {
        if (p == NULL || pool.lo == NULL || !chain_keep(p)) {
            free(p);
        }
        return;
    }
    pthread_mutex_lock(&pool.lock);
    memcpy(p, &pool.free, sizeof(void *));
    pool.free = p;
    pthread_mutex_unlock(&pool.lock);
}

void *
evmem_realloc(void *p, size_t n)
{
    void *q;

    if (!evmem_owns(p)) {
        return realloc(p, n);
    }
    if (n <= EVMEM_SLOT) {
        return p;
    }
    q = malloc(n);
    if (q != NULL) {
        memcpy(q, p, EVMEM_SLOT);
        evmem_free(p);
    }
    return q;
}

bool
evmem_install(void)
{
    static bool installed;

    if (installed) {
        return true;
    }
    if (pool.lo == NULL && !evmem_init(EVMEM_REGION)) {
        return false;
    }
    event_set_mem_functions(evmem_malloc, evmem_realloc, evmem_free);
    installed = true;
    return true;
}

bool
tm_event_memory_install(void)
{
    return evmem_install();
}
