/* adm_reply.c: the control port's answers on evhttp: a body with its
 * type, or a problem+json with Tidemark-Error and Retry-After. */
#include "adm_reply.h"

#include <stdio.h>

#include "problem.h"

#include <event2/buffer.h>
#include <event2/http.h>

void
adm_reply(struct evhttp_request *req, int code, const char *reason,
          const char *ctype, struct evbuffer *body)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      ctype);
    evhttp_send_reply(req, code, reason, body);
}

void
adm_reply_problem(struct evhttp_request *req, const struct problem *p)
{
    struct evbuffer *b = evbuffer_new();
    char body[PROBLEM_BODY_MAX];

    if (b == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), PROBLEM_HEADER,
                      problem_kind(p));
    if (p->retry_after > 0) {
        char v[16];

        snprintf(v, sizeof(v), "%d", p->retry_after);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After",
                          v);
    }
    evbuffer_add(b, body, problem_body(body, sizeof(body), p));
    adm_reply(req, p->status, problem_reason(p->status),
              "application/problem+json", b);
    evbuffer_free(b);
}
