"""Stage-1 throughput: the whole pipeline (decode, corrupt, preprocess, forward, write) against the bare forward pass.

Both are timed side by side in one run, alternating, on the same encoder at the same batch size, so
the ratio is robust to a noisy machine; absolute images/s are printed for context only. The bare
forward pass embeds ready-made tensors already in memory, replaying the pipeline's own sequence of
batch sizes; the pipeline runs ``extract_dataset`` on synthetic PNG files into a fresh zarr cache,
making corrupted variants of the test split.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from crs.data import load_dataset
from crs.data.images import load_image
from crs.encoders import create
from crs.extract.runner import extract_dataset

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
            image_size: int = 224) -> ExtractBenchmark:
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
                                    progress=False)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            pipeline.append(time.perf_counter() - start)
            forward = stats.total_forward
            bare.append(_bare_forward(encoder, images, recorder.batch_sizes))
    bare_rate = forward / min(bare)
    pipeline_rate = forward / min(pipeline)
    return ExtractBenchmark(name, device, batch_size, n_images, forward, bare_rate, pipeline_rate,
                            pipeline_rate / bare_rate)


def run(json_out: bool = False, quick: bool = False, device: str = "cpu") -> list[ExtractBenchmark]:
    results = [
        run_one(name, n_images=24 if quick else 64, batch_size=8 if quick else 16, device=device,
                repeats=1 if quick else 3)
        for name in ENCODERS
    ]
    if json_out:
        print(json.dumps([asdict(r) for r in results], indent=2))
    else:
        for r in results:
            print(
                f"extract {r.encoder:>9} on {r.device}, batch {r.batch_size}: pipeline {r.pipeline_images_per_s:7.1f} img/s, "
                f"bare forward {r.bare_images_per_s:7.1f} img/s -> ratio {r.ratio:.2f} "
                f"({r.forward_images} forward images incl. corrupted variants)"
            )
    return results


if __name__ == "__main__":
    run(json_out="--json" in sys.argv[1:], quick="--quick" in sys.argv[1:],
        device="cuda" if "--cuda" in sys.argv[1:] else "cpu")
