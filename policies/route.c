/* route.c: compiling and matching path templates ("/v1/documents/{doc}")
 * and expanding resource templates ("documents/{doc}"). Pure: no I/O, no
 * globals; compiling allocates, matching and expanding do not. */
#include "route.h"

#include "canon.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
set_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || errlen == 0) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static bool
name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_';
}

/* Whether the template text src is already in canonical form (a path's
 * or a name's), as the requests and names it is compared with are. */
static bool
canonical_text(const char *src, bool path, char *err, size_t errlen)
{
    size_t len = strlen(src), olen = 0;
    char *out = malloc(len + 2);
    const char *why = "out of memory";
    bool ok;

    ok =
        out != NULL && (path ? canon_path(src, len, out, len + 2, &olen, &why)
                             : canon_name(src, len, out, len + 2, &olen, &why));
    if (!ok) {
        set_err(err, errlen, "%s", why);
    } else if (olen != len || memcmp(out, src, len) != 0) {
        set_err(err, errlen,
                "not in canonical form: it reads as \"%s\" (see Resource "
                "names in doc/guide.md)",
                out);
        ok = false;
    }
    free(out);
    return ok;
}

/* Append a segment to *segs (n elements). The literal, when given, is
 * copied. false when out of memory. */
static bool
push_seg(struct tm_tmpl_seg **segs, size_t *n, const char *lit, size_t len,
         int capture, bool rest)
{
    struct tm_tmpl_seg *s = realloc(*segs, (*n + 1) * sizeof(**segs));

    if (s == NULL) {
        return false;
    }
    *segs = s;
    s[*n].lit = NULL;
    s[*n].lit_len = 0;
    s[*n].capture = capture;
    s[*n].rest = rest;
    if (lit != NULL) {
        s[*n].lit = malloc(len + 1);
        if (s[*n].lit == NULL) {
            return false;
        }
        memcpy(s[*n].lit, lit, len);
        s[*n].lit[len] = '\0';
        s[*n].lit_len = len;
    }
    (*n)++;
    return true;
}

static void
free_segs(struct tm_tmpl_seg *segs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(segs[i].lit);
    }
    free(segs);
}

/* Whether the braces of s (len bytes) pair up; if not, a message that
 * names the brace missing, with the text it belongs to. */
static bool
braces_paired(const char *s, size_t len, char *err, size_t errlen)
{
    const char *open = NULL;

    for (size_t i = 0; i < len; i++) {
        if (s[i] == '{') {
            if (open != NULL) {
                set_err(err, errlen, "'%.*s' is missing its closing '}'",
                        (int)(s + i - open), open);
                return false;
            }
            open = s + i;
        } else if (s[i] == '}') {
            if (open == NULL) {
                set_err(err, errlen, "'%.*s' is missing its opening '{'",
                        (int)i + 1, s);
                return false;
            }
            open = NULL;
        }
    }
    if (open != NULL) {
        set_err(err, errlen, "'%.*s' is missing its closing '}'",
                (int)(s + len - open), open);
        return false;
    }
    return true;
}

/* Compile one "{name}" or "{name*}" segment of a path template. */
static bool
compile_capture(struct tm_tmpl *t, const char *seg, size_t len, bool last,
                char *err, size_t errlen)
{
    const char *name = seg + 1;
    size_t nlen;
    bool rest = false;

    if (len < 2 || seg[len - 1] != '}') {
        set_err(err, errlen, "a capture must be a whole segment: {name}");
        return false;
    }
    nlen = len - 2;
    if (nlen > 0 && name[nlen - 1] == '*') {
        rest = true;
        nlen--;
    }
    if (nlen == 0) {
        set_err(err, errlen, "empty capture name");
        return false;
    }
    for (size_t i = 0; i < nlen; i++) {
        if (!name_char(name[i])) {
            set_err(err, errlen,
                    "capture names are letters, digits and '_': "
                    "{%.*s}",
                    (int)len - 2, name);
            return false;
        }
    }
    if (rest && !last) {
        set_err(err, errlen, "{%.*s*} must be the last segment", (int)nlen,
                name);
        return false;
    }
    for (size_t i = 0; i < t->nnames; i++) {
        if (strlen(t->names[i]) == nlen &&
            memcmp(t->names[i], name, nlen) == 0) {
            set_err(err, errlen, "capture {%.*s} appears twice", (int)nlen,
                    name);
            return false;
        }
    }
    if (t->nnames == TM_MAX_CAPTURES) {
        set_err(err, errlen, "more than %d captures", TM_MAX_CAPTURES);
        return false;
    }
    t->names[t->nnames] = strndup(name, nlen);
    if (t->names[t->nnames] == NULL ||
        !push_seg(&t->segs, &t->nsegs, NULL, 0, (int)t->nnames, rest)) {
        free(t->names[t->nnames]);
        t->names[t->nnames] = NULL;
        set_err(err, errlen, "out of memory");
        return false;
    }
    t->nnames++;
    return true;
}

bool
tmpl_compile(struct tm_tmpl *t, const char *src, char *err, size_t errlen)
{
    const char *p;

    memset(t, 0, sizeof(*t));
    if (src == NULL || src[0] != '/') {
        set_err(err, errlen, "a path template must start with '/'");
        return false;
    }
    if (strpbrk(src, "?#") != NULL) {
        set_err(err, errlen, "a path template has no query or fragment");
        return false;
    }
    if (!canonical_text(src, true, err, errlen)) {
        return false;
    }
    p = src + 1;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t len = slash != NULL ? (size_t)(slash - p) : strlen(p);
        bool last = slash == NULL;

        if (!braces_paired(p, len, err, errlen)) {
            goto fail;
        }
        if (len > 0 && p[0] == '{') {
            if (!compile_capture(t, p, len, last, err, errlen)) {
                goto fail;
            }
        } else if (memchr(p, '{', len) != NULL || memchr(p, '}', len) != NULL) {
            set_err(err, errlen, "a capture must be a whole segment: {name}");
            goto fail;
        } else if (!push_seg(&t->segs, &t->nsegs, p, len, -1, false)) {
            set_err(err, errlen, "out of memory");
            goto fail;
        }
        if (last) {
            break;
        }
        p = slash + 1;
    }
    return true;

fail:
    tmpl_free(t);
    return false;
}

void
tmpl_free(struct tm_tmpl *t)
{
    free_segs(t->segs, t->nsegs);
    for (size_t i = 0; i < t->nnames; i++) {
        free(t->names[i]);
    }
    memset(t, 0, sizeof(*t));
}

bool
tmpl_match(const struct tm_tmpl *t, const char *path, size_t len,
           struct tm_slice caps[TM_MAX_CAPTURES])
{
    size_t pos = 1;

    for (size_t i = 0; i < TM_MAX_CAPTURES; i++) {
        caps[i].p = NULL;
        caps[i].len = 0;
    }
    if (t->nsegs == 0 || len == 0 || path[0] != '/') {
        return false;
    }
    for (size_t i = 0; i < t->nsegs; i++) {
        const struct tm_tmpl_seg *s = &t->segs[i];
        bool last = i + 1 == t->nsegs;
        const char *slash;
        size_t end;

        if (s->rest) {
            if (pos >= len) {
                return false;
            }
            caps[s->capture].p = path + pos;
            caps[s->capture].len = len - pos;
            return true;
        }
        slash = pos < len ? memchr(path + pos, '/', len - pos) : NULL;
        end = slash != NULL ? (size_t)(slash - path) : len;
        if (s->lit != NULL) {
            if (end - pos != s->lit_len ||
                memcmp(path + pos, s->lit, s->lit_len) != 0) {
                return false;
            }
        } else {
            if (end == pos) {
                return false;
            }
            caps[s->capture].p = path + pos;
            caps[s->capture].len = end - pos;
        }
        /* The last segment must end the path; any other must be followed
         * by a '/', so "/a" and "/a/" are different paths. */
        if (last != (end == len)) {
            return false;
        }
        pos = end + 1;
    }
    return true;
}

bool
rtmpl_compile(struct tm_rtmpl *r, const char *src, const struct tm_tmpl *path,
              char *err, size_t errlen)
{
    const char *p = src;

    memset(r, 0, sizeof(*r));
    if (src == NULL || src[0] == '\0') {
        set_err(err, errlen, "empty resource template");
        return false;
    }
    if (!braces_paired(src, strlen(src), err, errlen)) {
        return false;
    }
    if (!canonical_text(src, false, err, errlen)) {
        return false;
    }
    while (*p != '\0') {
        const char *open = strpbrk(p, "{}");
        size_t len = open != NULL ? (size_t)(open - p) : strlen(p);
        const char *name;
        size_t nlen;
        size_t i;

        if (len > 0 && !push_seg(&r->segs, &r->nsegs, p, len, -1, false)) {
            set_err(err, errlen, "out of memory");
            goto fail;
        }
        if (open == NULL) {
            break;
        }
        if (*open == '}') {
            set_err(err, errlen, "unbalanced '}'");
            goto fail;
        }
        name = open + 1;
        nlen = strcspn(name, "{}");
        if (name[nlen] != '}') {
            set_err(err, errlen, "unbalanced '{'");
            goto fail;
        }
        p = name + nlen + 1;
        /* "{key*}" names the capture "key" too. */
        if (nlen > 0 && name[nlen - 1] == '*') {
            nlen--;
        }
        for (i = 0; i < path->nnames; i++) {
            if (strlen(path->names[i]) == nlen &&
                memcmp(path->names[i], name, nlen) == 0) {
                break;
            }
        }
        if (i == path->nnames) {
            set_err(err, errlen, "{%.*s} is not a capture of the path",
                    (int)nlen, name);
            goto fail;
        }
        if (!push_seg(&r->segs, &r->nsegs, NULL, 0, (int)i, false)) {
            set_err(err, errlen, "out of memory");
            goto fail;
        }
    }
    return true;

fail:
    rtmpl_free(r);
    return false;
}

void
rtmpl_free(struct tm_rtmpl *r)
{
    free_segs(r->segs, r->nsegs);
    memset(r, 0, sizeof(*r));
}

size_t
rtmpl_expand(const struct tm_rtmpl *r,
             const struct tm_slice caps[TM_MAX_CAPTURES], char *out,
             size_t outlen)
{
    size_t n = 0;

    for (size_t i = 0; i < r->nsegs; i++) {
        const char *p = r->segs[i].lit;
        size_t len = r->segs[i].lit_len;

        if (p == NULL) {
            p = caps[r->segs[i].capture].p;
            len = caps[r->segs[i].capture].len;
        }
        if (len >= outlen - n) {
            return 0;
        }
        if (len > 0) {
            memcpy(out + n, p, len);
        }
        n += len;
    }
    if (n == 0 || n >= outlen) {
        return 0;
    }
    out[n] = '\0';
    return n;
}

/* RFC 9110 tchar, upper-case letters only. */
static bool
method_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Check one method token of a route and append it to m. */
static bool
method_add(struct tm_methods *m, const char *p, size_t n, char *err,
           size_t errlen)
{
    struct tm_method *v;

    for (size_t i = 0; i < n; i++) {
        if (p[i] >= 'a' && p[i] <= 'z') {
            set_err(err, errlen,
                    "methods are upper case: '%.*s' (a backend may run a "
                    "lower-case method as the upper-case one)",
                    (int)(n > TM_METHOD_MAX ? TM_METHOD_MAX : n), p);
            return false;
        }
        if (!method_char(p[i])) {
            set_err(err, errlen, "'%.*s' is not a method token (RFC 9110)",
                    (int)(n > TM_METHOD_MAX ? TM_METHOD_MAX : n), p);
            return false;
        }
    }
    if (n > TM_METHOD_MAX) {
        set_err(err, errlen, "a method is at most %d characters: '%.*s...'",
                TM_METHOD_MAX, TM_METHOD_MAX, p);
        return false;
    }
    v = realloc(m->v, (m->n + 1) * sizeof(*v));
    if (v == NULL) {
        set_err(err, errlen, "out of memory");
        return false;
    }
    m->v = v;
    memcpy(v[m->n].name, p, n);
    v[m->n].name[n] = '\0';
    v[m->n].len = n;
    m->n++;
    return true;
}

bool
methods_parse(struct tm_methods *m, const char *src, char *err, size_t errlen)
{
    const char *p = src;
    size_t count = 0;
    bool star = false;

    memset(m, 0, sizeof(*m));
    for (;;) {
        size_t n;

        p += strspn(p, " \t");
        if (*p == '\0') {
            break;
        }
        n = strcspn(p, " \t");
        count++;
        if (n == 1 && p[0] == '*') {
            star = true;
        } else if (!method_add(m, p, n, err, errlen)) {
            methods_free(m);
            return false;
        }
        p += n;
    }
    if (count == 0) {
        set_err(err, errlen, "must name methods, or * for every method");
        return false;
    }
    if (star && count > 1) {
        set_err(err, errlen, "* stands alone: it means every method");
        methods_free(m);
        return false;
    }
    return true;
}

void
methods_free(struct tm_methods *m)
{
    free(m->v);
    memset(m, 0, sizeof(*m));
}

bool
methods_has(const struct tm_methods *m, const char *name, size_t len)
{
    if (m->n == 0) {
        return true;
    }
    for (size_t i = 0; i < m->n; i++) {
        if (m->v[i].len == len && memcmp(m->v[i].name, name, len) == 0) {
            return true;
        }
    }
    return false;
}
