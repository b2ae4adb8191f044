/* fuzz_logline.c: libFuzzer target for the stderr log sinks of log.c,
 * which turn a message (an access line of values logesc escaped, or
 * prose holding a peer's words) into a line of text or JSON. The first
 * byte picks the form and the level; the rest, up to its first NUL, is
 * the message. Invariants, on every input:
 * - the sink writes exactly one line: it ends in its only '\n';
 * - text: it starts "ts=" and holds no control byte before its '\n'
 *   (an access line's own control bytes too, as \xNN);
 * - JSON: it is one object (jansson reads it; a value may hold a NUL,
 *   escaped, which JSON allows) with ts and level strings;
 *   msg is there exactly when the message is not an access line
 *   (event=...); "cut", when there (and the message has no cut= of its
 *   own), is a non-empty array of strings, each the name of a field of
 *   the object. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../proxy/log.h"
#include "../../proxy/tidemark.h"
#include "fuzz.h"

/* The sink's line: stderr (descriptor 2) is a temporary file while the
 * sink runs. Returns its length, at most cap - 1, NUL-terminated. */
static size_t
capture(void (*sink)(void *, enum tm_log_level, const char *),
        enum tm_log_level level, const char *msg, char *out, size_t cap)
{
    static int tmp = -1, saved = -1;
    ssize_t n;

    if (tmp < 0) {
        FILE *f = tmpfile();

        check(f != NULL, "tmpfile");
        tmp = fileno(f);
        saved = dup(2);
    }
    check(ftruncate(tmp, 0) == 0, "ftruncate");
    lseek(tmp, 0, SEEK_SET);
    fflush(stderr);
    dup2(tmp, 2);
    sink(NULL, level, msg);
    fflush(stderr);
    dup2(saved, 2);
    n = pread(tmp, out, cap - 1, 0);
    check(n > 0 && (size_t)n < cap - 1, "a line, shorter than the buffer");
    out[n] = '\0';
    return (size_t)n;
}

static void
check_json(const char *line, const char *msg)
{
    json_error_t err;
    json_t *o = json_loads(line, JSON_ALLOW_NUL, &err), *cut;

    check(o != NULL && json_is_object(o), "JSON: one object");
    check(json_is_string(json_object_get(o, "ts")), "JSON: ts");
    check(json_is_string(json_object_get(o, "level")), "JSON: level");
    check((json_object_get(o, "msg") == NULL) ==
              (strncmp(msg, "event=", 6) == 0),
          "JSON: msg exactly when not an access line");
    cut = json_object_get(o, "cut");
    /* A message with a word of its own named cut (none of ours has
     * one) makes a field "cut" too: only the list is checked. */
    if (cut != NULL && strstr(msg, "cut=") == NULL) {
        size_t i;
        json_t *k;

        check(json_is_array(cut) && json_array_size(cut) > 0,
              "JSON: cut is a list");
        json_array_foreach(cut, i, k)
        {
            check(json_is_string(k) &&
                      json_object_get(o, json_string_value(k)) != NULL,
                  "JSON: cut names a field");
        }
    }
    json_decref(o);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char out[1 << 18];
    char *msg;
    size_t n;
    bool json;
    enum tm_log_level level;

    if (size < 1 || size > 8192) {
        return 0;
    }
    json = data[0] & 1;
    level = (enum tm_log_level)((data[0] >> 1) & 3);
    msg = strndup((const char *)data + 1, size - 1);
    check(msg != NULL, "strndup");
    n = capture(json ? tm_log_stderr_json : tm_log_stderr_text, level, msg, out,
                sizeof(out));
    check(out[n - 1] == '\n' && strchr(out, '\n') == out + n - 1, "one line");
    out[n - 1] = '\0';
    if (json) {
        check_json(out, msg);
    } else {
        check(strncmp(out, "ts=", 3) == 0, "text: ts= first");
        for (size_t i = 0; i < n - 1; i++) {
            check((unsigned char)out[i] >= 0x20 && out[i] != 0x7f,
                  "text: no control byte");
        }
    }
    free(msg);
    return 0;
}
