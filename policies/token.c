/* token.c: parsing a fencing token from a header value, and signing and
 * checking <fence>.<signature> tokens. Pure: no I/O, no globals. */
#include "token.h"

#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

enum token_status
token_parse(const char *s, size_t len, int64_t *out)
{
    int64_t v = 0;

    if (s == NULL || len == 0) {
        return TOKEN_INVALID;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return TOKEN_INVALID;
        }
        int d = s[i] - '0';
        /* v * 10 + d must stay within INT64_MAX. */
        if (v > (INT64_MAX - d) / 10) {
            return TOKEN_INVALID;
        }
        v = v * 10 + d;
    }
    if (v == 0) {
        return TOKEN_INVALID;
    }
    *out = v;
    return TOKEN_OK;
}

static const char b64url[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* base64url of the 32-byte digest d without padding: TOKEN_SIG_LEN
 * characters into out. */
static void
encode_sig(const unsigned char d[32], char *out)
{
    size_t o = 0;

    for (size_t i = 0; i < 30; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2];

        out[o++] = b64url[(v >> 18) & 63];
        out[o++] = b64url[(v >> 12) & 63];
        out[o++] = b64url[(v >> 6) & 63];
        out[o++] = b64url[v & 63];
    }
    /* Two bytes left: 16 bits as three characters. */
    uint32_t v = (uint32_t)d[30] << 16 | (uint32_t)d[31] << 8;
    out[o++] = b64url[(v >> 18) & 63];
    out[o++] = b64url[(v >> 12) & 63];
    out[o++] = b64url[(v >> 6) & 63];
}

/* The encoded signature of (res, fence) into sig (TOKEN_SIG_LEN bytes).
 * false when the HMAC fails or res is longer than TOKEN_RES_MAX. */
static bool
compute_sig(const unsigned char *key, size_t keylen, const char *res,
            size_t rlen, int64_t fence, char *sig)
{
    unsigned char msg[TOKEN_RES_MAX + 24];
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    int n;

    if (key == NULL || keylen == 0 || keylen > INT32_MAX ||
        rlen > TOKEN_RES_MAX) {
        return false;
    }
    if (rlen > 0) {
        memcpy(msg, res, rlen);
    }
    n = snprintf((char *)msg + rlen, sizeof(msg) - rlen, "\n%lld",
                 (long long)fence);
    if (n <= 0 ||
        HMAC(EVP_sha256(), key, (int)keylen, msg, rlen + (size_t)n, digest,
             &dlen) == NULL ||
        dlen != 32) {
        return false;
    }
    encode_sig(digest, sig);
    OPENSSL_cleanse(digest, sizeof(digest));
    return true;
}

size_t
token_sign(const unsigned char *key, size_t keylen, const char *res,
           size_t rlen, int64_t fence, char *out, size_t cap)
{
    char sig[TOKEN_SIG_LEN];
    int n;

    if (fence < 1 || cap <= TOKEN_SIGNED_MAX ||
        !compute_sig(key, keylen, res, rlen, fence, sig)) {
        return 0;
    }
    n = snprintf(out, cap, "%lld.%.*s", (long long)fence, TOKEN_SIG_LEN, sig);
    return n > 0 ? (size_t)n : 0;
}

static bool
is_b64url(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Whether s[0..len), whose fence part is s[0..nlen) and parsed, has a
 * signed token's shape after it: one spelling per signed token (the fence
 * as signed, no leading zeros: found by fuzz_token) and TOKEN_SIG_LEN
 * base64url characters after the dot. */
static bool
sig_shape_ok(const char *s, size_t len, size_t nlen)
{
    const char *sig = s + nlen + 1;

    if (s[0] == '0' || len - nlen - 1 != TOKEN_SIG_LEN) {
        return false;
    }
    for (size_t i = 0; i < TOKEN_SIG_LEN; i++) {
        if (!is_b64url(sig[i])) {
            return false;
        }
    }
    return true;
}

enum token_status
token_check(enum tm_verify verify, const unsigned char *key, size_t keylen,
            const char *res, size_t rlen, const char *s, size_t len,
            int64_t *fence)
{
    const char *dot = s != NULL ? memchr(s, '.', len) : NULL;
    size_t nlen = dot != NULL ? (size_t)(dot - s) : len;
    const char *sig = dot != NULL ? dot + 1 : NULL;
    char want[TOKEN_SIG_LEN];
    int64_t v;

    if (token_parse(s, nlen, &v) != TOKEN_OK) {
        return TOKEN_INVALID;
    }
    if (sig == NULL) {
        if (verify == TM_VERIFY_HMAC) {
            return TOKEN_FORBIDDEN; /* unsigned */
        }
        *fence = v;
        return TOKEN_OK;
    }
    if (!sig_shape_ok(s, len, nlen)) {
        return TOKEN_INVALID;
    }
    /* A signature that cannot be checked is not read as its fence:
     * "1.<anything>" would otherwise pass for the bare 1. */
    if (key == NULL || keylen == 0) {
        return verify == TM_VERIFY_HMAC ? TOKEN_FORBIDDEN : TOKEN_NO_KEY;
    }
    if (!compute_sig(key, keylen, res, rlen, v, want) ||
        CRYPTO_memcmp(want, sig, TOKEN_SIG_LEN) != 0) {
        return TOKEN_FORBIDDEN;
    }
    *fence = v;
    return TOKEN_OK;
}
