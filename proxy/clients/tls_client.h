/* tls_client.h: TLS toward a peer, made the same way for every client
 * tidemark has (upstreams, etcd, credential endpoints): TLS 1.2 or later,
 * the peer's certificate checked against a CA file or the system's, an
 * optional client certificate, and per connection the SNI and the name
 * checked being the peer's host (or its IP address). */
#ifndef TM_TLS_CLIENT_H
#define TM_TLS_CLIENT_H

#include <stddef.h>

#include <openssl/ssl.h>

#include "../../policies/cfg_model.h"

struct bufferevent;
struct event_base;

/* A context for c's files (struct cfg_tls: NULL or empty strings are
 * unset, the CA unset is the system's store, cert_file and key_file go
 * together), or NULL with "WHO: why" in err. Free with SSL_CTX_free. */
SSL_CTX *tls_client_ctx(const struct cfg_tls *c, const char *who, char *err,
                        size_t errlen) __attribute__((warn_unused_result));

/* A session toward host (a name or an IP literal), resuming resume when
 * it is not NULL. NULL when out of memory. */
SSL *tls_client_ssl(SSL_CTX *ctx, const char *host, SSL_SESSION *resume)
    __attribute__((warn_unused_result));

/* Why a session failed, written as it fails (for a client such as
 * evhttp that resets the connection before its owner hears of it). */
struct tls_client_why {
    char s[192]; /* "" until a failure */
};

/* Note in w (which must outlive ssl) the next reason ssl fails: a peer
 * certificate refused (the verification result) or a fatal alert from
 * the peer (TLS 1.3 brings a refused client certificate as one, after
 * the handshake). Uses ssl's app data. */
void tls_client_note(SSL *ssl, struct tls_client_why *w);

/* An unconnected TLS bufferevent toward host for evhttp (which connects
 * it), whose failures are noted in why (see tls_client_note); NULL when
 * out of memory. */
struct bufferevent *tls_client_bev(struct event_base *base, SSL_CTX *ctx,
                                   const char *host, struct tls_client_why *why)
    __attribute__((warn_unused_result));

/* Why a TLS bufferevent failed, in words fit for a log line (no secret:
 * only OpenSSL's reason and the verification result). "" when it did
 * not fail in TLS. */
void tls_client_why(struct bufferevent *bev, char *buf, size_t len);

#endif
