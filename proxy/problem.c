/* problem.c: local answers in application/problem+json (RFC 9457). */
#include "problem.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

struct kind {
    int status;
    const char *reason;
    const char *type;       /* the problem type, a URI */
    const char *title;
    const char *detail;
};

static const struct kind kinds[] = {
    {400, "Bad Request", "urn:tidemark:bad-request", "Bad request",
     "the request is malformed"},
    {403, "Forbidden", "urn:tidemark:forbidden-token", "Token refused",
     "the token is not valid for this resource"},
    {404, "Not Found", "urn:tidemark:no-route", "No route",
     "no route matches this request"},
    {408, "Request Timeout", "urn:tidemark:request-timeout",
     "Request timeout", "the request did not arrive in time"},
    {409, "Conflict", "urn:tidemark:stale-token", "Stale fencing token",
     "a write with a higher token has been accepted for this resource; "
     "stop the work: retrying with this token fails the same way"},
    {413, "Content Too Large", "urn:tidemark:too-large", "Body too large",
     "the request body is too large"},
    {414, "URI Too Long", "urn:tidemark:uri-too-long", "URI too long",
     "the request target is too long"},
    {428, "Precondition Required", "urn:tidemark:missing-token",
     "Fencing token required",
     "this route needs a fencing token in the token header"},
    {431, "Request Header Fields Too Large",
     "urn:tidemark:head-too-large", "Request head too large",
     "the request head is too large"},
    {501, "Not Implemented", "urn:tidemark:not-implemented",
     "Not implemented", "this request cannot be served"},
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

void
json_escape(struct evbuffer *out, const char *s, size_t len)
{
    size_t run = 0;

    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\') {
            continue;
        }
        evbuffer_add(out, s + run, i - run);
        run = i + 1;
        if (ch == '"' || ch == '\\') {
            char esc[2] = {'\\', (char)ch};
            evbuffer_add(out, esc, 2);
        } else {
            evbuffer_add_printf(out, "\\u%04x", ch);
        }
    }
    evbuffer_add(out, s + run, len - run);
}

void
problem_write(struct evbuffer *out, const struct problem *p, bool close)
{
    const struct kind *k = kind_of(p->status);
    struct evbuffer *body = evbuffer_new();
    const char *detail = p->detail != NULL ? p->detail : k->detail;

    if (body == NULL) {
        return;
    }
    evbuffer_add_printf(body, "{\"type\":\"%s\",\"title\":\"%s\","
                              "\"status\":%d,\"detail\":\"",
                        k->type, k->title, p->status);
    json_escape(body, detail, strlen(detail));
    evbuffer_add(body, "\"", 1);
    if (p->resource != NULL) {
        evbuffer_add(body, ",\"resource\":\"", 13);
        json_escape(body, p->resource, strlen(p->resource));
        evbuffer_add(body, "\"", 1);
    }
    if (p->status == 409) {
        evbuffer_add_printf(body, ",\"token\":%" PRId64
                                  ",\"high_water\":%" PRId64,
                            p->token, p->mark);
    }
    evbuffer_add(body, "}\n", 2);

    evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n"
                             "Content-Type: application/problem+json\r\n"
                             "Content-Length: %zu\r\n",
                        p->status, k->reason, evbuffer_get_length(body));
    if (p->status == 409) {
        evbuffer_add_printf(out, "Fencing-High-Water: %" PRId64 "\r\n",
                            p->mark);
    }
    if (p->retry_after > 0) {
        evbuffer_add_printf(out, "Retry-After: %d\r\n", p->retry_after);
    }
    if (close) {
        evbuffer_add(out, "Connection: close\r\n", 19);
    }
    evbuffer_add(out, "\r\n", 2);
    evbuffer_add_buffer(out, body);
    evbuffer_free(body);
}
