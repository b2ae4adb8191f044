/* test_cfg.c: the configuration loader: defaults, every key, and the
 * exact "FILE:LINE: message" of each kind of error, from INI files
 * written to temporary files. The environment's overrides are in
 * test_cfg_env.c, values and the option table in test_cfg_opts.c. */
#include <sys/resource.h>
#include <sys/wait.h>

#include "cfg_test.h"

/* The default max_connections (10000), or what the hard open-files
 * limit holds: two files a connection, 64 besides. */
static int
default_max_connections(void)
{
    struct rlimit rl;

    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= 10000 * 2 + 64) {
        return 10000;
    }
    return (int)((rl.rlim_max - 64) / 2);
}

/* Under a hard open-files limit of 1024, in a child (the limit cannot
 * be raised again): text loads with max_connections want and the notes
 * note (NULL: none). */
static void
assert_fits_1024(const char *text, int want, const char *note)
{
    pid_t pid = fork();
    int status;

    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit rl = {1024, 1024};
        struct loaded l;
        bool notes_ok;

        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            _exit(2);
        }
        load(&l, text, NULL);
        notes_ok = note == NULL
                       ? l.c.notes == NULL
                       : l.c.notes != NULL && strstr(l.c.notes, note) != NULL;
        _exit(l.ok && l.c.proxy.max_connections == want && notes_ok ? 0 : 1);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void
test_default_max_connections_fits_the_open_files_limit(void **state)
{
    (void)state;
    assert_fits_1024("; defaults\n", 480,
                     ": note: max_connections = 480, not the default 10000: "
                     "the open files limit is 1024");
    /* Written out, it stays: the daemon warns. */
    assert_fits_1024("[proxy]\nmax_connections = 10000\n", 10000, NULL);
    /* A PostgreSQL connection takes three files (its socket and the pair
     * libpq reads in its place): 64 + 3 x (8 + 8) beside the clients. */
    assert_fits_1024("[store]\ntype = postgres\ndsn = dbname=m\n"
                     "pool_size = 8\n[locks]\nbackend = postgres\n"
                     "dsn = dbname=l\npool_size = 8\n",
                     456,
                     ": note: max_connections = 456, not the default 10000: "
                     "the open files limit is 1024");
    /* A ZooKeeper session takes 13 files and one a server (the relay's
     * port for it): 64 + (13 + 3) for [locks] and (13 + 1) for a
     * [watch] beside the clients. */
    assert_fits_1024("[locks]\nbackend = zookeeper\n"
                     "hosts = z1:2181,z2:2181,z3:2181\n"
                     "[watch w]\nbackend = zookeeper\nhosts = z1:2181\n"
                     "prefix = /locks\nresource = documents/{name}\n",
                     465,
                     ": note: max_connections = 465, not the default 10000: "
                     "the open files limit is 1024");
}

static void
test_defaults(void **state)
{
    struct loaded l;

    load_ok(&l, "; nothing but a comment\n", NULL);
    assert_string_equal(l.c.file, l.path);
    assert_string_equal(l.c.proxy.listen, "127.0.0.1:7070");
    assert_false(l.c.proxy.unmatched_reject);
    assert_string_equal(l.c.proxy.token_header, "Fencing-Token");
    assert_string_equal(l.c.proxy.resource_header, "Fencing-Resource");
    assert_int_equal(l.c.proxy.header_timeout_ms, 10000);
    assert_int_equal(l.c.proxy.idle_timeout_ms, 60000);
    assert_int_equal(l.c.proxy.max_head, 16384);
    assert_int_equal(l.c.proxy.max_uri, 8192);
    assert_int_equal(l.c.proxy.max_headers, 100);
    assert_int_equal(l.c.proxy.max_connections, default_max_connections());
    assert_int_equal(l.c.proxy.order_grace_ms, 1000);
    assert_int_equal(l.c.proxy.discard_limit, 65536);
    assert_int_equal(l.c.proxy.buffer_size, 65536);
    assert_string_equal(l.c.proxy.log_level, "info");
    assert_string_equal(l.c.admin.listen, "127.0.0.1:7071");
    assert_string_equal(l.c.store.type, "lmdb");
    assert_string_equal(l.c.store.path, "./data/marks.lmdb");
    assert_int_equal(l.c.store.map_size, 1073741824);
    assert_null(l.c.store.dsn);
    assert_null(l.c.store.url);
    assert_null(l.c.store.endpoints);
    assert_int_equal(l.c.store.cache_entries, 100000);
    assert_int_equal(l.c.store.timeout_ms, 2000);
    assert_int_equal(l.c.store.pool_size, 2);
    assert_int_equal(l.c.store.wait_replicas, 0);
    assert_string_equal(l.c.locks.backend, "lmdb");
    assert_string_equal(l.c.locks.path, "./data/locks.lmdb");
    assert_true(l.c.locks.eager);
    assert_int_equal(l.c.locks.max_ttl_ms, 3600000);
    assert_int_equal(l.c.locks.max_wait_ms, 60000);
    assert_null(l.c.tokens.key_file);
    assert_null(l.c.tokens.key);
    assert_int_equal(l.c.nupstreams, 0);
    assert_int_equal(l.c.nroutes, 0);
    unload(&l);
}

/* Defaults of upstream and route keys, and a route's compiled templates. */
static void
test_section_defaults(void **state)
{
    static const char ini[] = "[upstream default]\n"
                              "url = http://127.0.0.1:8080\n"
                              "[route documents]\n"
                              "path = /v1/documents/{doc}\n"
                              "resource = documents/{doc}\n";
    struct tm_slice caps[TM_MAX_CAPTURES];
    char res[TM_RESOURCE_MAX];
    const struct cfg_upstream *u;
    const struct cfg_route *r;
    struct loaded l;

    load_ok(&l, ini, NULL);
    assert_int_equal(l.c.nupstreams, 1);
    u = &l.c.upstreams[0];
    assert_string_equal(u->name, "default");
    assert_string_equal(u->url, "http://127.0.0.1:8080");
    assert_int_equal(u->line, 1);
    assert_int_equal(u->connect_timeout_ms, 2000);
    assert_int_equal(u->timeout_ms, 30000);
    assert_int_equal(u->max_idle, 64);
    assert_int_equal(l.c.nroutes, 1);
    r = &l.c.routes[0];
    assert_string_equal(r->name, "documents");
    assert_int_equal(r->line, 3);
    assert_methods(&r->methods, "PUT POST PATCH DELETE");
    assert_int_equal(r->mode, TM_MODE_CORRECTNESS);
    assert_int_equal(r->verify, TM_VERIFY_NONE);
    assert_int_equal(r->profile, TM_PROFILE_HTTP);
    assert_false(r->resource_from_header);
    assert_string_equal(r->upstream, "default");
    assert_int_equal(r->upstream_idx, 0);
    assert_true(tmpl_match(&r->path, "/v1/documents/7", 15, caps));
    assert_int_equal(rtmpl_expand(&r->resource, caps, res, sizeof(res)), 11);
    assert_string_equal(res, "documents/7");
    unload(&l);
}

/* Every key set away from its default; indentation, inline comments and
 * CRLF line ends are fine. */
static void
test_every_key(void **state)
{
    static const char ini[] =
        "[proxy]\r\n"
        "  listen = 0.0.0.0:8000   ; indented, commented\r\n"
        "unmatched = reject\n"
        "token_header = X-Token\n"
        "resource_header = X-Resource\n"
        "header_timeout_ms = 5\n"
        "idle_timeout_ms = 6\n"
        "max_head = 1024\n"
        "max_uri = 960\n"
        "max_headers = 128\n"
        "max_connections = 7\n"
        "order_grace_ms = 0\n"
        "discard_limit = 0\n"
        "buffer_size = 4096\n"
        "log_level = debug\n"
        "[admin]\n"
        "listen =\n"
        "[store]\n"
        "type = etcd\n"
        "path = /var/lib/x.lmdb\n"
        "map_size = 64M\n"
        "dsn = host=db user=u password=p\n"
        "url = redis://:pw@10.0.0.1:6379/2\n"
        "endpoints = http://a:2379, http://[::1]:2379/\n"
        "cache_entries = 16\n"
        "timeout_ms = 9\n"
        "pool_size = 4\n"
        "wait_replicas = 1\n"
        "[locks]\n"
        "backend = lmdb\n"
        "path = /var/lib/l.lmdb\n"
        "map_size = 2M\n"
        "eager = no\n"
        "max_ttl_ms = 5000\n"
        "max_wait_ms = 0\n"
        "[upstream api]\n"
        "url = https://api.example.com/\n"
        "connect_timeout_ms = 11\n"
        "timeout_ms = 12\n"
        "max_idle = 0\n"
        "[upstream default]\n"
        "url = http://[::1]:8081\n"
        "[route files]\n"
        "methods = *\n"
        "path = /files/{key*}\n"
        "resource = header\n"
        "mode = efficiency\n"
        "verify = hmac\n"
        "upstream = api\n"
        "[route off]\n"
        "methods = GET\tOPTIONS  PROPFIND MKCOL X-CUSTOM_1\n"
        "path = /o/{a}/{b}\n"
        "resource = o:{b}:{a}\n"
        "mode = off\n"
        "profile = s3\n";
    struct loaded l;

    char *keyf = write_key("0123456789abcdef\n", 0600);
    char keyenv[128];
    const char *env[] = {keyenv, NULL};

    snprintf(keyenv, sizeof(keyenv), "TIDEMARK_TOKENS_KEY_FILE=%s", keyf);
    load_ok(&l, ini, env);
    unlink(keyf);
    free(keyf);
    assert_string_equal(l.c.locks.backend, "lmdb");
    assert_string_equal(l.c.locks.path, "/var/lib/l.lmdb");
    assert_int_equal(l.c.locks.map_size, 2 * 1024 * 1024);
    assert_false(l.c.locks.eager);
    assert_int_equal(l.c.locks.max_ttl_ms, 5000);
    assert_int_equal(l.c.locks.max_wait_ms, 0);
    assert_int_equal(l.c.tokens.key_len, 16);
    assert_memory_equal(l.c.tokens.key, "0123456789abcdef", 16);
    assert_string_equal(l.c.proxy.listen, "0.0.0.0:8000");
    assert_true(l.c.proxy.unmatched_reject);
    assert_string_equal(l.c.proxy.token_header, "X-Token");
    assert_string_equal(l.c.proxy.resource_header, "X-Resource");
    assert_int_equal(l.c.proxy.header_timeout_ms, 5);
    assert_int_equal(l.c.proxy.idle_timeout_ms, 6);
    assert_int_equal(l.c.proxy.max_head, 1024);
    assert_int_equal(l.c.proxy.max_uri, 960);
    assert_int_equal(l.c.proxy.max_headers, 128);
    assert_int_equal(l.c.proxy.max_connections, 7);
    assert_int_equal(l.c.proxy.order_grace_ms, 0);
    assert_int_equal(l.c.proxy.discard_limit, 0);
    assert_int_equal(l.c.proxy.buffer_size, 4096);
    assert_string_equal(l.c.proxy.log_level, "debug");
    assert_string_equal(l.c.admin.listen, "");
    assert_string_equal(l.c.store.type, "etcd");
    assert_string_equal(l.c.store.path, "/var/lib/x.lmdb");
    assert_int_equal(l.c.store.map_size, 64 * 1024 * 1024);
    assert_string_equal(l.c.store.dsn, "host=db user=u password=p");
    assert_string_equal(l.c.store.url, "redis://:pw@10.0.0.1:6379/2");
    assert_string_equal(l.c.store.endpoints,
                        "http://a:2379, http://[::1]:2379/");
    assert_int_equal(l.c.store.cache_entries, 16);
    assert_int_equal(l.c.store.timeout_ms, 9);
    assert_int_equal(l.c.store.pool_size, 4);
    assert_int_equal(l.c.store.wait_replicas, 1);

    assert_int_equal(l.c.nupstreams, 2);
    assert_string_equal(l.c.upstreams[0].name, "api");
    assert_true(l.c.upstreams[0].tls);
    assert_string_equal(l.c.upstreams[0].host, "api.example.com");
    assert_string_equal(l.c.upstreams[0].port, "443");
    assert_string_equal(l.c.upstreams[0].host_header, "api.example.com");
    assert_int_equal(l.c.upstreams[0].connect_timeout_ms, 11);
    assert_int_equal(l.c.upstreams[0].timeout_ms, 12);
    assert_int_equal(l.c.upstreams[0].max_idle, 0);
    assert_string_equal(l.c.upstreams[1].host, "::1");
    assert_string_equal(l.c.upstreams[1].port, "8081");
    assert_string_equal(l.c.upstreams[1].host_header, "[::1]:8081");

    assert_int_equal(l.c.nroutes, 2);
    assert_string_equal(l.c.routes[0].name, "files");
    assert_methods(&l.c.routes[0].methods, "");
    assert_true(l.c.routes[0].resource_from_header);
    assert_int_equal(l.c.routes[0].mode, TM_MODE_EFFICIENCY);
    assert_int_equal(l.c.routes[0].verify, TM_VERIFY_HMAC);
    assert_int_equal(l.c.routes[0].upstream_idx, 0);
    assert_methods(&l.c.routes[1].methods,
                   "GET OPTIONS PROPFIND MKCOL X-CUSTOM_1");
    assert_int_equal(l.c.routes[1].mode, TM_MODE_OFF);
    assert_int_equal(l.c.routes[0].profile, TM_PROFILE_HTTP);
    assert_int_equal(l.c.routes[1].profile, TM_PROFILE_S3);
    assert_int_equal(l.c.routes[1].upstream_idx, 1);
    unload(&l);
}

/* The example shipped in conf/ loads as it is (run from the top). */
static void
test_example(void **state)
{
    struct tm_config c;
    struct cfg_errors errs = {0};
    bool ok;

    ok = cfg_load(&c, "conf/tidemark.ini", NULL, &errs);
    for (size_t i = 0; i < errs.n; i++) {
        print_message("  got: %s\n", errs.msgs[i]);
    }
    assert_true(ok);
    assert_string_equal(c.proxy.listen, "127.0.0.1:7070");
    assert_string_equal(c.admin.listen, "127.0.0.1:7071");
    assert_string_equal(c.store.type, "lmdb");
    assert_string_equal(c.store.path, "./data/marks.lmdb");
    assert_int_equal(c.nupstreams, 1);
    assert_string_equal(c.upstreams[0].name, "default");
    assert_string_equal(c.upstreams[0].url, "http://127.0.0.1:8080");
    assert_int_equal(c.nroutes, 1);
    assert_string_equal(c.routes[0].name, "documents");
    assert_methods(&c.routes[0].methods, "PUT POST PATCH DELETE");
    assert_int_equal(c.routes[0].mode, TM_MODE_CORRECTNESS);
    cfg_free(&c);
    cfg_errors_free(&errs);
}

struct err_case {
    const char *name;
    const char *ini;
    const char *env[MAX_ENV];
    const char *want[MAX_WANT];
};

static const struct err_case err_cases[] = {
    {"unknown section",
     "[proxy]\n[nosuch]\nx = 1\n[proxy2 a]\n",
     {NULL},
     {"@:2: unknown section [nosuch]", "@:4: unknown section [proxy2 a]"}},
    {"unknown key",
     "[proxy]\nbogus = 1\n[route r]\npath = /a\nresource = a\nurl = "
     "x\n" UP_DEFAULT,
     {NULL},
     {"@:2: unknown key 'bogus' in [proxy]",
      "@:6: unknown key 'url' in [route r]"}},
    {"key outside any section",
     "listen = 127.0.0.1:1\n[proxy]\n",
     {NULL},
     {"@:1: key 'listen' outside any section"}},
    {"duplicate key",
     "[proxy]\nlisten = 127.0.0.1:1\n\nlisten = 127.0.0.1:2\n",
     {NULL},
     {"@:4: duplicate key 'listen' in [proxy] (first at line 2)"}},
    {"bad values",
     "[proxy]\nunmatched = maybe\nlog_level = loud\nmax_head = 16k\n"
     "listen = localhost\ntoken_header = Fencing Token\n"
     "[store]\ntype = mongodb\nmap_size = 1Q\n",
     {NULL},
     {"@:2: unmatched: must be pass or reject",
      "@:3: log_level: must be one of error, warn, info or debug",
      "@:4: max_head: must be an integer",
      "@:5: listen: must be host:port or [v6]:port",
      "@:6: token_header: must be a header name (letters, digits, '-')",
      "@:8: type: must be one of lmdb, postgres, redis or etcd",
      "@:9: map_size: must be a size in bytes, like 1073741824 or 1G"}},
    /* 414 must stay reachable: a target over max_uri is seen before the
     * head runs over max_head. */
    {"max_uri not below max_head",
     "[proxy]\nmax_head = 4096\n",
     {NULL},
     {"@:2: max_uri (8192) must be at most max_head - 64 (4032): a longer "
      "target would be refused as a large head (431), never as a long "
      "target (414)"}},
    {"max_uri set too close to max_head",
     "[proxy]\nmax_head = 4096\nmax_uri = 4033\n",
     {NULL},
     {"@:3: max_uri (4033) must be at most max_head - 64 (4032): a longer "
      "target would be refused as a large head (431), never as a long "
      "target (414)"}},
    {"out of bounds",
     "[proxy]\nmax_head = 1023\nmax_headers = 129\nmax_connections = 0\n"
     "[store]\nmap_size = 1K\ncache_entries = -1\n",
     {NULL},
     {"@:2: max_head: must be between 1024 and 1048576",
      "@:3: max_headers: must be between 1 and 128",
      "@:4: max_connections: must be between 1 and 1000000",
      "@:6: map_size: must be between 1048576 and 17592186044416",
      "@:7: cache_entries: must be between 16 and 100000000"}},
    {"store keys out of bounds",
     "[store]\npool_size = 0\nwait_replicas = -1\n",
     {NULL},
     {"@:2: pool_size: must be between 1 and 64",
      "@:3: wait_replicas: must be between 0 and 64"}},
    {"dsn libpq cannot parse",
     "[store]\ntype = postgres\ndsn = host=db port\n",
     {NULL},
     {"@:3: dsn: not a libpq connection string: missing \"=\" after "
      "\"...\" in connection info string"}},
    {"dsn URI with an unknown parameter",
     "[store]\ntype = postgres\ndsn = postgresql://db/x?bogus=1\n",
     {NULL},
     {"@:3: dsn: not a libpq connection string: invalid URI query "
      "parameter: \"...\""}},
    {"route without upstream section",
     "[route r]\npath = /a/{x}\nresource = r/{x}\n",
     {NULL},
     {"@:1: [route r]: no [upstream default] section"}},
    {"route naming an unknown upstream",
     UP_DEFAULT "[route r]\npath = /a\nresource = a\nupstream = other\n",
     {NULL},
     {"@:3: [route r]: no [upstream other] section"}},
    {"bad templates",
     UP_DEFAULT "[route a]\npath = /a/{x*}/b\nresource = a/{x}\n"
                "[route b]\npath = /b/{x}\nresource = b/{y}\n"
                "[route c]\npath = b/{x}\nresource = c\n",
     {NULL},
     {"@:4: path: {x*} must be the last segment",
      "@:8: resource: {y} is not a capture of the path",
      "@:10: path: a path template must start with '/'"}},
    {"templates not in canonical form",
     UP_DEFAULT "[route a]\npath = /a/{x}/\nresource = a/{x}\n"
                "[route b]\npath = /b/{x}\nresource = b//{x}\n"
                "[route c]\npath = /c%2F/{x}\nresource = c\n"
                "[route d]\npath = /d/{x}\nresource = d%20{x}\n",
     {NULL},
     {"@:4: path: not in canonical form: it reads as \"/a/{x}\" (see "
      "Resource names in doc/guide.md)",
      "@:8: resource: not in canonical form: it reads as \"b/{x}\" (see "
      "Resource names in doc/guide.md)",
      "@:10: path: an encoded slash (%2F) in a path: backends read it in "
      "different ways",
      "@:14: resource: not in canonical form: it reads as \"d {x}\" (see "
      "Resource names in doc/guide.md)"}},
    {"bad methods",
     UP_DEFAULT "[route a]\nmethods = PUT FE(CH\npath = /a\nresource = a\n"
                "[route b]\nmethods = * GET\npath = /b\nresource = b\n"
                "[route c]\nmethods =\npath = /c\nresource = c\n"
                "[route d]\nmethods = put\npath = /d\nresource = d\n",
     {NULL},
     {"@:4: methods: 'FE(CH' is not a method token (RFC 9110)",
      "@:8: methods: * stands alone: it means every method",
      "@:12: methods: must name methods, or * for every method",
      "@:16: methods: methods are upper case: 'put' (a backend may run a "
      "lower-case method as the upper-case one)"}},
    {"profiles",
     UP_DEFAULT "[route a]\nprofile = ftp\npath = /a\nresource = a\n"
                "[route b]\nprofile = webdav\npath = /b\nresource = header\n",
     {NULL},
     {"@:4: profile: must be one of http, webdav or s3",
      "@:7: [route b]: profile = webdav needs a resource template, not "
      "header"}},
    {"missing required keys",
     "[upstream default]\ntimeout_ms = 5\n[route r]\nmode = off\n",
     {NULL},
     {"@:1: [upstream default]: missing required key 'url'",
      "@:3: [route r]: missing required key 'path'",
      "@:3: [route r]: missing required key 'resource'"}},
    {"duplicate route and upstream",
     UP_DEFAULT "[route r]\npath = /a\nresource = a\n"
                "[upstream default]\nurl = http://127.0.0.1:9\n"
                "[route r]\npath = /b\nresource = b\n"
                "[proxy]\n[proxy]\n",
     {NULL},
     {"@:6: duplicate section [upstream default] (first at line 1)",
      "@:8: duplicate section [route r] (first at line 3)",
      "@:12: duplicate section [proxy] (first at line 11)"}},
    {"section names",
     "[upstream]\n[route a b]\n[store x]\n[upstream a/b]\n",
     {NULL},
     {"@:1: [upstream] needs a name: [upstream NAME]",
      "@:2: section name 'a b': use letters, digits, '_', '-' and '.'",
      "@:3: [store] takes no name",
      "@:4: section name 'a/b': use letters, digits, '_', '-' and '.'"}},
    {"syntax errors",
     "[proxy\nlisten\n= 1\n[admin] listen = 1\n[store]\ntype = lmdb\n",
     {NULL},
     {"@:1: syntax error: a section header needs a ']'",
      "@:2: syntax error: expected key = value",
      "@:3: syntax error: expected key = value",
      "@:4: syntax error: text after the section header"}},
    {"store type needs its key",
     "[store]\ntype = postgres\n",
     {NULL},
     {"@:1: [store] type postgres needs dsn"}},
    {"store lmdb needs a path",
     "\n[store]\npath =\n",
     {NULL},
     {"@:2: [store] type lmdb needs path"}},
    {"zookeeper keys",
     "[locks]\nbackend = zookeeper\nhosts = a:1,b\nroot = /a/../b\n",
     {NULL},
     {"@:3: hosts: must be host:port, comma-separated (no spaces)",
      "@:4: root: must be an absolute znode path: no empty, . or .. part"}},
    {"zookeeper root",
     "[locks]\nroot = tidemark\n[store]\npath = /x/\n[tokens]\n",
     {NULL},
     {"@:2: root: must be an absolute znode path such as /tidemark/locks"}},
    {"zookeeper needs hosts",
     "[locks]\nbackend = zookeeper\n",
     {NULL},
     {"@:1: [locks] backend zookeeper needs hosts"}},
    {"store urls",
     "[store]\ntype = redis\nurl = redis://host\n"
     "endpoints = http://a:1,https://b:2\n",
     {NULL},
     {"@:3: url: must be redis://host:port[/db] (with cluster = yes: "
      "several, comma-separated)",
      "@:4: endpoints: mixes http:// and https:// endpoints: one scheme "
      "for all"}},
    {"etcd endpoints",
     "[store]\ntype = etcd\nendpoints = https://a:1, ftp://b:2\n"
     "[locks]\nbackend = etcd\nendpoints = http://a:1\n"
     "cert_file = /nonexistent/c.pem\n"
     "[watch w]\nprefix = p/\nendpoints = https://a:1\n"
     "ca_file = /nonexistent/ca.pem\n",
     {NULL},
     {"@:3: endpoints: must be http://host:port or https://host:port, "
      "comma-separated",
      "@:7: ca_file, cert_file and key_file are for https:// endpoints; "
      "endpoints are http://",
      "@:11: [watch w] ca_file /nonexistent/ca.pem: No such file or "
      "directory"}},
    {"upstream urls",
     "[upstream a]\nurl = ftp://h\n[upstream b]\nurl = http://h/v1\n"
     "[upstream c]\nurl = http://u:p@h\n[upstream d]\nurl = http://h:0\n"
     "[upstream e]\nurl = http://h/?x\n[upstream f]\nurl = http://\n",
     {NULL},
     {"@:2: url: must start with http:// or https://",
      "@:4: url: may have no path but \"/\": tidemark forwards the request "
      "path unchanged",
      "@:6: url: must not hold user info: put credentials elsewhere",
      "@:8: url: must be http://host[:port] or https://host[:port]",
      "@:10: url: must not have a query or a fragment",
      "@:12: url: must be http://host[:port] or https://host[:port]"}},
    {"every error is collected, in line order",
     "[route r]\nmode = sometimes\npath = /x/{a}\nresource = {b}\n"
     "[proxy]\nmax_headers = 0\nnope = 1\n[zzz]\n",
     {NULL},
     {"@:1: [route r]: no [upstream default] section",
      "@:2: mode: must be one of correctness, efficiency or off",
      "@:4: resource: {b} is not a capture of the path",
      "@:6: max_headers: must be between 1 and 128",
      "@:7: unknown key 'nope' in [proxy]", "@:8: unknown section [zzz]"}},
    {"env names nothing",
     UP_DEFAULT,
     {"TIDEMARK_NOPE=1", "TIDEMARK_PROXY_NOPE=1",
      "TIDEMARK_UPSTREAM_GHOST_URL=http://h", "TIDEMARK_ROUTE_X_MODE=off",
      "TIDEMARK_PROXY_=1", "TIDEMARK_BIN=/usr/bin/tidemark",
      "OTHER_PROXY_LISTEN=x", NULL},
     {"env:TIDEMARK_NOPE: names no section and key of the configuration",
      "env:TIDEMARK_PROXY_NOPE: names no section and key of the "
      "configuration",
      "env:TIDEMARK_UPSTREAM_GHOST_URL: names no section and key of the "
      "configuration",
      "env:TIDEMARK_ROUTE_X_MODE: names no section and key of the "
      "configuration",
      "env:TIDEMARK_PROXY_: names no section and key of the "
      "configuration"}},
    {"env bad values",
     UP_DEFAULT "[route r]\npath = /a/{x}\nresource = a/{x}\n",
     {"TIDEMARK_PROXY_MAX_HEAD=12", "TIDEMARK_UPSTREAM_DEFAULT_URL=ftp://x",
      "TIDEMARK_ROUTE_R_RESOURCE=a/{y}", NULL},
     {"env:TIDEMARK_PROXY_MAX_HEAD: max_head: must be between 1024 and "
      "1048576",
      "env:TIDEMARK_UPSTREAM_DEFAULT_URL: url: must start with http:// or "
      "https://",
      "env:TIDEMARK_ROUTE_R_RESOURCE: resource: {y} is not a capture of "
      "the path"}},
    {"env store type without its key, no [store] in the file",
     "",
     {"TIDEMARK_STORE_TYPE=redis", NULL},
     {"env:TIDEMARK_STORE_TYPE: [store] type redis needs url"}},
    {"env: service-link shapes without the Service's pair are typos",
     UP_DEFAULT,
     {"TIDEMARK_PROXY_LISTN=127.0.0.1:1", "TIDEMARK_PROXY_PORT=7070",
      "TIDEMARK_X_SERVICE_HOST=10.0.0.1",
      "TIDEMARK_PORT_7070_TCP=tcp://10.0.0.1:7070",
      "TIDEMARK_Y_SERVICE_PORT=80", "TIDEMARK_Y_PORT=tcp://10.0.0.2:80",
      "TIDEMARK_y_SERVICE_HOST=10.0.0.3", "TIDEMARK_y_SERVICE_PORT=80", NULL},
     {"env:TIDEMARK_PROXY_LISTN: names no section and key of the "
      "configuration",
      "env:TIDEMARK_PROXY_PORT: names no section and key of the "
      "configuration",
      "env:TIDEMARK_X_SERVICE_HOST: names no section and key of the "
      "configuration",
      "env:TIDEMARK_PORT_7070_TCP: names no section and key of the "
      "configuration",
      "env:TIDEMARK_Y_SERVICE_PORT: names no section and key of the "
      "configuration",
      "env:TIDEMARK_Y_PORT: names no section and key of the configuration",
      "env:TIDEMARK_y_SERVICE_HOST: names no section and key of the "
      "configuration",
      "env:TIDEMARK_y_SERVICE_PORT: names no section and key of the "
      "configuration"}},
    {"env: a service link that would override a key",
     "[upstream api-service]\nurl = http://a\n",
     {"TIDEMARK_UPSTREAM_API_SERVICE_HOST=10.0.0.3",
      "TIDEMARK_UPSTREAM_API_SERVICE_PORT=80", NULL},
     {"env:TIDEMARK_UPSTREAM_API_SERVICE_HOST: is both a key's override and "
      "a Kubernetes service link (a Service named tidemark-...): set "
      "enableServiceLinks: false or rename the section"}},
    {"env names two sections",
     "[upstream my-api]\nurl = http://a\n[upstream my_api]\nurl = http://b\n",
     {"TIDEMARK_UPSTREAM_MY_API_URL=http://c", NULL},
     {"env:TIDEMARK_UPSTREAM_MY_API_URL: names more than one section and "
      "key; rename a section"}},
    {"upstream TLS files that cannot be read",
     "[upstream u]\nurl = https://a\nca_file = /nonexistent/ca.pem\n"
     "[upstream v]\nurl = https://b\ncert_file = /nonexistent/c.pem\n"
     "[upstream w]\nurl = https://c\nkey_file = /nonexistent/k.pem\n"
     "[upstream x]\nurl = https://d\ncert_file = /dev/null\n"
     "key_file = /dev/null\n",
     {NULL},
     {"@:3: [upstream u] ca_file /nonexistent/ca.pem: No such file or "
      "directory",
      "@:6: [upstream v] cert_file /nonexistent/c.pem: a client certificate "
      "needs both cert_file and key_file",
      "@:9: [upstream w] key_file /nonexistent/k.pem: a client certificate "
      "needs both cert_file and key_file",
      "@:12: [upstream x] cert_file /dev/null: no PEM certificate in it"}},
};

static void
test_errors(void **state)
{
    for (size_t i = 0; i < ARRAY_LEN(err_cases); i++) {
        const struct err_case *c = &err_cases[i];
        struct loaded l;

        load(&l, c->ini, c->env);
        expect_errs(&l, c->name, c->want);
        unload(&l);
    }
}

static void
test_missing_file(void **state)
{
    struct tm_config c;
    struct cfg_errors errs = {0};

    assert_false(cfg_load(&c, "/nonexistent/tidemark.ini", NULL, &errs));
    assert_int_equal(errs.n, 1);
    assert_string_equal(errs.msgs[0], "/nonexistent/tidemark.ini: cannot "
                                      "open: No such file or directory");
    /* Filled anyway, and freeable. */
    assert_string_equal(c.proxy.listen, "127.0.0.1:7070");
    cfg_free(&c);
    cfg_errors_free(&errs);
}

/* inih stops at 200 bytes a line: a longer line is an error of its own,
 * and the lines after it keep their numbers. */
static void
test_long_line(void **state)
{
    char ini[1024];
    char want[512];
    struct loaded l;

    snprintf(ini, sizeof(ini),
             "[store]\ndsn = %0250d\n; a comment is never too long: "
             "%0300d\nbogus = 1\n",
             0, 0);
    load(&l, ini, NULL);
    assert_false(l.ok);
    assert_int_equal(l.errs.n, 2);
    snprintf(want, sizeof(want), "%s:2: line longer than 197 characters",
             l.path);
    assert_string_equal(l.errs.msgs[0], want);
    snprintf(want, sizeof(want), "%s:4: unknown key 'bogus' in [store]",
             l.path);
    assert_string_equal(l.errs.msgs[1], want);
    unload(&l);
}

static void
test_errors_append(void **state)
{
    struct tm_config c;
    struct cfg_errors errs = {0};

    assert_false(cfg_load(&c, "/nonexistent/a.ini", NULL, &errs));
    cfg_free(&c);
    assert_false(cfg_load(&c, "/nonexistent/b.ini", NULL, &errs));
    cfg_free(&c);
    assert_int_equal(errs.n, 2);
    assert_non_null(strstr(errs.msgs[1], "b.ini"));
    cfg_errors_free(&errs);
    assert_int_equal(errs.n, 0);
}

/* Found by fuzzing (tests/fuzz/corpus/config): an empty file loads, which
 * once computed NULL + 0 while sorting no errors (UBSan), and cfg_free
 * releases an upstream's ca_file (LeakSanitizer, make test-asan). */
static void
test_fuzz_regressions(void **state)
{
    struct loaded l;

    load_ok(&l, "", NULL);
    assert_int_equal(l.c.nupstreams, 0);
    unload(&l);
    load_ok(&l, "[upstream u]\nurl = http://a\n", NULL);
    assert_int_equal(l.c.nupstreams, 1);
    assert_string_equal(l.c.upstreams[0].pki.ca_file, "");
    unload(&l);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(
            test_default_max_connections_fits_the_open_files_limit),
        cmocka_unit_test(test_section_defaults),
        cmocka_unit_test(test_every_key),
        cmocka_unit_test(test_example),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_long_line),
        cmocka_unit_test(test_errors_append),
        cmocka_unit_test(test_fuzz_regressions),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
