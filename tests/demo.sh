#!/bin/sh
# make demo: install what is needed, build, start the demo backend on
# 127.0.0.1:8080 and run tidemark in front of it with conf/tidemark.ini.
# Ctrl-C stops both.
set -eu
cd "$(dirname "$0")/.."

# Only what building and running the demo needs; make test installs the
# rest (make deps).
sh tests/deps.sh demo
make all

up_pid=""
cleanup() {
    if [ -n "$up_pid" ]; then
        kill "$up_pid" 2>/dev/null || true
        wait "$up_pid" 2>/dev/null || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# Something else answering on 8080 would take the demo's requests.
if curl -s -o /dev/null http://127.0.0.1:8080/; then
    echo "demo: port 8080 is busy: stop what listens there first" >&2
    exit 1
fi

python3 tests/demo_upstream.py --host 127.0.0.1 --port 8080 &
up_pid=$!

# Wait for the backend, so the first request through tidemark is not a 502.
i=0
until curl -s -o /dev/null http://127.0.0.1:8080/; do
    if ! kill -0 "$up_pid" 2>/dev/null; then
        echo "demo: the demo upstream did not start (is port 8080 busy?)" >&2
        exit 1
    fi
    i=$((i + 1))
    if [ "$i" -gt 50 ]; then
        echo "demo: the demo upstream does not answer on 127.0.0.1:8080" >&2
        exit 1
    fi
    sleep 0.1
done

cat <<'TRY'
demo: tidemark runs in front of the demo upstream. In another terminal:
  curl -i -X PUT -H 'Fencing-Token: 5' -d v5 localhost:7070/v1/documents/a
  curl -i -X PUT -H 'Fencing-Token: 4' -d v4 localhost:7070/v1/documents/a
  curl -i localhost:7070/v1/documents/a
The second PUT is refused with 409; the upstream's log lines show that
Fencing-Token never reaches it. Ctrl-C stops both.
TRY

./tidemark -c conf/tidemark.ini
