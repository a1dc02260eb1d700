"""The suites read without corrupting anything: ``suite``, ``corruption``, the error type, the severity check.

No torch here. Scoring, reports and the probe stage read the suites' names and families; torch (about 2
CPU s a process) loads only where a corruption is applied (:mod:`crs.corruptions.api`).
"""

from __future__ import annotations

from crs.corruptions.suites import SUITES, Corruption
from crs.spec import MODALITIES, SEVERITIES


class CorruptionError(ValueError):
    """An unknown modality, corruption or severity, or a batch of the wrong shape; the message says the fix."""


def _check_modality(modality: str) -> dict[str, Corruption]:
    if modality not in SUITES:
        raise CorruptionError(f"unknown modality {modality!r}; valid modalities: {', '.join(MODALITIES)}")
    return SUITES[modality]


def suite(modality: str) -> list[str]:
    """Corruption names of ``modality``'s suite, in a fixed order."""
    return list(_check_modality(modality))


def corruption(modality: str, name: str) -> Corruption:
    """The :class:`Corruption` record (operator, severity parameters, source) of one suite entry."""
    corruptions = _check_modality(modality)
    if name not in corruptions:
        raise CorruptionError(
            f"unknown corruption {name!r} for modality {modality!r}; valid corruptions: {', '.join(corruptions)}"
        )
    return corruptions[name]


def _check_severity(severity: object) -> int:
    if isinstance(severity, bool) or not isinstance(severity, int) or not 0 <= severity <= len(SEVERITIES):
        raise CorruptionError(
            f"unknown severity {severity!r}; valid severities: 0 (clean), {', '.join(map(str, SEVERITIES))}"
        )
    return severity
