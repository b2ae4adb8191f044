/* fuzz_origin.c: libFuzzer target for origin_check (the control port's
 * Host, Origin and Sec-Fetch-Site rules). The input is up to five fields
 * split at '\n': listen host, allowed names, Host, Origin,
 * Sec-Fetch-Site; a missing field is an absent header. Invariants that
 * follow from the rules, checked on every answer:
 * - never reads past a slice (ASan: each field is copied to its own
 *   exact-size allocation);
 * - accepted with an Origin: the Origin is "http://" + Host;
 * - accepted with a Host: it ends in ":digits", that port the control
 *   port's (a Host without a port names port 80, not the control port);
 * - HTTP/1.1 and HTTP/1.0 answer alike, but for a request without Host:
 *   HTTP/1.1 needs one;
 * - accepted with a Sec-Fetch-Site: it is same-origin or none;
 * - the same input gives the same answer, and the status is 0 exactly
 *   for ORIGIN_OK. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../policies/origin.h"
#include "fuzz.h"

#define PORT 7071

/* The port after the last ':' of a Host not ending in ']'; 0 if none. */
static long
host_port(struct tm_slice h)
{
    const char *c;
    char buf[8];
    size_t n;

    if (h.len == 0 || h.p[h.len - 1] == ']') {
        return 0;
    }
    c = memrchr(h.p, ':', h.len);
    if (c == NULL) {
        return 0;
    }
    n = (size_t)(h.p + h.len - c - 1);
    if (n == 0 || n >= sizeof(buf)) {
        return -1;
    }
    memcpy(buf, c + 1, n);
    buf[n] = '\0';
    return strtol(buf, NULL, 10);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *field[5] = {NULL};
    struct tm_slice sl[5] = {{NULL, 0}};
    const char *p = (const char *)data, *end = p + size;
    struct origin_self self;
    enum origin_verdict v, v11;
    char *allowed;

    for (int i = 0; i < 5 && p <= end; i++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);

        /* Exact size, no terminator: a read past the slice is caught. */
        field[i] = malloc(n > 0 ? n : 1);
        if (field[i] == NULL) {
            goto out;
        }
        memcpy(field[i], p, n);
        sl[i].p = field[i];
        sl[i].len = n;
        if (nl == NULL) {
            break;
        }
        p = nl + 1;
    }
    if (sl[0].p == NULL) {
        goto out;
    }
    /* allowed is a C string by contract. */
    allowed = strndup(sl[1].p != NULL ? sl[1].p : "", sl[1].len);
    if (allowed == NULL) {
        goto out;
    }
    self.host = sl[0];
    self.port = PORT;
    self.allowed = allowed;
    v = origin_check(&self, false, sl[2], sl[3], sl[4]);
    check(v == origin_check(&self, false, sl[2], sl[3], sl[4]),
          "deterministic");
    v11 = origin_check(&self, true, sl[2], sl[3], sl[4]);
    check(sl[2].p != NULL ? v11 == v : v11 == ORIGIN_NO_HOST,
          "HTTP/1.1 differs from 1.0 only without Host");
    check((origin_status(v) == 0) == (v == ORIGIN_OK), "status 0 iff ok");
    check(origin_reason(v) != NULL, "a reason");
    if (v == ORIGIN_OK) {
        struct tm_slice h = slice_trim(sl[2]);

        if (sl[3].p != NULL) {
            struct tm_slice o = slice_trim(sl[3]);

            check(sl[2].p != NULL && o.len == 7 + h.len &&
                      strncasecmp(o.p, "http://", 7) == 0 &&
                      strncasecmp(o.p + 7, h.p, h.len) == 0,
                  "an accepted Origin is http:// + Host");
        }
        if (sl[2].p != NULL) {
            long port = host_port(h);

            check(port == PORT, "an accepted Host's port");
        }
        if (sl[4].p != NULL) {
            struct tm_slice s = slice_trim(sl[4]);

            check((s.len == 11 && strncasecmp(s.p, "same-origin", 11) == 0) ||
                      (s.len == 4 && strncasecmp(s.p, "none", 4) == 0),
                  "an accepted Sec-Fetch-Site");
        }
    }
    free(allowed);
out:
    for (int i = 0; i < 5; i++) {
        free(field[i]);
    }
    return 0;
}
