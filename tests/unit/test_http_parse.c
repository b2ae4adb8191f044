/* test_http_parse.c: the strict HTTP/1.1 parser's request heads: valid
 * heads, every framing refusal, limits, prefixes and pipelining, and heads
 * that arrive a byte at a time. */
#include "http_test.h"

/* Requests: the result, and for HTTP_OK the framing. */
struct req_case {
    const char *name;
    const char *raw;
    size_t len;
    enum http_rc rc;
    enum http_body body;
    uint64_t cl;
    bool keep_alive;
    bool expect;
};

#define H11 "GET / HTTP/1.1\r\nHost: a\r\n"
#define P11 "POST /p HTTP/1.1\r\nHost: a\r\n"
#define P10 "POST /p HTTP/1.0\r\n"
#define OK_(name, raw, body, cl, ka, ex)                                       \
    {                                                                          \
        name, S(raw), HTTP_OK, body, cl, ka, ex                                \
    }
#define ERR(name, raw, rc)                                                     \
    {                                                                          \
        name, S(raw), rc, HTTP_BODY_NONE, 0, false, false                      \
    }

static const struct req_case req_cases[] = {
    /* Valid forms. */
    OK_("minimal", H11 "\r\n", HTTP_BODY_NONE, 0, true, false),
    OK_("1.0 no host", "GET / HTTP/1.0\r\n\r\n", HTTP_BODY_NONE, 0, false,
        false),
    OK_("1.0 keep-alive", "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
        HTTP_BODY_NONE, 0, true, false),
    OK_("1.0 keep-alive and close",
        "GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n",
        HTTP_BODY_NONE, 0, false, false),
    OK_("1.1 close", H11 "Connection: close\r\n\r\n", HTTP_BODY_NONE, 0, false,
        false),
    OK_("1.1 close in list", H11 "Connection: foo,\t CLOSE ,\r\n\r\n",
        HTTP_BODY_NONE, 0, false, false),
    OK_("1.1 close in second field",
        H11 "Connection: upgrade\r\nConnection: close\r\n\r\n", HTTP_BODY_NONE,
        0, false, false),
    OK_("content-length", P11 "Content-Length: 5\r\n\r\n", HTTP_BODY_LENGTH, 5,
        true, false),
    OK_("content-length 0 is no body", P11 "Content-Length: 0\r\n\r\n",
        HTTP_BODY_NONE, 0, true, false),
    OK_("content-length leading zeros", P11 "content-length: 007\r\n\r\n",
        HTTP_BODY_LENGTH, 7, true, false),
    OK_("content-length OWS", P11 "Content-Length: \t 12 \t\r\n\r\n",
        HTTP_BODY_LENGTH, 12, true, false),
    OK_("content-length max", P11 "Content-Length: 9223372036854775807\r\n\r\n",
        HTTP_BODY_LENGTH, INT64_MAX, true, false),
    OK_("content-length 1.0", P10 "Content-Length: 3\r\n\r\n", HTTP_BODY_LENGTH,
        3, false, false),
    OK_("chunked", P11 "Transfer-Encoding: chunked\r\n\r\n", HTTP_BODY_CHUNKED,
        0, true, false),
    OK_("chunked any case", P11 "transfer-encoding: ChUnKeD\r\n\r\n",
        HTTP_BODY_CHUNKED, 0, true, false),
    OK_("chunked after empty elements",
        P11 "Transfer-Encoding: ,\r\nTransfer-Encoding: , chunked ,\r\n\r\n",
        HTTP_BODY_CHUNKED, 0, true, false),
    OK_("expect 100-continue", P11 "Expect: 100-Continue\r\n\r\n",
        HTTP_BODY_NONE, 0, true, true),
    OK_("expect other", P11 "Expect: something\r\n\r\n", HTTP_BODY_NONE, 0,
        true, false),
    OK_("expect on 1.0 ignored", P10 "Expect: 100-continue\r\n\r\n",
        HTTP_BODY_NONE, 0, false, false),
    OK_("leading CRLFs", "\r\n\r\n\r\n\r\n" H11 "\r\n", HTTP_BODY_NONE, 0, true,
        false),
    OK_("options *", "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_BODY_NONE, 0,
        true, false),
    OK_("absolute-form", "GET http://a.example/x?y HTTP/1.1\r\nHost: b\r\n\r\n",
        HTTP_BODY_NONE, 0, true, false),
    OK_("absolute-form https port",
        "GET HTTPS://A.example:8443/ HTTP/1.1\r\nHost: a\r\n\r\n",
        HTTP_BODY_NONE, 0, true, false),
    OK_("host with port", "GET / HTTP/1.1\r\nHost: a.example:80\r\n\r\n",
        HTTP_BODY_NONE, 0, true, false),
    OK_("host ipv6", "GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n",
        HTTP_BODY_NONE, 0, true, false),
    OK_("host escaped", "GET / HTTP/1.1\r\nHost: a%2Db\r\n\r\n", HTTP_BODY_NONE,
        0, true, false),
    OK_("host empty", "GET / HTTP/1.1\r\nHost:\r\n\r\n", HTTP_BODY_NONE, 0,
        true, false),
    OK_("host empty port", "GET / HTTP/1.1\r\nHost: a:\r\n\r\n", HTTP_BODY_NONE,
        0, true, false),
    OK_("value text",
        H11 "X-A: \x80\xff tab\there ~!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}\r\n"
            "\r\n",
        HTTP_BODY_NONE, 0, true, false),
    OK_("empty value", H11 "X-Empty:\r\nX-Blank:   \r\n\r\n", HTTP_BODY_NONE, 0,
        true, false),
    OK_("long value with tab",
        H11 "Cookie: aaaaaaaaaaaaaaaaaaaaaaa\tbbbbbbbbbbbbbbbbbbbbbbbb\r\n\r\n",
        HTTP_BODY_NONE, 0, true, false),
    OK_("token method", "M-SEARCH /x HTTP/1.1\r\nHost: a\r\n\r\n",
        HTTP_BODY_NONE, 0, true, false),
    OK_("target charset",
        "GET /!$%&'()*+,-./0:;<=>?@[\\]^_`{|}~\"x HTTP/1.1\r\nHost: a\r\n\r\n",
        HTTP_BODY_NONE, 0, true, false),
    OK_("connection transfer-encoding",
        P11 "Connection: transfer-encoding\r\n"
            "Transfer-Encoding: chunked\r\n\r\n",
        HTTP_BODY_CHUNKED, 0, true, false),

    /* Line ends and field syntax. */
    ERR("bare LF request line", "GET / HTTP/1.1\nHost: a\r\n\r\n", HTTP_BAD),
    ERR("bare LF field", H11 "X: a\n\r\n", HTTP_BAD),
    ERR("bare LF end", H11 "\n", HTTP_BAD),
    ERR("bare LF leading", "\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_BAD),
    ERR("bare CR request line", "GET / HTTP/1.1\rHost: a\r\n\r\n", HTTP_BAD),
    ERR("bare CR value", H11 "X: a\rb\r\n\r\n", HTTP_BAD),
    ERR("bare CR end", H11 "\rX\r\n", HTTP_BAD),
    ERR("bare CR leading", "\rGET / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_BAD),
    ERR("bare CR in target", "GET /a\rb HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_BAD),
    ERR("CR CR LF", H11 "X: a\r\r\n\r\n", HTTP_BAD),
    ERR("obs-fold", H11 "X: a\r\n b\r\n\r\n", HTTP_BAD),
    ERR("obs-fold tab", H11 "X: a\r\n\tb\r\n\r\n", HTTP_BAD),
    ERR("first field folded", "GET / HTTP/1.1\r\n Host: a\r\n\r\n", HTTP_BAD),
    ERR("space before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", HTTP_BAD),
    ERR("tab before colon", H11 "X\t: a\r\n\r\n", HTTP_BAD),
    ERR("no colon", H11 "Xa\r\n\r\n", HTTP_BAD),
    ERR("empty name", H11 ": a\r\n\r\n", HTTP_BAD),
    ERR("bad name char", H11 "X(y): a\r\n\r\n", HTTP_BAD),
    ERR("name obs-text", H11 "X\xe9: a\r\n\r\n", HTTP_BAD),
    ERR("NUL in value", H11 "X: a\0b\r\n\r\n", HTTP_BAD),
    ERR("NUL in name", H11 "X\0: a\r\n\r\n", HTTP_BAD),
    ERR("CTL in value", H11 "X: a\x01\r\n\r\n", HTTP_BAD),
    ERR("DEL in value", H11 "X: a\x7f\r\n\r\n", HTTP_BAD),
    ERR("ESC in long value", H11 "X: aaaaaaaaaaaaa\x1b bbbbbbbbbbbb\r\n\r\n",
        HTTP_BAD),

    /* Request line. */
    ERR("empty method", " / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_BAD),
    ERR("bad method", "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_BAD),
    ERR("method only", "GET\r\nHost: a\r\n\r\n", HTTP_BAD),
    ERR("double space", "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_BAD),
    ERR("tab separator", "GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_BAD),
    ERR("space in target", "GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_BAD),
    ERR("trailing space", "GET / HTTP/1.1 \r\nHost: a\r\n\r\n", HTTP_BAD),
    ERR("HTTP/0.9", "GET /\r\n\r\n", HTTP_BAD),
    ERR("target DEL", "GET /a\x7f HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_BAD),
    ERR("target obs-text", "GET /caf\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n",
        HTTP_BAD),
    ERR("target CTL", "GET /a\x01 HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_BAD),
    ERR("target NUL", "GET /aaaaaaaaaaaa\0 HTTP/1.1\r\nHost: a\r\n\r\n",
        HTTP_BAD),
    ERR("target fragment", "GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_BAD),
    ERR("CONNECT", "CONNECT a.example:443 HTTP/1.1\r\nHost: a\r\n\r\n",
        HTTP_BAD),
    ERR("CONNECT origin-form", "CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n",
        HTTP_BAD),
    ERR("authority-form", "GET a.example:80 HTTP/1.1\r\nHost: a\r\n\r\n",
        HTTP_BAD),
    ERR("star without OPTIONS", "GET * HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_BAD),
    ERR("star with more", "OPTIONS *x HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_BAD),
    ERR("absolute no path", "GET http://a HTTP/1.1\r\nHost: a\r\n\r\n",
        HTTP_BAD),
    ERR("absolute query no path", "GET http://a?x HTTP/1.1\r\nHost: a\r\n\r\n",
        HTTP_BAD),
    ERR("absolute userinfo", "GET http://u@a/ HTTP/1.1\r\nHost: a\r\n\r\n",
        HTTP_BAD),
    ERR("absolute empty host", "GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n",
        HTTP_BAD),
    ERR("absolute other scheme", "GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n",
        HTTP_BAD),
    ERR("too many empty lines",
        "\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_BAD),
    ERR("version 1.2", "GET / HTTP/1.2\r\nHost: a\r\n\r\n", HTTP_BAD_VERSION),
    ERR("version 2.0", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", HTTP_BAD_VERSION),
    ERR("version 0.9", "GET / HTTP/0.9\r\n\r\n", HTTP_BAD_VERSION),
    ERR("version garbage", "GET / HTTP/x\r\nHost: a\r\n\r\n", HTTP_BAD),
    ERR("version short", "GET / HTTP/1\r\nHost: a\r\n\r\n", HTTP_BAD),
    ERR("version lower case", "GET / http/1.1\r\nHost: a\r\n\r\n", HTTP_BAD),
    ERR("version 1.10", "GET / HTTP/1.10\r\nHost: a\r\n\r\n", HTTP_BAD),
    ERR("version 11.1", "GET / HTTP/11.1\r\nHost: a\r\n\r\n", HTTP_BAD),
    ERR("version 2.0 space", "GET / HTTP/2.0 \r\nHost: a\r\n\r\n", HTTP_BAD),

    /* Transfer-Encoding. */
    ERR("gzip alone", P11 "Transfer-Encoding: gzip\r\n\r\n", HTTP_BAD),
    ERR("gzip then chunked", P11 "Transfer-Encoding: gzip, chunked\r\n\r\n",
        HTTP_NOT_IMPL),
    ERR("gzip then chunked fields",
        P11 "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n",
        HTTP_NOT_IMPL),
    ERR("coding with quoted parameter",
        P11 "Transfer-Encoding: x;q=\"a, chunked\", chunked\r\n\r\n",
        HTTP_NOT_IMPL),
    ERR("chunked not last", P11 "Transfer-Encoding: chunked, gzip\r\n\r\n",
        HTTP_BAD),
    ERR("chunked not last fields",
        P11 "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n",
        HTTP_BAD),
    ERR("chunked twice", P11 "Transfer-Encoding: chunked, chunked\r\n\r\n",
        HTTP_BAD),
    ERR("chunked twice fields",
        P11 "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        HTTP_BAD),
    ERR("chunked with parameter", P11 "Transfer-Encoding: chunked;a=b\r\n\r\n",
        HTTP_BAD),
    ERR("chunked and junk", P11 "Transfer-Encoding: chunked x\r\n\r\n",
        HTTP_BAD),
    ERR("te empty", P11 "Transfer-Encoding:\r\n\r\n", HTTP_BAD),
    ERR("te identity", P11 "Transfer-Encoding: identity\r\n\r\n", HTTP_BAD),
    ERR("te bad token", P11 "Transfer-Encoding: \"chunked\"\r\n\r\n", HTTP_BAD),
    ERR("te on 1.0", P10 "Transfer-Encoding: chunked\r\n\r\n", HTTP_BAD),
    ERR("te and cl",
        P11 "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
        HTTP_BAD),
    ERR("cl and te",
        P11 "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        HTTP_BAD),
    ERR("cl 0 and te",
        P11 "Content-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n",
        HTTP_BAD),

    /* Content-Length. */
    ERR("cl plus", P11 "Content-Length: +5\r\n\r\n", HTTP_BAD),
    ERR("cl minus", P11 "Content-Length: -5\r\n\r\n", HTTP_BAD),
    ERR("cl hex", P11 "Content-Length: 0x5\r\n\r\n", HTTP_BAD),
    ERR("cl empty", P11 "Content-Length:\r\n\r\n", HTTP_BAD),
    ERR("cl inner space", P11 "Content-Length: 1 2\r\n\r\n", HTTP_BAD),
    ERR("cl list", P11 "Content-Length: 5, 5\r\n\r\n", HTTP_BAD),
    ERR("cl list no space", P11 "Content-Length: 5,5\r\n\r\n", HTTP_BAD),
    ERR("cl trailing junk", P11 "Content-Length: 5a\r\n\r\n", HTTP_BAD),
    ERR("cl duplicate equal",
        P11 "Content-Length: 5\r\ncontent-length: 5\r\n\r\n", HTTP_BAD),
    ERR("cl duplicate different",
        P11 "Content-Length: 5\r\nContent-Length: 6\r\n\r\n", HTTP_BAD),
    ERR("cl 2^63", P11 "Content-Length: 9223372036854775808\r\n\r\n", HTTP_BAD),
    ERR("cl 19 nines", P11 "Content-Length: 9999999999999999999\r\n\r\n",
        HTTP_BAD),
    ERR("cl 20 digits", P11 "Content-Length: 00000000000000000001\r\n\r\n",
        HTTP_BAD),
    ERR("cl huge", P11 "Content-Length: 123456789012345678901234567890\r\n\r\n",
        HTTP_BAD),

    /* Host. */
    ERR("no host on 1.1", "GET / HTTP/1.1\r\n\r\n", HTTP_BAD),
    ERR("two hosts", H11 "Host: a\r\n\r\n", HTTP_BAD),
    ERR("two hosts 1.0", "GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n",
        HTTP_BAD),
    ERR("host space", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", HTTP_BAD),
    ERR("host slash", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", HTTP_BAD),
    ERR("host userinfo", "GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", HTTP_BAD),
    ERR("host bad port", "GET / HTTP/1.1\r\nHost: a:b\r\n\r\n", HTTP_BAD),
    ERR("host port only", "GET / HTTP/1.1\r\nHost: :80\r\n\r\n", HTTP_BAD),
    ERR("host open bracket", "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", HTTP_BAD),
    ERR("host empty brackets", "GET / HTTP/1.1\r\nHost: []\r\n\r\n", HTTP_BAD),
    ERR("host bad escape", "GET / HTTP/1.1\r\nHost: a%zz\r\n\r\n", HTTP_BAD),
    ERR("host short escape", "GET / HTTP/1.1\r\nHost: a%2\r\n\r\n", HTTP_BAD),
    ERR("host obs-text", "GET / HTTP/1.1\r\nHost: \xe9\r\n\r\n", HTTP_BAD),

    /* Framing and fencing headers in a spelling some server reads as
     * theirs (hname.h): refused, never forwarded as ordinary fields. */
    ERR("te underscore", P11 "Transfer_Encoding: chunked\r\n\r\n", HTTP_BAD),
    ERR("te underscore beside cl",
        P11 "Transfer_Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
        HTTP_BAD),
    ERR("te dot", P11 "transfer.encoding: chunked\r\n\r\n", HTTP_BAD),
    ERR("te tilde upper", P11 "TRANSFER~ENCODING: chunked\r\n\r\n", HTTP_BAD),
    ERR("cl underscore", P11 "Content_Length: 5\r\n\r\n", HTTP_BAD),
    ERR("cl underscore beside cl",
        P11 "Content-Length: 5\r\ncontent_length: 50\r\n\r\n", HTTP_BAD),
    ERR("cl plus", P11 "Content+Length: 5\r\n\r\n", HTTP_BAD),
    ERR("cl backquote", P11 "content`length: 5\r\n\r\n", HTTP_BAD),
    ERR("token underscore", H11 "Fencing_Token: 5\r\n\r\n", HTTP_BAD),
    ERR("token dot lower", H11 "fencing.token: 5\r\n\r\n", HTTP_BAD),
    ERR("token underscore beside token",
        H11 "Fencing-Token: 5\r\nFENCING_TOKEN: 9\r\n\r\n", HTTP_BAD),
    ERR("resource underscore", H11 "Fencing_Resource: r\r\n\r\n", HTTP_BAD),
    ERR("resource star", H11 "Fencing*Resource: r\r\n\r\n", HTTP_BAD),
    OK_("token exact, any case", H11 "fENCING-tOKEN: 5\r\n\r\n", HTTP_BODY_NONE,
        0, true, false),
    OK_("token longer name", H11 "Fencing_Token_X: 5\r\n\r\n", HTTP_BODY_NONE,
        0, true, false),
    OK_("te shorter name", P11 "Transfer_Encodin: chunked\r\n\r\n",
        HTTP_BODY_NONE, 0, true, false),
    OK_("te percent-encoded stays a name",
        P11 "Transfer-%45ncoding: chunked\r\nContent-Length: 1\r\n\r\n",
        HTTP_BODY_LENGTH, 1, true, false),
    OK_("content-encoding chunked",
        P11 "Content-Encoding: chunked\r\n"
            "Content-Length: 1\r\n\r\n",
        HTTP_BODY_LENGTH, 1, true, false),

    /* Connection. */
    ERR("connection content-length",
        P11 "Connection: content-length\r\n"
            "Content-Length: 5\r\n\r\n",
        HTTP_BAD),
    ERR("connection host", H11 "Connection: close, Host\r\n\r\n", HTTP_BAD),
    ERR("connection not a token", H11 "Connection: close close\r\n\r\n",
        HTTP_BAD),
    ERR("connection 33 options",
        H11 "Connection: a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t,u,v,w,x,y,"
            "z,aa,bb,cc,dd,ee,ff,gg\r\n\r\n",
        HTTP_BAD),
};

static void
check_req_case(const struct req_case *c)
{
    static struct http_header req_headers[HTTP_MAX_HEADERS];
    static struct http_request req = {.headers = req_headers};
    char *b = dup_exact(c->raw, c->len);
    enum http_rc rc = http_parse_request(b, c->len, &lim_std, fence, &req);

    if (rc != c->rc) {
        fail_msg("%s: rc %d, want %d (%s)", c->name, rc, c->rc,
                 req.error != NULL ? req.error : "-");
    }
    if (rc == HTTP_OK) {
        if (req.head_len != c->len || req.body != c->body ||
            req.content_length != c->cl || req.keep_alive != c->keep_alive ||
            req.expect_continue != c->expect) {
            fail_msg("%s: head_len %zu body %d cl %llu ka %d expect %d",
                     c->name, req.head_len, req.body,
                     (unsigned long long)req.content_length, req.keep_alive,
                     req.expect_continue);
        }
        assert_in(req.method, b, c->len);
        assert_in(req.target, b, c->len);
        assert_in(req.path, b, c->len);
        for (size_t h = 0; h < req.nheaders; h++) {
            assert_in(req.headers[h].name, b, c->len);
            assert_in(req.headers[h].value, b, c->len);
        }
    }
    free(b);
}

static void
test_request_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < NELEM(req_cases); i++) {
        check_req_case(&req_cases[i]);
    }
}

/* Every prefix of a head is HTTP_INCOMPLETE or already the final answer:
 * for a valid head, always HTTP_INCOMPLETE. */
static void
test_request_prefixes(void **state)
{
    (void)state;
    for (size_t i = 0; i < NELEM(req_cases); i++) {
        const struct req_case *c = &req_cases[i];

        for (size_t k = 0; k < c->len; k++) {
            enum http_rc rc = req_rc(c->raw, k, &lim_std);

            if (rc != HTTP_INCOMPLETE && (c->rc == HTTP_OK || rc != c->rc)) {
                fail_msg("%s: prefix %zu gives %d", c->name, k, rc);
            }
        }
    }
}

/* A valid head followed by more bytes: the same head, and the rest is
 * the next request. */
static void
test_request_pipelined(void **state)
{
    static const char next[] = "DELETE /z HTTP/1.1\r\nHost: z\r\n\r\n";
    static struct http_header req_headers[HTTP_MAX_HEADERS];
    static struct http_request req = {.headers = req_headers};

    (void)state;
    for (size_t i = 0; i < NELEM(req_cases); i++) {
        const struct req_case *c = &req_cases[i];
        size_t n = c->len + sizeof(next) - 1;
        char *b;

        if (c->rc != HTTP_OK) {
            continue;
        }
        b = malloc(n);
        assert_non_null(b);
        memcpy(b, c->raw, c->len);
        memcpy(b + c->len, next, sizeof(next) - 1);
        assert_int_equal(http_parse_request(b, n, &lim_std, fence, &req),
                         HTTP_OK);
        assert_int_equal(req.head_len, c->len);
        assert_int_equal(http_parse_request(b + req.head_len, n - c->len,
                                            &lim_std, fence, &req),
                         HTTP_OK);
        assert_int_equal(req.head_len, sizeof(next) - 1);
        assert_true(slice_eq(req.method, "DELETE"));
        assert_true(slice_eq(req.path, "/z"));
        free(b);
    }
}

static void
test_request_fields(void **state)
{
    static const char raw[] =
        "\r\nPUT /a/b?c=d&e HTTP/1.1\r\nHost: h.example\r\n"
        "X-Pad: \t  v a l  \t\r\nX-Empty:\r\nContent-Length: 3\r\n\r\nabc";
    static struct http_header req_headers[HTTP_MAX_HEADERS];
    static struct http_request req = {.headers = req_headers};

    (void)state;
    assert_int_equal(
        http_parse_request(raw, sizeof(raw) - 1, &lim_std, fence, &req),
        HTTP_OK);
    assert_int_equal(req.head_len, sizeof(raw) - 1 - 3);
    assert_true(slice_eq(req.method, "PUT"));
    assert_true(slice_eq(req.target, "/a/b?c=d&e"));
    assert_true(slice_eq(req.path, "/a/b"));
    assert_int_equal(req.minor, 1);
    assert_int_equal(req.nheaders, 4);
    assert_true(slice_eq(req.headers[0].name, "Host"));
    assert_true(slice_eq(req.headers[0].value, "h.example"));
    assert_true(slice_eq(req.headers[1].value, "v a l"));
    assert_int_equal(req.headers[2].value.len, 0);
    assert_int_equal(
        http_find_header(req.headers, req.nheaders, 0, "content-LENGTH"), 3);
    assert_int_equal(http_find_header(req.headers, req.nheaders, 0, "x-pad"),
                     1);
    assert_int_equal(http_find_header(req.headers, req.nheaders, 2, "x-pad"),
                     -1);
    assert_int_equal(http_find_header(req.headers, req.nheaders, 0, "X-Pa"),
                     -1);
    assert_int_equal(http_find_header(req.headers, req.nheaders, 9, "Host"),
                     -1);

    static const char absf[] =
        "GET http://h.example:8080/p/q?r HTTP/1.0\r\n\r\n";
    assert_int_equal(
        http_parse_request(absf, sizeof(absf) - 1, &lim_std, fence, &req),
        HTTP_OK);
    assert_true(slice_eq(req.target, "http://h.example:8080/p/q?r"));
    assert_true(slice_eq(req.path, "/p/q"));
    assert_int_equal(req.minor, 0);

    static const char star[] = "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n";
    assert_int_equal(
        http_parse_request(star, sizeof(star) - 1, &lim_std, fence, &req),
        HTTP_OK);
    assert_true(slice_eq(req.path, "*"));
}

static void
test_request_hop(void **state)
{
    static const char raw[] = "GET / HTTP/1.1\r\nHost: a\r\n"
                              "Connection: X-Foo, keep-alive\r\n" /* 1 */
                              "Keep-Alive: 5\r\n"
                              "Proxy-Connection: x\r\n"
                              "TE: trailers\r\n"
                              "Trailer: X-Sum\r\n" /* 5 */
                              "Upgrade: h2c\r\n"
                              "Proxy-Authorization: x\r\n"
                              "Proxy-Authenticate: x\r\n"
                              "x-foo: named\r\n"
                              "X-Bar: not named\r\n" /* 10 */
                              "Via: 1.1 a\r\n"
                              "Authorization: x\r\n"
                              "connection: x-bar\r\n"
                              "Transfer-Encoding: chunked\r\n"
                              "Content-Type: text/plain\r\n" /* 15 */
                              "\r\n";
    static const bool hop[] = {false, true, true, true, true, true,
                               true,  true, true, true, true, false,
                               false, true, true, false};
    static struct http_header req_headers[HTTP_MAX_HEADERS];
    static struct http_request req = {.headers = req_headers};

    (void)state;
    assert_int_equal(
        http_parse_request(raw, sizeof(raw) - 1, &lim_std, fence, &req),
        HTTP_OK);
    assert_int_equal(req.nheaders, NELEM(hop));
    for (size_t i = 0; i < NELEM(hop); i++) {
        if (req.headers[i].hop != hop[i]) {
            fail_msg("header %zu (%.*s): hop %d", i,
                     (int)req.headers[i].name.len, req.headers[i].name.p,
                     req.headers[i].hop);
        }
    }
    assert_int_equal(req.body, HTTP_BODY_CHUNKED);
    assert_true(req.keep_alive);
}

static void
test_request_limits(void **state)
{
    struct http_limits lim = {8192, 4, 16};
    static struct http_header req_headers[HTTP_MAX_HEADERS];
    static struct http_request req = {.headers = req_headers};
    char big[20000];
    size_t n;

    (void)state;
    /* Header count: 4 fit, the 5th is refused before the head ends. */
    assert_int_equal(req_rc(S("GET / HTTP/1.1\r\nHost: a\r\nB: 1\r\nC: 1\r\n"
                              "D: 1\r\n\r\n"),
                            &lim),
                     HTTP_OK);
    assert_int_equal(req_rc(S("GET / HTTP/1.1\r\nHost: a\r\nB: 1\r\nC: 1\r\n"
                              "D: 1\r\nE"),
                            &lim),
                     HTTP_HEAD_TOO_LARGE);

    /* The configured count is capped at HTTP_MAX_HEADERS. */
    lim.max_headers = 1000;
    n = (size_t)sprintf(big, "GET / HTTP/1.1\r\nHost: a\r\n");
    for (int i = 1; i < HTTP_MAX_HEADERS; i++) {
        n += (size_t)sprintf(big + n, "X%d: v\r\n", i);
    }
    memcpy(big + n, "\r\n", 2);
    assert_int_equal(req_rc(big, n + 2, &lim), HTTP_OK);
    n += (size_t)sprintf(big + n, "Y: v\r\n\r\n");
    assert_int_equal(req_rc(big, n, &lim), HTTP_HEAD_TOO_LARGE);

    /* URI length: max_uri bytes fit, one more is 414 as soon as seen. */
    lim.max_headers = 4;
    assert_int_equal(req_rc(S("GET /234567890123456 HTTP/1.1\r\nHost: a\r\n"
                              "\r\n"),
                            &lim),
                     HTTP_OK);
    assert_int_equal(req_rc(S("GET /2345678901234567 HTTP/1.1\r\nHost: a\r\n"
                              "\r\n"),
                            &lim),
                     HTTP_URI_TOO_LONG);
    assert_int_equal(req_rc(S("GET /2345678901234567"), &lim),
                     HTTP_URI_TOO_LONG);
    assert_int_equal(req_rc(S("GET /234567890123456"), &lim), HTTP_INCOMPLETE);

    /* Head size: exactly max_head bytes fit; without an end by max_head
     * bytes, 431, whatever follows. */
    static const char h[] = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    size_t hl = sizeof(h) - 1;
    lim.max_head = hl;
    assert_int_equal(req_rc(h, hl, &lim), HTTP_OK);
    assert_int_equal(req_rc(h, hl - 1, &lim), HTTP_INCOMPLETE);
    lim.max_head = hl - 1;
    assert_int_equal(req_rc(h, hl - 2, &lim), HTTP_INCOMPLETE);
    assert_int_equal(req_rc(h, hl - 1, &lim), HTTP_HEAD_TOO_LARGE);
    assert_int_equal(req_rc(h, hl, &lim), HTTP_HEAD_TOO_LARGE);
    lim.max_head = 0;
    assert_int_equal(req_rc(h, 0, &lim), HTTP_HEAD_TOO_LARGE);

    /* A long stream of valid field lines reaches 431, not 400. */
    lim = lim_std;
    n = (size_t)sprintf(big, "GET / HTTP/1.1\r\nHost: a\r\nX: ");
    memset(big + n, 'v', sizeof(big) - n);
    assert_int_equal(req_rc(big, lim.max_head - 1, &lim), HTTP_INCOMPLETE);
    assert_int_equal(req_rc(big, lim.max_head, &lim), HTTP_HEAD_TOO_LARGE);
    assert_int_equal(req_rc(big, sizeof(big), &lim), HTTP_HEAD_TOO_LARGE);
    assert_int_equal(http_parse_request(big, sizeof(big), &lim, fence, &req),
                     HTTP_HEAD_TOO_LARGE);
    assert_non_null(req.error);
    assert_int_equal(req_rc("", 0, &lim), HTTP_INCOMPLETE);
}

/* ---- heads that arrive a byte at a time -------------------------------- */

/* Feed buf[0..len) one more byte per call, as reads bring them, each
 * call seeing an exact-size copy (ASan sees a read past the bytes come
 * so far); at the end, once more as final. The search must look at each
 * byte a bounded number of times and the whole parse run a bounded
 * number of times: the work is linear, where parsing from the start at
 * every read is quadratic. Returns the result and its length in *at. */
static enum http_rc
req_bytewise(const char *raw, size_t len, const struct http_limits *lim,
             struct http_request *req, size_t *at)
{
    struct http_scan sc = {0};
    enum http_rc rc = HTTP_INCOMPLETE;
    size_t k;

    for (k = 1; k <= len && rc == HTTP_INCOMPLETE; k++) {
        char *b = dup_exact(raw, k);

        rc = http_parse_request_more(&sc, b, k, false, lim, fence, req);
        free(b);
    }
    *at = k - 1;
    if (rc == HTTP_INCOMPLETE) {
        rc = http_parse_request_more(&sc, raw, len, true, lim, fence, req);
    }
    assert_true(sc.looked <= 3 * len);
    /* Once per empty line (at most 4 leading ones and the end), once at
     * the end of the input. */
    assert_true(sc.parses <= 6);
    return rc;
}

/* Every head of the table, a byte at a time: the result of one read of
 * the whole head; HTTP_OK only once the last byte is in, with the same
 * head; an error at the latest at the end, and the same one. */
static void
test_request_bytewise(void **state)
{
    static struct http_header one_headers[HTTP_MAX_HEADERS];
    static struct http_header more_headers[HTTP_MAX_HEADERS];
    static struct http_request one = {.headers = one_headers};
    static struct http_request more = {.headers = more_headers};

    (void)state;
    for (size_t i = 0; i < NELEM(req_cases); i++) {
        const struct req_case *c = &req_cases[i];
        enum http_rc want =
            http_parse_request(c->raw, c->len, &lim_std, fence, &one);
        size_t at;
        enum http_rc rc = req_bytewise(c->raw, c->len, &lim_std, &more, &at);

        if (rc != want) {
            fail_msg("%s: bytewise rc %d, one read %d", c->name, rc, want);
        }
        if (rc != HTTP_OK) {
            continue;
        }
        assert_int_equal(at, c->len);
        assert_int_equal(more.head_len, one.head_len);
        assert_int_equal(more.nheaders, one.nheaders);
        assert_int_equal(more.body, one.body);
        assert_int_equal(more.content_length, one.content_length);
        assert_int_equal(more.keep_alive, one.keep_alive);
        assert_int_equal(more.method.len, one.method.len);
        assert_int_equal(more.target.len, one.target.len);
    }
}

/* A long head (a 7 KiB field value) a byte at a time: linear work, one
 * whole parse; over max_head, 431 at max_head as with one read. */
static void
test_request_bytewise_long(void **state)
{
    static struct http_header req_headers[HTTP_MAX_HEADERS];
    static struct http_request req = {.headers = req_headers};
    static char big[8000];
    struct http_limits lim = lim_std;
    size_t n, at;

    (void)state;
    n = (size_t)sprintf(big, "PUT /d HTTP/1.1\r\nHost: a\r\nX: ");
    memset(big + n, 'v', sizeof(big) - n - 4);
    memcpy(big + sizeof(big) - 4, "\r\n\r\n", 4);
    assert_int_equal(req_bytewise(big, sizeof(big), &lim, &req, &at), HTTP_OK);
    assert_int_equal(at, sizeof(big));
    assert_int_equal(req.head_len, sizeof(big));
    assert_int_equal(req.nheaders, 2);

    lim.max_head = 4096;
    assert_int_equal(req_bytewise(big, sizeof(big), &lim, &req, &at),
                     HTTP_HEAD_TOO_LARGE);
    assert_int_equal(at, lim.max_head);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_table),
        cmocka_unit_test(test_request_prefixes),
        cmocka_unit_test(test_request_pipelined),
        cmocka_unit_test(test_request_fields),
        cmocka_unit_test(test_request_hop),
        cmocka_unit_test(test_request_limits),
        cmocka_unit_test(test_request_bytewise),
        cmocka_unit_test(test_request_bytewise_long),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
