"""The corruption suites: which corruptions each modality gets and their five severity parameters.

Constants come from MedMNIST-C (Di Salvo et al., 2024; tuned on 224 px MedMNIST+ images of the
matching data set: dermamnist, retinamnist, chestmnist) or ImageNet-C (Hendrycks & Dietterich,
2019; 224 px), re-tuned where noted in ``docs/corruptions.md``. Spatial parameters are in pixels at
the 224 px reference side and scale linearly with the batch's side, so severity 3 at 512 px blurs
the same fraction of the anatomy as at 224 px.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

GRAYSCALE_MODALITIES = frozenset({"chest_xray"})


@dataclass(frozen=True)
class Corruption:
    """One corruption: its operator, the parameter at each severity 1..5, and where it comes from.

    The operator is named (a function of :mod:`crs.corruptions.ops`) and looked up on first use, so
    reading the suites does not import torch.
    """

    name: str
    family: str
    operator_name: str
    parameters: tuple
    parameter_meaning: str
    source: str
    spatial: bool = False

    @property
    def operator(self) -> Callable:
        """The batched torch operator (imports :mod:`crs.corruptions.ops`, hence torch, the first time)."""
        return getattr(importlib.import_module("crs.corruptions.ops"), self.operator_name)

    def parameter(self, severity: int):
        return self.parameters[severity - 1]


def _zooms(stop: float, step: float) -> tuple[float, ...]:
    count = int(round((stop - 1) / step)) + 1
    return tuple(round(1 + i * step, 4) for i in range(count))


def _c(name, family, operator_name, parameters, meaning, source, spatial=False) -> Corruption:
    return Corruption(name, family, operator_name, tuple(parameters), meaning, source, spatial)


IMAGENET_C = "ImageNet-C"
MEDMNIST_C = "MedMNIST-C"

DERMOSCOPY = (
    _c(
        "gaussian_noise",
        "noise",
        "gaussian_noise",
        [0.04, 0.08, 0.12, 0.18, 0.26],
        "sigma",
        f"{MEDMNIST_C} dermamnist",
    ),
    _c(
        "shot_noise",
        "noise",
        "shot_noise",
        [60, 25, 18, 10, 5],
        "photons at white",
        f"{MEDMNIST_C} dermamnist",
    ),
    _c(
        "impulse_noise",
        "noise",
        "impulse_noise",
        [0.01, 0.03, 0.06, 0.09, 0.17],
        "fraction of pixels",
        f"{MEDMNIST_C} dermamnist",
    ),
    _c(
        "speckle_noise",
        "noise",
        "speckle_noise",
        [0.05, 0.15, 0.2, 0.35, 0.45],
        "sigma",
        f"{MEDMNIST_C} dermamnist",
    ),
    _c(
        "defocus_blur",
        "blur",
        "defocus_blur",
        [(4, 0.1), (5, 0.2), (6, 0.3), (7, 0.4), (8, 0.5)],
        "(disk radius px, alias sigma px) at 224",
        f"{MEDMNIST_C} dermamnist",
        True,
    ),
    _c(
        "motion_blur",
        "blur",
        "motion_blur",
        [(10, 3), (15, 5), (15, 8), (15, 12), (20, 15)],
        "(radius px, sigma px) at 224",
        f"{IMAGENET_C} (MedMNIST-C dermamnist severity 1 had sigma 5, equal to severity 2)",
        True,
    ),
    _c(
        "zoom_blur",
        "blur",
        "zoom_blur",
        [_zooms(1.10, 0.01), _zooms(1.15, 0.01), _zooms(1.20, 0.02), _zooms(1.24, 0.02), _zooms(1.30, 0.03)],
        "zoom factors averaged",
        f"{IMAGENET_C} / {MEDMNIST_C} dermamnist",
    ),
    _c(
        "brightness_up",
        "photometric",
        "brightness",
        [1.1, 1.2, 1.3, 1.4, 1.5],
        "gain",
        f"{MEDMNIST_C} dermamnist",
    ),
    _c(
        "brightness_down",
        "photometric",
        "brightness",
        [0.9, 0.8, 0.7, 0.6, 0.5],
        "gain",
        f"{MEDMNIST_C} dermamnist",
    ),
    _c(
        "contrast_up",
        "photometric",
        "contrast",
        [1.1, 1.2, 1.3, 1.4, 1.6],
        "contrast factor",
        f"{MEDMNIST_C} dermamnist",
    ),
    _c(
        "contrast_down",
        "photometric",
        "contrast",
        [0.8, 0.7, 0.6, 0.5, 0.4],
        "contrast factor",
        f"{MEDMNIST_C} dermamnist",
    ),
    _c(
        "pixelate",
        "digital",
        "pixelate",
        [0.7, 0.5, 0.4, 0.3, 0.25],
        "side fraction kept",
        f"{MEDMNIST_C} dermamnist",
    ),
    _c("jpeg", "digital", "jpeg", [30, 20, 15, 10, 7], "JPEG quality", f"{MEDMNIST_C} dermamnist"),
    _c(
        "black_corners",
        "occlusion",
        "black_corners",
        [1.10, 1.05, 1.00, 0.95, 0.90],
        "field radius / half side",
        f"{MEDMNIST_C} dermamnist black_corner (made monotone)",
    ),
    _c(
        "hair",
        "occlusion",
        "hair",
        [(2, 1.5), (4, 1.5), (8, 2.0), (14, 2.0), (22, 2.5)],
        "(hairs, width px at 224)",
        "crs (DullRazor-style hair model)",
        True,
    ),
    _c(
        "colour_temperature",
        "photometric",
        "colour_temperature",
        [0.04, 0.08, 0.12, 0.18, 0.25],
        "red/blue gain shift",
        "crs",
    ),
)

FUNDUS = (
    _c(
        "gaussian_noise",
        "noise",
        "gaussian_noise",
        [0.04, 0.08, 0.12, 0.16, 0.20],
        "sigma",
        f"{MEDMNIST_C} retinamnist",
    ),
    _c(
        "speckle_noise",
        "noise",
        "speckle_noise",
        [0.10, 0.15, 0.20, 0.25, 0.30],
        "sigma",
        f"{MEDMNIST_C} retinamnist",
    ),
    _c(
        "defocus_blur",
        "blur",
        "defocus_blur",
        [(4, 0.1), (5, 0.2), (6, 0.3), (7, 0.4), (8, 0.5)],
        "(disk radius px, alias sigma px) at 224",
        f"{MEDMNIST_C} retinamnist",
        True,
    ),
    _c(
        "motion_blur",
        "blur",
        "motion_blur",
        [(8, 3), (15, 5), (15, 8), (15, 12), (20, 15)],
        "(radius px, sigma px) at 224",
        f"{MEDMNIST_C} retinamnist, severity 1 sigma 5 -> 3",
        True,
    ),
    _c(
        "brightness_down",
        "photometric",
        "brightness",
        [0.9, 0.8, 0.7, 0.6, 0.5],
        "gain (under-exposure)",
        f"{MEDMNIST_C} retinamnist",
    ),
    _c(
        "contrast_down",
        "photometric",
        "contrast",
        [0.9, 0.8, 0.7, 0.6, 0.4],
        "contrast factor",
        f"{MEDMNIST_C} retinamnist",
    ),
    _c(
        "uneven_illumination",
        "photometric",
        "uneven_illumination",
        [0.2, 0.35, 0.5, 0.65, 0.8],
        "gain fall-off across the field",
        "crs",
    ),
    _c(
        "pixelate",
        "digital",
        "pixelate",
        [0.7, 0.5, 0.4, 0.3, 0.25],
        "side fraction kept",
        f"{MEDMNIST_C} dermamnist (retinamnist 0.8..0.35 was not monotone: 0.5 aligns with the grid)",
    ),
    _c("jpeg", "digital", "jpeg", [30, 25, 20, 10, 5], "JPEG quality", f"{MEDMNIST_C} retinamnist"),
)

CHEST_XRAY = (
    _c(
        "gaussian_noise",
        "noise",
        "gaussian_noise",
        [0.04, 0.08, 0.12, 0.18, 0.26],
        "sigma",
        f"{MEDMNIST_C} chestmnist",
    ),
    _c(
        "shot_noise",
        "noise",
        "shot_noise",
        [60, 25, 18, 10, 5],
        "photons at white",
        f"{MEDMNIST_C} chestmnist",
    ),
    _c(
        "impulse_noise",
        "noise",
        "impulse_noise",
        [0.01, 0.03, 0.06, 0.09, 0.17],
        "fraction of pixels",
        f"{MEDMNIST_C} chestmnist",
    ),
    _c(
        "speckle_noise",
        "noise",
        "speckle_noise",
        [0.05, 0.15, 0.2, 0.35, 0.45],
        "sigma",
        f"{MEDMNIST_C} chestmnist",
    ),
    _c(
        "gaussian_blur",
        "blur",
        "gaussian_blur",
        [1.0, 1.5, 2.0, 3.0, 4.0],
        "sigma px at 224",
        f"{IMAGENET_C} (re-tuned)",
        True,
    ),
    _c(
        "brightness_up",
        "photometric",
        "brightness",
        [1.1, 1.2, 1.3, 1.4, 1.5],
        "gain",
        f"{MEDMNIST_C} chestmnist",
    ),
    _c(
        "brightness_down",
        "photometric",
        "brightness",
        [0.9, 0.8, 0.7, 0.6, 0.5],
        "gain",
        f"{MEDMNIST_C} chestmnist",
    ),
    _c(
        "contrast_up",
        "photometric",
        "contrast",
        [1.1, 1.2, 1.3, 1.4, 1.6],
        "contrast factor",
        f"{MEDMNIST_C} chestmnist",
    ),
    _c(
        "contrast_down",
        "photometric",
        "contrast",
        [0.9, 0.8, 0.7, 0.6, 0.4],
        "contrast factor",
        f"{MEDMNIST_C} chestmnist",
    ),
    _c(
        "gamma_up",
        "photometric",
        "gamma",
        [1.1, 1.2, 1.3, 1.4, 1.6],
        "gamma exponent",
        f"{MEDMNIST_C} chestmnist gamma_corr_up",
    ),
    _c(
        "gamma_down",
        "photometric",
        "gamma",
        [0.9, 0.8, 0.7, 0.6, 0.4],
        "gamma exponent",
        f"{MEDMNIST_C} chestmnist gamma_corr_down",
    ),
    _c(
        "pixelate",
        "digital",
        "pixelate",
        [0.5, 0.4, 0.3, 0.22, 0.16],
        "side fraction kept",
        f"{IMAGENET_C} / {MEDMNIST_C} chestmnist (re-tuned)",
    ),
    _c("jpeg", "digital", "jpeg", [50, 30, 15, 10, 7], "JPEG quality", f"{MEDMNIST_C} chestmnist"),
)

SUITES: dict[str, dict[str, Corruption]] = {
    "dermoscopy": {c.name: c for c in DERMOSCOPY},
    "fundus": {c.name: c for c in FUNDUS},
    "chest_xray": {c.name: c for c in CHEST_XRAY},
}
