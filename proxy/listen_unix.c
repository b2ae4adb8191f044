/* listen_unix.c: see listen_unix.h. */
#include "listen_unix.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../conf/cfg.h"
#include "log.h"

static bool
fill_addr(struct sockaddr_un *sa, const char *path)
{
    size_t n = strlen(path);

    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    if (n == 0 || n >= sizeof(sa->sun_path)) {
        return false;
    }
    memcpy(sa->sun_path, path, n + 1);
    return true;
}

/* Whether a process answers on the socket file at path: a connect that
 * is taken (or queued: a full backlog is a live one too). */
static bool
answers(const struct sockaddr_un *sa)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    bool live;

    if (fd < 0) {
        return false;
    }
    live = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0 ||
           errno == EAGAIN || errno == EINPROGRESS;
    close(fd);
    return live;
}

/* Clear the way for a new socket at sa: nothing there, or a socket file
 * nobody answers on (a dead process's), which is removed. */
static bool
clear_stale(const struct sockaddr_un *sa, char *err, size_t errlen)
{
    const char *path = sa->sun_path;
    struct stat st;
    char why[128];

    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) {
            return true;
        }
        snprintf(err, errlen, "cannot listen on unix:%s: %s", path,
                 errno_text(errno, why, sizeof(why)));
        return false;
    }
    if (!S_ISSOCK(st.st_mode)) {
        snprintf(err, errlen,
                 "cannot listen on unix:%s: the file exists and is not a "
                 "socket (not removed)",
                 path);
        return false;
    }
    if (answers(sa)) {
        snprintf(err, errlen,
                 "cannot listen on unix:%s: in use (a running process "
                 "answers on it)",
                 path);
        return false;
    }
    if (unlink(path) != 0 && errno != ENOENT) {
        snprintf(err, errlen, "cannot remove the stale socket unix:%s: %s",
                 path, errno_text(errno, why, sizeof(why)));
        return false;
    }
    log_info("removed the stale socket unix:%s (no process answered on it)",
             path);
    return true;
}

/* The socket file's mode and group, set before listen(): no client can
 * connect before they hold. */
static bool
set_access(const char *path, const char *mode, const char *group, char *err,
           size_t errlen)
{
    char why[128];
    gid_t gid;

    if (group != NULL && group[0] != '\0') {
        if (!cfg_group_id(group, &gid)) {
            snprintf(err, errlen, "listen_group %s: no such group", group);
            return false;
        }
        if (chown(path, (uid_t)-1, gid) != 0) {
            snprintf(err, errlen, "cannot give unix:%s to group %s: %s", path,
                     group, errno_text(errno, why, sizeof(why)));
            return false;
        }
    }
    if (chmod(path, (mode_t)strtoul(mode, NULL, 8)) != 0) {
        snprintf(err, errlen, "cannot set the mode of unix:%s: %s", path,
                 errno_text(errno, why, sizeof(why)));
        return false;
    }
    return true;
}

/* Bind fd to sa, set its file's access, listen; fill u. */
static bool
bind_listen(int fd, const struct sockaddr_un *sa, struct listen_unix *u,
            const char *mode, const char *group, char *err, size_t errlen)
{
    const char *path = sa->sun_path;
    struct stat st;
    char why[128];

    if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) != 0) {
        snprintf(err, errlen, "cannot listen on unix:%s: %s", path,
                 errno == EADDRINUSE ? "in use"
                                     : errno_text(errno, why, sizeof(why)));
        return false;
    }
    u->path = strdup(path);
    if (u->path == NULL || stat(path, &st) != 0) {
        snprintf(err, errlen, "cannot listen on unix:%s: %s", path,
                 u->path == NULL ? "out of memory"
                                 : errno_text(errno, why, sizeof(why)));
        return false;
    }
    u->dev = st.st_dev;
    u->ino = st.st_ino;
    if (!set_access(path, mode, group, err, errlen)) {
        return false;
    }
    if (listen(fd, LISTEN_BACKLOG) != 0) {
        snprintf(err, errlen, "cannot listen on unix:%s: %s", path,
                 errno_text(errno, why, sizeof(why)));
        return false;
    }
    return true;
}

int
listen_unix_open(struct listen_unix *u, const char *path, const char *mode,
                 const char *group, char *err, size_t errlen)
{
    struct sockaddr_un sa;
    int fd;

    memset(u, 0, sizeof(*u));
    if (!fill_addr(&sa, path)) {
        snprintf(err, errlen,
                 "cannot listen on unix:%s: a socket path is 1 to %zu bytes",
                 path, sizeof(sa.sun_path) - 1);
        return -1;
    }
    if (!clear_stale(&sa, err, errlen)) {
        return -1;
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        char why[128];

        snprintf(err, errlen, "cannot listen on unix:%s: %s", path,
                 errno_text(errno, why, sizeof(why)));
        return -1;
    }
    if (!bind_listen(fd, &sa, u, mode, group, err, errlen)) {
        close(fd);
        listen_unix_remove(u);
        return -1;
    }
    return fd;
}

void
listen_unix_remove(struct listen_unix *u)
{
    struct stat st;

    if (u->path == NULL) {
        return;
    }
    if (lstat(u->path, &st) == 0 && st.st_dev == u->dev &&
        st.st_ino == u->ino && unlink(u->path) != 0) {
        char why[128];

        log_warn("cannot remove unix:%s: %s", u->path,
                 errno_text(errno, why, sizeof(why)));
    }
    free(u->path);
    u->path = NULL;
}
