#!/usr/bin/env bash
# A local S3 API server for the tests (tests/cache/s3/): moto's standalone server (`moto[server]`, the one
# s3fs's own tests run against) on 127.0.0.1, a real HTTP server, never an in-process patch of the client.
# Prints its URL on stdout (messages go to stderr); stop it with stop.sh.
#   CRS_S3_DIR    (default /tmp/crs-s3): pid file, log and url file
#   CRS_S3_PORT   (default 9550): the port; refused (exit 1) when taken
#   CRS_S3_PYTHON (default .venv/bin/python, else python3): the interpreter that has moto[server]
# Exits 1 with a message when the server cannot start: the tests then start their own (or skip, saying why).
set -uo pipefail
cd "$(dirname "$0")/../.."
DIR=${CRS_S3_DIR:-/tmp/crs-s3}
PORT=${CRS_S3_PORT:-9550}
PY=${CRS_S3_PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
say() { echo "s3: $*" >&2; }
mkdir -p "$DIR"
if ! "$PY" -c "import moto.server, flask" 2>/dev/null; then
    say "moto[server] is not installed for $PY (pip install 'moto[server]'); no server started"; exit 1
fi
if ! "$PY" -c "import socket, sys; s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1])))" "$PORT" 2>/dev/null; then
    say "port $PORT on 127.0.0.1 is taken; set CRS_S3_PORT to a free one"; exit 1
fi
setsid nohup "$PY" -m moto.server -H 127.0.0.1 -p "$PORT" >"$DIR/moto.log" 2>&1 < /dev/null &
echo $! > "$DIR/moto.pid"
URL="http://127.0.0.1:$PORT"
for _ in $(seq 60); do
    if "$PY" -c "import urllib.request, sys; urllib.request.urlopen(sys.argv[1] + '/moto-api/', timeout=1)" "$URL" 2>/dev/null; then
        echo "$URL" > "$DIR/url"
        say "moto server on $URL (pid $(cat "$DIR/moto.pid"), log $DIR/moto.log)"
        echo "$URL"
        exit 0
    fi
    kill -0 "$(cat "$DIR/moto.pid")" 2>/dev/null || break
    sleep 0.5
done
say "moto server did not answer on $URL (log $DIR/moto.log)"
kill "$(cat "$DIR/moto.pid")" 2>/dev/null; rm -f "$DIR/moto.pid"
exit 1
