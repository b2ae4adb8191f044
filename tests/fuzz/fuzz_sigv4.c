/* fuzz_sigv4.c: libFuzzer target for policies/sigv4.c. The input is a
 * path, a query and header lines (split at LF); the canonical request
 * built from them must be well formed (only UriEncode output in the URI
 * and query lines, one line per distinct header), and canonicalizing its
 * own URI and query again must give them back (the forms are fixed
 * points). The whole input is also read as a shared-credentials file:
 * what is accepted is non-empty printable ASCII found in the input.
 * Read a third way (method, path, query, payload hash, key id, secret,
 * region, service, then headers, one a line), the Authorization value
 * with room for it is exactly its parts, with one byte less room it is
 * refused whole (0), never cut; run.sh gives inputs up to 32 KiB, so
 * each field reaches thousands of bytes. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../policies/sigv4.h"
#include "fuzz.h"

/* Only what UriEncode writes, plus the given extra characters. */
static bool
encoded_only(const char *s, size_t n, const char *extra)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c == '%') {
            if (i + 2 >= n || s[i + 1] == '\0' || s[i + 2] == '\0' ||
                strchr("0123456789ABCDEF", s[i + 1]) == NULL ||
                strchr("0123456789ABCDEF", s[i + 2]) == NULL) {
                return false;
            }
            i += 2;
            continue;
        }
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              (c >= '0' && c <= '9') || strchr("-._~", c) != NULL ||
              (c != 0 && strchr(extra, c) != NULL))) {
            return false;
        }
    }
    return true;
}

/* The canonical URI and query lines of creq. */
static void
lines(const char *creq, const char **uri, size_t *ulen, const char **q,
      size_t *qlen)
{
    const char *a = strchr(creq, '\n') + 1;
    const char *b = strchr(a, '\n');

    *uri = a;
    *ulen = (size_t)(b - a);
    *q = b + 1;
    *qlen = (size_t)(strchr(b + 1, '\n') - (b + 1));
}

static void
fixed_point(const char *uri, size_t ulen, const char *q, size_t qlen, bool s3)
{
    struct sigv4_request rq = {
        "GET", 3, uri, ulen, q, qlen, NULL, 0, "UNSIGNED-PAYLOAD", true};
    char *again = sigv4_canonical_request(&rq, NULL);
    const char *u2, *q2;
    size_t u2len, q2len;

    if (again == NULL) {
        return; /* out of memory, or over the parameter bound */
    }
    lines(again, &u2, &u2len, &q2, &q2len);
    if (s3) {
        check(u2len == ulen && memcmp(u2, uri, ulen) == 0,
              "the canonical URI is not a fixed point");
    }
    check(q2len == qlen && memcmp(q2, q, qlen) == 0,
          "the canonical query is not a fixed point");
    free(again);
}

static void
fuzz_request(const char *s, size_t size, bool s3)
{
    struct sigv4_header hs[16];
    struct sigv4_request rq = {
        "PUT", 3, NULL, 0, "", 0, hs, 0, "UNSIGNED-PAYLOAD", s3};
    const char *p = s, *end = s + size, *uri, *q;
    size_t field = 0, ulen, qlen;
    char *names = NULL, *creq;

    while (p <= end && field < 18) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = (size_t)((nl != NULL ? nl : end) - p);

        if (field == 0) {
            rq.path = p;
            rq.plen = n;
        } else if (field == 1) {
            rq.query = p;
            rq.qlen = n;
        } else {
            const char *colon = memchr(p, ':', n);
            size_t k = colon != NULL ? (size_t)(colon - p) : n;

            hs[rq.nheaders++] =
                (struct sigv4_header){p, k, colon != NULL ? colon + 1 : "",
                                      colon != NULL ? n - k - 1 : 0};
        }
        field++;
        if (nl == NULL) {
            break;
        }
        p = nl + 1;
    }
    if (rq.path == NULL) {
        rq.path = "";
    }
    creq = sigv4_canonical_request(&rq, &names);
    if (creq == NULL) {
        return;
    }
    lines(creq, &uri, &ulen, &q, &qlen);
    check(ulen > 0 && (uri[0] == '/') == (rq.plen == 0 || rq.path[0] == '/'),
          "the canonical URI does not start as the path");
    check(encoded_only(uri, ulen, "/"), "the canonical URI is not encoded");
    check(encoded_only(q, qlen, "=&"), "the canonical query is not encoded");
    check(strchr(names, '\n') == NULL, "a signed name has a line break");
    fixed_point(uri, ulen, q, qlen, s3);
    {
        struct sigv4_key key = {"AKID", "secret", "us-east-1", "s3"};
        char sig[SIGV4_SIG_LEN + 1];

        check(sigv4_signature(creq, "20150830T123600Z", &key, sig),
              "a canonical request could not be signed");
        check(strlen(sig) == SIGV4_SIG_LEN, "the signature is not 64 hex");
    }
    free(creq);
    free(names);
}

/* The input's lines: up to max, each a slice into s. */
static size_t
split(const char *s, size_t size, const char **at, size_t *len, size_t max)
{
    const char *p = s, *end = s + size;
    size_t n = 0;

    while (n < max) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));

        at[n] = p;
        len[n] = (size_t)((nl != NULL ? nl : end) - p);
        n++;
        if (nl == NULL) {
            break;
        }
        p = nl + 1;
    }
    return n;
}

/* The Authorization value's text before its signature (malloc). */
static char *
authorization_head(const struct sigv4_key *key, const char *date,
                   const char *names)
{
    char *head;
    int w = asprintf(&head,
                     "AWS4-HMAC-SHA256 Credential=%s/%.8s/%s/%s/aws4_request, "
                     "SignedHeaders=%s, Signature=",
                     key->key_id, date, key->region, key->service, names);

    check(w > 0, "out of memory");
    return head;
}

/* With exactly the room it needs the value is its parts and 64 hex;
 * with a byte less it is refused (0), never cut. Each buffer is
 * allocated at its size, so ASan sees a write past the room. */
static void
authorization_fits(const struct sigv4_request *rq, const char *date,
                   const struct sigv4_key *key, const char *names)
{
    char *head = authorization_head(key, date, names);
    size_t hl = strlen(head), need = hl + SIGV4_SIG_LEN + 1;
    char *out = malloc(need), *tight = malloc(need - 1);
    size_t got;

    check(out != NULL && tight != NULL, "out of memory");
    got = sigv4_authorization(rq, date, key, out, need);
    check(got == need - 1 && strlen(out) == got, "a request was not signed");
    check(memcmp(out, head, hl) == 0, "the Authorization is not its parts");
    for (size_t i = hl; i < got; i++) {
        check(strchr("0123456789abcdef", out[i]) != NULL && out[i] != '\0',
              "the signature is not 64 hex");
    }
    check(sigv4_authorization(rq, date, key, tight, need - 1) == 0,
          "an Authorization cut to fit its room");
    free(head);
    free(out);
    free(tight);
}

static void
fuzz_authorization(const char *s, size_t size)
{
    const char *at[8 + 16];
    size_t len[8 + 16], n = split(s, size, at, len, 8 + 16);
    struct sigv4_header hs[16];
    char *f[4];
    const char *date = "20150830T123600Z";
    char *names = NULL, *creq;
    struct sigv4_request rq;
    struct sigv4_key key;

    if (n < 8) {
        return;
    }
    for (size_t i = 0; i < 4; i++) {
        f[i] = strndup(at[4 + i], len[4 + i]);
        check(f[i] != NULL, "out of memory");
    }
    for (size_t i = 8; i < n; i++) {
        const char *colon = memchr(at[i], ':', len[i]);
        size_t k = colon != NULL ? (size_t)(colon - at[i]) : len[i];

        hs[i - 8] =
            (struct sigv4_header){at[i], k, colon != NULL ? colon + 1 : "",
                                  colon != NULL ? len[i] - k - 1 : 0};
    }
    {
        char *hash = strndup(at[3], len[3]);

        check(hash != NULL, "out of memory");
        rq = (struct sigv4_request){at[0],  len[0], at[1], len[1], at[2],
                                    len[2], hs,     n - 8, hash,   true};
        key = (struct sigv4_key){f[0], f[1], f[2], f[3]};
        creq = sigv4_canonical_request(&rq, &names);
        if (creq == NULL) {
            char small[8];

            check(sigv4_authorization(&rq, date, &key, small, sizeof(small)) ==
                      0,
                  "signed what has no canonical request");
        } else {
            authorization_fits(&rq, date, &key, names);
        }
        free(creq);
        free(names);
        free(hash);
    }
    for (size_t i = 0; i < 4; i++) {
        free(f[i]);
    }
}

static void
fuzz_creds(const char *s, size_t size)
{
    struct sigv4_creds c;
    const char *msg = sigv4_creds_parse(s, size, "default", &c);

    if (msg != NULL) {
        check(c.key_id == NULL && c.secret == NULL && c.session == NULL,
              "a refused file left credentials behind");
        return;
    }
    check(c.key_id != NULL && c.secret != NULL, "credentials missing");
    check(c.key_id[0] != '\0' && c.secret[0] != '\0', "a credential is empty");
    check(memmem(s, size, c.key_id, strlen(c.key_id)) != NULL &&
              memmem(s, size, c.secret, strlen(c.secret)) != NULL,
          "a credential is not in the file");
    sigv4_creds_free(&c);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;

    fuzz_request(s, size, true);
    fuzz_request(s, size, false);
    fuzz_creds(s, size);
    fuzz_authorization(s, size);
    return 0;
}
