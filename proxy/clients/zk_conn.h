/* zk_conn.h: one ZooKeeper session for the event loop (libzookeeper_mt):
 * the client's completions and watch events handed back to the loop
 * thread through an eventfd queue, and a new handle when a session ends.
 * Used by the zookeeper lock backend and the zookeeper [watch] source. */
#ifndef TM_ZK_CONN_H
#define TM_ZK_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zookeeper/zookeeper.h>

struct event_base;
struct zk_conn;

/* The step of a call zk_conn made itself for a watch event; the owner's
 * steps are other values. */
#define ZK_CALL_EVENT (-1)

/* One request to ZooKeeper, or one watch event. Made on the loop thread
 * (events on the client's), filled by the completion, queued, then handed
 * to the owner's call hook on the loop thread, who frees it with
 * zk_call_free. */
struct zk_call {
    /* zk_conn's: */
    struct zk_call *next;          /* the done queue (under its mutex) */
    struct zk_call *oprev, *onext; /* the calls the client holds */
    struct zk_conn *k;
    uint64_t gen; /* the handle it went out on */
    bool queued;  /* in the done queue (under its mutex) */
    bool out;     /* with the client */
    /* the owner's (freed with the call: path, name): */
    int step;
    void *req;
    char *path;
    char *name;
    size_t len;
    int code;
    int64_t num[2];
    /* filled on the client's thread: */
    int rc;
    struct Stat stat;
    char *str; /* a created node's path; an event's path */
    char **kids;
    int nkids;
    char *data;
    int data_len;
    int type, state; /* events */
};

enum zk_conn_state {
    ZK_CONN_UP = 0,  /* connected (again), maybe in a new session */
    ZK_CONN_DOWN,    /* the connection is lost; the session may live on */
    ZK_CONN_EXPIRED, /* the session ended: its watches and ephemeral nodes
                      * are gone; a new handle is on its way */
};

struct zk_conn_hooks {
    /* A call came back (or an event came): c is the owner's to free. */
    void (*call)(void *arg, struct zk_call *c);
    /* The session's state changed. */
    void (*state)(void *arg, enum zk_conn_state st);
};

/* A session with the ensemble hosts (a connect string), asking for
 * session_ms; who names it in log lines ("locks: zookeeper"). Not
 * reachable now is an outage (it tries again every second), not an
 * error. NULL with a message in err when out of memory or events. */
struct zk_conn *zk_conn_new(struct event_base *base, const char *hosts,
                            int session_ms, const char *who,
                            const struct zk_conn_hooks *hooks, void *arg,
                            char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* The handle, or NULL between handles and while closing (a call sent
 * then comes back ZCLOSING through zk_conn_sent). */
zhandle_t *zk_conn_zh(const struct zk_conn *k);

/* The context to pass with zk_conn_watcher. */
void *zk_conn_ctx(const struct zk_conn *k);

/* The current handle's number: a call's gen differs once it is gone. */
uint64_t zk_conn_gen(const struct zk_conn *k);

/* Connected and not closing. */
bool zk_conn_ready(const struct zk_conn *k);

/* True once zk_conn_close began. */
bool zk_conn_closing(const struct zk_conn *k);

/* A call for step about path (copied; NULL: none). NULL when out of
 * memory. */
struct zk_call *zk_call_new(struct zk_conn *k, int step, const char *path);

void zk_call_free(struct zk_call *c);

/* "dir/kid", malloc'd; NULL when out of memory. */
char *zk_path_join(const char *dir, const char *kid);

/* Free n names and their array, as a call's kids (taken from it). */
void zk_kids_free(char **kids, int n);

/* c went to the client with result rc: the client holds it (ZOK) and
 * will complete it, or c comes back through the queue with rc. */
void zk_conn_sent(struct zk_conn *k, struct zk_call *c, int rc);

/* Hand c back through the queue, so never inside the caller's call. */
void zk_conn_push(struct zk_conn *k, struct zk_call *c);

/* Completions for the zoo_a* calls, with the call as data; they copy
 * what is valid only during the call (an allocation that fails reads as
 * ZSYSTEMERROR, an outage). */
void zk_done_void(int rc, const void *data);
void zk_done_string(int rc, const char *s, const void *data);
void zk_done_stat(int rc, const struct Stat *st, const void *data);
void zk_done_string_stat(int rc, const char *s, const struct Stat *st,
                         const void *data);
void zk_done_strings(int rc, const struct String_vector *v, const void *data);
void zk_done_strings_stat(int rc, const struct String_vector *v,
                          const struct Stat *st, const void *data);
void zk_done_data(int rc, const char *value, int len, const struct Stat *st,
                  const void *data);

/* A watcher for zoo_aw* calls, with zk_conn_ctx as its context: a node
 * event comes back as a call of step ZK_CALL_EVENT (type, state, str:
 * the path). Session events are zk_conn's (the state hook). */
void zk_conn_watcher(zhandle_t *zh, int type, int state, const char *path,
                     void *ctx);

/* An answer that says nothing about the node: the connection, the
 * session or the handle went, or the client failed. */
bool zk_rc_outage(int rc);

/* Begin closing: nothing new goes out; the calls out are answered for up
 * to settle_ms (blocking the loop thread) while connected. Then
 * zk_conn_free. */
void zk_conn_close(struct zk_conn *k, int settle_ms);

/* Close the handle: every call it still held comes back to the call
 * hook as ZCLOSING, now; then free. NULL is fine. */
void zk_conn_free(struct zk_conn *k);

#endif
