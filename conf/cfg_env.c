/* cfg_env.c: the environment: TIDEMARK_<SECTION>_<KEY> overrides (the
 * Kubernetes service links set aside), and ${VAR} in the values that
 * take it. */
#include "cfg_load.h"

#include <stdlib.h>
#include <string.h>

/* Variables that share the prefix without being overrides: the test
 * harness's path to the binary. */

/* Variables that share the prefix without being overrides: the test
 * harness's path to the binary. */
static const char *const env_not_overrides[] = {"TIDEMARK_BIN", NULL};

/* Whether name (len bytes) spells key uppercased. */
static bool
env_key_eq(const char *name, size_t len, const char *key)
{
    if (strlen(key) != len) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char k = key[i];

        if (k >= 'a' && k <= 'z') {
            k = (char)(k - 'a' + 'A');
        }
        if (name[i] != k) {
            return false;
        }
    }
    return true;
}

/*
 * Kubernetes "service links". For every Service S of a pod's namespace
 * (unless the pod sets enableServiceLinks: false), every container gets,
 * with S upper-cased and '-' made '_':
 *   S_SERVICE_HOST, S_SERVICE_PORT, S_SERVICE_PORT_<PORTNAME>, S_PORT,
 *   S_PORT_<n>_<TCP|UDP|SCTP>, and that with _PROTO, _PORT or _ADDR.
 * A Service named tidemark, or tidemark-anything, so makes TIDEMARK_
 * variables that name no key. Such a variable is set aside instead of
 * refused when it has one of these shapes for some S that is TIDEMARK or
 * TIDEMARK_ followed by [A-Z0-9_], and S_SERVICE_HOST and S_SERVICE_PORT
 * are both in the environment: Kubernetes always sets the two together,
 * a typo does not (a lone TIDEMARK_PROXY_PORT stays an error).
 */

/* Whether tail (after S, starting with '_') is a service link's. */
static bool
link_tail(const char *t, size_t n)
{
    static const char *const protos[] = {"_TCP", "_UDP", "_SCTP"};
    static const char *const parts[] = {"_PROTO", "_PORT", "_ADDR"};
    size_t d = 0;

#define IS(lit) (n == strlen(lit) && memcmp(t, lit, n) == 0)
#define STARTS(lit) (n >= strlen(lit) && memcmp(t, lit, strlen(lit)) == 0)
    if (IS("_SERVICE_HOST") || IS("_SERVICE_PORT") || IS("_PORT")) {
        return true;
    }
    if (STARTS("_SERVICE_PORT_")) {
        return n > strlen("_SERVICE_PORT_");
    }
    if (!STARTS("_PORT_")) {
        return false;
    }
#undef IS
#undef STARTS
    t += 6;
    n -= 6;
    while (d < n && t[d] >= '0' && t[d] <= '9') {
        d++;
    }
    if (d == 0 || d > 5) {
        return false;
    }
    t += d;
    n -= d;
    for (size_t i = 0; i < 3; i++) {
        size_t pl = strlen(protos[i]);

        if (n < pl || memcmp(t, protos[i], pl) != 0) {
            continue;
        }
        if (n == pl) {
            return true;
        }
        for (size_t j = 0; j < 3; j++) {
            if (n - pl == strlen(parts[j]) &&
                memcmp(t + pl, parts[j], n - pl) == 0) {
                return true;
            }
        }
    }
    return false;
}

/* Whether envp holds the variable s[0..slen) followed by suffix. */
static bool
env_has(char *const *envp, const char *s, size_t slen, const char *suffix)
{
    size_t n = strlen(suffix);

    for (size_t i = 0; envp != NULL && envp[i] != NULL; i++) {
        const char *e = envp[i];

        if (strncmp(e, s, slen) == 0 && strncmp(e + slen, suffix, n) == 0 &&
            e[slen + n] == '=') {
            return true;
        }
    }
    return false;
}

/* Whether var[0..nlen) is a Kubernetes service link (above). */
static bool
env_link(char *const *envp, const char *var, size_t nlen)
{
    const size_t base = strlen(ENV_PREFIX) - 1; /* "TIDEMARK" */

    for (size_t s = base; s < nlen; s++) {
        if (var[s] != '_') {
            continue;
        }
        if (link_tail(var + s, nlen - s) &&
            env_has(envp, var, s, "_SERVICE_HOST") &&
            env_has(envp, var, s, "_SERVICE_PORT")) {
            return true;
        }
    }
    return false;
}

/* The service part may only hold what Kubernetes makes of a Service
 * name: upper-case letters, digits and '_'. */
static bool
env_link_chars(const char *var, size_t nlen)
{
    for (size_t i = 0; i < nlen; i++) {
        char c = var[i];

        if (!(c >= 'A' && c <= 'Z') && !(c >= '0' && c <= '9') && c != '_') {
            return false;
        }
    }
    return true;
}

/* Note var[0..nlen) among the service links set aside. */
static void
note_link(struct loader *l, const char *var, size_t nlen)
{
    size_t have = l->env_links != NULL ? strlen(l->env_links) : 0;
    char *s = realloc(l->env_links, have + nlen + 2);

    if (s == NULL) {
        l->oom = true;
        return;
    }
    if (have > 0) {
        s[have++] = ' ';
    }
    memcpy(s + have, var, nlen);
    s[have + nlen] = '\0';
    l->env_links = s;
}

/* One TIDEMARK_ variable: find the one section and key it names and
 * replace the file's value. */
void
cfg_apply_env(struct loader *l, const char *var)
{
    const char *eq = strchr(var, '=');
    size_t nlen = eq != NULL ? (size_t)(eq - var) : strlen(var);
    const char *rest = var + strlen(ENV_PREFIX);
    size_t rlen = nlen - strlen(ENV_PREFIX);
    struct raw_sect *hit = NULL;
    int hit_opt = -1;
    size_t hits = 0;
    struct origin at = {0, NULL};
    struct raw_val *v;
    char *value;
    bool link;

    if (eq == NULL) {
        return;
    }
    for (size_t i = 0; env_not_overrides[i] != NULL; i++) {
        if (strlen(env_not_overrides[i]) == nlen &&
            memcmp(var, env_not_overrides[i], nlen) == 0) {
            return;
        }
    }
    at.env = strndup(var, nlen);
    if (at.env == NULL) {
        l->oom = true;
        return;
    }
    for (size_t i = 0; i < l->nsects; i++) {
        struct raw_sect *s = &l->sects[i];
        size_t slen = strlen(s->env_name);

        if (rlen <= slen + 1 || memcmp(rest, s->env_name, slen) != 0 ||
            rest[slen] != '_') {
            continue;
        }
        for (size_t j = 0; j < cfg_nopts; j++) {
            if (cfg_opts[j].sect == s->kind &&
                env_key_eq(rest + slen + 1, rlen - slen - 1, cfg_opts[j].key)) {
                hits++;
                hit = s;
                hit_opt = (int)j;
            }
        }
    }
    link = env_link_chars(var, nlen) && env_link(l->envp, var, nlen);
    if (hits == 0 && link) {
        note_link(l, var, nlen);
        free(at.env);
        return;
    }
    if (hits != 1 || link) {
        cfg_add_err(l, &at, "%s",
                    hits == 0 ? "names no section and key of the configuration"
                    : link    ? "is both a key's override and a Kubernetes "
                                "service link (a Service named tidemark-...): set "
                                "enableServiceLinks: false or rename the section"
                              : "names more than one section and key; rename "
                                "a section");
        free(at.env);
        return;
    }
    value = strdup(eq + 1);
    if (value == NULL) {
        l->oom = true;
        free(at.env);
        return;
    }
    v = &hit->vals[hit_opt];
    free(v->value);
    free(v->at.env);
    v->value = value;
    v->at = at;
    v->set = true;
}

/* The value of NAME (len bytes) in envp, or NULL. */
const char *
cfg_env_lookup(char *const *envp, const char *name, size_t len)
{
    for (size_t i = 0; envp != NULL && envp[i] != NULL; i++) {
        if (strncmp(envp[i], name, len) == 0 && envp[i][len] == '=') {
            return envp[i] + len + 1;
        }
    }
    return NULL;
}

/* v with each ${VAR} replaced by the environment's value (malloc); an
 * unset variable is an error at at, "WHAT: ${VAR} is not set in the
 * environment", naming it, never a value. NULL when out of memory. */
char *
cfg_expand_env(struct loader *l, const struct origin *at, const char *what,
               const char *v)
{
    size_t cap = strlen(v) + 1, n = 0;
    char *out = malloc(cap);
    const char *p;

    if (out == NULL) {
        l->oom = true;
        return NULL;
    }
    for (p = v; *p != '\0';) {
        const char *end, *val;
        size_t vlen, need;

        if (p[0] != '$' || p[1] != '{' || (end = strchr(p + 2, '}')) == NULL) {
            out[n++] = *p++;
            continue;
        }
        val = cfg_env_lookup(l->envp, p + 2, (size_t)(end - p - 2));
        if (val == NULL) {
            cfg_add_err(l, at, "%s: ${%.*s} is not set in the environment",
                        what, (int)(end - p - 2), p + 2);
            val = "";
        }
        vlen = strlen(val);
        need = n + vlen + strlen(end + 1) + 1;
        if (need > cap) {
            char *bigger = realloc(out, need);
            if (bigger == NULL) {
                free(out);
                l->oom = true;
                return NULL;
            }
            out = bigger;
            cap = need;
        }
        memcpy(out + n, val, vlen);
        n += vlen;
        p = end + 1;
    }
    out[n] = '\0';
    return out;
}

/* Replace ${VAR} in add_header values by the environment's value. */
void
cfg_expand_headers(struct loader *l, const struct raw_sect *s,
                   struct cfg_upstream *u)
{
    for (size_t i = 0; i < u->nadd; i++) {
        struct origin at;
        char what[300];
        char *out;

        snprintf(what, sizeof(what), "add_header %s", u->add[i].name);
        out = cfg_expand_env(l, cfg_sect_origin(s, &at), what, u->add[i].value);
        if (out == NULL) {
            return;
        }
        if (strpbrk(out, "\r\n") != NULL) {
            cfg_add_err(l, cfg_sect_origin(s, &at),
                        "add_header %s: the environment's value has a line "
                        "break",
                        u->add[i].name);
        }
        free(u->add[i].value);
        u->add[i].value = out;
    }
}
