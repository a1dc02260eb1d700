#!/usr/bin/env bash
# Fetch, on a machine with internet access, the wheels gpu_check.sh needs that the GPU image lacks
# (zarr 3 and its dependencies), for Python 3.12 on x86-64 Linux, into .whl/ (keep it out of git:
# `echo /.whl/ >> .git/info/exclude`). The device tool then carries it: run(..., carry=[".whl"]).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
"$PYTHON" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
    "zarr==3.1.6" "numcodecs==0.16.6" "donfig==0.8.1.post1" "google-crc32c==1.9.0" "typing_extensions==4.16.0"
ls -l .whl
