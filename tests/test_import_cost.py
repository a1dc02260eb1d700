"""The stages that never touch an image start without the libraries only extraction needs.

torchvision costs about 2 s to import (it loads ``torch._dynamo``), torch about 1.5 s, timm and
open_clip more: paid by every ``crs score`` and ``crs report`` process and by every stage of the
paper-scale bench, they were 3 x 7-15 s of its 15-encoder total. Each check runs in a fresh
interpreter, so what an earlier test imported does not count.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

EXTRACTION_ONLY = ("torchvision", "timm", "open_clip", "transformers")


@pytest.mark.parametrize("module, absent", [
    ("crs.benchmark", ("torch",) + EXTRACTION_ONLY),  # Benchmark: each stage imports its own modules when run
    ("crs.evaluate.stage", EXTRACTION_ONLY),
    ("crs.report", EXTRACTION_ONLY),
    ("crs.cli.main", ("torch",) + EXTRACTION_ONLY),  # bench, corruptions, encoders, init: loaded when run
    ("crs.corruptions", EXTRACTION_ONLY),  # the suites' definitions; torchvision loads on the first corruption
    # what a stage-2 worker imports to run a torch-backend unit: scikit-learn, scipy.stats and scipy.signal
    # (about 2 CPU s per process, paid by each worker) only load where a backend or axis uses them
    ("crs.evaluate.units", ("sklearn", "scipy.stats", "scipy.signal") + EXTRACTION_ONLY),
])
def test_importing_leaves_the_extraction_libraries_unloaded(module, absent):
    code = f"import sys, {module}; print(sorted(m for m in {absent!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.strip() == "[]", f"importing {module} loaded {result.stdout.strip()}"


def test_a_corruption_still_loads_torchvision_when_it_runs():
    code = ("import sys, torch; from crs.corruptions import apply; "
            "apply(torch.rand(1, 3, 16, 16), 'dermoscopy', 'brightness_up', 3, ['a']); print('torchvision' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"
