/* rewrite.h: the heads as the other side gets them. Writes into an
 * evbuffer what it is given, changed as the proxy's contract says. */
#ifndef TM_REWRITE_H
#define TM_REWRITE_H

#include <stdbool.h>
#include <stdint.h>

struct evbuffer;
struct cfg_upstream;
struct http_header;
struct http_response;
struct request;

/* Whether the client header f of rq reaches upstream u as it is: not
 * hop-by-hop, not Host, a fencing header, one u strips or sets itself
 * (add_header, what its signature replaces, the X-Forwarded-For or
 * Forwarded its forwarded option writes). */
bool rewrite_forwards(const struct request *rq, const struct cfg_upstream *u,
                      const struct http_header *f);

/* The request head of rq as upstream u gets it: origin-form target, u's
 * Host (or the client's with host_preserve), the fencing headers,
 * hop-by-hop headers and those u strips or adds removed, u's added
 * headers, a fenced Destination under u's authority, the client's
 * address (client, of family af: sock_peer) when u's forwarded option
 * says so, u's signature (sign = aws-sigv4: sign.h), Via. */
void rewrite_request(struct evbuffer *out, const struct request *rq,
                     const struct cfg_upstream *u, const char *client, int af);

/* The response head r as the client gets it: hop-by-hop headers and
 * those only tidemark sets (Tidemark-Error, Fencing-High-Water)
 * removed; on a final answer (status >= 200) Fencing-High-Water: mark
 * when mark > 0, and Connection: close when close (keep-alive to an
 * HTTP/1.0 client, minor 0); Via. */
void rewrite_response(struct evbuffer *out, const struct http_response *r,
                      int64_t mark, bool close, int minor);

#endif
