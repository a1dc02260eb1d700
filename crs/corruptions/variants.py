"""A spec's corruption choice -> the (corruption, severity) variants to extract, checked against the suite."""

from __future__ import annotations

from collections.abc import Sequence

from crs.corruptions.catalog import suite


def resolve_variants(modality: str, corruptions: Sequence[str] | str, severities: Sequence[int]) -> list[tuple[str, int]]:
    """The (corruption, severity) pairs to extract for a modality, checked against its suite."""
    if corruptions == "none":
        return []
    available = list(suite(modality))
    if corruptions == "all":
        names = available
    else:
        unknown = [c for c in corruptions if c not in available]
        if unknown:
            raise ValueError(f"corruptions {unknown} are not in the {modality} suite; available: {available}")
        names = list(corruptions)
    return [(name, int(severity)) for name in names for severity in severities]


