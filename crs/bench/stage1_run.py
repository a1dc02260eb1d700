"""A real stage-1 run for the device check: CheXpert-geometry JPEGs, the chest suite, two encoders.

Writes ``n_images`` greyscale JPEGs of CheXpert-small geometry (320 x 390 px, about 17 KB; real films about 21 KB) in the
official CheXpert layout (``train.csv``, ``train/patientNNNNN/studyK/view1_frontal.jpg``), then runs
``crs extract`` on them through :class:`crs.Benchmark` (the chexpert loader, every corruption of the
chest suite at severities 1-5 on the test split, random weights, the cache on local disk) and
reports forward passes/s end to end against the bare forward pass, with the share of the run that
decoding and corrupting account for (each timed alone on the same images and device).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from PIL import Image

from crs.corruptions import SEVERITIES, suite
from crs.corruptions.api import apply_severities
from crs.data.images import dataset_image

FINDINGS = ("No Finding", "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Opacity", "Lung Lesion", "Edema",
            "Consolidation", "Pneumonia", "Atelectasis", "Pneumothorax", "Pleural Effusion", "Pleural Other",
            "Fracture", "Support Devices")
CHEXPERT_SMALL = (390, 320)  # height, width of CheXpert-v1.0-small films


def write_chexpert_jpegs(root: Path, n_images: int, seed: int = 0, shape: tuple[int, int] = CHEXPERT_SMALL) -> Path:
    """A CheXpert-v1.0-small tree of ``n_images`` frontal films (1-3 per patient) with random labels."""
    rng = np.random.default_rng(seed)
    folder = root / "CheXpert-v1.0-small"
    height, width = shape
    rows: list[dict[str, object]] = []
    coarse = max(4, height // 16), max(4, width // 16)
    patient = 0
    while len(rows) < n_images:
        patient += 1
        for study in range(1, int(rng.integers(1, 4)) + 1):
            if len(rows) >= n_images:
                break
            # Smooth structure plus grain: JPEG sizes near a real film's (about 20 KB).
            base = rng.random(coarse)
            image = np.kron(base, np.ones((16, 16)))[:height, :width]
            image = np.pad(image, ((0, height - image.shape[0]), (0, width - image.shape[1])), mode="edge")
            image = (200 * image + rng.normal(0, 4, (height, width))).clip(0, 255).astype(np.uint8)
            relative = f"train/patient{patient:05d}/study{study}/view1_frontal.jpg"
            (folder / relative).parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(image, mode="L").save(folder / relative, quality=85)
            row = {"Path": f"CheXpert-v1.0-small/{relative}", "Sex": "Female", "Age": 60,
                   "Frontal/Lateral": "Frontal", "AP/PA": "AP"}
            row.update({finding: float(rng.choice([1.0, 0.0, 0.0, -1.0])) for finding in FINDINGS})
            rows.append(row)
    pd.DataFrame(rows).to_csv(folder / "train.csv", index=False)
    return folder


SPEC = """
name = "gpu-stage1"
cache = "{cache}"
output = "{output}"
encoders = [{encoders}]

[extract]
batch_size = {batch_size}
device = "{device}"
corruptions = "all"
severities = [1, 2, 3, 4, 5]

[[datasets]]
name = "chexpert"
loader = "chexpert"
root = "{root}"
options = {{ uncertainty = "mixed", image_size = {image_size}, seed = 0 }}
"""


def _bare_rate(encoder: Any, batch: int, image_size: int, device: str, iterations: int) -> float:
    """Forward passes/s of ``Encoder.embed`` on a ready-made batch already on the device."""
    x = torch.rand(batch, 3, image_size, image_size, device=device)
    encoder.embed(x)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(iterations):
        encoder.embed(x)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return batch * iterations / (time.perf_counter() - started)


def stage1_run(device: str, n_images: int = 3000, encoders: tuple[str, ...] = ("resnet50", "vit_base"),
               batch_size: int = 128, image_size: int = 224, bare_iterations: int = 10,
               input_size: int | None = None) -> dict[str, Any]:
    """Run stage 1 once on generated CheXpert films; return passes/s and the decode and corruption shares."""
    from crs.benchmark import Benchmark
    from crs.encoders import create

    with tempfile.TemporaryDirectory() as work:
        work_path = Path(work)
        started = time.perf_counter()
        write_chexpert_jpegs(work_path / "data", n_images)
        generate_s = time.perf_counter() - started
        names = ", ".join(f'{{ name = "{e}", weights = "random"'
                          + (f", input_size = {input_size}" if input_size else "") + " }" for e in encoders)
        spec_path = work_path / "spec.toml"
        spec_path.write_text(SPEC.format(cache=work_path / "cache", output=work_path / "out", encoders=names,
                                         batch_size=batch_size, device=device, root=work_path / "data",
                                         image_size=image_size))
        bench = Benchmark(spec_path)
        plan = bench.plan()
        stats = bench.extract(progress=False)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        wall = stats.seconds

        # Each component alone, on the same images and device.
        from crs.data import load_entry

        dataset = load_entry(bench.spec.datasets[0])
        started = time.perf_counter()
        images = [dataset_image(dataset, i) for i in range(len(dataset))]
        decode_s = time.perf_counter() - started
        test = torch.stack([images[i] for i in dataset.indices("test")]).to(device)
        started = time.perf_counter()
        for start in range(0, len(test), batch_size):
            chunk = test[start:start + batch_size]
            ids = [str(i) for i in range(start, start + len(chunk))]
            for name in suite("chest_xray"):
                apply_severities(chunk, "chest_xray", name, list(SEVERITIES), ids)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        corrupt_s = time.perf_counter() - started
        bare = {}
        for name in encoders:
            encoder = create(name, weights="random", device=device, input_size=input_size)
            bare[name] = _bare_rate(encoder, batch_size, image_size, device, bare_iterations)
    bare_s = sum(stats.forward_images[name] / bare[name] for name in encoders)
    return {
        "device": device, "images": len(dataset), "test_images": int(len(dataset.indices("test"))),
        "encoders": list(encoders), "batch_size": batch_size, "generate_s": generate_s,
        "forward_passes": stats.total_forward, "planned_passes": plan.passes, "wall_s": wall,
        "passes_per_s": stats.total_forward / wall,
        "bare_passes_per_s": {name: rate for name, rate in bare.items()},
        "bare_forward_s": bare_s, "pipeline_over_bare": bare_s / wall,
        "decode_s": decode_s, "decode_share": decode_s / wall,
        "corrupt_s": corrupt_s, "corrupt_share": corrupt_s / wall,
    }
