/* reqcheck.c: lower-case methods and method overrides (reqcheck.h). */
#include "reqcheck.h"

#include "ascii.h"

const char *
reqcheck_method(const char *m, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (m[i] >= 'a' && m[i] <= 'z') {
            return "methods are upper case: a backend may run a lower-case "
                   "method as the upper-case one";
        }
    }
    return NULL;
}

/* name[0..len) equals want (lower case, '-'; wlen bytes) in any case,
 * '_' for '-'. */
static bool
header_is(const char *name, size_t len, const char *want, size_t wlen)
{
    if (wlen != len) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char c = name[i];

        if (c >= 'A' && c <= 'Z') {
            c = (char)(c - 'A' + 'a');
        } else if (c == '_') {
            c = '-';
        }
        if (c != want[i]) {
            return false;
        }
    }
    return true;
}

bool
reqcheck_override_header(const char *name, size_t len)
{
    /* Every header of every request: lengths first, no strlen. */
#define HEADER_IS(lit) header_is(name, len, lit, sizeof(lit) - 1)
    return HEADER_IS("x-http-method-override") || HEADER_IS("x-http-method") ||
           HEADER_IS("x-method-override");
#undef HEADER_IS
}

/* Whether the parameter name p[0..n) reads as "_method". */
static bool
param_is_method(const char *p, size_t n)
{
    static const char want[] = "_method";
    size_t k = 0;

    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)p[i];

        if (c == '%' && n - i >= 3 && ascii_hexval(p[i + 1]) >= 0 &&
            ascii_hexval(p[i + 2]) >= 0) {
            c = ascii_hexval(p[i + 1]) * 16 + ascii_hexval(p[i + 2]);
            i += 2;
        }
        if (c == '+' || c == ' ' || c == '.' || c == '[') {
            c = '_';
        } else if (c >= 'A' && c <= 'Z') {
            c = c - 'A' + 'a';
        }
        if (k == sizeof(want) - 1 || c != want[k]) {
            return false;
        }
        k++;
    }
    return k == sizeof(want) - 1;
}

bool
reqcheck_override_query(const char *q, size_t len)
{
    size_t i = 0;

    while (i < len) {
        size_t end = i, name_end;

        while (end < len && q[end] != '&' && q[end] != ';') {
            end++;
        }
        name_end = i;
        while (name_end < end && q[name_end] != '=') {
            name_end++;
        }
        if (param_is_method(q + i, name_end - i)) {
            return true;
        }
        i = end + 1;
    }
    return false;
}
