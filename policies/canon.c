/* canon.c: canonical request paths and resource names (canon.h has the
 * rules). Two passes: the first refuses what no rule can make
 * unambiguous, the second writes the canonical form. */
#include "canon.h"

#include <string.h>

#include "ascii.h"

#include "utf8.h"

/* The byte at raw[*i], decoded: a %XX escape or the byte itself; *i
 * moves past it and *esc says which. -1 for a '%' without two hex
 * digits. */
static int
next_byte(const char *raw, size_t len, size_t *i, bool *esc)
{
    size_t k = *i;
    int hi, lo;

    if (raw[k] != '%') {
        *esc = false;
        *i = k + 1;
        return (unsigned char)raw[k];
    }
    if (len - k < 3 || (hi = ascii_hexval(raw[k + 1])) < 0 ||
        (lo = ascii_hexval(raw[k + 2])) < 0) {
        return -1;
    }
    *esc = true;
    *i = k + 3;
    return hi * 16 + lo;
}

/* The first pass over all of raw, the parts a ';' drops included (a
 * backend that does not drop them reads them): escapes well formed, no
 * encoded slash in a path, decoded bytes UTF-8 without control
 * characters. NULL when clean, else the reason. */
static const char *
check_bytes(const char *raw, size_t len, bool name)
{
    size_t i = 0;

    while (i < len) {
        char seq[4];
        size_t at[5];
        size_t n = 0, k;
        bool esc;

        /* The common case first: a raw printable ASCII byte. */
        if (raw[i] > 0x20 && raw[i] < 0x7f && raw[i] != '%') {
            i++;
            continue;
        }
        /* Decode up to one UTF-8 sequence's worth of bytes. */
        at[0] = i;
        do {
            int b = next_byte(raw, len, &i, &esc);

            if (b < 0) {
                return "a '%' must be followed by two hex digits";
            }
            if (b == '/' && esc && !name) {
                return "an encoded slash (%2F) in a path: backends read it "
                       "in different ways";
            }
            if (b < 0x20 || b == 0x7f) {
                return "a control character";
            }
            seq[n++] = (char)b;
            at[n] = i;
        } while (n < 4 && (unsigned char)seq[0] >= 0x80 && i < len);
        k = utf8_seq(seq, n);
        if (k == 0) {
            return "the decoded bytes are not UTF-8";
        }
        i = at[k];
    }
    return NULL;
}

/* The output being built: out[0..len), segments counted in nseg, base
 * bytes ("/" for a path) before the first one. */
struct canon_out {
    char *p;
    size_t cap;
    size_t len;
    size_t base;
    size_t nseg;
};

static bool
put(struct canon_out *o, char ch)
{
    if (o->len + 1 >= o->cap) {
        return false;
    }
    o->p[o->len++] = ch;
    return true;
}

/* The segment just written from start (its separator included) ends:
 * keep it, drop it (empty, "."), or drop it and the one before (".."). */
static const char *
end_segment(struct canon_out *o, size_t start)
{
    size_t s = start + (o->nseg > 0 ? 1 : 0);
    size_t n = o->len - s;
    const char *seg = o->p + s;

    if (n == 0 || (n == 1 && seg[0] == '.')) {
        o->len = start;
        return NULL;
    }
    if (n == 2 && seg[0] == '.' && seg[1] == '.') {
        o->len = start;
        if (o->nseg == 0) {
            return "'..' goes above the root";
        }
        while (o->len > o->base && o->p[o->len - 1] != '/') {
            o->len--;
        }
        if (o->len > o->base) {
            o->len--; /* the separator before the removed segment */
        }
        o->nseg--;
        return NULL;
    }
    o->nseg++;
    return NULL;
}

/* A byte the second pass copies as it is: not a separator, an escape,
 * a parameter's start or a '+'. */
static bool
plain(char c)
{
    return c != '/' && c != '%' && c != ';' && c != '+';
}

/* The second pass: raw (checked) into o, segment by segment. */
static const char *
build(const char *raw, size_t len, bool name, struct canon_out *o)
{
    const char *too_long = "the canonical form is too long";
    size_t i = 0;

    while (i <= len) {
        size_t start = o->len;
        bool cut = false;
        const char *why;

        if (o->nseg > 0 && !put(o, '/')) {
            return too_long;
        }
        while (i < len) {
            bool esc;
            int b;

            if (raw[i] == '/') {
                break;
            }
            if (!cut && plain(raw[i])) {
                /* The common case: a run of bytes that stand for
                 * themselves, copied at once. */
                size_t n = 1;

                while (i + n < len && plain(raw[i + n])) {
                    n++;
                }
                if (o->len + n >= o->cap) {
                    return too_long;
                }
                memcpy(o->p + o->len, raw + i, n);
                o->len += n;
                i += n;
                continue;
            }
            b = next_byte(raw, len, &i, &esc);
            if (b == '/' && name) {
                break; /* %2F in a name: a separator like '/' */
            }
            if (b == ';') {
                cut = true;
            }
            if (cut) {
                continue;
            }
            if (!put(o, b == '+' ? ' ' : (char)b)) {
                return too_long;
            }
        }
        if ((why = end_segment(o, start)) != NULL) {
            return why;
        }
        if (i < len && raw[i] == '/') {
            i++;
        } else if (i >= len) {
            break;
        }
    }
    return NULL;
}

static bool
canon(const char *raw, size_t len, bool name, char *out, size_t outcap,
      size_t *outlen, const char **why)
{
    struct canon_out o = {.p = out, .cap = outcap};

    *outlen = 0;
    if (outcap < 2) {
        *why = "the canonical form is too long";
        return false;
    }
    out[0] = '\0';
    if (!name && (len == 0 || raw[0] != '/')) {
        *why = "a path must start with '/'";
        return false;
    }
    if ((*why = check_bytes(raw, len, name)) != NULL) {
        return false;
    }
    if (!name) {
        out[0] = '/';
        o.len = o.base = 1;
    }
    if ((*why = build(raw, len, name, &o)) != NULL) {
        out[0] = '\0';
        return false;
    }
    if (o.len == 0) {
        *why = "an empty name";
        return false;
    }
    out[o.len] = '\0';
    *outlen = o.len;
    return true;
}

bool
canon_path(const char *raw, size_t len, char *out, size_t outcap,
           size_t *outlen, const char **why)
{
    return canon(raw, len, false, out, outcap, outlen, why);
}

bool
canon_name(const char *raw, size_t len, char *out, size_t outcap,
           size_t *outlen, const char **why)
{
    return canon(raw, len, true, out, outcap, outlen, why);
}
