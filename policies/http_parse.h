/* http_parse.h: a strict HTTP/1.1 message parser (RFC 9112) for request
 * heads, response heads and chunked bodies. Pure: no I/O, no allocation;
 * every string is a slice into the caller's buffer. */
#ifndef TM_HTTP_PARSE_H
#define TM_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "slice.h"

#define HTTP_MAX_HEADERS 128 /* hard ceiling; the configured limit is lower */

enum http_rc {
    HTTP_OK = 0,
    HTTP_INCOMPLETE,     /* no end of head yet: read more */
    HTTP_BAD,            /* 400: malformed or ambiguous */
    HTTP_HEAD_TOO_LARGE, /* 431: head over max_head, or too many headers */
    HTTP_URI_TOO_LONG,   /* 414 */
    HTTP_NOT_IMPL,       /* 501: unknown transfer coding */
    HTTP_BAD_VERSION,    /* 505 */
};

enum http_body {
    HTTP_BODY_NONE = 0, /* also for Content-Length: 0 */
    HTTP_BODY_LENGTH,   /* content_length bytes, always > 0 */
    HTTP_BODY_CHUNKED,
    HTTP_BODY_CLOSE, /* responses only: until the connection closes */
};

struct http_header {
    struct tm_slice name;
    struct tm_slice value; /* OWS trimmed */
    bool hop;              /* hop-by-hop: a standard one or named in
                            * Connection; never forwarded */
};

struct http_limits {
    size_t max_head; /* bytes of head, final CRLFCRLF included */
    size_t max_headers;
    size_t max_uri; /* request-target bytes */
};

struct http_request {
    size_t head_len; /* bytes of the head, CRLFCRLF included */
    struct tm_slice method;
    struct tm_slice target; /* as sent */
    struct tm_slice path;   /* target up to '?'; for absolute-form
                             * (http://host/p?q) the "/p" part; for
                             * OPTIONS "*", "*". Raw: not decoded or
                             * normalized */
    int minor;              /* HTTP/1.<minor>: 0 or 1 */
    /* The caller's room for HTTP_MAX_HEADERS when parsing (struct
     * http_request_space); a request kept after its head was parsed
     * holds only its nheaders. */
    struct http_header *headers;
    size_t nheaders;
    enum http_body body;
    uint64_t content_length; /* body == HTTP_BODY_LENGTH only, else 0 */
    bool keep_alive;         /* the client allows another request after */
    bool expect_continue;    /* Expect: 100-continue */
    const char *error;       /* added: why the head was refused (static
                              * text), NULL on HTTP_OK/HTTP_INCOMPLETE */
};

/* A request with room for every header a head may have: parse space.
 * http_request_space_init points its r.headers at its headers. */
struct http_request_space {
    struct http_request r;
    struct http_header headers[HTTP_MAX_HEADERS];
};

/* Point s's request at s's headers; returns the request. */
struct http_request *http_request_space_init(struct http_request_space *s);

struct http_response {
    size_t head_len;
    int status;
    int minor;
    struct tm_slice reason;
    struct http_header headers[HTTP_MAX_HEADERS];
    size_t nheaders;
    enum http_body body;
    uint64_t content_length; /* body == HTTP_BODY_LENGTH only, else 0 */
    bool keep_alive;         /* the upstream allows reuse after this */
    const char *error;       /* added: as in struct http_request */
};

/* Parse one request head from buf[0..len). Leading empty lines (CRLF,
 * at most 4) before the request line are skipped and counted in
 * head_len. Returns HTTP_INCOMPLETE while no complete head is in buf and
 * len < max_head; HTTP_HEAD_TOO_LARGE once len reaches max_head without
 * one (a head, CRLFCRLF included, may be exactly max_head bytes). Errors
 * are reported as soon as the bytes that prove them are in buf, even
 * before the head is complete; every prefix of a valid head is
 * HTTP_INCOMPLETE. Each call parses from buf[0]. On any result but
 * HTTP_OK the fields of *req are only partly set. Refuses
 * (HTTP_BAD): bare CR or LF-only line ends, obs-fold, whitespace before
 * a colon, control characters or NUL, an invalid method or field name,
 * Content-Length with Transfer-Encoding, repeated (even equal) or
 * listed or non-numeric or overflowing Content-Lengths, chunked not last
 * or twice, Transfer-Encoding in HTTP/1.0, a missing (HTTP/1.1) or
 * repeated or invalid Host, CONNECT and authority-form targets, '*'
 * except with OPTIONS, absolute-form without a path, a '#' or a byte
 * outside 0x21-0x7e in the target, Connection naming Content-Length or
 * Host, more than 32 Connection options, and a field that some server
 * reads as Content-Length, Transfer-Encoding or one of the fencing
 * headers but that is spelled otherwise (Transfer_Encoding, Fencing.Token:
 * hname.h). fence: the fencing header names, two entries, NULL entries
 * (or fence NULL) unused. Unknown transfer codings before a final
 * chunked: HTTP_NOT_IMPL. Versions other than 1.0/1.1 (but well formed):
 * HTTP_BAD_VERSION. Hop-by-hop fields get hop set: the standard ones,
 * Transfer-Encoding included, and those named in Connection. */
enum http_rc http_parse_request(const char *buf, size_t len,
                                const struct http_limits *lim,
                                const char *const *fence,
                                struct http_request *req);

/* Parse one response head. head_request: the request was HEAD (no body
 * follows whatever the headers say). 1xx, 204 and 304 have no body. A
 * response without Content-Length or chunked is HTTP_BODY_CLOSE. The
 * same framing rules as requests apply: ambiguous framing is HTTP_BAD,
 * and so is any transfer coding but chunked. Status codes outside
 * 100-599 are HTTP_BAD; the reason phrase may be empty, with or without
 * its SP. Content-Length or Transfer-Encoding in another spelling is
 * HTTP_BAD here too. keep_alive is false for HTTP_BODY_CLOSE. */
enum http_rc http_parse_response(const char *buf, size_t len,
                                 const struct http_limits *lim,
                                 bool head_request, struct http_response *resp);

/* A head that arrives in pieces is searched for its end from where the
 * last search stopped, and parsed once, when it may be whole, rather than
 * from its start at every read: a head sent a byte at a time costs
 * linear work, not quadratic. Zero it for each new head. */
struct http_scan {
    size_t scanned;  /* where the next search for the empty line starts */
    size_t looked;   /* bytes the searches looked at: for tests */
    unsigned parses; /* whole parses made: for tests */
};

/* The request head at buf[0..len), where buf holds the bytes of the last
 * call (moved or not) and maybe more: parsed by http_parse_request once
 * it may be whole (an empty line came, len reached max_head, or final:
 * no more bytes will come), so with the result one read of the same
 * bytes gives. Until then HTTP_INCOMPLETE, having looked at the new
 * bytes only; an error inside the head is reported once one of those
 * happens, not as soon as its bytes came. */
enum http_rc http_parse_request_more(struct http_scan *sc, const char *buf,
                                     size_t len, bool final,
                                     const struct http_limits *lim,
                                     const char *const *fence,
                                     struct http_request *req);

/* The same for a response head (http_parse_response). */
enum http_rc http_parse_response_more(struct http_scan *sc, const char *buf,
                                      size_t len, bool final,
                                      const struct http_limits *lim,
                                      bool head_request,
                                      struct http_response *resp);

/* Index of the first header named name (case-insensitive), from index
 * start, or -1. */
int http_find_header(const struct http_header *h, size_t n, size_t start,
                     const char *name);

/* The chunked body decoder: a state machine fed the raw bytes of a
 * chunked body in pieces of any size. */
struct http_chunked {
    int state;
    uint64_t remaining;   /* data bytes left in the current chunk */
    size_t line_len;      /* bytes of the current size or trailer line */
    size_t trailer_bytes; /* total trailer section, bounded */
    bool done;
    const char *error; /* added: why the body was refused */
    /* Trailer fields refused by name besides the framing ones (set after
     * http_chunked_init; NULL entries are unused): the fencing headers. */
    const char *forbid[2];
    size_t tname_len; /* bytes of the trailer field name read so far */
    unsigned tmatch;  /* refused names it may still be, one bit each */
};

void http_chunked_init(struct http_chunked *c);

/* Trailer fields named Content-Length, Transfer-Encoding, Host or in
 * forbid[], in any spelling a server may read as that name (hname.h),
 * are refused: a trailer must not change framing or routing, nor carry
 * a token the check never saw. Names of any length are checked. */

/* Feed n bytes at p. Returns how many bytes of p belong to the body (all
 * n unless the body ends inside p; then the rest is the next message).
 * Sets c->done when the last chunk and trailer section are complete.
 * Returns (size_t)-1 on a framing error: bad or overflowing chunk size
 * (empty, whitespace, over 16 hex digits or 2^63 - 1), missing CRLF
 * after data, bare CR or LF, a size line over 4 KiB, a trailer section
 * over 8 KiB or a malformed trailer line. Chunk extensions are allowed
 * and skipped. The result is the same however the body is split. Once
 * done, feeding returns 0; once refused, (size_t)-1 again. */
size_t http_chunked_feed(struct http_chunked *c, const char *p, size_t n);

/* The data of a whole chunked body p (n bytes, framing and trailers as
 * http_chunked_feed reads them) into out (cap bytes); its length in
 * *outlen. false when the body is malformed, not complete in p, or its
 * data does not fit. */
bool http_chunked_body(const char *p, size_t n, char *out, size_t cap,
                       size_t *outlen) __attribute__((warn_unused_result));

#endif
