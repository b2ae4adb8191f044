/* test_cfg.c: the configuration loader: defaults, every key, env
 * overrides, and the exact "FILE:LINE: message" of each kind of error,
 * from INI files written to temporary files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../conf/cfg.h"
#include "../../conf/cfg_opts.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_ENV 24
#define MAX_WANT 8

/* Write text to a new temporary file; returns its malloc'd path. */
static char *
write_ini(const char *text)
{
    char *path = strdup("/tmp/tidemark-cfg-XXXXXX");
    int fd;
    size_t len = strlen(text);

    assert_non_null(path);
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
    return path;
}

/* A key file holding text with the given mode; its malloc'd path. */
static char *
write_key(const char *text, mode_t mode)
{
    char *path = write_ini(text);

    assert_int_equal(chmod(path, mode), 0);
    return path;
}

struct loaded {
    char *path;
    struct tm_config c;
    struct cfg_errors errs;
    bool ok;
};

/* Load text with the given environment (NULL-terminated, may be NULL). */
/* The route's methods, space-separated, are want ("" for every method). */
static void
assert_methods(const struct tm_methods *m, const char *want)
{
    char got[512] = "";
    size_t n = 0;

    for (size_t i = 0; i < m->n; i++) {
        n += (size_t)snprintf(got + n, sizeof(got) - n, "%s%s", i ? " " : "",
                              m->v[i].name);
        assert_int_equal(m->v[i].len, strlen(m->v[i].name));
    }
    assert_string_equal(got, want);
}

static void
load(struct loaded *l, const char *text, const char *const *env)
{
    char *envp[MAX_ENV + 1] = {NULL};

    for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
        assert_true(i < MAX_ENV);
        envp[i] = (char *)env[i];
    }
    memset(l, 0, sizeof(*l));
    l->path = write_ini(text);
    l->ok = cfg_load(&l->c, l->path, envp, &l->errs);
    /* Read once: gone even when an assertion fails later. */
    unlink(l->path);
}

static void
unload(struct loaded *l)
{
    free(l->path);
    cfg_free(&l->c);
    cfg_errors_free(&l->errs);
}

static void
print_errs(const struct loaded *l)
{
    for (size_t i = 0; i < l->errs.n; i++) {
        print_message("  got: %s\n", l->errs.msgs[i]);
    }
}

static void
load_ok(struct loaded *l, const char *text, const char *const *env)
{
    load(l, text, env);
    if (!l->ok || l->errs.n != 0) {
        print_errs(l);
        fail_msg("expected the config to load");
    }
}

/* Check that the errors are exactly want, in order; "@" at the start of
 * a wanted message stands for the file's path. */
static void
expect_errs(const struct loaded *l, const char *name, const char *const want[])
{
    size_t n = 0;
    bool same;

    while (n < MAX_WANT && want[n] != NULL) {
        n++;
    }
    same = !l->ok && l->errs.n == n;
    for (size_t i = 0; same && i < n; i++) {
        char buf[512];

        if (want[i][0] == '@') {
            snprintf(buf, sizeof(buf), "%s%s", l->path, want[i] + 1);
        } else {
            snprintf(buf, sizeof(buf), "%s", want[i]);
        }
        same = strcmp(buf, l->errs.msgs[i]) == 0;
    }
    if (!same) {
        for (size_t i = 0; i < n; i++) {
            print_message("  want: %s\n", want[i]);
        }
        print_errs(l);
        fail_msg("case \"%s\": errors differ (ok=%d)", name, l->ok);
    }
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
    assert_int_equal(l.c.proxy.max_connections, 10000);
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

#define UP_DEFAULT "[upstream default]\nurl = http://127.0.0.1:8080\n"

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
      "@:4: endpoints: must be http://host:port, comma-separated"}},
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
test_env_overrides(void **state)
{
    static const char ini[] = "[proxy]\n"
                              "listen = 127.0.0.1:1\n"
                              "[upstream default]\n"
                              "url = http://127.0.0.1:8080\n"
                              "[upstream my-api]\n"
                              "url = http://127.0.0.1:8081\n"
                              "[route documents]\n"
                              "path = /v1/documents/{doc}\n"
                              "resource = documents/{doc}\n"
                              "[route files.v2]\n"
                              "path = /f/{k*}\n"
                              "resource = header\n";
    static const char *const env[] = {
        "TIDEMARK_PROXY_LISTEN=0.0.0.0:9000",
        "TIDEMARK_ADMIN_LISTEN=",
        "TIDEMARK_STORE_PATH=/tmp/marks",
        "TIDEMARK_STORE_MAP_SIZE=2G",
        "TIDEMARK_UPSTREAM_DEFAULT_URL=https://example.com:8443",
        "TIDEMARK_UPSTREAM_MY_API_MAX_IDLE=3",
        "TIDEMARK_ROUTE_DOCUMENTS_MODE=efficiency",
        "TIDEMARK_ROUTE_FILES_V2_UPSTREAM=my-api",
    };
    const char *envp[ARRAY_LEN(env) + 1] = {NULL};
    struct loaded l;

    memcpy(envp, env, sizeof(env));
    load_ok(&l, ini, envp);
    assert_string_equal(l.c.proxy.listen, "0.0.0.0:9000");
    assert_string_equal(l.c.admin.listen, "");
    assert_string_equal(l.c.store.path, "/tmp/marks");
    assert_int_equal(l.c.store.map_size, INT64_C(2) << 30);
    assert_string_equal(l.c.upstreams[0].url, "https://example.com:8443");
    assert_true(l.c.upstreams[0].tls);
    assert_string_equal(l.c.upstreams[0].host_header, "example.com:8443");
    assert_int_equal(l.c.upstreams[1].max_idle, 3);
    assert_int_equal(l.c.routes[0].mode, TM_MODE_EFFICIENCY);
    assert_string_equal(l.c.routes[1].upstream, "my-api");
    assert_int_equal(l.c.routes[1].upstream_idx, 1);
    unload(&l);
}

/* What Kubernetes injects for Services named tidemark, tidemark-admin
 * (inside [admin]'s namespace) and tidemark-upstream-default: set aside,
 * named in env_links; real overrides beside them still apply. */
static void
test_env_service_links(void **state)
{
    static const char *const env[] = {
        "TIDEMARK_SERVICE_HOST=10.96.0.10",
        "TIDEMARK_SERVICE_PORT=7070",
        "TIDEMARK_SERVICE_PORT_HTTP=7070",
        "TIDEMARK_SERVICE_PORT_ADMIN_API=7071",
        "TIDEMARK_PORT=tcp://10.96.0.10:7070",
        "TIDEMARK_PORT_7070_TCP=tcp://10.96.0.10:7070",
        "TIDEMARK_PORT_7070_TCP_PROTO=tcp",
        "TIDEMARK_PORT_7070_TCP_PORT=7070",
        "TIDEMARK_PORT_7070_TCP_ADDR=10.96.0.10",
        "TIDEMARK_PORT_9000_UDP_ADDR=10.96.0.10",
        "TIDEMARK_PORT_9001_SCTP=sctp://10.96.0.10:9001",
        "TIDEMARK_ADMIN_SERVICE_HOST=10.96.0.11",
        "TIDEMARK_ADMIN_SERVICE_PORT=7071",
        "TIDEMARK_ADMIN_PORT=tcp://10.96.0.11:7071",
        "TIDEMARK_ADMIN_PORT_7071_TCP_ADDR=10.96.0.11",
        "TIDEMARK_UPSTREAM_DEFAULT_SERVICE_HOST=10.96.0.12",
        "TIDEMARK_UPSTREAM_DEFAULT_SERVICE_PORT=80",
        "TIDEMARK_UPSTREAM_DEFAULT_PORT=tcp://10.96.0.12:80",
        "TIDEMARK_ADMIN_LISTEN=0.0.0.0:7171",
        "TIDEMARK_UPSTREAM_DEFAULT_URL=http://h",
        NULL,
    };
    struct loaded l;

    load_ok(&l, "[upstream default]\n", env);
    assert_string_equal(l.c.admin.listen, "0.0.0.0:7171");
    assert_string_equal(l.c.upstreams[0].url, "http://h");
    assert_non_null(l.c.env_links);
    assert_string_equal(
        l.c.env_links,
        "TIDEMARK_SERVICE_HOST TIDEMARK_SERVICE_PORT "
        "TIDEMARK_SERVICE_PORT_HTTP TIDEMARK_SERVICE_PORT_ADMIN_API "
        "TIDEMARK_PORT TIDEMARK_PORT_7070_TCP TIDEMARK_PORT_7070_TCP_PROTO "
        "TIDEMARK_PORT_7070_TCP_PORT TIDEMARK_PORT_7070_TCP_ADDR "
        "TIDEMARK_PORT_9000_UDP_ADDR TIDEMARK_PORT_9001_SCTP "
        "TIDEMARK_ADMIN_SERVICE_HOST TIDEMARK_ADMIN_SERVICE_PORT "
        "TIDEMARK_ADMIN_PORT TIDEMARK_ADMIN_PORT_7071_TCP_ADDR "
        "TIDEMARK_UPSTREAM_DEFAULT_SERVICE_HOST "
        "TIDEMARK_UPSTREAM_DEFAULT_SERVICE_PORT "
        "TIDEMARK_UPSTREAM_DEFAULT_PORT");
    unload(&l);
    /* None: NULL. */
    load_ok(&l, "[upstream default]\nurl = http://h\n", NULL);
    assert_null(l.c.env_links);
    unload(&l);
}

/* Overrides reach [proxy], [admin] and [store] with no file section;
 * an override of a required key satisfies it. */
static void
test_env_singletons(void **state)
{
    static const char *const env[] = {
        "TIDEMARK_PROXY_UNMATCHED=reject",
        "TIDEMARK_ADMIN_LISTEN=[::1]:7171",
        "TIDEMARK_STORE_TYPE=postgres",
        "TIDEMARK_STORE_DSN=postgresql://u:secret@db/x",
        "TIDEMARK_UPSTREAM_DEFAULT_URL=http://h",
        NULL,
    };
    struct loaded l;

    load_ok(&l, "[upstream default]\n", env);
    assert_true(l.c.proxy.unmatched_reject);
    assert_string_equal(l.c.admin.listen, "[::1]:7171");
    assert_string_equal(l.c.store.type, "postgres");
    assert_string_equal(l.c.store.dsn, "postgresql://u:secret@db/x");
    assert_string_equal(l.c.upstreams[0].host, "h");
    assert_string_equal(l.c.upstreams[0].port, "80");
    unload(&l);
}

struct url_case {
    const char *url;
    bool tls;
    const char *host, *port, *host_header;
};

static const struct url_case url_cases[] = {
    {"http://h", false, "h", "80", "h"},
    {"http://h/", false, "h", "80", "h"},
    {"HTTP://h:80", false, "h", "80", "h"},
    {"http://h:443", false, "h", "443", "h:443"},
    {"https://h:443/", true, "h", "443", "h"},
    {"https://h:80", true, "h", "80", "h:80"},
    {"http://h:0080", false, "h", "80", "h"},
    {"http://10.1.2.3:8080", false, "10.1.2.3", "8080", "10.1.2.3:8080"},
    {"https://[2001:db8::1]", true, "2001:db8::1", "443", "[2001:db8::1]"},
    {"http://[::1]:81/", false, "::1", "81", "[::1]:81"},
};

static void
test_upstream_urls(void **state)
{
    for (size_t i = 0; i < ARRAY_LEN(url_cases); i++) {
        const struct url_case *c = &url_cases[i];
        char ini[256];
        struct loaded l;

        snprintf(ini, sizeof(ini), "[upstream u]\nurl = %s\n", c->url);
        load_ok(&l, ini, NULL);
        assert_string_equal(l.c.upstreams[0].url, c->url);
        assert_int_equal(l.c.upstreams[0].tls, c->tls);
        assert_string_equal(l.c.upstreams[0].host, c->host);
        assert_string_equal(l.c.upstreams[0].port, c->port);
        assert_string_equal(l.c.upstreams[0].host_header, c->host_header);
        unload(&l);
    }
}

/* dsn and url hold passwords: no message repeats a value. */
static void
test_no_secrets_in_errors(void **state)
{
    static const char ini[] = "[store]\n"
                              "type = redis\n"
                              "url = redis://:hunter2@host\n"
                              "endpoints = http://root:hunter2@etcd\n"
                              "dsn = user=u password hunter2\n"
                              "[upstream default]\n"
                              "url = https://bob:hunter2@api/x\n"
                              "[upstream b]\n"
                              "url = hunter2\n";
    static const char *const env[] = {
        "TIDEMARK_STORE_MAP_SIZE=hunter2",
        "TIDEMARK_PROXY_LOG_LEVEL=hunter2",
        NULL,
    };
    struct loaded l;

    load(&l, ini, env);
    assert_false(l.ok);
    assert_int_equal(l.errs.n, 7);
    for (size_t i = 0; i < l.errs.n; i++) {
        if (strstr(l.errs.msgs[i], "hunter2") != NULL) {
            fail_msg("a value leaked: %s", l.errs.msgs[i]);
        }
    }
    unload(&l);
}

struct hostport_case {
    const char *in;
    const char *host, *port; /* NULL: refused */
};

static const struct hostport_case hostport_cases[] = {
    {"127.0.0.1:7070", "127.0.0.1", "7070"},
    {"localhost:1", "localhost", "1"},
    {"[::1]:7071", "::1", "7071"},
    {"[fe80::1%eth0]:80", "fe80::1%eth0", "80"},
    {"h:65535", "h", "65535"},
    {"h:65536", NULL, NULL},
    {"h:0", NULL, NULL},
    {"h:", NULL, NULL},
    {"h", NULL, NULL},
    {":80", NULL, NULL},
    {"::1:80", NULL, NULL},
    {"[::1]", NULL, NULL},
    {"[::1]80", NULL, NULL},
    {"[]:80", NULL, NULL},
    {"h:8x", NULL, NULL},
    {"h h:80", NULL, NULL},
    {"", NULL, NULL},
};

static void
test_split_hostport(void **state)
{
    for (size_t i = 0; i < ARRAY_LEN(hostport_cases); i++) {
        const struct hostport_case *c = &hostport_cases[i];
        char *host = (char *)"x", *port = (char *)"x";
        bool ok = cfg_split_hostport(c->in, &host, &port);

        if (ok != (c->host != NULL)) {
            fail_msg("cfg_split_hostport(\"%s\"): %s", c->in,
                     ok ? "accepted" : "refused");
        }
        if (ok) {
            assert_string_equal(host, c->host);
            assert_string_equal(port, c->port);
        } else {
            assert_null(host);
            assert_null(port);
        }
        free(host);
        free(port);
    }
}

/* errs collects across calls: a second load appends. */
/* [tokens] key_file: refused when missing, empty, short or readable by
 * others; a verify = hmac route needs it. */
static void
test_key_file(void **state)
{
    static const struct {
        const char *text;
        mode_t mode;
        const char *msg; /* NULL: loads */
    } cases[] = {
        {"0123456789abcdef0123", 0600, NULL},
        {"0123456789abcdef0123\n", 0640, NULL},
        {"", 0600, "key_file: the key file is empty"},
        {"\n", 0600, "key_file: the key file is empty"},
        {"short\n", 0600,
         "key_file: the key must be 16 to 4096 bytes (openssl rand -hex 32 "
         "makes one)"},
        {"0123456789abcdef0123", 0604,
         "key_file: the key file is readable or writable by others: chmod "
         "600 it (or 640 for a group)"},
    };
    char ini[512], want[600];
    struct loaded l;

    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        char *keyf = write_key(cases[i].text, cases[i].mode);

        snprintf(ini, sizeof(ini), "[tokens]\nkey_file = %s\n", keyf);
        load(&l, ini, NULL);
        if (cases[i].msg == NULL) {
            if (!l.ok) {
                print_errs(&l);
                fail_msg("key case %zu should load", i);
            }
            assert_string_equal(l.c.tokens.key_file, keyf);
        } else {
            snprintf(want, sizeof(want), "%s:2: %s", l.path, cases[i].msg);
            assert_false(l.ok);
            assert_int_equal(l.errs.n, 1);
            assert_string_equal(l.errs.msgs[0], want);
        }
        unload(&l);
        unlink(keyf);
        free(keyf);
    }
    load(&l, "[tokens]\nkey_file = /nonexistent/tidemark.key\n", NULL);
    assert_false(l.ok);
    snprintf(want, sizeof(want),
             "%s:2: key_file: cannot open the key file: No such file or "
             "directory",
             l.path);
    assert_string_equal(l.errs.msgs[0], want);
    unload(&l);
    load(&l,
         UP_DEFAULT "[route r]\npath = /a\nresource = a\n"
                    "verify = hmac\n",
         NULL);
    assert_false(l.ok);
    assert_int_equal(l.errs.n, 1);
    snprintf(want, sizeof(want),
             "%s:3: [route r]: verify = hmac needs [tokens] key_file", l.path);
    assert_string_equal(l.errs.msgs[0], want);
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
    assert_string_equal(l.c.upstreams[0].ca_file, "");
    unload(&l);
    load_ok(&l, "[upstream u]\nurl = https://a\nca_file = /x/ca.pem\n", NULL);
    assert_string_equal(l.c.upstreams[0].ca_file, "/x/ca.pem");
    unload(&l);
}

/* ---- reload: restart-only keys, from the option table --------------- */

/* A value away from the reload base's for every key of the singleton
 * sections; "@1" and "@2" stand for two secret files. */
static const struct {
    const char *sect, *key, *value;
} reload_changes[] = {
    {"proxy", "listen", "127.0.0.1:9999"},
    {"proxy", "unmatched", "reject"},
    {"proxy", "token_header", "X-T"},
    {"proxy", "resource_header", "X-R"},
    {"proxy", "header_timeout_ms", "5"},
    {"proxy", "idle_timeout_ms", "6"},
    {"proxy", "max_head", "32768"},
    {"proxy", "max_uri", "4096"},
    {"proxy", "max_headers", "50"},
    {"proxy", "max_connections", "7"},
    {"proxy", "order_grace_ms", "0"},
    {"proxy", "min_body_rate", "5"},
    {"proxy", "body_rate_window_ms", "500"},
    {"proxy", "discard_limit", "0"},
    {"proxy", "buffer_size", "4096"},
    {"proxy", "log_format", "json"},
    {"proxy", "drain_timeout_ms", "0"},
    {"proxy", "log_level", "debug"},
    {"admin", "listen", "127.0.0.1:9998"},
    {"admin", "token_file", "@2"},
    {"admin", "allowed_hosts", "ops.example"},
    {"store", "type", "redis"},
    {"store", "path", "/tmp/x.lmdb"},
    {"store", "map_size", "2M"},
    {"store", "dsn", "host=b password=hush"},
    {"store", "url", "redis://:hush@b:2"},
    {"store", "endpoints", "http://b:2"},
    {"store", "pool_size", "3"},
    {"store", "wait_replicas", "1"},
    {"store", "cluster", "yes"},
    {"store", "cache_entries", "16"},
    {"store", "timeout_ms", "9"},
    {"locks", "backend", "redis"},
    {"locks", "url", "redis://:hush@b:2"},
    {"locks", "dsn", "host=b password=hush"},
    {"locks", "endpoints", "http://b:2"},
    {"locks", "prefix", "other/"},
    {"locks", "pool_size", "3"},
    {"locks", "timeout_ms", "9"},
    {"locks", "path", "/tmp/l.lmdb"},
    {"locks", "map_size", "2M"},
    {"locks", "eager", "no"},
    {"locks", "cluster", "yes"},
    {"locks", "max_ttl_ms", "5"},
    {"locks", "max_wait_ms", "0"},
    {"locks", "hosts", "127.0.0.1:2181,127.0.0.1:2182"},
    {"locks", "root", "/other/locks"},
    {"locks", "session_timeout_ms", "4000"},
    {"tokens", "key_file", "@2"},
};

struct said {
    size_t n;
    char key[96];
    char kept[256];
};

static void
record_change(void *arg, const char *key, const char *kept)
{
    struct said *s = arg;

    s->n++;
    snprintf(s->key, sizeof(s->key), "%s", key);
    snprintf(s->kept, sizeof(s->kept), "%s", kept);
}

/* Appends "key: kept; " to the string at arg (512 bytes). */
static void
append_change(void *arg, const char *key, const char *kept)
{
    char *buf = arg;
    size_t n = strlen(buf);

    snprintf(buf + n, 512 - n, "%s: %s; ", key, kept);
}

static const char *
reload_value(const struct cfg_opt *o, const char *key1, const char *key2)
{
    for (size_t i = 0; i < ARRAY_LEN(reload_changes); i++) {
        if (strcmp(reload_changes[i].sect, cfg_sect_name(o->sect)) == 0 &&
            strcmp(reload_changes[i].key, o->key) == 0) {
            const char *v = reload_changes[i].value;

            return strcmp(v, "@1") == 0   ? key1
                   : strcmp(v, "@2") == 0 ? key2
                                          : v;
        }
    }
    fail_msg("[%s] %s has no value in reload_changes: every key is tested",
             cfg_sect_name(o->sect), o->key);
    return NULL;
}

/* TIDEMARK_<SECT>_<KEY>=value */
static void
env_var(char *buf, size_t len, const struct cfg_opt *o, const char *value)
{
    size_t n = (size_t)snprintf(
        buf, len, "TIDEMARK_%s_%s=", cfg_sect_name(o->sect), o->key);

    for (size_t i = 0; i < n; i++) {
        buf[i] = (char)(buf[i] >= 'a' && buf[i] <= 'z' ? buf[i] - 32 : buf[i]);
    }
    snprintf(buf + n, len - n, "%s", value);
}

/* For every key of [proxy], [admin], [store], [locks] and [tokens]: a
 * reload that changes only that key reports it (and keeps the running
 * value) exactly when the table says it needs a restart; else the new
 * value stands and nothing is said. Keys of [upstream] and [route]
 * sections are all reloadable. */
static void
test_reload_restart_only(void **state)
{
    char *key1 = write_key("0123456789abcdef0123456789abcdef", 0600);
    char *key2 = write_key("fedcba9876543210fedcba9876543210", 0600);
    char ini[1024];
    size_t restart = 0;

    snprintf(ini, sizeof(ini),
             "[store]\ndsn = host=a\nurl = redis://a:1\n"
             "endpoints = http://a:1\n"
             "[locks]\nurl = redis://a:1\ndsn = host=a\n"
             "[tokens]\nkey_file = %s\n"
             "[admin]\ntoken_file = %s\n" UP_DEFAULT,
             key1, key1);
    for (size_t i = 0; i < cfg_nopts; i++) {
        const struct cfg_opt *o = &cfg_opts[i];
        char var[256];
        const char *env[] = {var, NULL};
        struct loaded old, nw;
        struct said said = {0};
        void *a, *b;

        if (cfg_sect_named(o->sect)) {
            assert_false(o->flags & CFG_RESTART);
            continue;
        }
        if (o->flags & CFG_RESTART) {
            assert_true(cfg_opt_comparable(o));
            restart++;
        }
        env_var(var, sizeof(var), o, reload_value(o, key1, key2));
        load_ok(&old, ini, NULL);
        load_ok(&nw, ini, env);
        a = cfg_singleton(&old.c, o->sect);
        b = cfg_singleton(&nw.c, o->sect);
        if (cfg_opt_comparable(o) && cfg_opt_same(o, a, b)) {
            fail_msg("%s did not change the value", var);
        }
        assert_true(cfg_keep_restart_only(&nw.c, &old.c, record_change, &said));
        if (o->flags & CFG_RESTART) {
            char want[96], shown[256];

            snprintf(want, sizeof(want), "[%s] %s", cfg_sect_name(o->sect),
                     o->key);
            cfg_opt_show(o, a, shown, sizeof(shown));
            assert_int_equal(said.n, 1);
            assert_string_equal(said.key, want);
            assert_string_equal(said.kept, shown);
            assert_null(strstr(said.kept, "hush"));
            assert_true(cfg_opt_same(o, a, b));
        } else {
            assert_int_equal(said.n, 0);
        }
        unload(&old);
        unload(&nw);
    }
    /* listen twice, [store] 11, [locks] 16, [tokens] key_file */
    assert_int_equal(restart, 30);
    unlink(key1);
    unlink(key2);
    free(key1);
    free(key2);
}

/* What the log says is kept, as a file would write it. */
static void
test_reload_kept_values(void **state)
{
    const char *env[] = {"TIDEMARK_LOCKS_TIMEOUT_MS=9",
                         "TIDEMARK_LOCKS_EAGER=no", "TIDEMARK_STORE_DSN=host=z",
                         "TIDEMARK_STORE_MAP_SIZE=2M", NULL};
    struct loaded old, nw;
    char said[512] = "";

    load_ok(&old, UP_DEFAULT, NULL);
    load_ok(&nw, UP_DEFAULT, env);
    assert_true(cfg_keep_restart_only(&nw.c, &old.c, append_change, said));
    assert_string_equal(said, "[store] map_size: 1073741824; [store] dsn: "
                              "(none); [locks] timeout_ms: 2000; [locks] "
                              "eager: yes; ");
    assert_int_equal(nw.c.locks.timeout_ms, 2000);
    assert_true(nw.c.locks.eager);
    assert_null(nw.c.store.dsn);
    assert_int_equal(nw.c.store.map_size, 1073741824);
    unload(&old);
    unload(&nw);
}

/* An object of o's section, zeroed, in one of these. */
union sect_obj {
    struct cfg_proxy proxy;
    struct cfg_admin admin;
    struct cfg_store store;
    struct cfg_locks locks;
    struct cfg_tokens tokens;
    struct cfg_upstream upstream;
    struct cfg_route route;
};

/* The table itself: every option has a key, one line of help, a type
 * that fits its bounds or choices, and a default that its own setter
 * takes (so within its bounds); dropping frees what the setter made. */
static void
test_table(void **state)
{
    for (size_t i = 0; i < cfg_nopts; i++) {
        const struct cfg_opt *o = &cfg_opts[i];
        const char *sn = cfg_sect_name(o->sect);
        size_t nchoices = 0;
        union sect_obj obj;
        char buf[256];
        const char *msg;

        assert_true(o->sect < CFG_NSECT);
        assert_true(o->key[0] != '\0');
        assert_int_equal(strspn(o->key, "abcdefghijklmnopqrstuvwxyz_"),
                         strlen(o->key));
        for (size_t j = 0; j < i; j++) {
            if (cfg_opts[j].sect == o->sect &&
                strcmp(cfg_opts[j].key, o->key) == 0) {
                fail_msg("[%s] %s twice in the table", sn, o->key);
            }
        }
        if (o->help == NULL || o->help[0] == '\0' ||
            strchr(o->help, '\n') != NULL) {
            fail_msg("[%s] %s: help must be one line", sn, o->key);
        }
        for (; o->choices != NULL && o->choices[nchoices] != NULL; nchoices++) {
        }
        switch (o->type) {
        case CFG_T_INT:
            assert_true(o->min <= o->max && o->max <= INT32_MAX &&
                        o->min >= INT32_MIN);
            break;
        case CFG_T_SIZE:
            assert_true(o->min <= o->max && o->min >= 0);
            break;
        case CFG_T_KEYFILE:
            assert_true(o->min >= 1 && o->min <= o->max && o->max <= 4096);
            break;
        case CFG_T_FLAG:
            assert_int_equal(nchoices, 2);
            break;
        case CFG_T_ENUM:
        case CFG_T_CHOICE:
            assert_true(nchoices >= 2);
            break;
        case CFG_T_CUSTOM:
            assert_non_null(o->ops);
            assert_non_null(o->ops->set);
            break;
        case CFG_T_BOOL:
        case CFG_T_STR:
            break;
        }
        if (o->type != CFG_T_INT && o->type != CFG_T_SIZE &&
            o->type != CFG_T_KEYFILE) {
            assert_true(o->min == 0 && o->max == 0);
        }
        /* A required key has no default; one with a default is never
         * missing. */
        assert_true(!(o->flags & CFG_REQUIRED) || o->def == NULL);
        /* Restart-only keys are compared and kept on reload. */
        assert_true(!(o->flags & CFG_RESTART) || cfg_opt_comparable(o));
        if (o->def == NULL) {
            continue;
        }
        memset(&obj, 0, sizeof(obj));
        buf[0] = '\0';
        msg = cfg_opt_set(o, &obj, o->def, buf, sizeof(buf));
        if (msg != NULL) {
            fail_msg("[%s] %s: the default %s: %s", sn, o->key, o->def, msg);
        }
        cfg_opt_drop(o, &obj);
        cfg_opt_drop(o, &obj); /* dropped twice: nothing left to free */
    }
}

/* Every CFG_SECRET key, with a value the setter takes and one it
 * refuses, both holding "hunter2". */
static const struct {
    const char *sect, *key, *good, *bad;
} secret_values[] = {
    {"store", "dsn", "host=db password=hunter2", "host=db password='hunter2"},
    {"store", "url", "redis://:hunter2@db:6379/0", "redis://:hunter2@db"},
    {"locks", "url", "redis://:hunter2@db:6379/0", "redis://:hunter2@db/x"},
    {"locks", "dsn", "host=db password=hunter2", "hunter2"},
    {"upstream", "add_header", "X-Api-Key: hunter2", "X-Api-Key hunter2"},
};

/* A secret's value is never shown: not in a loader's message (what
 * --check prints and a refused reload logs), not by cfg_opt_show (what
 * a reload logs of a kept value). */
static void
test_secrets_never_shown(void **state)
{
    size_t secrets = 0;

    for (size_t i = 0; i < cfg_nopts; i++) {
        const struct cfg_opt *o = &cfg_opts[i];
        const char *sn = cfg_sect_name(o->sect);
        char ini[512], shown[256];
        struct loaded l;
        size_t j;

        if (!(o->flags & CFG_SECRET)) {
            continue;
        }
        secrets++;
        for (j = 0; j < ARRAY_LEN(secret_values); j++) {
            if (strcmp(secret_values[j].sect, sn) == 0 &&
                strcmp(secret_values[j].key, o->key) == 0) {
                break;
            }
        }
        if (j == ARRAY_LEN(secret_values)) {
            fail_msg("[%s] %s is secret: give it values in secret_values", sn,
                     o->key);
        }
        snprintf(ini, sizeof(ini),
                 UP_DEFAULT "[%s%s]\n%s%s = %s\nmax_bogus = 1\n", sn,
                 cfg_sect_named(o->sect) ? " b" : "",
                 cfg_sect_named(o->sect) ? "url = http://b\n" : "", o->key,
                 secret_values[j].good);
        load(&l, ini, NULL);
        /* Only the bogus key is wrong. */
        assert_int_equal(l.errs.n, 1);
        /* The section of the value: [... b] comes after UP_DEFAULT's. */
        cfg_opt_show(o, cfg_sect_obj(&l.c, o->sect, cfg_sect_named(o->sect)),
                     shown, sizeof(shown));
        /* The value is "(secret)"; add_header keeps its header names. */
        if (strstr(shown, "(secret)") == NULL) {
            fail_msg("[%s] %s shown as %s", sn, o->key, shown);
        }
        assert_null(strstr(shown, "hunter2"));
        assert_null(strstr(l.errs.msgs[0], "hunter2"));
        unload(&l);

        snprintf(ini, sizeof(ini), UP_DEFAULT "[%s%s]\n%s%s = %s\n", sn,
                 cfg_sect_named(o->sect) ? " b" : "",
                 cfg_sect_named(o->sect) ? "url = http://b\n" : "", o->key,
                 secret_values[j].bad);
        load(&l, ini, NULL);
        assert_int_equal(l.errs.n, 1);
        if (strstr(l.errs.msgs[0], "hunter2") != NULL) {
            fail_msg("a value leaked: %s", l.errs.msgs[0]);
        }
        unload(&l);
    }
    assert_int_equal(secrets, ARRAY_LEN(secret_values));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_section_defaults),
        cmocka_unit_test(test_every_key),
        cmocka_unit_test(test_example),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_long_line),
        cmocka_unit_test(test_env_overrides),
        cmocka_unit_test(test_env_singletons),
        cmocka_unit_test(test_env_service_links),
        cmocka_unit_test(test_upstream_urls),
        cmocka_unit_test(test_no_secrets_in_errors),
        cmocka_unit_test(test_split_hostport),
        cmocka_unit_test(test_errors_append),
        cmocka_unit_test(test_key_file),
        cmocka_unit_test(test_fuzz_regressions),
        cmocka_unit_test(test_reload_restart_only),
        cmocka_unit_test(test_reload_kept_values),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_secrets_never_shown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
