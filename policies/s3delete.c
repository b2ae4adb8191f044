/* s3delete.c: the keys of an S3 multi-object delete body, read strictly
 * (s3delete.h). Pure: no I/O, no globals, no allocation. */
#include "s3delete.h"

#include <string.h>
#include <strings.h>

#include "s3name.h"
#include "slice.h"
#include "utf8.h"

/* The longest text of an Object's other fields read (VersionId, ETag,
 * LastModifiedTime, Size), bytes once decoded. */
#define FIELD_MAX 1024

/* A cursor over the body; why is the first reason it was refused. */
struct rd {
    const char *p;
    size_t len;
    size_t i;
    const char *why;
};

static bool
fail(struct rd *r, const char *why)
{
    if (r->why == NULL) {
        r->why = why;
    }
    return false;
}

static bool
is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void
skip_space(struct rd *r)
{
    while (r->i < r->len && is_space(r->p[r->i])) {
        r->i++;
    }
}

/* Whether the body continues with s at the cursor. */
static bool
at(const struct rd *r, const char *s)
{
    size_t n = strlen(s);

    return r->len - r->i >= n && memcmp(r->p + r->i, s, n) == 0;
}

static bool
name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' ||
           c == ':';
}

/* An element name at the cursor. */
static bool
read_name(struct rd *r, struct tm_slice *name)
{
    name->p = r->p + r->i;
    while (r->i < r->len && name_char(r->p[r->i])) {
        r->i++;
    }
    name->len = (size_t)(r->p + r->i - name->p);
    return name->len > 0 || fail(r, "an element has no name");
}

/* One attribute name="value" (or 'value') at the cursor. */
static bool
read_attribute(struct rd *r)
{
    struct tm_slice name;
    const char *end;
    char q;

    if (!read_name(r, &name)) {
        return false;
    }
    skip_space(r);
    if (r->i == r->len || r->p[r->i] != '=') {
        return fail(r, "an attribute has no value");
    }
    r->i++;
    skip_space(r);
    if (r->i == r->len || (r->p[r->i] != '"' && r->p[r->i] != '\'')) {
        return fail(r, "an attribute's value is not quoted");
    }
    q = r->p[r->i++];
    end = memchr(r->p + r->i, q, r->len - r->i);
    if (end == NULL || memchr(r->p + r->i, '<', (size_t)(end - r->p) - r->i)) {
        return fail(r, "an attribute's value is not closed");
    }
    r->i = (size_t)(end - r->p) + 1;
    return true;
}

/* A start tag at the cursor ('<' there): its name, and whether it is
 * empty ("<Name/>"). Attributes only where attrs. */
static bool
open_tag(struct rd *r, bool attrs, struct tm_slice *name, bool *empty)
{
    if (at(r, "<!") || at(r, "<?")) {
        return fail(r, "comments, CDATA, declarations (DOCTYPE, ENTITY) and "
                       "processing instructions are not read");
    }
    r->i++;
    if (!read_name(r, name)) {
        return false;
    }
    for (;;) {
        bool spaced = r->i < r->len && is_space(r->p[r->i]);

        skip_space(r);
        if (at(r, ">") || at(r, "/>")) {
            *empty = r->p[r->i] == '/';
            r->i += *empty ? 2 : 1;
            return true;
        }
        if (r->i == r->len) {
            return fail(r, "the body ends inside a tag");
        }
        if (!attrs) {
            return fail(r, "only Delete has attributes");
        }
        if (!spaced || !read_attribute(r)) {
            return fail(r, "a tag is malformed");
        }
    }
}

/* The end tag "</name>" at the cursor, space allowed before '>'. */
static bool
close_tag(struct rd *r, const char *name)
{
    if (!at(r, "</")) {
        return fail(r, "an element holds markup where text belongs");
    }
    r->i += 2;
    if (!at(r, name)) {
        return fail(r, "an end tag does not match its element");
    }
    r->i += strlen(name);
    skip_space(r);
    if (!at(r, ">")) {
        return fail(r, "an end tag does not match its element");
    }
    r->i++;
    return true;
}

/* The raw text at the cursor, up to the next '<': no CR (an XML reader
 * turns it into LF) and no other control character but tab and LF. */
static bool
raw_text(struct rd *r, struct tm_slice *t)
{
    const char *lt = memchr(r->p + r->i, '<', r->len - r->i);

    if (lt == NULL) {
        return fail(r, "the body ends inside an element");
    }
    t->p = r->p + r->i;
    t->len = (size_t)(lt - t->p);
    for (size_t i = 0; i < t->len; i++) {
        unsigned char c = (unsigned char)t->p[i];
        if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f) {
            return fail(r, "text holds a raw control character (send it as "
                           "a character reference, &#13; for CR)");
        }
    }
    r->i = (size_t)(lt - r->p);
    return true;
}

/* The text of element name and its end tag; decoded into out (cap
 * bytes and a NUL). */
static bool
element_text(struct rd *r, const char *name, char *out, size_t cap, size_t *n)
{
    struct tm_slice t;

    if (!raw_text(r, &t)) {
        return false;
    }
    if (at(r, "<!")) {
        return fail(r, "comments and CDATA are not read in text");
    }
    if (!s3_xml_text(t, out, cap, n)) {
        return fail(r, "a Key or field is empty, longer than 1024 bytes or "
                       "holds a malformed character reference");
    }
    if (!utf8_valid(out, *n)) {
        return fail(r, "text is not well-formed UTF-8");
    }
    return close_tag(r, name);
}

/* The fields an Object may hold, each at most once. */
static const char *const fields[] = {"Key", "VersionId", "ETag",
                                     "LastModifiedTime", "Size"};

/* One Object's content after its start tag, through its end tag. */
static bool
read_object(struct rd *r, s3_delete_key_cb cb, void *arg)
{
    char key[S3_KEY_MAX + 1], other[FIELD_MAX + 1];
    size_t klen = 0, n;
    unsigned seen = 0;

    for (;;) {
        struct tm_slice name;
        bool empty;
        size_t f = 0;

        skip_space(r);
        if (at(r, "</")) {
            break;
        }
        if (!at(r, "<")) {
            return fail(r, r->i == r->len
                               ? "the body ends inside an Object"
                               : "an Object holds text outside its fields");
        }
        if (!open_tag(r, false, &name, &empty)) {
            return false;
        }
        while (f < sizeof(fields) / sizeof(fields[0]) &&
               !slice_eq(name, fields[f])) {
            f++;
        }
        if (f == sizeof(fields) / sizeof(fields[0]) || empty ||
            (seen & (1u << f)) != 0) {
            return fail(r, "an Object holds an element other than one Key "
                           "and at most one VersionId, ETag, "
                           "LastModifiedTime and Size, or an empty one");
        }
        seen |= 1u << f;
        if (!(f == 0 ? element_text(r, fields[f], key, S3_KEY_MAX, &klen)
                     : element_text(r, fields[f], other, FIELD_MAX, &n))) {
            return false;
        }
    }
    if ((seen & 1u) == 0) {
        return fail(r, "an Object has no Key");
    }
    if (!close_tag(r, "Object")) {
        return false;
    }
    return cb == NULL || cb(arg, key, klen) ||
           fail(r, "a key cannot be fenced");
}

/* The content of Delete after its start tag, through its end tag. */
static bool
read_delete(struct rd *r, s3_delete_key_cb cb, void *arg, size_t *nkeys)
{
    char quiet[8];
    size_t n;
    bool quiet_seen = false;

    for (;;) {
        struct tm_slice name;
        bool empty;

        skip_space(r);
        if (at(r, "</")) {
            return close_tag(r, "Delete");
        }
        if (!at(r, "<")) {
            return fail(r, r->i == r->len ? "the body ends inside Delete"
                                          : "Delete holds text");
        }
        if (!open_tag(r, false, &name, &empty)) {
            return false;
        }
        if (slice_eq(name, "Quiet") && !quiet_seen) {
            quiet_seen = true;
            if (!empty && !element_text(r, "Quiet", quiet, 5, &n)) {
                return false;
            }
        } else if (slice_eq(name, "Object") && !empty) {
            if (*nkeys == S3_DELETE_MAX_OBJECTS) {
                return fail(r, "more than 1000 objects in one delete");
            }
            if (!read_object(r, cb, arg)) {
                return false;
            }
            (*nkeys)++;
        } else {
            return fail(r, "Delete holds an element other than at most one "
                           "Quiet and its Objects");
        }
    }
}

/* The value of pseudo-attribute name in an XML declaration's text d, or
 * an empty slice. */
static struct tm_slice
decl_value(struct tm_slice d, const char *name)
{
    struct tm_slice v = {d.p, 0};
    const char *a = memmem(d.p, d.len, name, strlen(name));
    const char *end = d.p + d.len, *q;

    if (a == NULL) {
        return v;
    }
    a += strlen(name);
    while (a < end && (is_space(*a) || *a == '=')) {
        a++;
    }
    if (a == end || (*a != '"' && *a != '\'') ||
        (q = memchr(a + 1, *a, (size_t)(end - a - 1))) == NULL) {
        v.p = NULL; /* malformed */
        return v;
    }
    v.p = a + 1;
    v.len = (size_t)(q - v.p);
    return v;
}

/* A UTF-8 byte order mark and the XML declaration, when there. */
static bool
read_prolog(struct rd *r)
{
    const char *end;
    struct tm_slice d, ver, enc;

    if (at(r, "\xef\xbb\xbf")) {
        r->i += 3;
    }
    if (!at(r, "<?xml") || r->len - r->i < 6 || !is_space(r->p[r->i + 5])) {
        return true;
    }
    end = memmem(r->p + r->i, r->len - r->i, "?>", 2);
    if (end == NULL) {
        return fail(r, "the XML declaration is not closed");
    }
    d.p = r->p + r->i + 5;
    d.len = (size_t)(end - d.p);
    ver = decl_value(d, "version");
    enc = decl_value(d, "encoding");
    if (!slice_eq(ver, "1.0") || enc.p == NULL ||
        (enc.len > 0 && !slice_ieq(enc, "UTF-8")) ||
        memchr(d.p, '<', d.len) != NULL) {
        return fail(r, "the XML declaration must say version 1.0 and, if "
                       "it names one, encoding UTF-8");
    }
    r->i = (size_t)(end - r->p) + 2;
    return true;
}

bool
s3_delete_parse(const char *body, size_t len, s3_delete_key_cb cb, void *arg,
                size_t *nkeys, const char **why)
{
    struct rd r = {body, len, 0, NULL};
    struct tm_slice name;
    bool empty = false;

    *nkeys = 0;
    if (!read_prolog(&r)) {
        *why = r.why;
        return false;
    }
    skip_space(&r);
    if (!at(&r, "<") || !open_tag(&r, true, &name, &empty) ||
        !slice_eq(name, "Delete") || empty ||
        !read_delete(&r, cb, arg, nkeys)) {
        *why = r.why != NULL ? r.why : "the body is not a Delete element";
        return false;
    }
    skip_space(&r);
    if (r.i != r.len) {
        *why = "something follows the Delete element";
        return false;
    }
    if (*nkeys == 0) {
        *why = "a delete names no Object";
        return false;
    }
    return true;
}
