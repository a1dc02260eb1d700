"""Severity calibration: mean PSNR and SSIM of every corruption and severity against the clean image.

The table in ``docs/corruptions.md`` is produced by :func:`calibration_table` on the project's
synthetic images (``crs corruptions calibrate``); it shows that severity degrades monotonically and
lets a reader compare severities across corruptions. PSNR and SSIM are pure functions of arrays.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from crs.corruptions.api import apply, suite
from crs.data.images import load_image
from crs.data.synthetic import load_synthetic
from crs.spec import SEVERITIES


def psnr(clean: torch.Tensor, corrupted: torch.Tensor) -> torch.Tensor:
    """Per-image PSNR in dB of uint8 or [0, 1] float batches (B, C, H, W); inf where identical."""
    scale = 255.0 if clean.dtype == torch.uint8 else 1.0
    mse = ((clean.double() - corrupted.double()) / scale).pow(2).flatten(1).mean(1)
    return 10 * torch.log10(1 / mse)


def ssim(clean: torch.Tensor, corrupted: torch.Tensor, sigma: float = 1.5, window: int = 11) -> torch.Tensor:
    """Per-image SSIM (Wang et al. 2004): Gaussian window 11 / sigma 1.5, K1 0.01, K2 0.03, data range 1.

    Averaged over channels and over valid window positions (no padding), as scikit-image's
    ``structural_similarity(gaussian_weights=True, use_sample_covariance=False)``.
    """
    scale = 255.0 if clean.dtype == torch.uint8 else 1.0
    x, y = clean.double() / scale, corrupted.double() / scale
    t = torch.arange(window, dtype=torch.float64) - window // 2
    g = torch.exp(-(t**2) / (2 * sigma**2))
    g = g / g.sum()
    channels = x.shape[1]

    def blur(z: torch.Tensor) -> torch.Tensor:
        z = F.conv2d(z, g.view(1, 1, 1, -1).expand(channels, 1, 1, window), groups=channels)
        return F.conv2d(z, g.view(1, 1, -1, 1).expand(channels, 1, window, 1), groups=channels)

    c1, c2 = 0.01**2, 0.03**2
    mu_x, mu_y = blur(x), blur(y)
    var_x = blur(x * x) - mu_x**2
    var_y = blur(y * y) - mu_y**2
    cov = blur(x * y) - mu_x * mu_y
    index = ((2 * mu_x * mu_y + c1) * (2 * cov + c2)) / ((mu_x**2 + mu_y**2 + c1) * (var_x + var_y + c2))
    return index.flatten(1).mean(1)


@dataclass(frozen=True)
class CalibrationRow:
    """Mean PSNR (dB) and SSIM over the images for one corruption at one severity."""

    modality: str
    corruption: str
    severity: int
    psnr: float
    ssim: float


def calibration_table(images: torch.Tensor, modality: str, ids: Sequence[object]) -> list[CalibrationRow]:
    """PSNR and SSIM of every corruption x severity of ``modality`` on a uint8 batch."""
    rows = []
    for name in suite(modality):
        for severity in SEVERITIES:
            corrupted = apply(images, modality, name, severity, ids)
            rows.append(
                CalibrationRow(
                    modality,
                    name,
                    severity,
                    float(psnr(images, corrupted).clamp(max=99).mean()),
                    float(ssim(images, corrupted).mean()),
                )
            )
    return rows


def synthetic_images(modality: str, count: int, size: int, seed: int = 0) -> tuple[torch.Tensor, list[str]]:
    """``count`` images of the project's synthetic ``modality`` at ``size`` px, decoded as stage 1 does."""
    with tempfile.TemporaryDirectory() as root:
        dataset = load_synthetic(Path(root), modality, n_images=count, image_size=size, seed=seed)
        images = torch.stack([load_image(dataset.root / path, size, dataset.fit) for path in dataset.paths])
        return images, [str(i) for i in dataset.ids]


def markdown(rows: Sequence[CalibrationRow]) -> str:
    """One table per modality: a row per corruption, ``PSNR / SSIM`` per severity column."""
    lines: list[str] = []
    for modality in dict.fromkeys(row.modality for row in rows):
        lines += [
            f"**{modality}**",
            "",
            "| corruption | " + " | ".join(f"s{s}" for s in SEVERITIES) + " |",
            "| --- |" + " --- |" * len(SEVERITIES),
        ]
        for name in dict.fromkeys(row.corruption for row in rows if row.modality == modality):
            cells = [
                f"{row.psnr:.1f} / {row.ssim:.3f}"
                for row in rows
                if row.modality == modality and row.corruption == name
            ]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)
