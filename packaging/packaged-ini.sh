#!/bin/sh
# packaged-ini.sh: write the packaged /etc/tidemark/tidemark.ini to stdout.
# It is conf/tidemark.ini with the lmdb files in the service's state
# directory (/var/lib/tidemark): one source. packaging/tidemark.ini is its
# output, checked in for the Debian build; make check-docs fails when the
# two differ (make packaged-ini writes it again).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
sed 's|^path = \./data/\([a-z]*\)\.lmdb *;|path = /var/lib/tidemark/\1.lmdb ;|' \
    "$top/conf/tidemark.ini"
