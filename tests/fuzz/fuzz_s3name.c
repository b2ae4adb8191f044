/* fuzz_s3name.c: libFuzzer target for s3name (the bucket an S3 server
 * reads from a Host, the CreateMultipartUpload answer), and the chunked
 * body decoder that answer may come through. Invariants, on every input:
 * - the input as a Host: a bucket read from it is a non-empty prefix of
 *   it, followed by '.', of lower-case host characters; an unclear Host
 *   says why;
 * - the input as an answer: a parsed upload has an id of 1 to
 *   S3_UPLOAD_ID_MAX visible ASCII bytes, a key and a bucket within
 *   their bounds, each NUL-terminated; its address, when it has one, is
 *   in canonical form ("/" and segments, none empty, without control
 *   characters, ';' or '+');
 * - the input as a chunked body: its data is never longer than it. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../policies/s3name.h"
#include "../../policies/http_parse.h"
#include "fuzz.h"

static void
as_host(const uint8_t *data, size_t size)
{
    struct tm_slice h = {(const char *)data, size}, b = {NULL, 0};
    const char *why = NULL;

    switch (s3_host_read(h, "aws s3.*.example =tidemark", &b, &why)) {
    case S3_HOST_BUCKET:
        check(b.p == h.p && b.len > 0 && b.len < size && b.p[b.len] == '.',
              "a bucket is a prefix of the Host before a dot");
        for (size_t i = 0; i < b.len; i++) {
            char c = b.p[i];
            check((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '-' || c == '_',
                  "a bucket is lower-case host characters");
        }
        break;
    case S3_HOST_UNCLEAR:
        check(why != NULL, "an unclear Host says why");
        break;
    default:
        break;
    }
}

static void
as_answer(const uint8_t *data, size_t size)
{
    struct s3_upload *u = malloc(sizeof(*u));
    char *addr = malloc(4 * (S3_BUCKET_MAX + S3_KEY_MAX));
    size_t n = 0;

    check(u != NULL && addr != NULL, "out of memory");
    if (s3_upload_parse((const char *)data, size, u)) {
        check(u->id_len > 0 && u->id_len <= S3_UPLOAD_ID_MAX &&
                  u->id[u->id_len] == '\0',
              "an id within bounds");
        for (size_t i = 0; i < u->id_len; i++) {
            check(u->id[i] > 0x20 && u->id[i] < 0x7f, "a visible id");
        }
        check(u->key_len <= S3_KEY_MAX && u->key[u->key_len] == '\0' &&
                  u->bucket_len <= S3_BUCKET_MAX &&
                  u->bucket[u->bucket_len] == '\0',
              "a key and a bucket within bounds");
        if (s3_upload_address(u, addr, 4 * (S3_BUCKET_MAX + S3_KEY_MAX), &n)) {
            check(n > 1 && addr[0] == '/' && addr[n - 1] != '/' &&
                      addr[n] == '\0' && memmem(addr, n, "//", 2) == NULL,
                  "an address is /segments, none empty");
            for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)addr[i];
                check(c >= 0x20 && c != 0x7f && c != ';' && c != '+',
                      "an address is in canonical form");
            }
        }
    }
    free(u);
    free(addr);
}

static void
as_chunked(const uint8_t *data, size_t size)
{
    char *out = malloc(size + 1);
    size_t n = 0;

    check(out != NULL, "out of memory");
    if (http_chunked_body((const char *)data, size, out, size + 1, &n)) {
        check(n <= size, "data no longer than its body");
    }
    free(out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    as_host(data, size);
    as_answer(data, size);
    as_chunked(data, size);
    return 0;
}
