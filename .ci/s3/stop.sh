#!/usr/bin/env bash
# Stop the S3 server that start.sh started (its own pid file only); its log stays in the folder.
set -uo pipefail
DIR=${CRS_S3_DIR:-/tmp/crs-s3}
if [ -s "$DIR/moto.pid" ]; then
    pid=$(cat "$DIR/moto.pid")
    kill "$pid" 2>/dev/null && for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
    rm -f "$DIR/moto.pid" "$DIR/url"
fi
echo "s3: stopped" >&2
