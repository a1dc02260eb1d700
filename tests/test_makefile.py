"""The install recipe (issue 34 item 10): `make demo CPU=1` installs the pinned torch and torchvision
from PyTorch's CPU wheel index; the default keeps the PyPI wheels. Read with `make -n` in a copy (no
command runs, nothing is installed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PINS = "torch==2.14.1 torchvision==0.29.1"


def _dry_run(tmp_path: Path, *variables: str) -> list[str]:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    done = subprocess.run(["make", "-n", "install", "PYTHON=python3", *variables], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if "pip install" in line and "torch==" in line]


def test_cpu_installs_the_same_pins_from_the_cpu_index(tmp_path):
    (line,) = _dry_run(tmp_path, "CPU=1")
    assert "--index-url https://download.pytorch.org/whl/cpu" in line and line.endswith(PINS)
    (line,) = _dry_run(tmp_path, "CPU=1", "TORCH_INDEX=https://mirror.example/cpu")
    assert "--index-url https://mirror.example/cpu" in line and line.endswith(PINS)


def test_the_default_keeps_the_pypi_wheels(tmp_path):
    (line,) = _dry_run(tmp_path)
    assert "--index-url" not in line and line.endswith(PINS)
