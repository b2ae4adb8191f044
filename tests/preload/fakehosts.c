/* fakehosts.c: an LD_PRELOAD shim for tests. $FAKEHOSTS lists names and
 * the numeric addresses getaddrinfo gives for them, in that order:
 * "dual.test=::1,127.0.0.1 v4first.test=127.0.0.1,::1". Other names go
 * to libc. Deterministic, whatever /etc/hosts says. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *,
                      struct addrinfo **);

static gai_fn real_gai;

__attribute__((constructor)) static void
fakehosts_init(void)
{
    real_gai = (gai_fn)dlsym(RTLD_NEXT, "getaddrinfo");
}

/* The address list of node in $FAKEHOSTS copied to buf, or NULL. */
static const char *
lookup(const char *node, char *buf, size_t cap)
{
    const char *p = getenv("FAKEHOSTS");
    size_t nlen = strlen(node);

    while (p != NULL && *p != '\0') {
        size_t len = strcspn(p, " ");

        if (len > nlen && p[nlen] == '=' && strncmp(p, node, nlen) == 0 &&
            len - nlen - 1 < cap) {
            memcpy(buf, p + nlen + 1, len - nlen - 1);
            buf[len - nlen - 1] = '\0';
            return buf;
        }
        p += len;
        while (*p == ' ') {
            p++;
        }
    }
    return NULL;
}

/* glibc's freeaddrinfo frees each element on its own, so the lists of
 * several numeric lookups can be chained into one. */
int
getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
            struct addrinfo **res)
{
    char buf[512];
    struct addrinfo h, *head = NULL, **tail = &head;
    const char *addrs;

    if (real_gai == NULL) {
        return EAI_SYSTEM;
    }
    addrs = node != NULL ? lookup(node, buf, sizeof(buf)) : NULL;
    if (addrs == NULL) {
        return real_gai(node, service, hints, res);
    }
    memset(&h, 0, sizeof(h));
    if (hints != NULL) {
        h = *hints;
    }
    h.ai_flags =
        (h.ai_flags | AI_NUMERICHOST) & ~(AI_ADDRCONFIG | AI_CANONNAME);
    for (char *save = NULL, *a = strtok_r(buf, ",", &save); a != NULL;
         a = strtok_r(NULL, ",", &save)) {
        struct addrinfo *one = NULL;

        if (real_gai(a, service, &h, &one) != 0) {
            continue; /* not of the family asked for */
        }
        *tail = one;
        while (*tail != NULL) {
            tail = &(*tail)->ai_next;
        }
    }
    if (head == NULL) {
        return EAI_NONAME;
    }
    *res = head;
    return 0;
}
