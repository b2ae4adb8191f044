/* logesc.h: outside values (names, headers, peers' answers) as log text:
 * the one escaper every log line's values go through, so no value can
 * end a line, forge a key=value word or send a terminal a control. Pure. */
#ifndef TM_LOGESC_H
#define TM_LOGESC_H

#include <stddef.h>

/* The most bytes one input byte becomes (\xNN). */
#define LOGESC_PER_BYTE 4

/* Room for n input bytes, however escaped: LOGESC_PER_BYTE each, two
 * quotes, the "..." of a cut value and the NUL. */
#define LOGESC_SIZE(n) (LOGESC_PER_BYTE * (size_t)(n) + 6)

/* The least room logesc takes: "" and the mark of a cut value. */
#define LOGESC_MIN LOGESC_SIZE(0)

enum logesc_form {
    /* Anywhere in a line: bare when it reads as one plain word, quoted
     * when empty, escaped anywhere, or holding a space or '=' (a bare
     * "a=b" would read as a key=value word of its own). */
    LOGESC_WORD = 0,
    /* Right after "key=": as LOGESC_WORD, but '=' may stay bare. */
    LOGESC_VALUE,
    /* Always quoted. */
    LOGESC_QUOTED,
};

/* Write s[0..n) into out (cap >= LOGESC_MIN bytes, NUL-terminated) as log
 * text, in form: '\\' and '"' as \\ and \", tab, LF and CR as \t \n \r,
 * every other control byte (0x00-0x1f, 0x7f), C1 control (U+0080-U+009F),
 * line or paragraph separator (U+2028, U+2029) and byte that is not part
 * of well-formed UTF-8 as \xNN, one per byte; the rest as itself. A
 * value that does not fit in cap is cut before the escape that does not
 * fit, quoted, and followed by "..." ("abc"...). Returns the length
 * written (without the NUL). */
size_t logesc(char *out, size_t cap, const char *s, size_t n,
              enum logesc_form form);

/* The content of a quoted value at s (after its opening quote, len bytes
 * at most), unescaped into out (room for len bytes: unescaping never
 * grows), up to its closing quote or len. Returns the bytes written;
 * *used is how much of s they took (the closing quote not included). A
 * '\\' that starts no escape stands for itself. */
size_t logesc_decode(const char *s, size_t len, char *out, size_t *used);

#endif
