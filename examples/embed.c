/* embed.c: tidemark inside a program that runs its own libevent loop.
 *
 * The program starts a tiny upstream (evhttp) and two proxies in front of
 * it on one event_base, each logging to its own sink; a fenced write
 * passes (200), a stale one is refused (409); a client that resets in the
 * middle of a large answer does not kill the program (SIGPIPE is left at
 * its default); a reload changes the route; both proxies drain and are
 * freed. Exit 0 when every step did what it should.
 *
 * Build: cc embed.c $(pkg-config --cflags --libs tidemark)
 * make embed builds it so against a staged make install and runs it. */
#define _GNU_SOURCE /* mkdtemp, nftw, usleep under -std=c11 */
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include <tidemark.h>

#define BIG_BODY (8 << 20) /* the answer a client leaves in the middle */

static int failures;

static void
check(bool ok, const char *what)
{
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) {
        failures++;
    }
}

/* ---- a proxy's log sink: keeps its lines ------------------------------- */

struct sink {
    const char *name;
    char lines[64][256];
    int n;
};

static void
on_log(void *arg, enum tm_log_level level, const char *msg)
{
    struct sink *s = arg;

    fprintf(stderr, "[%s] %s %s\n", s->name, tm_log_level_name(level), msg);
    snprintf(s->lines[s->n % 64], sizeof(s->lines[0]), "%s", msg);
    s->n++;
}

static bool
logged(const struct sink *s, const char *words)
{
    for (int i = 0; i < s->n && i < 64; i++) {
        if (strstr(s->lines[i], words) != NULL) {
            return true;
        }
    }
    return false;
}

/* ---- the upstream: 200 "stored", or a large body for GET /big ---------- */

static void
upstream_cb(struct evhttp_request *req, void *arg)
{
    struct evbuffer *body = evbuffer_new();

    (void)arg;
    if (strcmp(evhttp_request_get_uri(req), "/big") == 0) {
        static char chunk[65536];
        for (int i = 0; i < BIG_BODY / (int)sizeof(chunk); i++) {
            evbuffer_add(body, chunk, sizeof(chunk));
        }
    } else {
        evbuffer_add_printf(body, "stored\n");
    }
    evhttp_send_reply(req, 200, "OK", body);
    evbuffer_free(body);
}

static int
bound_port(evutil_socket_t fd)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);

    getsockname(fd, (struct sockaddr *)&sin, &len);
    return ntohs(sin.sin_port);
}

/* ---- a client, run from the program while it turns the loop ------------ */

static int
dial(int port)
{
    struct sockaddr_in sin = {.sin_family = AF_INET,
                              .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd >= 0 && connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Turn the loop (the proxies and the upstream run in it) until fd has
 * want bytes or is at its end, for up to 5 s. Bytes read go to buf. */
static size_t
pump(struct event_base *base, int fd, char *buf, size_t cap, size_t want)
{
    size_t got = 0;
    time_t until = time(NULL) + 5;

    while (got < want && time(NULL) < until) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t n;

        event_base_loop(base, EVLOOP_NONBLOCK);
        if (poll(&p, 1, 5) <= 0) {
            continue;
        }
        n = recv(fd, buf + (got < cap ? got : 0), got < cap ? cap - got : cap,
                 MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN)) {
            break;
        }
        if (n > 0) {
            got += (size_t)n;
        }
    }
    return got;
}

/* Send one request to port and return the answer's status, or -1. */
static int
http(struct event_base *base, int port, const char *method, const char *path,
     const char *token)
{
    char req[512], ans[4096] = "";
    int fd = dial(port), status = -1;

    if (fd < 0) {
        return -1;
    }
    snprintf(req, sizeof(req),
             "%s %s HTTP/1.1\r\nHost: embed\r\nConnection: close\r\n"
             "Fencing-Token: %s\r\nContent-Length: 4\r\n\r\ndata",
             method, path, token);
    if (send(fd, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req)) {
        pump(base, fd, ans, sizeof(ans) - 1, sizeof(ans) - 1);
        sscanf(ans, "HTTP/1.1 %d", &status);
    }
    close(fd);
    return status;
}

/* Ask for the large answer and half-close, as a client that has sent
 * all it had may; read a little of the answer, then reset the connection
 * (RST) while the proxy is still writing to it. The proxy's next write
 * fails with EPIPE, which raises SIGPIPE unless the library keeps it
 * from killing the program. */
static void
reset_mid_answer(struct event_base *base, int port)
{
    const char *req = "GET /big HTTP/1.1\r\nHost: embed\r\n\r\n";
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    char buf[65536];
    int fd = dial(port);
    size_t got;

    if (fd < 0 || send(fd, req, strlen(req), MSG_NOSIGNAL) < 0) {
        check(false, "the large answer starts");
        return;
    }
    shutdown(fd, SHUT_WR);

    got = pump(base, fd, buf, sizeof(buf), 256 * 1024);
    check(got >= 256 * 1024, "the large answer starts");
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(fd);
    /* The proxy goes on writing what the upstream sends: give it time to
     * meet the reset (ECONNRESET, then EPIPE). */
    for (time_t until = time(NULL) + 1; time(NULL) <= until;) {
        event_base_loop(base, EVLOOP_NONBLOCK);
        usleep(1000);
    }
}

/* ---- the proxies -------------------------------------------------------- */

static struct tm_config *
config(const char *dir, int n, int upstream_port, const char *mode)
{
    char text[1024], err[1024];
    struct tm_config *cfg;

    snprintf(text, sizeof(text),
             "[proxy]\nlisten = 127.0.0.1:0\n"
             "[admin]\nlisten =\n"
             "[store]\ntype = lmdb\npath = %s/marks-%d.lmdb\n"
             "[upstream default]\nurl = http://127.0.0.1:%d\n"
             "[route docs]\nmethods = PUT\npath = /docs/{doc}\n"
             "resource = docs/{doc}\nmode = %s\n",
             dir, n, upstream_port, mode);
    cfg = tm_config_from_string("embed.ini", text, NULL, err, sizeof(err));
    if (cfg == NULL) {
        fprintf(stderr, "%s\n", err);
    }
    return cfg;
}

static void
drained(void *arg)
{
    (*(int *)arg)++;
}

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int
main(void)
{
    char dir[] = "/tmp/tidemark-embed-XXXXXX", err[512];
    struct event_base *base = event_base_new();
    struct evhttp *up = evhttp_new(base);
    struct evhttp_bound_socket *ubound;
    struct sink s1 = {.name = "proxy1"}, s2 = {.name = "proxy2"};
    struct tm_options o1 = {on_log, &s1, TM_LOG_INFO};
    struct tm_options o2 = {on_log, &s2, TM_LOG_INFO};
    struct tm_proxy *p1, *p2;
    struct tm_config *bad;
    sigset_t pending;
    int uport, port1, port2, done = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (mkdtemp(dir) == NULL || base == NULL || up == NULL) {

        perror("embed: setting up");
        return 1;
    }
    evhttp_set_gencb(up, upstream_cb, NULL);
    ubound = evhttp_bind_socket_with_handle(up, "127.0.0.1", 0);
    uport = bound_port(evhttp_bound_socket_get_fd(ubound));

    /* A configuration with a mistake names its line. */
    bad = tm_config_from_string("bad.ini", "[proxy]\nlisten = nowhere\n", NULL,
                                err, sizeof(err));
    check(bad == NULL && strncmp(err, "bad.ini:2: ", 11) == 0,
          "a bad configuration is refused with FILE:LINE");

    p1 = tm_proxy_new(base, config(dir, 1, uport, "correctness"), &o1, err,
                      sizeof(err));
    p2 = tm_proxy_new(base, config(dir, 2, uport, "correctness"), &o2, err,
                      sizeof(err));
    if (p1 == NULL || p2 == NULL) {
        fprintf(stderr, "embed: cannot start: %s\n", err);
        return 1;
    }
    port1 = tm_proxy_port(p1);
    port2 = tm_proxy_port(p2);

    check(http(base, port1, "PUT", "/docs/a", "5") == 200,
          "a fenced write passes (200)");
    check(http(base, port1, "PUT", "/docs/a", "4") == 409,
          "a stale write is refused (409)");
    check(http(base, port2, "PUT", "/docs/b", "4") == 200,
          "the second proxy keeps its own marks (200)");
    check(logged(&s1, "path=/docs/a") && !logged(&s1, "path=/docs/b") &&
              logged(&s2, "path=/docs/b") && !logged(&s2, "path=/docs/a"),
          "each proxy logs to its own sink");

    reset_mid_answer(base, port1);
    check(http(base, port1, "PUT", "/docs/a", "6") == 200,
          "a client's reset mid-answer does not stop the program");
    sigpending(&pending);
    printf("info a SIGPIPE %s raised and held blocked\n",
           sigismember(&pending, SIGPIPE) ? "was" : "was not");

    check(tm_proxy_reload(p1, config(dir, 1, uport, "off")),
          "a changed configuration is applied");
    check(http(base, port1, "PUT", "/docs/a", "1") == 200,
          "after the reload the route no longer fences (200)");

    tm_proxy_drain(p1, 1000, drained, &done);
    tm_proxy_drain(p2, 1000, drained, &done);
    for (time_t until = time(NULL) + 5; done < 2 && time(NULL) < until;) {
        event_base_loop(base, EVLOOP_ONCE);
    }
    check(done == 2, "both proxies drain");
    tm_proxy_free(p1);
    tm_proxy_free(p2);
    evhttp_free(up);
    event_base_free(base);
    nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    printf("%s\n", failures == 0 ? "embed: all good" : "embed: FAILED");
    return failures == 0 ? 0 : 1;
}
