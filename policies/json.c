/* json.c: JSON string content from arbitrary bytes, one piece (a byte
 * or a UTF-8 sequence) at a time. */
#include "json.h"

#include <stdio.h>
#include <string.h>

#include "ascii.h"
#include "utf8.h"

const char *
json_piece(const char *s, size_t len, size_t *take, char esc[8])
{
    unsigned char ch = (unsigned char)s[0];

    *take = 1;
    if (ch == '"' || ch == '\\') {
        esc[0] = '\\';
        esc[1] = (char)ch;
        esc[2] = '\0';
        return esc;
    }
    if (ch < 0x20 || ch == 0x7f) {
        snprintf(esc, 8, "\\u%04x", ch);
        return esc;
    }
    if (ch < 0x80) {
        return NULL;
    }
    *take = utf8_seq(s, len);
    if (*take == 0) {
        *take = 1;
        return "\\ufffd";
    }
    /* C1 controls and the line and paragraph separators are valid JSON
     * as themselves, but a line break or an escape to some readers. */
    if (*take == 2 && ch == 0xc2 && (unsigned char)s[1] < 0xa0) {
        snprintf(esc, 8, "\\u%04x", (unsigned char)s[1]);
        return esc;
    }
    if (*take == 3 && ch == 0xe2 && (unsigned char)s[1] == 0x80 &&
        ((unsigned char)s[2] == 0xa8 || (unsigned char)s[2] == 0xa9)) {
        return (unsigned char)s[2] == 0xa8 ? "\\u2028" : "\\u2029";
    }
    return NULL;
}

void
json_escape_into(char *buf, size_t cap, size_t *n, const char *s)
{
    size_t len = strlen(s);

    while (len > 0) {
        char esc[8];
        size_t take, run = ascii_plain_run(s, len);

        if (run > 0) { /* bytes written as themselves, one piece each */
            size_t room = cap > *n + 1 ? cap - *n - 1 : 0;
            size_t w = run < room ? run : room;

            memcpy(buf + *n, s, w);
            *n += w;
            if (w < run) {
                return;
            }
            s += run;
            len -= run;
            continue;
        }
        const char *e = json_piece(s, len, &take, esc);
        const char *src = e != NULL ? e : s;
        size_t w = e != NULL ? strlen(e) : take;

        if (*n + w + 1 > cap) {
            break;
        }
        memcpy(buf + *n, src, w);
        *n += w;
        s += take;
        len -= take;
    }
}
