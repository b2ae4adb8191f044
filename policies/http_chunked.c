/* http_chunked.c: the incremental chunked body decoder (RFC 9112 7.1),
 * fed in pieces of any size, with its trailer checks. No I/O, no
 * allocation. */
#include <string.h>

#include "hname.h"
#include "http_int.h"

/* The chunked decoder's states (RFC 9112 7.1). */
enum chunk_state {
    CH_SIZE = 0,  /* first hex digit of a chunk-size */
    CH_SIZE_MORE, /* more hex digits, ';' or CR */
    CH_EXT,       /* chunk extensions, skipped up to CR */
    CH_SIZE_LF,   /* LF ending the size line */
    CH_DATA,      /* remaining bytes of chunk data */
    CH_DATA_CR,   /* CRLF after the data */
    CH_DATA_LF,
    CH_TRAILER,       /* start of a trailer field or of the final CRLF */
    CH_TRAILER_NAME,  /* field name up to ':' */
    CH_TRAILER_VALUE, /* field value up to CR */
    CH_TRAILER_LF,
    CH_END_LF, /* LF ending the body */
    CH_DONE,
    CH_ERROR,
};

void
http_chunked_init(struct http_chunked *c)
{
    memset(c, 0, sizeof(*c));
    c->state = CH_SIZE;
}

/* The names a trailer field may not have: framing, routing, then the
 * fencing headers (forbid[]). Bit i of tmatch stands for name i. */
#define TRAILER_FRAMING 3

static const char *
refused_name(const struct http_chunked *c, size_t i)
{
    static const char *const framing[TRAILER_FRAMING] = {
        "content-length", "transfer-encoding", "host"};

    return i < TRAILER_FRAMING ? framing[i] : c->forbid[i - TRAILER_FRAMING];
}

/* A new trailer field name begins: it may still be any refused name. */
static void
trailer_name_start(struct http_chunked *c)
{
    c->tmatch = 0;
    for (size_t i = 0; i < TRAILER_FRAMING + 2; i++) {
        if (refused_name(c, i) != NULL) {
            c->tmatch |= 1u << i;
        }
    }
    c->tname_len = 0;
}

/* ch is the next byte of the trailer field name: drop the refused names
 * it no longer may be. Compares one byte per name, so a name of any
 * length is checked without being kept. */
static void
trailer_name_byte(struct http_chunked *c, char ch)
{
    for (size_t i = 0; c->tmatch != 0 && i < TRAILER_FRAMING + 2; i++) {
        const char *n = refused_name(c, i);

        if ((c->tmatch & (1u << i)) &&
            (n[c->tname_len] == '\0' ||
             !hname_byte_same(ch, n[c->tname_len]))) {
            c->tmatch &= ~(1u << i);
        }
    }
    c->tname_len++;
}

/* At the colon: whether the whole name is one of the refused ones. */
static const char *
trailer_name_check(const struct http_chunked *c)
{
    for (size_t i = 0; i < TRAILER_FRAMING + 2; i++) {
        if ((c->tmatch & (1u << i)) &&
            refused_name(c, i)[c->tname_len] == '\0') {
            return i < TRAILER_FRAMING ? "framing field in trailer"
                                       : "fencing header in trailer";
        }
    }
    return NULL;
}

static size_t
chunk_fail(struct http_chunked *c, const char *why)
{
    c->state = CH_ERROR;
    c->error = why;
    return (size_t)-1;
}

/* One byte of everything but chunk data. Returns NULL, or why the body
 * is refused. */
static const char *
chunk_byte(struct http_chunked *c, char ch)
{
    int hv;

    switch (c->state) {
    case CH_SIZE:
        if ((hv = ascii_hexval(ch)) < 0) {
            return ch == '\r' ? "empty chunk size"
                              : bad_byte(ch, "invalid chunk size");
        }
        c->remaining = (uint64_t)hv;
        c->line_len = 1;
        c->state = CH_SIZE_MORE;
        return NULL;
    case CH_SIZE_MORE:
        if ((hv = ascii_hexval(ch)) >= 0) {
            if (c->line_len == 16 || c->remaining > (uint64_t)INT64_MAX >> 4) {
                return "chunk size overflows";
            }
            c->remaining = c->remaining << 4 | (uint64_t)hv;
            c->line_len++;
        } else if (ch == ';') {
            c->line_len++;
            c->state = CH_EXT;
        } else if (ch == '\r') {
            c->state = CH_SIZE_LF;
        } else {
            return bad_byte(ch, "invalid chunk size");
        }
        return NULL;
    case CH_EXT:
        if (ch == '\r') {
            c->state = CH_SIZE_LF;
        } else if (!is_text(ch)) {
            return bad_byte(ch, "invalid chunk extension");
        } else if (++c->line_len > CHUNK_LINE_MAX) {
            return "chunk size line too long";
        }
        return NULL;
    case CH_SIZE_LF:
        if (ch != '\n') {
            return "bare CR";
        }
        c->state = c->remaining == 0 ? CH_TRAILER : CH_DATA;
        return NULL;
    case CH_DATA_CR:
        if (ch != '\r') {
            return "no CRLF after chunk data";
        }
        c->state = CH_DATA_LF;
        return NULL;
    case CH_DATA_LF:
        if (ch != '\n') {
            return "bare CR";
        }
        c->state = CH_SIZE;
        return NULL;
    case CH_TRAILER:
        if (ch == '\r') {
            c->state = CH_END_LF;
        } else if (is_tchar(ch)) {
            c->state = CH_TRAILER_NAME;
            trailer_name_start(c);
            trailer_name_byte(c, ch);
        } else {
            return is_ows(ch) ? "obs-fold in trailer"
                              : bad_byte(ch, "invalid trailer field name");
        }
        return NULL;
    case CH_TRAILER_NAME:
        if (ch == ':') {
            c->state = CH_TRAILER_VALUE;
            return trailer_name_check(c);
        } else if (is_tchar(ch)) {
            trailer_name_byte(c, ch);
        } else {
            return is_ows(ch) ? "whitespace before colon in trailer"
                              : bad_byte(ch, "invalid trailer field name");
        }
        return NULL;
    case CH_TRAILER_VALUE:
        if (ch == '\r') {
            c->state = CH_TRAILER_LF;
        } else if (!is_text(ch)) {
            return bad_byte(ch, "control character in trailer");
        }
        return NULL;
    case CH_TRAILER_LF:
        if (ch != '\n') {
            return "bare CR";
        }
        c->state = CH_TRAILER;
        return NULL;
    case CH_END_LF:
        if (ch != '\n') {
            return "bare CR";
        }
        c->state = CH_DONE;
        c->done = true;
        return NULL;
    default:
        return "decoder misused";
    }
}

size_t
http_chunked_feed(struct http_chunked *c, const char *p, size_t n)
{
    size_t i = 0;

    if (c->state == CH_ERROR) {
        return (size_t)-1;
    }
    while (i < n && c->state != CH_DONE) {
        const char *why;

        if (c->state == CH_DATA) {
            size_t take = n - i;

            if (take > c->remaining) {
                take = (size_t)c->remaining;
            }
            i += take;
            c->remaining -= take;
            if (c->remaining == 0) {
                c->state = CH_DATA_CR;
            }
            continue;
        }
        if (c->state >= CH_TRAILER && ++c->trailer_bytes > TRAILER_MAX) {
            return chunk_fail(c, "trailer section over 8 KiB");
        }
        why = chunk_byte(c, p[i]);
        if (why != NULL) {
            return chunk_fail(c, why);
        }
        i++;
    }
    return i;
}

bool
http_chunked_body(const char *p, size_t n, char *out, size_t cap,
                  size_t *outlen)
{
    struct http_chunked c;
    size_t i = 0, o = 0;

    http_chunked_init(&c);
    while (i < n && !c.done) {
        size_t step = 1, used;

        if (c.state == CH_DATA) {
            step = n - i < c.remaining ? n - i : (size_t)c.remaining;
            if (step > cap - o) {
                return false;
            }
            memcpy(out + o, p + i, step);
            o += step;
        }
        used = http_chunked_feed(&c, p + i, step);
        if (used == (size_t)-1) {
            return false;
        }
        i += used;
    }
    *outlen = o;
    return c.done;
}
