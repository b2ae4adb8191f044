/* zkname.h: lock names as ZooKeeper znode names, and the lock recipe's
 * order among a lock's children, for the zookeeper lock backend. Pure. */
#ifndef TM_ZKNAME_H
#define TM_ZKNAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most bytes zkname_escape writes for a name of len bytes. */
#define ZKNAME_MAX(len) (3 * (len))

/* Write name (len bytes) as one znode name into out, which has room for
 * ZKNAME_MAX(len) bytes: [A-Za-z0-9_-] as they are, every other byte as
 * %XX (upper-case hex). Returns the bytes written (no NUL). A znode name
 * holds no '/' and "." and ".." are none, so every name maps to a valid
 * one, and distinct names to distinct ones. */
size_t zkname_escape(const char *name, size_t len, char *out);

/* The name that zkname_escape wrote as e (elen bytes), into out (room
 * for elen bytes) and *outlen. false when zkname_escape writes no such
 * thing (a bad or lower-case escape, a byte it escapes, an escaped byte
 * it keeps): one name, one spelling. */
bool zkname_unescape(const char *e, size_t elen, char *out, size_t *outlen);

/* The sequence number ZooKeeper appended to a sequential node's name
 * (its last ten characters, decimal digits), or -1 when kid has none. */
int64_t zkname_seq(const char *kid);

/* The index among kids (n names) of the one with the lowest sequence
 * number: the lock's holder in the recipe. -1 when none has one. */
int zkname_first(char *const *kids, int n);

/* The child of dir that path names: path is dir "/" C or dir "/" C "/"
 * more, C one non-empty znode name. Returns C's start in path and its
 * length in *len; NULL when path is not below dir. dir has no trailing
 * '/'. */
const char *zkname_below(const char *dir, const char *path, size_t *len);

/* Where a node created for a lock stands among the lock's children. */
enum zkname_turn {
    ZKNAME_HELD = 0,  /* the node has the lowest sequence number */
    ZKNAME_BEHIND,    /* another child has: it holds the lock */
    ZKNAME_NO_HOLDER, /* no child has a sequence number */
    ZKNAME_FOREIGN,   /* node is not one child of dir */
};

/* The turn of node (the path ZooKeeper answered a create with: any
 * bytes) among kids (n names), dir's children; dir has no trailing '/'.
 * *first: the index of the lowest child (ZKNAME_HELD, ZKNAME_BEHIND),
 * else -1. node must be exactly dir "/" C, C a child: what is not is
 * ZKNAME_FOREIGN, never read past its end. */
enum zkname_turn zkname_turn(const char *dir, const char *node,
                             char *const *kids, int n, int *first);

/* The time a lease has left, 0 to ttl ms: its node's data said ttl,
 * last written at mtime by the leader's clock (any value a peer sends),
 * now by ours. Saturates: never overflows. */
int64_t zkname_left(int64_t ttl, int64_t mtime, int64_t now);

#endif
