/* cfg_tls.c: the TLS files a section names (a CA file, a client
 * certificate and its key), read at load so that a file that cannot be
 * read, holds no PEM certificate or key, or a key that does not match
 * its certificate is a FILE:LINE error, at start, on reload and with
 * --check alike. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "cfg_load.h"

static bool
set(const char *s)
{
    return s != NULL && s[0] != '\0';
}

/* The first PEM certificate (want_key false) or private key of path,
 * or NULL with why. The caller frees it (X509_free, EVP_PKEY_free). */
static void *
read_pem(const char *path, bool want_key, char *why, size_t len)
{
    FILE *fp = fopen(path, "r");
    void *obj;

    if (fp == NULL) {
        snprintf(why, len, "%s", strerror(errno));
        return NULL;
    }
    /* An empty passphrase, never a prompt: tidemark runs unattended,
     * and an encrypted key fails to load. */
    obj = want_key ? (void *)PEM_read_PrivateKey(fp, NULL, NULL, "")
                   : (void *)PEM_read_X509(fp, NULL, NULL, "");
    fclose(fp);
    ERR_clear_error();
    if (obj == NULL) {
        snprintf(why, len,
                 want_key ? "no PEM private key in it (an encrypted key "
                            "cannot be read unattended)"
                          : "no PEM certificate in it");
    }
    return obj;
}

/* An error at key when path cannot serve as what it names. */
static void
file_err(struct loader *l, const struct raw_sect *s, const char *key,
         const char *path, const char *why)
{
    static const struct origin none = {0, NULL};
    const struct origin *at = cfg_key_origin(s, key);
    char label[128];

    cfg_add_err(l, at != NULL ? at : &none, "%s %s %s: %s",
                cfg_sect_label(s, label, sizeof(label)), key, path, why);
}

/* The certificate and key, both or neither, and matching. */
static void
check_identity(struct loader *l, const struct raw_sect *s,
               const struct cfg_tls *t)
{
    static const char cert[] = "cert_file", key[] = "key_file";
    char why[160];
    X509 *x;
    EVP_PKEY *k;

    if (set(t->cert_file) != set(t->key_file)) {
        file_err(l, s, set(t->cert_file) ? cert : key,
                 set(t->cert_file) ? t->cert_file : t->key_file,
                 "a client certificate needs both cert_file and key_file");
        return;
    }
    if (!set(t->cert_file)) {
        return;
    }
    x = read_pem(t->cert_file, false, why, sizeof(why));
    if (x == NULL) {
        file_err(l, s, cert, t->cert_file, why);
        return;
    }
    k = read_pem(t->key_file, true, why, sizeof(why));
    if (k == NULL) {
        file_err(l, s, key, t->key_file, why);
    } else if (X509_check_private_key(x, k) != 1) {
        snprintf(why, sizeof(why), "does not match the certificate %s",
                 t->cert_file);
        file_err(l, s, key, t->key_file, why);
    }
    ERR_clear_error();
    EVP_PKEY_free(k);
    X509_free(x);
}

void
cfg_check_tls(struct loader *l, const struct raw_sect *s,
              const struct cfg_tls *t)
{
    char why[160];
    X509 *x;

    if (set(t->ca_file)) {
        x = read_pem(t->ca_file, false, why, sizeof(why));
        if (x == NULL) {
            file_err(l, s, "ca_file", t->ca_file, why);
        }
        X509_free(x);
    }
    check_identity(l, s, t);
}
