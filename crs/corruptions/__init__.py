"""Acquisition corruptions per modality: batched torch ops, five severities, seeded per image.

``suite(modality)`` lists a modality's corruptions; ``apply(images, modality, name, severity, ids)``
corrupts a uint8 or float batch on any device; ``SUITE_VERSION`` enters the cache fingerprint.
Definitions, constants and sources are in ``docs/corruptions.md``.

Importing the package does not import torch (about 2 CPU s a process): the suites' names, records and
version are read without it by scoring, reports and the probe stage. ``apply``, ``apply_all``,
``apply_severities`` and ``corruption_grid`` load :mod:`crs.corruptions.api` (torch) on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crs.corruptions.catalog import CorruptionError, corruption, suite
from crs.corruptions.suites import Corruption
from crs.corruptions.version import SUITE_VERSION
from crs.lazy import lazy_exports
from crs.spec import MODALITIES, SEVERITIES

if TYPE_CHECKING:
    from crs.corruptions.api import apply, apply_all, apply_severities
    from crs.corruptions.grid import corruption_grid

_WITH_TORCH = {
    "apply": "crs.corruptions.api",
    "apply_all": "crs.corruptions.api",
    "apply_severities": "crs.corruptions.api",
    "corruption_grid": "crs.corruptions.grid",
}

__all__ = [
    "MODALITIES",
    "SEVERITIES",
    "SUITE_VERSION",
    "Corruption",
    "CorruptionError",
    "apply",
    "apply_all",
    "apply_severities",
    "corruption",
    "corruption_grid",
    "suite",
]


__getattr__, __dir__ = lazy_exports(__name__, _WITH_TORCH, __all__)
