/* tls_client.c: see tls_client.h. */
#include "tls_client.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "dial.h"

static bool
set(const char *s)
{
    return s != NULL && s[0] != '\0';
}

/* OpenSSL's reason for the last failure, or "unknown reason". */
static const char *
ssl_reason(char *buf, size_t len)
{
    unsigned long e = ERR_get_error();

    ERR_clear_error();
    if (e == 0) {
        return "unknown reason";
    }
    ERR_error_string_n(e, buf, len);
    return buf;
}

static bool
load_identity(SSL_CTX *ctx, const struct cfg_tls *c, const char *who, char *err,
              size_t errlen)
{
    char why[256];

    if (!set(c->cert_file) && !set(c->key_file)) {
        return true;
    }
    if (!set(c->cert_file) || !set(c->key_file)) {
        snprintf(err, errlen,
                 "%s: a client certificate needs both a "
                 "certificate file and a key file",
                 who);
        return false;
    }
    /* An empty passphrase, never a prompt (OpenSSL's default callback
     * takes this as the passphrase): an encrypted key fails to load. */
    SSL_CTX_set_default_passwd_cb_userdata(ctx, (void *)"");
    if (SSL_CTX_use_certificate_chain_file(ctx, c->cert_file) != 1) {
        snprintf(err, errlen, "%s: cannot load the client certificate %s: %s",
                 who, c->cert_file, ssl_reason(why, sizeof(why)));
        return false;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, c->key_file, SSL_FILETYPE_PEM) != 1) {
        snprintf(err, errlen, "%s: cannot load the client key %s: %s", who,
                 c->key_file, ssl_reason(why, sizeof(why)));
        return false;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(err, errlen,
                 "%s: the key %s does not match the certificate "
                 "%s",
                 who, c->key_file, c->cert_file);
        ERR_clear_error();
        return false;
    }
    return true;
}

SSL_CTX *
tls_client_ctx(const struct cfg_tls *c, const char *who, char *err,
               size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    int ok;

    if (ctx == NULL) {
        snprintf(err, errlen, "%s: cannot create a TLS context", who);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT);
    if (set(c->ca_file)) {
        ok = SSL_CTX_load_verify_locations(ctx, c->ca_file, NULL);
    } else {
        ok = SSL_CTX_set_default_verify_paths(ctx);
    }
    if (ok != 1) {
        snprintf(err, errlen, "%s: cannot load CA certificates from %s", who,
                 set(c->ca_file) ? c->ca_file : "the system store");
        ERR_clear_error();
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (!load_identity(ctx, c, who, err, errlen)) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

SSL *
tls_client_ssl(SSL_CTX *ctx, const char *host, SSL_SESSION *resume)
{
    SSL *ssl = SSL_new(ctx);

    if (ssl == NULL) {
        return NULL;
    }
    if (dial_is_ip(host)) {
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host);
    } else {
        SSL_set_tlsext_host_name(ssl, host);
        SSL_set1_host(ssl, host);
    }
    if (resume != NULL) {
        SSL_set_session(ssl, resume);
    }
    return ssl;
}

void
tls_client_why(struct bufferevent *bev, char *buf, size_t len)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);
    long vr = ssl != NULL ? SSL_get_verify_result(ssl) : X509_V_OK;
    unsigned long e = bufferevent_get_openssl_error(bev);

    buf[0] = '\0';
    if (vr != X509_V_OK) {
        snprintf(buf, len, "certificate refused: %s",
                 X509_verify_cert_error_string(vr));
    } else if (e != 0) {
        char r[256];

        ERR_error_string_n(e, r, sizeof(r));
        snprintf(buf, len, "handshake failed: %s", r);
    }
}

static struct tls_client_why *
why_of(const SSL *ssl)
{
    return SSL_get_app_data(ssl);
}

static int
note_verify(int ok, X509_STORE_CTX *x)
{
    SSL *ssl =
        X509_STORE_CTX_get_ex_data(x, SSL_get_ex_data_X509_STORE_CTX_idx());
    struct tls_client_why *w = ssl != NULL ? why_of(ssl) : NULL;

    if (!ok && w != NULL) {
        snprintf(w->s, sizeof(w->s), "certificate refused: %s",
                 X509_verify_cert_error_string(X509_STORE_CTX_get_error(x)));
    }
    return ok;
}

static void
note_alert(const SSL *ssl, int where, int ret)
{
    struct tls_client_why *w = why_of(ssl);

    if (w != NULL && (where & SSL_CB_ALERT) && (where & SSL_CB_READ) &&
        strcmp(SSL_alert_type_string(ret), "F") == 0) {
        snprintf(w->s, sizeof(w->s), "the peer refused: alert %s",
                 SSL_alert_desc_string_long(ret));
    }
}

void
tls_client_note(SSL *ssl, struct tls_client_why *w)
{
    SSL_set_app_data(ssl, w);
    SSL_set_verify(ssl, SSL_VERIFY_PEER, note_verify);
    SSL_set_info_callback(ssl, note_alert);
}

struct bufferevent *
tls_client_bev(struct event_base *base, SSL_CTX *ctx, const char *host,
               struct tls_client_why *why)
{
    SSL *ssl = tls_client_ssl(ctx, host, NULL);
    struct bufferevent *bev;

    if (ssl == NULL) {
        return NULL;
    }
    tls_client_note(ssl, why);
    bev = bufferevent_openssl_socket_new(
        base, -1, ssl, BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
    if (bev == NULL) {
        SSL_free(ssl);
    }
    return bev;
}
