/* cfg_model.h: tidemark's configuration as the code reads it: plain data,
 * filled by the loader (conf/cfg.h) and read by every layer, the pure
 * one included (screen.h matches routes and upstreams in it). */
#ifndef TM_CFG_MODEL_H
#define TM_CFG_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "awscreds.h"
#include "profile.h"
#include "route.h"
#include "sigv4.h"

struct cfg_proxy {
    char *listen;          /* "host:port" or "unix:PATH" */
    char *listen_mode;     /* unix: the socket file's mode, octal */
    char *listen_group;    /* unix: its group; empty: ours */
    bool unmatched_reject; /* unmatched = reject */
    char *token_header;
    char *resource_header;
    int header_timeout_ms;   /* whole request head must arrive within */
    int idle_timeout_ms;     /* keep-alive client connection idle */
    int max_head;            /* bytes: request line + headers */
    int max_uri;             /* bytes of request-target (below max_head) */
    int max_headers;         /* header fields in one head */
    int max_connections;     /* client connections at once */
    int order_grace_ms;      /* after a 504, resource closed this long;
                              * after a start, fenced writes wait this long */
    int discard_limit;       /* body bytes read and dropped after a refusal */
    int multi_delete_max;    /* bytes of an S3 multi-object delete body read */
    int min_body_rate;       /* request body bytes/s; 0: no minimum */
    int body_rate_window_ms; /* over which min_body_rate is measured */
    int buffer_size;         /* per-direction back-pressure watermark */
    char *log_level;         /* error | warn | info | debug */
    bool log_json;           /* log_format = json */
    int64_t log_buffer;      /* bytes of lines stderr has not taken; 0: none */
    int drain_timeout_ms;    /* SIGTERM: in-flight requests get this long */
    char *resolver;          /* nameservers for upstream names; "": system */
};

/* How tidemark signs what it forwards to an upstream. */
enum cfg_sign {
    CFG_SIGN_NONE = 0,
    CFG_SIGN_AWS_SIGV4, /* AWS Signature V4, the payload unsigned */
};

/* Where sign = aws-sigv4 takes its credentials. */
enum cfg_sign_creds {
    CFG_CREDS_CHAIN = 0, /* the AWS SDKs' chain (env, web identity, ...) */
    CFG_CREDS_ENV,       /* AWS_ACCESS_KEY_ID ... only, checked at load */
};

/* Whether tidemark tells an upstream the client's address. */
enum cfg_forwarded {
    CFG_FWD_NONE = 0,
    CFG_FWD_XFF,     /* X-Forwarded-For: the client's list, then its own */
    CFG_FWD_RFC7239, /* Forwarded: the client's elements, then for=... */
};

/* TLS toward a peer: PEM files; NULL or empty: unset. */
struct cfg_tls {
    char *ca_file;   /* CAs the peer's certificate is checked against;
                      * unset: the system's */
    char *cert_file; /* the client certificate (and its chain) shown */
    char *key_file;  /* its private key, unencrypted */
};

/* A header added to every forwarded request. */
struct cfg_header {
    char *name;
    char *value;
};

struct cfg_upstream {
    char *name;
    char *url;         /* as written */
    bool tls;          /* https:// */
    char *host;        /* from url */
    char *port;        /* from url, or 80 / 443 */
    char *host_header; /* "host" or "host:port" as sent in Host */
    int connect_timeout_ms;
    int timeout_ms;         /* response head and between body reads */
    int max_idle;           /* pooled idle connections kept */
    int resolve_ms;         /* the host is looked up again this often */
    struct cfg_tls pki;     /* https: CAs, client certificate */
    struct cfg_header *add; /* add_header, ${VAR} expanded: secrets */
    size_t nadd;
    char **strip; /* strip_header names */
    size_t nstrip;
    bool host_preserve;     /* host = preserve: send the client's Host */
    char *bucket_endpoints; /* where the server reads a bucket from the Host */
    bool s3_fenced;         /* a fencing profile = s3 route forwards here */
    enum cfg_forwarded forwarded;
    enum cfg_sign sign;
    char *sign_region;
    char *sign_service;
    char *sign_credentials_file; /* empty: AWS_* from the environment */
    char *sign_profile;
    struct sigv4_creds sign_creds; /* read at load: secrets, never shown */
    enum cfg_sign_creds sign_credentials;
    int sign_refresh_ms; /* renew temporary credentials this long early */
    /* The chain's AWS_* variables (awscreds.h), captured at load; NULL:
     * unset or empty. The container token among them is a secret. */
    char *sign_env[AWS_ENV_N];
    int line;
};

struct cfg_route {
    char *name;
    struct tm_methods methods; /* none: every method */
    struct tm_tmpl path;
    char *path_src; /* the path template as written */
    bool resource_from_header;
    struct tm_rtmpl resource;
    char *resource_src; /* the resource template as written */
    enum tm_mode mode;
    enum tm_verify verify;
    enum tm_profile profile; /* the backend's protocol: its write methods */
    bool subtree;            /* webdav: keep collections' subtree marks */
    char *upstream;          /* name */
    size_t upstream_idx;     /* index into tm_config.upstreams */
    int64_t max_body;        /* request body bytes; 0: no limit */
    char *lease; /* NAME of the [lease] or [follow] section that carries
                  * its writes' token; NULL: the client sends it */
    int line;
};

struct cfg_store {
    char *type;         /* lmdb | postgres | redis | etcd */
    char *path;         /* lmdb */
    int64_t map_size;   /* lmdb: bytes */
    char *dsn;          /* postgres */
    char *url;          /* redis: one URL, or a cluster's seeds */
    bool cluster;       /* redis: url names a Redis Cluster */
    char *endpoints;    /* etcd */
    struct cfg_tls pki; /* etcd, https:// endpoints */
    int pool_size;      /* postgres, etcd: connections to the store */
    int wait_replicas;  /* redis: WAIT for this many replicas */
    int cache_entries;  /* in-memory marks kept */
    int timeout_ms;     /* one raise, end to end */
};

struct cfg_admin {
    char *listen;         /* "host:port", or empty: no control port */
    char *token_file;     /* path as written; NULL: no token */
    unsigned char *token; /* the bearer token (a secret) */
    size_t token_len;
    char *allowed_hosts; /* names separated by spaces; "" none */
};

/* The lock service on the control port. */
struct cfg_locks {
    char *backend;      /* lmdb | redis | postgres | etcd | zookeeper */
    char *path;         /* lmdb: the lease file */
    char *url;          /* redis: redis://host:port[/db], or seeds */
    bool cluster;       /* redis: url names a Redis Cluster */
    char *dsn;          /* postgres: a libpq connection string */
    char *endpoints;    /* etcd: http://host:port, comma-separated */
    struct cfg_tls pki; /* etcd, https:// endpoints */
    char *prefix;       /* etcd: the keys of lock N are under prefix N// */
    int pool_size;      /* postgres: connections; etcd: per endpoint */
    int timeout_ms;     /* redis, postgres, etcd: one operation */
    int64_t map_size;   /* lmdb: bytes */
    bool eager;         /* an acquire raises the resource's mark */
    int max_ttl_ms;     /* longer leases are refused (400) */
    int max_wait_ms;    /* longest ?wait_ms= an acquire may ask */
    char *zk_hosts;     /* zookeeper: host:port,host:port */
    char *zk_root;      /* zookeeper: where every lock has its node */
    int zk_sess_ms;     /* zookeeper: the session timeout asked for */
};

/* [watch NAME]: a lock applications take elsewhere (etcdctl lock, an etcd
 * client's mutex, kazoo's or Curator's ZooKeeper lock), followed so that a
 * change of holder raises the mark of the lock's resource to the new
 * holder's fence (proxy/locks/watch.c). */
struct cfg_watch {
    char *name;
    char *backend;      /* etcd | zookeeper */
    char *endpoints;    /* etcd: http://host:port, comma-separated */
    struct cfg_tls pki; /* etcd, https:// endpoints */
    char *zk_hosts;     /* zookeeper: host:port, comma-separated */
    char *prefix;       /* etcd: the keys of lock L are <prefix>L/<lease hex>;
                         * zookeeper: lock L is the znode <prefix>/L */
    char *resource;     /* template: {name} is the lock's name */
    char *token;        /* etcd: create_revision | lock_revision, the token
                         * holders send */
    int timeout_ms;     /* etcd: one call to the backend */
    int idle_ms;        /* etcd: a stream silent this long has broken */
    int zk_sess_ms;     /* zookeeper: the session timeout asked for */
    bool required;      /* /readyz is 503 while the watch is not ok */
    char *only;         /* NULL: every lock under prefix; else the one lock
                         * followed (a [follow] section's election), by its
                         * name below prefix */
    int line;
};

/* The application's own leader election, followed (proxy/carry/follow.c):
 * routes name it with lease = NAME. */
struct cfg_follow {
    char *name;         /* the section's NAME: the scope mark follow/NAME */
    char *backend;      /* etcd | zookeeper */
    char *endpoints;    /* etcd: http://host:port, comma-separated */
    struct cfg_tls pki; /* etcd, https:// endpoints */
    char *zk_hosts;     /* zookeeper: host:port, comma-separated */
    char *election;     /* etcd: the election's name (keys NAME/<lease>);
                         * zookeeper: the election's znode */
    char *identity;     /* this replica's, ${VAR} expanded: the holder's
                         * value (etcd) or node data (zookeeper) when it
                         * holds the election */
    char *kind;         /* etcd-election | curator-leaderlatch |
                         * kazoo-election */
    int timeout_ms;     /* etcd: one call */
    int idle_ms;        /* etcd: a stream silent this long has broken */
    int zk_sess_ms;     /* zookeeper: the session asked for */
    bool ready;         /* /readyz is 503 while not holding */
    int line;
};

/* A lease the sidecar holds on the application's behalf, through the
 * lock service's backend ([locks]); routes name it with lease = NAME. */
/* How much sooner than the TTL granted an etcd lease may end for another
 * holder: etcd tells the time left in whole seconds, cut down, and a
 * lease it reports at 0 s left is taken over as ended (lock_etcd.c). */
#define CFG_ETCD_LEASE_EARLY_MS 1000

struct cfg_lease {
    char *name;   /* the section's NAME: the scope mark lease/NAME */
    char *lock;   /* the lock's name in the lock service */
    int ttl_ms;   /* asked of the backend on each acquire and renewal */
    int renew_ms; /* 0: ttl_ms / 3 */
    /* A write is forwarded only while this much of the lease is left;
     * 0 in the file: half of what a renewal leaves, set at load */
    int margin_ms;
    char *health_url; /* renew only while it answers 2xx; NULL: always */
    bool ready;       /* /readyz is 503 while the lease is not held */
    int line;
};

/* Signing issued tokens and verifying them on verify = hmac routes. */
struct cfg_tokens {
    char *key_file;     /* path as written; NULL: no key */
    unsigned char *key; /* the file's bytes, one final LF dropped */
    size_t key_len;
};

struct tm_config {
    char *file;
    struct cfg_proxy proxy;
    struct cfg_admin admin;
    struct cfg_store store;
    struct cfg_locks locks;
    struct cfg_tokens tokens;
    struct cfg_upstream *upstreams;
    size_t nupstreams;
    struct cfg_route *routes; /* file order */
    size_t nroutes;
    struct cfg_watch *watches; /* file order */
    size_t nwatches;
    struct cfg_lease *leases; /* file order */
    size_t nleases;
    struct cfg_follow *follows; /* file order */
    size_t nfollows;
    char *env_links;   /* Kubernetes service-link variables set aside,
                        * names separated by spaces; NULL: none */
    char *warnings;    /* "FILE: warning: ..." lines, '\n'-separated, of
                        * what loads but does nothing; NULL: none */
    char *notes;       /* "FILE: note: ..." lines of what the loader chose
                        * for a key left to its default; NULL: none */
    char *check_notes; /* "FILE: note: ..." lines --check says too: what
                        * is found only at start; NULL: none */
};

#endif
