"""Agreement in distribution with the ImageNet-C reference (``imagecorruptions``): PSNR, not pixels.

Our operators run with ImageNet-C's own constants on 224 px images (its tuning side, so no
rescaling) and must land within a stated PSNR band of the reference's output for every severity.
Test-only dependency: ``imagecorruptions-imaug``; skipped with the reason when it is missing.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crs.corruptions import ops
from crs.corruptions.scenes import scenes

imagecorruptions = pytest.importorskip(
    "imagecorruptions", reason="pip install imagecorruptions-imaug to compare"
)

SIZE = 224
# (reference name, our operator, ImageNet-C constants for severities 1..5, allowed PSNR gap in dB)
PAIRS = [
    ("gaussian_noise", ops.gaussian_noise, [0.08, 0.12, 0.18, 0.26, 0.38], 0.5),
    ("shot_noise", ops.shot_noise, [60, 25, 12, 5, 3], 0.5),
    ("impulse_noise", ops.impulse_noise, [0.03, 0.06, 0.09, 0.17, 0.27], 0.5),
    ("speckle_noise", ops.speckle_noise, [0.15, 0.2, 0.35, 0.45, 0.6], 0.5),
    ("gaussian_blur", ops.gaussian_blur, [1, 2, 3, 4, 6], 0.5),
    ("defocus_blur", ops.defocus_blur, [(3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5)], 1.0),
    ("motion_blur", ops.motion_blur, [(10, 3), (15, 5), (15, 8), (15, 12), (20, 15)], 2.0),
    ("zoom_blur", ops.zoom_blur, None, 1.0),
    ("pixelate", ops.pixelate, [0.6, 0.5, 0.4, 0.3, 0.25], 1.0),
    ("jpeg_compression", ops.jpeg, [25, 18, 15, 10, 7], 1.0),
]
ZOOMS = [
    tuple(np.arange(1, 1.11, 0.01)),
    tuple(np.arange(1, 1.16, 0.01)),
    tuple(np.arange(1, 1.21, 0.02)),
    tuple(np.arange(1, 1.26, 0.02)),
    tuple(np.arange(1, 1.31, 0.03)),
]


@pytest.fixture(scope="module")
def images() -> torch.Tensor:
    return scenes("dermoscopy", 2, SIZE, seed=3)


def psnr(clean: np.ndarray, corrupted: np.ndarray) -> float:
    mse = np.mean(((clean.astype(np.float64) - corrupted.astype(np.float64)) / 255) ** 2)
    return float(10 * np.log10(1 / mse))


@pytest.mark.slow
@pytest.mark.parametrize("reference_name,operator,constants,tolerance", PAIRS, ids=[p[0] for p in PAIRS])
def test_psnr_matches_imagenet_c(images, reference_name, operator, constants, tolerance):
    np.random.seed(0)  # imagecorruptions draws from numpy's global generator
    constants = ZOOMS if constants is None else constants
    ours_by_severity, reference_by_severity = [], []
    for severity, constant in enumerate(constants, start=1):
        context = ops.Context(
            ids=["r0", "r1"],
            name=reference_name,
            severity=severity,
            height=SIZE,
            width=SIZE,
            device=torch.device("cpu"),
            grayscale=False,
        )
        # the reference truncates to uint8 (floor); quantise ours the same way for a like-for-like PSNR
        ours = (operator(images.float() / 255, constant, context) * 255).floor().to(torch.uint8)
        ours_psnr, reference_psnr = [], []
        for clean, mine in zip(images, ours, strict=True):
            clean_hwc = clean.permute(1, 2, 0).numpy()
            reference = np.asarray(
                imagecorruptions.corrupt(clean_hwc, corruption_name=reference_name, severity=severity)
            )
            reference_psnr.append(psnr(clean_hwc, np.clip(np.round(reference), 0, 255).astype(np.uint8)))
            ours_psnr.append(psnr(clean_hwc, mine.permute(1, 2, 0).numpy()))
        ours_by_severity.append(np.mean(ours_psnr))
        reference_by_severity.append(np.mean(reference_psnr))
    gaps = np.abs(np.array(ours_by_severity) - np.array(reference_by_severity))
    assert gaps.max() <= tolerance, (
        f"{reference_name}: ours {np.round(ours_by_severity, 2)} vs ImageNet-C {np.round(reference_by_severity, 2)} dB"
    )


@pytest.mark.parametrize(
    "name,factor", [("brightness", 1.4), ("brightness", 0.6), ("contrast", 1.6), ("contrast", 0.4)]
)
def test_photometric_matches_pil_image_enhance(images, name, factor):
    # MedMNIST-C's brightness and contrast are PIL ImageEnhance; ours must agree to one grey level
    from PIL import Image, ImageEnhance

    context = ops.Context(
        ids=["p"], name=name, severity=1, height=SIZE, width=SIZE, device=torch.device("cpu"), grayscale=False
    )
    operator = ops.brightness if name == "brightness" else ops.contrast
    enhancer = ImageEnhance.Brightness if name == "brightness" else ImageEnhance.Contrast
    for clean in images:
        reference = np.asarray(enhancer(Image.fromarray(clean.permute(1, 2, 0).numpy())).enhance(factor))
        ours = (
            (operator(clean[None].float() / 255, factor, context)[0] * 255).round().permute(1, 2, 0).numpy()
        )
        assert np.abs(ours - reference.astype(np.float64)).max() <= 1.0 + 1e-6


def test_pixelate_matches_pil_box_nearest_pixel_for_pixel(images):
    from PIL import Image

    context = ops.Context(
        ids=["p"],
        name="pixelate",
        severity=1,
        height=SIZE,
        width=SIZE,
        device=torch.device("cpu"),
        grayscale=False,
    )
    for factor in (0.6, 0.3):
        clean = images[0]
        pil = Image.fromarray(clean.permute(1, 2, 0).numpy())
        small = pil.resize((int(SIZE * factor), int(SIZE * factor)), Image.Resampling.BOX)
        reference = np.asarray(small.resize((SIZE, SIZE), Image.Resampling.NEAREST)).astype(np.float64)
        ours = (
            (ops.pixelate(clean[None].float() / 255, factor, context)[0] * 255)
            .round()
            .permute(1, 2, 0)
            .numpy()
        )
        # PIL rounds its fixed-point BOX coefficients: most cells agree, some differ by 1, a few edge cells by up to 4
        difference = np.abs(ours - reference)
        assert difference.mean() < 0.5 and difference.max() <= 4.0, (difference.mean(), difference.max())
