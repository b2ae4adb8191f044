/* fdlimit.h: the process out of file descriptors (EMFILE: its own limit,
 * ENFILE: the system's): the limit hit, for a log line, and listeners
 * that rest instead of spinning when accept() finds none free. */
#ifndef TM_FDLIMIT_H
#define TM_FDLIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event;
struct evconnlistener;
struct tm_log;

/* An accept() that found no descriptor free (or no memory) leaves the
 * connection in the backlog and the listening socket readable: the
 * listener rests this long and tries again (nginx waits 500 ms too). */
#define LISTEN_REST_MS 500

/* True for EMFILE and ENFILE. */
bool fd_exhausted(int err);

/* The limit err (EMFILE or ENFILE) ran into, for a log line: "the
 * process may open 1024: ulimit -n". */
void fd_limit_text(int err, char *buf, size_t len);

/* A listener's rests. */
struct listen_rest {
    const struct tm_log *log; /* the proxy's, entered by the wake */
    struct evconnlistener *l;
    struct event *wake; /* enables l again */
    bool told;          /* a rest was logged; none accepted since */
    int64_t last;       /* ms, the last rest */
    char who[16];       /* "proxy", "admin": starts its lines */
};

/* Rests for l. false when out of memory. */
bool listen_rest_init(struct listen_rest *r, struct evconnlistener *l,
                      const char *who) __attribute__((warn_unused_result));
void listen_rest_fini(struct listen_rest *r);

/* For l's error callback: after an accept() that found no descriptor or
 * no memory, l rests LISTEN_REST_MS, logged once ("WHO: accept: Too many
 * open files (...)") until listen_rest_accepted, or, for a listener
 * without that hook, until it has not rested for 10 s; other errors are
 * logged as they come. */
void listen_rest_error(struct listen_rest *r);

/* l accepted a connection: a rest logged ends ("WHO: accepting
 * connections again"). */
void listen_rest_accepted(struct listen_rest *r);

#endif
