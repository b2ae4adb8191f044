/* cfg_value.c: options as values. The setters of the table's types parse
 * one value into its field and return NULL or a message that never echoes
 * the value (it may hold a password); then drop, compare, copy and show. */
#include "cfg_opts.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cfg_set.h"

/* Replace the string at *field by a copy of v. */
const char *
cfg_store_str(char **field, const char *v)
{
    char *copy = strdup(v);

    if (copy == NULL) {
        return CFG_OOM;
    }
    free(*field);
    *field = copy;
    return NULL;
}

/* CFG_T_STR: empty when CFG_EMPTY_OK allows it, else checked by the
 * entry's check. */
static const char *
set_str(const struct cfg_opt *o, void *obj, const char *v, char *buf,
        size_t len)
{
    const char *msg;

    if (v[0] == '\0' && !(o->flags & CFG_EMPTY_OK)) {
        return "must not be empty";
    }
    if (v[0] != '\0' && o->ops != NULL && o->ops->check != NULL &&
        (msg = o->ops->check(v, buf, len)) != NULL) {
        return msg;
    }
    return cfg_store_str(CFG_FIELD(obj, o, char *), v);
}

/* Index of v in choices, or an error in buf. */
static int
choice(const char *const *choices, const char *v, char *buf, size_t len)
{
    size_t n = 0;
    int w;

    for (n = 0; choices[n] != NULL; n++) {
        if (strcmp(choices[n], v) == 0) {
            return (int)n;
        }
    }
    w = snprintf(buf, len, "must be %s", n > 2 ? "one of " : "");
    for (size_t i = 0; i < n && w >= 0 && (size_t)w < len; i++) {
        const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";

        w += snprintf(buf + w, len - (size_t)w, "%s%s", sep, choices[i]);
    }
    return -1;
}

static const char *
set_choice_str(const struct cfg_opt *o, void *obj, const char *v, char *buf,
               size_t len)
{
    if (choice(o->choices, v, buf, len) < 0) {
        return buf;
    }
    return cfg_store_str(CFG_FIELD(obj, o, char *), v);
}

/* A two-way choice into a bool field: true for the second choice. */
static const char *
set_flag(const struct cfg_opt *o, void *obj, const char *v, char *buf,
         size_t len)
{
    int i = choice(o->choices, v, buf, len);

    if (i < 0) {
        return buf;
    }
    *CFG_FIELD(obj, o, bool) = i == 1;
    return NULL;
}

/* CFG_T_ENUM: the choice's index is the enum's value. */
static const char *
set_enum(const struct cfg_opt *o, void *obj, const char *v, char *buf,
         size_t len)
{
    int i = choice(o->choices, v, buf, len);

    if (i < 0) {
        return buf;
    }
    *CFG_FIELD(obj, o, int) = i;
    return NULL;
}

static const char *const yes_no[] = {"yes", "no", NULL};

static const char *
set_bool(const struct cfg_opt *o, void *obj, const char *v, char *buf,
         size_t len)
{
    int i = choice(yes_no, v, buf, len);

    if (i < 0) {
        return buf;
    }
    *CFG_FIELD(obj, o, bool) = i == 0;
    return NULL;
}

/* Read a secret from path: a regular file nobody but its owner (and
 * group) may read, min to max (at most CFG_SECRET_MAX) bytes, one final LF
 * dropped. On success *out is malloc'd (the caller frees) and NULL is
 * returned; else a message that never quotes the file. */
static const char *
read_secret(const char *path, const char *what, size_t min, size_t max,
            unsigned char **out, size_t *outlen, char *buf, size_t len)
{
    unsigned char key[CFG_SECRET_MAX + 1];
    struct stat st;
    size_t n = 0;
    ssize_t got;
    int fd;

    /* O_NONBLOCK: a FIFO named here must not hang the loader. */
    fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(buf, len, "cannot open the %s file: %s", what,
                 strerror(errno));
        return buf;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(buf, len, "the %s file is not a regular file", what);
        return buf;
    }
    if (st.st_mode & (S_IROTH | S_IWOTH)) {
        close(fd);
        snprintf(buf, len,
                 "the %s file is readable or writable by others: "
                 "chmod 600 it (or 640 for a group)",
                 what);
        return buf;
    }
    while (n < sizeof(key) && (got = read(fd, key + n, sizeof(key) - n)) != 0) {
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got < 0) {
            close(fd);
            explicit_bzero(key, sizeof(key));
            snprintf(buf, len, "cannot read the %s file", what);
            return buf;
        }
        n += (size_t)got;
    }
    close(fd);
    if (n > 0 && key[n - 1] == '\n') {
        n--;
    }
    if (n == 0) {
        snprintf(buf, len, "the %s file is empty", what);
        return buf;
    }
    if (n < min || n > max) {
        explicit_bzero(key, sizeof(key));
        snprintf(buf, len,
                 "the %s must be %zu to %zu bytes (openssl rand "
                 "-hex 32 makes one)",
                 what, min, max);
        return buf;
    }
    *out = malloc(n);
    if (*out == NULL) {
        explicit_bzero(key, sizeof(key));
        return CFG_OOM;
    }
    memcpy(*out, key, n);
    *outlen = n;
    explicit_bzero(key, sizeof(key));
    return NULL;
}

/* CFG_T_KEYFILE's fields, after the file's name at o->off. */
struct keyfile_fields {
    char *file;
    unsigned char *bytes;
    size_t len;
};

#define KEYFILE_LAYOUT(type, f, b, n)                                          \
    _Static_assert(offsetof(type, b) - offsetof(type, f) ==                    \
                           offsetof(struct keyfile_fields, bytes) &&           \
                       offsetof(type, n) - offsetof(type, f) ==                \
                           offsetof(struct keyfile_fields, len),               \
                   #type ": " #f ", " #b ", " #n " out of order")
KEYFILE_LAYOUT(struct cfg_tokens, key_file, key, key_len);
KEYFILE_LAYOUT(struct cfg_admin, token_file, token, token_len);

static unsigned char **
keyfile_bytes(const struct cfg_opt *o, const void *obj)
{
    return (unsigned char **)(void *)((char *)obj + o->off +
                                      offsetof(struct keyfile_fields, bytes));
}

static size_t *
keyfile_len(const struct cfg_opt *o, const void *obj)
{
    return (size_t *)(void *)((char *)obj + o->off +
                              offsetof(struct keyfile_fields, len));
}

/* Wipe and free a key file's bytes and name. */
static void
drop_keyfile(const struct cfg_opt *o, void *obj)
{
    unsigned char **bytes = keyfile_bytes(o, obj);

    if (*bytes != NULL) {
        explicit_bzero(*bytes, *keyfile_len(o, obj));
    }
    free(*bytes);
    free(*CFG_FIELD(obj, o, char *));
    *bytes = NULL;
    *keyfile_len(o, obj) = 0;
    *CFG_FIELD(obj, o, char *) = NULL;
}

/* CFG_T_KEYFILE: read the secret the file holds (min to max bytes).
 * Empty: none, where CFG_EMPTY_OK allows it. Messages call the secret
 * by the key's name without "_file" (key_file: "the key file"). */
static const char *
set_keyfile(const struct cfg_opt *o, void *obj, const char *v, char *buf,
            size_t len)
{
    char what[32];
    const char *msg;

    snprintf(what, sizeof(what), "%.*s", (int)strcspn(o->key, "_"), o->key);
    drop_keyfile(o, obj);
    if (v[0] == '\0') {
        if (o->flags & CFG_EMPTY_OK) {
            return NULL;
        }
        snprintf(buf, len, "must name the file holding the %s", what);
        return buf;
    }
    msg = read_secret(v, what, (size_t)o->min, (size_t)o->max,
                      keyfile_bytes(o, obj), keyfile_len(o, obj), buf, len);
    return msg != NULL ? msg : cfg_store_str(CFG_FIELD(obj, o, char *), v);
}

/* Decimal integer, optionally scaled by a binary suffix K, M, G or T. */
static bool
parse_int(const char *v, bool suffix, int64_t *out)
{
    char *end;
    long long n;
    int shift = 0;

    if (!cfg_is_digit(v[0]) && !(v[0] == '-' && cfg_is_digit(v[1]))) {
        return false;
    }
    errno = 0;
    n = strtoll(v, &end, 10);
    if (errno != 0) {
        return false;
    }
    if (suffix && *end != '\0' && end[1] == '\0') {
        static const char units[] = "kmgt";
        const char *u = memchr(units, end[0] | 0x20, 4);

        if (u == NULL) {
            return false;
        }
        shift = 10 * (int)(u - units + 1);
        end++;
    }
    if (*end != '\0') {
        return false;
    }
    if (shift > 0 && (n > (INT64_MAX >> shift) || n < -(INT64_MAX >> shift))) {
        return false;
    }
    *out = (int64_t)n * ((int64_t)1 << shift);
    return true;
}

/* v as an integer (a size, with a suffix, when size) within o's bounds
 * into *n; NULL, or a message (static, or in buf). */
static const char *
parse_bounded(const struct cfg_opt *o, const char *v, bool size, int64_t *n,
              char *buf, size_t len)
{
    if (!parse_int(v, size, n)) {
        return size ? "must be a size in bytes, like 1073741824 or 1G"
                    : "must be an integer";
    }
    if ((*n < o->min || *n > o->max) && !(*n == 0 && o->flags & CFG_ZERO_OK)) {
        snprintf(buf, len, "must be %sbetween %lld and %lld",
                 o->flags & CFG_ZERO_OK ? "0 or " : "", (long long)o->min,
                 (long long)o->max);
        return buf;
    }
    return NULL;
}

static const char *
set_int(const struct cfg_opt *o, void *obj, const char *v, char *buf,
        size_t len)
{
    int64_t n;
    const char *msg = parse_bounded(o, v, false, &n, buf, len);

    if (msg == NULL) {
        *CFG_FIELD(obj, o, int) = (int)n;
    }
    return msg;
}

static const char *
set_size(const struct cfg_opt *o, void *obj, const char *v, char *buf,
         size_t len)
{
    int64_t n;
    const char *msg = parse_bounded(o, v, true, &n, buf, len);

    if (msg == NULL) {
        *CFG_FIELD(obj, o, int64_t) = n;
    }
    return msg;
}

/* ---- options as values: set, drop, compare, copy, show ------------ */

const char *
cfg_opt_set(const struct cfg_opt *o, void *obj, const char *v, char *buf,
            size_t len)
{
    switch (o->type) {
    case CFG_T_CUSTOM:
        return o->ops->set(o, obj, v, buf, len);
    case CFG_T_INT:
        return set_int(o, obj, v, buf, len);
    case CFG_T_SIZE:
        return set_size(o, obj, v, buf, len);
    case CFG_T_BOOL:
        return set_bool(o, obj, v, buf, len);
    case CFG_T_FLAG:
        return set_flag(o, obj, v, buf, len);
    case CFG_T_ENUM:
        return set_enum(o, obj, v, buf, len);
    case CFG_T_CHOICE:
        return set_choice_str(o, obj, v, buf, len);
    case CFG_T_STR:
        return set_str(o, obj, v, buf, len);
    case CFG_T_KEYFILE:
        return set_keyfile(o, obj, v, buf, len);
    }
    return "has no type";
}

void
cfg_opt_drop(const struct cfg_opt *o, void *obj)
{
    switch (o->type) {
    case CFG_T_CUSTOM:
        if (o->ops->drop != NULL) {
            o->ops->drop(obj);
        }
        break;
    case CFG_T_CHOICE:
    case CFG_T_STR:
        free(*CFG_FIELD(obj, o, char *));
        *CFG_FIELD(obj, o, char *) = NULL;
        break;
    case CFG_T_KEYFILE:
        drop_keyfile(o, obj);
        break;
    case CFG_T_INT:
    case CFG_T_SIZE:
    case CFG_T_BOOL:
    case CFG_T_FLAG:
    case CFG_T_ENUM:
        break;
    }
}

bool
cfg_opt_comparable(const struct cfg_opt *o)
{
    return o->type != CFG_T_CUSTOM;
}

static bool
same_str(const char *a, const char *b)
{
    return (a == NULL && b == NULL) ||
           (a != NULL && b != NULL && strcmp(a, b) == 0);
}

bool
cfg_opt_same(const struct cfg_opt *o, const void *a, const void *b)
{
    switch (o->type) {
    case CFG_T_INT:
    case CFG_T_ENUM:
        return *CFG_FIELD(a, o, const int) == *CFG_FIELD(b, o, const int);
    case CFG_T_SIZE:
        return *CFG_FIELD(a, o, const int64_t) ==
               *CFG_FIELD(b, o, const int64_t);
    case CFG_T_BOOL:
    case CFG_T_FLAG:
        return *CFG_FIELD(a, o, const bool) == *CFG_FIELD(b, o, const bool);
    case CFG_T_CHOICE:
    case CFG_T_STR:
        return same_str(*CFG_FIELD(a, o, char *const),
                        *CFG_FIELD(b, o, char *const));
    case CFG_T_KEYFILE:
        return same_str(*CFG_FIELD(a, o, char *const),
                        *CFG_FIELD(b, o, char *const)) &&
               *keyfile_len(o, a) == *keyfile_len(o, b) &&
               (*keyfile_len(o, a) == 0 ||
                memcmp(*keyfile_bytes(o, a), *keyfile_bytes(o, b),
                       *keyfile_len(o, a)) == 0);
    case CFG_T_CUSTOM:
        break;
    }
    return false;
}

/* *dst = a copy of n bytes at src (NULL stays NULL). */
static bool
dup_bytes(void *dst, const void *src, size_t n)
{
    void *copy = NULL;

    if (src != NULL && (copy = malloc(n + 1)) == NULL) {
        return false;
    }
    if (copy != NULL) {
        memcpy(copy, src, n);
        ((char *)copy)[n] = '\0';
    }
    *(void **)dst = copy;
    return true;
}

static const char *
copy_keyfile(const struct cfg_opt *o, void *dst, const void *src)
{
    const char *file = *CFG_FIELD(src, o, char *const);
    size_t n = *keyfile_len(o, src);

    drop_keyfile(o, dst);
    if (!dup_bytes(keyfile_bytes(o, dst), *keyfile_bytes(o, src), n) ||
        !dup_bytes(CFG_FIELD(dst, o, char *), file,
                   file != NULL ? strlen(file) : 0)) {
        return CFG_OOM;
    }
    *keyfile_len(o, dst) = n;
    return NULL;
}

const char *
cfg_opt_copy(const struct cfg_opt *o, void *dst, const void *src)
{
    char *const *from;
    char *copy;

    switch (o->type) {
    case CFG_T_INT:
    case CFG_T_ENUM:
        *CFG_FIELD(dst, o, int) = *CFG_FIELD(src, o, const int);
        return NULL;
    case CFG_T_SIZE:
        *CFG_FIELD(dst, o, int64_t) = *CFG_FIELD(src, o, const int64_t);
        return NULL;
    case CFG_T_BOOL:
    case CFG_T_FLAG:
        *CFG_FIELD(dst, o, bool) = *CFG_FIELD(src, o, const bool);
        return NULL;
    case CFG_T_CHOICE:
    case CFG_T_STR:
        from = CFG_FIELD(src, o, char *const);
        if (!dup_bytes(&copy, *from, *from != NULL ? strlen(*from) : 0)) {
            return CFG_OOM;
        }
        free(*CFG_FIELD(dst, o, char *));
        *CFG_FIELD(dst, o, char *) = copy;
        return NULL;
    case CFG_T_KEYFILE:
        return copy_keyfile(o, dst, src);
    case CFG_T_CUSTOM:
        break;
    }
    return "cannot be copied";
}

void
cfg_opt_show(const struct cfg_opt *o, const void *obj, char *buf, size_t len)
{
    const char *s = NULL;

    switch (o->type) {
    case CFG_T_INT:
        snprintf(buf, len, "%d", *CFG_FIELD(obj, o, const int));
        return;
    case CFG_T_SIZE:
        snprintf(buf, len, "%lld",
                 (long long)*CFG_FIELD(obj, o, const int64_t));
        return;
    case CFG_T_BOOL:
        s = yes_no[*CFG_FIELD(obj, o, const bool) ? 0 : 1];
        break;
    case CFG_T_FLAG:
        s = o->choices[*CFG_FIELD(obj, o, const bool) ? 1 : 0];
        break;
    case CFG_T_ENUM:
        s = o->choices[*CFG_FIELD(obj, o, const int)];
        break;
    case CFG_T_CHOICE:
    case CFG_T_STR:
    case CFG_T_KEYFILE:
        s = *CFG_FIELD(obj, o, char *const);
        break;
    case CFG_T_CUSTOM:
        o->ops->show(obj, buf, len);
        return;
    }
    if ((o->flags & CFG_SECRET) && s != NULL && s[0] != '\0') {
        s = "(secret)";
    }
    snprintf(buf, len, "%s",
             s == NULL      ? "(none)"
             : s[0] == '\0' ? "(empty)"
                            : s);
}
