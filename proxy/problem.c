/* problem.c: local answers in application/problem+json (RFC 9457). */
#include "problem.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../policies/ascii.h"
#include "../policies/json.h"

#include <event2/buffer.h>

struct kind {
    int status;
    const char *reason;
    const char *type; /* the problem type, a URI */
    const char *title;
    const char *detail;
};

static const struct kind kinds[] = {
    {400, "Bad Request", "urn:tidemark:bad-request", "Bad request",
     "the request is malformed"},
    {401, "Unauthorized", "urn:tidemark:unauthorized", "Unauthorized",
     "this call needs a bearer token"},
    {403, "Forbidden", "urn:tidemark:forbidden-token", "Token refused",
     "the token is not valid for this resource"},
    {404, "Not Found", "urn:tidemark:no-route", "No route",
     "no route matches this request"},
    {405, "Method Not Allowed", "urn:tidemark:method-not-allowed",
     "Method not allowed", "this method is not served"},
    {408, "Request Timeout", "urn:tidemark:request-timeout", "Request timeout",
     "the request did not arrive in time"},
    {409, "Conflict", "urn:tidemark:stale-token", "Stale fencing token",
     "a write with a higher token has been accepted for this resource; "
     "stop the work: retrying with this token fails the same way"},
    {411, "Length Required", "urn:tidemark:length-required", "Length required",
     "this request must give its Content-Length"},
    {413, "Content Too Large", "urn:tidemark:too-large", "Body too large",
     "the request body is too large"},
    {414, "URI Too Long", "urn:tidemark:uri-too-long", "URI too long",
     "the request target is too long"},
    {423, "Locked", "urn:tidemark:lock-busy", "Lock busy",
     "another holder's lease on this lock is live"},
    {428, "Precondition Required", "urn:tidemark:missing-token",
     "Fencing token required",
     "this route needs a fencing token in the token header"},
    {431, "Request Header Fields Too Large", "urn:tidemark:head-too-large",
     "Request head too large", "the request head is too large"},
    {501, "Not Implemented", "urn:tidemark:not-implemented", "Not implemented",
     "this request cannot be served"},
    {502, "Bad Gateway", "urn:tidemark:bad-gateway", "Bad gateway",
     "the upstream could not be reached or answered badly"},
    {503, "Service Unavailable", "urn:tidemark:store-unavailable",
     "Mark store unavailable", "the mark store cannot be used"},
    {504, "Gateway Timeout", "urn:tidemark:upstream-timeout",
     "Upstream timeout", "the upstream did not answer in time"},
    {505, "HTTP Version Not Supported", "urn:tidemark:bad-version",
     "HTTP version not supported", "only HTTP/1.0 and HTTP/1.1 are served"},
};

static const struct kind *
kind_of(int status)
{
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (kinds[i].status == status) {
            return &kinds[i];
        }
    }
    return &kinds[0];
}

const char *
problem_reason(int status)
{
    return kind_of(status)->reason;
}

const char *
problem_kind(const struct problem *p)
{
    const char *t = p->type != NULL ? p->type : kind_of(p->status)->type;

    return strncmp(t, "urn:tidemark:", 13) == 0 ? t + 13 : t;
}

/* Append the NUL-terminated s to buf at *n, as much as fits below cap. */
static void
put(char *buf, size_t cap, size_t *n, const char *s)
{
    size_t len = strlen(s);

    if (len > cap - *n) {
        len = cap - *n;
    }
    memcpy(buf + *n, s, len);
    *n += len;
}

/* Append v in decimal, as put does. */
static void
put_int(char *buf, size_t cap, size_t *n, int64_t v)
{
    char digits[ASCII_DEC_MAX + 1];

    digits[ASCII_DEC_MAX] = '\0';
    put(buf, cap, n, ascii_dec(digits + ASCII_DEC_MAX, v));
}

/* Built with put rather than snprintf: a stale write's 409 is the
 * answer tidemark gives most often under load. */
size_t
problem_body(char *body, size_t cap, const struct problem *p)
{
    const struct kind *k = kind_of(p->status);
    const char *detail = p->detail != NULL ? p->detail : k->detail;
    /* What detail and resource may fill: the rest always fits (quotes,
     * token and mark of at most 20 digits and a sign each, the brace). */
    size_t n = 0, room = cap - 96;

    put(body, room, &n, "{\"type\":\"");
    put(body, room, &n, p->type != NULL ? p->type : k->type);
    put(body, room, &n, "\",\"title\":\"");
    put(body, room, &n, p->type != NULL ? p->title : k->title);
    put(body, room, &n, "\",\"status\":");
    put_int(body, room, &n, p->status);
    put(body, room, &n, ",\"detail\":\"");
    json_escape_into(body, room, &n, detail);
    body[n++] = '"';
    if (p->resource != NULL) {
        put(body, room, &n, ",\"resource\":\"");
        json_escape_into(body, room, &n, p->resource);
        body[n++] = '"';
    }
    if (p->status == 409 && p->type == NULL) {
        put(body, cap, &n, ",\"token\":");
        put_int(body, cap, &n, p->token);
        put(body, cap, &n, ",\"high_water\":");
        put_int(body, cap, &n, p->mark);
    }
    if (p->extra != NULL && n + strlen(p->extra) + 4 < cap) {
        put(body, cap, &n, ",");
        put(body, cap, &n, p->extra);
    }
    body[n++] = '}';
    body[n++] = '\n';
    return n;
}

void
problem_write(struct evbuffer *out, const struct problem *p, bool close)
{
    char body[PROBLEM_BODY_MAX], head[512];
    const struct kind *k = kind_of(p->status);
    size_t n = problem_body(body, sizeof(body), p), h = 0;

    put(head, sizeof(head), &h, "HTTP/1.1 ");
    put_int(head, sizeof(head), &h, p->status);
    put(head, sizeof(head), &h, " ");
    put(head, sizeof(head), &h, k->reason);
    put(head, sizeof(head), &h,
        "\r\nContent-Type: application/problem+json\r\nContent-Length: ");
    put_int(head, sizeof(head), &h, (int64_t)n);
    put(head, sizeof(head), &h, "\r\nTidemark-Error: ");
    put(head, sizeof(head), &h, problem_kind(p));
    put(head, sizeof(head), &h, "\r\n");
    if (p->status == 409 && p->type == NULL) {
        put(head, sizeof(head), &h, "Fencing-High-Water: ");
        put_int(head, sizeof(head), &h, p->mark);
        put(head, sizeof(head), &h, "\r\n");
    }
    if (p->retry_after > 0) {
        put(head, sizeof(head), &h, "Retry-After: ");
        put_int(head, sizeof(head), &h, p->retry_after);
        put(head, sizeof(head), &h, "\r\n");
    }
    put(head, sizeof(head), &h, close ? "Connection: close\r\n\r\n" : "\r\n");
    evbuffer_add(out, head, h);
    evbuffer_add(out, body, n);
}
