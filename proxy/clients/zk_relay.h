/* zk_relay.h: ZooKeeper's answers weighed before its C client reads them.
 *
 * The client (libzookeeper_mt) reads each frame a server sends into a
 * buffer of the length the frame's header gives, up to 2 GiB, on a
 * thread and a socket of its own. So the client is given loopback
 * addresses instead of the ensemble's: the relay listens on one port for
 * each server, and on a thread of its own moves the bytes between each
 * connection the client makes there and the server the port stands for,
 * weighing the server's frames (policies/lenframe.h). A frame that says
 * it is longer than ZK_FRAME_MAX drops the connection before the client
 * has its header; the client then connects again, as after any loss. */
#ifndef TM_ZK_RELAY_H
#define TM_ZK_RELAY_H

#include <stddef.h>

/* The longest frame a server may send: what the other stores' answers
 * may be (a node's data is under ZooKeeper's jute.maxbuffer, 1 MiB less
 * a byte by default; a list of children may be longer). */
#define ZK_FRAME_MAX (16u << 20)

/* The connections a relay holds at once, each a client's and its
 * server's: the client keeps one, and may open the next before the last
 * is closed. */
#define ZK_RELAY_CONNS 4

struct zk_relay;

/* A relay for hosts (host:port or [v6]:port, comma-separated, as the
 * configuration checks them), its thread started; who names it in log
 * lines; connect_ms bounds a connection to one server (its addresses
 * share it). A server's name is resolved at each connection. NULL with
 * a message in err when a loopback port cannot be opened, or no thread
 * or memory. */
struct zk_relay *zk_relay_new(const char *hosts, const char *who,
                              int connect_ms, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* The connect string to give the client in hosts' place:
 * "127.0.0.1:P1,127.0.0.1:P2", in hosts' order. */
const char *zk_relay_hosts(const struct zk_relay *r);

/* Stop the thread and close every connection and port; free. NULL is
 * fine. */
void zk_relay_free(struct zk_relay *r);

#endif
