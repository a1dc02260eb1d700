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
    assert set(stored["seconds"]) == {"extraction", "corruptions", "probes", "cuml", "stage1", "devices"}
    (extraction,) = stored["extraction"]
    assert extraction["encoder"] == "resnet18" and extraction["pipeline_images_per_s"] > 0
    assert extraction["channels_last_bf16_images_per_s"] > 0
    suites = {r["modality"]: r for r in stored["corruptions"]}
    assert suites["chest_xray"]["variants_per_image"] == 65 and suites["dermoscopy"]["variants_per_image"] == 80
    assert all(ms > 0 for ms in suites["dermoscopy"]["ms_per_clean_image_by_corruption"].values())
    assert [r["task"] for r in stored["probes"]] == ["isic2019", "chexpert"]
    assert all(r["cpu_1thread_fit_s"] > 0 for r in stored["probes"])
    assert "available" in stored["cuml"]
    stage1 = stored["stage1"]
    assert "error" not in stage1, stage1
    # 30 films; every test film through 13 corruptions x 5 severities, every film clean, per encoder.
    assert stage1["images"] == 30 and stage1["forward_passes"] == 30 + 65 * stage1["test_images"]
    assert stage1["forward_passes"] == stage1["planned_passes"] and stage1["passes_per_s"] > 0
    assert stage1["decode_s"] > 0 and stage1["corrupt_s"] > 0 and stage1["pipeline_over_bare"] > 0
    text = (tmp_path / "gpu_check.md").read_text()
    assert "QUICK sizes" in text and "| resnet18 |" in text and "failed" not in text
    assert "## Stage 1 on CheXpert-geometry JPEGs" in text
    # The two-device step: on the CPU, two CPU workers; their cache is the one process's, bit for bit.
    devices = stored["devices"]
    assert devices["devices"] == ["cpu", "cpu"] and devices["bit_identical"] is True, devices
    assert devices["passes"] == devices["passes_all_workers"] == stage1["forward_passes"]
    assert "## Stage 1 on every device" in text
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
