/* hname.h: header names that some server reads as the same name. The one
 * rule behind refusing a fencing or framing header in another spelling,
 * in heads and in trailers. Pure: no I/O, no globals. */
#ifndef TM_HNAME_H
#define TM_HNAME_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Two header names are "the same" when some mainstream server may read
 * them as one field. Byte by byte, after folding ASCII case, every byte
 * that is not a letter or a digit counts as one separator:
 *
 *   - case: every server (RFC 9110 5.1);
 *   - '_' for '-': CGI, FastCGI and SCGI gateways (nginx, Apache
 *     httpd, lighttpd) pass a header as HTTP_<NAME> with '-' turned
 *     into '_', and so do WSGI (gunicorn before 22, Werkzeug,
 *     wsgiref), Rack and PHP; nginx with underscores_in_headers;
 *   - any other punctuation for '-': Apache httpd up to 2.2 turned
 *     every byte that is not a letter or digit into '_' in HTTP_*
 *     (so Fencing.Token and Fencing~Token reached a CGI program as
 *     HTTP_FENCING_TOKEN).
 *
 * Nothing else needs folding here: the strict parser already refuses
 * what other servers trim, drop or fold (whitespace before the colon or
 * at the start of a line, control bytes, NUL, bytes above 0x7e, any
 * byte that is not a token character), and no server we know of drops
 * or decodes bytes inside a name (Transfer-%45ncoding stays itself).
 */

/* Whether the name bytes a and b may be read as the same byte. */
bool hname_byte_same(char a, char b);

/* Whether a[0..alen) and the NUL-terminated b may name the same field
 * (the rule above). */
bool hname_same(const char *a, size_t alen, const char *b);

/* Whether a[0..alen) is b in another spelling: hname_same, but not
 * equal to b ignoring ASCII case (Transfer_Encoding, not
 * transfer-encoding). */
bool hname_variant(const char *a, size_t alen, const char *b);

/* The two above for a b whose length is known (blen == strlen(b)): names
 * of two lengths are never the same, and a length compare is all a
 * parser's miss then costs. */
static inline bool
hname_same_n(const char *a, size_t alen, const char *b, size_t blen)
{
    return alen == blen && hname_same(a, alen, b);
}

static inline bool
hname_variant_n(const char *a, size_t alen, const char *b, size_t blen)
{
    return alen == blen && hname_variant(a, alen, b);
}

#endif
