"""Stage-1 throughput: the whole pipeline (decode, corrupt, preprocess, forward, write) against the bare forward pass.

Both are timed side by side in one run, alternating, on the same encoder at the same batch size, so
the ratio is robust to a noisy machine; absolute images/s are printed for context only. The bare
forward pass embeds ready-made tensors already in memory, replaying the pipeline's own sequence of
batch sizes; the pipeline runs ``extract_dataset`` on synthetic PNG files into a fresh zarr cache,
making corrupted variants of the test split.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from crs.data import load_dataset
from crs.data.images import load_image
from crs.encoders import create, get_spec
from crs.extract.runner import extract_dataset
from crs.extract.throughput import forward_gflops, store_measurement

ENCODERS = ("resnet50", "vit_base")  # the registry's names for timm resnet50 and vit_base_patch16_224


@dataclass(frozen=True)
class ExtractBenchmark:
    encoder: str
    device: str
    batch_size: int
    images: int
    forward_images: int
    bare_images_per_s: float
    pipeline_images_per_s: float
    ratio: float


def _bare_forward(encoder, images: torch.Tensor, batch_sizes: list[int]) -> float:
    """Seconds to embed in-memory uint8 tensors in exactly the pipeline's sequence of batch sizes."""
    start = time.perf_counter()
    for size in batch_sizes:
        encoder.embed(images[:size].float().div_(255.0))
    if encoder.device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


class _RecordingEncoder:
    """Wraps an encoder and records the batch size of every forward pass the pipeline makes."""

    def __init__(self, encoder: Any) -> None:
        self._encoder = encoder
        self.batch_sizes: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._encoder, name)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        self.batch_sizes.append(int(x.shape[0]))
        return self._encoder.embed(x)


def run_one(name: str, n_images: int = 64, batch_size: int = 16, device: str = "cpu", repeats: int = 3,
            image_size: int = 224, threads: int | None = None) -> ExtractBenchmark:
    encoder = create(name, weights="random", device=device)
    with tempfile.TemporaryDirectory() as folder:
        dataset = load_dataset("synthetic", Path(folder) / "data", modality="chest_xray", n_images=n_images,
                               image_size=image_size)
        variants = [("gaussian_noise", 3), ("jpeg", 3)]
        images = torch.stack([load_image(dataset.root / p, image_size, dataset.fit) for p in dataset.paths[:batch_size]]).to(device)
        encoder.embed(images[:2].float() / 255)  # warm-up
        bare, pipeline, forward = [], [], 0
        for repeat in range(repeats):  # alternate, so both see the same machine load
            recorder = _RecordingEncoder(encoder)
            cache = Path(folder) / f"cache{repeat}"
            start = time.perf_counter()
            stats = extract_dataset(dataset, [recorder], cache, variants, batch_size=batch_size, device=device,
                                    progress=False, threads=threads)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            pipeline.append(time.perf_counter() - start)
            forward = stats.total_forward
            bare.append(_bare_forward(encoder, images, recorder.batch_sizes))
    bare_rate = forward / min(bare)
    pipeline_rate = forward / min(pipeline)
    return ExtractBenchmark(name, device, batch_size, n_images, forward, bare_rate, pipeline_rate,
                            pipeline_rate / bare_rate)


def run(json_out: bool = False, quick: bool = False, device: str = "cpu", save: bool = True,
        threads: int | None = None) -> list[ExtractBenchmark]:
    results = [
        run_one(name, n_images=24 if quick else 64, batch_size=8 if quick else 16, device=device,
                repeats=1 if quick else 3, threads=threads)
        for name in ENCODERS
    ]
    if save and not quick:  # `crs plan` turns these into times for every encoder on this host
        for r in results:
            store_measurement(r.encoder, r.device, r.pipeline_images_per_s, _gflops(r.encoder), threads=threads)
    if json_out:
        print(json.dumps([asdict(r) for r in results], indent=2))
    else:
        for r in results:
            print(
                f"extract {r.encoder:>9} on {r.device}, batch {r.batch_size}: pipeline {r.pipeline_images_per_s:7.1f} "
                f"forward passes/s, bare forward {r.bare_images_per_s:7.1f} /s -> ratio {r.ratio:.2f} "
                f"({r.forward_images} forward passes incl. corrupted variants)"
            )
    return results


def _gflops(name: str) -> float:
    spec = get_spec(name)
    return forward_gflops(name, spec.input_size, spec.input_size)


@dataclass(frozen=True)
class NeighbourBenchmark:
    """Pipeline forward passes/s idle and beside busy processes, for one thread setting."""

    encoder: str
    threads: str
    idle_per_s: float
    beside_busy_per_s: float
    slowdown: float
    busy_processes: int


def _busy_process() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def run_neighbour(name: str = "resnet18", n_images: int = 48, batch_size: int = 16, repeats: int = 2,
                  image_size: int = 96, busy: int = 1, settings: tuple[int | None, ...] = (None, 0),
                  ) -> list[NeighbourBenchmark]:
    """Stage 1 idle and beside ``busy`` busy-loop processes, alternating, per thread setting.

    ``None`` is the default ("auto": the governor); ``0`` stands for the old behaviour (as many
    fixed threads as usable cores). Each repeat measures idle then beside, so both see the same
    machine; the best of the repeats is kept.
    """
    from crs.extract.cores import usable_cores

    results = []
    for setting in settings:
        threads = usable_cores() if setting == 0 else setting
        idle, beside = [], []
        for _ in range(repeats):
            idle.append(run_one(name, n_images, batch_size, "cpu", 1, image_size, threads).pipeline_images_per_s)
            neighbours = [_busy_process() for _ in range(busy)]
            try:
                beside.append(run_one(name, n_images, batch_size, "cpu", 1, image_size, threads).pipeline_images_per_s)
            finally:
                for process in neighbours:
                    process.kill()
                    process.wait()
        label = "auto" if setting is None else f"{threads} fixed"
        results.append(NeighbourBenchmark(name, label, max(idle), max(beside), max(idle) / max(beside), busy))
    return results


def print_neighbour(results: list[NeighbourBenchmark], json_out: bool) -> None:
    if json_out:
        print(json.dumps([asdict(r) for r in results], indent=2))
        return
    for r in results:
        print(f"extract {r.encoder} threads={r.threads}: idle {r.idle_per_s:7.1f} forward passes/s, beside "
              f"{r.busy_processes} busy process(es) {r.beside_busy_per_s:7.1f}/s -> {r.slowdown:.2f}x slower")


if __name__ == "__main__":
    run(json_out="--json" in sys.argv[1:], quick="--quick" in sys.argv[1:],
        device="cuda" if "--cuda" in sys.argv[1:] else "cpu")
