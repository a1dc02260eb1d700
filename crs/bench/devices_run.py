"""The device check's two-device step: stage 1 on one device, then one worker per device
(``crs extract --devices``), on the same generated CheXpert films; the stores must be bit-identical.

On a machine with one GPU (or none) the step says so and measures nothing; ``--device cpu --quick``
runs it with two CPU workers (a smoke run, figures mean nothing).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import zarr

from crs.bench.stage1_run import SPEC, write_chexpert_jpegs


def _arrays(store: Path) -> dict[str, bytes]:
    root = zarr.open_group(str(store), mode="r")
    return {name: np.asarray(node[...]).tobytes() for name, node in root.members(max_depth=None)
            if isinstance(node, zarr.Array)}


def devices_run(device: str, n_images: int, encoders: tuple[str, ...], batch_size: int, image_size: int,
                input_size: int | None = None) -> dict[str, Any]:
    """Passes/s on one device and on every device (one worker each), and whether the caches agree."""
    from crs.benchmark import Benchmark
    from crs.extract.devices import extract_on_devices

    if device.startswith("cuda"):
        count = torch.cuda.device_count()
        if count < 2:
            return {"skipped": f"{count} CUDA device(s) here; the two-device step needs 2 or more"}
        devices = [f"cuda:{k}" for k in range(count)]
    else:
        devices = ["cpu", "cpu"]
    with tempfile.TemporaryDirectory() as work:
        work_path = Path(work)
        write_chexpert_jpegs(work_path / "data", n_images)
        names = ", ".join(f'{{ name = "{e}", weights = "random"'
                          + (f", input_size = {input_size}" if input_size else "") + " }" for e in encoders)
        seconds, passes = {}, {}
        for label, workers in (("one", None), ("all", devices)):
            spec_path = work_path / f"{label}.toml"
            spec_path.write_text(SPEC.format(cache=work_path / f"cache-{label}", output=work_path / f"out-{label}",
                                             encoders=names, batch_size=batch_size, device=devices[0],
                                             root=work_path / "data", image_size=image_size))
            bench = Benchmark(spec_path)
            started = time.perf_counter()
            stats = bench.extract(progress=False) if workers is None else extract_on_devices(bench.spec, workers)
            seconds[label] = time.perf_counter() - started
            passes[label] = stats.total_forward
        same = _arrays(work_path / "cache-one" / "chexpert.zarr") == _arrays(work_path / "cache-all" / "chexpert.zarr")
    return {"devices": devices, "passes": passes["one"], "passes_all_workers": passes["all"],
            "seconds_one_device": seconds["one"], "seconds_all_devices": seconds["all"],
            "speedup": seconds["one"] / seconds["all"] if seconds["all"] else None, "bit_identical": same}
