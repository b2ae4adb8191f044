/* fuzz_s3delete.c: libFuzzer target for the S3 multi-object delete body
 * (s3delete.h) and the address each key is fenced at. Invariants, on
 * every input:
 * - a refused body says why, and a parse gives the same answer twice;
 * - an accepted body has 1 to S3_DELETE_MAX_OBJECTS keys, each 1 to
 *   S3_KEY_MAX bytes of well-formed UTF-8, NUL-terminated, none holding
 *   a NUL; as many keys as Object elements;
 * - a key's address, when it has one, is below "/b/" and in canonical
 *   form (no empty, "." or ".." segment, no control character, ';' or
 *   '+'). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../../policies/s3delete.h"
#include "../../policies/s3name.h"
#include "../../policies/utf8.h"
#include "fuzz.h"

static void
check_address(const char *a, size_t n)
{
    check(n > 3 && memcmp(a, "/b/", 3) == 0 && a[n] == '\0',
          "an address is below its bucket");
    check(a[n - 1] != '/' && strstr(a, "//") == NULL &&
              strstr(a, "/./") == NULL && strstr(a, "/../") == NULL,
          "an address has no empty or dot segment");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)a[i];
        check(c >= 0x20 && c != 0x7f && c != ';' && c != '+',
              "an address has no control character, ';' or '+'");
    }
}

static bool
on_key(void *arg, const char *key, size_t len)
{
    char addr[4 * (S3_BUCKET_MAX + S3_KEY_MAX)];
    struct tm_slice b = {"b", 1};
    size_t n = 0;

    (*(size_t *)arg)++;
    check(len >= 1 && len <= S3_KEY_MAX && key[len] == '\0' &&
              strlen(key) == len,
          "a key is 1 to 1024 bytes, NUL-terminated, without a NUL");
    check(utf8_valid(key, len), "a key is well-formed UTF-8");
    if (s3_key_address(b, key, len, addr, sizeof(addr), &n)) {
        check_address(addr, n);
    }
    return true;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data, *why = NULL, *why2 = NULL;
    size_t n = 0, n2 = 0, seen = 0;
    bool ok = s3_delete_parse(body, size, on_key, &seen, &n, &why);

    check(ok == s3_delete_parse(body, size, NULL, NULL, &n2, &why2),
          "a parse gives the same answer twice");
    if (!ok) {
        check(why != NULL && why2 != NULL, "a refused body says why");
        return 0;
    }
    check(n >= 1 && n <= S3_DELETE_MAX_OBJECTS && n == n2 && n == seen,
          "1 to 1000 keys, one for each Object");
    return 0;
}
