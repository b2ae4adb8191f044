/* http_limit.h: what an evhttp client connection may hold unread. evhttp
 * bounds an answer's headers and body when told to, but a line that
 * never ends (a chunk's size) it waits on for ever, holding every byte. */
#ifndef TM_HTTP_LIMIT_H
#define TM_HTTP_LIMIT_H

#include <stdbool.h>
#include <stddef.h>

struct bufferevent;
struct evbuffer;
struct evbuffer_cb_info;

/* Room over a whole answer (headers and body) for what one read brings
 * in besides. */
#define HTTP_LIMIT_SLACK (64u << 10)

/* What a connection whose answers have head_max bytes of headers and
 * body_max of body may hold unread: a whole answer waits there until its
 * last byte (a chunk until its own), and nothing else does. */
#define HTTP_LIMIT_UNREAD(head_max, body_max)                                  \
    ((size_t)(head_max) + (size_t)(body_max) + HTTP_LIMIT_SLACK)

/* For an evbuffer callback on bev's input (in): when bytes were added
 * and more than max (HTTP_LIMIT_UNREAD) now wait unread, stop bev reading
 * and fail it as a broken connection (a read error, delivered on a later
 * pass of the loop: evhttp answers its request NULL, its error callback
 * first). True when it did, once a connection; the caller says why in
 * its log. */
bool http_limit_unread(struct bufferevent *bev, const struct evbuffer *in,
                       const struct evbuffer_cb_info *info, size_t max);

#endif
