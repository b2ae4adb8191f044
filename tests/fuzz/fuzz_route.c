/* fuzz_route.c: libFuzzer target for path templates, resource templates,
 * matching and expansion. The input is "PATH_TEMPLATE\nRESOURCE\nPATH";
 * missing parts are empty. The path is matched as it is and, as the
 * daemon does, in canonical form; there the resource name is canonical
 * (canon_name reads it, escaped, as itself). Any violated invariant
 * aborts. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../policies/canon.h"
#include "../../policies/route.h"
#include "fuzz.h"

#define SEP '\n'

/* The next part of data[*off..size) up to SEP, as an exact-size heap copy
 * plus a NUL (so ASan sees reads past it). Caller frees. */
static char *
next_part(const uint8_t *data, size_t size, size_t *off, size_t *len)
{
    const uint8_t *p = data + *off;
    size_t left = size - *off;
    const uint8_t *sep = left > 0 ? memchr(p, SEP, left) : NULL;
    size_t n = sep != NULL ? (size_t)(sep - p) : left;
    char *s = malloc(n + 1);

    if (s == NULL) {
        abort();
    }
    memcpy(s, p, n);
    s[n] = '\0';
    *off += sep != NULL ? n + 1 : n;
    *len = n;
    return s;
}

/* Expand into an exact-size heap buffer of outlen bytes and compare with
 * the concatenation of the segments. */
static void
expand_check(const struct tm_rtmpl *r, const struct tm_slice *caps,
             size_t outlen)
{
    char *out = malloc(outlen);
    size_t want = 0;
    size_t n;

    if (out == NULL) {
        abort();
    }
    for (size_t i = 0; i < r->nsegs; i++) {
        want += r->segs[i].lit != NULL ? r->segs[i].lit_len
                                       : caps[r->segs[i].capture].len;
    }
    n = rtmpl_expand(r, caps, out, outlen);
    check(n < outlen, "expanded length not below outlen");
    if (want == 0 || want >= outlen) {
        check(n == 0, "expansion that cannot fit was not refused");
    } else {
        size_t pos = 0;

        check(n == want, "expanded length is not the segments' sum");
        check(out[n] == '\0', "expansion not NUL-terminated");
        for (size_t i = 0; i < r->nsegs; i++) {
            const char *p = r->segs[i].lit;
            size_t len = r->segs[i].lit_len;

            if (p == NULL) {
                p = caps[r->segs[i].capture].p;
                len = caps[r->segs[i].capture].len;
            }
            check(len == 0 || memcmp(out + pos, p, len) == 0,
                  "expansion differs from the segments");
            pos += len;
        }
    }
    free(out);
}

static void
match_check(const struct tm_tmpl *t, const char *path, size_t len,
            const struct tm_slice *caps)
{
    size_t pos = 1;

    check(len > 0 && path[0] == '/', "matched a path without '/'");
    for (size_t i = 0; i < t->nsegs; i++) {
        const struct tm_tmpl_seg *s = &t->segs[i];
        const struct tm_slice *c;

        if (s->lit != NULL) {
            check(pos + s->lit_len <= len &&
                      memcmp(path + pos, s->lit, s->lit_len) == 0,
                  "literal segment does not match");
            pos += s->lit_len + 1;
            continue;
        }
        check(s->capture >= 0 && (size_t)s->capture < t->nnames,
              "capture index out of range");
        c = &caps[s->capture];
        check(c->p == path + pos && c->len > 0 && pos + c->len <= len,
              "capture slice out of place");
        if (s->rest) {
            check(pos + c->len == len, "rest capture short of the end");
            return;
        }
        check(memchr(c->p, '/', c->len) == NULL, "capture holds a '/'");
        pos += c->len + 1;
    }
    check(pos == len + 1, "match stops short of the end of the path");
}

/* The daemon's way: match the canonical path; the expansion must be a
 * canonical name. */
static void
canonical_check(const struct tm_tmpl *t, const struct tm_rtmpl *r,
                const char *path, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    struct tm_slice caps[TM_MAX_CAPTURES];
    char *cpath = malloc(len + 1);
    char res[TM_RESOURCE_MAX + 1], back[TM_RESOURCE_MAX + 1];
    char esc[3 * TM_RESOURCE_MAX + 1];
    size_t clen, n, elen = 0, blen;
    const char *why;

    if (cpath == NULL) {
        abort();
    }
    if (canon_path(path, len, cpath, len + 1, &clen, &why) &&
        tmpl_match(t, cpath, clen, caps)) {
        match_check(t, cpath, clen, caps);
        n = rtmpl_expand(r, caps, res, sizeof(res));
        for (size_t i = 0; i < n; i++) {
            unsigned char b = (unsigned char)res[i];
            if (b == '/' || (b >= 'a' && b <= 'z') || (b >= '0' && b <= '9')) {
                esc[elen++] = (char)b;
            } else {
                esc[elen++] = '%';
                esc[elen++] = hex[b >> 4];
                esc[elen++] = hex[b & 15];
            }
        }
        check(n == 0 ||
                  (canon_name(esc, elen, back, sizeof(back), &blen, &why) &&
                   blen == n && memcmp(back, res, n) == 0),
              "a resource expanded from a canonical path is not canonical");
    }
    free(cpath);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tm_tmpl t;
    struct tm_rtmpl r;
    struct tm_slice caps[TM_MAX_CAPTURES];
    char err[128] = "";
    size_t off = 0;
    size_t tlen;
    size_t rlen;
    size_t plen = 0;
    char *tsrc = next_part(data, size, &off, &tlen);
    char *rsrc = next_part(data, size, &off, &rlen);
    char *path;

    /* The path is the rest of the input, separators and NULs included,
     * in an exact-size copy. */
    plen = size - off;
    path = malloc(plen > 0 ? plen : 1);
    if (path == NULL) {
        abort();
    }
    if (plen > 0) {
        memcpy(path, data + off, plen);
    }

    if (!tmpl_compile(&t, tsrc, err, sizeof(err))) {
        check(err[0] != '\0', "path template refused without a message");
        check(t.segs == NULL && t.nsegs == 0 && t.nnames == 0,
              "refused path template not released");
        goto out;
    }
    check(tsrc[0] == '/', "path template without a leading '/'");
    check(t.nsegs > 0, "compiled path template without segments");
    check(t.nnames <= TM_MAX_CAPTURES, "too many captures");
    err[0] = '\0';
    if (!rtmpl_compile(&r, rsrc, &t, err, sizeof(err))) {
        check(err[0] != '\0', "resource template refused without a message");
        check(r.segs == NULL && r.nsegs == 0,
              "refused resource template not released");
        tmpl_free(&t);
        goto out;
    }
    check(r.nsegs > 0, "compiled resource template without segments");
    for (size_t i = 0; i < r.nsegs; i++) {
        check(r.segs[i].lit != NULL || (r.segs[i].capture >= 0 &&
                                        (size_t)r.segs[i].capture < t.nnames),
              "resource segment names no capture");
    }
    if (tmpl_match(&t, path, plen, caps)) {
        match_check(&t, path, plen, caps);
        expand_check(&r, caps, TM_RESOURCE_MAX + 1);
        /* A small buffer, sized by the input, to exercise the limits. */
        expand_check(&r, caps, 1 + (size_t)(tlen + rlen + plen) % 32);
    }
    canonical_check(&t, &r, path, plen);
    rtmpl_free(&r);
    tmpl_free(&t);
out:
    free(tsrc);
    free(rsrc);
    free(path);
    return 0;
}
