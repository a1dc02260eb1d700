"""Throughput of the full chest-X-ray corruption suite on CPU at 224 px: batched torch vs two per-image loops.

Two per-image baselines run on the same grey films, in the same interleaved loop:

* **MedMNIST-C's published per-image loop** (``medmnistc==0.1.0``, Di Salvo et al. 2024), whose
  ``chestmnist`` suite our ``chest_xray`` suite follows. Each corruption is the package's own class
  (``GaussianNoise``, ``ShotNoise``, ``ImpulseNoise``, ``SpeckleNoise``, ``Brightness``, ``Contrast``,
  ``GammaCorrection``, ``Pixelate``, ``JPEGCompression``) built with OUR chest_xray severity parameters, so
  both sides compute the same corruption strengths, and called as ``obj.apply(pil_image, severity=s - 1)``.
  The films go in as one-channel PIL mode "L" images, which is cheaper for the package than RGB, so the
  comparison favours it. Gaussian blur is the exception: ``medmnistc.corruptions.filter`` needs ``wand``
  (ImageMagick) to import, so we make its ``GaussianBlur.apply`` call directly,
  ``np.array(torchvision.transforms.functional.gaussian_blur(pil, kernel_size=k)).astype(np.uint8)``, with
  ``k = 2 * max(1, ceil(3 * sigma)) + 1`` from our sigma (our kernel's size, so the same cost class; the
  package derives its own sigma from ``k``). Install it with
  ``pip install --no-deps medmnistc==0.1.0 opencv-python-headless`` (its declared dependencies pin an old
  scikit-image and ImageMagick; only the noise, enhance and compression modules are used). Without it the
  bench still runs and its MedMNIST-C figures are ``None``.
* **The tuned same-definition loop** (``_reference_variant``): the loop a careful user writes without this
  package, computing our definitions with PIL, numpy and scipy on the grey film (float32 numpy noise,
  ``numpy.random.Generator.poisson``, ``scipy.ndimage.gaussian_filter`` with the same 3-sigma truncation
  and mirror border, PIL ImageEnhance for brightness and contrast, a PIL ``point`` table for gamma, PIL
  BOX / NEAREST resizes, PIL JPEG). It is faster than MedMNIST-C's loop, so it is the harder baseline.

The batched side is ``apply_severities(batch, "chest_xray", name, (1..5), ids)``, one call per
corruption, the way stage 1 uses it. Everything runs in one process, one thread each, interleaved
corruption by corruption; each figure is the best of ``repeats`` rounds of CPU time (the machine is
shared, so wall time is noisy). Run it with ``python -m crs.bench.corruptions [--json] [--markdown]``.
"""

from __future__ import annotations

import io
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch
from PIL import Image, ImageEnhance
from scipy import ndimage

from crs.corruptions import SEVERITIES, apply, corruption, suite
from crs.corruptions.api import apply_severities
from crs.corruptions.context import REFERENCE_SIDE
from crs.corruptions.scenes import scenes

MODALITY = "chest_xray"
MEDMNISTC_INSTALL = "pip install --no-deps medmnistc==0.1.0 opencv-python-headless"


@dataclass(frozen=True)
class CorruptionTiming:
    """CPU microseconds per image for one corruption: per severity each way, and all severities batched."""

    name: str
    reference_us: tuple[float, ...]  # tuned same-definition per-image loop, severities 1..5
    batched_us: tuple[float, ...]  # apply(batch, ..., severity) per severity
    batched_all_severities_us: float  # apply_severities(batch, ..., (1..5)): all five at once
    speedup: float  # sum(reference_us) / batched_all_severities_us
    medmnistc_us: tuple[float, ...] | None  # MedMNIST-C 0.1.0 per-image loop, severities 1..5
    speedup_vs_medmnistc: float | None  # sum(medmnistc_us) / batched_all_severities_us


@dataclass(frozen=True)
class CorruptionBenchmark:
    images: int
    size: int
    variants: int
    torch_threads: int
    repeats: int
    batched_variants_per_s: float
    reference_variants_per_s: float  # tuned same-definition per-image loop
    speedup: float  # batched over the tuned same-definition loop
    per_corruption: tuple[CorruptionTiming, ...]
    medmnistc_variants_per_s: float | None  # MedMNIST-C 0.1.0 per-image loop; None when not installed
    speedup_vs_medmnistc: float | None  # batched over the MedMNIST-C loop


def _to_uint8(x: np.ndarray) -> np.ndarray:
    return np.rint(np.clip(x, 0, 1) * 255).astype(np.uint8)


def _reference_variant(image: Image.Image, name: str, severity: int, rng: np.random.Generator) -> np.ndarray:
    """One grey film under one corruption, the tuned per-image PIL / numpy / scipy way (same definitions)."""
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


MedmnistcVariant = Callable[[Image.Image, int], np.ndarray]

# Our chest_xray corruption -> MedMNIST-C class (module, name); gaussian_blur is handled apart.
_MEDMNISTC_CLASSES = {
    "gaussian_noise": ("noise", "GaussianNoise"),
    "shot_noise": ("noise", "ShotNoise"),
    "impulse_noise": ("noise", "ImpulseNoise"),
    "speckle_noise": ("noise", "SpeckleNoise"),
    "brightness_up": ("enhance", "Brightness"),
    "brightness_down": ("enhance", "Brightness"),
    "contrast_up": ("enhance", "Contrast"),
    "contrast_down": ("enhance", "Contrast"),
    "gamma_up": ("enhance", "GammaCorrection"),
    "gamma_down": ("enhance", "GammaCorrection"),
    "pixelate": ("compression", "Pixelate"),
    "jpeg": ("compression", "JPEGCompression"),
}


def _medmnistc_table() -> dict[str, MedmnistcVariant] | None:
    """MedMNIST-C's per-image ``apply`` for every chest_xray corruption, built once; None when not installed.

    Each entry maps (PIL mode "L" film, severity 1..5) to the package's uint8 output. The classes get our
    chest_xray severity parameters, so both sides compute the same corruption strengths.
    """
    try:
        import torchvision.transforms.functional as TF
        from medmnistc.corruptions import compression, enhance, noise
    except ImportError:
        return None
    modules = {"noise": noise, "enhance": enhance, "compression": compression}
    table: dict[str, MedmnistcVariant] = {}
    for name in suite(MODALITY):
        parameters = list(corruption(MODALITY, name).parameters)
        if name == "gaussian_blur":
            # medmnistc.corruptions.filter needs wand (ImageMagick) to import; this is its
            # GaussianBlur.apply, with our kernel size for our sigma (scaled to the film as ours is).
            def blur(image: Image.Image, severity: int, sigmas=parameters) -> np.ndarray:
                sigma = sigmas[severity - 1] * min(image.size) / REFERENCE_SIDE
                k = 2 * max(1, math.ceil(3 * sigma)) + 1
                return np.array(TF.gaussian_blur(image, kernel_size=k)).astype(np.uint8)

            table[name] = blur
            continue
        module, class_name = _MEDMNISTC_CLASSES[name]
        obj = getattr(modules[module], class_name)(severity_params=parameters)
        # ImpulseNoise.apply reads self.rng (skimage's random_noise generator), which BaseCorruption
        # never sets: MedMNIST-C's DatasetManager assigns it after construction, so we do the same.
        obj.rng = np.random.default_rng(0)
        table[name] = _one_based(obj)
    return table


def _one_based(obj) -> MedmnistcVariant:
    """A MedMNIST-C corruption object called with our severity 1..5 (its ``apply`` takes a 0-based index)."""

    def variant(image: Image.Image, severity: int) -> np.ndarray:
        return obj.apply(image, severity=severity - 1)

    return variant


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
    """Time the suite three ways on ``images`` synthetic films; print and return the figures.

    ``torch_threads`` defaults to 1 so the ratios compare one core with one core (PIL, numpy and
    scipy run single-threaded here). Costs paid once per process (the Poisson alias tables) are
    paid in a warm-up call before timing, as stage 1 pays them once for the whole data set.
    MedMNIST-C's noise classes draw from numpy's global generator: it is seeded once before timing
    and restored afterwards.
    """
    medmnistc = _medmnistc_table()
    if medmnistc is None:
        print(
            f"medmnistc not installed: `{MEDMNISTC_INSTALL}` adds the published-reference column",
            file=sys.stderr,
        )
    previous_threads = torch.get_num_threads()
    previous_numpy_state = np.random.get_state()
    torch.set_num_threads(torch_threads)
    try:
        batch = scenes(MODALITY, images, size, seed=7)
        ids = [f"bench{i}" for i in range(images)]
        grey = [Image.fromarray(image[0].numpy()) for image in batch]
        rng = np.random.default_rng(0)
        np.random.seed(0)
        names = suite(MODALITY)
        for name in names:  # warm-up: allocator, kernels, one-time tables
            apply_severities(batch[:2], MODALITY, name, SEVERITIES, ids[:2])
            if medmnistc is not None:
                medmnistc[name](grey[0], 1)
        best_reference = {(n, s): float("inf") for n in names for s in SEVERITIES}
        best_medmnistc = dict(best_reference)
        best_batched = dict(best_reference)
        best_all = dict.fromkeys(names, float("inf"))
        for _ in range(repeats):
            for name in names:
                for severity in SEVERITIES:
                    seconds = _cpu_seconds(
                        lambda n=name, s=severity: [_reference_variant(g, n, s, rng) for g in grey]
                    )
                    best_reference[name, severity] = min(best_reference[name, severity], seconds)
                    if medmnistc is not None:
                        seconds = _cpu_seconds(lambda f=medmnistc[name], s=severity: [f(g, s) for g in grey])
                        best_medmnistc[name, severity] = min(best_medmnistc[name, severity], seconds)
                    seconds = _cpu_seconds(lambda n=name, s=severity: apply(batch, MODALITY, n, s, ids))
                    best_batched[name, severity] = min(best_batched[name, severity], seconds)
                seconds = _cpu_seconds(lambda n=name: apply_severities(batch, MODALITY, n, SEVERITIES, ids))
                best_all[name] = min(best_all[name], seconds)
    finally:
        torch.set_num_threads(previous_threads)
        np.random.set_state(previous_numpy_state)

    per_image_us = 1e6 / images
    timings = tuple(
        CorruptionTiming(
            name=name,
            reference_us=tuple(best_reference[name, s] * per_image_us for s in SEVERITIES),
            batched_us=tuple(best_batched[name, s] * per_image_us for s in SEVERITIES),
            batched_all_severities_us=best_all[name] * per_image_us,
            speedup=sum(best_reference[name, s] for s in SEVERITIES) / best_all[name],
            medmnistc_us=None
            if medmnistc is None
            else tuple(best_medmnistc[name, s] * per_image_us for s in SEVERITIES),
            speedup_vs_medmnistc=None
            if medmnistc is None
            else sum(best_medmnistc[name, s] for s in SEVERITIES) / best_all[name],
        )
        for name in names
    )
    reference_seconds = sum(best_reference.values())
    medmnistc_seconds = sum(best_medmnistc.values())
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
        medmnistc_variants_per_s=None if medmnistc is None else done / medmnistc_seconds,
        speedup_vs_medmnistc=None if medmnistc is None else medmnistc_seconds / batched_seconds,
    )
    if json_out:
        print(json.dumps(asdict(result)))
    elif markdown_out:
        print(markdown(result))
    else:
        print(text(result))
    return result


def text(result: CorruptionBenchmark) -> str:
    """Three throughputs (images x variants per second) and the batched side's two ratios."""
    missing = f"not installed ({MEDMNISTC_INSTALL})"
    medmnistc_rate = (
        missing if result.medmnistc_variants_per_s is None else f"{result.medmnistc_variants_per_s:9.1f}"
    )
    medmnistc_ratio = "n/a" if result.speedup_vs_medmnistc is None else f"{result.speedup_vs_medmnistc:9.2f}x"
    return (
        f"chest_xray suite, {result.images} images x {result.variants} variants at {result.size} px, "
        f"torch threads {result.torch_threads}, best CPU time of {result.repeats}, images x variants / s:\n"
        f"  batched torch (apply_severities)           {result.batched_variants_per_s:9.1f}\n"
        f"  MedMNIST-C 0.1.0 per-image loop            {medmnistc_rate}\n"
        f"  tuned same-definition per-image loop       {result.reference_variants_per_s:9.1f}\n"
        f"  batched vs MedMNIST-C per-image loop       {medmnistc_ratio}\n"
        f"  batched vs tuned same-definition loop      {result.speedup:9.2f}x"
    )


def markdown(result: CorruptionBenchmark) -> str:
    """The per-corruption table of ``docs/corruptions.md``: CPU microseconds per image and variant."""

    def severities(values: tuple[float, ...] | None) -> str:
        return "n/a" if values is None else " / ".join(f"{v:.0f}" for v in values)

    def ratio(value: float | None, bold: bool = False) -> str:
        if value is None:
            return "n/a"
        return f"**{value:.2f}x**" if bold else f"{value:.1f}x"

    lines = [
        "| corruption | MedMNIST-C loop µs, severity 1..5 | tuned loop µs, severity 1..5 | "
        "batched `apply` µs, severity 1..5 | batched `apply_severities` µs per variant | "
        "ratio vs MedMNIST-C | ratio vs tuned |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in result.per_corruption:
        lines.append(
            f"| {t.name} | {severities(t.medmnistc_us)} | {severities(t.reference_us)} | "
            f"{severities(t.batched_us)} | {t.batched_all_severities_us / len(t.batched_us):.0f} | "
            f"{ratio(t.speedup_vs_medmnistc)} | {ratio(t.speedup)} |"
        )
    medmnistc_suite = (
        "n/a"
        if result.medmnistc_variants_per_s is None
        else f"{1e6 / result.medmnistc_variants_per_s:.0f} per variant"
    )
    lines.append(
        f"| **suite** | {medmnistc_suite} | {1e6 / result.reference_variants_per_s:.0f} per variant | | "
        f"{1e6 / result.batched_variants_per_s:.0f} per variant | "
        f"{ratio(result.speedup_vs_medmnistc, bold=True)} | {ratio(result.speedup, bold=True)} |"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    arguments = sys.argv[1:]
    run(json_out="--json" in arguments, markdown_out="--markdown" in arguments)
