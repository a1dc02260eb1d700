"""Data sets: one loader per public data set plus the built-in synthetic benchmark."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from crs.data.base import (
    MODALITIES,
    SPLITS,
    TASK_KINDS,
    DataError,
    Dataset,
    Task,
    group_split,
    nested_label_fractions,
    safe_join,
)

__all__ = [
    "MODALITIES", "SPLITS", "TASK_KINDS", "DataError", "Dataset", "Task", "group_split",
    "nested_label_fractions", "safe_join", "load_dataset", "DATASET_LOADERS",
]


def _synthetic(root: Path, **options: Any) -> Dataset:
    from crs.data.synthetic import load_synthetic

    return load_synthetic(root, **options)


# name -> loader(root, **options) -> Dataset. Real data-set loaders register here too.
DATASET_LOADERS: dict[str, Callable[..., Dataset]] = {
    "synthetic": _synthetic,
}


def load_dataset(name: str, root: Path | str, **options: Any) -> Dataset:
    """Load a data set by loader name, with a clear error for an unknown name."""
    try:
        loader = DATASET_LOADERS[name]
    except KeyError:
        known = ", ".join(sorted(DATASET_LOADERS))
        raise DataError(f"unknown data set loader {name!r}; known loaders: {known}") from None
    return loader(Path(root), **options)
