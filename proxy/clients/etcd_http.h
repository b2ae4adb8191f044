/* etcd_http.h: etcd's v3 JSON gateway (POST /v3/...) over evhttp, shared
 * by the etcd mark store and the etcd lock backend: the endpoints (each
 * address of each name), calls with failover within one deadline, JSON
 * in and out with jansson, readiness, and watch streams. */
#ifndef TM_ETCD_HTTP_H
#define TM_ETCD_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../../policies/cfg_model.h"
#include "etcd_json.h"

struct event_base;
struct etcd_http;
struct etcd_watch;

enum etcd_status {
    ETCD_OK = 0,   /* 200 and a JSON object: body */
    ETCD_NOANSWER, /* no endpoint answered within the deadline (or closing) */
    ETCD_FAILED,   /* etcd answered an error: http, code, message */
    ETCD_BAD,      /* 200, but not one JSON object */
};

/* One call's outcome. body and message are borrowed: valid during the
 * callback only. tries: the endpoints the call was sent to (more than
 * one: an earlier one may have applied it without answering). */
struct etcd_reply {
    enum etcd_status st;
    int http;
    int code; /* gRPC code of an error (5: not found, 14: unavailable) */
    const char *message;
    json_t *body;
    int tries;
};

/* Runs once per call, on the loop thread, never from inside
 * etcd_http_call. */
typedef void (*etcd_cb)(void *arg, const struct etcd_reply *rep);

/* Parse endpoints ("http://host:port, ..." or all "https://") and
 * resolve their names; https:// ones speak TLS with tls's CA file (or
 * the system's) and client certificate, the certificate checked against
 * the name as written (tls may be NULL: no files). who names the
 * section in messages ("[store]"). timeout_ms: one call, end to end,
 * across endpoints; nconns: connections per endpoint. NULL with a
 * message in err. Probes /v3/maintenance/status until etcd answers, and
 * again whenever a call gets no answer; a TLS failure is logged with its
 * reason. */
struct etcd_http *etcd_http_new(struct event_base *base, const char *endpoints,
                                const struct cfg_tls *tls, const char *who,
                                int timeout_ms, int nconns, char *err,
                                size_t errlen)
    __attribute__((warn_unused_result));

/* Answer every call in flight with ETCD_NOANSWER (callbacks run now),
 * end every watch without a callback, and free everything. */
void etcd_http_free(struct etcd_http *h);

/* POST body (taken: freed here, also on failure) to path; cb(arg, rep)
 * answers. Calls that got no answer are sent to the next endpoint while
 * the deadline allows. false when it could not be started (no callback
 * will run). */
bool etcd_http_call(struct etcd_http *h, const char *path, json_t *body,
                    etcd_cb cb, void *arg) __attribute__((warn_unused_result));

/* true after an answer from etcd, until a call or probe gets none. */
bool etcd_http_ready(struct etcd_http *h);

/* fn(arg) each time h becomes ready (the first answer, and after an
 * outage), on the loop thread. */
void etcd_http_on_up(struct etcd_http *h, void (*fn)(void *arg), void *arg);

/* The events of a watch: result is one message's "result" object
 * (borrowed), or NULL once the stream ended (closed, refused, canceled
 * or compacted by etcd): the watch is over, the owner starts another
 * if it still wants one, and calls etcd_watch_free in any case. */
typedef void (*etcd_watch_cb)(void *arg, json_t *result);

/* Open a watch stream with create_request (taken) on a connection of
 * its own, at the endpoint calls currently go to. NULL when it could not
 * be started. */
struct etcd_watch *etcd_http_watch(struct etcd_http *h, json_t *create_request,
                                   etcd_watch_cb cb, void *arg)
    __attribute__((warn_unused_result));

/* End w; no callback runs after this. Safe from inside w's callback. */
void etcd_watch_free(struct etcd_watch *w);

#endif
