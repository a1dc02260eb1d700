"""Throughput of the full chest-X-ray corruption suite on CPU at 224 px, batched torch vs a per-image loop.

The reference is what a script without this package would do: for each image and each variant,
apply the same definition with PIL and numpy (numpy noise, PIL Gaussian blur, ImageEnhance,
numpy gamma, PIL BOX/NEAREST resize, PIL JPEG). Both run in one process, side by side, on the
same images; the figure is images x variants per second and their ratio. Run it with
``python -m crs.bench.corruptions [--json]``.
"""

from __future__ import annotations

import io
import json
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
from PIL import Image, ImageEnhance, ImageFilter

from crs.corruptions import SEVERITIES, apply, corruption, suite
from crs.corruptions.ops import REFERENCE_SIDE
from crs.corruptions.scenes import scenes

MODALITY = "chest_xray"


@dataclass(frozen=True)
class CorruptionBenchmark:
    images: int
    size: int
    variants: int
    torch_threads: int
    batched_variants_per_s: float
    reference_variants_per_s: float
    speedup: float


def _reference_variant(image: Image.Image, name: str, severity: int, rng: np.random.Generator) -> np.ndarray:
    """One grey film under one corruption, the per-image PIL / numpy way (same definitions)."""
    p = corruption(MODALITY, name).parameter(severity)
    if name in ("brightness_up", "brightness_down"):
        return np.asarray(ImageEnhance.Brightness(image).enhance(p))
    if name in ("contrast_up", "contrast_down"):
        return np.asarray(ImageEnhance.Contrast(image).enhance(p))
    if name == "gaussian_blur":
        return np.asarray(image.filter(ImageFilter.GaussianBlur(radius=p * image.width / REFERENCE_SIDE)))
    if name == "pixelate":
        w, h = image.size
        small = image.resize((int(w * p), int(h * p)), Image.Resampling.BOX)
        return np.asarray(small.resize((w, h), Image.Resampling.NEAREST))
    if name == "jpeg":
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=p)
        buffer.seek(0)
        return np.asarray(Image.open(buffer).convert("L"))
    x = np.asarray(image, dtype=np.float32) / 255
    if name == "gaussian_noise":
        x = x + rng.normal(size=x.shape, scale=p)
    elif name == "shot_noise":
        x = rng.poisson(x * p) / p
    elif name == "impulse_noise":
        flipped = rng.random(x.shape) < p
        x = np.where(flipped, (rng.random(x.shape) < 0.5).astype(np.float32), x)
    elif name == "speckle_noise":
        x = x + x * rng.normal(size=x.shape, scale=p)
    elif name in ("gamma_up", "gamma_down"):
        x = x**p
    else:
        raise ValueError(f"no reference for {name!r}")
    return (np.clip(x, 0, 1) * 255).round().astype(np.uint8)


def run(
    json_out: bool = False, images: int = 16, size: int = 224, torch_threads: int = 1
) -> CorruptionBenchmark:
    """Time the suite both ways on ``images`` synthetic films; print and return the figures.

    ``torch_threads`` defaults to 1 so the ratio compares one core with one core (PIL and numpy
    run single-threaded here).
    """
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(torch_threads)
    try:
        batch = scenes(MODALITY, images, size, seed=7)
        ids = [f"bench{i}" for i in range(images)]
        pairs = [(name, severity) for name in suite(MODALITY) for severity in SEVERITIES]
        apply(batch[:2], MODALITY, "gaussian_blur", 1, ids[:2])  # warm-up (allocator, kernels)

        start = time.perf_counter()
        for name, severity in pairs:
            apply(batch, MODALITY, name, severity, ids)
        batched_seconds = time.perf_counter() - start

        grey = [Image.fromarray(image[0].numpy()) for image in batch]
        rng = np.random.default_rng(0)
        start = time.perf_counter()
        for image in grey:
            for name, severity in pairs:
                _reference_variant(image, name, severity, rng)
        reference_seconds = time.perf_counter() - start
    finally:
        torch.set_num_threads(previous_threads)

    done = images * len(pairs)
    result = CorruptionBenchmark(
        images=images,
        size=size,
        variants=len(pairs),
        torch_threads=torch_threads,
        batched_variants_per_s=done / batched_seconds,
        reference_variants_per_s=done / reference_seconds,
        speedup=reference_seconds / batched_seconds,
    )
    if json_out:
        print(json.dumps(asdict(result)))
    else:
        print(
            f"chest_xray suite, {images} images x {len(pairs)} variants at {size} px, torch threads {torch_threads}:\n"
            f"  batched torch      {result.batched_variants_per_s:9.1f} images x variants / s\n"
            f"  per-image PIL/numpy {result.reference_variants_per_s:8.1f} images x variants / s\n"
            f"  ratio              {result.speedup:9.2f}x"
        )
    return result


if __name__ == "__main__":
    run(json_out="--json" in sys.argv[1:])
