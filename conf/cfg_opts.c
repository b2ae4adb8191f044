/* cfg_opts.c: the one table of options. Each entry says a key's section,
 * type, default, field, bounds or choices or ops, flags and help; the
 * types' setters and the values' operations are in cfg_value.c, the ops
 * the entries name in cfg_custom.c and cfg_check.c. */
#include "cfg_opts.h"

#include "../policies/token.h"
#include "cfg_set.h"

static const char *const unmatched_choices[] = {"pass", "reject", NULL};
static const char *const level_choices[] = {"error", "warn", "info", "debug",
                                            NULL};
static const char *const type_choices[] = {"lmdb", "postgres", "redis", "etcd",
                                           NULL};
static const char *const mode_choices[] = {"correctness", "efficiency", "off",
                                           NULL};
static const char *const verify_choices[] = {"none", "hmac", NULL};
static const char *const profile_choices[] = {"http", "webdav", "s3", NULL};
static const char *const lock_backend_choices[] = {
    "lmdb", "redis", "postgres", "etcd", "zookeeper", NULL};
static const char *const host_choices[] = {"upstream", "preserve", NULL};
static const char *const sign_choices[] = {"none", "aws-sigv4", NULL};
static const char *const sign_creds_choices[] = {"chain", "env", NULL};
static const char *const forwarded_choices[] = {"none", "x-forwarded-for",
                                                "forwarded", NULL};
static const char *const log_format_choices[] = {"text", "json", NULL};
static const char *const follow_backend_choices[] = {"etcd", "zookeeper", NULL};
static const char *const follow_kind_choices[] = {
    "etcd-election", "curator-leaderlatch", "kazoo-election", NULL};
static const char *const watch_token_choices[] = {"create_revision",
                                                  "lock_revision", NULL};

/* CFG_T_ENUM writes the choice's index as an int. */
_Static_assert(sizeof(enum tm_mode) == sizeof(int) &&
                   sizeof(enum tm_verify) == sizeof(int) &&
                   sizeof(enum tm_profile) == sizeof(int),
               "an enum option's field is an int");
_Static_assert(TM_MODE_CORRECTNESS == 0 && TM_MODE_EFFICIENCY == 1 &&
                   TM_MODE_OFF == 2 && TM_VERIFY_NONE == 0 &&
                   TM_VERIFY_HMAC == 1 && TM_PROFILE_HTTP == 0 &&
                   TM_PROFILE_WEBDAV == 1 && TM_PROFILE_S3 == 2,
               "mode_choices, verify_choices and profile_choices follow the "
               "enums");
_Static_assert(sizeof(enum cfg_forwarded) == sizeof(int) && CFG_FWD_NONE == 0 &&
                   CFG_FWD_XFF == 1 && CFG_FWD_RFC7239 == 2,
               "forwarded_choices follow enum cfg_forwarded");

#define OFF(sect, field) offsetof(struct sect, field)
#define NONE 0, 0, NULL, NULL
#define INT(lo, hi) (lo), (hi), NULL, NULL
#define CHOICE(c) 0, 0, (c), NULL
#define OPS(ops) 0, 0, NULL, &(ops)

/* The ca_file, cert_file and key_file of a section that names etcd
 * endpoints (struct cfg_tls pki in its struct st), as etcdctl's --cacert,
 * --cert and --key. */
#define ETCD_TLS_OPTS(sect, st, flags)                                         \
    {sect,                                                                     \
     "ca_file",                                                                \
     CFG_T_STR,                                                                \
     "",                                                                       \
     OFF(st, pki.ca_file),                                                     \
     NONE,                                                                     \
     flags,                                                                    \
     "etcd, https:// endpoints: PEM file of CAs to verify etcd (etcdctl "      \
     "--cacert); empty: system CAs"},                                          \
        {sect,                                                                 \
         "cert_file",                                                          \
         CFG_T_STR,                                                            \
         "",                                                                   \
         OFF(st, pki.cert_file),                                               \
         NONE,                                                                 \
         flags,                                                                \
         "etcd, https:// endpoints: PEM client certificate (etcdctl "          \
         "--cert), with key_file"},                                            \
    {                                                                          \
        sect, "key_file", CFG_T_STR, "", OFF(st, pki.key_file), NONE, flags,   \
            "etcd, https:// endpoints: its PEM private key (etcdctl --key)"    \
    }

/* Each entry: section, key, type, default, field offset, bounds (or
 * choices, or ops), flags, help. */
const struct cfg_opt cfg_opts[] = {
    {CFG_PROXY, "listen", CFG_T_STR, "127.0.0.1:7070", OFF(cfg_proxy, listen),
     OPS(cfg_proxy_listen_ops), CFG_RESTART,
     "host:port for application traffic, or unix:PATH for a Unix socket"},
    {CFG_PROXY, "listen_mode", CFG_T_STR, "0660", OFF(cfg_proxy, listen_mode),
     OPS(cfg_listen_mode_ops), CFG_RESTART,
     "listen = unix:PATH: the socket file's permission bits (octal)"},
    {CFG_PROXY, "listen_group", CFG_T_STR, "", OFF(cfg_proxy, listen_group),
     NONE, CFG_EMPTY_OK | CFG_RESTART,
     "listen = unix:PATH: the socket file's group (name or number); "
     "empty: tidemark's"},
    {CFG_PROXY, "unmatched", CFG_T_FLAG, "pass",
     OFF(cfg_proxy, unmatched_reject), CHOICE(unmatched_choices), 0,
     "requests no route matches: pass | reject"},
    {CFG_PROXY, "token_header", CFG_T_STR, "Fencing-Token",
     OFF(cfg_proxy, token_header), OPS(cfg_header_name_ops), 0,
     "request header carrying the fencing token"},
    {CFG_PROXY, "resource_header", CFG_T_STR, "Fencing-Resource",
     OFF(cfg_proxy, resource_header), OPS(cfg_header_name_ops), 0,
     "request header naming the resource (routes with resource = header)"},
    {CFG_PROXY, "header_timeout_ms", CFG_T_INT, "10000",
     OFF(cfg_proxy, header_timeout_ms), INT(1, 3600000), 0,
     "a request head must arrive within this"},
    {CFG_PROXY, "idle_timeout_ms", CFG_T_INT, "60000",
     OFF(cfg_proxy, idle_timeout_ms), INT(1, 86400000), 0,
     "idle keep-alive client connections are closed after this"},
    {CFG_PROXY, "max_head", CFG_T_INT, "16384", OFF(cfg_proxy, max_head),
     INT(1024, 1048576), 0, "bytes of request line and headers (431 beyond)"},
    {CFG_PROXY, "max_uri", CFG_T_INT, "8192", OFF(cfg_proxy, max_uri),
     INT(256, 1048576 - CFG_URI_SLACK), 0,
     "bytes of request-target (414 beyond); at most max_head - 64"},
    {CFG_PROXY, "max_headers", CFG_T_INT, "100", OFF(cfg_proxy, max_headers),
     INT(1, 128), 0, "header fields in one request head"},
    {CFG_PROXY, "max_connections", CFG_T_INT, "10000",
     OFF(cfg_proxy, max_connections), INT(1, 1000000), CFG_HOST_SIZED,
     "client connections at once; unset: as many as the open files "
     "limit allows, up to the default"},
    {CFG_PROXY, "order_grace_ms", CFG_T_INT, "1000",
     OFF(cfg_proxy, order_grace_ms), INT(0, 3600000), 0,
     "after a 504, the resource stays closed to higher tokens this long"},
    {CFG_PROXY, "min_body_rate", CFG_T_INT, "0", OFF(cfg_proxy, min_body_rate),
     INT(0, 1073741824), 0,
     "request bodies slower than this many bytes/s are cut off (408); 0: "
     "no minimum"},
    {CFG_PROXY, "body_rate_window_ms", CFG_T_INT, "10000",
     OFF(cfg_proxy, body_rate_window_ms), INT(100, 3600000), 0,
     "the window over which min_body_rate is measured"},
    {CFG_PROXY, "discard_limit", CFG_T_INT, "65536",
     OFF(cfg_proxy, discard_limit), INT(0, 1073741824), 0,
     "body bytes read and dropped after a refusal, to keep the connection"},
    {CFG_PROXY, "multi_delete_max", CFG_T_INT, "2097152",
     OFF(cfg_proxy, multi_delete_max), INT(1024, 67108864), 0,
     "bytes of an S3 multi-object delete body read to fence its keys; a "
     "longer one is refused (413)"},
    {CFG_PROXY, "buffer_size", CFG_T_INT, "65536", OFF(cfg_proxy, buffer_size),
     INT(1024, 67108864), 0,
     "bytes buffered per direction before reading pauses"},
    {CFG_PROXY, "log_format", CFG_T_FLAG, "text", OFF(cfg_proxy, log_json),
     CHOICE(log_format_choices), 0,
     "text | json: one object a line, key=value pairs as fields"},
    {CFG_PROXY, "log_buffer", CFG_T_SIZE, "1M", OFF(cfg_proxy, log_buffer),
     INT(65536, INT64_C(1) << 30), CFG_ZERO_OK | CFG_RESTART,
     "bytes of log lines kept while stderr takes them (a thread writes "
     "them); a line finding no room is dropped and counted; 0: each line "
     "is written at once, and waits while stderr does"},
    {CFG_PROXY, "drain_timeout_ms", CFG_T_INT, "10000",
     OFF(cfg_proxy, drain_timeout_ms), INT(0, 3600000), 0,
     "on SIGTERM, how long in-flight requests may take"},
    {CFG_PROXY, "resolver", CFG_T_STR, "", OFF(cfg_proxy, resolver),
     OPS(cfg_resolver_ops), CFG_EMPTY_OK | CFG_RESTART,
     "nameservers asked for upstream and credential endpoint names "
     "(IP[:port], comma-separated); "
     "empty: /etc/resolv.conf's, and /etc/hosts"},
    {CFG_PROXY, "log_level", CFG_T_CHOICE, "info", OFF(cfg_proxy, log_level),
     CHOICE(level_choices), 0, "error | warn | info | debug"},

    {CFG_ADMIN, "listen", CFG_T_STR, "127.0.0.1:7071", OFF(cfg_admin, listen),
     OPS(cfg_listen_ops), CFG_EMPTY_OK | CFG_RESTART,
     "host:port of the control port; empty: none"},
    {CFG_ADMIN, "token_file", CFG_T_KEYFILE, "", OFF(cfg_admin, token_file),
     INT(16, CFG_SECRET_MAX), CFG_EMPTY_OK,
     "file holding a bearer token the lock service and marks API require"},
    {CFG_ADMIN, "allowed_hosts", CFG_T_STR, "", OFF(cfg_admin, allowed_hosts),
     OPS(cfg_allowed_hosts_ops), CFG_EMPTY_OK,
     "Host names the control port answers besides its address and "
     "loopback"},

    {CFG_STORE, "type", CFG_T_CHOICE, "lmdb", OFF(cfg_store, type),
     CHOICE(type_choices), CFG_RESTART, "lmdb | postgres | redis | etcd"},
    {CFG_STORE, "path", CFG_T_STR, "./data/marks.lmdb", OFF(cfg_store, path),
     NONE, CFG_EMPTY_OK | CFG_RESTART, "lmdb: the database file"},
    {CFG_STORE, "map_size", CFG_T_SIZE, "1G", OFF(cfg_store, map_size),
     INT(1048576, INT64_C(1) << 44), CFG_RESTART,
     "lmdb: largest database size in bytes (K, M, G, T suffixes)"},
    {CFG_STORE, "dsn", CFG_T_STR, NULL, OFF(cfg_store, dsn), OPS(cfg_dsn_ops),
     CFG_EMPTY_OK | CFG_RESTART | CFG_SECRET,
     "postgres: a libpq connection string or URI"},
    {CFG_STORE, "url", CFG_T_STR, NULL, OFF(cfg_store, url),
     OPS(cfg_redis_url_ops), CFG_EMPTY_OK | CFG_RESTART | CFG_SECRET,
     "redis: redis://host:port[/db]; a cluster's seed nodes, comma-separated"},
    {CFG_STORE, "cluster", CFG_T_BOOL, "no", OFF(cfg_store, cluster), NONE,
     CFG_RESTART,
     "redis: yes: url names seed nodes of a Redis Cluster (slots, MOVED)"},
    {CFG_STORE, "endpoints", CFG_T_STR, NULL, OFF(cfg_store, endpoints),
     OPS(cfg_endpoints_ops), CFG_EMPTY_OK | CFG_RESTART,
     "etcd: http://host:port or https://host:port, comma-separated"},
    ETCD_TLS_OPTS(CFG_STORE, cfg_store, CFG_EMPTY_OK | CFG_RESTART),
    {CFG_STORE, "pool_size", CFG_T_INT, "2", OFF(cfg_store, pool_size),
     INT(1, 64), CFG_RESTART, "postgres, etcd: connections to the store"},
    {CFG_STORE, "wait_replicas", CFG_T_INT, "0", OFF(cfg_store, wait_replicas),
     INT(0, 64), CFG_RESTART,
     "redis: a raise is accepted once this many replicas have it (WAIT)"},
    {CFG_STORE, "cache_entries", CFG_T_INT, "100000",
     OFF(cfg_store, cache_entries), INT(16, 100000000), CFG_RESTART,
     "marks kept in memory"},
    {CFG_STORE, "timeout_ms", CFG_T_INT, "2000", OFF(cfg_store, timeout_ms),
     INT(1, 600000), CFG_RESTART, "one raise, end to end"},

    {CFG_LOCKS, "backend", CFG_T_CHOICE, "lmdb", OFF(cfg_locks, backend),
     CHOICE(lock_backend_choices), CFG_RESTART,
     "where leases live: lmdb | redis | postgres | etcd | zookeeper"},
    {CFG_LOCKS, "url", CFG_T_STR, NULL, OFF(cfg_locks, url),
     OPS(cfg_redis_url_ops), CFG_EMPTY_OK | CFG_RESTART | CFG_SECRET,
     "redis: redis://host:port[/db]; a cluster's seed nodes, comma-separated"},
    {CFG_LOCKS, "cluster", CFG_T_BOOL, "no", OFF(cfg_locks, cluster), NONE,
     CFG_RESTART,
     "redis: yes: url names seed nodes of a Redis Cluster (slots, MOVED)"},
    {CFG_LOCKS, "dsn", CFG_T_STR, NULL, OFF(cfg_locks, dsn), OPS(cfg_dsn_ops),
     CFG_EMPTY_OK | CFG_RESTART | CFG_SECRET,
     "postgres: a libpq connection string or URI"},
    {CFG_LOCKS, "endpoints", CFG_T_STR, NULL, OFF(cfg_locks, endpoints),
     OPS(cfg_endpoints_ops), CFG_EMPTY_OK | CFG_RESTART,
     "etcd: http://host:port or https://host:port, comma-separated"},
    ETCD_TLS_OPTS(CFG_LOCKS, cfg_locks, CFG_EMPTY_OK | CFG_RESTART),
    {CFG_LOCKS, "prefix", CFG_T_STR, "tidemark/locks/", OFF(cfg_locks, prefix),
     NONE, CFG_EMPTY_OK | CFG_RESTART,
     "etcd: the keys of lock NAME are PREFIX NAME // lease"},
    {CFG_LOCKS, "pool_size", CFG_T_INT, "2", OFF(cfg_locks, pool_size),
     INT(1, 64), CFG_RESTART,
     "postgres: connections to the lease table; etcd: per endpoint"},
    {CFG_LOCKS, "timeout_ms", CFG_T_INT, "2000", OFF(cfg_locks, timeout_ms),
     INT(1, 600000), CFG_RESTART,
     "redis, postgres, etcd: one lock operation, end to end"},
    {CFG_LOCKS, "path", CFG_T_STR, "./data/locks.lmdb", OFF(cfg_locks, path),
     NONE, CFG_RESTART, "lmdb: the lease file (not the [store] file)"},
    {CFG_LOCKS, "map_size", CFG_T_SIZE, "256M", OFF(cfg_locks, map_size),
     INT(1048576, INT64_C(1) << 44), CFG_RESTART,
     "lmdb: largest lease file size in bytes (K, M, G, T suffixes)"},
    {CFG_LOCKS, "eager", CFG_T_BOOL, "yes", OFF(cfg_locks, eager), NONE,
     CFG_RESTART,
     "yes: an acquire raises the resource's mark to the new fence"},
    {CFG_LOCKS, "max_ttl_ms", CFG_T_INT, "3600000", OFF(cfg_locks, max_ttl_ms),
     INT(1, 86400000), CFG_RESTART,
     "longest lease an acquire or extend may ask for"},
    {CFG_LOCKS, "max_wait_ms", CFG_T_INT, "60000", OFF(cfg_locks, max_wait_ms),
     INT(0, 3600000), CFG_RESTART, "longest ?wait_ms= an acquire may ask for"},
    {CFG_LOCKS, "hosts", CFG_T_STR, NULL, OFF(cfg_locks, zk_hosts),
     OPS(cfg_zk_hosts_ops), CFG_EMPTY_OK | CFG_RESTART,
     "zookeeper: host:port, comma-separated (the ensemble)"},
    {CFG_LOCKS, "root", CFG_T_STR, "/tidemark/locks", OFF(cfg_locks, zk_root),
     OPS(cfg_zk_root_ops), CFG_RESTART,
     "zookeeper: the znode under which every lock has its own"},
    {CFG_LOCKS, "session_timeout_ms", CFG_T_INT, "10000",
     OFF(cfg_locks, zk_sess_ms), INT(1000, 600000), CFG_RESTART,
     "zookeeper: the session asked for; a dead tidemark's locks end with "
     "it"},

    /* [watch] sections are read at start as a whole: a reload keeps
     * them (cfg_keep_restart_only), so no key is marked CFG_RESTART. */
    {CFG_WATCH, "backend", CFG_T_STR, "etcd", OFF(cfg_watch, backend),
     OPS(cfg_watch_backend_ops), 0, "where the lock lives: etcd | zookeeper"},
    {CFG_WATCH, "endpoints", CFG_T_STR, NULL, OFF(cfg_watch, endpoints),
     OPS(cfg_endpoints_ops), CFG_EMPTY_OK,
     "etcd: http://host:port or https://host:port, comma-separated"},
    ETCD_TLS_OPTS(CFG_WATCH, cfg_watch, CFG_EMPTY_OK),
    {CFG_WATCH, "hosts", CFG_T_STR, NULL, OFF(cfg_watch, zk_hosts),
     OPS(cfg_zk_hosts_ops), CFG_EMPTY_OK,
     "zookeeper: host:port, comma-separated (the ensemble)"},
    {CFG_WATCH, "prefix", CFG_T_STR, NULL, OFF(cfg_watch, prefix),
     OPS(cfg_watch_prefix_ops), CFG_REQUIRED,
     "etcd: lock NAME's keys are PREFIX NAME / lease (etcdctl lock PREFIX "
     "NAME); zookeeper: lock NAME is the znode PREFIX/NAME (kazoo "
     "Lock(PREFIX/NAME), Curator InterProcessMutex)"},
    {CFG_WATCH, "resource", CFG_T_STR, "{name}", OFF(cfg_watch, resource),
     OPS(cfg_watch_resource_ops), 0,
     "the resource whose mark follows lock {name}"},
    {CFG_WATCH, "token", CFG_T_CHOICE, "create_revision", OFF(cfg_watch, token),
     CHOICE(watch_token_choices), 0,
     "etcd: what holders send: create_revision (their key's) | "
     "lock_revision (etcdctl lock's ETCD_LOCK_REV)"},
    {CFG_WATCH, "timeout_ms", CFG_T_INT, "2000", OFF(cfg_watch, timeout_ms),
     INT(1, 600000), 0, "etcd: one call to the lock's store"},
    {CFG_WATCH, "idle_timeout_ms", CFG_T_INT, "660000", OFF(cfg_watch, idle_ms),
     INT(1000, 86400000), 0,
     "etcd: a watch stream silent this long (no event, no progress notice, "
     "which etcd sends every 10 min by default) has broken: opened again"},
    {CFG_WATCH, "session_timeout_ms", CFG_T_INT, "10000",
     OFF(cfg_watch, zk_sess_ms), INT(1000, 600000), 0,
     "zookeeper: tidemark's session; after a longer outage every lock is "
     "read again"},
    {CFG_WATCH, "required", CFG_T_BOOL, "yes", OFF(cfg_watch, required), NONE,
     0,
     "/readyz is 503 while the watch cannot follow its locks (a paused "
     "holder's writes pass until the next holder writes)"},

    /* [follow] sections are read at start as a whole, as [watch]. */
    {CFG_FOLLOW, "backend", CFG_T_CHOICE, NULL, OFF(cfg_follow, backend),
     CHOICE(follow_backend_choices), CFG_REQUIRED,
     "where the election lives: etcd | zookeeper"},
    {CFG_FOLLOW, "endpoints", CFG_T_STR, NULL, OFF(cfg_follow, endpoints),
     OPS(cfg_endpoints_ops), CFG_EMPTY_OK,
     "etcd: http://host:port or https://host:port, comma-separated"},
    ETCD_TLS_OPTS(CFG_FOLLOW, cfg_follow, CFG_EMPTY_OK),
    {CFG_FOLLOW, "hosts", CFG_T_STR, NULL, OFF(cfg_follow, zk_hosts),
     OPS(cfg_zk_hosts_ops), CFG_EMPTY_OK,
     "zookeeper: host:port, comma-separated (the ensemble)"},
    {CFG_FOLLOW, "election", CFG_T_STR, NULL, OFF(cfg_follow, election), NONE,
     CFG_REQUIRED,
     "etcd: the election's name as the application gives it (etcdctl "
     "elect NAME, concurrency.NewElection(s, NAME)); zookeeper: the "
     "election's znode (LeaderLatch's latch path, kazoo Election's path)"},
    {CFG_FOLLOW, "identity", CFG_T_STR, NULL, OFF(cfg_follow, identity), NONE,
     CFG_REQUIRED | CFG_EMPTY_OK,
     "this replica's identity in the election (its proposal, participant "
     "id or identifier), ${VAR} from the environment: ${POD_NAME}"},
    {CFG_FOLLOW, "kind", CFG_T_CHOICE, NULL, OFF(cfg_follow, kind),
     CHOICE(follow_kind_choices), CFG_REQUIRED,
     "the election's recipe: etcd-election | curator-leaderlatch | "
     "kazoo-election"},
    {CFG_FOLLOW, "timeout_ms", CFG_T_INT, "2000", OFF(cfg_follow, timeout_ms),
     INT(1, 600000), 0, "etcd: one call to the election's store"},
    {CFG_FOLLOW, "idle_timeout_ms", CFG_T_INT, "660000",
     OFF(cfg_follow, idle_ms), INT(1000, 86400000), 0,
     "etcd: a watch stream silent this long has broken: lost, opened "
     "again"},
    {CFG_FOLLOW, "session_timeout_ms", CFG_T_INT, "10000",
     OFF(cfg_follow, zk_sess_ms), INT(1000, 600000), 0,
     "zookeeper: tidemark's session"},
    {CFG_FOLLOW, "ready", CFG_T_BOOL, "no", OFF(cfg_follow, ready), NONE, 0,
     "yes: /readyz is 503 while this identity does not hold the election"},

    {CFG_TOKENS, "key_file", CFG_T_KEYFILE, NULL, OFF(cfg_tokens, key_file),
     INT(TOKEN_KEY_MIN, CFG_SECRET_MAX), CFG_RESTART,
     "file holding the HMAC key that signs issued tokens (mode 600)"},

    {CFG_UPSTREAM, "url", CFG_T_CUSTOM, NULL, 0, OPS(cfg_upstream_url_ops),
     CFG_REQUIRED, "http://host[:port] or https://host[:port]"},
    {CFG_UPSTREAM, "connect_timeout_ms", CFG_T_INT, "2000",
     OFF(cfg_upstream, connect_timeout_ms), INT(1, 600000), 0,
     "connecting, TLS handshake included"},
    {CFG_UPSTREAM, "timeout_ms", CFG_T_INT, "30000",
     OFF(cfg_upstream, timeout_ms), INT(1, 86400000), 0,
     "the response head once the request is sent, and between reads"},
    {CFG_UPSTREAM, "resolve_ms", CFG_T_INT, "30000",
     OFF(cfg_upstream, resolve_ms), INT(0, 86400000), 0,
     "the host name is looked up again this often (and after a failed "
     "connect); 0: only then"},
    {CFG_UPSTREAM, "max_idle", CFG_T_INT, "64", OFF(cfg_upstream, max_idle),
     INT(0, 100000), 0, "idle keep-alive connections kept in the pool"},
    {CFG_UPSTREAM, "ca_file", CFG_T_STR, "", OFF(cfg_upstream, pki.ca_file),
     NONE, CFG_EMPTY_OK,
     "https: PEM file of CAs to verify the upstream; empty: system CAs"},
    {CFG_UPSTREAM, "cert_file", CFG_T_STR, "", OFF(cfg_upstream, pki.cert_file),
     NONE, CFG_EMPTY_OK,
     "https: PEM client certificate (and chain) shown to the upstream; "
     "with key_file"},
    {CFG_UPSTREAM, "key_file", CFG_T_STR, "", OFF(cfg_upstream, pki.key_file),
     NONE, CFG_EMPTY_OK,
     "https: PEM private key of cert_file (unencrypted, mode 600)"},
    {CFG_UPSTREAM, "add_header", CFG_T_CUSTOM, NULL, 0, OPS(cfg_add_header_ops),
     CFG_REPEAT | CFG_SECRET,
     "NAME: VALUE added to every forwarded request (repeatable; ${VAR} "
     "from the environment); replaces a client header of that name"},
    {CFG_UPSTREAM, "strip_header", CFG_T_CUSTOM, NULL, 0,
     OPS(cfg_strip_header_ops), CFG_REPEAT,
     "a client header removed before forwarding (repeatable)"},
    {CFG_UPSTREAM, "host", CFG_T_FLAG, "upstream",
     OFF(cfg_upstream, host_preserve), CHOICE(host_choices), 0,
     "upstream | preserve: the Host header sent upstream"},
    {CFG_UPSTREAM, "bucket_endpoints", CFG_T_STR, "aws",
     OFF(cfg_upstream, bucket_endpoints), OPS(cfg_s3_endpoints_ops),
     CFG_EMPTY_OK,
     "host = preserve, s3 routes: names below which the server reads the "
     "bucket from the Host (aws: AWS's; '*' one label's characters)"},
    {CFG_UPSTREAM, "forwarded", CFG_T_ENUM, "none",
     OFF(cfg_upstream, forwarded), CHOICE(forwarded_choices), 0,
     "none | x-forwarded-for | forwarded: add the client's address to "
     "X-Forwarded-For, or to Forwarded as RFC 7239 for=, when forwarding"},
    {CFG_UPSTREAM, "sign", CFG_T_ENUM, "none", OFF(cfg_upstream, sign),
     CHOICE(sign_choices), 0,
     "none | aws-sigv4: sign every forwarded request (AWS Signature V4, "
     "payload UNSIGNED-PAYLOAD), replacing the client's Authorization"},
    {CFG_UPSTREAM, "sign_region", CFG_T_STR, "", OFF(cfg_upstream, sign_region),
     OPS(cfg_aws_name_ops), CFG_EMPTY_OK,
     "aws-sigv4: the region signed for (us-east-1); required with sign"},
    {CFG_UPSTREAM, "sign_service", CFG_T_STR, "s3",
     OFF(cfg_upstream, sign_service), OPS(cfg_aws_name_ops), 0,
     "aws-sigv4: the service signed for"},
    {CFG_UPSTREAM, "sign_credentials", CFG_T_ENUM, "chain",
     OFF(cfg_upstream, sign_credentials), CHOICE(sign_creds_choices), 0,
     "aws-sigv4: chain | env: the AWS SDKs' credential chain (environment, "
     "web identity, shared file, container endpoint, instance metadata), "
     "or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY only, checked at load"},
    {CFG_UPSTREAM, "sign_credentials_file", CFG_T_STR, "",
     OFF(cfg_upstream, sign_credentials_file), NONE, CFG_EMPTY_OK,
     "aws-sigv4: an AWS shared-credentials file (mode 600), used alone and "
     "read again when it changes; empty: the chain (or sign_credentials)"},
    {CFG_UPSTREAM, "sign_refresh_ms", CFG_T_INT, "300000",
     OFF(cfg_upstream, sign_refresh_ms), INT(1000, 3600000), 0,
     "aws-sigv4: temporary credentials are renewed this long before they "
     "expire"},
    {CFG_UPSTREAM, "sign_profile", CFG_T_STR, "default",
     OFF(cfg_upstream, sign_profile), OPS(cfg_profile_ops), 0,
     "aws-sigv4: the [profile] of sign_credentials_file"},

    {CFG_ROUTE, "methods", CFG_T_CUSTOM, "PUT POST PATCH DELETE", 0,
     OPS(cfg_methods_ops), 0,
     "methods the route applies to, space-separated; * for every method"},
    {CFG_ROUTE, "path", CFG_T_CUSTOM, NULL, 0, OPS(cfg_path_ops), CFG_REQUIRED,
     "path template: {name} one segment, {name*} the rest"},
    {CFG_ROUTE, "resource", CFG_T_CUSTOM, NULL, 0, OPS(cfg_resource_ops),
     CFG_REQUIRED, "resource template naming the path's captures, or header"},
    {CFG_ROUTE, "mode", CFG_T_ENUM, "correctness", OFF(cfg_route, mode),
     CHOICE(mode_choices), 0, "correctness | efficiency | off"},
    {CFG_ROUTE, "verify", CFG_T_ENUM, "none", OFF(cfg_route, verify),
     CHOICE(verify_choices), 0, "none | hmac"},
    {CFG_ROUTE, "profile", CFG_T_ENUM, "http", OFF(cfg_route, profile),
     CHOICE(profile_choices), 0,
     "http | webdav | s3: the backend's protocol, which says what a request "
     "writes besides its path"},
    {CFG_ROUTE, "subtree", CFG_T_BOOL, "yes", OFF(cfg_route, subtree), NONE, 0,
     "profile = webdav: each collection keeps the highest mark below it, "
     "and DELETE, MOVE, COPY and LOCK of a collection need a token not "
     "below it"},
    {CFG_ROUTE, "max_body", CFG_T_SIZE, "0", OFF(cfg_route, max_body),
     INT(0, INT64_MAX), 0,
     "largest request body in bytes (K M G T); 0: no limit"},
    {CFG_ROUTE, "upstream", CFG_T_STR, "default", OFF(cfg_route, upstream),
     OPS(cfg_section_ref_ops), 0,
     "NAME of the [upstream NAME] requests are forwarded to"},
    {CFG_ROUTE, "lease", CFG_T_STR, NULL, OFF(cfg_route, lease),
     OPS(cfg_carrier_ref_ops), 0,
     "NAME of the [lease NAME] or [follow NAME] section whose fence this "
     "sidecar sends for the route's writes (they carry no token)"},

    /* [lease] sections are read at start as a whole, as [watch]. */
    {CFG_LEASE, "name", CFG_T_STR, NULL, OFF(cfg_lease, lock),
     OPS(cfg_lease_lock_ops), CFG_REQUIRED,
     "the lock's name in the lock service ([locks] backend)"},
    {CFG_LEASE, "ttl_ms", CFG_T_INT, "10000", OFF(cfg_lease, ttl_ms),
     INT(100, 3600000), 0,
     "the lease's TTL, asked on each acquire and renewal"},
    {CFG_LEASE, "renew_ms", CFG_T_INT, "0", OFF(cfg_lease, renew_ms),
     INT(0, 3600000), 0,
     "how often the holder renews, and a standby tries; 0: ttl_ms / 3"},
    {CFG_LEASE, "margin_ms", CFG_T_INT, "0", OFF(cfg_lease, margin_ms),
     INT(0, 3600000), 0,
     "writes go only while this much of the lease is left (the longest "
     "the backend may take to apply one); 0: (ttl_ms - renew_ms) / 2"},
    {CFG_LEASE, "health_url", CFG_T_STR, NULL, OFF(cfg_lease, health_url),
     OPS(cfg_health_url_ops), 0,
     "http://host:port/path: renew (or try to win) only while the "
     "application answers 2xx here; unset: the lease stays while tidemark "
     "runs"},
    {CFG_LEASE, "ready", CFG_T_BOOL, "no", OFF(cfg_lease, ready), NONE, 0,
     "yes: /readyz is 503 while this sidecar does not hold the lease"},
};

const size_t cfg_nopts = sizeof(cfg_opts) / sizeof(cfg_opts[0]);
