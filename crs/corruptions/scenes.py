"""Small procedural images that look roughly like each modality, for calibration, tests and grids.

They have what the corruptions act on: edges of several sizes, fine texture and mid-range
intensities (a flat or random-pixel image would make blur a no-op or noise meaningless). They are
not the project's synthetic data set and carry no label signal.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from crs.spec import MODALITIES


def _grid(size: int) -> tuple[torch.Tensor, torch.Tensor]:
    t = (torch.arange(size, dtype=torch.float32) + 0.5) / size
    rows, cols = torch.meshgrid(t, t, indexing="ij")
    return rows, cols


def _smooth_noise(size: int, cells: int, generator: torch.Generator) -> torch.Tensor:
    coarse = torch.rand(1, 1, cells, cells, generator=generator)
    return F.interpolate(coarse, size=(size, size), mode="bicubic", align_corners=False)[0, 0]


def _dermoscopy(size: int, g: torch.Generator) -> torch.Tensor:
    yy, xx = _grid(size)
    skin = torch.tensor([0.86, 0.66, 0.56])[:, None, None] * (0.9 + 0.1 * _smooth_noise(size, 6, g))
    cy, cx = 0.5 + 0.1 * (torch.rand(2, generator=g) - 0.5)
    angle = torch.atan2(yy - cy, xx - cx)
    wobble = 1 + 0.15 * torch.sin(3 * angle + 6 * float(torch.rand(1, generator=g)))
    radius = torch.sqrt((yy - cy) ** 2 + (xx - cx) ** 2) / (0.25 * wobble)
    lesion = torch.sigmoid((1 - radius) * 12)
    texture = 0.6 + 0.4 * _smooth_noise(size, max(8, size // 6), g)
    brown = torch.tensor([0.42, 0.25, 0.16])[:, None, None] * texture
    return skin * (1 - lesion) + brown * lesion


def _fundus(size: int, g: torch.Generator) -> torch.Tensor:
    yy, xx = _grid(size)
    radius = torch.sqrt((yy - 0.5) ** 2 + (xx - 0.5) ** 2)
    field = torch.sigmoid((0.46 - radius) * 60)
    retina = torch.tensor([0.78, 0.36, 0.16])[:, None, None] * (0.85 + 0.15 * _smooth_noise(size, 5, g))
    disc_y, disc_x = 0.5, 0.3 + 0.05 * float(torch.rand(1, generator=g))
    disc = torch.exp(-(((yy - disc_y) ** 2 + (xx - disc_x) ** 2) / (2 * 0.05**2)))
    vessels = torch.zeros(size, size)
    for k in range(6):
        phase = 2 * math.pi * k / 6 + float(torch.rand(1, generator=g))
        path = disc_y + 0.3 * (xx - disc_x) * math.tan(phase % 1.2 - 0.6) + 0.03 * torch.sin(9 * xx + phase)
        vessels = torch.maximum(
            vessels, torch.exp(-((yy - path) ** 2) / (2 * (0.006 + 0.002 * (k % 3)) ** 2))
        )
    image = retina * (1 - 0.45 * vessels) + disc * torch.tensor([0.25, 0.35, 0.3])[:, None, None]
    return image.clamp(0, 1) * field


def _chest_xray(size: int, g: torch.Generator) -> torch.Tensor:
    yy, xx = _grid(size)
    body = 0.55 + 0.1 * _smooth_noise(size, 4, g)
    lungs = torch.zeros(size, size)
    for centre_x in (0.32, 0.68):
        ellipse = ((xx - centre_x) / 0.15) ** 2 + ((yy - 0.5) / 0.3) ** 2
        lungs = torch.maximum(lungs, torch.sigmoid((1 - ellipse) * 8))
    ribs = 0.5 + 0.5 * torch.sin(2 * math.pi * (yy * 9 + 0.6 * (xx - 0.5) ** 2 * 8))
    heart = torch.sigmoid((1 - (((xx - 0.55) / 0.12) ** 2 + ((yy - 0.62) / 0.14) ** 2)) * 6)
    texture = 0.05 * _smooth_noise(size, max(8, size // 4), g)
    grey = body - 0.35 * lungs + 0.08 * lungs * ribs + 0.25 * heart + texture
    return grey.clamp(0, 1).expand(3, size, size)


_SCENES = {"dermoscopy": _dermoscopy, "fundus": _fundus, "chest_xray": _chest_xray}


def scenes(modality: str, count: int, size: int, seed: int = 0) -> torch.Tensor:
    """``count`` uint8 images (count, 3, size, size) resembling ``modality``; deterministic in ``seed``."""
    if modality not in _SCENES:
        raise ValueError(f"unknown modality {modality!r}; valid modalities: {', '.join(MODALITIES)}")
    images = []
    for index in range(count):
        generator = torch.Generator().manual_seed(seed * 100_003 + index)
        images.append(_SCENES[modality](size, generator))
    return (torch.stack(images).clamp(0, 1) * 255).round().to(torch.uint8)
