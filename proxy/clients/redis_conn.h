/* redis_conn.h: one hiredis async connection on the loop, shared by the
 * Redis mark store and the Redis lock backend: URL, AUTH/SELECT, scripts
 * loaded at each connect, EVALSHA with NOSCRIPT reload, reconnect with
 * backoff and a watchdog for a Redis that stops answering. */
#ifndef TM_REDIS_CONN_H
#define TM_REDIS_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

struct event_base;
struct redis_conn;

/* A reply for a command sent through the connection: rep is NULL when
 * the connection was lost or closed before the reply came. */
typedef void (*redis_conn_cb)(void *priv, redisReply *rep);

/* An EVALSHA that met NOSCRIPT was queued again, behind the reload:
 * its reply now comes after anything sent before this call. */
typedef void (*redis_conn_resent_cb)(void *priv);

/* Connect to url (redis://[[user]:password@]host:port[/db]) on base, and
 * keep connected; what ("[store]", "[locks]") names the config section
 * in messages. scripts: nscripts Lua sources (static storage), loaded at
 * each connect. Unreachable now is not an error: the connection comes
 * up when Redis does. NULL with a message in err on a bad url or out of
 * memory. */
struct redis_conn *redis_conn_new(struct event_base *base, const char *url,
                                  const char *what, const char *const *scripts,
                                  size_t nscripts, int timeout_ms, char *err,
                                  size_t errlen)
    __attribute__((warn_unused_result));

/* The calls that wait for the first connection (coldq.h). */
struct coldq *redis_conn_coldq(struct redis_conn *c);

/* Connected, and every script loaded on this connection. */
bool redis_conn_ready(const struct redis_conn *c);

/* The live context for plain commands, or NULL while down. A caller's
 * reply callback reports each reply with redis_conn_replied. */
redisAsyncContext *redis_conn_ac(const struct redis_conn *c);

/* One more reply came in (feeds the watchdog). */
void redis_conn_replied(struct redis_conn *c);

/* "host:port", for log lines. */
const char *redis_conn_peer(const struct redis_conn *c);

/* EVALSHA of script number script with argc arguments after the SHA
 * (numkeys, keys, args: copied). cb gets the reply; on NOSCRIPT the
 * script is loaded again and the call sent once more (resent, if not
 * NULL, is told) before cb sees anything. false when down or out of
 * memory: then cb is never called. */
bool redis_conn_eval(struct redis_conn *c, size_t script, int argc,
                     const char **argv, const size_t *lens, redis_conn_cb cb,
                     redis_conn_resent_cb resent, void *priv)
    __attribute__((warn_unused_result));

/* An owned copy of a command's arguments, kept after the struct that
 * holds it (a request that may be sent again): the bytes it needs for
 * argc pointers, argc lengths and each argument with a NUL, 0 when that
 * does not fit in a size_t; and the copy into buf, of that size. */
size_t redis_argv_size(int argc, const size_t *lens);
void redis_argv_copy(char *buf, int argc, const char **argv, const size_t *lens,
                     const char ***out_argv, size_t **out_lens);

/* Drop the connection (every command in flight gets a NULL reply) and
 * free. NULL is fine. */
void redis_conn_free(struct redis_conn *c);

#endif
