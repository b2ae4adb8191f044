/* cfg_build.c: the configuration from the sections as read: the table
 * of options applied to each (cfg_opts.c), credentials and ${VAR}s, and
 * the checks of each section and of the file as a whole. */
#include "cfg_load.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* Where to report a problem of a whole section: its header; for a
 * singleton not in the file, the override that caused it. */
const struct origin *
cfg_sect_origin(const struct raw_sect *s, struct origin *at)
{
    at->line = s->line;
    at->env = NULL;
    for (size_t i = 0; s->line == 0 && i < cfg_nopts; i++) {
        if (s->vals[i].set) {
            return &s->vals[i].at;
        }
    }
    return at;
}

const struct origin *
cfg_key_origin(const struct raw_sect *s, const char *key)
{
    for (size_t i = 0; s != NULL && i < cfg_nopts; i++) {
        if (cfg_opts[i].sect == s->kind && strcmp(cfg_opts[i].key, key) == 0 &&
            s->vals[i].set) {
            return &s->vals[i].at;
        }
    }
    return NULL;
}

/* Where key of s was set, tried in order; else where s is. */
static const struct origin *
keys_origin(const struct raw_sect *s, const char *const *keys,
            struct origin *at)
{
    for (; *keys != NULL; keys++) {
        const struct origin *o = cfg_key_origin(s, *keys);

        if (o != NULL) {
            return o;
        }
    }
    return cfg_sect_origin(s, at);
}

static void *
sect_obj(struct tm_config *c, const struct raw_sect *s, size_t *nup,
         size_t *nroute, size_t *nwatch, size_t *nlease, size_t *nfollow)
{
    switch (s->kind) {
    case CFG_LEASE:
        return &c->leases[(*nlease)++];
    case CFG_FOLLOW:
        return &c->follows[(*nfollow)++];
    case CFG_UPSTREAM:
        return &c->upstreams[(*nup)++];
    case CFG_ROUTE:
        return &c->routes[(*nroute)++];
    case CFG_WATCH:
        return &c->watches[(*nwatch)++];
    default:
        return cfg_singleton(c, s->kind);
    }
}

/* Run every option of s's kind through its setter: the value from the
 * file or env, else the default. */
static void
apply_sect(struct loader *l, const struct raw_sect *s, void *obj)
{
    char label[128];
    char buf[256];

    for (size_t i = 0; i < cfg_nopts; i++) {
        const struct cfg_opt *o = &cfg_opts[i];
        const struct raw_val *v = &s->vals[i];
        const char *msg;

        if (o->sect != s->kind) {
            continue;
        }
        if (!v->set && o->def == NULL) {
            if (o->flags & CFG_REQUIRED) {
                struct origin at = {s->line, NULL};

                cfg_add_err(l, &at, "%s: missing required key '%s'",
                            cfg_sect_label(s, label, sizeof(label)), o->key);
            }
            continue;
        }
        buf[0] = '\0';
        msg = cfg_opt_set(o, obj, v->set ? v->value : o->def, buf, sizeof(buf));
        if (msg != NULL) {
            cfg_add_err(l, v->set ? &v->at : NULL, "%s: %s", o->key, msg);
        }
    }
}

#define CREDS_MAX CFG_PRIVATE_MAX

const char *
cfg_read_private(const char *path, char **out, size_t *n, char *buf, size_t len)
{
    struct stat st;
    ssize_t got;
    int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);

    if (fd < 0) {
        snprintf(buf, len, "cannot open it: %s", strerror(errno));
        return buf;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > CREDS_MAX) {
        close(fd);
        return "it is not a regular file of at most 64 KiB";
    }
    if (st.st_mode & (S_IROTH | S_IWOTH)) {
        close(fd);
        return "it is readable or writable by others: chmod 600 it (or 640 "
               "for a group)";
    }
    *out = malloc(CREDS_MAX);
    *n = 0;
    while (*out != NULL && *n < CREDS_MAX &&
           (got = read(fd, *out + *n, CREDS_MAX - *n)) != 0) {
        if (got < 0 && errno != EINTR) {
            close(fd);
            return "cannot read it";
        }
        *n += got > 0 ? (size_t)got : 0;
    }
    close(fd);
    return *out == NULL ? "out of memory" : NULL;
}

/* A credential from the environment: printable ASCII, no spaces. */
static bool
env_cred_ok(const char *v)
{
    return sigv4_cred_ok(v, strlen(v));
}

/* The chain's AWS_* variables into u->sign_env (non-empty ones). */
static void
capture_env(struct loader *l, struct cfg_upstream *u)
{
    for (int e = 0; e < AWS_ENV_N; e++) {
        const char *name = awscreds_env_name((enum awscreds_env)e);
        const char *v = cfg_env_lookup(l->envp, name, strlen(name));

        if (v != NULL && v[0] != '\0') {
            u->sign_env[e] = strdup(v);
            l->oom |= u->sign_env[e] == NULL;
        }
    }
}

/* sign_credentials_file: read and parsed now, so --check reports it. */
static void
load_sign_file(struct loader *l, const struct origin *at,
               struct cfg_upstream *u)
{
    char buf[256], *text = NULL;
    size_t n = 0;
    const char *msg =
        cfg_read_private(u->sign_credentials_file, &text, &n, buf, sizeof(buf));

    if (msg == NULL) {
        msg = sigv4_creds_parse(text, n, u->sign_profile, &u->sign_creds);
    }
    if (text != NULL) {
        explicit_bzero(text, n);
    }
    free(text);
    if (msg != NULL) {
        cfg_add_err(l, at, "sign_credentials_file [%s]: %s", u->sign_profile,
                    msg);
    }
}

/* The container endpoint's FULL_URI, as the SDKs take it: https, or
 * http to a loopback or container-agent address. NULL or why not. */
static const char *
container_uri_bad(const char *uri)
{
    char host[256];
    const char *rest = uri + 7, *end;
    size_t hl;

    if (strncmp(uri, "https://", 8) == 0) {
        return NULL;
    }
    if (strncmp(uri, "http://", 7) != 0) {
        return "is neither http:// nor https://";
    }
    if (rest[0] == '[') {
        rest++;
        end = strchr(rest, ']');
    } else {
        end = rest + strcspn(rest, ":/?#");
    }
    hl = end != NULL ? (size_t)(end - rest) : 0;
    if (hl == 0 || hl >= sizeof(host)) {
        return "has no host";
    }
    memcpy(host, rest, hl);
    host[hl] = '\0';
    return awscreds_container_host_ok(host)
               ? NULL
               : "is http:// to a host other than loopback, 169.254.170.2, "
                 "169.254.170.23 or fd00:ec2::23";
}

/* Static credentials from the environment into u->sign_creds. false
 * (with the error added) when they are unusable. */
static bool
load_sign_env(struct loader *l, const struct origin *at, struct cfg_upstream *u)
{
    const char *key_id = cfg_env_lookup(l->envp, "AWS_ACCESS_KEY_ID", 17);
    const char *secret = cfg_env_lookup(l->envp, "AWS_SECRET_ACCESS_KEY", 21);
    const char *session = cfg_env_lookup(l->envp, "AWS_SESSION_TOKEN", 17);
    bool has_key = key_id != NULL && key_id[0] != '\0';
    bool has_secret = secret != NULL && secret[0] != '\0';
    bool has_session = session != NULL && session[0] != '\0';

    if (!has_key && !has_secret && u->sign_credentials == CFG_CREDS_CHAIN) {
        return true; /* the chain goes on at start */
    }
    if (!has_key || !has_secret) {
        cfg_add_err(
            l, at,
            "sign = aws-sigv4 needs credentials: sign_credentials_file, "
            "or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the "
            "environment");
        return false;
    }
    if (!env_cred_ok(key_id) || !env_cred_ok(secret) ||
        (has_session && !env_cred_ok(session))) {
        cfg_add_err(l, at,
                    "sign: an AWS_* credential in the environment is not "
                    "printable ASCII without spaces");
        return false;
    }
    u->sign_creds.key_id = strdup(key_id);
    u->sign_creds.secret = strdup(secret);
    u->sign_creds.session = has_session ? strdup(session) : NULL;
    l->oom |= u->sign_creds.key_id == NULL || u->sign_creds.secret == NULL ||
              (has_session && u->sign_creds.session == NULL);
    return true;
}

/* sign = aws-sigv4: its region, and its credentials: sign_credentials_file,
 * the environment's static keys, or (chain) the AWS_* variables the chain
 * reads at start, captured into u->sign_env. No message quotes a
 * credential. */
static void
load_sign(struct loader *l, const struct raw_sect *s, struct cfg_upstream *u)
{
    static const char *const keys[] = {"sign_credentials_file",
                                       "sign_credentials", "sign", NULL};
    const char *full, *msg;
    const struct origin *o;
    struct origin at;

    if (u->sign == CFG_SIGN_NONE) {
        return;
    }
    if (u->sign_region == NULL || u->sign_region[0] == '\0') {
        static const char *const rk[] = {"sign", NULL};

        cfg_add_err(l, keys_origin(s, rk, &at),
                    "sign = aws-sigv4 needs sign_region");
    }
    o = keys_origin(s, keys, &at);
    if (u->sign_credentials_file != NULL &&
        u->sign_credentials_file[0] != '\0') {
        load_sign_file(l, o, u);
        return;
    }
    if (!load_sign_env(l, o, u) || u->sign_creds.key_id != NULL) {
        return;
    }
    capture_env(l, u);
    full = u->sign_env[AWS_ENV_FULL_URI];
    if (full != NULL && (msg = container_uri_bad(full)) != NULL) {
        cfg_add_err(l, o, "sign: AWS_CONTAINER_CREDENTIALS_FULL_URI %s", msg);
    }
}

/* forwarded = x-forwarded-for (or forwarded) writes that header itself:
 * an add_header of the same name would send it twice, and the upstream
 * would trust one or the other. Refused at forwarded's line. */
static void
check_forwarded(struct loader *l, const struct raw_sect *s,
                const struct cfg_upstream *u)
{
    static const char *const keys[] = {"forwarded", NULL};
    const char *name = u->forwarded == CFG_FWD_XFF       ? "X-Forwarded-For"
                       : u->forwarded == CFG_FWD_RFC7239 ? "Forwarded"
                                                         : NULL;
    struct origin at;

    for (size_t i = 0; name != NULL && i < u->nadd; i++) {
        if (strcasecmp(u->add[i].name, name) == 0) {
            cfg_add_err(l, keys_origin(s, keys, &at),
                        "forwarded = %s writes %s: an add_header of it "
                        "would send it twice; keep one of them",
                        u->forwarded == CFG_FWD_XFF ? "x-forwarded-for"
                                                    : "forwarded",
                        name);
            return;
        }
    }
}

/* The TLS files of a section that may name etcd endpoints: only for
 * https:// ones (a file that would not be used is a mistake), then
 * readable and matching (cfg_tls.c). */
static void
check_etcd_tls(struct loader *l, const struct raw_sect *s, void *obj)
{
    static const char *const keys[] = {"ca_file", "cert_file", "key_file",
                                       NULL};
    const char *endpoints = NULL;
    const struct cfg_tls *t = NULL;
    struct origin at;

    switch (s->kind) {
    case CFG_STORE:
        endpoints = ((struct cfg_store *)obj)->endpoints;
        t = &((struct cfg_store *)obj)->pki;
        break;
    case CFG_LOCKS:
        endpoints = ((struct cfg_locks *)obj)->endpoints;
        t = &((struct cfg_locks *)obj)->pki;
        break;
    case CFG_WATCH:
        endpoints = ((struct cfg_watch *)obj)->endpoints;
        t = &((struct cfg_watch *)obj)->pki;
        break;
    default:
        endpoints = ((struct cfg_follow *)obj)->endpoints;
        t = &((struct cfg_follow *)obj)->pki;
        break;
    }
    if (endpoints == NULL || endpoints[0] == '\0') {
        return;
    }
    if (strstr(endpoints, "https://") == NULL &&
        (cfg_key_origin(s, "ca_file") != NULL ||
         cfg_key_origin(s, "cert_file") != NULL ||
         cfg_key_origin(s, "key_file") != NULL)) {
        cfg_add_err(l, keys_origin(s, keys, &at),
                    "ca_file, cert_file and key_file are for https:// "
                    "endpoints; endpoints are http://");
        return;
    }
    cfg_check_tls(l, s, t);
}

/* A [follow] once its keys are set: identity's ${VAR} expanded (an
 * identity that comes out empty is an error), then its keys together. */
static void
load_follow(struct loader *l, const struct raw_sect *s, struct cfg_follow *f,
            size_t before)
{
    static const char *const id_key[] = {"identity", NULL};
    struct origin at;
    char buf[256];
    char *id;

    if (cfg_find_sect(l, CFG_LEASE, f->name) != NULL) {
        cfg_add_err(l, cfg_sect_origin(s, &at),
                    "[follow %s]: a [lease %s] has that name too: a route's "
                    "lease = %s would name both",
                    f->name, f->name, f->name);
    }
    if (l->errs->n != before || f->identity == NULL) {
        return;
    }
    id =
        cfg_expand_env(l, keys_origin(s, id_key, &at), "identity", f->identity);
    if (id == NULL) {
        return;
    }
    free(f->identity);
    f->identity = id;
    if (l->errs->n == before && cfg_check_follow(f, buf, sizeof(buf))) {
        static const char *const none[] = {NULL};
        static const char *const keyed[][2] = {
            {"kind", NULL}, {"election", NULL}, {"identity", NULL}};
        const char *const *keys = none;

        for (size_t i = 0; i < sizeof(keyed) / sizeof(keyed[0]); i++) {
            size_t n = strlen(keyed[i][0]);

            if (strncmp(buf, keyed[i][0], n) == 0 && buf[n] == ':') {
                keys = keyed[i];
            }
        }
        cfg_add_err(l, keys_origin(s, keys, &at), "%s", buf);
    }
}

/* Whether s is in the file, or set from the environment. */
static bool
sect_given(const struct raw_sect *s)
{
    if (s == NULL || s->line > 0) {
        return s != NULL;
    }
    for (size_t i = 0; i < cfg_nopts; i++) {
        if (cfg_opts[i].sect == s->kind && s->vals[i].set) {
            return true;
        }
    }
    return false;
}

/* A [lease] once its keys are set: renew_ms below ttl_ms (0 becomes
 * ttl_ms / 3), and a [locks] section naming the backend it lives in (a
 * lease in the default ./data/locks.lmdb would be shared with nobody). */
static void
check_lease(struct loader *l, const struct raw_sect *s, struct cfg_lease *ls,
            size_t before)
{
    struct origin at;
    char buf[256];

    if (l->errs->n != before) {
        return;
    }
    if (ls->renew_ms == 0) {
        ls->renew_ms = ls->ttl_ms / 3 > 0 ? ls->ttl_ms / 3 : 1;
    }
    if (cfg_check_lease(ls, buf, sizeof(buf)) != NULL) {
        /* The line of the key the message is about. */
        static const char *const renew[] = {"renew_ms", NULL};
        static const char *const margin[] = {"margin_ms", NULL};

        cfg_add_err(
            l, keys_origin(s, ls->renew_ms >= ls->ttl_ms ? renew : margin, &at),
            "%s", buf);
    }
    if (!sect_given(cfg_find_sect(l, CFG_LOCKS, NULL))) {
        cfg_add_err(
            l, cfg_sect_origin(s, &at),
            "[lease %s] needs a [locks] section: the lease lives in the "
            "lock service's backend (lmdb for one host; redis, "
            "postgres, etcd or zookeeper to share it)",
            ls->name);
    }
}

/* Whether name is a section that can carry a route's token: a [lease]
 * (or a [follow]). */
static bool
carrier_known(const struct tm_config *c, const char *name)
{
    for (size_t i = 0; i < c->nleases; i++) {
        if (strcmp(c->leases[i].name, name) == 0) {
            return true;
        }
    }
    for (size_t i = 0; i < c->nfollows; i++) {
        if (strcmp(c->follows[i].name, name) == 0) {
            return true;
        }
    }
    return false;
}

void
cfg_build(struct loader *l, struct tm_config *c)
{
    size_t nup = 0, nroute = 0, nwatch = 0, nlease = 0, nfollow = 0, before;
    char buf[256];

    for (size_t i = 0; i < l->nsects; i++) {
        nup += l->sects[i].kind == CFG_UPSTREAM;
        nroute += l->sects[i].kind == CFG_ROUTE;
        nwatch += l->sects[i].kind == CFG_WATCH;
        nlease += l->sects[i].kind == CFG_LEASE;
        nfollow += l->sects[i].kind == CFG_FOLLOW;
    }
    c->upstreams = calloc(nup + 1, sizeof(*c->upstreams));
    c->routes = calloc(nroute + 1, sizeof(*c->routes));
    c->watches = calloc(nwatch + 1, sizeof(*c->watches));
    c->leases = calloc(nlease + 1, sizeof(*c->leases));
    c->follows = calloc(nfollow + 1, sizeof(*c->follows));
    if (c->upstreams == NULL || c->routes == NULL || c->watches == NULL ||
        c->leases == NULL || c->follows == NULL) {
        l->oom = true;
        return;
    }
    c->nupstreams = nup;
    c->nroutes = nroute;
    c->nwatches = nwatch;
    c->nleases = nlease;
    c->nfollows = nfollow;
    nup = 0;
    nroute = 0;
    nwatch = 0;
    nlease = 0;
    nfollow = 0;
    for (size_t i = 0; i < l->nsects; i++) {
        const struct raw_sect *s = &l->sects[i];
        void *obj = sect_obj(c, s, &nup, &nroute, &nwatch, &nlease, &nfollow);

        if (s->kind == CFG_UPSTREAM) {
            struct cfg_upstream *u = obj;

            u->name = strdup(s->name);
            u->line = s->line;
            l->oom |= u->name == NULL;
        } else if (s->kind == CFG_ROUTE) {
            struct cfg_route *r = obj;

            r->name = strdup(s->name);
            r->line = s->line;
            l->oom |= r->name == NULL;
        } else if (s->kind == CFG_WATCH) {
            struct cfg_watch *w = obj;

            w->name = strdup(s->name);
            w->line = s->line;
            l->oom |= w->name == NULL;
        } else if (s->kind == CFG_LEASE) {
            struct cfg_lease *ls = obj;

            ls->name = strdup(s->name);
            ls->line = s->line;
            l->oom |= ls->name == NULL;
        } else if (s->kind == CFG_FOLLOW) {
            struct cfg_follow *f = obj;

            f->name = strdup(s->name);
            f->line = s->line;
            l->oom |= f->name == NULL;
        }
        before = l->errs->n;
        apply_sect(l, s, obj);
        if (s->kind == CFG_UPSTREAM) {
            cfg_expand_headers(l, s, obj);
            check_forwarded(l, s, obj);
            load_sign(l, s, obj);
            cfg_check_tls(l, s, &((struct cfg_upstream *)obj)->pki);
        }
        if (s->kind == CFG_STORE || s->kind == CFG_LOCKS ||
            s->kind == CFG_WATCH || s->kind == CFG_FOLLOW) {
            check_etcd_tls(l, s, obj);
        }
        if (s->kind == CFG_FOLLOW) {
            load_follow(l, s, obj, before);
        }
        /* A bad value was reported; "needs" would only repeat it. */
        if (s->kind == CFG_PROXY && l->errs->n == before &&
            cfg_check_proxy(&c->proxy, buf, sizeof(buf)) != NULL) {
            static const char *const keys[] = {"max_uri", "max_head", NULL};
            struct origin at;

            cfg_add_err(l, keys_origin(s, keys, &at), "%s", buf);
        }
        if (s->kind == CFG_STORE && l->errs->n == before &&
            cfg_check_store(&c->store, buf, sizeof(buf)) != NULL) {
            struct origin at;

            cfg_add_err(l, cfg_sect_origin(s, &at), "%s", buf);
        }
        if (s->kind == CFG_LOCKS && l->errs->n == before &&
            cfg_check_locks(&c->locks, buf, sizeof(buf)) != NULL) {
            struct origin at;

            cfg_add_err(l, cfg_sect_origin(s, &at), "%s", buf);
        }
        if (s->kind == CFG_LEASE) {
            check_lease(l, s, obj, before);
        }
        if (s->kind == CFG_WATCH && l->errs->n == before &&
            cfg_check_watch(obj, buf, sizeof(buf)) != NULL) {
            /* "KEY: ..." is reported where KEY is set. */
            static const char *const none[] = {NULL};
            static const char *const prefix[] = {"prefix", NULL};
            static const char *const token[] = {"token", NULL};
            const char *const *keys = none;
            struct origin at;

            if (strncmp(buf, "prefix:", 7) == 0) {
                keys = prefix;
            } else if (strncmp(buf, "token:", 6) == 0) {
                keys = token;
            }
            cfg_add_err(l, keys_origin(s, keys, &at), "%s", buf);
        }
    }
    nroute = 0;
    for (size_t i = 0; i < l->nsects; i++) {
        const struct raw_sect *s = &l->sects[i];
        struct cfg_route *r;
        size_t j;

        if (s->kind != CFG_ROUTE) {
            continue;
        }
        r = &c->routes[nroute++];
        if (r->verify == TM_VERIFY_HMAC && c->tokens.key == NULL) {
            struct origin at = {s->line, NULL};

            cfg_add_err(l, &at,
                        "[route %s]: verify = hmac needs [tokens] key_file",
                        r->name);
        }
        if (r->profile == TM_PROFILE_WEBDAV && r->resource_from_header) {
            struct origin at = {s->line, NULL};

            /* A MOVE onto this route is named by the template. */
            cfg_add_err(
                l, &at,
                "[route %s]: profile = webdav needs a resource template, "
                "not header",
                r->name);
        }
        if (r->lease != NULL && !carrier_known(c, r->lease)) {
            static const char *const keys[] = {"lease", NULL};
            struct origin at;

            cfg_add_err(l, keys_origin(s, keys, &at),
                        "lease: no [lease] or [follow] section %s", r->lease);
        }
        if (r->upstream == NULL) {
            continue;
        }
        for (j = 0; j < c->nupstreams; j++) {
            if (strcmp(c->upstreams[j].name, r->upstream) == 0) {
                break;
            }
        }
        if (j < c->nupstreams) {
            r->upstream_idx = j;
            if (r->profile == TM_PROFILE_S3 && r->mode != TM_MODE_OFF) {
                c->upstreams[j].s3_fenced = true;
            }
        } else {
            struct origin at = {s->line, NULL};

            cfg_add_err(l, &at, "[route %s]: no [upstream %s] section", r->name,
                        r->upstream);
        }
    }
}

/* Append a line "WHERE: KIND: msg" (cfg_where) to *lines. */
static void
add_line(struct loader *l, char **lines, const struct origin *at,
         const char *kind, const char *msg)
{
    size_t have = *lines != NULL ? strlen(*lines) : 0;
    char *where = cfg_where(l, at);
    size_t need = where != NULL
                      ? have + strlen(where) + strlen(kind) + strlen(msg) + 8
                      : 0;
    char *w = where != NULL ? realloc(*lines, need) : NULL;

    if (w == NULL) {
        free(where);
        l->oom = true;
        return;
    }
    snprintf(w + have, need - have, "%s%s: %s: %s", have > 0 ? "\n" : "", where,
             kind, msg);
    free(where);
    *lines = w;
}

void
cfg_add_warning(struct loader *l, struct tm_config *c, const struct origin *at,
                const char *msg)
{
    add_line(l, &c->warnings, at, "warning", msg);
}

/* A note for each signing upstream whose credentials come from the chain
 * at start: --check reads no endpoint. */
static void
note_chain(struct loader *l, struct tm_config *c)
{
    for (size_t i = 0; i < c->nupstreams; i++) {
        const struct cfg_upstream *u = &c->upstreams[i];
        char msg[320];

        if (u->sign == CFG_SIGN_NONE || u->sign_creds.key_id != NULL) {
            continue;
        }
        snprintf(msg, sizeof(msg),
                 "[upstream %s]: sign: credentials from the chain at start "
                 "(web identity, shared file, container endpoint, instance "
                 "metadata)",
                 u->name);
        add_line(l, &c->check_notes, NULL, "note", msg);
    }
}

/* The open files a client connection can take: its own socket and its
 * upstream's; those the rest of the process holds; those of one
 * PostgreSQL connection (the server's socket and the pair libpq reads in
 * its place); and those of one ZooKeeper session (the client's socket
 * and wake-up pipe, two eventfds, and the relay's four connections of
 * two sockets each, proxy/clients/zk_relay.h), with a port for each of
 * its servers, beside them. */
#define FILES_PER_CONNECTION 2
#define FILES_BESIDE 64
#define FILES_PER_PG 3
#define FILES_PER_ZK 13

/* A ZooKeeper session's files, for hosts; 0 when backend is another. */
static rlim_t
zk_files(const char *backend, const char *hosts)
{
    rlim_t n = FILES_PER_ZK + 1;

    if (backend == NULL || strcmp(backend, "zookeeper") != 0 || hosts == NULL) {
        return 0;
    }
    for (const char *p = hosts; *p != '\0'; p++) {
        n += *p == ',';
    }
    return n;
}

/* FILES_BESIDE, the PostgreSQL pools' files, and the ZooKeeper
 * sessions'. */
static rlim_t
files_beside(const struct tm_config *c)
{
    rlim_t n = FILES_BESIDE + zk_files(c->locks.backend, c->locks.zk_hosts);

    for (size_t i = 0; i < c->nwatches; i++) {
        n += zk_files(c->watches[i].backend, c->watches[i].zk_hosts);
    }
    for (size_t i = 0; i < c->nfollows; i++) {
        n += zk_files(c->follows[i].backend, c->follows[i].zk_hosts);
    }

    if (c->store.type != NULL && strcmp(c->store.type, "postgres") == 0) {
        n += (rlim_t)c->store.pool_size * FILES_PER_PG;
    }
    if (c->locks.backend != NULL && strcmp(c->locks.backend, "postgres") == 0) {
        n += (rlim_t)c->locks.pool_size * FILES_PER_PG;
    }
    return n;
}

/* A max_connections left to its default is sized to the open files the
 * process may have (the hard limit: the daemon raises the soft one to
 * it), and a note says so. One written out is kept: the daemon warns
 * when the limit is short of it. */
static void
fit_connections(struct loader *l, struct tm_config *c)
{
    struct rlimit rl;
    rlim_t fits, beside = files_beside(c);
    char msg[256];

    if (cfg_key_origin(cfg_find_sect(l, CFG_PROXY, NULL), "max_connections") !=
            NULL ||
        getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_max == RLIM_INFINITY ||
        rl.rlim_max >=
            (rlim_t)c->proxy.max_connections * FILES_PER_CONNECTION + beside) {
        return;
    }
    fits = rl.rlim_max > beside + FILES_PER_CONNECTION
               ? (rl.rlim_max - beside) / FILES_PER_CONNECTION
               : 1;
    snprintf(msg, sizeof(msg),
             "max_connections = %llu, not the default %d: the open files "
             "limit is %llu",
             (unsigned long long)fits, c->proxy.max_connections,
             (unsigned long long)rl.rlim_max);
    c->proxy.max_connections = (int)fits;
    add_line(l, &c->notes, NULL, "note", msg);
}

/* Whether listen addresses a and b ("host:port") would take the same
 * socket: the same port, and the same host or a wildcard on either. */
static bool
same_socket(const char *a, const char *b)
{
    char *ah, *ap, *bh, *bp;
    bool same = false;

    if (a == NULL || b == NULL || a[0] == '\0' || b[0] == '\0' ||
        strncmp(a, "unix:", 5) == 0 || !cfg_split_hostport(a, &ah, &ap)) {
        return false;
    }
    if (cfg_split_hostport(b, &bh, &bp)) {
        bool any = ah[0] == '\0' || bh[0] == '\0' || strcmp(ah, "*") == 0 ||
                   strcmp(bh, "*") == 0 || strcmp(ah, "0.0.0.0") == 0 ||
                   strcmp(bh, "0.0.0.0") == 0 || strcmp(ah, "::") == 0 ||
                   strcmp(bh, "::") == 0;

        same = strcmp(ap, bp) == 0 && strcmp(ap, "0") != 0 &&
               (any || strcasecmp(ah, bh) == 0);
        free(bh);
        free(bp);
    }
    free(ah);
    free(ap);
    return same;
}

/* Each [lease]'s margin_ms once the [locks] backend is known (etcd may
 * end a lease a second early): 0 becomes half of what a renewal leaves,
 * and one that leaves no time between two renewals is an error where
 * the section's own check (cfg_check_lease) passed it. */
static void
fit_leases(struct loader *l, struct tm_config *c)
{
    static const char *const keys[] = {"margin_ms", "ttl_ms", NULL};
    bool etcd =
        c->locks.backend != NULL && strcmp(c->locks.backend, "etcd") == 0;
    int early = etcd ? CFG_ETCD_LEASE_EARLY_MS : 0;

    for (size_t i = 0; i < c->nleases; i++) {
        struct cfg_lease *ls = &c->leases[i];
        int between = ls->ttl_ms - early - ls->renew_ms;
        struct origin at;

        if (ls->renew_ms >= ls->ttl_ms ||
            ls->margin_ms >= ls->ttl_ms - ls->renew_ms) {
            continue; /* reported by the section */
        }
        if (ls->margin_ms == 0) {
            ls->margin_ms = between > 0 ? between / 2 : 0;
        }
        if (ls->ttl_ms - early - ls->margin_ms > ls->renew_ms) {
            continue;
        }
        cfg_add_err(
            l, keys_origin(cfg_find_sect(l, CFG_LEASE, ls->name), keys, &at),
            "lease %s: ttl_ms (%d) less %smargin_ms (%d) leaves no "
            "time for renew_ms (%d): the lease would end on this "
            "sidecar's clock before each renewal",
            ls->name, ls->ttl_ms, etcd ? "etcd's second and " : "",
            ls->margin_ms, ls->renew_ms);
    }
}

/* What concerns the file as a whole, once every section is read. */
void
cfg_check_whole(struct loader *l, struct tm_config *c)
{
    static const char *const keys[] = {"listen", NULL};

    fit_connections(l, c);
    fit_leases(l, c);
    note_chain(l, c);
    if (same_socket(c->proxy.listen, c->admin.listen)) {
        struct origin at_admin, at_proxy;
        const struct origin *at =
            keys_origin(cfg_find_sect(l, CFG_ADMIN, NULL), keys, &at_admin);

        /* Where the clash was written: [admin] unless it kept its
         * default. */
        if (at->line == 0 && at->env == NULL) {
            at =
                keys_origin(cfg_find_sect(l, CFG_PROXY, NULL), keys, &at_proxy);
        }
        cfg_add_err(
            l, at,
            "[admin] listen %s is the address of [proxy] listen %s: the "
            "control port needs its own",
            c->admin.listen, c->proxy.listen);
    }
    if (c->nroutes == 0) {
        cfg_add_warning(
            l, c, NULL,
            "no [route] section: no request is fenced (unmatched "
            "requests are passed or refused, per [proxy] unmatched)");
    }
    if (c->nupstreams == 0) {
        cfg_add_warning(l, c, NULL,
                        "no [upstream] section: no request is forwarded (the "
                        "control port and its lock service still run)");
    }
}
