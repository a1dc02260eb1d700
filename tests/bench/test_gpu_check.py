"""scripts/gpu_check.sh at toy sizes on the CPU: every part runs and lands in gpu_check.json and gpu_check.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from crs.bench import gpu

ROOT = Path(__file__).resolve().parents[2]


def test_quick_cpu_run_writes_every_part(tmp_path):
    results = gpu.run("cpu", quick=True, out=tmp_path, encoders=("resnet18",), echo=lambda _: None)
    stored = json.loads((tmp_path / "gpu_check.json").read_text())
    assert set(stored["seconds"]) == {"extraction", "corruptions", "probes", "cuml"}
    (extraction,) = stored["extraction"]
    assert extraction["encoder"] == "resnet18" and extraction["pipeline_images_per_s"] > 0
    assert extraction["channels_last_bf16_images_per_s"] > 0
    suites = {r["modality"]: r for r in stored["corruptions"]}
    assert suites["chest_xray"]["variants_per_image"] == 65 and suites["dermoscopy"]["variants_per_image"] == 80
    assert all(ms > 0 for ms in suites["dermoscopy"]["ms_per_clean_image_by_corruption"].values())
    assert [r["task"] for r in stored["probes"]] == ["isic2019", "chexpert"]
    assert all(r["cpu_1thread_fit_s"] > 0 for r in stored["probes"])
    assert "available" in stored["cuml"]
    text = (tmp_path / "gpu_check.md").read_text()
    assert "QUICK sizes" in text and "| resnet18 |" in text and "failed" not in text
    assert results["machine"]["device"] == "cpu"


def test_script_refuses_cuda_without_a_gpu_in_one_line(tmp_path):
    if os.environ.get("CUDA_VISIBLE_DEVICES") != "" and __import__("torch").cuda.is_available():
        return  # a GPU is here: the refusal cannot be shown
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run([str(ROOT / "scripts" / "gpu_check.sh"), "--out", str(tmp_path), "--parts", "cuml"],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu_check: error: no CUDA device is visible to torch")
