/* cfg_probe.c: what --check asks of the host beyond the file: that each
 * lmdb file can be opened where it is (its directory made and written;
 * nothing is created here), that each upstream's host name resolves, and
 * that a Unix socket's listen_group exists. */
#include <errno.h>
#include <grp.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cfg_load.h"

/* Why the lmdb file path cannot be opened: errno of the nearest part of
 * it that exists (its directory, made at start when missing, must be a
 * directory tidemark can write; an existing file must be one it can
 * read and write); 0 when it can. */
static int
lmdb_path_errno(const char *path)
{
    struct stat st;
    char *dir;
    char *slash;
    int err = 0;

    if (path[0] == '\0') {
        return ENOENT;
    }
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            return EISDIR;
        }
        return access(path, R_OK | W_OK) == 0 ? 0 : errno;
    }
    if (errno != ENOENT) {
        return errno;
    }
    dir = strdup(path);
    if (dir == NULL) {
        return ENOMEM;
    }
    /* Up to the nearest existing directory: it must take new entries. */
    while ((slash = strrchr(dir, '/')) != NULL) {
        *(slash == dir ? slash + 1 : slash) = '\0';
        if (stat(dir, &st) == 0 || errno != ENOENT || slash == dir) {
            break;
        }
    }
    if (slash == NULL) {
        strcpy(dir, ".");
    }
    if (stat(dir, &st) != 0) {
        err = errno;
    } else if (!S_ISDIR(st.st_mode)) {
        err = ENOTDIR;
    } else if (access(dir, W_OK | X_OK) != 0) {
        err = errno;
    }
    free(dir);
    return err;
}

/* An error at [sect] key when the lmdb file path cannot be opened. */
static void
probe_lmdb(struct loader *l, enum cfg_sect sect, const char *label,
           const char *path)
{
    int err;

    if (path == NULL || (err = lmdb_path_errno(path)) == 0) {
        return;
    }
    cfg_add_err(l, cfg_key_origin(cfg_find_sect(l, sect, NULL), "path"),
                "%s path %s cannot be opened: %s", label, path, strerror(err));
}

/* A warning at the upstream's url when its host does not resolve. */
static void
probe_upstream(struct loader *l, struct tm_config *c,
               const struct cfg_upstream *u)
{
    struct addrinfo hints = {0};
    struct addrinfo *res = NULL;
    const struct origin *at;
    char msg[512];
    int rc;

    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_ADDRCONFIG;
    rc = getaddrinfo(u->host, u->port, &hints, &res);
    if (rc == 0) {
        freeaddrinfo(res);
        return;
    }
    at = cfg_key_origin(cfg_find_sect(l, CFG_UPSTREAM, u->name), "url");
    snprintf(msg, sizeof(msg), "[upstream %s] url: host %.256s: %s", u->name,
             u->host, rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
    cfg_add_warning(l, c, at, msg);
}

bool
cfg_group_id(const char *group, gid_t *gid)
{
    struct group *g = getgrnam(group);
    char *end;
    unsigned long n;

    if (g != NULL) {
        *gid = g->gr_gid;
        return true;
    }
    errno = 0;
    n = strtoul(group, &end, 10);
    if (errno != 0 || end == group || *end != '\0' || n > (gid_t)-1) {
        return false;
    }
    *gid = (gid_t)n;
    return true;
}

/* An error at listen_group when listen = unix:PATH names a group that
 * does not exist here (the start would stop on it). */
static void
probe_group(struct loader *l, const struct cfg_proxy *p)
{
    gid_t gid;

    if (p->listen == NULL || strncmp(p->listen, "unix:", 5) != 0 ||
        p->listen_group == NULL || p->listen_group[0] == '\0' ||
        cfg_group_id(p->listen_group, &gid)) {
        return;
    }
    cfg_add_err(
        l, cfg_key_origin(cfg_find_sect(l, CFG_PROXY, NULL), "listen_group"),
        "listen_group %s: no such group", p->listen_group);
}

void
cfg_probe(struct loader *l, struct tm_config *c)
{
    probe_group(l, &c->proxy);
    if (c->store.type != NULL && strcmp(c->store.type, "lmdb") == 0) {
        probe_lmdb(l, CFG_STORE, "[store]", c->store.path);
    }
    if (c->locks.backend != NULL && strcmp(c->locks.backend, "lmdb") == 0) {
        probe_lmdb(l, CFG_LOCKS, "[locks]", c->locks.path);
    }
    /* Names go to [proxy] resolver's servers when it is set: the system's
     * resolver, which --check can ask, would answer for other ones. */
    if (c->proxy.resolver != NULL && c->proxy.resolver[0] != '\0') {
        return;
    }
    for (size_t i = 0; i < c->nupstreams; i++) {
        probe_upstream(l, c, &c->upstreams[i]);
    }
}
