/* test_cfg_env.c: the environment's part in loading a configuration:
 * TIDEMARK_<SECTION>_<KEY> overrides, the Kubernetes service links set
 * aside, and overrides of singleton sections not in the file. */
#include "cfg_test.h"

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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_overrides),
        cmocka_unit_test(test_env_singletons),
        cmocka_unit_test(test_env_service_links),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
