/* tls_client.h: TLS toward a peer, made the same way for every client
 * tidemark has (upstreams, etcd, credential endpoints): TLS 1.2 or later,
 * the peer's certificate checked against a CA file or the system's, an
 * optional client certificate, and per connection the SNI and the name
 * checked being the peer's host (or its IP address). */
#ifndef TM_TLS_CLIENT_H
#define TM_TLS_CLIENT_H

#include <stddef.h>

#include <openssl/ssl.h>

struct bufferevent;

/* Empty or NULL strings are unset. cert_file and key_file go together. */
struct tls_client_conf {
    const char *ca_file;   /* unset: the system's CA store */
    const char *cert_file; /* PEM, the chain the client shows */
    const char *key_file;  /* PEM, its private key */
};

/* A context, or NULL with "WHO: why" in err. Free with SSL_CTX_free. */
SSL_CTX *tls_client_ctx(const struct tls_client_conf *c, const char *who,
                        char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* A session toward host (a name or an IP literal), resuming resume when
 * it is not NULL. NULL when out of memory. */
SSL *tls_client_ssl(SSL_CTX *ctx, const char *host, SSL_SESSION *resume)
    __attribute__((warn_unused_result));

/* Why a TLS bufferevent failed, in words fit for a log line (no secret:
 * only OpenSSL's reason and the verification result). "" when it did
 * not fail in TLS. */
void tls_client_why(struct bufferevent *bev, char *buf, size_t len);

#endif
