/* test_cfg_opts.c: options as values and the table behind them: upstream
 * URLs, host:port, key files, secrets never in errors nor shown, and a
 * reload's restart-only keys, every key of the table tried. */
#include "cfg_test.h"

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

/* ---- reload: restart-only keys, from the option table --------------- */

/* A value away from the reload base's for every key of the singleton
 * sections; "@1" and "@2" stand for two secret files. */
static const struct {
    const char *sect, *key, *value;
} reload_changes[] = {
    {"proxy", "listen", "127.0.0.1:9999"},
    {"proxy", "listen_mode", "0600"},
    {"proxy", "listen_group", "daemon"},
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
    {"proxy", "multi_delete_max", "4096"},
    {"proxy", "buffer_size", "4096"},
    {"proxy", "log_format", "json"},
    {"proxy", "log_buffer", "2M"},
    {"proxy", "drain_timeout_ms", "0"},
    {"proxy", "resolver", "127.0.0.1:5353"},
    {"proxy", "log_level", "debug"},
    {"admin", "listen", "127.0.0.1:9998"},
    {"admin", "token_file", "@2"},
    {"admin", "allowed_hosts", "ops.example"},
    {"store", "type", "redis"},
    {"store", "path", "/tmp/x.lmdb"},
    {"store", "map_size", "2M"},
    {"store", "dsn", "host=b password=hush"},
    {"store", "url", "redis://:hush@b:2"},
    {"store", "endpoints", "https://b:2"},
    {"store", "ca_file", "@3"},
    {"store", "cert_file", "@3"},
    {"store", "key_file", "@3"},
    {"store", "pool_size", "3"},
    {"store", "wait_replicas", "1"},
    {"store", "cluster", "yes"},
    {"store", "cache_entries", "16"},
    {"store", "timeout_ms", "9"},
    {"locks", "backend", "redis"},
    {"locks", "url", "redis://:hush@b:2"},
    {"locks", "dsn", "host=b password=hush"},
    {"locks", "endpoints", "https://b:2"},
    {"locks", "ca_file", "@3"},
    {"locks", "cert_file", "@3"},
    {"locks", "key_file", "@3"},
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

/* A self-signed certificate (its own CA) and its key in one PEM file:
 * a section's ca_file, cert_file and key_file all at once. */
static const char unit_pem[] =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBhzCCAS2gAwIBAgIUVGlR9CCjFilW1Ea3Lh72MtLfBDEwCgYIKoZIzj0EAwIw\n"
    "GDEWMBQGA1UEAwwNdGlkZW1hcmstdW5pdDAgFw0yNjEyMDIwNzA0MjJaGA8yMTI2\n"
    "MTEwODA3MDQyMlowGDEWMBQGA1UEAwwNdGlkZW1hcmstdW5pdDBZMBMGByqGSM49\n"
    "AgEGCCqGSM49AwEHA0IABNXDUqL95durKnnIhrQ6vrtvZWYD0f2q6phmwQlgK75/\n"
    "FyOyZf40CGFRYhhkZId3GmUiXoUAoiojXjqeqpXwYjijUzBRMB0GA1UdDgQWBBT3\n"
    "qlw3TJvvqz+Ryy2GyPmAvC1tITAfBgNVHSMEGDAWgBT3qlw3TJvvqz+Ryy2GyPmA\n"
    "vC1tITAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0gAMEUCIQC0fEy1CbZs\n"
    "iuhApCuvuDNGCzWnArnJ6WdpujGTHb+b+gIgAZzSSj3ClwxHWC+cejDFc8J6NESR\n"
    "QuTRvvsOXxoTjTY=\n"
    "-----END CERTIFICATE-----\n"
    "-----BEGIN PRIVATE KEY-----\n"
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgeaCqMFDqp550V4Vq\n"
    "HsVHDsTdfMpZNkU7vs60sSSnkwqhRANCAATVw1Ki/eXbqyp5yIa0Or67b2VmA9H9\n"
    "quqYZsEJYCu+fxcjsmX+NAhhUWIYZGSHdxplIl6FAKIqI146nqqV8GI4\n"
    "-----END PRIVATE KEY-----\n";

/* The value reload_changes gives o: "@1" and "@2" are the files keys[0]
 * and keys[1] (secrets), "@3" keys[2] (a copy of the one named in the
 * base configuration, unit_pem). */
static const char *
reload_value(const struct cfg_opt *o, char *const keys[3])
{
    for (size_t i = 0; i < ARRAY_LEN(reload_changes); i++) {
        if (strcmp(reload_changes[i].sect, cfg_sect_name(o->sect)) == 0 &&
            strcmp(reload_changes[i].key, o->key) == 0) {
            const char *v = reload_changes[i].value;

            return v[0] == '@' && v[1] >= '1' && v[1] <= '3' ? keys[v[1] - '1']
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
    char *keys[3] = {write_key("0123456789abcdef0123456789abcdef", 0600),
                     write_key("fedcba9876543210fedcba9876543210", 0600),
                     write_key(unit_pem, 0600)};
    char *pem = write_key(unit_pem, 0600);
    char ini[2048];
    size_t restart = 0;

    snprintf(ini, sizeof(ini),
             "[store]\ndsn = host=a\nurl = redis://a:1\n"
             "endpoints = https://a:1\nca_file = %s\ncert_file = %s\n"
             "key_file = %s\n"
             "[locks]\nurl = redis://a:1\ndsn = host=a\n"
             "endpoints = https://a:1\nca_file = %s\ncert_file = %s\n"
             "key_file = %s\n"
             "[tokens]\nkey_file = %s\n"
             "[admin]\ntoken_file = %s\n" UP_DEFAULT,
             pem, pem, pem, pem, pem, pem, keys[0], keys[0]);
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
        env_var(var, sizeof(var), o, reload_value(o, keys));
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
    /* listen twice, [proxy] resolver, log_buffer, listen_mode and
     * listen_group, [store] 14, [locks] 19, [tokens] key_file */
    assert_int_equal(restart, 40);
    for (size_t i = 0; i < 3; i++) {
        unlink(keys[i]);
        free(keys[i]);
    }
    unlink(pem);
    free(pem);
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
        cmocka_unit_test(test_upstream_urls),
        cmocka_unit_test(test_no_secrets_in_errors),
        cmocka_unit_test(test_split_hostport),
        cmocka_unit_test(test_key_file),
        cmocka_unit_test(test_reload_restart_only),
        cmocka_unit_test(test_reload_kept_values),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_secrets_never_shown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
