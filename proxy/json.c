/* json.c: JSON string content into an evbuffer: runs that need no
 * escape are copied whole, the pieces between them escaped. */
#include "json.h"

#include <string.h>

#include "../policies/json.h"

#include <event2/buffer.h>

void
json_escape(struct evbuffer *out, const char *s, size_t len)
{
    size_t run = 0;
    size_t i = 0;

    while (i < len) {
        char esc[8];
        size_t take;
        const char *e = json_piece(s + i, len - i, &take, esc);

        if (e != NULL) {
            evbuffer_add(out, s + run, i - run);
            evbuffer_add(out, e, strlen(e));
            run = i + take;
        }
        i += take;
    }
    evbuffer_add(out, s + run, len - run);
}
