/* redis_slot.h: Redis Cluster's key to hash slot mapping (CRC16 of the
 * key's hash tag) and the redirections a node answers (MOVED, ASK).
 * Pure: no I/O. */
#ifndef TM_REDIS_SLOT_H
#define TM_REDIS_SLOT_H

#include <stdbool.h>
#include <stddef.h>

#include "slice.h"

#define REDIS_SLOTS 16384

/* The CRC16 Redis Cluster uses (CCITT XMODEM: polynomial 0x1021, initial
 * value 0, no reflection) of p[0..len). */
unsigned redis_crc16(const char *p, size_t len);

/* The hash slot (0..16383) of key[0..len), as Redis computes it: when the
 * key holds a '{' followed later by a '}' with at least one byte between
 * them, only the bytes between the first '{' and the first '}' after it
 * (the hash tag) count; otherwise the whole key. So "lock:{N}" and
 * "fence:{N}" share a slot for every N that is not empty and does not
 * begin with '}', also when N holds braces elsewhere. */
unsigned redis_slot(const char *key, size_t len);

/* Whether p[0..len) can be a node's host as a peer names it (in a
 * redirection or a CLUSTER SLOTS answer): a name or an address, with no
 * space, control, bracket, '/' or '@', so that it is one host in the
 * URL it is put into. An empty host is the caller's to handle. */
bool redis_host_ok(const char *p, size_t len);

enum redis_redirect_kind {
    REDIS_REDIRECT_NONE = 0, /* not a redirection */
    REDIS_REDIRECT_MOVED,    /* the slot lives elsewhere now: update the map */
    REDIS_REDIRECT_ASK,      /* this key, this once: ASKING, then send there */
};

struct redis_redirect {
    enum redis_redirect_kind kind;
    unsigned slot;        /* 0..16383 */
    struct tm_slice host; /* into the reply; may be empty: the host of the
                           * node that answered (an unknown endpoint) */
    unsigned port;        /* 1..65535 */
};

/* Read an error reply's text s[0..len): "MOVED <slot> <host>:<port>" or
 * "ASK <slot> <host>:<port>", the port after the last ':' (an IPv6 host
 * comes without brackets, and with them when a node is configured so:
 * brackets are removed). Returns the kind; *out filled only for MOVED or
 * ASK. Anything else, also a redirection with a bad slot, host or port,
 * is REDIS_REDIRECT_NONE: an error to report, never a place to go. */
enum redis_redirect_kind redis_redirect_parse(const char *s, size_t len,
                                              struct redis_redirect *out)
    __attribute__((warn_unused_result));

#endif
