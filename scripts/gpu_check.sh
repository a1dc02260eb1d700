#!/usr/bin/env bash
# GPU check: one run of a few minutes on a machine with a CUDA GPU (see docs/performance.md, "GPU check").
#
#   scripts/gpu_check.sh                       # on the GPU machine; results to $OUT or ./gpu-check
#   scripts/gpu_check.sh --device cpu --quick  # smoke run anywhere, in seconds (figures mean nothing)
#
# Measures ViT-B/16 and ResNet-50 extraction (pipeline vs bare forward, bf16, channels-last), the chest
# and dermoscopy corruption suites per clean image, the torch probe backend at paper size on the GPU vs
# one CPU thread, cuML parity when cuml imports, and zero-shot cost (text towers, prompt sets, prediction).
# Writes gpu_check.json and gpu_check.md.
#
# Python packages crs needs that the GPU image may lack (zarr and its dependencies) can travel as
# wheels in .whl/ (fetch them on a machine with internet access with scripts/gpu_wheels.sh); they are
# installed into /tmp/site first when that folder exists.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
missing=$("$PYTHON" - <<'PY'
import importlib.util
names = ["torch", "timm", "zarr", "numcodecs", "donfig", "google_crc32c", "h5py", "pandas", "scipy", "sklearn",
         "threadpoolctl", "psutil", "click", "PIL", "tqdm"]
print(" ".join(n for n in names if importlib.util.find_spec(n) is None))
PY
)
if [ -n "$missing" ]; then
    echo "gpu_check: missing Python packages: $missing (carry them as wheels in .whl/: scripts/gpu_wheels.sh)" >&2
    exit 3
fi
exec "$PYTHON" -m crs.bench.gpu "$@"
