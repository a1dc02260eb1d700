"""Throughput of the full chest-X-ray corruption suite on CPU at 224 px, batched torch vs a per-image loop.

The reference is the loop a careful user writes without this package: for each image and each
variant, the same definition with PIL, numpy and scipy on the grey film (float32 numpy noise,
``numpy.random.Generator.poisson``, ``scipy.ndimage.gaussian_filter`` with the same 3-sigma
truncation and mirror border, PIL ImageEnhance for brightness and contrast, a PIL ``point`` table
for gamma, PIL BOX / NEAREST resizes, PIL JPEG). The batched side is
``apply_severities(batch, "chest_xray", name, (1..5), ids)``, one call per corruption, the way
stage 1 uses it. Both run in one process, one thread each, interleaved corruption by corruption;
each figure is the best of ``repeats`` rounds of CPU time (the machine is shared, so wall time
is noisy). Run it with ``python -m crs.bench.corruptions [--json] [--markdown]``.
"""

from __future__ import annotations

import io
import json
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
from PIL import Image, ImageEnhance
from scipy import ndimage

from crs.corruptions import SEVERITIES, apply, corruption, suite
from crs.corruptions.api import apply_severities
from crs.corruptions.ops import REFERENCE_SIDE
from crs.corruptions.scenes import scenes

MODALITY = "chest_xray"


@dataclass(frozen=True)
class CorruptionTiming:
    """CPU microseconds per image for one corruption: per severity both ways, and all severities batched."""

    name: str
    reference_us: tuple[float, ...]  # per-image PIL / numpy / scipy loop, severities 1..5
    batched_us: tuple[float, ...]  # apply(batch, ..., severity) per severity
    batched_all_severities_us: float  # apply_severities(batch, ..., (1..5)): all five at once
    speedup: float  # sum(reference_us) / batched_all_severities_us


@dataclass(frozen=True)
class CorruptionBenchmark:
    images: int
    size: int
    variants: int
    torch_threads: int
    repeats: int
    batched_variants_per_s: float
    reference_variants_per_s: float
    speedup: float
    per_corruption: tuple[CorruptionTiming, ...]


def _to_uint8(x: np.ndarray) -> np.ndarray:
    return np.rint(np.clip(x, 0, 1) * 255).astype(np.uint8)


def _reference_variant(image: Image.Image, name: str, severity: int, rng: np.random.Generator) -> np.ndarray:
    """One grey film under one corruption, the per-image PIL / numpy / scipy way (same definitions)."""
    p = corruption(MODALITY, name).parameter(severity)
    if name in ("brightness_up", "brightness_down"):
        return np.asarray(ImageEnhance.Brightness(image).enhance(p))
    if name in ("contrast_up", "contrast_down"):
        return np.asarray(ImageEnhance.Contrast(image).enhance(p))
    if name in ("gamma_up", "gamma_down"):
        return np.asarray(image.point([round(255 * (v / 255) ** p) for v in range(256)]))
    if name == "pixelate":
        w, h = image.size
        small = image.resize((int(w * p), int(h * p)), Image.Resampling.BOX)
        return np.asarray(small.resize((w, h), Image.Resampling.NEAREST))
    if name == "jpeg":
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=p)
        buffer.seek(0)
        return np.asarray(Image.open(buffer).convert("L"))
    x = np.asarray(image, dtype=np.float32) / np.float32(255)
    if name == "gaussian_noise":
        return _to_uint8(x + np.float32(p) * rng.standard_normal(x.shape, dtype=np.float32))
    if name == "shot_noise":
        return _to_uint8(rng.poisson(x * p) / p)
    if name == "impulse_noise":
        u = rng.random(x.shape, dtype=np.float32)  # one draw decides flip (u < p) and salt (u < p / 2)
        return _to_uint8(np.where(u < p, (u < p / 2).astype(np.float32), x))
    if name == "speckle_noise":
        return _to_uint8(x + x * (np.float32(p) * rng.standard_normal(x.shape, dtype=np.float32)))
    if name == "gaussian_blur":
        sigma = p * image.width / REFERENCE_SIDE
        return _to_uint8(ndimage.gaussian_filter(x, sigma, truncate=3.0, mode="mirror"))
    raise ValueError(f"no reference for {name!r}")


def _cpu_seconds(call) -> float:
    start = time.process_time()
    call()
    return time.process_time() - start


def run(
    json_out: bool = False,
    images: int = 16,
    size: int = 224,
    torch_threads: int = 1,
    repeats: int = 3,
    markdown_out: bool = False,
) -> CorruptionBenchmark:
    """Time the suite both ways on ``images`` synthetic films; print and return the figures.

    ``torch_threads`` defaults to 1 so the ratio compares one core with one core (PIL, numpy and
    scipy run single-threaded here). Costs paid once per process (the Poisson alias tables) are
    paid in a warm-up call before timing, as stage 1 pays them once for the whole data set.
    """
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(torch_threads)
    try:
        batch = scenes(MODALITY, images, size, seed=7)
        ids = [f"bench{i}" for i in range(images)]
        grey = [Image.fromarray(image[0].numpy()) for image in batch]
        rng = np.random.default_rng(0)
        names = suite(MODALITY)
        for name in names:  # warm-up: allocator, kernels, one-time tables
            apply_severities(batch[:2], MODALITY, name, SEVERITIES, ids[:2])
        best_reference = {(n, s): float("inf") for n in names for s in SEVERITIES}
        best_batched = dict(best_reference)
        best_all = dict.fromkeys(names, float("inf"))
        for _ in range(repeats):
            for name in names:
                for severity in SEVERITIES:
                    seconds = _cpu_seconds(
                        lambda n=name, s=severity: [_reference_variant(g, n, s, rng) for g in grey]
                    )
                    best_reference[name, severity] = min(best_reference[name, severity], seconds)
                    seconds = _cpu_seconds(lambda n=name, s=severity: apply(batch, MODALITY, n, s, ids))
                    best_batched[name, severity] = min(best_batched[name, severity], seconds)
                seconds = _cpu_seconds(lambda n=name: apply_severities(batch, MODALITY, n, SEVERITIES, ids))
                best_all[name] = min(best_all[name], seconds)
    finally:
        torch.set_num_threads(previous_threads)

    per_image_us = 1e6 / images
    timings = tuple(
        CorruptionTiming(
            name=name,
            reference_us=tuple(best_reference[name, s] * per_image_us for s in SEVERITIES),
            batched_us=tuple(best_batched[name, s] * per_image_us for s in SEVERITIES),
            batched_all_severities_us=best_all[name] * per_image_us,
            speedup=sum(best_reference[name, s] for s in SEVERITIES) / best_all[name],
        )
        for name in names
    )
    reference_seconds = sum(best_reference.values())
    batched_seconds = sum(best_all.values())
    done = images * len(names) * len(SEVERITIES)
    result = CorruptionBenchmark(
        images=images,
        size=size,
        variants=len(names) * len(SEVERITIES),
        torch_threads=torch_threads,
        repeats=repeats,
        batched_variants_per_s=done / batched_seconds,
        reference_variants_per_s=done / reference_seconds,
        speedup=reference_seconds / batched_seconds,
        per_corruption=timings,
    )
    if json_out:
        print(json.dumps(asdict(result)))
    elif markdown_out:
        print(markdown(result))
    else:
        print(
            f"chest_xray suite, {images} images x {result.variants} variants at {size} px, "
            f"torch threads {torch_threads}, best CPU time of {repeats}:\n"
            f"  batched torch       {result.batched_variants_per_s:9.1f} images x variants / s\n"
            f"  per-image PIL/numpy {result.reference_variants_per_s:9.1f} images x variants / s\n"
            f"  ratio               {result.speedup:9.2f}x"
        )
    return result


def markdown(result: CorruptionBenchmark) -> str:
    """The per-corruption table of ``docs/corruptions.md``: CPU microseconds per image and variant."""
    lines = [
        "| corruption | reference µs, severity 1..5 | batched `apply` µs, severity 1..5 | "
        "batched `apply_severities` µs per variant | ratio |",
        "|---|---|---|---|---|",
    ]
    for t in result.per_corruption:
        lines.append(
            f"| {t.name} | {' / '.join(f'{v:.0f}' for v in t.reference_us)} | "
            f"{' / '.join(f'{v:.0f}' for v in t.batched_us)} | "
            f"{t.batched_all_severities_us / len(t.batched_us):.0f} | {t.speedup:.1f}x |"
        )
    lines.append(
        f"| **suite** | {1e6 / result.reference_variants_per_s:.0f} per variant | | "
        f"{1e6 / result.batched_variants_per_s:.0f} per variant | **{result.speedup:.2f}x** |"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    arguments = sys.argv[1:]
    run(json_out="--json" in arguments, markdown_out="--markdown" in arguments)
