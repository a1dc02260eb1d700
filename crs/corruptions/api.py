"""The public entry points: ``suite(modality)`` and ``apply(images, modality, name, severity, ids)``."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from crs.corruptions.ops import Context
from crs.corruptions.suites import GRAYSCALE_MODALITIES, MODALITIES, SEVERITIES, SUITES, Corruption


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


def _check_images(images: object, ids: Sequence[object]) -> torch.Tensor:
    if not isinstance(images, torch.Tensor) or images.ndim != 4 or images.shape[1] != 3:
        shape = tuple(images.shape) if isinstance(images, torch.Tensor) else type(images).__name__
        raise CorruptionError(f"images must be a tensor of shape (B, 3, H, W), got {shape}")
    if images.dtype != torch.uint8 and not images.is_floating_point():
        raise CorruptionError(f"images must be uint8 or float in [0, 1], got dtype {images.dtype}")
    if len(ids) != images.shape[0]:
        raise CorruptionError(
            f"ids has {len(ids)} entries for a batch of {images.shape[0]} images; pass one id per image"
        )
    return images


def _channels_equal(images: torch.Tensor) -> bool:
    return bool(torch.equal(images[:, 0], images[:, 1]) and torch.equal(images[:, 1], images[:, 2]))


def apply(
    images: torch.Tensor,
    modality: str,
    name: str,
    severity: int,
    ids: Sequence[object],
) -> torch.Tensor:
    """Corrupt a batch: ``images`` uint8 (0..255) or float (0..1), (B, 3, H, W), on any device.

    Returns a new tensor of the same shape, dtype and device. Severity 0 returns an unchanged copy.
    Each image's random draws are seeded by (its id, ``name``, ``severity``), so a variant does
    not depend on the batch it is computed in. Ids are compared as strings (``7`` and ``"7"`` are
    the same image).
    """
    spec = corruption(modality, name)
    severity = _check_severity(severity)
    ids = list(ids)
    images = _check_images(images, ids)
    if severity == 0 or images.shape[0] == 0:
        return images.clone()
    context = Context(
        ids=[str(i) for i in ids],
        name=name,
        severity=severity,
        height=images.shape[-2],
        width=images.shape[-1],
        device=images.device,
        grayscale=modality in GRAYSCALE_MODALITIES,
    )
    # a grey film replicated in 3 channels: corrupt one channel and replicate (exact, 3x less work)
    grey_film = context.grayscale and _channels_equal(images)
    source = images[:, :1] if grey_film else images
    as_float = source.to(torch.float32)
    if images.dtype == torch.uint8:
        as_float = as_float.div_(255)
    out = spec.operator(as_float, spec.parameter(severity), context).clamp_(0, 1)
    out = (out * 255).round_().to(torch.uint8) if images.dtype == torch.uint8 else out.to(images.dtype)
    return out.expand(-1, 3, -1, -1).contiguous() if grey_film else out.contiguous()


def apply_all(images: torch.Tensor, modality: str, ids: Sequence[object]):
    """Yield ``(name, severity, corrupted batch)`` for every corruption and severity 1..5 of the suite."""
    for name in suite(modality):
        for severity in SEVERITIES:
            yield name, severity, apply(images, modality, name, severity, ids)
