/* s3name.c: where an S3 server reads a request's bucket (from the Host or
 * the path), and what a CreateMultipartUpload answer binds its upload id
 * to. Pure: no I/O, no globals, no allocation. */
#include "s3name.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "ascii.h"
#include "canon.h"

/* AWS's endpoint forms ("aws" in bucket_endpoints): s3.amazonaws.com, the
 * regional s3.<region> and s3-<region>, dual-stack and Transfer
 * Acceleration. A Host below one of them names a bucket at AWS and at
 * s3rver alike. */
static const char *const aws_endpoints[] = {
    "s3.amazonaws.com",
    "s3.*.amazonaws.com",
    "s3-*.amazonaws.com",
    "s3.dualstack.*.amazonaws.com",
    "s3-accelerate.dualstack.amazonaws.com",
    NULL,
};

#define MAX_LABELS 128 /* a name of 253 bytes has at most 127 labels */

/* ---- the endpoints list ---------------------------------------------- */

/* The next word of *p (separated by spaces or tabs); false at the end. */
static bool
next_word(const char **p, struct tm_slice *w)
{
    const char *s = *p + strspn(*p, " \t");

    if (*s == '\0') {
        *p = s;
        return false;
    }
    w->p = s;
    w->len = strcspn(s, " \t");
    *p = s + w->len;
    return true;
}

static bool
pattern_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

/* Whether w is a name of non-empty labels of pattern_char, each with at
 * most one '*'. */
static bool
pattern_valid(struct tm_slice w)
{
    size_t label = 0, stars = 0;

    if (w.len == 0 || w.len > S3_BUCKET_MAX) {
        return false;
    }
    for (size_t i = 0; i <= w.len; i++) {
        if (i == w.len || w.p[i] == '.') {
            if (label == 0) {
                return false;
            }
            label = stars = 0;
        } else if (w.p[i] == '*') {
            if (++stars > 1) {
                return false;
            }
            label++;
        } else if (pattern_char(w.p[i])) {
            label++;
        } else {
            return false;
        }
    }
    return true;
}

bool
s3_endpoints_valid(const char *list, const char **why)
{
    const char *p = list;
    struct tm_slice w;

    while (next_word(&p, &w)) {
        struct tm_slice name = w;
        if (w.p[0] == '=') {
            name.p++;
            name.len--;
        }
        if (!slice_eq(w, "aws") && !pattern_valid(name)) {
            *why = "must be aws or DNS names in lower case (letters, digits, "
                   "'-', '_'; one '*' a label at most), each maybe after '=', "
                   "separated by spaces";
            return false;
        }
    }
    return true;
}

/* ---- reading a Host --------------------------------------------------- */

/* The labels of a host name: starts[i] is where label i begins; the
 * label ends one byte before the next start (or at the name's end). */
struct labels {
    const char *name;
    size_t len;
    size_t n;
    size_t starts[MAX_LABELS];
};

static struct tm_slice
label_at(const struct labels *l, size_t i)
{
    size_t end = i + 1 < l->n ? l->starts[i + 1] - 1 : l->len;
    struct tm_slice s = {l->name + l->starts[i], end - l->starts[i]};

    return s;
}

/* Whether host label h matches pattern label p ('*': one or more
 * characters). */
static bool
label_matches(struct tm_slice p, struct tm_slice h)
{
    const char *star = memchr(p.p, '*', p.len);
    size_t pre, suf;

    if (star == NULL) {
        return p.len == h.len && memcmp(p.p, h.p, h.len) == 0;
    }
    pre = (size_t)(star - p.p);
    suf = p.len - pre - 1;
    return h.len > pre + suf && memcmp(h.p, p.p, pre) == 0 &&
           memcmp(h.p + h.len - suf, star + 1, suf) == 0;
}

/* How one endpoint pattern reads the host: 0 no match, 1 the endpoint
 * itself (path-style), 2 a bucket below it (in *bucket). */
static int
endpoint_reads(const struct labels *h, struct tm_slice pat,
               struct tm_slice *bucket)
{
    struct labels p = {pat.p, pat.len, 0, {0}};

    for (size_t i = 0; i < pat.len && p.n < MAX_LABELS; i++) {
        if (i == 0 || pat.p[i - 1] == '.') {
            p.starts[p.n++] = i;
        }
    }
    if (p.n > h->n) {
        return 0;
    }
    for (size_t i = 1; i <= p.n; i++) {
        if (!label_matches(label_at(&p, p.n - i), label_at(h, h->n - i))) {
            return 0;
        }
    }
    if (p.n == h->n) {
        return 1;
    }
    bucket->p = h->name;
    bucket->len = h->starts[h->n - p.n] - 1;
    return 2;
}

/* Fold one endpoint's reading into *kind and *bucket; false when it
 * disagrees with an earlier one. */
static bool
agree(int r, struct tm_slice b, int *kind, struct tm_slice *bucket)
{
    if (r == 0) {
        return true;
    }
    if (*kind == 0) {
        *kind = r;
        *bucket = b;
        return true;
    }
    return *kind == r && (r == 1 || (b.len == bucket->len));
}

/* Split a host name into labels; false when a label is empty (a
 * leading, trailing or doubled dot) or there are too many. */
static bool
split_labels(struct tm_slice host, struct labels *l)
{
    size_t start = 0;

    l->name = host.p;
    l->len = host.len;
    l->n = 0;
    for (size_t i = 0; i <= host.len; i++) {
        if (i < host.len && host.p[i] != '.') {
            continue;
        }
        if (i == start || l->n == MAX_LABELS) {
            return false;
        }
        l->starts[l->n++] = start;
        start = i + 1;
    }
    return true;
}

/* Whether host is a dotted-quad IPv4 address (no leading zeros). */
static bool
is_ipv4(const struct labels *l)
{
    if (l->n != 4) {
        return false;
    }
    for (size_t i = 0; i < 4; i++) {
        struct tm_slice s = label_at(l, i);
        unsigned v = 0;

        if (s.len > 3 || (s.len > 1 && s.p[0] == '0')) {
            return false;
        }
        for (size_t j = 0; j < s.len; j++) {
            if (s.p[j] < '0' || s.p[j] > '9') {
                return false;
            }
            v = v * 10 + (unsigned)(s.p[j] - '0');
        }
        if (v > 255) {
            return false;
        }
    }
    return true;
}

static enum s3_host
unclear(const char **why, const char *reason)
{
    *why = reason;
    return S3_HOST_UNCLEAR;
}

/* The host name of a Host value, without its port; false when it holds
 * a byte no S3 server reads the same way (upper case, an escape). */
static bool
host_name(struct tm_slice v, struct tm_slice *name, const char **why)
{
    const char *colon = memchr(v.p, ':', v.len);

    name->p = v.p;
    name->len = colon != NULL ? (size_t)(colon - v.p) : v.len;
    if (name->len == 0 || name->len > S3_BUCKET_MAX) {
        *why = "the Host is empty or too long to tell which S3 bucket it "
               "names";
        return false;
    }
    for (size_t i = 0; i < name->len; i++) {
        char c = name->p[i];
        if (c >= 'A' && c <= 'Z') {
            *why = "the Host has upper-case letters: S3 servers differ on "
                   "which bucket it names";
            return false;
        }
        if (!pattern_char(c) && c != '.') {
            *why = "the Host holds a character S3 servers read differently";
            return false;
        }
    }
    return true;
}

/* Whether host is "[IPv6 address]" with an optional ":digits" port: a
 * server that strips the brackets must not find a name there. */
static bool
ipv6_literal(struct tm_slice host)
{
    const char *end = memchr(host.p, ']', host.len);
    char addr[INET6_ADDRSTRLEN + 1];
    struct in6_addr a;
    size_t n, rest;

    if (end == NULL) {
        return false;
    }
    n = (size_t)(end - host.p) - 1;
    rest = host.len - (size_t)(end + 1 - host.p);
    if (n == 0 || n >= sizeof(addr)) {
        return false;
    }
    if (rest > 0 && end[1] != ':') {
        return false;
    }
    for (size_t i = 2; i <= rest; i++) {
        if (end[i] < '0' || end[i] > '9') {
            return false;
        }
    }
    memcpy(addr, host.p + 1, n);
    addr[n] = '\0';
    return inet_pton(AF_INET6, addr, &a) == 1;
}

enum s3_host
s3_host_read(struct tm_slice host, const char *endpoints,
             struct tm_slice *bucket, const char **why)
{
    struct tm_slice name, w, b = {NULL, 0};
    struct labels l;
    const char *p = endpoints;
    int kind = 0;
    bool ok = true;

    if (host.len > 0 && host.p[0] == '[') {
        return ipv6_literal(host)
                   ? S3_HOST_PATH
                   : unclear(why, "the Host is in brackets but is not an "
                                  "IPv6 address");
    }
    if (!host_name(host, &name, why)) {
        return S3_HOST_UNCLEAR;
    }
    if (!split_labels(name, &l)) {
        return unclear(why, "the Host has an empty label (a leading, "
                            "trailing or doubled dot)");
    }
    if (is_ipv4(&l) || slice_eq(name, "localhost")) {
        return S3_HOST_PATH;
    }
    while (ok && next_word(&p, &w)) {
        if (slice_eq(w, "aws")) {
            for (size_t i = 0; ok && aws_endpoints[i] != NULL; i++) {
                struct tm_slice a = {aws_endpoints[i],
                                     strlen(aws_endpoints[i])};
                ok = agree(endpoint_reads(&l, a, &b), b, &kind, bucket);
            }
        } else if (w.p[0] == '=') {
            /* the server's own name only: nothing below it is a bucket */
            struct tm_slice own = {w.p + 1, w.len - 1};
            ok = agree(endpoint_reads(&l, own, &b) == 1, b, &kind, bucket);
        } else {
            ok = agree(endpoint_reads(&l, w, &b), b, &kind, bucket);
        }
    }
    if (!ok) {
        return unclear(why, "the Host reads as two different S3 buckets "
                            "under two endpoints of bucket_endpoints");
    }
    if (kind == 0) {
        return unclear(why, "the Host could name an S3 bucket (CNAME "
                            "style): it is neither an IP address, "
                            "localhost, nor at or below a name of "
                            "bucket_endpoints");
    }
    return kind == 1 ? S3_HOST_PATH : S3_HOST_BUCKET;
}

/* ---- the CreateMultipartUpload answer --------------------------------- */

/* Append code point cp as UTF-8 to out (at *n, cap bytes); false when it
 * is no character or does not fit. */
static bool
put_utf8(unsigned long cp, char *out, size_t cap, size_t *n)
{
    unsigned char b[4];
    size_t k;

    if (cp == 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
        return false;
    }
    if (cp < 0x80) {
        b[0] = (unsigned char)cp;
        k = 1;
    } else if (cp < 0x800) {
        b[0] = (unsigned char)(0xc0 | cp >> 6);
        b[1] = (unsigned char)(0x80 | (cp & 0x3f));
        k = 2;
    } else if (cp < 0x10000) {
        b[0] = (unsigned char)(0xe0 | cp >> 12);
        b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (unsigned char)(0x80 | (cp & 0x3f));
        k = 3;
    } else {
        b[0] = (unsigned char)(0xf0 | cp >> 18);
        b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
        b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        b[3] = (unsigned char)(0x80 | (cp & 0x3f));
        k = 4;
    }
    if (cap - *n < k) {
        return false;
    }
    memcpy(out + *n, b, k);
    *n += k;
    return true;
}

/* The code point of a numeric reference "#123" or "#x7b" (without & and
 * ;), or 0 when malformed. */
static unsigned long
char_ref(const char *r, size_t len)
{
    unsigned long cp = 0;
    bool hex = len > 1 && r[1] == 'x';
    size_t i = hex ? 2 : 1;

    if (len <= i || len - i > 6) {
        return 0;
    }
    for (; i < len; i++) {
        int d = hex ? ascii_hexval(r[i])
                    : (r[i] >= '0' && r[i] <= '9' ? r[i] - '0' : -1);
        if (d < 0) {
            return 0;
        }
        cp = cp * (hex ? 16 : 10) + (unsigned long)d;
    }
    return cp;
}

/* One reference "&...;" at s (len bytes available) into out; the bytes
 * it takes in *used. false when malformed or out is full. */
static bool
decode_ref(const char *s, size_t len, char *out, size_t cap, size_t *n,
           size_t *used)
{
    static const struct {
        const char *name;
        char c;
    } named[] = {
        {"lt", '<'}, {"gt", '>'}, {"amp", '&'}, {"quot", '"'}, {"apos", '\''}};
    const char *semi = memchr(s, ';', len < 12 ? len : 12);
    size_t rl;

    if (semi == NULL) {
        return false;
    }
    rl = (size_t)(semi - s) - 1; /* between & and ; */
    *used = rl + 2;
    if (rl > 0 && s[1] == '#') {
        return put_utf8(char_ref(s + 1, rl), out, cap, n);
    }
    for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
        if (strlen(named[i].name) == rl &&
            memcmp(s + 1, named[i].name, rl) == 0) {
            if (*n == cap) {
                return false;
            }
            out[(*n)++] = named[i].c;
            return true;
        }
    }
    return false;
}

bool
s3_xml_text(struct tm_slice t, char *out, size_t cap, size_t *outlen)
{
    size_t n = 0;

    for (size_t i = 0; i < t.len;) {
        size_t used = 1;
        if (t.p[i] == '<') {
            return false;
        }
        if (t.p[i] == '&') {
            if (!decode_ref(t.p + i, t.len - i, out, cap, &n, &used)) {
                return false;
            }
        } else if (n == cap) {
            return false;
        } else {
            out[n++] = t.p[i];
        }
        i += used;
    }
    if (n == 0) {
        return false;
    }
    out[n] = '\0';
    *outlen = n;
    return true;
}

/* Find s (len bytes) in b; NULL when absent. */
static const char *
find(const char *b, size_t blen, const char *s)
{
    size_t len = strlen(s);

    return len <= blen ? memmem(b, blen, s, len) : NULL;
}

/* The text of the one element <name>...</name> of body, decoded into
 * out (cap bytes plus a NUL). false when it is missing, appears twice,
 * or its text is no plain text. */
static bool
element(const char *body, size_t len, const char *name, char *out, size_t cap,
        size_t *outlen)
{
    char open[32], close[32];
    const char *a, *z;

    snprintf(open, sizeof(open), "<%s>", name);
    snprintf(close, sizeof(close), "</%s>", name);
    a = find(body, len, open);
    if (a == NULL) {
        return false;
    }
    a += strlen(open);
    if (find(a, (size_t)(body + len - a), open) != NULL) {
        return false;
    }
    z = find(a, (size_t)(body + len - a), close);
    if (z == NULL) {
        return false;
    }
    return s3_xml_text((struct tm_slice){a, (size_t)(z - a)}, out, cap, outlen);
}

bool
s3_upload_parse(const char *body, size_t len, struct s3_upload *u)
{
    memset(u, 0, sizeof(*u));
    if (len > S3_ANSWER_MAX ||
        find(body, len, "<InitiateMultipartUploadResult") == NULL ||
        find(body, len, "<!") != NULL) {
        return false; /* comments, CDATA, declarations: no binding */
    }
    if (!element(body, len, "Bucket", u->bucket, S3_BUCKET_MAX,
                 &u->bucket_len) ||
        !element(body, len, "Key", u->key, S3_KEY_MAX, &u->key_len) ||
        !element(body, len, "UploadId", u->id, S3_UPLOAD_ID_MAX, &u->id_len)) {
        return false;
    }
    for (size_t i = 0; i < u->id_len; i++) {
        if (u->id[i] < 0x21 || u->id[i] > 0x7e) {
            return false;
        }
    }
    return true;
}

/* Append s percent-encoded (all but unreserved bytes and '/') to out. */
static bool
put_encoded(const char *s, size_t len, char *out, size_t cap, size_t *n)
{
    static const char hex[] = "0123456789ABCDEF";

    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                     (c >= '0' && c <= '9') || strchr("-._~/", c) != NULL;
        if (cap - *n < 3) {
            return false;
        }
        if (plain && c != '\0') {
            out[(*n)++] = (char)c;
        } else {
            out[(*n)++] = '%';
            out[(*n)++] = hex[c >> 4];
            out[(*n)++] = hex[c & 15];
        }
    }
    return true;
}

bool
s3_key_address(struct tm_slice bucket, const char *key, size_t klen, char *out,
               size_t outcap, size_t *outlen)
{
    char raw[3 * (S3_BUCKET_MAX + S3_KEY_MAX) + 8];
    size_t n = 0;
    const char *why;

    if (bucket.len == 0 || bucket.len > S3_BUCKET_MAX ||
        memchr(bucket.p, '/', bucket.len) != NULL) {
        return false;
    }
    raw[n++] = '/';
    if (!put_encoded(bucket.p, bucket.len, raw, sizeof(raw), &n)) {
        return false;
    }
    raw[n++] = '/';
    if (klen > S3_KEY_MAX || !put_encoded(key, klen, raw, sizeof(raw), &n)) {
        return false;
    }
    /* Still below the bucket: "../" may not climb out of it. */
    return canon_path(raw, n, out, outcap, outlen, &why) &&
           *outlen > bucket.len + 2 && memcmp(out, raw, bucket.len + 2) == 0;
}

bool
s3_upload_address(const struct s3_upload *u, char *out, size_t outcap,
                  size_t *outlen)
{
    struct tm_slice bucket = {u->bucket, u->bucket_len};

    return s3_key_address(bucket, u->key, u->key_len, out, outcap, outlen);
}
