/* sock.h: reading a connection's socket, the client's and the
 * upstream's alike. A plain socket is read by tidemark itself: one
 * recv-sized readv into the bufferevent's input per readable event, with
 * no ioctl(FIONREAD) before it (libevent's evbuffer_read makes one per
 * read). A TLS socket is read by its bufferevent (OpenSSL must). Writes
 * always go through the bufferevent. */
#ifndef TM_SOCK_H
#define TM_SOCK_H

#include <stdbool.h>
#include <stddef.h>

#include <event2/bufferevent.h>

struct event;
struct evbuffer_cb_entry;

/* What one read takes: SOCK_READ_MIN at first, twice as much after a
 * read that filled all it asked for, up to SOCK_READ_MAX (and never past
 * the input's limit), and half as much after one that filled less than a
 * quarter: a small request costs a 4 KiB chain (with libevent's chain
 * header, a power of two), a long body one read per 64 KiB, the default
 * buffer_size (nginx reads a streamed body 16 KiB at a time). */
#define SOCK_READ_MIN (4096 - 128)
#define SOCK_READ_MAX (65536 - 128)

struct sock {
    struct bufferevent *bev;      /* writes; and reads when TLS (ev NULL) */
    struct event *ev;             /* our own read event; NULL: bev reads */
    struct evbuffer_cb_entry *wm; /* resumes reading below hiwat */
    bufferevent_data_cb read_cb;
    bufferevent_event_cb event_cb;
    void *arg;
    size_t hiwat;     /* no reading while the input holds this much; 0: any */
    size_t read_size; /* what the next read asks for */
    int read_ms;      /* read timeout, 0: none */
    int write_ms;     /* the bufferevent's write timeout as set, 0: none */
    bool reading;     /* the owner wants reads */
    bool added;       /* ev is added (arm keeps it so) */
    bool suspended;   /* the input is at hiwat */
};

/* Take bev (a connected socket bufferevent, plain or TLS: tls says which)
 * for reading. false when out of memory. bev's EV_READ is never enabled
 * for a plain socket: its reads are ours. */
bool sock_init(struct sock *s, struct bufferevent *bev, bool tls);
/* Free the read event; before bev is freed. */
void sock_fini(struct sock *s);

/* The owner's callbacks, as a bufferevent's: read_cb after bytes came,
 * event_cb with BEV_EVENT_READING and EOF, ERROR or TIMEOUT when reading
 * ends (reading is then off), and with BEV_EVENT_WRITING from the
 * bufferevent. Any may be NULL. */
void sock_setcb(struct sock *s, bufferevent_data_cb read_cb,
                bufferevent_data_cb write_cb, bufferevent_event_cb event_cb,
                void *arg);

/* Reading on or off. */
void sock_read(struct sock *s, bool on);
/* Stop reading while the input holds hiwat bytes or more (0: never);
 * reading resumes by itself when it drains below. */
void sock_read_limit(struct sock *s, size_t hiwat);
/* The read timeout (while reading, since the last bytes came) and the
 * write timeout (while the bufferevent writes), in ms; 0: none. A read
 * timeout change costs no system call. */
void sock_timeouts(struct sock *s, int read_ms, int write_ms);

/* The room sock_peer's host needs (INET6_ADDRSTRLEN). */
#define SOCK_HOST_MAX 46

/* How a client on a Unix socket is spelled (nginx's $remote_addr). */
#define SOCK_UNIX_PEER "unix:"

/* The address of fd's peer: its text, without the port, into host (an
 * IPv4-mapped IPv6 address as IPv4; SOCK_UNIX_PEER for a Unix socket's),
 * its port into *port (0 for a Unix socket). Returns AF_INET, AF_INET6
 * or AF_UNIX, or 0 when fd has no peer. */
int sock_peer(evutil_socket_t fd, char host[SOCK_HOST_MAX], unsigned *port);

/* "host:port" of a connection's peer ("[v6]:port" for IPv6, "unix:"
 * for a Unix socket's): '[', the host, ']', ':', five digits and the
 * NUL. */
#define SOCK_PEER_MAX (SOCK_HOST_MAX + 9)

/* A connection's peer as text, read once: one getpeername a
 * connection, not one a request. Zeroed: not read yet. */
struct sock_peer_text {
    char s[SOCK_PEER_MAX];
    bool read;
    bool known;
};

/* t's text for the peer of bev's socket (read on the first call: later
 * calls do not even ask bev for its socket), or NULL when it has none. */
const char *sock_peer_text(struct sock_peer_text *t, struct bufferevent *bev);

#endif
