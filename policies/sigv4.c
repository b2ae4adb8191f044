/* sigv4.c: AWS Signature Version 4 (the canonical request, the string
 * to sign, the signing key, the signature) and the shared-credentials
 * file format. Pure: no I/O, no globals. */
#include "sigv4.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "ascii.h"

static const char hexdig[] = "0123456789ABCDEF";

/* A writer into a buffer sized in advance (an upper bound), so no
 * write can run past it. */
struct wbuf {
    char *p;
    size_t n;
};

static void
put(struct wbuf *w, const char *s, size_t n)
{
    memcpy(w->p + w->n, s, n);
    w->n += n;
}

static void
put_c(struct wbuf *w, char c)
{
    w->p[w->n++] = c;
}

/* RFC 3986 unreserved: what AWS's UriEncode leaves as it is. */
static bool
unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
           c == '~';
}

/* The byte at s[*i] as text decodes it: a %XX escape (also advancing
 * *i past it), else the byte itself. */
static unsigned char
decode_at(const char *s, size_t n, size_t *i)
{
    if (s[*i] == '%' && *i + 2 < n && ascii_hexval(s[*i + 1]) >= 0 &&
        ascii_hexval(s[*i + 2]) >= 0) {
        unsigned char b = (unsigned char)(ascii_hexval(s[*i + 1]) * 16 +
                                          ascii_hexval(s[*i + 2]));
        *i += 2;
        return b;
    }
    return (unsigned char)s[*i];
}

/* UriEncode of one byte. */
static void
put_enc(struct wbuf *w, unsigned char b)
{
    if (unreserved(b)) {
        put_c(w, (char)b);
        return;
    }
    put_c(w, '%');
    put_c(w, hexdig[b >> 4]);
    put_c(w, hexdig[b & 15]);
}

/* The canonical URI. S3: the path as sent with its escapes read and
 * every byte written again as UriEncode writes it (so a path a client
 * already encoded is not encoded twice, and %7e and ~ sign alike); a
 * '/' that was sent as %2F stays %2F. Other services: UriEncode of the
 * path as sent ('%' too: the path is encoded twice), '/' kept. */
static void
put_uri(struct wbuf *w, const char *p, size_t n, bool s3)
{
    if (n == 0) {
        put_c(w, '/');
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '/') {
            put_c(w, '/');
        } else if (s3) {
            put_enc(w, decode_at(p, n, &i));
        } else {
            put_enc(w, (unsigned char)p[i]);
        }
    }
}

/* Write s[0..n) (a query name or value as sent) decoded, with '+' read
 * as a space, then UriEncoded. */
static void
put_qpart(struct wbuf *w, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        put_enc(w, s[i] == '+' ? ' ' : decode_at(s, n, &i));
    }
}

struct qparam {
    const char *name; /* encoded, in the scratch buffer */
    size_t nlen;
    const char *value;
    size_t vlen;
};

static int
cmp_bytes(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);

    if (c != 0) {
        return c;
    }
    return an < bn ? -1 : an > bn;
}

static int
cmp_qparam(const void *x, const void *y)
{
    const struct qparam *a = x, *b = y;
    int c = cmp_bytes(a->name, a->nlen, b->name, b->nlen);

    return c != 0 ? c : cmp_bytes(a->value, a->vlen, b->value, b->vlen);
}

/* The canonical query string: each name=value (a name alone is name=)
 * encoded as put_qpart does, sorted by name, then value; empty pieces
 * (a&&b) dropped. false when there are more than SIGV4_MAX_PARAMS or no
 * memory. */
static bool
put_query(struct wbuf *w, const char *q, size_t n)
{
    struct qparam *ps = NULL;
    struct wbuf enc = {NULL, 0};
    size_t np = 0, i = 0;

    if (n == 0) {
        return true;
    }
    ps = malloc(SIGV4_MAX_PARAMS * sizeof(*ps));
    enc.p = malloc(3 * n + 1);
    if (ps == NULL || enc.p == NULL) {
        goto fail;
    }
    while (i <= n) {
        const char *amp = memchr(q + i, '&', n - i);
        size_t end = amp != NULL ? (size_t)(amp - q) : n;
        const char *eq = memchr(q + i, '=', end - i);
        size_t ne = eq != NULL ? (size_t)(eq - q) : end;
        size_t at;

        if (end > i) {
            if (np == SIGV4_MAX_PARAMS) {
                goto fail;
            }
            at = enc.n;
            put_qpart(&enc, q + i, ne - i);
            ps[np].name = enc.p + at;
            ps[np].nlen = enc.n - at;
            at = enc.n;
            if (eq != NULL) {
                put_qpart(&enc, eq + 1, end - ne - 1);
            }
            ps[np].value = enc.p + at;
            ps[np].vlen = enc.n - at;
            np++;
        }
        i = end + 1;
    }
    qsort(ps, np, sizeof(*ps), cmp_qparam);
    for (size_t k = 0; k < np; k++) {
        if (k > 0) {
            put_c(w, '&');
        }
        put(w, ps[k].name, ps[k].nlen);
        put_c(w, '=');
        put(w, ps[k].value, ps[k].vlen);
    }
    free(ps);
    free(enc.p);
    return true;
fail:
    free(ps);
    free(enc.p);
    return false;
}

struct hsort {
    char *lname; /* lower case, in the scratch buffer */
    size_t nlen;
    size_t idx; /* place in the request: keeps values in order */
};

static int
cmp_hsort(const void *x, const void *y)
{
    const struct hsort *a = x, *b = y;
    int c = cmp_bytes(a->lname, a->nlen, b->lname, b->nlen);

    if (c != 0) {
        return c;
    }
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static bool
is_ws(char c)
{
    return c == ' ' || c == '\t';
}

/* A header value trimmed, runs of spaces and tabs as one space. */
static void
put_trimmed(struct wbuf *w, const char *v, size_t n)
{
    size_t a = 0;
    bool gap = false;

    while (n > 0 && is_ws(v[n - 1])) {
        n--;
    }
    while (a < n && is_ws(v[a])) {
        a++;
    }
    for (size_t i = a; i < n; i++) {
        if (is_ws(v[i])) {
            gap = true;
            continue;
        }
        if (gap) {
            put_c(w, ' ');
            gap = false;
        }
        put_c(w, v[i]);
    }
}

static bool
headers_ok(const struct sigv4_request *rq)
{
    if (rq->nheaders > SIGV4_MAX_HEADERS) {
        return false;
    }
    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct sigv4_header *h = &rq->headers[i];

        if (h->nlen == 0 || memchr(h->value, '\r', h->vlen) != NULL ||
            memchr(h->value, '\n', h->vlen) != NULL ||
            memchr(h->name, ':', h->nlen) != NULL ||
            memchr(h->name, ';', h->nlen) != NULL ||
            memchr(h->name, '\n', h->nlen) != NULL) {
            return false;
        }
    }
    return true;
}

/* The canonical headers ("name:value\n" each, sorted) into w and the
 * SignedHeaders list into names. hs: rq->nheaders entries of scratch. */
static void
put_headers(struct wbuf *w, struct wbuf *names, const struct sigv4_request *rq,
            struct hsort *hs, char *lower)
{
    size_t off = 0;

    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct sigv4_header *h = &rq->headers[i];

        for (size_t k = 0; k < h->nlen; k++) {
            char c = h->name[k];
            lower[off + k] = ascii_lower(c);
        }
        hs[i].lname = lower + off;
        hs[i].nlen = h->nlen;
        hs[i].idx = i;
        off += h->nlen;
    }
    qsort(hs, rq->nheaders, sizeof(*hs), cmp_hsort);
    for (size_t i = 0; i < rq->nheaders; i++) {
        const struct sigv4_header *h = &rq->headers[hs[i].idx];
        bool first = i == 0 || cmp_bytes(hs[i].lname, hs[i].nlen,
                                         hs[i - 1].lname, hs[i - 1].nlen) != 0;

        if (first) {
            if (i > 0) {
                put_c(w, '\n');
                put_c(names, ';');
            }
            put(w, hs[i].lname, hs[i].nlen);
            put_c(w, ':');
            put(names, hs[i].lname, hs[i].nlen);
        } else {
            put_c(w, ',');
        }
        put_trimmed(w, h->value, h->vlen);
    }
    if (rq->nheaders > 0) {
        put_c(w, '\n');
    }
}

char *
sigv4_canonical_request(const struct sigv4_request *rq, char **signed_names)
{
    size_t cap, hlen = 0;
    struct wbuf w = {NULL, 0}, names = {NULL, 0};
    struct hsort *hs = NULL;
    char *lower = NULL;
    const char *hash = rq->payload_hash != NULL ? rq->payload_hash : "";

    if (!headers_ok(rq)) {
        return NULL;
    }
    for (size_t i = 0; i < rq->nheaders; i++) {
        hlen += 2 * rq->headers[i].nlen + rq->headers[i].vlen + 3;
    }
    cap = rq->mlen + 3 * rq->plen + 3 * rq->qlen + hlen + strlen(hash) + 16;
    w.p = malloc(cap);
    names.p = malloc(hlen + 1);
    hs = malloc((rq->nheaders + 1) * sizeof(*hs));
    lower = malloc(hlen + 1);
    if (w.p == NULL || names.p == NULL || hs == NULL || lower == NULL) {
        goto fail;
    }
    put(&w, rq->method, rq->mlen);
    put_c(&w, '\n');
    put_uri(&w, rq->path, rq->plen, rq->s3);
    put_c(&w, '\n');
    if (!put_query(&w, rq->query, rq->qlen)) {
        goto fail;
    }
    put_c(&w, '\n');
    put_headers(&w, &names, rq, hs, lower);
    put_c(&w, '\n');
    put(&w, names.p, names.n);
    put_c(&w, '\n');
    put(&w, hash, strlen(hash));
    put_c(&w, '\0');
    names.p[names.n] = '\0';
    free(hs);
    free(lower);
    if (signed_names != NULL) {
        *signed_names = names.p;
    } else {
        free(names.p);
    }
    return w.p;
fail:
    free(w.p);
    free(names.p);
    free(hs);
    free(lower);
    return NULL;
}

static bool
date_ok(const char *d)
{
    if (strlen(d) != SIGV4_DATE_LEN || d[8] != 'T' || d[15] != 'Z') {
        return false;
    }
    for (int i = 0; i < 15; i++) {
        if (i != 8 && (d[i] < '0' || d[i] > '9')) {
            return false;
        }
    }
    return true;
}

static bool
hmac(const unsigned char *key, size_t klen, const char *msg, size_t mlen,
     unsigned char out[32])
{
    unsigned int n = 0;

    return HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, mlen,
                out, &n) != NULL &&
           n == 32;
}

static void
to_hex(const unsigned char *b, size_t n, char *out)
{
    ascii_hex(b, n, out);
    out[2 * n] = '\0';
}

/* The signing key: HMAC chain over the date, region, service and
 * "aws4_request", starting from "AWS4" + secret. */
static bool
signing_key(const struct sigv4_key *key, const char *date, unsigned char k[32])
{
    size_t slen = strlen(key->secret);
    unsigned char *first = malloc(slen + 4);
    bool ok;

    if (first == NULL) {
        return false;
    }
    memcpy(first, "AWS4", 4);
    memcpy(first + 4, key->secret, slen);
    ok = hmac(first, slen + 4, date, 8, k) &&
         hmac(k, 32, key->region, strlen(key->region), k) &&
         hmac(k, 32, key->service, strlen(key->service), k) &&
         hmac(k, 32, "aws4_request", 12, k);
    OPENSSL_cleanse(first, slen + 4);
    free(first);
    return ok;
}

bool
sigv4_signature(const char *creq, const char *date, const struct sigv4_key *key,
                char *sig)
{
    unsigned char digest[32], k[32];
    char hex[65];
    char *sts;
    int n;
    bool ok;

    if (!date_ok(date) ||
        SHA256((const unsigned char *)creq, strlen(creq), digest) == NULL) {
        return false;
    }
    to_hex(digest, 32, hex);
    n = snprintf(NULL, 0, "AWS4-HMAC-SHA256\n%s\n%.8s/%s/%s/aws4_request\n%s",
                 date, date, key->region, key->service, hex);
    sts = malloc((size_t)n + 1);
    if (sts == NULL) {
        return false;
    }
    snprintf(sts, (size_t)n + 1,
             "AWS4-HMAC-SHA256\n%s\n%.8s/%s/%s/aws4_request\n%s", date, date,
             key->region, key->service, hex);
    ok = signing_key(key, date, k) && hmac(k, 32, sts, (size_t)n, digest);
    OPENSSL_cleanse(k, sizeof(k));
    free(sts);
    if (ok) {
        to_hex(digest, 32, sig);
    }
    return ok;
}

size_t
sigv4_authorization(const struct sigv4_request *rq, const char *date,
                    const struct sigv4_key *key, char *out, size_t cap)
{
    char *names = NULL;
    char *creq = sigv4_canonical_request(rq, &names);
    char sig[SIGV4_SIG_LEN + 1];
    int n = -1;

    if (creq != NULL && sigv4_signature(creq, date, key, sig)) {
        n = snprintf(out, cap,
                     "AWS4-HMAC-SHA256 Credential=%s/%.8s/%s/%s/aws4_request, "
                     "SignedHeaders=%s, Signature=%s",
                     key->key_id, date, key->region, key->service, names, sig);
    }
    free(creq);
    free(names);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

void
sigv4_date(long long t, char *out)
{
    time_t tt = (time_t)t;
    struct tm tm;

    gmtime_r(&tt, &tm);
    strftime(out, SIGV4_DATE_LEN + 1, "%Y%m%dT%H%M%SZ", &tm);
}

/* ---- the shared-credentials file --------------------------------- */

static void
trim(const char **s, size_t *n)
{
    while (*n > 0 && (is_ws((*s)[*n - 1]) || (*s)[*n - 1] == '\r')) {
        (*n)--;
    }
    while (*n > 0 && is_ws(**s)) {
        (*s)++;
        (*n)--;
    }
}

bool
sigv4_cred_ok(const char *v, size_t n)
{
    if (n == 0 || n > SIGV4_CRED_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (v[i] <= ' ' || v[i] > '~') {
            return false;
        }
    }
    return true;
}

static char **
cred_field(struct sigv4_creds *c, const char *k, size_t n)
{
    static const char *const keys[] = {
        "aws_access_key_id", "aws_secret_access_key", "aws_session_token"};
    char **fields[] = {&c->key_id, &c->secret, &c->session};

    for (size_t i = 0; i < 3; i++) {
        if (strlen(keys[i]) == n && memcmp(k, keys[i], n) == 0) {
            return fields[i];
        }
    }
    return NULL;
}

/* One "key = value" line of the wanted profile into c. */
static const char *
take_value(struct sigv4_creds *c, const char *line, size_t n)
{
    const char *eq = memchr(line, '=', n);
    const char *k = line, *v;
    size_t kn, vn;
    char **f;

    if (eq == NULL) {
        return "a line is neither [profile], key = value nor a comment";
    }
    kn = (size_t)(eq - line);
    v = eq + 1;
    vn = n - kn - 1;
    trim(&k, &kn);
    trim(&v, &vn);
    f = cred_field(c, k, kn);
    if (f == NULL) {
        return NULL; /* region, output, ...: not ours */
    }
    if (!sigv4_cred_ok(v, vn)) {
        return "a credential is empty, too long or not printable ASCII";
    }
    if (*f != NULL) {
        OPENSSL_cleanse(*f, strlen(*f));
        free(*f);
    }
    *f = strndup(v, vn);
    return *f == NULL ? "out of memory" : NULL;
}

/* Whether line[0..n) is the header of profile ("[name]", or "[profile
 * name]" as the AWS config file writes it). *header: it is a header. */
static const char *
section(const char *line, size_t n, const char *profile, bool *header,
        bool *mine)
{
    const char *s = line + 1;
    size_t sn;

    *header = n > 0 && line[0] == '[';
    if (!*header) {
        return NULL;
    }
    if (line[n - 1] != ']') {
        return "a [profile] line has no ']'";
    }
    sn = n - 2;
    trim(&s, &sn);
    if (sn > 8 && memcmp(s, "profile ", 8) == 0) {
        s += 8;
        sn -= 8;
        trim(&s, &sn);
    }
    *mine = sn == strlen(profile) && memcmp(s, profile, sn) == 0;
    return NULL;
}

const char *
sigv4_creds_parse(const char *text, size_t len, const char *profile,
                  struct sigv4_creds *out)
{
    const char *p = text, *end = text + len, *msg = NULL;
    bool mine = false, found = false;

    memset(out, 0, sizeof(*out));
    while (p < end && msg == NULL) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *line = p;
        size_t n = (nl != NULL ? nl : end) - p;
        bool header;

        p = nl != NULL ? nl + 1 : end;
        trim(&line, &n);
        if (n == 0 || line[0] == '#' || line[0] == ';') {
            continue;
        }
        if (memchr(line, '\0', n) != NULL) {
            msg = "the file holds a NUL byte";
            break;
        }
        msg = section(line, n, profile, &header, &mine);
        if (header) {
            found |= mine;
            continue;
        }
        if (msg == NULL && mine) {
            msg = take_value(out, line, n);
        } else if (msg == NULL && memchr(line, '=', n) == NULL) {
            msg = "a line is neither [profile], key = value nor a comment";
        }
    }
    if (msg == NULL && !found) {
        msg = "the file has no section for the profile";
    } else if (msg == NULL && out->key_id == NULL) {
        msg = "the profile has no aws_access_key_id";
    } else if (msg == NULL && out->secret == NULL) {
        msg = "the profile has no aws_secret_access_key";
    }
    if (msg != NULL) {
        sigv4_creds_free(out);
    }
    return msg;
}

void
sigv4_creds_free(struct sigv4_creds *c)
{
    char *f[] = {c->key_id, c->secret, c->session};

    for (size_t i = 0; i < 3; i++) {
        if (f[i] != NULL) {
            OPENSSL_cleanse(f[i], strlen(f[i]));
            free(f[i]);
        }
    }
    memset(c, 0, sizeof(*c));
}
