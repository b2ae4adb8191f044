/* problem.h: the answers tidemark makes itself, as RFC 9457 problem
 * details (application/problem+json). */
#ifndef TM_PROBLEM_H
#define TM_PROBLEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evbuffer;

struct problem {
    int status;
    const char *detail;   /* NULL: the status's default */
    const char *resource; /* NULL: no resource field */
    int64_t token;        /* 409: the refused token */
    int64_t mark;         /* 409: the mark; also Fencing-High-Water */
    int retry_after;      /* seconds, 0: no Retry-After */
    const char *type;     /* NULL: the status's type and title; else */
    const char *title;    /* these, and no 409 token/high_water */
    const char *extra;    /* NULL, or JSON members appended as they are
                           * ("\"fence\":3,\"ttl_ms\":10") */
};

/* Room for the longest detail and an escaped TM_RESOURCE_MAX name. */
#define PROBLEM_BODY_MAX 4096

/* Write p's JSON body into body (cap >= PROBLEM_BODY_MAX); its length. */
size_t problem_body(char *body, size_t cap, const struct problem *p);

/* The header on every answer tidemark makes itself, so that a client
 * can tell them from the upstream's answers with the same status (an
 * upstream's own is never passed on). Its value is problem_kind(). */
#define PROBLEM_HEADER "Tidemark-Error"

/* The short name of p's problem type: its type URI without
 * "urn:tidemark:" (stale-token, missing-token, bad-gateway...). */
const char *problem_kind(const struct problem *p);

/* Append a whole response (head and JSON body) for p to out, with
 * Tidemark-Error, and Fencing-High-Water on a stale-token 409 (the mark
 * that refused it; on no other answer). close adds "Connection:
 * close". */
void problem_write(struct evbuffer *out, const struct problem *p, bool close);

/* The reason phrase for a status tidemark answers with. */
const char *problem_reason(int status);

#endif
