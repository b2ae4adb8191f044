/* test_zk_relay.c: the relay between ZooKeeper's C client and the
 * servers: which host lists it takes (names of 1 to 255 bytes, ports 1
 * to 65535), and on loopback, with a server of the test's own, that it
 * moves the bytes both ways, passes a frame of exactly ZK_FRAME_MAX and
 * drops the connection at a header that says one byte more, before the
 * client has any of it. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cmocka.h>

#include "../../proxy/clients/zk_relay.h"
#include "frame_test.h"

static void
timeouts(int fd)
{
    struct timeval tv = {10, 0};

    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)),
                     0);
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)),
                     0);
}

/* A listening socket on 127.0.0.1, on *port (0: any; the port taken in
 * *port). */
static int
listen_any(int *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)*port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

    assert_true(fd >= 0);
    assert_int_equal(
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static int
connect_to(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    timeouts(fd);
    return fd;
}

/* The port of item i of a relay's connect string. */
static int
relay_port(const struct zk_relay *r, int i)
{
    const char *p = zk_relay_hosts(r);

    while (i-- > 0) {
        p = strchr(p, ',');
        assert_non_null(p);
        p++;
    }
    assert_memory_equal(p, "127.0.0.1:", 10);
    return atoi(p + 10);
}

static void
send_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;

    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);

        assert_true(w > 0);
        b += w;
        n -= (size_t)w;
    }
}

static void
recv_all(int fd, void *p, size_t n)
{
    uint8_t *b = p;

    while (n > 0) {
        ssize_t got = recv(fd, b, n, 0);

        assert_true(got > 0);
        b += got;
        n -= (size_t)got;
    }
}

/* The server's side of a frame too large for one thread to send while
 * it also reads it. */
struct sending {
    int fd;
    const uint8_t *p;
    size_t n;
    bool ok;
};

static void *
send_thread(void *arg)
{
    struct sending *s = arg;
    size_t off = 0;

    while (off < s->n) {
        ssize_t w = send(s->fd, s->p + off, s->n - off, MSG_NOSIGNAL);

        if (w <= 0) {
            return NULL;
        }
        off += (size_t)w;
    }
    s->ok = true;
    return NULL;
}

/* The client's connection through r's first port, and the server's end
 * of it, accepted on lfd. */
static void
through(const struct zk_relay *r, int lfd, int *cfd, int *sfd)
{
    *cfd = connect_to(relay_port(r, 0));
    *sfd = accept(lfd, NULL, NULL);
    assert_true(*sfd >= 0);
    timeouts(*sfd);
}

/* The host lists the configuration lets through, and what the relay
 * makes of them: a port of its own for each, in order. */
static void
test_hosts(void **state)
{
    char name[300], hosts[400], err[512];
    static const size_t lens[] = {1, 30, 255};
    static const char *bad[] = {"",         "h",     "h:",      "h:0",
                                "h:65536",  "h:12a", ":2181",   "[::1:2181",
                                "a:1,,b:1", "a:1,",  "[]:2181", "h:1234567"};
    struct zk_relay *r;

    (void)state;
    r = zk_relay_new("z1:2181,[::1]:2182,127.0.0.1:65535", "t", 1000, err,
                     sizeof(err));
    assert_non_null(r);
    assert_int_not_equal(relay_port(r, 0), relay_port(r, 1));
    assert_int_not_equal(relay_port(r, 1), relay_port(r, 2));
    assert_null(
        strchr(strchr(strchr(zk_relay_hosts(r), ',') + 1, ',') + 1, ','));
    zk_relay_free(r);
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        memset(name, 'n', lens[i]);
        name[lens[i]] = '\0';
        snprintf(hosts, sizeof(hosts), "%s:1", name);
        r = zk_relay_new(hosts, "t", 1000, err, sizeof(err));
        assert_non_null(r);
        zk_relay_free(r);
    }
    memset(name, 'n', 256);
    name[256] = '\0';
    snprintf(hosts, sizeof(hosts), "%s:1", name);
    assert_null(zk_relay_new(hosts, "t", 1000, err, sizeof(err)));
    assert_non_null(strstr(err, "t: not host:port: nnn"));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        assert_null(zk_relay_new(bad[i], "t", 1000, err, sizeof(err)));
        assert_non_null(strstr(err, "not host:port"));
    }
}

/* One connection through the relay: the client's bytes reach the server,
 * the server's frames of 3 bytes and of ZK_FRAME_MAX reach the client
 * whole, and a header that says ZK_FRAME_MAX + 1 ends the connection
 * with none of its bytes passed. */
static void
test_moves_and_weighs(void **state)
{
    char hosts[64], err[256];
    uint8_t small[7], head[4], got[8], *big, *into;
    struct sending sender;
    pthread_t t;
    int port = 0, lfd = listen_any(&port), cfd, sfd;
    struct zk_relay *r;
    ssize_t n;

    (void)state;
    snprintf(hosts, sizeof(hosts), "127.0.0.1:%d", port);
    r = zk_relay_new(hosts, "t", 1000, err, sizeof(err));
    assert_non_null(r);
    through(r, lfd, &cfd, &sfd);

    send_all(cfd, "ping", 4);
    recv_all(sfd, got, 4);
    assert_memory_equal(got, "ping", 4);

    put_len(small, 3);
    memcpy(small + 4, "abc", 3);
    send_all(sfd, small, sizeof(small));
    recv_all(cfd, got, sizeof(small));
    assert_memory_equal(got, small, sizeof(small));

    big = malloc(4 + (size_t)ZK_FRAME_MAX);
    into = calloc(1, 4 + (size_t)ZK_FRAME_MAX);
    assert_non_null(big);
    assert_non_null(into);
    put_len(big, ZK_FRAME_MAX);
    memset(big + 4, 0xff, ZK_FRAME_MAX);
    sender.fd = sfd;
    sender.p = big;
    sender.n = 4 + (size_t)ZK_FRAME_MAX;
    assert_int_equal(pthread_create(&t, NULL, send_thread, &sender), 0);
    recv_all(cfd, into, 4 + (size_t)ZK_FRAME_MAX);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_true(sender.ok);
    assert_memory_equal(into, big, 4 + (size_t)ZK_FRAME_MAX);
    free(big);
    free(into);

    put_len(head, ZK_FRAME_MAX + 1);
    send_all(sfd, head, sizeof(head));
    n = recv(cfd, got, sizeof(got), 0);
    assert_true(n == 0 || (n < 0 && errno == ECONNRESET));
    n = recv(sfd, got, sizeof(got), 0);
    assert_true(n == 0 || (n < 0 && errno == ECONNRESET));

    close(cfd);
    close(sfd);
    close(lfd);
    zk_relay_free(r);
}

/* A server that refuses: the client's connection is closed, and the
 * client's next one through the same port of the relay reaches the
 * server once it listens. */
static void
test_refused_then_reached(void **state)
{
    char hosts[64], err[256];
    uint8_t got[4];
    int port = 0, lfd = listen_any(&port), cfd, sfd;
    struct zk_relay *r;

    (void)state;
    close(lfd); /* the port is free: a connection to it is refused */
    snprintf(hosts, sizeof(hosts), "127.0.0.1:%d", port);
    r = zk_relay_new(hosts, "t", 1000, err, sizeof(err));
    assert_non_null(r);
    cfd = connect_to(relay_port(r, 0));
    assert_int_equal(recv(cfd, got, sizeof(got), 0), 0);
    close(cfd);

    lfd = listen_any(&port); /* the same port, listening now */
    through(r, lfd, &cfd, &sfd);
    send_all(cfd, "zk!!", 4);
    recv_all(sfd, got, 4);
    assert_memory_equal(got, "zk!!", 4);
    close(cfd);
    close(sfd);
    close(lfd);
    zk_relay_free(r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hosts),
        cmocka_unit_test(test_moves_and_weighs),
        cmocka_unit_test(test_refused_then_reached),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
