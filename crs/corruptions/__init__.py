"""Acquisition corruptions per modality: batched torch ops, five severities, seeded per image.

``suite(modality)`` lists a modality's corruptions; ``apply(images, modality, name, severity, ids)``
corrupts a uint8 or float batch on any device; ``SUITE_VERSION`` enters the cache fingerprint.
Definitions, constants and sources are in ``docs/corruptions.md``.
"""

from crs.corruptions.api import CorruptionError, apply, apply_all, apply_severities, corruption, suite
from crs.corruptions.grid import corruption_grid
from crs.corruptions.suites import Corruption
from crs.corruptions.version import SUITE_VERSION
from crs.spec import MODALITIES, SEVERITIES

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
