#!/bin/sh
# check-layers.sh: the tree's layers, by what their C files include.
# One line "FILE:LINE: message" per include that breaks a rule; exit 1
# when there is one. The rules:
#   - policies/ is the pure layer: it includes only its own headers, and
#     no header of an I/O library (libevent, LMDB, hiredis, libpq,
#     ZooKeeper) or of sockets and descriptors;
#   - conf/ includes policies/ and, of proxy/, only the public header
#     tidemark.h (config.c implements its configuration calls);
#   - proxy/'s wings stand one above the other, and a wing includes only
#     the wings below it: clients/ (the peers' protocols) < store/ (the
#     mark stores and the fence service) < locks/ < carry/ (the tokens
#     the sidecar carries) < path/ (the data path) < adm/ (the control
#     port);
#   - proxy/'s root holds the process core (proxy.c, proxy_view.c and
#     proxy_int.h: it builds the wings and runs them) and the pieces
#     every wing shares (log, metrics, problem, ...), which include no
#     wing; main.c includes only the public header tidemark.h;
#   - only the core includes proxy_int.h (the whole struct tm_proxy): a
#     wing reads the view the core gives it (path/view.h,
#     adm/proxy_view.h).
set -eu

cd "$(dirname "$0")/.."

# shellcheck disable=SC2046 # the tree's file names have no blanks
set -- $(find policies conf proxy -name '*.[ch]' | LC_ALL=C sort)
awk '
function dir_of(p) {
    sub(/\/[^\/]*$/, "", p)
    return p
}

# The path of the quoted include inc of a file in dir, from the root.
function resolve(dir, inc,    n, i, parts, out, k) {
    n = split(dir "/" inc, parts, "/")
    k = 0
    for (i = 1; i <= n; i++) {
        if (parts[i] == "..") {
            k--
        } else if (parts[i] != "." && parts[i] != "") {
            out[++k] = parts[i]
        }
    }
    inc = out[1]
    for (i = 2; i <= k; i++) {
        inc = inc "/" out[i]
    }
    return inc
}

# The rank of the wing of proxy/ that p is in; 0: none.
function wing(p) {
    if (p ~ /^proxy\/clients\//) return 1
    if (p ~ /^proxy\/store\//) return 2
    if (p ~ /^proxy\/locks\//) return 3
    if (p ~ /^proxy\/carry\//) return 4
    if (p ~ /^proxy\/path\//) return 5
    if (p ~ /^proxy\/adm\//) return 6
    return 0
}

# Whether p is in the root of proxy/ but not of its core.
function shared(p) {
    return p ~ /^proxy\/[^\/]*$/ &&
           p !~ /^proxy\/(proxy\.c|proxy_view\.c|proxy_int\.h|main\.c)$/
}

function bad(msg) {
    printf "%s:%d: %s\n", FILENAME, FNR, msg
    failed = 1
}

/^[ \t]*#[ \t]*include[ \t]*</ {
    h = $0
    sub(/^[^<]*</, "", h)
    sub(/>.*/, "", h)
    if (FILENAME ~ /^policies\// &&
        h ~ /^(event2\/|event\.h|evhttp\.h|lmdb\.h|hiredis\/|libpq-fe\.h|postgresql\/|zookeeper|sys\/socket\.h|sys\/un\.h|sys\/epoll\.h|poll\.h|netinet\/|netdb\.h|unistd\.h|fcntl\.h)/) {
        bad("<" h "> in the pure layer (policies/ does no I/O)")
    }
    next
}

/^[ \t]*#[ \t]*include[ \t]*"/ {
    h = $0
    sub(/^[^"]*"/, "", h)
    sub(/".*/, "", h)
    t = resolve(dir_of(FILENAME), h)
    n++
    if (FILENAME ~ /^policies\// && t !~ /^policies\//) {
        bad(t " from outside policies/ (the pure layer includes only itself)")
    } else if (FILENAME ~ /^conf\// && t ~ /^proxy\// &&
               t != "proxy/tidemark.h") {
        bad(t " in conf/ (of proxy/, conf/ includes only tidemark.h)")
    } else if (wing(t) > wing(FILENAME) && wing(FILENAME) > 0) {
        bad(t " above this wing (clients < store < locks < carry < path < adm)")
    } else if (shared(FILENAME) && wing(t) > 0) {
        bad(t " in a piece the wings share (it includes no wing)")
    } else if (t == "proxy/proxy_int.h" && FILENAME != "proxy/proxy.c" &&
               FILENAME != "proxy/proxy_view.c") {
        bad(t " outside the process core (a wing reads its view)")
    } else if (FILENAME == "proxy/main.c" && t != "proxy/tidemark.h") {
        bad(t " in the daemon (main.c uses tidemark.h alone)")
    }
}

BEGIN {
    failed = 0
    n = 0
}

END {
    if (!failed) {
        printf "check-layers: %d includes keep the layers\n", n
    }
    exit failed
}
' "$@"
