/* build_info.c: what tidemark was built with, for --version --verbose:
 * the compiler and flags, the sanitizers, and each library's version
 * as it answers at run time (or as its header said at build time when
 * it has no call for it). */
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <lmdb.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <zookeeper/zookeeper_version.h>

#include <event2/event.h>

#include "tidemark.h"

#if defined(__clang__)
#define TM_COMPILER "clang " __clang_version__
#elif defined(__GNUC__)
#define TM_COMPILER "gcc " __VERSION__
#else
#define TM_COMPILER "(unknown)"
#endif

/* The Makefile sets these for this file alone. */
#ifndef TM_BUILD_CFLAGS
#define TM_BUILD_CFLAGS "(unknown)"
#endif
#ifndef TM_INIH_VERSION
#define TM_INIH_VERSION "(unknown)"
#endif

#ifndef TM_BUILD_SANITIZE
#define TM_BUILD_SANITIZE "(unknown)"
#endif

size_t
tm_build_info(char *buf, size_t size)
{
    int pq = PQlibVersion();
    int mdb[3];
    int n;

    (void)mdb_version(&mdb[0], &mdb[1], &mdb[2]);
    n = snprintf(buf, size,
                 "tidemark %s\n"
                 "compiler: %s\n"
                 "CFLAGS: %s\n"
                 "sanitizers: %s\n"
                 "libevent %s (built with %s)\n"
                 "lmdb %d.%d.%d\n"
                 "hiredis %d.%d.%d (at build time)\n"
                 "libpq %d.%d\n"
                 "%s\n"
                 "jansson %s (built with %s)\n"
                 "zookeeper %s (at build time)\n"
                 "inih %s (at build time)\n",
                 tm_version(), TM_COMPILER, TM_BUILD_CFLAGS, TM_BUILD_SANITIZE,
                 event_get_version(), LIBEVENT_VERSION, mdb[0], mdb[1], mdb[2],
                 HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH, pq / 10000,
                 pq % 10000, OpenSSL_version(OPENSSL_VERSION),
                 jansson_version_str(), JANSSON_VERSION, ZOO_VERSION,
                 TM_INIH_VERSION);

    return n < 0 ? 0 : (size_t)n;
}
